#!/usr/bin/env bash
# MariaDB's four wsrep regression suites, whole, with each provider, and a
# side-by-side report (issue 14, item 1).
#
#   scripts/compat.sh [PROVIDER ...]      default: galera lockstep
#   scripts/compat.sh --report            only rebuild the report
#
# Each provider runs the suites galera, galera_3nodes, galera_sr and wsrep in
# full as mtr collects them on this (non-debug) server: tests that need a
# debug build or debug_sync are skipped by mtr itself and counted as skips.
# Results per provider and suite go to compat-out/<provider>/<suite>.txt (the
# mtr.sh summary, headed by the library's identity), so one provider can be
# re-run alone and compared with the other's last run. The report,
# compat-out/report.md, has one table per suite with both columns; copy it to
# docs/compat/suites.md when it is the record.
#
# Then the big-test pass: the same suites with mtr's --big-test given twice,
# which runs only the big tests (mtr 10.11 has no --only-big-test): the 92
# that include big_test.inc (the SST and IST methods, IPv6, garbd, recovery,
# many rows). Results in <suite>-big.txt, with their own tables in the
# report, so a difference there shows too.
#
# Tunables (environment): COMPAT_SUITES (default "galera galera_3nodes
# galera_sr wsrep"), COMPAT_BIG (default 1; 0 skips the big-test pass, `only`
# runs it alone),
# MTR_PARALLEL (default 2), MTR_TESTCASE_TIMEOUT (minutes, default 4; 15 in
# the big-test pass), MTR_EXTRA_ARGS.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$REPO/compat-out
SUITES=${COMPAT_SUITES:-galera galera_3nodes galera_sr wsrep}
BIG=${COMPAT_BIG:-1}
# COMPAT_BIG=only: the big-test pass alone (about 20 min per provider here).
NORMAL=1
if [[ $BIG == only ]]; then NORMAL=0; BIG=1; fi

report_only=0
if [[ ${1:-} == --report ]]; then report_only=1; shift; fi
PROVIDERS=("$@")
[[ ${#PROVIDERS[@]} -gt 0 ]] || PROVIDERS=(galera lockstep)

run_suites() {
  local provider=$1 suite started log
  mkdir -p "$OUT/$provider"
  if [[ $provider == lockstep && -z ${LOCKSTEP_PROVIDER:-} ]]; then
    # Freeze the library for the whole run (an hour or more): a rebuild in
    # target/ meanwhile must not change what the later suites measure.
    cp "$REPO/target/release/liblockstep.so" "$OUT/lockstep/liblockstep.so"
    export LOCKSTEP_PROVIDER=$OUT/lockstep/liblockstep.so
    LOCKSTEP_TREE=$(git -C "$REPO" rev-parse --short HEAD)
    [[ -z $(git -C "$REPO" status --porcelain -- crates Cargo.lock) ]] ||
      LOCKSTEP_TREE+=" + uncommitted changes under crates/"
    export LOCKSTEP_TREE
  fi
  if [[ $NORMAL == 1 ]]; then
    for suite in $SUITES; do
      run_suite "$provider" "$suite" "$suite" "" "${MTR_TESTCASE_TIMEOUT:-4}"
    done
  fi
  if [[ $BIG == 1 ]]; then
    for suite in $SUITES; do
      run_suite "$provider" "$suite" "$suite-big" "--big-test --big-test" "${MTR_TESTCASE_TIMEOUT:-15}"
    done
  fi
}

# run_suite PROVIDER SUITE NAME EXTRA_MTR_ARGS TIMEOUT: one mtr.sh run, its
# summary in $OUT/PROVIDER/NAME.txt.
run_suite() {
  local provider=$1 suite=$2 name=$3 extra=$4 timeout=$5 started log
  started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  echo "compat: $provider $name (started $started)"
  # mtr.sh exits 1 when a test fails; the run goes on to the next suite.
  MTR_PARALLEL=${MTR_PARALLEL:-2} MTR_TESTCASE_TIMEOUT=$timeout \
    MTR_EXTRA_ARGS="${MTR_EXTRA_ARGS:-} $extra" \
    "$REPO/scripts/mtr.sh" --suite "$suite" "$provider" > "$OUT/$provider/$name.progress" 2>&1 || true
  # This run's folder, from mtr.sh's closing line (not mtr-out/latest,
  # which another mtr.sh run may have moved meanwhile).
  log=$(sed -n 's|^==== mtr.sh summary (log: \(.*\)/mtr.log) ====$|\1|p' "$OUT/$provider/$name.progress" | tail -n 1)
  if [[ -z $log ]]; then
    echo "compat: $provider $name: mtr.sh gave no summary, see $OUT/$provider/$name.progress" >&2
    return 0
  fi
  {
    echo "# suite $name, provider $provider, started $started, ended $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    grep -m1 '^# provider: ' "$log/mtr.log" || true
    echo "# mtr log: $log/mtr.log"
    cat "$log/summary.txt"
  } > "$OUT/$provider/$name.txt"
  tail -n 1 "$OUT/$provider/$name.txt"
}

if [[ $report_only -eq 0 ]]; then
  for p in "${PROVIDERS[@]}"; do run_suites "$p"; done
fi
NAMES=
if [[ $NORMAL == 1 ]]; then NAMES=$SUITES; fi
if [[ $BIG == 1 ]]; then for s in $SUITES; do NAMES+=" $s-big"; done; fi
# shellcheck disable=SC2086  # word splitting wanted
"$REPO/scripts/compat-report.sh" "$OUT" $NAMES > "$OUT/report.md"
echo "compat: report in $OUT/report.md"
