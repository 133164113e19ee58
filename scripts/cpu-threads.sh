#!/usr/bin/env bash
# CPU and context switches per transaction, per node and per thread name.
#
#   scripts/cpu-threads.sh <provider|floor> [seconds]   e.g. lockstep, galera, /tmp/lib.so
#
# Starts a 3-node cluster with `lockstep up` (plain TCP, 4 appliers, as
# `lockstep bench` does), loads sysbench's 4 x 10 000 rows, runs
# `oltp_write_only` with 8 threads on node1, and after 3 s of warm-up reads
# every thread's CPU time and context switches from /proc twice, `seconds`
# apart (scripts/cpu_threads.py). Transactions are node1's Com_commit over
# the same span. `floor` is the same on Lockstep's cluster with
# `SET GLOBAL wsrep_on=OFF` on node1 before the load: MariaDB alone, no
# replication (the floor of `lockstep bench --floor`). Unlike perf, /proc's
# counters cost the run nothing.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WHAT=${1:?usage: scripts/cpu-threads.sh <provider|floor> [seconds]}
SECS=${2:-10}
PROVIDER=$WHAT
[ "$WHAT" = floor ] && PROVIDER=lockstep
DIR=$(mktemp -d /tmp/lockstep-cpu-threads.XXXXXX)
. "$REPO/scripts/write-load-cluster.sh"
[ "$WHAT" = floor ] && mysql -S "$SOCK" -uroot -e "SET GLOBAL wsrep_on=OFF"
"${SB[@]}" --threads=8 --time=$((SECS + 6)) run >"$DIR/sysbench.txt" &
LOAD=$!
sleep 3
C0=$(commits)
python3 "$REPO/scripts/cpu_threads.py" snap "$PIDS" "$DIR/a.json"
sleep "$SECS"
python3 "$REPO/scripts/cpu_threads.py" snap "$PIDS" "$DIR/b.json"
C1=$(commits)
wait "$LOAD"
echo "$WHAT: $((C1 - C0)) transactions in $SECS s"
python3 "$REPO/scripts/cpu_threads.py" diff "$DIR/a.json" "$DIR/b.json" $((C1 - C0))
