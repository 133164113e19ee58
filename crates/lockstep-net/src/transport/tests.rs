//! The transport between real sockets on loopback.

use super::table::Table;
use super::*;
use crate::secure::PeerSecurity;
use lockstep_core::group::peer::PROTOCOL_VERSION;
use lockstep_core::wire::lanes::Lane;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{channel, Receiver, Sender};

#[test]
fn the_input_budget_holds_reading_back_until_the_group_catches_up() {
    let budget = InputBudget::default();
    assert!(budget.try_take(INPUT_BUDGET * 2), "alone, any size goes");
    budget.give_back(INPUT_BUDGET * 2);
    assert!(budget.try_take(INPUT_BUDGET - 10));
    assert!(!budget.try_take(100), "one more does not fit");
    assert!(budget.try_take(10), "what still fits goes");
    budget.give_back(INPUT_BUDGET - 10);
    assert!(budget.try_take(100), "fits once the first is handled");
    assert_eq!(budget.in_flight(), 110);
}

fn start(cluster: &str, raft_id: u64) -> (Transport, Receiver<Inbound>) {
    start_with(cluster, raft_id, PeerSecurity::plain())
}

fn start_with(
    cluster: &str,
    raft_id: u64,
    security: PeerSecurity,
) -> (Transport, Receiver<Inbound>) {
    let (tx, rx) = channel();
    let me = Identity {
        cluster: cluster.into(),
        raft_id,
        peer_addr: format!("test-{raft_id}"),
        bind_ip: None,
    };
    let t = Transport::start(
        me,
        "127.0.0.1:0",
        Arc::new(security),
        Arc::new(|_| true),
        sink(tx),
    )
    .unwrap();
    (t, rx)
}

/// A transport and what its sink received.
type Node = (Transport, Receiver<Inbound>);

/// Nodes 1 and 2 of cluster "c", 2 dialed 1, both reported the other
/// up; and 1's address.
fn connected_pair() -> (Node, Node, String) {
    let (a, rx_a) = start("c", 1);
    let (b, rx_b) = start("c", 2);
    let a_addr = a.local_addr().unwrap().to_string();
    b.dial(&a_addr);
    assert_eq!(peer_up(&rx_a), Some(2));
    assert_eq!(peer_up(&rx_b), Some(1));
    ((a, rx_a), (b, rx_b), a_addr)
}

/// Inbound messages into a channel, as the owner's rounds take them.
fn sink(tx: Sender<Inbound>) -> Sink {
    Arc::new(move |ev| tx.send(ev).is_ok())
}

fn peer_up(rx: &Receiver<Inbound>) -> Option<u64> {
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        if let Ok(Inbound::PeerUp { raft_id, .. }) = rx.recv_timeout(Duration::from_millis(50)) {
            return Some(raft_id);
        }
    }
    None
}

#[test]
fn same_cluster_peers_connect_and_exchange_messages() {
    exchange(start("c", 1), start("c", 2));
}

/// Certificates of one CA for `names`, as `PeerSecurity` values.
fn tls_nodes(dir: &std::path::Path, names: &[&str], dynamic: bool) -> Vec<PeerSecurity> {
    let ca = crate::pki::Authority::generate("test CA").unwrap();
    names
        .iter()
        .map(|n| crate::test_security(&ca, dir, n, dynamic))
        .collect()
}

#[test]
fn tls_peers_connect_and_exchange_messages() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = tls_nodes(dir.path(), &["a", "b"], false);
    let b = s.pop().unwrap();
    let a = s.pop().unwrap();
    exchange(start_with("c", 1, a), start_with("c", 2, b));
}

#[test]
fn a_tls_node_and_a_plain_node_refuse_each_other_and_say_why() {
    let dir = tempfile::tempdir().unwrap();
    let tls = tls_nodes(dir.path(), &["a"], false).pop().unwrap();
    let (a, rx_a) = start_with("c", 1, tls);
    let (b, rx_b) = start("c", 2);
    // b dials a (plain into TLS), then a dials b (TLS into plain).
    b.dial(&a.local_addr().unwrap().to_string());
    assert!(eventually(|| a.refused("127.0.0.1")), "a never refused b");
    a.dial(&b.local_addr().unwrap().to_string());
    assert!(eventually(|| b.refused("127.0.0.1")), "b never refused a");
    assert_eq!(peer_up(&rx_a), None);
    assert_eq!(peer_up(&rx_b), None);
}

