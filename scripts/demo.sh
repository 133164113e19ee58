#!/usr/bin/env bash
# `make demo`: a local Lockstep cluster on loopback, a short sysbench
# workload through it, and the cluster's status. The cluster stays up
# afterwards so you can connect; `target/release/lockstep down` stops it.
set -euo pipefail
cd "$(dirname "$0")/.."

LOCKSTEP=target/release/lockstep
DIR=${LOCKSTEP_HOME:-/tmp/lockstep-demo}
# One node until Lockstep's group channel lands (see README "Status").
NODES=${NODES:-1}
SECONDS_OF_LOAD=${DEMO_SECONDS:-10}

"$LOCKSTEP" down --dir "$DIR" >/dev/null 2>&1 || true
"$LOCKSTEP" up -n "$NODES" --provider lockstep --dir "$DIR"

# The first node's socket, from the state file `lockstep up` wrote.
SOCK=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["nodes"][0]["socket"])' "$DIR/cluster.json")
SQL=(mariadb --no-defaults -S "$SOCK" -uroot)

"${SQL[@]}" -e "CREATE DATABASE IF NOT EXISTS sbtest"
before=$("${SQL[@]}" -N -e "SHOW STATUS LIKE 'wsrep_last_committed'" | awk '{print $2}')

SB=(sysbench oltp_read_write --db-driver=mysql --mysql-socket="$SOCK" --mysql-user=root
    --mysql-db=sbtest --tables=2 --table-size=2000 --threads=4)
echo "== sysbench: prepare"
"${SB[@]}" prepare >/dev/null
echo "== sysbench: oltp_read_write, 4 threads, ${SECONDS_OF_LOAD}s"
"${SB[@]}" --time="$SECONDS_OF_LOAD" --report-interval=2 run | grep -E '^\[|transactions:|queries:|95th|ignored errors'

after=$("${SQL[@]}" -N -e "SHOW STATUS LIKE 'wsrep_last_committed'" | awk '{print $2}')
echo "== replicated writesets during the demo: $((after - before)) (wsrep_last_committed $before -> $after)"
"${SQL[@]}" -e "CHECKSUM TABLE sbtest.sbtest1, sbtest.sbtest2"

echo "== cluster status"
"$LOCKSTEP" status --dir "$DIR"
echo
echo "The cluster keeps running. Connect with: mariadb -S $SOCK -uroot"
echo "Stop it with: $LOCKSTEP down --dir $DIR"
