#!/usr/bin/env bash
# `make demo`: a local Lockstep cluster on loopback, a short sysbench
# workload with clients on every node, the conflicts it met by error code,
# a check that every node holds the same data, and the cluster's status.
# The cluster stays up afterwards so you can connect; README's quick start
# shows what to do next, and `lockstep down` stops it.
#
# Environment: LOCKSTEP_HOME (cluster directory, default /tmp/lockstep-demo),
# NODES (3), DEMO_SECONDS (seconds of load, 10), DEMO_THREADS (6).
# Exit status: 0 when the load committed transactions and every node's
# checksums are equal; 1 otherwise, with the reason on stderr.
# tests/demo.rs runs this script through `make demo`, and README's quick start.
set -euo pipefail
cd "$(dirname "$0")/.."

LOCKSTEP=target/release/lockstep
DIR=${LOCKSTEP_HOME:-/tmp/lockstep-demo}
NODES=${NODES:-3}
SECONDS_OF_LOAD=${DEMO_SECONDS:-10}
THREADS=${DEMO_THREADS:-6}

fail() { echo "demo: FAILED: $*" >&2; exit 1; }

# A fresh cluster every time: the previous demo's (running or not) is
# stopped and its files removed. Reusing datadirs of nodes that were not
# shut down in order would, rightly, refuse to bootstrap (grastate.dat).
"$LOCKSTEP" down --dir "$DIR" --purge >/dev/null 2>&1 || true
# The settings we ship: `lockstep up` turns on innodb_snapshot_isolation
# (no lost updates) and mutual TLS between the nodes.
"$LOCKSTEP" up -n "$NODES" --provider lockstep --dir "$DIR"

# Sockets and TCP ports of every node, from the state file `lockstep up` wrote.
node_field() { python3 -c 'import json,sys; print(",".join(str(n[sys.argv[2]]) for n in json.load(open(sys.argv[1]))["nodes"]))' "$DIR/cluster.json" "$1"; }
SOCKETS=$(node_field socket)
SOCK=${SOCKETS%%,*}
PORTS=$(node_field port)
SQL=(mariadb --no-defaults -S "$SOCK" -uroot)
status_var() { "${SQL[@]}" -N -e "SET SESSION wsrep_sync_wait=1; SHOW STATUS LIKE '$1'" | awk '{print $2}'; }

"${SQL[@]}" -e "CREATE DATABASE IF NOT EXISTS sbtest"
before=$(status_var wsrep_last_committed)

# Clients on every node (sysbench spreads its connections over the ports):
# multi-master, so two nodes sometimes write the same row at once. The loser
# gets an error and retries, as an application must (README, "Conflicts and
# retries"): 1213 for a conflict between nodes (certification or a
# brute-force abort), 1020 for a row changed since the transaction's
# snapshot (innodb_snapshot_isolation=ON), 1205 for a lock wait timeout.
RETRIED=1213,1020,1205
SB=(sysbench scripts/demo-oltp.lua --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$PORTS"
    --mysql-user=lockstep --mysql-password=lockstep --mysql-ignore-errors=$RETRIED
    --mysql-db=sbtest --tables=2 --table-size=2000 --threads="$THREADS")
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
echo "== sysbench: prepare"
"${SB[@]}" prepare >"$OUT" 2>&1 || { cat "$OUT" >&2; fail "sysbench prepare"; }
echo "== sysbench: oltp_read_write, $THREADS threads over the nodes on ports $PORTS, ${SECONDS_OF_LOAD}s"
if ! "${SB[@]}" --time="$SECONDS_OF_LOAD" --report-interval=2 run >"$OUT" 2>&1; then
    tail -n 20 "$OUT" >&2
    fail "sysbench stopped on an error it does not retry (above)"
fi
grep -E '^\[|transactions:|queries:|95th|ignored errors' "$OUT"
committed=$(awk '/transactions:/ {print $2; exit}' "$OUT")
[[ ${committed:-0} -gt 0 ]] || fail "the load committed no transaction"

echo "== conflicts the clients retried, by error code"
for code in ${RETRIED//,/ }; do
    case $code in
        1213) what="deadlock: a conflict with a transaction of another node" ;;
        1020) what="record changed since the snapshot (innodb_snapshot_isolation)" ;;
        1205) what="lock wait timeout" ;;
    esac
    n=$(awk -v c="$code" '$1 == "restarts" && $2 == c {s += $3} END {print s + 0}' "$OUT")
    printf '  %s  %6d  %s\n' "$code" "$n" "$what"
done
other=$(awk -v l="$RETRIED" 'BEGIN {split(l, k, ","); for (i in k) known[k[i]] = 1}
    $1 == "restarts" && !($2 in known) {s += $3} END {print s + 0}' "$OUT")
[[ $other -eq 0 ]] || echo "  other  $other"

after=$(status_var wsrep_last_committed)
echo "== replicated writesets during the demo: $((after - before)) (wsrep_last_committed $before -> $after)"
for var in wsrep_local_cert_failures wsrep_local_bf_aborts; do
    total=0
    for sock in ${SOCKETS//,/ }; do
        n=$(mariadb --no-defaults -S "$sock" -uroot -N -e "SHOW GLOBAL STATUS LIKE '$var'" | awk '{print $2}')
        total=$((total + ${n:-0}))
    done
    echo "   $var, all nodes: $total"
done

echo "== CHECKSUM TABLE on every node (causal reads: identical means in sync)"
sums=()
for sock in ${SOCKETS//,/ }; do
    line=$(mariadb --no-defaults -S "$sock" -uroot -N -e \
        "SET SESSION wsrep_sync_wait=1; CHECKSUM TABLE sbtest.sbtest1, sbtest.sbtest2" |
        awk '{printf "%s=%s  ", $1, $2}')
    echo "  $sock  $line"
    sums+=("$line")
done
for s in "${sums[@]}"; do
    [[ $s == "${sums[0]}" ]] || fail "the nodes' checksums differ (above): the nodes diverged"
done
echo "  equal on all $NODES nodes"

echo "== cluster status"
"$LOCKSTEP" status --dir "$DIR"
echo
echo "demo: ok, $committed transactions committed, every node identical"
echo "The cluster keeps running. Connect with: mariadb -S $SOCK -uroot"
echo "Stop it with: $LOCKSTEP down --dir $DIR"
