//! One connection's opening, on a thread of its own: dial or accept,
//! admission, TLS, hello; then it goes to the event loop (`event_loop`),
//! and this thread ends.

use super::event_loop::Handoff;
use super::queue::{Queue, Wire};
use super::receive::next_message;
use super::table::{
    Conn, OpeningSlot, MAX_ACCEPTS_PER_HOST_PER_SEC, MAX_OPENING, MAX_OPENING_PER_HOST,
};
use super::{Ctx, Inbound, Side, CONNECT_TIMEOUT, HELLO_MAX_FRAME, HELLO_TIMEOUT};
use crate::identity::{describe, short};
use crate::secure::Reader;
use lockstep_core::group::peer::{
    check_hello, versions_overlap, PeerMsg, MIN_PROTOCOL_VERSION, PROTOCOL_VERSION,
};
use lockstep_core::wire::frame::FrameDecoder;
use lockstep_core::wire::lanes::MAX_WIRE_FRAME;
use log::{info, warn};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

pub(super) fn dial(addr: &str, from: Option<std::net::IpAddr>) -> Option<TcpStream> {
    let addrs: Vec<SocketAddr> = addr.to_socket_addrs().ok()?.collect();
    for a in addrs {
        let s = match from {
            Some(ip) if ip.is_ipv4() == a.is_ipv4() => dial_from(ip, a),
            _ => TcpStream::connect_timeout(&a, CONNECT_TIMEOUT),
        };
        if let Ok(s) = s {
            return Some(s);
        }
    }
    None
}

/// Idle time before a peer connection's first keepalive probe, the time
/// between probes, and how many may go unanswered: a peer that vanished
/// (power off, a cut that drops packets) is found in about 10 s even on a
/// connection that carries nothing.
pub(super) const KEEPALIVE_IDLE: Duration = Duration::from_secs(5);
pub(super) const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(1);
pub(super) const KEEPALIVE_PROBES: u32 = 5;
/// How long written bytes may stay unacknowledged before the kernel
/// closes the connection (`TCP_USER_TIMEOUT`): a writer blocked on a full
/// socket to a dead peer gets an error instead of blocking until the
/// kernel's own retries give up (about 15 minutes).
pub(super) const UNACKED_WRITE_TIMEOUT: Duration = Duration::from_secs(20);

/// Bounds how long an open peer connection can hang on a peer that is
/// gone: keepalive for idle reads, `TCP_USER_TIMEOUT` for writes. Either
/// ends in a read or write error in the event loop, which closes the
/// connection; the peer is redialed as any lost peer is.
pub(super) fn arm_liveness(stream: &TcpStream) -> std::io::Result<()> {
    let s = socket2::SockRef::from(stream);
    s.set_tcp_keepalive(
        &socket2::TcpKeepalive::new()
            .with_time(KEEPALIVE_IDLE)
            .with_interval(KEEPALIVE_INTERVAL)
            .with_retries(KEEPALIVE_PROBES),
    )?;
    s.set_tcp_user_timeout(Some(UNACKED_WRITE_TIMEOUT))
}

/// Connects to `to` from address `ip` (any port).
fn dial_from(ip: std::net::IpAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(to), Type::STREAM, Some(Protocol::TCP))?;
    s.bind(&SocketAddr::new(ip, 0).into())?;
    s.connect_timeout(&to.into(), CONNECT_TIMEOUT)?;
    Ok(s.into())
}

