#!/usr/bin/env python3
"""User-space WAN latency emulator for multi-site benchmarks (stdlib only).

Why: this VM's kernel (Firecracker, no modules) has no `netem` qdisc
(`tc qdisc add ... netem` fails: "Specified qdisc kind is unknown"), but
network namespaces and TUN devices work, so we add the latency in user space.

How it works:
  * Site s gets a network namespace <prefix><s> (lswan0, lswan1, ...) with host
    addresses 10.77.<s>.<n>/32 (n = 1..hosts[s]) on `lo`.  Run processes with
    `ip netns exec lswan<s> CMD`; they bind to those addresses.  Traffic between
    hosts of one site stays on `lo` (no delay, not counted).
  * Each namespace gets a TUN device `wan0` (IFF_TUN|IFF_NO_PI, MTU 1500) whose
    fd this process holds, and `10.77.0.0/16 dev wan0 src 10.77.<s>.1`.  The
    local /32s win over that route; all other 10.77.x.y traffic comes to us.
  * The main loop reads IPv4 packets from all TUNs, maps destination 10.77.t.n
    to site t and writes the unchanged packet to site t's TUN once the one-way
    delay has passed (RTT = 2 x delay).  The delay is constant, so one FIFO is
    sorted by due time and keeps per-direction order; we sleep in select()
    until the next due time or a readable TUN (no busy spinning).
  * The TUN has no offload features, so the kernel segments (GSO) and checksums
    packets before we read them; no checksum or MTU fix-ups are needed.

Usage:
  wan-emulator.py up --delay-ms 25 --sites 2 --hosts 2,1 \\
                     [--stats FILE] [--ready FILE] [--prefix lswan]
  wan-emulator.py down [--sites N] [--prefix lswan]
Stats JSON (atomically rewritten every 0.5 s and at exit): {"delay_ms", "links":
{"0->1": {"packets", "bytes", "dropped"}, ...}, "dropped", "unroutable",
"queued", "tun_tx_dropped": {site: kernel drops because we read too slowly}}.
SIGTERM/SIGINT: write final stats, delete the namespaces, exit 0.
"""
import argparse, collections, ctypes, fcntl, json, os, re, select, signal, struct, subprocess, sys, time

CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
IFF_TUN, IFF_NO_PI = 0x0001, 0x1000
TUN = "wan0"
MAX_PKTS, MAX_BYTES = 100_000, 256 << 20  # queue bound per direction
STATS_EVERY = 0.5
READ_BATCH = 256  # max packets read from one TUN per wakeup (fairness)


class Stop(Exception):
    """Raised from the signal handler to leave the main loop."""


class Link:
    """Counters for one direction s->t (qpkts/qbytes: currently queued)."""
    __slots__ = ("packets", "bytes", "dropped", "qpkts", "qbytes")

    def __init__(self):
        self.packets = self.bytes = self.dropped = self.qpkts = self.qbytes = 0


def run(*args, check=True):
    r = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if check and r.returncode:
        sys.exit(f"wan-emulator: `{' '.join(args)}` failed: {r.stderr.strip()}")


def setns(fd):
    """Move this (single-threaded) process into the netns referred to by fd."""
    if hasattr(os, "setns"):  # Python >= 3.12
        os.setns(fd, os.CLONE_NEWNET)
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def write_file(path, text, atomic=False):
    tmp = f"{path}.tmp{os.getpid()}" if atomic else path
    with open(tmp, "w") as f:
        f.write(text)
    if atomic:
        os.replace(tmp, path)


def del_ns(name):
    if os.path.exists(f"/run/netns/{name}"):
        run("ip", "netns", "del", name, check=False)


def setup_site(s, nhosts, prefix, home_fd):
    """Create namespace + TUN for site s; return (tun fd, its /proc/net/dev fd)."""
    name = f"{prefix}{s}"
    del_ns(name)  # stale one from a crashed run
    run("ip", "netns", "add", name)
    run("ip", "-n", name, "link", "set", "lo", "up")
    for n in range(1, nhosts + 1):
        run("ip", "-n", name, "addr", "add", f"10.77.{s}.{n}/32", "dev", "lo")
    ns_fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
    setns(ns_fd)
    try:  # everything created/opened here belongs to the site namespace
        tun = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
        fcntl.ioctl(tun, TUNSETIFF, struct.pack("16sH22x", TUN.encode(), IFF_TUN | IFF_NO_PI))
        # /proc/sys/net and /proc/self/net resolve to the *current* netns.
        for conf in ("all", "default", TUN):
            write_file(f"/proc/sys/net/ipv4/conf/{conf}/rp_filter", "0")
            write_file(f"/proc/sys/net/ipv4/conf/{conf}/accept_local", "1")
        write_file("/proc/sys/net/ipv4/ip_forward", "0")  # never bounce foreign dsts back
        try:  # no IPv6 chatter (router solicitations, ...) on the TUN
            write_file(f"/proc/sys/net/ipv6/conf/{TUN}/disable_ipv6", "1")
        except OSError:
            pass
        devstats = os.open("/proc/self/net/dev", os.O_RDONLY)
    finally:
        setns(home_fd)
        os.close(ns_fd)
    # Long txqueue: absorb bursts while we are busy instead of dropping.
    run("ip", "-n", name, "link", "set", TUN, "mtu", "1500", "txqueuelen", "10000", "up")
    run("ip", "-n", name, "route", "add", "10.77.0.0/16", "dev", TUN, "src", f"10.77.{s}.1")
    return tun, devstats


def tun_tx_dropped(devstats_fd):
    """TX drops of wan0 = packets the kernel dropped because we read too slowly."""
    for line in os.pread(devstats_fd, 1 << 16, 0).decode().splitlines():
        if line.strip().startswith(TUN + ":"):
            return int(line.split(":", 1)[1].split()[11])
    return 0