#[test]
fn idle_connections_from_one_host_are_bounded_and_others_still_get_in() {
    let (a, rx_a) = start("c", 1);
    let addr = a.local_addr().unwrap();
    // Connections that never say a word hold their places...
    let idle: Vec<TcpStream> = (0..MAX_OPENING_PER_HOST)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    assert!(eventually(|| {
        let t = a.ctx.table.lock().unwrap();
        t.opening.values().sum::<usize>() == MAX_OPENING_PER_HOST
    }));
    // ...and the next one from that host is closed at once, unanswered.
    let mut extra = TcpStream::connect(addr).unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let t0 = Instant::now();
    assert_eq!(extra.read(&mut [0u8; 16]).unwrap_or(0), 0);
    assert!(
        t0.elapsed() < HELLO_TIMEOUT,
        "it waited for a hello instead"
    );
    assert!(a.refused("127.0.0.1"), "the refusal was not logged");
    // Once they are gone, a real peer connects.
    drop(idle);
    assert!(eventually(|| a
        .ctx
        .table
        .lock()
        .unwrap()
        .opening
        .is_empty()));
    let (b, rx_b) = start("c", 2);
    b.dial(&addr.to_string());
    assert_eq!(peer_up(&rx_a), Some(2));
    assert_eq!(peer_up(&rx_b), Some(1));
}

#[test]
fn a_first_frame_bigger_than_a_hello_is_not_taken() {
    let (a, rx_a) = start("c", 1);
    let mut s = TcpStream::connect(a.local_addr().unwrap()).unwrap();
    // A well-formed frame, but far bigger than any hello.
    let mut big = Vec::new();
    lockstep_core::wire::frame::encode(1, &[0u8; 20_000], 1 << 20, &mut big).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let _ = s.write_all(&big);
    let mut got = Vec::new();
    let t0 = Instant::now();
    let _ = s.read_to_end(&mut got);
    assert!(t0.elapsed() < HELLO_TIMEOUT, "it kept reading");
    // The acceptor answers only a good hello: not a byte came back.
    assert_eq!(got, b"", "the acceptor said something to a stranger");
    assert_eq!(peer_up(&rx_a), None);
}

