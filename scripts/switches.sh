#!/usr/bin/env bash
# Who causes the context switches of a loaded cluster: the provider or the
# server, and through which wait (scripts/switches.py).
#
#   scripts/switches.sh <provider> [seconds]   e.g. lockstep, galera, /tmp/lib.so
#
# The cluster and load of scripts/cpu-threads.sh (3 nodes, plain TCP, 4
# appliers, `oltp_write_only` with 8 threads on node1); after 3 s of
# warm-up, `perf record -e sched:sched_switch -g` of every node for
# `seconds` (default 5). Recording every switch slows the run by about a
# fifth, so the total reads lower than cpu-threads.sh's count from /proc:
# compare the shares, and compare providers within one run of this script.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PROVIDER=${1:?usage: scripts/switches.sh <provider> [seconds]}
SECS=${2:-5}
command -v perf >/dev/null || { echo "switches.sh needs perf (apt-get install linux-perf)" >&2; exit 1; }
DIR=$(mktemp -d /tmp/lockstep-switches.XXXXXX)
. "$REPO/scripts/write-load-cluster.sh"
"${SB[@]}" --threads=8 --time=$((SECS + 8)) run >"$DIR/sysbench.txt" &
LOAD=$!
sleep 3
C0=$(commits)
perf record -q -e sched:sched_switch -g -p "$PIDS" -o "$DIR/perf.data" -- sleep "$SECS" 2>"$DIR/perf.err"
C1=$(commits)
wait "$LOAD"
echo "$PROVIDER: $((C1 - C0)) transactions in $SECS s (recorded)"
python3 "$REPO/scripts/switches.py" "$DIR/perf.data" $((C1 - C0)) "$PIDS"