def up(args):
    hosts = [int(h) for h in args.hosts.split(",")]
    if len(hosts) == 1:
        hosts *= args.sites
    if not 1 <= args.sites <= 254 or len(hosts) != args.sites or not 1 <= min(hosts) <= max(hosts) <= 253:
        sys.exit("wan-emulator: need 1..254 --sites and 1..253 --hosts for each site")
    delay = args.delay_ms / 1000.0
    names = [f"{args.prefix}{s}" for s in range(args.sites)]
    tuns, devstats = [], []
    links = {(s, t): Link() for s in range(args.sites) for t in range(args.sites) if s != t}
    misc = {"unroutable": 0}

    def write_stats():
        if not args.stats:
            return
        st = {"delay_ms": args.delay_ms,
              "links": {f"{s}->{t}": {"packets": l.packets, "bytes": l.bytes, "dropped": l.dropped}
                        for (s, t), l in links.items()},
              "dropped": misc["unroutable"] + sum(l.dropped for l in links.values()),
              "unroutable": misc["unroutable"],
              "queued": sum(l.qpkts for l in links.values()),
              "tun_tx_dropped": {str(s): tun_tx_dropped(d) for s, d in enumerate(devstats)}}
        write_file(args.stats, json.dumps(st, indent=1) + "\n", atomic=True)

    def on_signal(*_):
        raise Stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if args.ready and os.path.exists(args.ready):
        os.unlink(args.ready)
    home_fd = os.open("/proc/self/ns/net", os.O_RDONLY)
    try:
        for s in range(args.sites):
            tun, dev = setup_site(s, hosts[s], args.prefix, home_fd)
            tuns.append(tun)
            devstats.append(dev)
        # destination address (4 raw bytes) -> site index
        dst_site = {bytes((10, 77, s, n)): s for s in range(args.sites) for n in range(1, hosts[s] + 1)}
        site_of = {fd: s for s, fd in enumerate(tuns)}
        queue = collections.deque()  # (due_time, src_site, dst_site, packet), due-time ordered
        write_stats()
        if args.ready:
            write_file(args.ready, f"{os.getpid()}\n", atomic=True)
        print(f"wan-emulator: {args.sites} sites ({', '.join(names)}), one-way delay "
              f"{args.delay_ms} ms, pid {os.getpid()}", file=sys.stderr, flush=True)
        next_stats = time.monotonic() + STATS_EVERY
        while True:
            now = time.monotonic()
            while queue and queue[0][0] <= now:  # deliver everything that is due
                _, s, t, pkt = queue.popleft()
                link = links[(s, t)]
                link.qpkts -= 1
                link.qbytes -= len(pkt)
                try:
                    os.write(tuns[t], pkt)
                    link.packets += 1
                    link.bytes += len(pkt)
                except OSError:
                    link.dropped += 1
            if now >= next_stats:
                write_stats()
                next_stats = now + STATS_EVERY
            timeout = next_stats - now
            if queue:
                timeout = min(timeout, queue[0][0] - now)
            # select() takes a float timeout (us resolution); poll/epoll round to ms.
            readable, _, _ = select.select(tuns, [], [], max(timeout, 0.0))
            due = time.monotonic() + delay
            for fd in readable:
                s = site_of[fd]
                for _ in range(READ_BATCH):
                    try:
                        pkt = os.read(fd, 65536)
                    except BlockingIOError:
                        break
                    t = dst_site.get(pkt[16:20]) if len(pkt) >= 20 and pkt[0] >> 4 == 4 else None
                    if t is None or t == s:  # not IPv4, unknown site/host, or own site
                        misc["unroutable"] += 1
                        continue
                    link = links[(s, t)]
                    if link.qpkts >= MAX_PKTS or link.qbytes + len(pkt) > MAX_BYTES:
                        link.dropped += 1
                        continue
                    link.qpkts += 1
                    link.qbytes += len(pkt)
                    queue.append((due, s, t, pkt))
    except Stop:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            write_stats()
        finally:
            for fd in tuns + devstats:
                os.close(fd)
            for name in names:
                del_ns(name)
            if args.ready and os.path.exists(args.ready):
                os.unlink(args.ready)
    return 0


def down(args):
    if args.sites is not None:
        names = [f"{args.prefix}{s}" for s in range(args.sites)]
    else:  # every namespace named <prefix><number>
        pat = re.compile(re.escape(args.prefix) + r"\d+")
        names = [n for n in (os.listdir("/run/netns") if os.path.isdir("/run/netns") else [])
                 if pat.fullmatch(n)]
    for name in names:
        del_ns(name)
    return 0


def main():
    p = argparse.ArgumentParser(description="User-space WAN latency emulator (TUN + netns).")
    sub = p.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("up", help="create site namespaces and forward with delay until SIGTERM")
    u.add_argument("--delay-ms", type=float, required=True, help="one-way delay between sites")
    u.add_argument("--sites", type=int, default=2)
    u.add_argument("--hosts", default="1", help="hosts per site, e.g. 2,1 (one value = all sites)")
    u.add_argument("--stats", help="JSON stats file, rewritten every 0.5 s and at exit")
    u.add_argument("--ready", help="file written (with our pid) once set up; removed at exit")
    u.add_argument("--prefix", default="lswan", help="namespace name prefix")
    d = sub.add_parser("down", help="delete namespaces left behind (e.g. after a crash)")
    d.add_argument("--sites", type=int, help="default: all namespaces named <prefix><N>")
    d.add_argument("--prefix", default="lswan")
    args = p.parse_args()
    return up(args) if args.cmd == "up" else down(args)


if __name__ == "__main__":
    sys.exit(main())
