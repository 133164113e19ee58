#!/usr/bin/env python3
"""Who causes a cluster's context switches: a `perf record -e
sched:sched_switch -g` of every node, each switch put down to a cause.

  switches.py PERF.DATA TRX PID[,PID...]

Each sample is one thread switched out, with the user stack it left
(frame pointers: the walk may stop at the first frame of a library built
without them, which is why the *innermost* frame is what counts). A
switch is put down to:
- the provider, if the innermost user frame outside libc is in the
  provider's library (Lockstep's or Galera's), or the thread is one of
  Lockstep's own (named lockstep-*);
- the server, if that frame is in mariadbd;
- "libc only" otherwise (a thread preempted on its way out of a system
  call made straight from libc, whose frames stop the walk).
Within each, the cause is the system call (or "preempted" for a wake-up
IPI) and that innermost frame. Numbers are switches per transaction (TRX:
node 1's commits over the record).
"""
import collections
import subprocess
import sys

PROVIDER_DSOS = ("liblockstep", "libgalera", "/work/", "/tmp/")


def samples(data):
    out = subprocess.run(
        ["perf", "script", "-i", data, "-F", "pid,tid,comm,ip,sym,dso"],
        capture_output=True, text=True, check=True).stdout
    for block in out.split("\n\n"):
        lines = [l for l in block.strip().split("\n") if l.strip()]
        if not lines:
            continue
        head = lines[0].split()
        frames = []
        for line in lines[1:]:
            parts = line.strip().split(None, 1)
            if len(parts) == 2:
                sym, _, dso = parts[1].rpartition(" (")
                frames.append((sym, dso.rstrip(")")))
        yield head[0], head[1].split("/")[0], frames


def classify(comm, frames):
    kernel = [s for s, d in frames if d == "[kernel.kallsyms]"]
    user = [(s, d) for s, d in frames
            if d != "[kernel.kallsyms]" and "libc.so" not in d
            and d != "[unknown]"]
    if any("reschedule_ipi" in s or "irqentry_exit" in s for s in kernel):
        call = "preempted"
    else:
        call = next((s.replace("__x64_sys_", "") for s in kernel
                     if s.startswith("__x64_sys_")), "-")
    inner = user[0] if user else None
    if inner and any(p in inner[1] for p in PROVIDER_DSOS) \
            and "mariadbd" not in inner[1]:
        who = "provider"
    elif comm.startswith("lockstep-"):
        who = "provider"
    elif inner and "mariadbd" in inner[1]:
        who = "server"
    else:
        who = "libc only"
    where = inner[0] if inner else "-"
    if where == "[unknown]":
        # A stripped server's static function: name the nearest caller
        # that has a symbol.
        named = next((s for s, _ in user if s != "[unknown]"), None)
        where = f"... in {named}" if named else where
    # A Rust symbol's generic noise, kept short.
    where = where.replace("<impl lockstep::provider::Provider>::", "")
    return who, call, where[:60]


def main():
    data, trx, pids = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
    node = {p: i for i, p in enumerate(pids, 1)}
    by_cause = collections.Counter()
    by_node = collections.Counter()
    for comm, pid, frames in samples(data):
        who, call, where = classify(comm, frames)
        n = node.get(pid, "?")
        thread = "lockstep-*" if comm.startswith("lockstep-") else comm
        by_cause[(n, who, thread, call, where)] += 1
        by_node[(n, who)] += 1
    total = sum(by_node.values())
    print(f"{total} switches over {trx} transactions: {total / trx:.2f} per transaction")
    print("\nnode  who        per trx")
    for who in ("provider", "server", "libc only"):
        for n in range(1, len(pids) + 1):
            print(f"   {n}  {who:10} {by_node[(n, who)] / trx:6.2f}")
        print(f"  all {who:10} {sum(v for (_, w), v in by_node.items() if w == who) / trx:6.2f}")
    print("\nper trx  node who        thread       call         innermost frame")
    for (n, who, thread, call, where), v in by_cause.most_common(40):
        if v / trx < 0.02:
            break
        print(f"{v / trx:7.2f}  {n:>4} {who:10} {thread:12} {call:12} {where}")


if __name__ == "__main__":
    main()
