#!/usr/bin/env python3
"""Classifies `perf script -F comm,ip,sym,dso` samples of mariadbd processes
(scripts/cpu-split.sh): provider threads, server threads inside provider
code, and the server's own work, with the system calls of the last."""
import collections
import re
import sys

PROVIDER_LIBS = ("liblockstep", "libgalera")
FRAME = re.compile(r"\s*[0-9a-f]+ (.*) \((.*)\)\s*$")


def classify(comm, frames, shares, calls):
    if comm.startswith("lockstep"):
        shares["provider thread " + comm] += 1
        return
    dsos = [dso for _, dso in frames]
    user = [d for d in dsos if "kernel" not in d and "libc" not in d
            and "vdso" not in d and d != "[unknown]"]
    in_kernel = bool(dsos) and "kernel" in dsos[0]
    if user and any(lib in user[0] for lib in PROVIDER_LIBS):
        shares["server thread in provider code" + (" (kernel)" if in_kernel else "")] += 1
        return
    if in_kernel:
        call = next((s for s, _ in frames if s.startswith("__x64_sys_")), "no system call")
        calls[call] += 1
        shares["server thread, kernel"] += 1
    elif dsos and "libc" in dsos[0]:
        shares["server thread, libc (callers unknown: no frame pointers)"] += 1
    else:
        shares["server thread, server code"] += 1


def main(path):
    shares, calls = collections.Counter(), collections.Counter()
    comm, frames = None, []
    with open(path, errors="replace") as f:
        for line in f:
            if not line.strip():
                if comm:
                    classify(comm, frames, shares, calls)
                comm, frames = None, []
            elif not line[0].isspace():
                comm, frames = line.split()[0], []
            elif m := FRAME.match(line):
                frames.append((m.group(1), m.group(2)))
    if comm:
        classify(comm, frames, shares, calls)
    total = sum(shares.values()) or 1
    print(f"{total} samples")
    for what, n in shares.most_common():
        print(f"{100 * n / total:6.1f}%  {what}")
    print("server threads' kernel time by system call:")
    for what, n in calls.most_common(10):
        print(f"{100 * n / total:6.1f}%  {what}")


if __name__ == "__main__":
    main(sys.argv[1])
