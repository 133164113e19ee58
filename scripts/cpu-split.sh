#!/usr/bin/env bash
# Where a replicated transaction's CPU goes: the provider or the server.
#
#   scripts/cpu-split.sh <provider> [seconds]     e.g. lockstep, galera, /tmp/lib.so
#
# Starts a 3-node cluster with `lockstep up` (plain TCP, 4 appliers, as
# `lockstep bench` does), loads sysbench's 4 x 10 000 rows, warms up 3 s,
# then samples every node's mariadbd with `perf record -g` (199 Hz) while
# `oltp_write_only` runs with 8 threads on node1, and classifies each sample
# (scripts/cpu_split.py): a provider thread (Lockstep names its threads
# lockstep-*; Galera's are all "mariadbd"), a server thread inside provider
# code (its innermost frame outside libc and the kernel is the provider's
# library), or the server's own work. perf slows the run: compare shares,
# not TPS. Needs perf (scripts/setup.sh installs linux-perf) and root.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PROVIDER=${1:?usage: scripts/cpu-split.sh <provider> [seconds]}
SECS=${2:-15}
DIR=$(mktemp -d /tmp/lockstep-cpu-split.XXXXXX)
. "$REPO/scripts/write-load-cluster.sh"
"${SB[@]}" --threads=8 --time=3 run >/dev/null
perf record -F 199 -g -p "$PIDS" -o "$DIR/perf.data" -- sleep "$SECS" >/dev/null 2>&1 &
PERF=$!
"${SB[@]}" --threads=8 --time=$((SECS + 1)) run | grep -E "transactions:"
wait "$PERF"
perf script -i "$DIR/perf.data" -F comm,ip,sym,dso 2>/dev/null >"$DIR/perf.txt"
python3 "$REPO/scripts/cpu_split.py" "$DIR/perf.txt"
echo "samples: $DIR/perf.txt"
