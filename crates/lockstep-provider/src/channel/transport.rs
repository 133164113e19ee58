//! TCP between group members: one listener, one reader thread and one
//! writer thread per connection. Every connection starts with a hello
//! (protocol version, cluster name, Raft id); after that each frame is
//! handed to the group thread as an [`Input::Peer`]. Any decoding error
//! drops the connection with a log line; Raft retransmits what was lost.
//!
//! Each connection has two lanes (`lockstep_core::wire::lanes`): control
//! messages (heartbeats, votes) go before the chunks of bulk ones (log
//! appends), so a 300 MB writeset never delays a heartbeat by more than
//! one 64 KiB chunk. Both lanes are bounded; what does not fit is dropped
//! (Raft resends) and counted.

use super::Input;
use crate::log::{info, warn};
use lockstep_core::wire::frame::FrameDecoder;
use lockstep_core::wire::lanes::{Inbox, Lane, Next, Outbox, Outgoing, MAX_WIRE_FRAME};
use lockstep_core::wire::peer::{check_hello, PeerMsg, PROTOCOL_VERSION};
use lockstep_net::secure::{PeerSecurity, Reader, Writer};
use protobuf::Message as _;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound on the first frame from a peer (its hello, or a refusal): what a
/// stranger can make this node buffer before it is known. Reads before
/// the hello are this small too.
const HELLO_MAX_FRAME: usize = 4096;
/// Accepted connections still opening (TLS handshake, hello), at most,
/// and at most per peer host: a flood of idle connections from one host
/// cannot hold more than its share, nor memory beyond these times a
/// handshake's buffers. Beyond, a new connection is closed at once.
const MAX_OPENING: usize = 64;
const MAX_OPENING_PER_HOST: usize = 8;
/// Do not redial one address more often than this.
const REDIAL_EVERY: Duration = Duration::from_millis(500);

/// Whether a peer at this address may connect at all (the server's
/// allowlist), asked before anything else happens on the connection.
pub type Admission = Arc<dyn Fn(std::net::IpAddr) -> bool + Send + Sync>;

/// Who we are on the wire.
#[derive(Clone)]
pub struct Identity {
    pub cluster: String,
    pub raft_id: u64,
    /// Address peers use to reach us (`base_host:base_port`).
    pub peer_addr: String,
    /// The address connections to peers leave from: the listen address's
    /// host when it names one (`gmcast.listen_addr=127.0.0.2`), so peers'
    /// allowlists see the address this node is known by, as with Galera.
    pub bind_ip: Option<std::net::IpAddr>,
}

struct Conn {
    id: u64,
    out: Arc<Queue>,
    /// The address the peer advertised in its hello.
    addr: String,
}

/// What the group thread hands a connection: a framed message, or a Raft
/// message the writer thread encodes (a 300 MB append is copied there,
/// not on the group thread).
pub enum Out {
    Frame(Vec<u8>),
    Raft(raft::eraftpb::Message),
}

impl Outgoing for Out {
    fn frame_len(&self) -> usize {
        match self {
            Out::Frame(f) => f.len(),
            Out::Raft(m) => m.compute_size() as usize + 16,
        }
    }

    fn encode(self) -> Option<Vec<u8>> {
        match self {
            Out::Frame(f) => Some(f),
            Out::Raft(m) => {
                let t0 = Instant::now();
                let big = m.entries.iter().map(|e| e.data.len()).sum::<usize>() >= LOG_BIG;
                let bytes = m
                    .write_to_bytes()
                    .map_err(|e| warn!("cannot encode a Raft message: {e}"))
                    .ok()?;
                let frame = PeerMsg::Raft(bytes)
                    .into_frame()
                    .map_err(|e| warn!("Raft message not sent: {e}"))
                    .ok()?;
                if big {
                    info!(
                        "sending a Raft message of {} MiB (encoded in {} ms)",
                        frame.len() >> 20,
                        t0.elapsed().as_millis()
                    );
                }
                Some(frame)
            }
        }
    }
}

/// One connection's outbox, shared by the group thread (which queues)
/// and the connection's writer thread (which sends).
#[derive(Default)]
struct Queue {
    outbox: Mutex<Outbox<Out>>,
    ready: Condvar,
    closed: AtomicBool,
}

/// Messages at least this big are logged when sent and received.
const LOG_BIG: usize = 64 << 20;

