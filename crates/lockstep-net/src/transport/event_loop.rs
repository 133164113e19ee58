//! One thread per node for every open peer connection (ADR 0031): an
//! epoll (mio) over their sockets reads and decodes what peers send,
//! hands whole messages to the owner, and writes what senders queued when
//! a socket has room. It replaces a reading and a writing thread per
//! connection.
//!
//! A connection comes here once its hello is done (admission, TLS and the
//! hello run on a short-lived opening thread with deadlines, bounded by
//! `MAX_OPENING`) and leaves when it ends: end of stream, an error, a
//! closed queue (`gmcast.isolate`, a certificate binding, shutdown). Its
//! socket is non-blocking from then on; keepalive and `TCP_USER_TIMEOUT`
//! (`connection::arm_liveness`) bound how long a vanished peer goes
//! unnoticed.
//!
//! The loop also runs its *owner* (ADR 0039): the group's rounds live on
//! this thread. The owner is called when another thread wakes it
//! ([`LoopWaker`]), when a message came for it, and when the deadline it
//! gave passed; the loop holds no lock of its own meanwhile, and the
//! owner's sends only queue or write without blocking.

use super::connection::connection_ended;
use super::queue::{Drained, Queue};
use super::receive::next_message;
use super::{input_bytes, Ctx, Handled, Inbound};
use crate::secure::Reader;
use lockstep_core::group::peer::PeerMsg;
// The loop's shared lists and owner slot change in whole pushes and takes.
use lockstep_core::sync::unpoisoned as lock;
use lockstep_core::wire::frame::FrameDecoder;
use lockstep_core::wire::lanes::{Inbox, Lane};
use log::{error, warn};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Registry, Token, Waker};
use std::cell::Cell;
use std::collections::HashMap;
use std::io::ErrorKind;
use std::net::Shutdown;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::Out;

/// The waker's token; connections use their id (from 1).
const WAKER: Token = Token(0);
/// Bytes read from a socket at a time.
const READ_CHUNK: usize = 64 * 1024;
/// Reads of one connection per turn, at most: a peer that sends without
/// pause cannot starve the others (it gets another turn at once).
const READS_PER_TURN: usize = 16;
/// Frames written to one connection per turn, at most (64 KiB chunks):
/// one fast reader cannot hold the loop for a whole big message.
const WRITES_PER_TURN: usize = 64;
/// Readiness events taken per poll.
const EVENTS: usize = 256;
/// The poll's timeout with nothing to do: only re-checks `stop`, which
/// `Transport::shutdown` also wakes the loop for.
const IDLE_WAIT: Duration = Duration::from_secs(1);
/// How soon a connection held back by the input budget tries again.
const BUDGET_RETRY: Duration = Duration::from_millis(1);

thread_local! {
    /// On a loop's own thread, which loop (its waker's address; 0
    /// elsewhere): a wake-up of that loop from there needs no `eventfd`
    /// write, the loop looks at its flags before it sleeps.
    static ON_LOOP: Cell<usize> = const { Cell::new(0) };
}

fn loop_id(waker: &Arc<Waker>) -> usize {
    Arc::as_ptr(waker) as usize
}

/// Whether this thread is the loop of `waker`.
fn on_loop(waker: &Arc<Waker>) -> bool {
    ON_LOOP.with(Cell::get) == loop_id(waker)
}

/// What lives on the loop's thread besides the connections: the group's
/// rounds (ADR 0039). It must not block: it runs between the reads and
/// writes of every connection.
pub trait LoopOwner: Send {
    /// Takes what was queued for it and does what is due. Returns how
    /// long the loop may wait before calling again without a wake-up,
    /// or `None` once the owner has stopped (it is then given back).
    fn turn(&mut self) -> Option<Duration>;
    /// Called by whoever took the stopped owner back, off the loop: the
    /// owner closes what it holds (the transport, whose shutdown waits
    /// for the loop's thread).
    fn shut(&mut self);
}

/// A stopped owner, given back (`Transport::set_owner`).
pub type OwnerBack = Sender<Box<dyn LoopOwner>>;

