//! TCP between group members: one listener thread, a short-lived thread
//! per connection while it opens, and one event loop that reads and
//! writes every open connection (`event_loop`, ADR 0031). Every
//! connection starts with admission
//! (the allowlist), TLS or the check that both ends agree on plain text,
//! and a hello (protocol version, cluster name, Raft id): the dialer
//! speaks first, so a stranger learns nothing. After that each message is
//! handed to the owner's [`Sink`] as an [`Inbound::Peer`]. Any decoding
//! error drops the connection with a log line; Raft retransmits what was
//! lost.
//!
//! Each connection has two lanes (`lockstep_core::wire::lanes`): control
//! messages (heartbeats, votes) go before the chunks of bulk ones (log
//! appends), so a 300 MB writeset never delays a heartbeat by more than
//! one 64 KiB chunk. Both lanes are bounded; what does not fit is dropped
//! (Raft resends) and counted.

mod budget;
mod connection;
mod event_loop;
mod queue;
mod receive;
mod staged;
mod table;
#[cfg(test)]
mod tests;

pub use budget::{input_bytes, InputBudget, INPUT_BUDGET};
pub use event_loop::{LoopOwner, LoopWaker, OwnerBack};
pub use queue::Out;
pub use staged::Staged;
pub use table::{MAX_ACCEPTS_PER_HOST_PER_SEC, MAX_OPENING, MAX_OPENING_PER_HOST};

use crate::identity::{describe, short, CertFingerprint};
use crate::secure::PeerSecurity;
use crate::threads::Threads;
use connection::{accept_loop, dial, run_connection, ListenerWait};
use lockstep_core::group::peer::PeerMsg;
use lockstep_core::wire::lanes::Lane;
use log::{info, warn};
use std::collections::HashMap;
use std::net::{Shutdown, SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};
use table::Table;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound on the first frame from a peer (its hello, or a refusal): what a
/// stranger can make this node buffer before it is known. Reads before
/// the hello are this small too.
const HELLO_MAX_FRAME: usize = 4096;
/// How long `shutdown` waits for the connection threads to end.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(10);
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

/// What the transport hands its owner (the group driver's rounds).
#[derive(Debug)]
pub enum Inbound {
    /// A peer finished its hello: messages to `raft_id` can go now.
    /// `cert`: the fingerprint of its certificate (`None`: plain TCP).
    PeerUp {
        raft_id: u64,
        peer_addr: String,
        cert: Option<CertFingerprint>,
    },
    /// A whole message from an identified peer.
    Peer { from: u64, msg: PeerMsg },
    /// The last connection to `raft_id` closed.
    PeerDown { raft_id: u64 },
}

/// Where inbound messages go; `false` when the owner is gone (the
/// connection then ends).
pub type Sink = Arc<dyn Fn(Inbound) -> bool + Send + Sync>;

/// What a [`Quick`] handler did with a message.
pub enum Handled {
    /// Done on the event loop; the optional frame goes back to the
    /// sender on the control lane.
    Done(Option<Vec<u8>>),
    /// Not for it: on to the [`Sink`].
    Pass(PeerMsg),
}

/// A handler that runs on the event loop before the sink, for small messages that must not wait for the owner's round
/// (causal-read asks and answers, ADR 0016). It must not block.
pub type Quick = Arc<dyn Fn(u64, PeerMsg) -> Handled + Send + Sync>;

/// Gives the event loop its owner ([`Transport::owner_seat`]).
pub struct OwnerSeat(event_loop::LoopHandle);

impl OwnerSeat {
    /// From now on the owner's turns run on the loop's thread, when
    /// [`Transport::owner_waker`] wakes it, after messages came, and at
    /// the deadlines it gives. A stopped owner is sent to `back`, whose
    /// receiver then calls its [`LoopOwner::shut`].
    pub fn seat(self, owner: Box<dyn LoopOwner>, back: OwnerBack) {
        self.0.set_owner(owner, back);
    }
}

/// Sends frames to peers from any thread (the owner's [`Transport::send`]
/// without dialing).
#[derive(Clone)]
pub struct PeerSender {
    table: Arc<Mutex<Table>>,
}