#[test]
fn a_peer_the_allowlist_refuses_is_closed_before_anything_is_said() {
    let (tx, rx_a) = channel();
    let me = Identity {
        cluster: "c".into(),
        raft_id: 1,
        peer_addr: "test-1".into(),
        bind_ip: None,
    };
    let deny: Admission = Arc::new(|ip| ip != std::net::IpAddr::from([127, 0, 0, 1]));
    let a = Transport::start(
        me,
        "127.0.0.1:0",
        Arc::new(PeerSecurity::plain()),
        deny,
        sink(tx),
    )
    .unwrap();
    let mut s = TcpStream::connect(a.local_addr().unwrap()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let hello = PeerMsg::Hello {
        version: PROTOCOL_VERSION,
        cluster: "c".into(),
        raft_id: 2,
        peer_addr: "test-2".into(),
        min_version: PROTOCOL_VERSION,
    };
    let _ = s.write_all(&hello.to_frame().unwrap());
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    assert_eq!(got, b"", "a refused peer was told something");
    assert!(eventually(|| a.refused("127.0.0.1")), "not logged");
    assert_eq!(peer_up(&rx_a), None);
}

#[test]
fn socket_dynamic_accepts_a_plain_peer_too() {
    let dir = tempfile::tempdir().unwrap();
    let tls = tls_nodes(dir.path(), &["a"], true).pop().unwrap();
    let (a, rx_a) = start_with("c", 1, tls);
    let (b, rx_b) = start("c", 2);
    b.dial(&a.local_addr().unwrap().to_string());
    assert_eq!(peer_up(&rx_a), Some(2));
    assert_eq!(peer_up(&rx_b), Some(1));
}

fn exchange((a, rx_a): (Transport, Receiver<Inbound>), (b, rx_b): (Transport, Receiver<Inbound>)) {
    b.dial(&a.local_addr().unwrap().to_string());
    assert_eq!(peer_up(&rx_a), Some(2));
    assert_eq!(peer_up(&rx_b), Some(1));
    let frame = PeerMsg::Raft(vec![9, 9]).to_frame().unwrap();
    b.send(1, Out::Frame(frame), Lane::Control, None);
    // A message far larger than a frame arrives whole (in chunks).
    let big: Vec<u8> = (0..3_000_000u32).map(|i| i as u8).collect();
    let frame = PeerMsg::Raft(big.clone()).to_frame().unwrap();
    b.send(1, Out::Frame(frame), Lane::Bulk, None);
    let got = rx_a.recv_timeout(Duration::from_secs(2)).unwrap();
    assert!(
        matches!(got, Inbound::Peer { from: 2, msg: PeerMsg::Raft(ref m) } if m == &vec![9, 9])
    );
    let got = rx_a.recv_timeout(Duration::from_secs(5)).unwrap();
    assert!(matches!(got, Inbound::Peer { from: 2, msg: PeerMsg::Raft(ref m) } if m == &big));
}

/// Waits up to 2 s for `cond`.
fn eventually(cond: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn a_different_cluster_name_is_refused() {
    let (a, rx_a) = start("production", 1);
    let (b, rx_b) = start("staging", 2);
    let a_addr = a.local_addr().unwrap().to_string();
    b.dial(&a_addr);
    // The connection was made and refused at the hello (not merely:
    // nothing connected).
    assert!(
        eventually(|| a.refused("test-2")),
        "a never refused b's hello"
    );
    // The dialer hears why, and not the other cluster's name.
    assert!(
        eventually(|| b.refused("127.0.0.1")),
        "b was never told of the refusal"
    );
    assert_eq!(peer_up(&rx_a), None);
    assert_eq!(peer_up(&rx_b), None);
}

#[test]
fn an_isolated_node_drops_its_peers_refuses_new_ones_and_reconnects_after() {
    let ((a, rx_a), (b, _rx_b), a_addr) = connected_pair();
    a.set_isolated(true);
    assert!(a.is_isolated());
    // b's connection ends; a message to a no longer arrives.
    assert!(
        eventually(|| b.ctx.table.lock().unwrap().by_peer.is_empty()),
        "b still has a connection to the isolated node"
    );
    let frame = PeerMsg::Raft(vec![1]).to_frame().unwrap();
    b.send(1, Out::Frame(frame), Lane::Control, Some(&a_addr));
    thread::sleep(REDIAL_EVERY + Duration::from_millis(100));
    b.dial(&a_addr);
    assert_eq!(peer_up(&rx_a), None, "an isolated node accepted a peer");
    assert!(
        !matches!(rx_a.try_recv(), Ok(Inbound::Peer { .. })),
        "an isolated node received a message"
    );
    // Lifting the isolation lets peers connect again.
    a.set_isolated(false);
    thread::sleep(REDIAL_EVERY);
    b.dial(&a_addr);
    assert_eq!(peer_up(&rx_a), Some(2));
}

#[test]
fn redialing_a_connected_peer_opens_no_second_connection() {
    let ((a, rx_a), (b, _rx_b), a_addr) = connected_pair();
    // A restarting member redials every 500 ms for as long as it waits.
    for _ in 0..4 {
        thread::sleep(REDIAL_EVERY + Duration::from_millis(50));
        b.dial(&a_addr);
    }
    thread::sleep(Duration::from_millis(200));
    let count = |t: &Transport| t.ctx.table.lock().unwrap().open.len();
    assert_eq!(count(&b), 1, "b opened more than one connection to a");
    assert_eq!(count(&a), 1, "a accepted more than one connection from b");
    assert_eq!(peer_up(&rx_a), None, "a second connection came up");
}

#[test]
fn an_open_peer_connection_has_keepalive_and_a_write_timeout() {
    use super::connection::{
        KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, KEEPALIVE_PROBES, UNACKED_WRITE_TIMEOUT,
    };
    // Each side arms its socket before it reports the peer up.
    let ((a, _rx_a), (b, _rx_b), _) = connected_pair();
    for t in [&a, &b] {
        let table = t.ctx.table.lock().unwrap();
        let (_, stream) = table.open.iter().next().expect("one open connection");
        let s = socket2::SockRef::from(stream);
        assert!(s.keepalive().unwrap(), "no keepalive");
        assert_eq!(s.tcp_keepalive_time().unwrap(), KEEPALIVE_IDLE);
        assert_eq!(s.tcp_keepalive_interval().unwrap(), KEEPALIVE_INTERVAL);
        assert_eq!(s.tcp_keepalive_retries().unwrap(), KEEPALIVE_PROBES);
        assert_eq!(s.tcp_user_timeout().unwrap(), Some(UNACKED_WRITE_TIMEOUT));
    }
}

#[test]
fn garbage_instead_of_a_hello_is_dropped() {
    let (a, rx_a) = start("c", 1);
    let mut s = TcpStream::connect(a.local_addr().unwrap()).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    // The transport looks at how we start and closes without a word:
    // a stranger does not even learn the cluster name.
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let _ = s.read_to_end(&mut buf);
    assert_eq!(buf, b"", "the transport said something to a stranger");
    assert!(a.refused("127.0.0.1"), "the refusal was not logged");
    assert_eq!(peer_up(&rx_a), None);
}

#[test]
fn connections_beyond_the_accept_rate_are_closed_and_later_ones_get_in() {
    let (a, rx_a) = start("c", 1);
    let addr = a.local_addr().unwrap();
    let tries = 2 * MAX_ACCEPTS_PER_HOST_PER_SEC as usize;
    let t0 = Instant::now();
    for _ in 0..tries {
        // Connect, say something that is not ours, go: each costs the
        // node a thread until it is refused.
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let _ = s.write_all(b"GET / HTTP/1.1\r\n\r\n");
        let _ = s.read_to_end(&mut Vec::new());
    }
    let refused = a.ctx.table.lock().unwrap().rate_refused;
    if t0.elapsed() < Duration::from_secs(1) {
        assert!(
            refused > 0,
            "{tries} connections in under a second, none refused"
        );
    }
    // The next second a real peer gets in.
    thread::sleep(Duration::from_millis(1100));
    let (b, rx_b) = start("c", 2);
    b.dial(&addr.to_string());
    assert_eq!(peer_up(&rx_a), Some(2));
    assert_eq!(peer_up(&rx_b), Some(1));
}

#[test]
fn the_refusal_log_and_the_accept_rate_remember_a_bounded_number_of_peers() {
    let mut t = Table::default();
    let now = Instant::now();
    let every = Duration::from_secs(30);
    for port in 0..10_000u32 {
        assert!(t.refusal_due(&format!("10.0.0.1:{port}"), now, every));
    }
    assert!(
        t.refusals_logged.len() <= 4096,
        "{}",
        t.refusals_logged.len()
    );
    assert!(!t.refusal_due("10.0.0.1:9999", now, every), "logged twice");
    for i in 0..10_000u32 {
        let host = std::net::IpAddr::from(i.to_be_bytes());
        assert!(t.accept_allowed(host, now + Duration::from_secs(u64::from(i) / 2048)));
    }
    assert!(t.accept_len() <= 4096, "{}", t.accept_len());
}

#[test]
fn shutdown_returns_once_every_connection_thread_has_ended() {
    let (mut a, rx_a) = start("c", 1);
    let (b, rx_b) = start("c", 2);
    b.dial(&a.local_addr().unwrap().to_string());
    assert_eq!(peer_up(&rx_a), Some(2));
    assert_eq!(peer_up(&rx_b), Some(1));
    // Its reader at least (the writer starts right after the hello).
    assert!(
        a.ctx.threads.wait_all(Duration::ZERO) >= 1,
        "no connection thread counted"
    );
    let t0 = Instant::now();
    a.shutdown();
    assert_eq!(a.ctx.threads.wait_all(Duration::ZERO), 0);
    assert!(t0.elapsed() < SHUTDOWN_WAIT, "it waited for the deadline");
}

/// The listener thread sleeps on the listener's readiness between
/// connections: a peer that dials after a quiet spell gets in at once,
/// and `shutdown` wakes the thread rather than waiting for its idle look
/// (`LISTENER_IDLE`, 2 s).
#[test]
fn the_sleeping_listener_accepts_at_once_and_shutdown_wakes_it() {
    let (mut a, rx_a) = start("c", 1);
    let (b, rx_b) = start("c", 2);
    std::thread::sleep(Duration::from_millis(300)); // the listener sleeps
    let t0 = Instant::now();
    b.dial(&a.local_addr().unwrap().to_string());
    assert_eq!(peer_up(&rx_a), Some(2));
    assert_eq!(peer_up(&rx_b), Some(1));
    assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
    // The listener went back to sleep right after it accepted.
    let t0 = Instant::now();
    a.shutdown();
    assert!(
        t0.elapsed() < Duration::from_secs(1),
        "shutdown waited {:?} for the listener",
        t0.elapsed()
    );
}

/// ADR 0014, issue 34 item 5: a peer holding a certificate of the
/// cluster's CA that claims a member's Raft id, bound to another
/// certificate, is refused and logged; the member itself gets in.
#[test]
fn a_peer_claiming_a_bound_member_s_id_is_refused_and_logged() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = tls_nodes(dir.path(), &["a", "b", "mallory"], false);
    let (mallory, b, a) = (s.pop().unwrap(), s.pop().unwrap(), s.pop().unwrap());
    let b_cert = b.own_fingerprint().expect("a TLS node has a certificate");
    assert_ne!(mallory.own_fingerprint(), Some(b_cert));
    let (a, rx_a) = start_with("c", 1, a);
    a.bind_identities(HashMap::from([(2, b_cert)]));
    let a_addr = a.local_addr().unwrap().to_string();
    let (m, _rx_m) = start_with("c", 2, mallory);
    m.dial(&a_addr);
    assert!(eventually(|| a.refused("127.0.0.1")), "no refusal logged");
    assert_eq!(peer_up(&rx_a), None, "mallory got in as member 2");
    drop(m);
    let (b, rx_b) = start_with("c", 2, b);
    b.dial(&a_addr);
    assert_eq!(peer_up(&rx_a), Some(2), "the member itself is refused");
    assert_eq!(peer_up(&rx_b), Some(1));
}

/// A connection opened before the binding reached this node, by a peer
/// whose certificate is not the bound one, is closed when it arrives.
#[test]
fn a_binding_closes_an_open_connection_with_another_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = tls_nodes(dir.path(), &["a", "b", "mallory"], false);
    let (mallory, b, a) = (s.pop().unwrap(), s.pop().unwrap(), s.pop().unwrap());
    let b_cert = b.own_fingerprint().unwrap();
    let (a, rx_a) = start_with("c", 1, a);
    let (m, _rx_m) = start_with("c", 2, mallory);
    m.dial(&a.local_addr().unwrap().to_string());
    assert_eq!(peer_up(&rx_a), Some(2));
    a.bind_identities(HashMap::from([(2, b_cert)]));
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut down = false;
    while Instant::now() < deadline && !down {
        down = matches!(
            rx_a.recv_timeout(Duration::from_millis(50)),
            Ok(Inbound::PeerDown { raft_id: 2 })
        );
    }
    assert!(down, "the impostor's connection stayed open");
}