/// Messages dropped because a lane was full (all connections).
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// When a drop was last logged (seconds since the epoch of this process).
static DROP_LOGGED: Mutex<Option<Instant>> = Mutex::new(None);

impl Queue {
    fn push(&self, lane: Lane, bytes: Out) {
        let pushed = self
            .outbox
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(lane, bytes);
        match pushed {
            Ok(()) => self.ready.notify_one(),
            Err(full) => {
                let n = DROPPED.fetch_add(1, Ordering::Relaxed) + 1;
                let mut logged = DROP_LOGGED.lock().unwrap_or_else(|p| p.into_inner());
                if logged.is_none_or(|t| t.elapsed() >= REFUSAL_LOG_EVERY) {
                    *logged = Some(Instant::now());
                    warn!(
                        "a peer reads too slowly: its {:?} lane holds {} bytes; message dropped \
                         (Raft resends it; {n} dropped so far)",
                        full.lane, full.queued
                    );
                }
            }
        }
    }

    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let _g = self.outbox.lock().unwrap_or_else(|p| p.into_inner());
        self.ready.notify_all();
    }

    /// The next bytes to write, waiting for some; `None` once closed.
    /// Messages are encoded here, outside the outbox lock, so the group
    /// thread never waits for a big message's encoding to queue another.
    fn next(&self) -> Option<Vec<u8>> {
        let mut outbox = self.outbox.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if self.closed.load(Ordering::SeqCst) {
                return None;
            }
            match outbox.take_next() {
                Some(Next::Bytes(b)) => return Some(b),
                Some(Next::Control(m)) => {
                    drop(outbox);
                    if let Some(f) = m.encode() {
                        return Some(f);
                    }
                    outbox = self.outbox.lock().unwrap_or_else(|p| p.into_inner());
                }
                Some(Next::Bulk(m)) => {
                    drop(outbox);
                    let frame = m.encode();
                    outbox = self.outbox.lock().unwrap_or_else(|p| p.into_inner());
                    if let Some(f) = frame {
                        return Some(outbox.start_bulk(f));
                    }
                }
                None => {
                    // The timeout only re-checks `closed`; `close` also
                    // wakes us.
                    outbox = self
                        .ready
                        .wait_timeout(outbox, Duration::from_secs(1))
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
            }
        }
    }
}

#[derive(Default)]
struct Table {
    by_peer: HashMap<u64, Vec<Conn>>,
    dialing: HashMap<String, Instant>,
    /// Every open connection (identified or not), to close them all on
    /// shutdown; each connection removes itself when it ends.
    open: HashMap<u64, TcpStream>,
    /// When a refusal was last logged, per peer address: a peer that keeps
    /// redialing must not flood the error log.
    refusals_logged: HashMap<String, Instant>,
    /// Accepted connections before their hello, per peer host (bounded by
    /// `MAX_OPENING`).
    opening: HashMap<std::net::IpAddr, usize>,
}

/// An accepted connection's place among those still opening; given back
/// when dropped (hello done, or the connection ended).
struct OpeningSlot {
    table: Arc<Mutex<Table>>,
    host: std::net::IpAddr,
}

impl OpeningSlot {
    /// A place for a connection from `host`, if the bounds allow one.
    fn take(table: &Arc<Mutex<Table>>, host: std::net::IpAddr) -> Option<OpeningSlot> {
        let mut t = table.lock().unwrap_or_else(|p| p.into_inner());
        let total: usize = t.opening.values().sum();
        let here = t.opening.get(&host).copied().unwrap_or(0);
        if total >= MAX_OPENING || here >= MAX_OPENING_PER_HOST {
            return None;
        }
        *t.opening.entry(host).or_default() += 1;
        Some(OpeningSlot {
            table: table.clone(),
            host,
        })
    }
}

impl Drop for OpeningSlot {
    fn drop(&mut self) {
        let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = t.opening.get_mut(&self.host) {
            *n -= 1;
            if *n == 0 {
                t.opening.remove(&self.host);
            }
        }
    }
}

/// Bytes of peer messages handed to the group thread and not handled yet,
/// at most (one message may always go, whatever its size): a reader waits
/// above it, and TCP then holds the peer back, so a group thread slowed
/// by a big writeset does not make the readers queue without bound.
pub const INPUT_BUDGET: usize = 256 << 20;

/// The bytes counted against [`INPUT_BUDGET`], shared by the readers and
/// the group thread.
#[derive(Clone, Default)]
pub struct InputBudget(Arc<AtomicUsize>);