/// Wakes the loop's owner from any thread. A burst of wake-ups before the
/// owner's turn is one `eventfd` write; from the loop's own thread none.
#[derive(Clone)]
pub struct LoopWaker {
    waker: Arc<Waker>,
    /// The owner has something to take: its next turn comes at once.
    due: Arc<AtomicBool>,
}

impl LoopWaker {
    pub fn wake(&self) {
        if !self.due.swap(true, Ordering::SeqCst) && !on_loop(&self.waker) {
            if let Err(e) = self.waker.wake() {
                warn!("cannot wake the group connections' event loop: {e}");
            }
        }
    }

    /// Whether a wake-up came since the last call (and clears it).
    fn take(&self) -> bool {
        self.due.swap(false, Ordering::SeqCst)
    }

    fn pending(&self) -> bool {
        self.due.load(Ordering::SeqCst)
    }
}

/// The owner on its way to the loop (`Transport::set_owner`).
type OwnerSlot = Arc<Mutex<Option<(Box<dyn LoopOwner>, OwnerBack)>>>;

/// An open connection on its way from its opening thread to the loop.
pub(super) struct Handoff {
    pub(super) conn_id: u64,
    pub(super) raft_id: u64,
    /// The socket address, for the log.
    pub(super) peer: String,
    pub(super) reader: Reader,
    /// May already hold bytes that came with the hello.
    pub(super) dec: FrameDecoder,
    pub(super) out: Arc<Queue>,
}

/// How others reach the loop: hand it a connection, or tell it that a
/// connection has something to write (or closed). Both lists are bounded
/// by the connections: a connection is handed over once, and is on the
/// write list at most once until the loop takes it (`Queue::kicked`).
#[derive(Clone)]
pub(super) struct LoopHandle {
    waker: Arc<Waker>,
    /// `None` once the loop has ended: a connection that finishes opening
    /// after that is ended by its opening thread.
    handoffs: Arc<Mutex<Option<Vec<Handoff>>>>,
    to_write: Arc<Mutex<Vec<u64>>>,
    owner_waker: LoopWaker,
    owner: OwnerSlot,
}

impl LoopHandle {
    /// Gives an open connection to the loop; ends it at once if the loop
    /// has ended (shutdown).
    pub(super) fn hand_over(&self, ctx: &Ctx, h: Handoff) {
        let mut handoffs = lock(&self.handoffs);
        match handoffs.as_mut() {
            Some(list) => {
                list.push(h);
                drop(handoffs);
                self.wake();
            }
            None => {
                drop(handoffs);
                end_unserved(ctx, h);
            }
        }
    }

    /// The connections handed over since the last call; `None` closes the
    /// list for good (the loop is ending).
    fn take_handoffs(&self, closing: bool) -> Vec<Handoff> {
        let mut handoffs = lock(&self.handoffs);
        if closing {
            handoffs.take().unwrap_or_default()
        } else {
            handoffs.as_mut().map(std::mem::take).unwrap_or_default()
        }
    }

    pub(super) fn kick(&self, conn_id: u64) {
        lock(&self.to_write).push(conn_id);
        // On the loop (the owner's sends) the list is looked at before
        // the next sleep.
        if !on_loop(&self.waker) {
            self.wake();
        }
    }

    pub(super) fn owner_waker(&self) -> LoopWaker {
        self.owner_waker.clone()
    }

    /// Gives the loop its owner; its first turn comes at once.
    pub(super) fn set_owner(&self, owner: Box<dyn LoopOwner>, back: OwnerBack) {
        *lock(&self.owner) = Some((owner, back));
        self.owner_waker.wake();
        // From the loop's own thread too: the slot is looked at after a poll.
        self.wake();
    }

    pub(super) fn wake(&self) {
        if let Err(e) = self.waker.wake() {
            warn!("cannot wake the group connections' event loop: {e}");
        }
    }
}