/// A member that binds itself anew (`socket.ssl_reload`) keeps the
/// connections it opened with the certificate bound before, as Galera
/// keeps them; only new ones need the new certificate.
#[test]
fn a_new_binding_of_a_bound_member_keeps_its_open_connections() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = tls_nodes(dir.path(), &["a", "b"], false);
    let (b, a) = (s.pop().unwrap(), s.pop().unwrap());
    let b_cert = b.own_fingerprint().unwrap();
    let (a, rx_a) = start_with("c", 1, a);
    a.bind_identities(HashMap::from([(2, b_cert)]));
    let (b, _rx_b) = start_with("c", 2, b);
    b.dial(&a.local_addr().unwrap().to_string());
    assert_eq!(peer_up(&rx_a), Some(2));
    a.bind_identities(HashMap::from([(2, [0x42; 32])]));
    let dropped = rx_a
        .recv_timeout(Duration::from_millis(500))
        .is_ok_and(|ev| matches!(ev, Inbound::PeerDown { raft_id: 2 }));
    assert!(!dropped, "the member's open connection was closed");
}

/// `socket.dynamic`, the way from plain to TLS (MariaDB's
/// galera_dynamic_protocol): a member bound to its certificate reaches a
/// plain node over plain TCP. The plain node cannot check certificates,
/// so it does not refuse the member for presenting none.
#[test]
fn a_plain_node_lets_a_bound_member_in_over_plain_tcp() {
    let dir = tempfile::tempdir().unwrap();
    let tls = tls_nodes(dir.path(), &["a"], true).pop().unwrap();
    let a_cert = tls.own_fingerprint().unwrap();
    let (a, rx_a) = start_with("c", 1, tls);
    a.bind_identities(HashMap::from([(1, a_cert)]));
    let (b, rx_b) = start("c", 2);
    b.bind_identities(HashMap::from([(1, a_cert)]));
    // A dynamic node dials in TLS; the plain node dials it in plain, and
    // checks the hello that answers.
    b.dial(&a.local_addr().unwrap().to_string());
    assert_eq!(peer_up(&rx_b), Some(1), "the plain node refused the member");
    assert_eq!(peer_up(&rx_a), Some(2));
}

