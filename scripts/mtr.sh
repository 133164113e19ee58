#!/usr/bin/env bash
# Run MariaDB's own regression tests (mtr) against a wsrep provider library.
#
#   scripts/mtr.sh <provider> [TEST|@LISTFILE ...]   e.g. lockstep galera.basic wsrep.variables
#   scripts/mtr.sh --suite <suite> <provider>         a whole suite, e.g. wsrep
#
# <provider>: lockstep (= target/release/liblockstep.so or $LOCKSTEP_PROVIDER),
#             galera   (= /usr/lib/galera/libgalera_smm.so), or a path to a .so.
# With no TEST and no --suite the smoke list scripts/mtr-lists/smoke.txt is run.
#
# Tunables (environment): MTR_PARALLEL (default 2), MTR_TESTCASE_TIMEOUT and
# MTR_SUITE_TIMEOUT (minutes), MTR_WORKDIR (default /tmp/lockstep-mtr),
# MTR_EXTRA_ARGS (appended to the mtr command line, word-split).
#
# Output: progress on stdout, then one PASS/FAIL/SKIP line per test and a final
# line "mtr: N passed, N failed, N skipped". Full log, summary and copies of
# failing tests' logs go to mtr-out/ (gitignored). Exit status 1 if any test
# failed or mtr itself failed.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MTR_USER=lockstep
# The Debian package's tree is used in place and read-only: with --vardir the
# only things mtr writes are under the vardir (mariadb-test gets
# --logdir=<vardir>/log, so .reject files land there too), and no galera/wsrep
# test writes into $MYSQL_TEST_DIR. Running in place also keeps mtr's basedir
# detection (mysql-test -> /usr/share/mysql -> /usr) working; a copy elsewhere
# makes mtr look for charsets under the wrong prefix.
MTR_TREE=${MTR_TREE:-/usr/share/mysql/mysql-test}
WORKROOT=${MTR_WORKDIR:-/tmp/lockstep-mtr}
PARALLEL=${MTR_PARALLEL:-2}
TESTCASE_TIMEOUT=${MTR_TESTCASE_TIMEOUT:-10}   # minutes; galera tests take 2-20 s
SUITE_TIMEOUT=${MTR_SUITE_TIMEOUT:-150}        # minutes; the whole run

die() { echo "mtr.sh: $*" >&2; exit 2; }
usage() { sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }

# ---------------------------------------------------------------- arguments
SUITE=
while [[ $# -gt 0 && $1 == -* ]]; do
  case $1 in
    --suite) [[ $# -ge 2 ]] || usage; SUITE=$2; shift 2 ;;
    --suite=*) SUITE=${1#--suite=}; shift ;;
    -h|--help) usage ;;
    *) die "unknown option $1" ;;
  esac
done
[[ $# -ge 1 ]] || usage
PROVIDER_ARG=$1; shift

case $PROVIDER_ARG in
  lockstep) PROVIDER_SRC=${LOCKSTEP_PROVIDER:-$REPO/target/release/liblockstep.so}; LABEL=lockstep ;;
  galera)   PROVIDER_SRC=/usr/lib/galera/libgalera_smm.so; LABEL=galera ;;
  *)        PROVIDER_SRC=$PROVIDER_ARG
            LABEL=custom-$(basename "$PROVIDER_ARG" .so | tr -c 'A-Za-z0-9_.\n-' _) ;;
esac
[[ -f $PROVIDER_SRC ]] || die "provider library not found: $PROVIDER_SRC"
PROVIDER_SRC=$(readlink -f "$PROVIDER_SRC")

