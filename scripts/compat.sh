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
# Tunables (environment): COMPAT_SUITES (default "galera galera_3nodes
# galera_sr wsrep"), MTR_PARALLEL (default 2), MTR_TESTCASE_TIMEOUT (minutes,
# default 4), MTR_EXTRA_ARGS (e.g. --big-test, which adds about an hour).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$REPO/compat-out
SUITES=${COMPAT_SUITES:-galera galera_3nodes galera_sr wsrep}

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
  for suite in $SUITES; do
    started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    echo "compat: $provider $suite (started $started)"
    # mtr.sh exits 1 when a test fails; the run goes on to the next suite.
    MTR_PARALLEL=${MTR_PARALLEL:-2} MTR_TESTCASE_TIMEOUT=${MTR_TESTCASE_TIMEOUT:-4} \
      "$REPO/scripts/mtr.sh" --suite "$suite" "$provider" > "$OUT/$provider/$suite.progress" 2>&1 || true
    # This run's folder, from mtr.sh's closing line (not mtr-out/latest,
    # which another mtr.sh run may have moved meanwhile).
    log=$(sed -n 's|^==== mtr.sh summary (log: \(.*\)/mtr.log) ====$|\1|p' "$OUT/$provider/$suite.progress" | tail -n 1)
    if [[ -z $log ]]; then
      echo "compat: $provider $suite: mtr.sh gave no summary, see $OUT/$provider/$suite.progress" >&2
      continue
    fi
    {
      echo "# suite $suite, provider $provider, started $started, ended $(date -u +%Y-%m-%dT%H:%M:%SZ)"
      grep -m1 '^# provider: ' "$log/mtr.log" || true
      echo "# mtr log: $log/mtr.log"
      cat "$log/summary.txt"
    } > "$OUT/$provider/$suite.txt"
    tail -n 1 "$OUT/$provider/$suite.txt"
  done
}

if [[ $report_only -eq 0 ]]; then
  for p in "${PROVIDERS[@]}"; do run_suites "$p"; done
fi
"$REPO/scripts/compat-report.sh" "$OUT" $SUITES > "$OUT/report.md"
echo "compat: report in $OUT/report.md"
