#!/usr/bin/env python3
"""Per-thread CPU and context switches of a cluster's mariadbd processes.

  cpu_threads.py snap PID[,PID...] OUT.json   save every thread's counters
  cpu_threads.py diff A.json B.json TRX       print what each node's threads
                                              (grouped by name) used per
                                              transaction between A and B
  cpu_threads.py idle A.json B.json SECS      print what they used per 10 s
                                              of an idle cluster (CPU from
                                              schedstat, in nanoseconds)

CPU is utime + stime from /proc/PID/task/TID/stat (clock ticks), context
switches are voluntary + involuntary from .../status. Threads are grouped
by node and name: Lockstep names its own (lockstep-net, lockstep-cache,
lockstep-chores, lockstep-accept); the server's and Galera's are all
"mariadbd". A thread that started and ended between the snapshots is not
counted (none does under a steady load).
"""
import collections
import json
import os
import sys

TICKS = os.sysconf("SC_CLK_TCK")


def snap(pids):
    out = {}
    for node, pid in enumerate(pids, 1):
        for tid in os.listdir(f"/proc/{pid}/task"):
            base = f"/proc/{pid}/task/{tid}"
            try:
                comm = open(f"{base}/comm").read().strip()
                stat = open(f"{base}/stat").read()
                fields = stat[stat.rindex(")") + 2:].split()
                cpu = int(fields[11]) + int(fields[12])
                status = dict(
                    line.split(":\t", 1)
                    for line in open(f"{base}/status").read().splitlines()
                    if ":\t" in line
                )
                switches = int(status["voluntary_ctxt_switches"]) + int(
                    status["nonvoluntary_ctxt_switches"]
                )
                # Nanoseconds on the CPU: an idle thread's few ms do not
                # show in clock ticks.
                ns = int(open(f"{base}/schedstat").read().split()[0])
            except (FileNotFoundError, ProcessLookupError):
                continue
            out[f"{node}:{tid}"] = [comm, cpu, switches, ns]
    return out


def diff(a, b, trx):
    groups = collections.defaultdict(lambda: [0, 0, 0])
    for key, (comm, cpu, switches, _) in b.items():
        _, cpu0, switches0, _ = a.get(key, [comm, 0, 0, 0])
        g = groups[(int(key.split(":")[0]), comm)]
        g[0] += cpu - cpu0
        g[1] += switches - switches0
        if cpu != cpu0 or switches != switches0:
            g[2] += 1
    us = 1e6 / TICKS / trx
    lines = ["node  threads            busy  CPU µs/trx  switches/trx"]
    total_cpu = total_switches = 0
    per_node = collections.Counter()
    for (node, comm), (cpu, switches, busy) in sorted(groups.items()):
        total_cpu += cpu
        total_switches += switches
        per_node[node] += cpu
        if cpu * us < 0.05 and switches / trx < 0.005:
            continue  # idle: io_uring workers, the accept thread
        lines.append(f"{node:>4}  {comm:<17} {busy:>5}  {cpu * us:>10.1f}  {switches / trx:>12.2f}")
    for node, cpu in sorted(per_node.items()):
        lines.append(f"{node:>4}  (all)                    {cpu * us:>10.1f}")
    lines.append(f"total                          {total_cpu * us:>10.1f}  {total_switches / trx:>12.2f}")
    return "\n".join(lines)


def idle(a, b, secs):
    groups = collections.defaultdict(lambda: [0, 0])
    for key, (comm, _, switches, ns) in b.items():
        _, _, switches0, ns0 = a.get(key, [comm, 0, 0, 0])
        g = groups[(int(key.split(":")[0]), comm)]
        g[0] += ns - ns0
        g[1] += switches - switches0
    per = 10.0 / secs
    lines = ["node  threads            CPU ms/10 s  switches/10 s"]
    total_ns = total_switches = 0
    for (node, comm), (ns, switches) in sorted(groups.items()):
        total_ns += ns
        total_switches += switches
        if ns == 0 and switches == 0:
            continue
        lines.append(f"{node:>4}  {comm:<17} {ns / 1e6 * per:>12.1f}  {switches * per:>13.0f}")
    lines.append(f"total                   {total_ns / 1e6 * per:>12.1f}  {total_switches * per:>13.0f}")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "snap":
        pids = [int(p) for p in sys.argv[2].split(",")]
        json.dump(snap(pids), open(sys.argv[3], "w"))
    elif len(sys.argv) == 5 and sys.argv[1] == "diff":
        a = json.load(open(sys.argv[2]))
        b = json.load(open(sys.argv[3]))
        trx = int(sys.argv[4])
        if trx <= 0:
            sys.exit("no transaction committed between the snapshots")
        print(diff(a, b, trx))
    elif len(sys.argv) == 5 and sys.argv[1] == "idle":
        a = json.load(open(sys.argv[2]))
        b = json.load(open(sys.argv[3]))
        print(idle(a, b, float(sys.argv[4])))
    else:
        sys.exit(__doc__)