/// A node with TLS and `socket.dynamic` still refuses a plain peer that
/// claims a member bound to a certificate: plain TCP shows none.
#[test]
fn a_dynamic_node_refuses_a_plain_claim_of_a_bound_member() {
    let dir = tempfile::tempdir().unwrap();
    let tls = tls_nodes(dir.path(), &["a"], true).pop().unwrap();
    let (a, rx_a) = start_with("c", 1, tls);
    a.bind_identities(HashMap::from([(2, [0x42; 32])]));
    let (b, _rx_b) = start("c", 2);
    b.dial(&a.local_addr().unwrap().to_string());
    assert!(eventually(|| a.refused("127.0.0.1")), "no refusal logged");
    assert_eq!(
        peer_up(&rx_a),
        None,
        "a plain peer got in as a bound member"
    );
}

/// A plain node answers a ClientHello with `NO_TLS_ALERT`, so a TLS
/// dialer knows the peer has no TLS: a warning on a node that requires
/// TLS, a note on one with `socket.dynamic` (a cluster moving to TLS,
/// where the plain node dials it in plain TCP). The plain node itself
/// only notes the attempt: the misconfiguration, if any, is the TLS
/// node's, and MariaDB's galera_dynamic_protocol fails on a warning.
#[test]
fn a_plain_node_tells_a_tls_dialer_it_has_no_tls() {
    let dir = tempfile::tempdir().unwrap();
    for dynamic in [false, true] {
        let sub = dir.path().join(dynamic.to_string());
        std::fs::create_dir_all(&sub).unwrap();
        let tls = tls_nodes(&sub, &["a"], dynamic).pop().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let acceptor = std::thread::spawn(move || {
            let tcp = listener.accept().unwrap().0;
            PeerSecurity::plain()
                .accept(tcp, Duration::from_secs(5))
                .err()
        });
        let tcp = TcpStream::connect(addr).unwrap();
        let dialed = tls
            .dial(tcp, Duration::from_secs(5))
            .err()
            .expect("TLS into plain opened");
        let accepted = acceptor
            .join()
            .unwrap()
            .expect("the plain node accepted TLS");
        assert!(dialed.plain_peer, "dynamic={dynamic}: {}", dialed.why);
        assert_eq!(
            dialed.mismatch, !dynamic,
            "dynamic={dynamic}: {}",
            dialed.why
        );
        assert!(accepted.mismatch && accepted.plain_peer, "{}", accepted.why);
    }
}

