#!/usr/bin/env bash
# What an idle 3-node cluster costs: CPU and context switches per 10 s,
# per node and per thread name (issue 53, goal: no more than Galera's).
#
#   scripts/cpu-idle.sh <provider> [seconds]   e.g. lockstep, galera, /tmp/lib.so
#
# Starts the cluster of the CPU scripts (scripts/write-load-cluster.sh: 3
# nodes, plain TCP, sysbench's tables loaded), waits 5 s for the load to
# settle, and reads every thread's CPU time (schedstat, nanoseconds) and
# context switches from /proc twice, `seconds` apart, with no client
# connected in between.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PROVIDER=${1:?usage: scripts/cpu-idle.sh <provider> [seconds]}
SECS=${2:-30}
DIR=$(mktemp -d /tmp/lockstep-cpu-idle.XXXXXX)
. "$REPO/scripts/write-load-cluster.sh"
sleep 5
python3 "$REPO/scripts/cpu_threads.py" snap "$PIDS" "$DIR/a.json"
sleep "$SECS"
python3 "$REPO/scripts/cpu_threads.py" snap "$PIDS" "$DIR/b.json"
echo "$PROVIDER: idle for $SECS s"
python3 "$REPO/scripts/cpu_threads.py" idle "$DIR/a.json" "$DIR/b.json" "$SECS"
