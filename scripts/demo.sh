#!/usr/bin/env bash
# `make demo`: a local Lockstep cluster on loopback, a short sysbench
# workload through it, and the cluster's status. The cluster stays up
# afterwards so you can connect; `target/release/lockstep down` stops it.
set -euo pipefail
cd "$(dirname "$0")/.."

LOCKSTEP=target/release/lockstep
DIR=${LOCKSTEP_HOME:-/tmp/lockstep-demo}
NODES=${NODES:-3}
SECONDS_OF_LOAD=${DEMO_SECONDS:-10}

"$LOCKSTEP" down --dir "$DIR" >/dev/null 2>&1 || true
"$LOCKSTEP" up -n "$NODES" --provider lockstep --dir "$DIR"

# Sockets and TCP ports of every node, from the state file `lockstep up` wrote.
node_field() { python3 -c 'import json,sys; print(",".join(str(n[sys.argv[2]]) for n in json.load(open(sys.argv[1]))["nodes"]))' "$DIR/cluster.json" "$1"; }
SOCK=$(node_field socket | cut -d, -f1)
PORTS=$(node_field port)
SQL=(mariadb --no-defaults -S "$SOCK" -uroot)

"${SQL[@]}" -e "CREATE DATABASE IF NOT EXISTS sbtest"
before=$("${SQL[@]}" -N -e "SHOW STATUS LIKE 'wsrep_last_committed'" | awk '{print $2}')

# Clients spread over every node (multi-master); conflicts between nodes
# come back as deadlock errors (1213), which a client retries.
SB=(sysbench oltp_read_write --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$PORTS"
    --mysql-user=lockstep --mysql-password=lockstep --mysql-ignore-errors=1213,1205
    --mysql-db=sbtest --tables=2 --table-size=2000 --threads=6)
echo "== sysbench: prepare"
"${SB[@]}" prepare >/dev/null
echo "== sysbench: oltp_read_write, 6 threads over nodes on ports $PORTS, ${SECONDS_OF_LOAD}s"
"${SB[@]}" --time="$SECONDS_OF_LOAD" --report-interval=2 run | grep -E '^\[|transactions:|queries:|95th|ignored errors'

after=$("${SQL[@]}" -N -e "SET SESSION wsrep_sync_wait=1; SHOW STATUS LIKE 'wsrep_last_committed'" | awk '{print $2}')
echo "== replicated writesets during the demo: $((after - before)) (wsrep_last_committed $before -> $after)"
echo "== CHECKSUM TABLE on every node (causal reads: identical means in sync)"
for sock in $(node_field socket | tr , ' '); do
    printf '%s  ' "$sock"
    mariadb --no-defaults -S "$sock" -uroot -N -e \
        "SET SESSION wsrep_sync_wait=1; CHECKSUM TABLE sbtest.sbtest1, sbtest.sbtest2" | awk '{printf "%s=%s  ", $1, $2}'
    echo
done

echo "== cluster status"
"$LOCKSTEP" status --dir "$DIR"
echo
echo "The cluster keeps running. Connect with: mariadb -S $SOCK -uroot"
echo "Stop it with: $LOCKSTEP down --dir $DIR"