/// Issue 35 item 3: the open connections of a node cost it one thread,
/// the event loop, however many there are; the threads that opened them
/// end once they are open.
#[test]
fn one_event_loop_thread_serves_every_open_connection() {
    let (a, rx_a) = start("c", 1);
    let addr = a.local_addr().unwrap().to_string();
    let others: Vec<Node> = (2..=4).map(|id| start("c", id)).collect();
    for (o, _) in &others {
        o.dial(&addr);
    }
    let mut up: Vec<u64> = (0..3).filter_map(|_| peer_up(&rx_a)).collect();
    up.sort_unstable();
    assert_eq!(up, vec![2, 3, 4]);
    assert!(
        eventually(|| a.ctx.threads.wait_all(Duration::ZERO) == 1),
        "{} counted threads for 3 open connections",
        a.ctx.threads.wait_all(Duration::ZERO)
    );
    // And they all carry messages (once each dialer has the hello back:
    // before, it has no connection to send on).
    for (o, rx_o) in &others {
        assert_eq!(peer_up(rx_o), Some(1));
        let frame = PeerMsg::Raft(vec![1]).to_frame().unwrap();
        o.send(1, Out::Frame(frame), Lane::Control, None);
    }
    let mut from: Vec<u64> = (0..3)
        .map(
            |_| match rx_a.recv_timeout(Duration::from_secs(2)).unwrap() {
                Inbound::Peer { from, .. } => from,
                other => panic!("{other:?}"),
            },
        )
        .collect();
    from.sort_unstable();
    assert_eq!(from, vec![2, 3, 4]);
}