/// The loop's poll and the handle to it; the poll goes to `run`.
pub(super) fn new() -> Result<(Poll, LoopHandle), String> {
    let poll = Poll::new().map_err(|e| format!("cannot create the event loop's poll: {e}"))?;
    let waker = Arc::new(
        Waker::new(poll.registry(), WAKER)
            .map_err(|e| format!("cannot create the event loop's waker: {e}"))?,
    );
    Ok((
        poll,
        LoopHandle {
            waker: waker.clone(),
            handoffs: Arc::new(Mutex::new(Some(Vec::new()))),
            to_write: Arc::default(),
            owner_waker: LoopWaker {
                waker,
                due: Arc::default(),
            },
            owner: Arc::default(),
        },
    ))
}

/// One connection the loop serves.
struct Open {
    conn_id: u64,
    raft_id: u64,
    peer: String,
    reader: Reader,
    dec: FrameDecoder,
    inbox: Inbox,
    /// When the chunked message being received began.
    started: Option<Instant>,
    out: Arc<Queue>,
    /// A message the input budget did not take yet; nothing more is read
    /// from this connection until it goes.
    held: Option<PeerMsg>,
    /// The socket may have more to read (mio reports edges: read until
    /// it would block).
    readable: bool,
}

/// What became of a message handed on.
enum Delivery {
    Taken,
    Held(PeerMsg),
    End,
}

impl Open {
    fn from(h: Handoff) -> Open {
        Open {
            conn_id: h.conn_id,
            raft_id: h.raft_id,
            peer: h.peer,
            reader: h.reader,
            dec: h.dec,
            inbox: Inbox::default(),
            started: None,
            out: h.out,
            held: None,
            // Bytes may wait in the decoder or in TLS already.
            readable: true,
        }
    }

    fn wants_turn(&self) -> bool {
        self.readable || self.held.is_some()
    }