impl PeerSender {
    /// Sends `frame` to `to` on the control lane (from this thread when
    /// nothing waits before it: `Queue::push`); `false` when there is no
    /// connection to it (nothing is dialed: the caller falls back).
    pub fn send_control(&self, to: u64, frame: Vec<u8>) -> bool {
        let out = {
            let t = self.table.lock().unwrap_or_else(|p| p.into_inner());
            match t.by_peer.get(&to).and_then(|conns| conns.first()) {
                Some(c) => c.out.clone(),
                None => return false,
            }
        };
        out.push(Lane::Control, Out::Frame(frame));
        true
    }
}

/// A refused peer is logged again after this long.
const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(30);

impl Ctx {
    fn log_refusal_now(&self, peer_addr: &str) -> bool {
        let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        t.refusal_due(peer_addr, Instant::now(), REFUSAL_LOG_EVERY)
    }
}

pub struct Transport {
    #[cfg_attr(not(test), allow(dead_code))]
    local: Option<SocketAddr>,
    /// What every connection thread shares with the transport.
    ctx: Ctx,
    listener: Option<thread::JoinHandle<()>>,
    /// Ends the listener thread's wait for connections (`shutdown`).
    listener_waker: Option<mio::Waker>,
}

impl Transport {
    /// Binds the listener (`host:port`) and starts accepting peers.
    pub fn start(
        me: Identity,
        listen: &str,
        security: Arc<PeerSecurity>,
        admit: Admission,
        sink: Sink,
    ) -> Result<Transport, String> {
        let listener =
            TcpListener::bind(listen).map_err(|e| format!("cannot listen on {listen}: {e}"))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("listener on {listen}: {e}"))?;
        let local = listener.local_addr().ok();
        let (poll, lp) = event_loop::new()?;
        info!(
            "group channel listening on {}, advertised as {}",
            local.map_or(listen.to_string(), |a| a.to_string()),
            me.peer_addr
        );
        let mut t = Transport {
            local,
            ctx: Ctx {
                me,
                table: Arc::default(),
                sink,
                quick: Arc::default(),
                budget: InputBudget::default(),
                stop: Arc::default(),
                isolated: Arc::default(),
                next_conn: Arc::new(AtomicU64::new(1)),
                security,
                admit,
                threads: Threads::default(),
                bindings: Arc::default(),
                bindings_unchecked: Arc::default(),
                lp,
            },
            listener: None,
            listener_waker: None,
        };
        let ctx = t.context();
        if !t
            .ctx
            .threads
            .spawn("lockstep-net", move || event_loop::run(poll, ctx))
        {
            return Err("cannot start the group connections' event loop thread".into());
        }
        let ctx = t.context();
        let (waiting, waker) =
            ListenerWait::new(&listener).map_err(|e| format!("listener on {listen}: {e}"))?;
        t.listener_waker = Some(waker);
        t.listener = Some(
            thread::Builder::new()
                .name("lockstep-accept".into())
                .spawn(move || accept_loop(listener, ctx, waiting))
                .map_err(|e| format!("cannot start the listener thread: {e}"))?,
        );
        Ok(t)
    }

    /// The address the listener is bound to (tests bind port 0).
    #[cfg(test)]
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local
    }

    /// The budget the owner's rounds give back to as they handle messages.
    pub fn input_budget(&self) -> InputBudget {
        self.ctx.budget.clone()
    }

    fn context(&self) -> Ctx {
        self.ctx.clone()
    }

    /// Where the event loop's owner is given to it (ADR 0039); a handle,
    /// since the owner may hold this transport.
    pub fn owner_seat(&self) -> OwnerSeat {
        OwnerSeat(self.ctx.lp.clone())
    }

    /// Wakes the loop's owner from any thread.
    pub fn owner_waker(&self) -> LoopWaker {
        self.ctx.lp.owner_waker()
    }

    /// Installs the event loop's [`Quick`] handler (once; later calls
    /// are ignored).
    pub fn set_quick(&self, quick: Quick) {
        let _ = self.ctx.quick.set(quick);
    }

    /// A handle that sends from other threads.
    pub fn sender(&self) -> PeerSender {
        PeerSender {
            table: self.ctx.table.clone(),
        }
    }

    /// `gmcast.isolate=1`: cut this node off from every peer (as a network
    /// partition would) until `set_isolated(false)`. Raft and the quorum
    /// rules then do what they do on a real partition.
    pub fn set_isolated(&self, on: bool) {
        let was = self.ctx.isolated.swap(on, Ordering::SeqCst);
        if on && !was {
            self.close_all();
        }
    }

    /// Whether a connection with `raft_id` is open now (after its hello).
    pub fn is_connected(&self, raft_id: u64) -> bool {
        self.ctx
            .table
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .by_peer
            .get(&raft_id)
            .is_some_and(|conns| !conns.is_empty())
    }

    pub fn is_isolated(&self) -> bool {
        self.ctx.isolated.load(Ordering::SeqCst)
    }

    /// Whether a refusal involving `addr` (a peer's advertised or socket
    /// address) has been logged: proof that the handshake ran and failed.
    #[cfg(test)]
    fn refused(&self, addr_prefix: &str) -> bool {
        let t = self.ctx.table.lock().unwrap_or_else(|p| p.into_inner());
        t.refusals_logged.keys().any(|k| k.starts_with(addr_prefix))
    }

    /// Closes every open connection; their threads end and unregister.
    fn close_all(&self) {
        let mut t = self.ctx.table.lock().unwrap_or_else(|p| p.into_inner());
        for s in t.open.values() {
            let _ = s.shutdown(Shutdown::Both);
        }
        for c in t.by_peer.values().flatten() {
            c.out.close();
        }
        t.by_peer.clear();
    }

    /// The members' certificates, as the group bound them (ADR 0014): a
    /// hello claiming one of these Raft ids with another certificate (or
    /// none) is refused and logged. An open connection is closed now if
    /// its id was unbound until this call and it presented another
    /// certificate (an impostor that got in before the binding). A
    /// member that binds itself anew (`socket.ssl_reload`) keeps its
    /// open connections, which it opened with the certificate bound
    /// then, as Galera keeps them: only its new connections need the
    /// new certificate. A node without TLS keeps the table and checks
    /// nothing (`PeerSecurity::enforces_bindings`).
    pub fn bind_identities(&self, bindings: HashMap<u64, CertFingerprint>) {
        if !self.ctx.security.enforces_bindings() {
            if !bindings.is_empty() && !self.ctx.bindings_unchecked.swap(true, Ordering::Relaxed) {
                info!(
                    "the cluster binds {} member(s) to their certificates; this node has no TLS \
                     (socket.ssl_cert, socket.ssl_key, socket.ssl_ca) and cannot check them: it \
                     trusts its network as plain Galera does",
                    bindings.len()
                );
            }
            *self.ctx.bindings.write().unwrap_or_else(|p| p.into_inner()) = bindings;
            return;
        }
        let before = self
            .ctx
            .bindings
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut t = self.ctx.table.lock().unwrap_or_else(|p| p.into_inner());
        let mut closed = Vec::new();
        for (id, conns) in t.by_peer.iter_mut() {
            let Some(bound) = bindings.get(id) else {
                continue;
            };
            let earlier = before.get(id);
            conns.retain(|c| {
                let cert = c.cert.as_ref();
                if cert == Some(bound) || (earlier.is_some() && cert == earlier) {
                    return true;
                }
                warn!(
                    "closing the group connection with {} as Raft id {id:#x}: the cluster bound \
                     that member to certificate {}, and this connection presented {}",
                    c.addr,
                    short(bound),
                    describe(cert)
                );
                c.out.close();
                closed.push(c.id);
                false
            });
        }
        for id in closed {
            if let Some(s) = t.open.get(&id) {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
        drop(t);
        *self.ctx.bindings.write().unwrap_or_else(|p| p.into_inner()) = bindings;
    }

    /// Sends to a peer on `lane`; if there is no connection, dials `addr`
    /// (rate limited) and drops the message: Raft resends.
    pub fn send(&self, to: u64, bytes: Out, lane: Lane, addr: Option<&str>) {
        let mut staged = Staged::default();
        self.stage(&mut staged, to, bytes, lane, addr);
        staged.send();
    }

    /// [`Transport::send`] without the write: picks the connection (or
    /// dials, as `send` does) and adds the message to `staged`, whose
    /// [`Staged::send`] writes it later.
    pub fn stage(&self, staged: &mut Staged, to: u64, bytes: Out, lane: Lane, addr: Option<&str>) {
        let mut t = self.ctx.table.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = t.by_peer.get(&to).and_then(|conns| conns.first());
        if out.is_none() {
            // The node at that address restarted under a new Raft id:
            // deliver there anyway, so it can answer (a leader tells a
            // former member that it is not one any more).
            out = addr.and_then(|addr| {
                t.by_peer
                    .values()
                    .filter_map(|conns| conns.first())
                    .find(|c| c.addr == addr)
            });
        }
        match out.map(|c| c.out.clone()) {
            Some(out) => staged.add(out, lane, bytes),
            None => {
                if let Some(addr) = addr {
                    self.dial_locked(&mut t, addr);
                }
            }
        }
    }

    /// Stages a message to every identified peer (see
    /// [`Transport::stage`]).
    pub fn stage_broadcast(&self, staged: &mut Staged, bytes: &[u8]) {
        let t = self.ctx.table.lock().unwrap_or_else(|p| p.into_inner());
        for conns in t.by_peer.values() {
            if let Some(c) = conns.first() {
                staged.add(c.out.clone(), Lane::Control, Out::Frame(bytes.to_vec()));
            }
        }
    }

    /// Dials `addr` unless dialed recently.
    pub fn dial(&self, addr: &str) {
        let mut t = self.ctx.table.lock().unwrap_or_else(|p| p.into_inner());
        self.dial_locked(&mut t, addr);
    }

    fn dial_locked(&self, t: &mut Table, addr: &str) {
        if addr == self.ctx.me.peer_addr
            || self.ctx.stop.load(Ordering::Relaxed)
            || self.ctx.isolated.load(Ordering::SeqCst)
        {
            return;
        }
        let now = Instant::now();
        // One connection per peer: callers redial on a timer (a restarting
        // member every 500 ms), and a connection per call would pile up
        // sockets and threads on both ends for as long as they wait.
        if t.reaches(addr)
            || t.dialing
                .get(addr)
                .is_some_and(|at| now < *at + REDIAL_EVERY)
        {
            return;
        }
        t.dialing.insert(addr.to_string(), now);
        let ctx = self.context();
        let addr = addr.to_string();
        let threads = ctx.threads.clone();
        threads.spawn("lockstep-dial", move || {
            let Some(stream) = dial(&addr, ctx.me.bind_ip) else {
                return;
            };
            run_connection(stream, ctx, Side::Dialed, None, Some(addr));
        });
    }

    /// Closes every connection and the listener.
    pub fn shutdown(&mut self) {
        self.ctx.stop.store(true, Ordering::Relaxed);
        self.ctx.lp.wake();
        self.close_all();
        self.ctx
            .table
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .open
            .clear();
        if let Some(w) = &self.listener_waker {
            let _ = w.wake();
        }
        if let Some(h) = self.listener.take() {
            let _ = h.join();
        }
        // Every socket is shut and the event loop woken: it ends every
        // connection; an opening one fails its next step, a dialer stops
        // after its connect attempt.
        let left = self.ctx.threads.wait_all(SHUTDOWN_WAIT);
        if left > 0 {
            warn!("{left} group connection threads still run after {SHUTDOWN_WAIT:?}");
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
    sink: Sink,
    /// Set once, after start (`Transport::set_quick`).
    quick: Arc<std::sync::OnceLock<Quick>>,
    budget: InputBudget,
    stop: Arc<AtomicBool>,
    /// `gmcast.isolate`: while set, every connection is closed, nothing is
    /// dialed and accepted connections are dropped before the hello.
    isolated: Arc<AtomicBool>,
    next_conn: Arc<AtomicU64>,
    security: Arc<PeerSecurity>,
    admit: Admission,
    threads: Threads,
    /// The members' certificates (`Transport::bind_identities`).
    bindings: Arc<std::sync::RwLock<HashMap<u64, CertFingerprint>>>,
    /// Set once this node (without TLS) has said it cannot check them.
    bindings_unchecked: Arc<AtomicBool>,
    /// The event loop that serves open connections.
    lp: event_loop::LoopHandle,
}

/// Which end of a connection this node is: the dialer speaks first.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Dialed,
    Accepted,
}