/// A message bigger than `BIG_MESSAGE` (encoded and chunked aside) over
/// TLS, with small messages sent before, during and after it on both
/// lanes, in both directions: every message arrives whole, and each lane
/// keeps its order.
#[test]
fn a_big_message_over_tls_arrives_whole_and_small_ones_keep_their_lane_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = tls_nodes(dir.path(), &["a", "b"], false);
    let (b, rx_b) = start_with("c", 2, s.pop().unwrap());
    let (a, rx_a) = start_with("c", 1, s.pop().unwrap());
    b.dial(&a.local_addr().unwrap().to_string());
    assert_eq!(peer_up(&rx_a), Some(2));
    assert_eq!(peer_up(&rx_b), Some(1));
    let small = |lane: u8, n: u8| PeerMsg::Raft(vec![lane, n]).to_frame().unwrap();
    let big: Vec<u8> = (0..(20u32 << 20)).map(|i| (i % 251) as u8).collect();
    for n in 0..50u8 {
        if n == 10 {
            let frame = PeerMsg::Raft(big.clone()).to_frame().unwrap();
            b.send(1, Out::Frame(frame), Lane::Bulk, None);
        }
        b.send(1, Out::Frame(small(0, n)), Lane::Control, None);
        b.send(1, Out::Frame(small(1, n)), Lane::Bulk, None);
        a.send(2, Out::Frame(small(0, n)), Lane::Control, None);
    }
    let mut lanes: [Vec<u8>; 2] = [Vec::new(), Vec::new()];
    let mut got_big = false;
    while lanes[0].len() + lanes[1].len() < 100 || !got_big {
        match rx_a
            .recv_timeout(Duration::from_secs(10))
            .expect("a message")
        {
            Inbound::Peer {
                from: 2,
                msg: PeerMsg::Raft(m),
            } if m.len() == 2 => lanes[m[0] as usize].push(m[1]),
            Inbound::Peer {
                from: 2,
                msg: PeerMsg::Raft(m),
            } => {
                assert!(m == big, "the big message arrived damaged");
                got_big = true;
            }
            other => panic!("{other:?}"),
        }
    }
    let in_order: Vec<u8> = (0..50).collect();
    assert_eq!(lanes, [in_order.clone(), in_order.clone()]);
    let back: Vec<u8> = (0..50)
        .map(
            |_| match rx_b.recv_timeout(Duration::from_secs(5)).unwrap() {
                Inbound::Peer {
                    msg: PeerMsg::Raft(m),
                    ..
                } => m[1],
                other => panic!("{other:?}"),
            },
        )
        .collect();
    assert_eq!(back, in_order);
}

/// An owner that records its turns (their threads and times), stops at
/// its `stop_at`-th turn, and panics at its `panic_at`-th.
struct Recording {
    turns: Arc<Mutex<Vec<(std::thread::ThreadId, Instant)>>>,
    wait: Duration,
    stop_at: usize,
    panic_at: usize,
    shut: Arc<AtomicBool>,
}

impl LoopOwner for Recording {
    fn turn(&mut self) -> Option<Duration> {
        let n = {
            let mut turns = self.turns.lock().unwrap();
            turns.push((std::thread::current().id(), Instant::now()));
            turns.len()
        };
        assert_ne!(n, self.panic_at, "a bug in the owner");
        (n < self.stop_at).then_some(self.wait)
    }

    fn shut(&mut self) {
        self.shut.store(true, Ordering::SeqCst);
    }
}

type Turns = Arc<Mutex<Vec<(std::thread::ThreadId, Instant)>>>;

fn seated(
    t: &Transport,
    wait: Duration,
    stop_at: usize,
    panic_at: usize,
) -> (Turns, Receiver<Box<dyn LoopOwner>>, Arc<AtomicBool>) {
    let turns: Turns = Arc::default();
    let shut = Arc::new(AtomicBool::new(false));
    let (back_tx, back) = channel();
    t.owner_seat().seat(
        Box::new(Recording {
            turns: turns.clone(),
            wait,
            stop_at,
            panic_at,
            shut: shut.clone(),
        }),
        back_tx,
    );
    (turns, back, shut)
}