    /// Reads and hands on what the peer sent, within this turn's share;
    /// `false` when the connection is to end.
    fn read_turn(&mut self, ctx: &Ctx, buf: &mut [u8]) -> bool {
        if !self.hand_on_decoded(ctx) {
            return false;
        }
        for _ in 0..READS_PER_TURN {
            if self.held.is_some() {
                return true;
            }
            match self.reader.read_draining(buf) {
                Ok((0, _)) => return false,
                Ok((n, drained)) => {
                    self.dec.push(&buf[..n]);
                    if !self.hand_on_decoded(ctx) {
                        return false;
                    }
                    if drained {
                        self.readable = false;
                        return true;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.readable = false;
                    return true;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::InvalidData => {
                    // A TLS error: a bad record, or an alert the peer sent.
                    warn!("dropping connection to {}: {e}", self.peer);
                    return false;
                }
                Err(_) => return false,
            }
        }
        true
    }

    /// Hands on the held message and every whole one decoded; `false`
    /// when the connection is to end.
    fn hand_on_decoded(&mut self, ctx: &Ctx) -> bool {
        loop {
            // Closed by this node (`gmcast.isolate`, a certificate
            // binding): nothing more of it goes to the owner.
            if self.out.is_closed() {
                return false;
            }
            let msg = match self.held.take() {
                Some(m) => m,
                None => match next_message(
                    &mut self.dec,
                    Some(&mut self.inbox),
                    &mut self.started,
                    &self.peer,
                ) {
                    Ok(Some(m)) => m,
                    Ok(None) => return true,
                    Err(_) => return false,
                },
            };
            match self.deliver(ctx, msg) {
                Delivery::Taken => {}
                Delivery::Held(m) => {
                    self.held = Some(m);
                    return true;
                }
                Delivery::End => return false,
            }
        }
    }

    fn deliver(&self, ctx: &Ctx, msg: PeerMsg) -> Delivery {
        if let PeerMsg::Refuse { reason } = &msg {
            warn!("peer {} refused the group connection: {reason}", self.peer);
            return Delivery::End;
        }
        let msg = match ctx.quick.get() {
            Some(quick) => match quick(self.raft_id, msg) {
                Handled::Pass(msg) => msg,
                Handled::Done(reply) => {
                    if let Some(frame) = reply {
                        self.out.push(Lane::Control, Out::Frame(frame));
                    }
                    return Delivery::Taken;
                }
            },
            None => msg,
        };
        if !ctx.budget.try_take(input_bytes(&msg)) {
            return Delivery::Held(msg);
        }
        if (ctx.sink)(Inbound::Peer {
            from: self.raft_id,
            msg,
        }) {
            Delivery::Taken
        } else {
            Delivery::End
        }
    }
}

fn token(conn_id: u64) -> Token {
    Token(conn_id as usize)
}

fn register(registry: &Registry, o: &Open) -> std::io::Result<()> {
    let fd = o.reader.tcp().as_raw_fd();
    registry.register(
        &mut SourceFd(&fd),
        token(o.conn_id),
        Interest::READABLE | Interest::WRITABLE,
    )
}

/// Ends a connection the loop served: out of the poll, then as
/// [`close`].
fn end(ctx: &Ctx, registry: &Registry, o: Open) {
    let fd = o.reader.tcp().as_raw_fd();
    let _ = registry.deregister(&mut SourceFd(&fd));
    close(ctx, &o.reader, &o.out, o.conn_id, o.raft_id);
}

/// Socket shut, queue closed, out of the table (the owner hears
/// `PeerDown` if it was the last one to that peer).
fn close(ctx: &Ctx, reader: &Reader, out: &Queue, conn_id: u64, raft_id: u64) {
    let _ = reader.tcp().shutdown(Shutdown::Both);
    out.close();
    connection_ended(ctx, conn_id, Some(raft_id));
}

/// The loop's owner, once given, and when its next turn is due.
#[derive(Default)]
struct Owner {
    held: Option<(Box<dyn LoopOwner>, OwnerBack)>,
    /// `None`: at the first look.
    due: Option<Instant>,
}

impl Owner {
    /// The poll's timeout, shortened for the owner: none while a wake-up
    /// or the owner's own sends wait, else at most until its deadline.
    fn limit(&self, timeout: Duration, lp: &LoopHandle) -> Duration {
        // The wake-up flag counts only with an owner to take it: without
        // one (not seated yet, or given back) nothing would clear it.
        let woken = self.held.is_some() && lp.owner_waker.pending();
        if woken || !lock(&lp.to_write).is_empty() {
            return Duration::ZERO;
        }
        match (&self.held, self.due) {
            (Some(_), Some(due)) => timeout.min(due.saturating_duration_since(Instant::now())),
            (Some(_), None) => Duration::ZERO,
            (None, _) => timeout,
        }
    }

    /// Takes an owner given since the last look.
    fn pick_up(&mut self, lp: &LoopHandle) {
        if self.held.is_none() {
            if let Some(given) = lock(&lp.owner).take() {
                self.held = Some(given);
                self.due = None;
            }
        }
    }

    /// The owner's turn, if it was woken or its deadline passed.
    fn turn(&mut self, lp: &LoopHandle) {
        let Some((owner, _)) = self.held.as_mut() else {
            return;
        };
        let woken = lp.owner_waker.take();
        if !woken && self.due.is_some_and(|due| Instant::now() < due) {
            return;
        }
        match guarded(None, "running", || owner.turn()) {
            Some(Some(wait)) => self.due = Some(Instant::now() + wait),
            // Stopped, or a bug in it (logged): given back.
            Some(None) | None => self.give_back(),
        }
    }

    /// Hands the owner to whoever waits for it: its `shut` waits for this
    /// thread, so it must not run (or drop) here.
    fn give_back(&mut self) {
        let Some((owner, back)) = self.held.take() else {
            return;
        };
        if let Err(unwanted) = back.send(owner) {
            let owner = unwanted.0;
            let _ = std::thread::Builder::new()
                .name("lockstep-owner-end".into())
                .spawn(move || {
                    let mut owner = owner;
                    owner.shut();
                });
        }
    }
}

/// The loop, until `Transport::shutdown` sets `stop` and wakes it; then
/// it ends every connection it holds.
pub(super) fn run(mut poll: Poll, ctx: Ctx) {
    ON_LOOP.with(|c| c.set(loop_id(&ctx.lp.waker)));
    let mut owner = Owner::default();
    let mut events = Events::with_capacity(EVENTS);
    let mut conns: HashMap<u64, Open> = HashMap::new();
    let mut buf = vec![0u8; READ_CHUNK];
    let mut to_write: Vec<u64> = Vec::new();
    // Connections whose last turn wrote its share and may have more.
    let mut more: Vec<u64> = Vec::new();
    while !ctx.stop.load(Ordering::Relaxed) {
        let timeout = if !more.is_empty() || conns.values().any(|c| c.readable && c.held.is_none())
        {
            Duration::ZERO
        } else if conns.values().any(|c| c.held.is_some()) {
            BUDGET_RETRY
        } else {
            IDLE_WAIT
        };
        let timeout = owner.limit(timeout, &ctx.lp);
        if let Err(e) = poll.poll(&mut events, Some(timeout)) {
            if e.kind() != ErrorKind::Interrupted {
                warn!("the group connections' event loop cannot poll: {e}");
                std::thread::sleep(Duration::from_millis(10));
            }
            continue;
        }
        to_write.clear();
        to_write.append(&mut more);
        for ev in events.iter() {
            if ev.token() == WAKER {
                continue;
            }
            let id = ev.token().0 as u64;
            let Some(c) = conns.get_mut(&id) else {
                continue;
            };
            if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                c.readable = true;
            }
            if ev.is_writable() || ev.is_write_closed() {
                to_write.push(id);
            }
        }
        for h in ctx.lp.take_handoffs(false) {
            let o = Open::from(h);
            if let Err(e) = register(poll.registry(), &o) {
                warn!("dropping connection to {}: cannot poll it: {e}", o.peer);
                close(&ctx, &o.reader, &o.out, o.conn_id, o.raft_id);
                continue;
            }
            // What was queued before it got here.
            to_write.push(o.conn_id);
            conns.insert(o.conn_id, o);
        }
        to_write.append(&mut lock(&ctx.lp.to_write));
        to_write.sort_unstable();
        to_write.dedup();
        for id in &to_write {
            let Some(c) = conns.get(id) else {
                continue;
            };
            let drained = guarded(Some(&c.peer), "writing", || {
                c.out.drain(&ctx.threads, WRITES_PER_TURN)
            });
            match drained {
                Some(Drained::Waiting) => {}
                Some(Drained::More) => more.push(*id),
                Some(Drained::Ended) | None => {
                    if let Some(c) = conns.remove(id) {
                        end(&ctx, poll.registry(), c);
                    }
                }
            }
        }
        let turns: Vec<u64> = conns
            .values()
            .filter(|c| c.wants_turn())
            .map(|c| c.conn_id)
            .collect();
        for id in turns {
            let Some(c) = conns.get_mut(&id) else {
                continue;
            };
            let peer = c.peer.clone();
            let served = guarded(Some(&peer), "reading", || c.read_turn(&ctx, &mut buf));
            if served != Some(true) {
                if let Some(c) = conns.remove(&id) {
                    end(&ctx, poll.registry(), c);
                }
            }
        }
        // After the reads: what they brought is taken in this turn.
        owner.pick_up(&ctx.lp);
        owner.turn(&ctx.lp);
    }
    owner.give_back();
    for (_, c) in conns.drain() {
        end(&ctx, poll.registry(), c);
    }
    for h in ctx.lp.take_handoffs(true) {
        end_unserved(&ctx, h);
    }
}

/// Runs one connection's turn, or the owner's; a panic in it (a bug,
/// here, in the owner's quick handler or in the owner) ends that
/// connection, or gives the owner back, loudly, and the loop serves the
/// others on. `None` after a panic.
/// `peer`: the connection's; `None` for the owner.
fn guarded<T>(peer: Option<&str>, what: &str, turn: impl FnOnce() -> T) -> Option<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(turn)) {
        Ok(t) => Some(t),
        Err(payload) => {
            let why = lockstep_core::panic_message(&*payload);
            let whose = match peer {
                Some(peer) => format!("the connection with {peer}"),
                None => "its owner".to_string(),
            };
            error!(
                "lockstep internal error: the group connections' event loop failed {what} \
                 {whose} ({why}); it ends"
            );
            None
        }
    }
}

/// Ends a connection the loop never served (never in the poll).
fn end_unserved(ctx: &Ctx, h: Handoff) {
    close(ctx, &h.reader, &h.out, h.conn_id, h.raft_id);
}
