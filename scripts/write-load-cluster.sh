# Sourced by the CPU scripts (cpu-split.sh, cpu-threads.sh, switches.sh): the cluster
# they measure. Expects REPO, PROVIDER and DIR (a fresh directory); starts
# 3 nodes with `lockstep up` (plain TCP, 4 appliers, as `lockstep bench`
# does), stops them when the script exits, loads sysbench's 4 x 10 000
# rows on node1, and leaves SOCK (node1's socket), SB (the
# `oltp_write_only` command line for node1, to which the caller adds the
# threads, time and `run`), PIDS (every node's mariadbd, comma-separated)
# and `commits` (node1's Com_commit now).
chmod 755 "$DIR" # mariadbd runs as the unprivileged user `lockstep`
LOCKSTEP="$REPO/target/release/lockstep"
# The cluster's datadirs take about 650 MB: removed with it (a series of
# measurements once filled the disk). LOCKSTEP_KEEP=1 keeps them.
trap '"$LOCKSTEP" down --dir "$DIR/cluster" >/dev/null 2>&1 || true; [ -n "${LOCKSTEP_KEEP:-}" ] || rm -rf "$DIR"' EXIT
"$LOCKSTEP" up --provider "$PROVIDER" --dir "$DIR/cluster" --no-tls --slave-threads 4 >"$DIR/up.log" 2>&1 ||
  { cat "$DIR/up.log" >&2; exit 1; }
SOCK="$DIR/cluster/node1/mysqld.sock"
SB=(sysbench oltp_write_only --mysql-socket="$SOCK" --mysql-user=root --tables=4
    --table-size=10000 --db-driver=mysql)
mysql -S "$SOCK" -uroot -e "CREATE DATABASE IF NOT EXISTS sbtest"
"${SB[@]}" prepare >/dev/null
PIDS=$(python3 -c "import json,sys; print(','.join(str(n['pid']) for n in json.load(open(sys.argv[1]))['nodes']))" "$DIR/cluster/cluster.json")
commits() { mysql -S "$SOCK" -uroot -N -e "SHOW GLOBAL STATUS LIKE 'Com_commit'" | awk '{print $2}'; }