fn wait_for_turns(turns: &Turns, n: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let len = turns.lock().unwrap().len();
        if len >= n || Instant::now() >= deadline {
            return len;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn the_owner_turns_on_the_loop_when_woken_and_at_its_deadline() {
    let (t, _rx) = start("c", 1);
    // A long deadline: only wake-ups make turns.
    let (turns, back, shut) = seated(&t, Duration::from_secs(60), usize::MAX, usize::MAX);
    assert_eq!(wait_for_turns(&turns, 1), 1, "a first turn once seated");
    let waker = t.owner_waker();
    for n in 2..=5 {
        waker.wake();
        assert_eq!(wait_for_turns(&turns, n), n, "a turn per wake-up");
    }
    let threads: std::collections::HashSet<_> =
        turns.lock().unwrap().iter().map(|(id, _)| *id).collect();
    assert_eq!(threads.len(), 1, "every turn on the one loop thread");
    assert!(!threads.contains(&std::thread::current().id()));
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        turns.lock().unwrap().len(),
        5,
        "no turn without a wake-up or its deadline"
    );
    assert!(back.try_recv().is_err(), "not given back while it runs");
    assert!(!shut.load(Ordering::SeqCst));
}

#[test]
fn a_short_deadline_makes_turns_without_wake_ups_and_a_stopped_owner_comes_back() {
    let (t, _rx) = start("c", 1);
    let (turns, back, shut) = seated(&t, Duration::from_millis(20), 6, usize::MAX);
    let mut owner = back
        .recv_timeout(Duration::from_secs(5))
        .expect("given back after its sixth turn");
    let turns = turns.lock().unwrap().clone();
    assert_eq!(turns.len(), 6);
    for w in turns.windows(2) {
        let gap = w[1].1 - w[0].1;
        assert!(
            gap >= Duration::from_millis(19),
            "a turn came early: {gap:?}"
        );
    }
    // No turn after it stopped; its shut runs where it was taken back.
    assert!(!shut.load(Ordering::SeqCst));
    owner.shut();
    assert!(shut.load(Ordering::SeqCst));
    t.owner_waker().wake();
    std::thread::sleep(Duration::from_millis(50));
}

#[test]
fn an_owner_that_panics_is_given_back_and_the_loop_serves_on() {
    let ((a, rx_a), (b, _rx_b), _) = connected_pair();
    let (turns, back, _) = seated(&a, Duration::from_millis(5), usize::MAX, 3);
    assert!(back.recv_timeout(Duration::from_secs(5)).is_ok());
    assert_eq!(turns.lock().unwrap().len(), 3, "no turn after the panic");
    // The connections are still served.
    let frame = PeerMsg::Raft(vec![7]).to_frame().unwrap();
    b.send(1, Out::Frame(frame), Lane::Control, None);
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut got = false;
    while !got && Instant::now() < deadline {
        got = matches!(
            rx_a.recv_timeout(Duration::from_millis(50)),
            Ok(Inbound::Peer { from: 2, .. })
        );
    }
    assert!(got, "the loop still delivers messages");
}

/// CPU time (ns) of each `lockstep-net` thread of this process, by
/// thread id: the event loops of the transports the tests run.
fn loops_cpu_ns() -> HashMap<String, u64> {
    let mut loops = HashMap::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() != "lockstep-net" {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        if let Some(ns) = stat.split_whitespace().next().and_then(|v| v.parse().ok()) {
            loops.insert(task.file_name().to_string_lossy().into_owned(), ns);
        }
    }
    loops
}

#[test]
fn a_loop_whose_owner_was_given_back_sleeps_through_wake_ups() {
    let (t, _rx) = start("c", 1);
    let (_turns, back, _) = seated(&t, Duration::from_millis(5), 1, usize::MAX);
    let _owner = back
        .recv_timeout(Duration::from_secs(5))
        .expect("given back after its first turn");
    // Wake-ups with no owner to take them: nothing clears the flag.
    t.owner_waker().wake();
    std::thread::sleep(Duration::from_millis(20));
    let before = loops_cpu_ns();
    std::thread::sleep(Duration::from_millis(400));
    // The most any one loop used meanwhile (others' loops come and go).
    let used = loops_cpu_ns()
        .iter()
        .filter_map(|(tid, ns)| before.get(tid).map(|b| ns.saturating_sub(*b)))
        .max()
        .map_or(Duration::ZERO, Duration::from_nanos);
    assert!(
        used < Duration::from_millis(100),
        "an event loop used {used:?} of CPU in 400 ms: it spins"
    );
}