impl InputBudget {
    /// Waits until `bytes` fit (they always do when nothing is in flight);
    /// `false` if `stop` was set meanwhile.
    fn take(&self, bytes: usize, stop: &AtomicBool) -> bool {
        loop {
            let used = self.0.load(Ordering::SeqCst);
            if used == 0 || used + bytes <= INPUT_BUDGET {
                let next = used + bytes;
                if self
                    .0
                    .compare_exchange(used, next, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
                {
                    return true;
                }
                continue;
            }
            if stop.load(Ordering::SeqCst) {
                return false;
            }
            thread::sleep(Duration::from_millis(1));
        }
    }

    /// The group thread handled a message of `bytes`.
    pub fn give_back(&self, bytes: usize) {
        self.0.fetch_sub(bytes, Ordering::SeqCst);
    }

    #[cfg(test)]
    fn in_flight(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// What a peer message counts against [`INPUT_BUDGET`].
pub fn input_bytes(msg: &PeerMsg) -> usize {
    match msg {
        PeerMsg::Raft(bytes) => bytes.len(),
        _ => 64,
    }
}

/// A refused peer is logged again after this long.
const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(30);

impl Ctx {
    fn log_refusal_now(&self, peer_addr: &str) -> bool {
        let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        match t.refusals_logged.get(peer_addr) {
            Some(at) if now < *at + REFUSAL_LOG_EVERY => false,
            _ => {
                t.refusals_logged.insert(peer_addr.to_string(), now);
                true
            }
        }
    }
}

pub struct Transport {
    #[cfg_attr(not(test), allow(dead_code))]
    local: Option<SocketAddr>,
    me: Identity,
    table: Arc<Mutex<Table>>,
    inputs: Sender<Input>,
    budget: InputBudget,
    stop: Arc<AtomicBool>,
    /// `gmcast.isolate`: while set, every connection is closed, nothing is
    /// dialed and accepted connections are dropped before the hello.
    isolated: Arc<AtomicBool>,
    next_conn: Arc<AtomicU64>,
    security: Arc<PeerSecurity>,
    admit: Admission,
    listener: Option<thread::JoinHandle<()>>,
}

impl Transport {
    /// Binds the listener (`host:port`) and starts accepting peers.
    pub fn start(
        me: Identity,
        listen: &str,
        security: Arc<PeerSecurity>,
        admit: Admission,
        inputs: Sender<Input>,
    ) -> Result<Transport, String> {
        let listener =
            TcpListener::bind(listen).map_err(|e| format!("cannot listen on {listen}: {e}"))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("listener on {listen}: {e}"))?;
        let local = listener.local_addr().ok();
        info!(
            "group channel listening on {}, advertised as {}",
            local.map_or(listen.to_string(), |a| a.to_string()),
            me.peer_addr
        );
        let mut t = Transport {
            local,
            me,
            table: Arc::default(),
            inputs,
            budget: InputBudget::default(),
            stop: Arc::default(),
            isolated: Arc::default(),
            next_conn: Arc::new(AtomicU64::new(1)),
            security,
            admit,
            listener: None,
        };
        let ctx = t.context();
        t.listener = Some(
            thread::Builder::new()
                .name("lockstep-accept".into())
                .spawn(move || accept_loop(listener, ctx))
                .map_err(|e| format!("cannot start the listener thread: {e}"))?,
        );
        Ok(t)
    }

    /// The address the listener is bound to (tests bind port 0).
    #[cfg(test)]
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local
    }

    /// The budget the group thread gives back to as it handles messages.
    pub fn input_budget(&self) -> InputBudget {
        self.budget.clone()
    }

    fn context(&self) -> Ctx {
        Ctx {
            me: self.me.clone(),
            table: self.table.clone(),
            inputs: self.inputs.clone(),
            budget: self.budget.clone(),
            stop: self.stop.clone(),
            isolated: self.isolated.clone(),
            next_conn: self.next_conn.clone(),
            security: self.security.clone(),
            admit: self.admit.clone(),
        }
    }

    /// `gmcast.isolate=1`: cut this node off from every peer (as a network
    /// partition would) until `set_isolated(false)`. Raft and the quorum
    /// rules then do what they do on a real partition.
    pub fn set_isolated(&self, on: bool) {
        let was = self.isolated.swap(on, Ordering::SeqCst);
        if on && !was {
            self.close_all();
        }
    }

    pub fn is_isolated(&self) -> bool {
        self.isolated.load(Ordering::SeqCst)
    }

    /// Whether a refusal involving `addr` (a peer's advertised or socket
    /// address) has been logged: proof that the handshake ran and failed.
    #[cfg(test)]
    fn refused(&self, addr_prefix: &str) -> bool {
        let t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        t.refusals_logged.keys().any(|k| k.starts_with(addr_prefix))
    }

    /// Closes every open connection; their threads end and unregister.
    fn close_all(&self) {
        let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        for s in t.open.values() {
            let _ = s.shutdown(Shutdown::Both);
        }
        for c in t.by_peer.values().flatten() {
            c.out.close();
        }
        t.by_peer.clear();
    }

    /// Sends to a peer on `lane`; if there is no connection, dials `addr`
    /// (rate limited) and drops the message: Raft resends.
    pub fn send(&self, to: u64, bytes: Out, lane: Lane, addr: Option<&str>) {
        let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(conns) = t.by_peer.get(&to) {
            if let Some(c) = conns.first() {
                c.out.push(lane, bytes);
                return;
            }
        }
        if let Some(addr) = addr {
            // The node at that address restarted under a new Raft id:
            // deliver there anyway, so it can answer (a leader tells a
            // former member that it is not one any more).
            let same_place = t
                .by_peer
                .values()
                .filter_map(|conns| conns.first())
                .find(|c| c.addr == addr);
            if let Some(c) = same_place {
                c.out.push(lane, bytes);
                return;
            }
            self.dial_locked(&mut t, addr);
        }
    }

    /// Sends to every identified peer.
    pub fn broadcast(&self, bytes: &[u8]) {
        let t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        for conns in t.by_peer.values() {
            if let Some(c) = conns.first() {
                c.out.push(Lane::Control, Out::Frame(bytes.to_vec()));
            }
        }
    }

    /// Dials `addr` unless dialed recently.
    pub fn dial(&self, addr: &str) {
        let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        self.dial_locked(&mut t, addr);
    }

    fn dial_locked(&self, t: &mut Table, addr: &str) {
        if addr == self.me.peer_addr
            || self.stop.load(Ordering::Relaxed)
            || self.isolated.load(Ordering::SeqCst)
        {
            return;
        }
        let now = Instant::now();
        if t.dialing
            .get(addr)
            .is_some_and(|at| now < *at + REDIAL_EVERY)
        {
            return;
        }
        t.dialing.insert(addr.to_string(), now);
        let ctx = self.context();
        let addr = addr.to_string();
        let _ = thread::Builder::new()
            .name("lockstep-dial".into())
            .spawn(move || {
                let Some(stream) = dial(&addr, ctx.me.bind_ip) else {
                    return;
                };
                run_connection(stream, ctx, Side::Dialed, None);
            });
    }

    /// Closes every connection and the listener.
    pub fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        {
            let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
            for s in t.open.values() {
                let _ = s.shutdown(Shutdown::Both);
            }
            for c in t.by_peer.values().flatten() {
                c.out.close();
            }
            t.by_peer.clear();
            t.open.clear();
        }
        if let Some(h) = self.listener.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Transport {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[derive(Clone)]
struct Ctx {
    me: Identity,
    table: Arc<Mutex<Table>>,
    inputs: Sender<Input>,
    budget: InputBudget,
    stop: Arc<AtomicBool>,
    isolated: Arc<AtomicBool>,
    next_conn: Arc<AtomicU64>,
    security: Arc<PeerSecurity>,
    admit: Admission,
}

/// Which end of a connection this node is: the dialer speaks first.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Dialed,
    Accepted,
}

fn dial(addr: &str, from: Option<std::net::IpAddr>) -> Option<TcpStream> {
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

/// Connects to `to` from address `ip` (any port).
fn dial_from(ip: std::net::IpAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(to), Type::STREAM, Some(Protocol::TCP))?;
    s.bind(&SocketAddr::new(ip, 0).into())?;
    s.connect_timeout(&to.into(), CONNECT_TIMEOUT)?;
    Ok(s.into())
}

fn accept_loop(listener: TcpListener, ctx: Ctx) {
    while !ctx.stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) if ctx.isolated.load(Ordering::SeqCst) => {
                let _ = stream.shutdown(Shutdown::Both);
            }
            Ok((stream, from)) => {
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
                let _ = thread::Builder::new()
                    .name("lockstep-peer".into())
                    .spawn(move || run_connection(stream, c, Side::Accepted, Some(slot)));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                warn!("group channel accept failed: {e}");
                thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// Reads one message (blocking), or `None` on EOF/error (logged).
/// Without an `inbox` (before the hello) chunked messages are refused,
/// so a stranger gets at most one frame's worth of memory.
fn read_msg(
    stream: &mut Reader,
    dec: &mut FrameDecoder,
    mut inbox: Option<&mut Inbox>,
    peer: &str,
) -> Option<PeerMsg> {
    let mut buf = [0u8; 64 * 1024];
    // Before the hello, read no more than the hello may be.
    let chunk = if inbox.is_some() {
        buf.len()
    } else {
        HELLO_MAX_FRAME
    };
    let mut started: Option<Instant> = None;
    loop {
        match dec.next_frame() {
            Ok(Some(f)) => {
                let whole = match inbox.as_deref_mut() {
                    Some(inbox) => match inbox.accept(f) {
                        Ok(Some(f)) => {
                            if let Some(t0) = started.take() {
                                if f.payload.len() >= LOG_BIG {
                                    info!(
                                        "received a message of {} MiB from {peer} in {} ms",
                                        f.payload.len() >> 20,
                                        t0.elapsed().as_millis()
                                    );
                                }
                            }
                            f
                        }
                        Ok(None) => {
                            started.get_or_insert_with(Instant::now);
                            continue;
                        }
                        Err(e) => {
                            warn!("dropping connection to {peer}: {e}");
                            return None;
                        }
                    },
                    None => f,
                };
                return match PeerMsg::from_frame(whole) {
                    Ok(m) => Some(m),
                    Err(e) => {
                        warn!("dropping connection to {peer}: bad message: {e}");
                        None
                    }
                };
            }
            Ok(None) => {}
            Err(e) => {
                warn!("dropping connection to {peer}: {e}");
                return None;
            }
        }
        match stream.read(&mut buf[..chunk]) {
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

fn run_connection(stream: TcpStream, ctx: Ctx, side: Side, slot: Option<OpeningSlot>) {
    let conn_id = ctx.next_conn.fetch_add(1, Ordering::Relaxed);
    if let Ok(s) = stream.try_clone() {
        let mut t = ctx.table.lock().unwrap_or_else(|p| p.into_inner());
        if ctx.stop.load(Ordering::Relaxed) || ctx.isolated.load(Ordering::SeqCst) {
            return;
        }
        t.open.insert(conn_id, s);
    }
    let peer = serve_connection(stream, &ctx, conn_id, side, slot);
    let mut t = ctx.table.lock().unwrap_or_else(|p| p.into_inner());
    t.open.remove(&conn_id);
    if let Some(raft_id) = peer {
        if let Some(conns) = t.by_peer.get_mut(&raft_id) {
            conns.retain(|c| c.id != conn_id);
            if conns.is_empty() {
                t.by_peer.remove(&raft_id);
            }
        }
    }
}

/// Handshake, then frames until the connection ends. Returns the peer's
/// Raft id if the handshake succeeded.
fn serve_connection(
    stream: TcpStream,
    ctx: &Ctx,
    conn_id: u64,
    side: Side,
    slot: Option<OpeningSlot>,
) -> Option<u64> {
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
            return None;
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
        Err(why) if why.mismatch => {
            if ctx.log_refusal_now(&peer) {
                match side {
                    Side::Dialed => warn!("cannot open a group connection to {peer}: {why}"),
                    Side::Accepted => warn!("refusing group connection from {peer}: {why}"),
                }
            }
            return None;
        }
        Err(why) => {
            // A peer restarting, a port scan: a note, not a warning.
            if ctx.log_refusal_now(&peer) {
                info!("group connection with {peer} ended before it opened: {why}");
            }
            return None;
        }
    };
    let hello = PeerMsg::Hello {
        version: PROTOCOL_VERSION,
        cluster: ctx.me.cluster.clone(),
        raft_id: ctx.me.raft_id,
        peer_addr: ctx.me.peer_addr.clone(),
    };
    writer.write_all(&hello.to_frame().ok()?).ok()?;
    let _ = stream.tcp().set_read_timeout(Some(HELLO_TIMEOUT));
    // Bounds what a peer can make us buffer before its hello, and any
    // single frame after it (larger messages come in chunks).
    let mut dec = FrameDecoder::new(HELLO_MAX_FRAME);
    let Some(first) = read_msg(&mut stream, &mut dec, None, &peer) else {
        // Also what a restarting peer looks like: a note, not a warning.
        if side == Side::Dialed && ctx.log_refusal_now(&peer) {
            info!(
                "group connection to {peer} ended before its hello (this node: {}; if \
                 that node refused us, its log says why)",
                ctx.security.describe()
            );
        }
        return None;
    };
    let (raft_id, peer_addr) = match first {
        PeerMsg::Hello {
            version,
            cluster,
            raft_id,
            peer_addr,
        } => match check_hello(&ctx.me.cluster, version, &cluster) {
            Ok(()) => (raft_id, peer_addr),
            Err(reason) => {
                if ctx.log_refusal_now(&peer_addr) {
                    warn!("refusing group connection from {peer} ({peer_addr}): {reason}");
                }
                if let Ok(b) = (PeerMsg::Refuse { reason }).to_frame() {
                    let _ = writer.write_all(&b);
                }
                return None;
            }
        },
        PeerMsg::Refuse { reason } => {
            if ctx.log_refusal_now(&peer) {
                warn!("peer {peer} refused the group connection: {reason}");
            }
            return None;
        }
        _ => {
            warn!("dropping connection to {peer}: it did not start with a hello");
            return None;
        }
    };
    if raft_id == ctx.me.raft_id {
        return None; // dialed ourselves through a listed address
    }
    let _ = stream.tcp().set_read_timeout(None);
    dec.set_max_payload(MAX_WIRE_FRAME);
    drop(slot); // known now: no longer counted as opening
    let out = Arc::new(Queue::default());
    {
        let mut t = ctx.table.lock().unwrap_or_else(|p| p.into_inner());
        if ctx.stop.load(Ordering::Relaxed) || ctx.isolated.load(Ordering::SeqCst) {
            return None;
        }
        t.by_peer.entry(raft_id).or_default().push(Conn {
            id: conn_id,
            out: out.clone(),
            addr: peer_addr.clone(),
        });
    }
    let _ = ctx.inputs.send(Input::PeerUp { raft_id, peer_addr });
    let writer_out = out.clone();
    let writer = thread::Builder::new()
        .name("lockstep-peer-tx".into())
        .spawn(move || {
            let mut w: Writer = writer;
            while let Some(bytes) = writer_out.next() {
                if w.write_all(&bytes).is_err() {
                    w.close();
                    writer_out.close();
                    return;
                }
            }
        });
    let mut inbox = Inbox::default();
    while let Some(msg) = read_msg(&mut stream, &mut dec, Some(&mut inbox), &peer) {
        if let PeerMsg::Refuse { reason } = &msg {
            warn!("peer {peer} refused the group connection: {reason}");
            break;
        }
        if !ctx.budget.take(input_bytes(&msg), &ctx.stop) {
            break;
        }
        if ctx.inputs.send(Input::Peer { from: raft_id, msg }).is_err() {
            break;
        }
    }
    let _ = stream.tcp().shutdown(Shutdown::Both);
    // The writer ends now, or on its first failed write.
    out.close();
    drop(writer);
    Some(raft_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::{channel, Receiver};

    #[test]
    fn the_input_budget_holds_readers_back_until_the_group_thread_catches_up() {
        let budget = InputBudget::default();
        let stop = AtomicBool::new(false);
        assert!(budget.take(INPUT_BUDGET * 2, &stop), "alone, any size goes");
        budget.give_back(INPUT_BUDGET * 2);
        assert!(budget.take(INPUT_BUDGET - 10, &stop));
        // One more that does not fit waits until the first is handled.
        let waiting = {
            let b = budget.clone();
            thread::spawn(move || b.take(100, &AtomicBool::new(false)))
        };
        thread::sleep(Duration::from_millis(50));
        assert!(!waiting.is_finished(), "a reader past the budget waits");
        budget.give_back(INPUT_BUDGET - 10);
        assert!(waiting.join().unwrap());
        assert_eq!(budget.in_flight(), 100);
        // Shutting down ends a wait.
        assert!(budget.take(INPUT_BUDGET - 100, &stop));
        let stop = Arc::new(AtomicBool::new(false));
        let waiting = {
            let (b, s) = (budget.clone(), stop.clone());
            thread::spawn(move || b.take(1, &s))
        };
        thread::sleep(Duration::from_millis(20));
        stop.store(true, Ordering::SeqCst);
        assert!(!waiting.join().unwrap());
    }

    fn start(cluster: &str, raft_id: u64) -> (Transport, Receiver<Input>) {
        start_with(cluster, raft_id, PeerSecurity::plain())
    }

    fn start_with(
        cluster: &str,
        raft_id: u64,
        security: PeerSecurity,
    ) -> (Transport, Receiver<Input>) {
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
            tx,
        )
        .unwrap();
        (t, rx)
    }

    fn peer_up(rx: &Receiver<Input>) -> Option<u64> {
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if let Ok(Input::PeerUp { raft_id, .. }) = rx.recv_timeout(Duration::from_millis(50)) {
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
        let ca = lockstep_net::pki::Authority::generate("test CA").unwrap();
        names
            .iter()
            .map(|n| {
                let f = ca.issue_into(dir, n, &[]).unwrap();
                let files = lockstep_net::tls::TlsFiles {
                    cert: f.cert,
                    key: f.key,
                    ca: Some(f.ca),
                    cipher: None,
                };
                PeerSecurity::tls(files, dynamic).unwrap()
            })
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
            let t = a.table.lock().unwrap();
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
        assert!(eventually(|| a.table.lock().unwrap().opening.is_empty()));
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
        // Its own hello went out before the frame was refused; nothing else.
        let hello = PeerMsg::from_frame(
            lockstep_core::wire::frame::decode_one(got, MAX_WIRE_FRAME).unwrap(),
        )
        .unwrap();
        assert!(matches!(hello, PeerMsg::Hello { .. }));
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
        let a =
            Transport::start(me, "127.0.0.1:0", Arc::new(PeerSecurity::plain()), deny, tx).unwrap();
        let mut s = TcpStream::connect(a.local_addr().unwrap()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let hello = PeerMsg::Hello {
            version: PROTOCOL_VERSION,
            cluster: "c".into(),
            raft_id: 2,
            peer_addr: "test-2".into(),
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

    fn exchange((a, rx_a): (Transport, Receiver<Input>), (b, rx_b): (Transport, Receiver<Input>)) {
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
            matches!(got, Input::Peer { from: 2, msg: PeerMsg::Raft(ref m) } if m == &vec![9, 9])
        );
        let got = rx_a.recv_timeout(Duration::from_secs(5)).unwrap();
        assert!(matches!(got, Input::Peer { from: 2, msg: PeerMsg::Raft(ref m) } if m == &big));
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
        // The connection was made and both sides refused it at the hello
        // (not merely: nothing connected).
        assert!(
            eventually(|| a.refused("test-2")),
            "a never refused b's hello"
        );
        assert!(
            eventually(|| b.refused("test-1")),
            "b never refused a's hello"
        );
        assert_eq!(peer_up(&rx_a), None);
        assert_eq!(peer_up(&rx_b), None);
    }

    #[test]
    fn an_isolated_node_drops_its_peers_refuses_new_ones_and_reconnects_after() {
        let (a, rx_a) = start("c", 1);
        let (b, rx_b) = start("c", 2);
        let a_addr = a.local_addr().unwrap().to_string();
        b.dial(&a_addr);
        assert_eq!(peer_up(&rx_a), Some(2));
        assert_eq!(peer_up(&rx_b), Some(1));
        a.set_isolated(true);
        assert!(a.is_isolated());
        // b's connection ends; a message to a no longer arrives.
        assert!(
            eventually(|| b.table.lock().unwrap().by_peer.is_empty()),
            "b still has a connection to the isolated node"
        );
        let frame = PeerMsg::Raft(vec![1]).to_frame().unwrap();
        b.send(1, Out::Frame(frame), Lane::Control, Some(&a_addr));
        thread::sleep(REDIAL_EVERY + Duration::from_millis(100));
        b.dial(&a_addr);
        assert_eq!(peer_up(&rx_a), None, "an isolated node accepted a peer");
        assert!(
            !matches!(rx_a.try_recv(), Ok(Input::Peer { .. })),
            "an isolated node received a message"
        );
        // Lifting the isolation lets peers connect again.
        a.set_isolated(false);
        thread::sleep(REDIAL_EVERY);
        b.dial(&a_addr);
        assert_eq!(peer_up(&rx_a), Some(2));
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
}