# Test names; @FILE expands to the names in FILE (one per line, " #" comments).
TESTS=()
expand_arg() {
  if [[ $1 == @* ]]; then
    local f=${1#@} line
    [[ -f $f ]] || die "test list not found: $f"
    while IFS= read -r line; do
      # "#" starts a comment only at the start of a line or after a blank:
      # test names such as galera.galera#414 contain it.
      [[ $line =~ ^[[:space:]]*# ]] && continue
      line=${line%%[[:space:]]#*}; line=${line//[[:space:]]/}
      [[ -n $line ]] && TESTS+=("$line")
    done < "$f"
  else
    TESTS+=("$1")
  fi
  return 0
}
for a in "$@"; do expand_arg "$a"; done
if [[ -z $SUITE && ${#TESTS[@]} -eq 0 ]]; then
  # Without names mtr would run its default suites (main & co., hours); the
  # smoke list is the useful default for `make mtr`.
  expand_arg "@$REPO/scripts/mtr-lists/smoke.txt"
fi
[[ -z $SUITE || ${#TESTS[@]} -eq 0 ]] || die "--suite and test names are exclusive"

[[ $(id -u) -eq 0 ]] || die "run as root: it creates the '$MTR_USER' user and runs mtr as that user"
[[ -x $MTR_TREE/mariadb-test-run.pl ]] || die "no mtr at $MTR_TREE (apt-get install mariadb-test)"

# A name mtr cannot find makes it abort before running anything; check names
# against the suite directories up front, report the missing ones as failures
# and still run the rest.
MISSING=()
if [[ ${#TESTS[@]} -gt 0 ]]; then
  kept=()
  for t in "${TESTS[@]}"; do
    s=${t%%.*} n=${t#*.}; n=${n%%,*}                 # suite.test[,combination]
    if [[ $t == *.* && -d $MTR_TREE/suite/$s && ! -f $MTR_TREE/suite/$s/t/$n.test ]]; then
      MISSING+=("$t")
    else
      kept+=("$t")
    fi
  done
  TESTS=("${kept[@]+"${kept[@]}"}")
fi

# ------------------------------------------------- unprivileged user, workdir
# mtr would start as root, but the rsync SST of a trial run failed that way
# and the servers are meant to run unprivileged, so everything runs as a
# system user. The same user name is shared with another harness, so only
# create it when missing.
if ! id -u "$MTR_USER" >/dev/null 2>&1; then
  useradd --system --no-create-home --shell /usr/sbin/nologin "$MTR_USER"
fi

# One directory per provider label, so a lockstep run and a galera run can go
# side by side; a lock keeps two runs from sharing (and wiping) one vardir.
mkdir -p "$WORKROOT"
chown "$MTR_USER": "$WORKROOT"; chmod 0755 "$WORKROOT"
WORK=$WORKROOT/$LABEL
install -d -o "$MTR_USER" -g "$MTR_USER" -m 0755 "$WORK" "$WORK/home" "$WORK/tmp" "$WORK/provider"
exec 9>"$WORK.lock"
flock -n 9 || { echo "mtr.sh: waiting for another run using $WORK" >&2; flock 9; }
VARDIR=$WORK/var

# mtr hands out port ranges through lock files in this machine-wide directory
# (it creates it 0777); one left behind by a root run would starve the user.
if [[ -d /tmp/mysql-unique-ids ]] && ! runuser -u "$MTR_USER" -- test -w /tmp/mysql-unique-ids; then
  chmod 0777 /tmp/mysql-unique-ids
fi

# The library is copied: its build directory may not be traversable by the
# test user, and cargo may rebuild it in place while the tests are running.
PROVIDER=$WORK/provider/$(basename "$PROVIDER_SRC")
PROVIDER_MTIME=$(date -u -r "$PROVIDER_SRC" +%Y-%m-%dT%H:%M:%SZ)
install -o "$MTR_USER" -g "$MTR_USER" -m 0644 "$PROVIDER_SRC" "$PROVIDER"
# Which library was measured: the build in target/ changes while someone
# works on the provider, so the log names the copy's hash and build time and,
# for lockstep, the commit and whether crates/ had uncommitted changes.
PROVIDER_ID="sha256 $(sha256sum "$PROVIDER" | cut -c1-16), built $PROVIDER_MTIME"
if [[ $LABEL == lockstep && -n ${LOCKSTEP_TREE:-} ]]; then
  PROVIDER_ID+=", tree $LOCKSTEP_TREE"     # the caller froze the library and says what it is
elif [[ $LABEL == lockstep ]] && git -C "$REPO" rev-parse --git-dir >/dev/null 2>&1; then
  PROVIDER_ID+=", tree $(git -C "$REPO" rev-parse --short HEAD)"
  [[ -z $(git -C "$REPO" status --porcelain -- crates Cargo.lock 2>/dev/null) ]] ||
    PROVIDER_ID+=" + uncommitted changes under crates/"
fi

as_user() {
  # A clean environment: nothing of root's (MYSQL_*, MTR_*, TMPDIR...) leaks
  # into mtr, and HOME is a writable directory (the user has none).
  runuser -u "$MTR_USER" -- env -i \
    PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin \
    HOME="$WORK/home" USER="$MTR_USER" LOGNAME="$MTR_USER" \
    LANG=C.UTF-8 TMPDIR="$WORK/tmp" WSREP_PROVIDER="$PROVIDER" "$@"
}

# The galera/wsrep suite.pm files run this helper; if it fails, every test of
# those suites is skipped with its message, which is easy to miss in a summary.
# It dlopen()s the library with RTLD_NOW (so every symbol must resolve) and
# requires `const char *wsrep_interface_version` == "26".
# A rejected provider therefore turns the run into an error, not a green
# "0 failed".
PROVIDER_REJECTED=
if ! chk=$(as_user "$MTR_TREE/lib/My/SafeProcess/wsrep_check_version" -p 2>&1); then
  PROVIDER_REJECTED="wsrep_check_version rejects the provider: $chk"
  echo "mtr.sh: WARNING: $PROVIDER_REJECTED; galera/wsrep suite tests will all be skipped" >&2
fi

# ------------------------------------------------------------------ the run
OUTDIR=$REPO/mtr-out
STAMP=$(date +%Y%m%d-%H%M%S)-$LABEL
RUNOUT=$OUTDIR/$STAMP
mkdir -p "$RUNOUT"
LOG=$RUNOUT/mtr.log
SUMMARY=$RUNOUT/summary.txt
ln -sfn "$STAMP" "$OUTDIR/latest"

(( PARALLEL > 2 )) && PARALLEL=2           # 2-core machine; galera tests start 2-3 servers each
(( PARALLEL > $(nproc) )) && PARALLEL=$(nproc)

MTR_ARGS=(
  --vardir="$VARDIR"
  --parallel="$PARALLEL"
  --force                  # keep going after a failure
  --max-test-fail=0        # ... however many fail
  --retry=0                # a flaky pass must not hide a failure
  --testcase-timeout="$TESTCASE_TIMEOUT"
  --suite-timeout="$SUITE_TIMEOUT"
  # no --big-test: those take many minutes each
)
if [[ -n $SUITE ]]; then MTR_ARGS+=(--suite="$SUITE"); fi
# shellcheck disable=SC2206  # word splitting wanted
if [[ -n ${MTR_EXTRA_ARGS:-} ]]; then MTR_ARGS+=($MTR_EXTRA_ARGS); fi

MTR_PID=
cleanup() {
  local rc=$? pids p
  trap - EXIT INT TERM
  # mtr runs in its own session (setsid below): signal that group first, then
  # sweep any server of this run that escaped it (matched by our vardir, so
  # another harness's processes of the same user are left alone).
  if [[ -n $MTR_PID ]] && kill -0 "$MTR_PID" 2>/dev/null; then
    kill -TERM -- "-$MTR_PID" 2>/dev/null || true
    sleep 3
    kill -KILL -- "-$MTR_PID" 2>/dev/null || true
  fi
  pids=$(pgrep -u "$MTR_USER" -f -- "$VARDIR/" || true)
  if [[ -n $pids ]]; then
    for p in $pids; do kill -TERM "$p" 2>/dev/null || true; done
    sleep 3
    for p in $(pgrep -u "$MTR_USER" -f -- "$VARDIR/" || true); do kill -KILL "$p" 2>/dev/null || true; done
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

{
  echo "# mtr.sh $STAMP provider=$PROVIDER_SRC (copied to $PROVIDER)"
  echo "# provider: $PROVIDER_ID"
  echo "# as user $MTR_USER in $MTR_TREE: mariadb-test-run.pl ${MTR_ARGS[*]} ${TESTS[*]-}"
  for t in "${MISSING[@]+"${MISSING[@]}"}"; do echo "# no such test: $t"; done
} | tee "$LOG"

# mtr 10.11 bug seen here with --parallel=2: when a worker reports
# "Warnings generated in error logs during shutdown" (a server failed to
# start or logged errors, i.e. routine for a provider under development) the
# manager schedules that worker twice, sends BYE twice, and dies of SIGPIPE
# writing to the exited worker: the remaining results and the final report are
# lost (exit 141, "Broken pipe"). A no-op Perl SIGPIPE handler in the manager
# turns that write into a harmless EPIPE; unlike SIG_IGN, a handler is reset by
# exec, so mariadbd, SST scripts and clients still get default SIGPIPE.
MTR_LAUNCH='$SIG{PIPE} = sub { }; $0 = "./mariadb-test-run.pl"; do $0; die $@ if $@; exit 1;'

HDR_BYTES=$(stat -c %s "$LOG")
MTR_RC=0
if [[ -n $SUITE || ${#TESTS[@]} -gt 0 ]]; then
  # mtr runs in the background in a session of its own (setsid), so that
  # cleanup() can kill it, its workers and every mariadbd as one process
  # group, and so that `wait` (unlike a foreground pipe) lets the INT/TERM
  # trap run at once. Output goes straight to the log; tail streams it.
  (
    cd "$MTR_TREE"
    exec setsid runuser -u "$MTR_USER" -- env -i \
      PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin \
      HOME="$WORK/home" USER="$MTR_USER" LOGNAME="$MTR_USER" \
      LANG=C.UTF-8 TMPDIR="$WORK/tmp" WSREP_PROVIDER="$PROVIDER" \
      perl -e "$MTR_LAUNCH" -- "${MTR_ARGS[@]}" "${TESTS[@]+"${TESTS[@]}"}" </dev/null
  ) >>"$LOG" 2>&1 &
  MTR_PID=$!
  tail -c +$((HDR_BYTES + 1)) -f --pid="$MTR_PID" "$LOG" &   # the header was shown already
  TAIL_PID=$!
  wait "$MTR_PID" || MTR_RC=$?
  MTR_PID=
  wait "$TAIL_PID" || true
fi

# ---------------------------------------------------------------- summary
# Result lines look like (parallel runs add "wN"):
#   galera.basic                             w1 [ pass ]   2248
#   galera.MW-402 'binlogon'                 w2 [ skipped ]  Requires debug build
# and every failure is followed by " - saving '<vardir>/log/<test>/' to '...'".
awk -v missing="${MISSING[*]-}" '
  function flush_fail() { if (cur != "") { fails[cur] = save; cur = "" } }
  match($0, /\[ (pass|fail|skipped|disabled) \]/) {
    res = substr($0, RSTART + 2, RLENGTH - 4)
    head = substr($0, 1, RSTART - 1); rest = substr($0, RSTART + RLENGTH)
    sub(/^worker\[[0-9]+\] /, "", head); sub(/ +w[0-9]+ *$/, "", head); sub(/ +$/, "", head)
    sub(/^ +/, "", rest)
    if (res == "pass") { passed[++np] = head }
    else if (res == "fail") { nfail++; order[nfail] = head; reason[head] = rest; cur = head; save = "" }
    else { nskip++; print "SKIP " head "  (" (res == "disabled" ? "disabled: " : "") rest ")" }
    next
  }
  /saving .* to \x27/ && cur != "" {
    # parallel workers save to <vardir>/N/log/<test>/ and mtr then moves it
    # to the second path, <vardir>/log/<test>/
    s = $0; sub(/.* to \x27/, "", s); sub(/\x27.*/, "", s); save = s; flush_fail(); next
  }
  # A test that leaves tables, variables, etc. behind fails the
  # check-testcase step; mtr only mentions it at the end and still counts the
  # test as passed. For a provider under test leftovers on a node are a real
  # defect (e.g. a replicated DROP that never arrived), so count them as failed.
  /^Check of testcase failed for: / {
    s = $0; sub(/^Check of testcase failed for: /, "", s)
    n = split(s, names, " "); for (i = 1; i <= n; i++) ctf[names[i]] = 1; next
  }
  END {
    flush_fail()
    for (i = 1; i <= np; i++) {
      t = passed[i]; base = t; sub(/ .*/, "", base)
      if (t in ctf || base in ctf) { nfail++; order[nfail] = t; reason[t] = "check-testcase failed: test left state behind"; fails[t] = "" }
      else { npass++; print "PASS " t }
    }
    for (i = 1; i <= nfail; i++) { t = order[i]; print "FAIL " t (reason[t] != "" ? "  (" reason[t] ")" : "") (fails[t] != "" ? "  log: " fails[t] : "") }
    n = split(missing, m, " ")
    for (i = 1; i <= n; i++) { nfail++; print "FAIL " m[i] "  (no such test)" }
    printf "mtr: %d passed, %d failed, %d skipped\n", npass, nfail, nskip
  }
' "$LOG" > "$SUMMARY"

# The vardir is wiped by the next run: keep what explains each failure next
# to the run log. mtr saves a failing test's datadirs, config and tmp dir in
# <vardir>/log/<test>/ (only text files are copied: the datadirs are large);
# the server error logs stay per worker in <vardir>/N/log/mysqld.M.err, shared
# by all tests of that worker and separated by "CURRENT_TEST: <name>" lines,
# so cut out this test's part. The mismatch diff itself is in mtr.log.
while IFS= read -r line; do
  t=${line#FAIL }; t=${t%%  *}; t=${t%% *}          # name without combination
  dst=$RUNOUT/failed/$t
  mkdir -p "$dst"
  src=${line##*  log: }
  if [[ $line == *"  log: "* && -d $src ]]; then
    (cd "$src" && find . -type f \( -name '*.err' -o -name '*.log' -o -name '*.reject' \
        -o -name '*.out' -o -name '*.txt' -o -name '*.cnf' \) -size -20M \
        -exec cp --parents -t "$dst" {} + ) || true
  fi
  for err in "$VARDIR"/log/mysqld.*.err "$VARDIR"/[0-9]*/log/mysqld.*.err; do
    [[ -f $err ]] || continue
    w=$(basename "$(dirname "$(dirname "$err")")"); [[ $w == var ]] && w=0
    awk -v t="CURRENT_TEST: $t" '/^CURRENT_TEST: /{on = ($0 == t)} on' "$err" \
      > "$dst/w$w-$(basename "$err")"
    [[ -s $dst/w$w-$(basename "$err") ]] || rm -f "$dst/w$w-$(basename "$err")"
  done
  # mysqltest's own log and result diff of this test, named without the suite
  for r in "$VARDIR"/log/"${t#*.}".{log,reject} "$VARDIR"/[0-9]*/log/"${t#*.}".{log,reject}; do
    if [[ -f $r ]]; then cp "$r" "$dst/"; fi
  done
  if [[ $line == *"  log: "* ]]; then
    sed -i "s|  log: $src\$|  log: $dst/|" "$SUMMARY"
  else
    sed -i "/^FAIL $t[ ']/ s|\$|  log: $dst/|" "$SUMMARY"
  fi
done < <(grep '^FAIL ' "$SUMMARY" | grep -v '(no such test)' || true)

FAILED=0
NOTES=()
grep -q '^FAIL ' "$SUMMARY" && FAILED=1
if [[ -n $PROVIDER_REJECTED ]]; then
  NOTES+=("mtr.sh: ERROR: $PROVIDER_REJECTED")
  FAILED=1
elif [[ (-n $SUITE || ${#TESTS[@]} -gt 0) ]] &&
     ! grep -qE '^(Completed: |Too many failed|Only +[0-9]+ +of [0-9]+ completed)' "$LOG"; then
  # No final report: mtr was killed or crashed, so results are incomplete.
  NOTES+=("mtr.sh: ERROR: mariadb-test-run (exit $MTR_RC) ended without its final report; results are incomplete, see $LOG")
  FAILED=1
elif [[ $MTR_RC -ne 0 && $FAILED -eq 0 ]]; then
  # mtr stopped without a failing test to show for it (bad option, suite
  # timeout, mtr crash...).
  NOTES+=("mtr.sh: ERROR: mariadb-test-run exited with status $MTR_RC; see $LOG")
  FAILED=1
fi
if [[ ${#NOTES[@]} -gt 0 ]]; then
  # Notes go above the count line, which stays the last line.
  { head -n -1 "$SUMMARY"; printf '%s\n' "${NOTES[@]}"; tail -n 1 "$SUMMARY"; } > "$SUMMARY.new"
  mv "$SUMMARY.new" "$SUMMARY"
fi

echo
echo "==== mtr.sh summary (log: $LOG) ===="
cat "$SUMMARY"
exit "$FAILED"
