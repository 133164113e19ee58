#!/usr/bin/env bash
# How long an idle 3-node cluster takes to elect a new leader after
# `kill -9` of its leader (issue 53: the idle beat must not slow it much).
#
#   scripts/idle-failover.sh <provider>   e.g. lockstep, /tmp/lib.so
#
# Starts the cluster with `lockstep up` (plain TCP), leaves it idle for
# 10 s, kills the leader's mariadbd and prints the time until both
# survivors name another leader and say wsrep_ready=ON. Lockstep only:
# Galera has no leader to kill.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PROVIDER=${1:?usage: scripts/idle-failover.sh <provider>}
DIR=$(mktemp -d /tmp/lockstep-idle-failover.XXXXXX)
chmod 755 "$DIR" # mariadbd runs as the unprivileged user `lockstep`
LOCKSTEP="$REPO/target/release/lockstep"
trap '"$LOCKSTEP" down --dir "$DIR/cluster" >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT
"$LOCKSTEP" up --provider "$PROVIDER" --dir "$DIR/cluster" --no-tls >"$DIR/up.log" 2>&1 ||
  { cat "$DIR/up.log" >&2; exit 1; }
sleep 10
status() {
  mysql -N -S "$DIR/cluster/node$1/mysqld.sock" -uroot -e "SHOW STATUS LIKE '$2'" 2>/dev/null |
    awk '{print $2}'
}
leader=$(status 1 wsrep_lockstep_leader)
victim=${leader#node}
pid=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['nodes'][int(sys.argv[2])-1]['pid'])" \
  "$DIR/cluster/cluster.json" "$victim")
survivors=()
for i in 1 2 3; do [[ $i == "$victim" ]] || survivors+=("$i"); done
t0=$(date +%s%N)
kill -9 "$pid"
deadline=$((t0 + 60000000000))
while :; do
  served=1
  for i in "${survivors[@]}"; do
    l=$(status "$i" wsrep_lockstep_leader)
    r=$(status "$i" wsrep_ready)
    [[ -n $l && $l != "$leader" && $r == ON ]] || served=0
  done
  ((served)) && break
  (($(date +%s%N) < deadline)) || { echo "no new leader within 60 s" >&2; exit 1; }
  sleep 0.02
done
t1=$(date +%s%N)
echo "$PROVIDER: $leader killed; $(status "${survivors[0]}" wsrep_lockstep_leader) leads and both survivors serve after $(((t1 - t0) / 1000000)) ms"
