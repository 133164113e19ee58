//! Listening sockets: IPv4 and IPv6, a deep backlog, explicit V6ONLY.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use socket2::{Domain, Protocol, Socket, Type};

use super::CheckError;

/// clustercheck's port, which HAProxy configurations already use.
pub const DEFAULT_PORT: u16 = 9200;

/// Pending connections the kernel queues for us (capped by somaxconn).
/// HAProxy fleets reconnect in bursts; a short queue turns a burst into
/// SYN retries that look like one-second latency spikes.
const BACKLOG: i32 = 4096;

/// `0.0.0.0:9200` and `[::]:9200`, what clustercheck users expect.
pub fn default_addrs() -> Vec<SocketAddr> {
    vec![
        SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), DEFAULT_PORT),
        SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), DEFAULT_PORT),
    ]
}

/// Parses `ADDR:PORT`, `[V6ADDR]:PORT` or `:PORT` (all addresses).
pub fn parse_listen(s: &str) -> Result<Vec<SocketAddr>, String> {
    if let Some(port) = s.strip_prefix(':') {
        let port: u16 = port
            .parse()
            .map_err(|_| format!("bad port in --listen {s}"))?;
        let mut addrs = default_addrs();
        for a in &mut addrs {
            a.set_port(port);
        }
        return Ok(addrs);
    }
    s.parse::<SocketAddr>()
        .map(|a| vec![a])
        .map_err(|_| format!("--listen {s}: want ADDR:PORT, e.g. 0.0.0.0:9200, [::]:9200 or :9200"))
}

/// Binds every address. An unspecified IPv6 address is dual-stack unless
/// the unspecified IPv4 address with the same port is also requested (then
/// each socket serves its own family). When `tolerate_no_ipv6` is set (the
/// default addresses), a host without IPv6 only gets a warning.
pub fn bind_all(
    addrs: &[SocketAddr],
    tolerate_no_ipv6: bool,
) -> Result<Vec<std::net::TcpListener>, CheckError> {
    let mut out = Vec::new();
    for addr in addrs {
        let v4_twin = addrs
            .iter()
            .any(|a| a.ip() == IpAddr::V4(Ipv4Addr::UNSPECIFIED) && a.port() == addr.port());
        match bind_one(*addr, v4_twin) {
            Ok(l) => out.push(l),
            Err(e) if tolerate_no_ipv6 && addr.is_ipv6() && no_ipv6(&e) => {
                eprintln!("lockstep check: IPv6 unavailable ({e}); listening on IPv4 only");
            }
            Err(source) => {
                return Err(CheckError::Bind {
                    addr: *addr,
                    source,
                })
            }
        }
    }
    Ok(out)
}

fn no_ipv6(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(nix::libc::EAFNOSUPPORT) | Some(nix::libc::EADDRNOTAVAIL)
    )
}

fn bind_one(addr: SocketAddr, v6_only: bool) -> io::Result<std::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    // Restarts must not wait for TIME_WAIT connections of the old process.
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(v6_only || !addr.ip().is_unspecified())?;
    }
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses_parse() {
        assert_eq!(
            parse_listen("127.0.0.1:9201").unwrap(),
            vec!["127.0.0.1:9201".parse().unwrap()]
        );
        assert_eq!(
            parse_listen("[::1]:9201").unwrap(),
            vec!["[::1]:9201".parse().unwrap()]
        );
        let all = parse_listen(":9300").unwrap();
        assert_eq!(all.len(), 2);
        assert!(all
            .iter()
            .all(|a| a.port() == 9300 && a.ip().is_unspecified()));
        assert!(parse_listen("localhost").is_err());
        assert!(parse_listen(":x").is_err());
    }

    #[test]
    fn ipv4_and_ipv6_wildcards_share_a_port() {
        let v4: SocketAddr = "0.0.0.0:0".parse().unwrap();
        let first = bind_all(&[v4], false).unwrap();
        let port = first[0].local_addr().unwrap().port();
        drop(first);
        let addrs = [
            SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port),
            SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port),
        ];
        // This host has IPv6 on loopback (or not): decided independently of
        // the code under test, so the expectation is exact either way.
        let has_ipv6 = std::net::TcpListener::bind("[::1]:0").is_ok();
        let both = bind_all(&addrs, true).unwrap();
        let bound: Vec<SocketAddr> = both.iter().map(|l| l.local_addr().unwrap()).collect();
        let mut want = vec![addrs[0]];
        if has_ipv6 {
            want.push(addrs[1]);
        }
        assert_eq!(bound, want, "IPv6 available: {has_ipv6}");
        // Each socket serves its own family: a v6 client reaches the v6
        // socket, a v4 client the v4 one.
        let v4 = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        assert!(v4.peer_addr().unwrap().is_ipv4());
        if has_ipv6 {
            let v6 = std::net::TcpStream::connect(("::1", port)).unwrap();
            assert!(v6.peer_addr().unwrap().is_ipv6());
            assert_eq!(
                both[1].accept().unwrap().1.ip(),
                IpAddr::V6(Ipv6Addr::LOCALHOST)
            );
        }
        assert!(both[0].accept().unwrap().1.is_ipv4());
    }

    #[test]
    fn without_its_ipv4_twin_the_ipv6_wildcard_is_dual_stack() {
        if std::net::TcpListener::bind("[::1]:0").is_err() {
            // Nothing to test on a host without IPv6: the twin test above
            // pins the IPv4-only behaviour.
            return;
        }
        let v6: SocketAddr = "[::]:0".parse().unwrap();
        let one = bind_all(&[v6], false).unwrap();
        let port = one[0].local_addr().unwrap().port();
        std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        assert!(one[0].accept().is_ok(), "an IPv4 client did not reach [::]");
    }
}