/// Accepts peers until the transport stops. The listener is
/// non-blocking; between bursts the thread sleeps in `waiting` (a
/// readiness poll on the listener and on the transport's `Waker` for it,
/// `ListenerWait`) instead of polling the socket every 20 ms, which woke
/// every idle node 50 times a second.
pub(super) fn accept_loop(listener: TcpListener, ctx: Ctx, mut waiting: ListenerWait) {
    while !ctx.stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) if ctx.isolated.load(Ordering::SeqCst) => {
                let _ = stream.shutdown(Shutdown::Both);
            }
            Ok((stream, from)) => {
                let within_rate = ctx
                    .table
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .accept_allowed(from.ip(), Instant::now());
                if !within_rate {
                    if ctx.log_refusal_now(&from.ip().to_string()) {
                        warn!(
                            "refusing group connections from {}: more than \
                             {MAX_ACCEPTS_PER_HOST_PER_SEC} a second",
                            from.ip()
                        );
                    }
                    let _ = stream.shutdown(Shutdown::Both);
                    continue;
                }
                let Some(slot) = OpeningSlot::take(&ctx.table, from.ip()) else {
                    if ctx.log_refusal_now(&from.ip().to_string()) {
                        warn!(
                            "refusing group connection from {from}: too many connections \
                             still opening (at most {MAX_OPENING}, {MAX_OPENING_PER_HOST} \
                             per host)"
                        );
                    }
                    let _ = stream.shutdown(Shutdown::Both);
                    continue;
                };
                let c = ctx.clone();
                ctx.threads.spawn("lockstep-peer", move || {
                    run_connection(stream, c, Side::Accepted, Some(slot), None)
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                waiting.until_ready();
            }
            Err(e) => {
                warn!("group channel accept failed: {e}");
                thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// What the listener thread sleeps on between connections: readiness of
/// the listener (accept would not block) or a wake-up from
/// `Transport::shutdown`. Edge-triggered, as mio is: the loop accepts until
/// `WouldBlock` before it waits again.
pub(super) struct ListenerWait {
    poll: mio::Poll,
    events: mio::Events,
}

/// How long the listener thread sleeps at most between two looks at the
/// stop flag, should a wake-up be lost.
const LISTENER_IDLE: Duration = Duration::from_secs(2);

const LISTENER_READY: mio::Token = mio::Token(0);
const LISTENER_WAKE: mio::Token = mio::Token(1);

impl ListenerWait {
    /// Registers `listener` (already non-blocking); the `Waker` ends a
    /// wait early (`Transport::shutdown`).
    pub(super) fn new(listener: &TcpListener) -> std::io::Result<(ListenerWait, mio::Waker)> {
        use std::os::fd::AsRawFd;
        let poll = mio::Poll::new()?;
        let fd = listener.as_raw_fd();
        poll.registry().register(
            &mut mio::unix::SourceFd(&fd),
            LISTENER_READY,
            mio::Interest::READABLE,
        )?;
        let waker = mio::Waker::new(poll.registry(), LISTENER_WAKE)?;
        let waiting = ListenerWait {
            poll,
            events: mio::Events::with_capacity(4),
        };
        Ok((waiting, waker))
    }

    /// Sleeps until a peer connects, the transport wakes this thread, or
    /// `LISTENER_IDLE` passes.
    fn until_ready(&mut self) {
        if let Err(e) = self.poll.poll(&mut self.events, Some(LISTENER_IDLE)) {
            if e.kind() != std::io::ErrorKind::Interrupted {
                warn!("group channel listener: waiting for connections failed: {e}");
                thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// Reads one message (blocking; the hello and what answers it), or
/// `None` on EOF/error (logged). No inbox: chunked messages are refused,
/// so a stranger gets at most one frame's worth of memory.
fn read_msg(stream: &mut Reader, dec: &mut FrameDecoder, peer: &str) -> Option<PeerMsg> {
    // Before the hello, read no more than the hello may be.
    let mut buf = [0u8; HELLO_MAX_FRAME];
    loop {
        if let Some(m) = next_message(dec, None, &mut None, peer).ok()? {
            return Some(m);
        }
        match stream.read(&mut buf) {
            Ok(0) => return None,
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                // A TLS error: a bad record, or an alert the peer sent.
                warn!("dropping connection to {peer}: {e}");
                return None;
            }
            Err(_) => return None,
            Ok(n) => dec.push(&buf[..n]),
        }
    }
}

pub(super) fn run_connection(
    stream: TcpStream,
    ctx: Ctx,
    side: Side,
    slot: Option<OpeningSlot>,
    dialed: Option<String>,
) {
    let conn_id = ctx.next_conn.fetch_add(1, Ordering::Relaxed);
    if let Ok(s) = stream.try_clone() {
        let mut t = ctx.table.lock().unwrap_or_else(|p| p.into_inner());
        if ctx.stop.load(Ordering::Relaxed) || ctx.isolated.load(Ordering::SeqCst) {
            return;
        }
        t.open.insert(conn_id, s);
    }
    // An open connection goes on in the event loop, which ends it.
    if !serve_connection(stream, &ctx, conn_id, side, slot, dialed) {
        connection_ended(&ctx, conn_id, None);
    }
}

/// Takes an ended connection out of the table; tells the owner when it
/// was the last one to its peer (`raft_id`: known once the hello is done).
pub(super) fn connection_ended(ctx: &Ctx, conn_id: u64, raft_id: Option<u64>) {
    let mut t = ctx.table.lock().unwrap_or_else(|p| p.into_inner());
    t.open.remove(&conn_id);
    let Some(raft_id) = raft_id else {
        return;
    };
    let Some(conns) = t.by_peer.get_mut(&raft_id) else {
        return;
    };
    conns.retain(|c| c.id != conn_id);
    if conns.is_empty() {
        t.by_peer.remove(&raft_id);
        drop(t);
        (ctx.sink)(Inbound::PeerDown { raft_id });
    }
}

/// Admission, TLS and the hello; then the connection goes to the event
/// loop. `false` if it did not open.
fn serve_connection(
    stream: TcpStream,
    ctx: &Ctx,
    conn_id: u64,
    side: Side,
    slot: Option<OpeningSlot>,
    dialed: Option<String>,
) -> bool {
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    let _ = stream.set_nodelay(true);
    let _ = stream.set_nonblocking(false);
    if side == Side::Accepted {
        let ip = stream.peer_addr().map(|a| a.ip()).ok();
        if !ip.is_some_and(|ip| (ctx.admit)(ip)) {
            if ctx.log_refusal_now(&peer) {
                // Galera's words: MariaDB's tests suppress them.
                warn!(
                    "Connection not allowed: refusing group connection from {peer}, whose \
                     address is not in the allowlist (wsrep_allowlist, mysql.wsrep_allowlist)"
                );
            }
            return false;
        }
    }
    // TLS first (or the check that both ends agree on plain text); a
    // refused peer is told nothing.
    let opened = match side {
        Side::Dialed => ctx.security.dial(stream, HELLO_TIMEOUT),
        Side::Accepted => ctx.security.accept(stream, HELLO_TIMEOUT),
    };
    let (mut stream, mut writer) = match opened {
        Ok(halves) => halves,
        // A plain node told a TLS peer so (`sniff::NO_TLS_ALERT`): that
        // peer reports it by its own policy; a note here.
        Err(why) if why.mismatch && !(side == Side::Accepted && why.plain_peer) => {
            if ctx.log_refusal_now(&peer) {
                match side {
                    Side::Dialed => warn!("cannot open a group connection to {peer}: {why}"),
                    Side::Accepted => warn!("refusing group connection from {peer}: {why}"),
                }
            }
            return false;
        }
        Err(why) => {
            // A peer restarting, a port scan: a note, not a warning.
            if ctx.log_refusal_now(&peer) {
                info!("group connection with {peer} ended before it opened: {why}");
            }
            return false;
        }
    };
    let hello = PeerMsg::Hello {
        version: PROTOCOL_VERSION,
        cluster: ctx.me.cluster.clone(),
        raft_id: ctx.me.raft_id,
        peer_addr: ctx.me.peer_addr.clone(),
        min_version: MIN_PROTOCOL_VERSION,
    };
    let Ok(hello) = hello.to_frame() else {
        return false;
    };
    // The dialer speaks first; the acceptor answers only a hello that
    // passes, so a stranger does not even learn the cluster name.
    if side == Side::Dialed && writer.write_all(&hello).is_err() {
        return false;
    }
    let _ = stream.tcp().set_read_timeout(Some(HELLO_TIMEOUT));
    // Bounds what a peer can make us buffer before its hello, and any
    // single frame after it (larger messages come in chunks).
    let mut dec = FrameDecoder::new(HELLO_MAX_FRAME);
    let Some(first) = read_msg(&mut stream, &mut dec, &peer) else {
        // Also what a restarting peer looks like: a note, not a warning.
        if side == Side::Dialed && ctx.log_refusal_now(&peer) {
            info!(
                "group connection to {peer} ended before its hello (this node: {}; if \
                 that node refused us, its log says why)",
                ctx.security.describe()
            );
        }
        return false;
    };
    let (raft_id, peer_addr) = match first {
        PeerMsg::Hello {
            version,
            cluster,
            raft_id,
            peer_addr,
            min_version,
        } => match check_hello(&ctx.me.cluster, (min_version, version), &cluster) {
            Ok(()) => (raft_id, peer_addr),
            Err(reason) => {
                if ctx.log_refusal_now(&peer_addr) {
                    warn!("refusing group connection from {peer} ({peer_addr}): {reason}");
                }
                // The dialer learns why, but not our cluster's name.
                let told = if versions_overlap(min_version, version) {
                    format!(
                        "cluster name mismatch: this node is not in cluster '{cluster}' \
                         (wsrep_cluster_name)"
                    )
                } else {
                    reason
                };
                if let Ok(b) = (PeerMsg::Refuse { reason: told }).to_frame() {
                    let _ = writer.write_all(&b);
                }
                return false;
            }
        },
        PeerMsg::Refuse { reason } => {
            if ctx.log_refusal_now(&peer) {
                warn!("peer {peer} refused the group connection: {reason}");
            }
            return false;
        }
        _ => {
            warn!("dropping connection to {peer}: it did not start with a hello");
            return false;
        }
    };
    if raft_id == ctx.me.raft_id {
        // Dialed ourselves through a listed address: let the dialing end
        // see it at once too.
        if side == Side::Accepted {
            let _ = writer.write_all(&hello);
        }
        return false;
    }
    // A member's Raft id goes with the certificate the cluster bound it
    // to (ADR 0014): another peer of the same CA cannot take it over. A
    // node without TLS checks no certificate (`enforces_bindings`).
    let cert = stream.peer_fingerprint();
    let bound = ctx
        .bindings
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .get(&raft_id)
        .copied()
        .filter(|_| ctx.security.enforces_bindings());
    if let Some(bound) = bound.filter(|b| cert.as_ref() != Some(b)) {
        if ctx.log_refusal_now(&peer) {
            warn!(
                "refusing group connection from {peer} ({peer_addr}): it claims Raft id \
                 {raft_id:#x}, which the cluster bound to certificate {}, and it presented {}",
                short(&bound),
                describe(cert.as_ref())
            );
        }
        if let Ok(b) = (PeerMsg::Refuse {
            reason: "this Raft id belongs to a member with another certificate".into(),
        })
        .to_frame()
        {
            let _ = writer.write_all(&b);
        }
        return false;
    }
    if side == Side::Accepted && writer.write_all(&hello).is_err() {
        return false;
    }
    let _ = stream.tcp().set_read_timeout(None);
    if let Err(e) = arm_liveness(stream.tcp()) {
        warn!("group connection with {peer}: cannot set TCP keepalive and user timeout: {e}");
    }
    // The event loop and the senders never block on it (the reading and
    // writing halves share the socket, and so this mode).
    if let Err(e) = stream.tcp().set_nonblocking(true) {
        warn!("dropping connection to {peer}: {e}");
        return false;
    }
    dec.set_max_payload(MAX_WIRE_FRAME);
    drop(slot); // known now: no longer counted as opening
    let out = Arc::new(Queue::new(conn_id, Wire::new(writer), ctx.lp.clone()));
    {
        let mut t = ctx.table.lock().unwrap_or_else(|p| p.into_inner());
        if ctx.stop.load(Ordering::Relaxed) || ctx.isolated.load(Ordering::SeqCst) {
            return false;
        }
        t.by_peer.entry(raft_id).or_default().push(Conn {
            id: conn_id,
            out: out.clone(),
            addr: peer_addr.clone(),
            dialed,
            cert,
        });
    }
    (ctx.sink)(Inbound::PeerUp {
        raft_id,
        peer_addr,
        cert,
    });
    ctx.lp.hand_over(
        ctx,
        Handoff {
            conn_id,
            raft_id,
            peer,
            reader: stream,
            dec,
            out,
        },
    );
    true
}
