//! What a connection sends: senders write a message themselves when
//! nothing waits before it, or queue it on the connection's two lanes;
//! the event loop encodes and writes what is queued as the socket takes it.

use super::event_loop::LoopHandle;
use super::REFUSAL_LOG_EVERY;
use crate::secure::Writer;
use crate::threads::Threads;
use lockstep_core::wire::lanes::{Lane, Next, Outbox, Outgoing, BIG_MESSAGE, MAX_WIRE_FRAME};
use log::{info, warn};
use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::Instant;

/// What the owner's round hands a connection: a framed message, or a Raft
/// message encoded when it is written (a 300 MB append is copied on a
/// helper thread, not in the round).
pub enum Out {
    Frame(Vec<u8>),
    Raft(raft::eraftpb::Message),
}

impl Outgoing for Out {
    fn frame_len(&self) -> usize {
        match self {
            Out::Frame(f) => f.len(),
            Out::Raft(m) => lockstep_core::group::peer::raft_len(m) + 16,
        }
    }

    fn encode(self) -> Option<Vec<u8>> {
        match self {
            Out::Frame(f) => Some(f),
            Out::Raft(m) => {
                let t0 = Instant::now();
                let big = m.entries.iter().map(|e| e.data.len()).sum::<usize>() >= LOG_BIG;
                let frame = lockstep_core::group::peer::raft_frame(&m)
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

/// One connection's outbox and socket-writing half, shared by whoever
/// sends (the owner's rounds, `PeerSender`, the quick handler) and the
/// event loop, which writes what is queued when the socket has room.
pub(super) struct Queue {
    lanes: Mutex<Lanes>,
    closed: AtomicBool,
    /// The event loop took a message from the outbox and has not handed
    /// it to the wire yet (set under the lanes' lock).
    in_hand: AtomicBool,
    /// The socket's writing half, and what it has not taken yet. Every
    /// frame goes onto it under this lock, so frames never interleave.
    wire: Mutex<Option<Wire>>,
    /// Wakes the event loop for this connection.
    kick: LoopHandle,
    id: u64,
    /// In the loop's list of connections to write already (at most once).
    kicked: AtomicBool,
}

struct Lanes {
    outbox: Outbox<Out>,
    /// A big bulk message is being encoded on a helper thread: only
    /// control messages go meanwhile (`Outbox::take_control`).
    encoding: bool,
    /// Its first chunk, once encoded: the next bytes of the bulk lane.
    encoded: Option<Vec<u8>>,
}

/// The writing half of a connection's socket (non-blocking once open)
/// and the bytes it did not take yet: at most two frames' wire bytes
/// (`MAX_WIRE_FRAME` plus TLS's overhead each). A sender writes only on
/// an idle wire, and the event loop adds a frame only after flushing, so
/// at most one sender's leftover and one frame of the loop's are there.
pub(super) struct Wire {
    writer: Writer,
    pending: Vec<u8>,
    at: usize,
}

impl Wire {
    pub(super) fn new(writer: Writer) -> Wire {
        Wire {
            writer,
            pending: Vec::new(),
            at: 0,
        }
    }

    fn idle(&self) -> bool {
        self.at == self.pending.len()
    }

    /// Puts `frame` on the socket, after what is left of the one before;
    /// what the socket does not take now waits in `pending`.
    fn send(&mut self, frame: &[u8]) -> std::io::Result<()> {
        match &mut self.writer {
            Writer::Plain(s) if self.at == self.pending.len() => {
                let n = write_some(s, frame)?;
                if n < frame.len() {
                    self.pending.clear();
                    self.pending.extend_from_slice(&frame[n..]);
                    self.at = 0;
                }
                return Ok(());
            }
            Writer::Plain(_) => self.pending.extend_from_slice(frame),
            Writer::Tls(t) => t.seal(frame, &mut self.pending)?,
        }
        self.flush().map(|_| ())
    }

    /// Writes what is pending; `true` when nothing is left.
    fn flush(&mut self) -> std::io::Result<bool> {
        while self.at < self.pending.len() {
            let n = write_some(self.writer.tcp(), &self.pending[self.at..])?;
            if n == 0 {
                return Ok(false);
            }
            self.at += n;
        }
        self.pending.clear();
        self.at = 0;
        Ok(true)
    }
}

/// Writes what the socket takes now: 0 when it is full.
fn write_some(mut tcp: &TcpStream, bytes: &[u8]) -> std::io::Result<usize> {
    loop {
        return match tcp.write(bytes) {
            Ok(0) if !bytes.is_empty() => Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => Ok(n),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(0),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => Err(e),
        };
    }
}

/// What a turn of [`Queue::drain`] left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Drained {
    /// Nothing to write, or the socket is full (epoll tells when it has
    /// room), or a big message is being encoded (its encoder wakes the
    /// loop).
    Waiting,
    /// The turn's share is written and more may be: another turn soon.
    More,
    /// The connection is closed or broken.
    Ended,
}

/// Frames at most this big are written by the thread that sends them
/// when nothing waits before them (`Queue::write_now`): the socket is
/// non-blocking, so this never blocks, and the rest of a frame the socket
/// did not take waits for the event loop. Bigger messages are encoded
/// and chunked by the event loop.
const DIRECT_MAX: usize = MAX_WIRE_FRAME;

/// Messages at least this big are logged when sent and received.
pub(super) const LOG_BIG: usize = 64 << 20;

/// Messages dropped because a lane was full (all connections).
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// When a drop was last logged (seconds since the epoch of this process).
static DROP_LOGGED: Mutex<Option<Instant>> = Mutex::new(None);

impl Queue {
    /// The queue of connection `id`, writing on `wire`.
    pub(super) fn new(id: u64, wire: Wire, kick: LoopHandle) -> Queue {
        Queue {
            lanes: Mutex::new(Lanes {
                outbox: Outbox::default(),
                encoding: false,
                encoded: None,
            }),
            closed: AtomicBool::new(false),
            in_hand: AtomicBool::new(false),
            wire: Mutex::new(Some(wire)),
            kick,
            id,
            kicked: AtomicBool::new(false),
        }
    }

    fn lanes(&self) -> MutexGuard<'_, Lanes> {
        self.lanes.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wire(&self) -> MutexGuard<'_, Option<Wire>> {
        self.wire.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends `msg`: written at once by this thread if nothing is queued
    /// or being written before it (`write_now`), else queued on `lane`
    /// for the event loop.
    pub(super) fn push(&self, lane: Lane, msg: Out) {
        let Some(msg) = self.write_now(msg) else {
            return;
        };
        let pushed = self.lanes().outbox.push(lane, msg);
        match pushed {
            Ok(()) => self.wake_loop(),
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

    /// Puts this connection on the event loop's list (once until the loop
    /// takes it) and wakes the loop.
    fn wake_loop(&self) {
        if !self.kicked.swap(true, Ordering::SeqCst) {
            self.kick.kick(self.id);
        }
    }

    /// Hands `frame` to the wire: whether the socket took all of it
    /// (`Some(true)`) or left some pending (`Some(false)`); a failed write
    /// ends the connection (`None`).
    fn send_on(&self, mut wire: MutexGuard<'_, Option<Wire>>, frame: &[u8]) -> Option<bool> {
        match wire.as_mut().map(|w| w.send(frame)) {
            Some(Ok(())) => Some(wire.as_ref().is_none_or(Wire::idle)),
            _ => {
                self.broken(wire);
                None
            }
        }
    }

    /// A write failed (or there is no wire): close it and this queue.
    fn broken(&self, mut wire: MutexGuard<'_, Option<Wire>>) {
        if let Some(w) = wire.as_mut() {
            w.writer.close();
        }
        drop(wire);
        self.close();
    }

    /// Writes a message from the calling thread when nothing is queued,
    /// encoding or in the event loop's hands (so the order of messages is
    /// kept); gives it back otherwise, to be queued. Each message handed
    /// to the event loop costs a wake-up and a context switch, which on
    /// two busy cores cost more than the network: a commit round and a
    /// causal read's ask are a few such messages.
    fn write_now(&self, msg: Out) -> Option<Out> {
        if msg.frame_len() > DIRECT_MAX || self.closed.load(Ordering::SeqCst) {
            return Some(msg);
        }
        let lanes = self.lanes();
        if !lanes.outbox.is_empty()
            || lanes.encoding
            || lanes.encoded.is_some()
            || self.in_hand.load(Ordering::SeqCst)
        {
            return Some(msg);
        }
        // Lock order: lanes, then wire; the event loop never holds both.
        // Held by another thread writing: queue behind it.
        let wire = match self.wire.try_lock() {
            Ok(w) => w,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return Some(msg),
        };
        drop(lanes);
        if !wire.as_ref().is_some_and(Wire::idle) {
            return Some(msg);
        }
        // A message that cannot be encoded is dropped, as the event loop
        // drops it.
        let frame = msg.encode()?;
        if self.send_on(wire, &frame) == Some(false) {
            // The event loop writes the rest when the socket has room.
            self.wake_loop();
        }
        None
    }

    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.wake_loop();
    }

    /// The event loop's turn: writes what is queued, in order, while the
    /// socket takes it, at most `max_frames` frames (so one peer that
    /// reads fast cannot hold the loop for a whole 300 MB message).
    pub(super) fn drain(self: &Arc<Self>, threads: &Threads, max_frames: usize) -> Drained {
        self.kicked.store(false, Ordering::SeqCst);
        for _ in 0..max_frames {
            if self.closed.load(Ordering::SeqCst) {
                return Drained::Ended;
            }
            {
                let mut wire = self.wire();
                match wire.as_mut().map(Wire::flush) {
                    Some(Ok(true)) => {}
                    // The socket is full: epoll says when it has room.
                    Some(Ok(false)) => return Drained::Waiting,
                    Some(Err(_)) | None => {
                        self.broken(wire);
                        return Drained::Ended;
                    }
                }
            }
            let Some(frame) = self.take_frame(threads) else {
                return Drained::Waiting;
            };
            // What the socket leaves pending, the next flush writes, or
            // epoll's next edge brings this loop back for.
            let sent = self.send_on(self.wire(), &frame);
            self.in_hand.store(false, Ordering::SeqCst);
            if sent.is_none() {
                return Drained::Ended;
            }
        }
        Drained::More
    }

    /// The next bytes to write, encoded outside the lanes' lock so that
    /// senders never wait for an encoding to queue. A big bulk message is
    /// encoded on a helper thread (copying 300 MB takes long enough to
    /// delay every other connection's heartbeats): control messages go
    /// meanwhile, and its chunks follow once it is done.
    fn take_frame(self: &Arc<Self>, threads: &Threads) -> Option<Vec<u8>> {
        let mut lanes = self.lanes();
        loop {
            if let Some(first) = lanes.encoded.take() {
                self.in_hand.store(true, Ordering::SeqCst);
                return Some(first);
            }
            let next = if lanes.encoding {
                lanes.outbox.take_control().map(Next::Control)
            } else {
                lanes.outbox.take_next()
            };
            self.in_hand.store(next.is_some(), Ordering::SeqCst);
            match next? {
                Next::Bytes(b) => return Some(b),
                Next::Control(m) => {
                    drop(lanes);
                    if let Some(f) = m.encode() {
                        return Some(f);
                    }
                    lanes = self.lanes();
                }
                Next::Bulk(m) if m.frame_len() >= BIG_MESSAGE => {
                    lanes.encoding = true;
                    drop(lanes);
                    let me = self.clone();
                    threads.spawn_or_run("lockstep-encode", move || me.encode_aside(m));
                    lanes = self.lanes();
                }
                Next::Bulk(m) => {
                    drop(lanes);
                    let frame = m.encode();
                    lanes = self.lanes();
                    if let Some(f) = frame {
                        return Some(lanes.outbox.start_bulk(f));
                    }
                }
            }
        }
    }

    /// Encodes a big bulk message away from the event loop, then hands its
    /// first chunk back and wakes the loop.
    fn encode_aside(&self, m: Out) {
        let frame = m.encode();
        let mut lanes = self.lanes();
        let first = frame.map(|f| lanes.outbox.start_bulk(f));
        lanes.encoded = first;
        lanes.encoding = false;
        drop(lanes);
        self.wake_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstep_core::wire::frame::{self, FrameDecoder};
    use lockstep_core::wire::lanes::Inbox;
    use std::io::{ErrorKind, Read};
    use std::net::TcpListener;
    use std::time::Duration;

    /// A queue writing on `a` (non-blocking), `b` the peer's end, and the
    /// poll its loop handle belongs to (kept alive).
    fn attached() -> (Arc<Queue>, TcpStream, TcpStream, mio::Poll) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        a.set_nonblocking(true).unwrap();
        let (poll, lp) = super::super::event_loop::new().unwrap();
        let q = Queue::new(1, Wire::new(Writer::Plain(a.try_clone().unwrap())), lp);
        (Arc::new(q), a, b, poll)
    }

    fn queued(q: &Queue) -> bool {
        !q.lanes().outbox.is_empty()
    }

    fn read(b: &mut TcpStream, n: usize) -> Vec<u8> {
        let mut buf = vec![0; n];
        b.read_exact(&mut buf).unwrap();
        buf
    }

    /// Fills `a`'s send buffer and the peer's receive buffer; the bytes
    /// written.
    fn fill(a: &TcpStream) -> usize {
        let chunk = vec![0u8; 64 << 10];
        let mut sent = 0;
        loop {
            match (&*a).write(&chunk) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return sent,
                Err(e) => panic!("{e}"),
            }
        }
    }

    #[test]
    fn an_idle_connection_is_written_by_the_sender_and_a_busy_one_keeps_the_order() {
        let (q, _a, mut b, _poll) = attached();
        let threads = Threads::default();
        q.push(Lane::Bulk, Out::Frame(b"one".to_vec()));
        assert!(!queued(&q), "nothing waited: written at once");
        assert!(!q.kicked.load(Ordering::SeqCst), "the loop was not needed");
        assert_eq!(read(&mut b, 3), b"one");

        // The event loop holds a message it has not written yet.
        q.in_hand.store(true, Ordering::SeqCst);
        q.push(Lane::Bulk, Out::Frame(b"two".to_vec()));
        assert!(queued(&q), "must not overtake the message in hand");
        assert!(q.kicked.load(Ordering::SeqCst), "the loop is told");
        q.in_hand.store(false, Ordering::SeqCst);
        q.push(Lane::Bulk, Out::Frame(b"three".to_vec()));
        assert!(queued(&q), "must not overtake what is queued");
        assert_ne!(q.drain(&threads, usize::MAX), Drained::Ended);
        assert!(!queued(&q));
        assert_eq!(read(&mut b, 8), b"twothree");

        q.push(Lane::Bulk, Out::Frame(vec![7; DIRECT_MAX + 1]));
        assert!(queued(&q), "a big message goes through the event loop");
    }

    #[test]
    fn what_a_full_socket_does_not_take_waits_for_the_loop_and_nothing_overtakes_it() {
        let (q, a, mut b, _poll) = attached();
        let threads = Threads::default();
        let sent = fill(&a);
        q.push(Lane::Control, Out::Frame(b"late".to_vec()));
        assert!(!queued(&q), "the sender put it on the wire");
        assert!(q.kicked.load(Ordering::SeqCst), "the loop writes the rest");
        q.push(Lane::Control, Out::Frame(b"later".to_vec()));
        assert!(queued(&q), "the wire is not idle: queued behind");
        assert_eq!(
            q.drain(&threads, usize::MAX),
            Drained::Waiting,
            "a full socket is no error"
        );
        assert_eq!(read(&mut b, sent).len(), sent);
        let t0 = Instant::now();
        while queued(&q) || !q.wire().as_ref().unwrap().idle() {
            assert!(t0.elapsed() < Duration::from_secs(5), "never written");
            assert_ne!(q.drain(&threads, usize::MAX), Drained::Ended);
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(read(&mut b, 9), b"latelater");
    }

    #[test]
    fn a_big_message_is_encoded_aside_and_the_bulk_lane_keeps_its_order() {
        let (q, _a, mut b, _poll) = attached();
        let threads = Threads::default();
        let framed = |kind: u8, len: usize| {
            let mut out = Vec::new();
            frame::encode(kind, &vec![kind; len], usize::MAX, &mut out).unwrap();
            out
        };
        let big = BIG_MESSAGE + 10;
        q.in_hand.store(true, Ordering::SeqCst); // queue both
        q.push(Lane::Bulk, Out::Frame(framed(3, big)));
        q.push(Lane::Bulk, Out::Frame(framed(5, 10)));
        q.in_hand.store(false, Ordering::SeqCst);
        let reader = std::thread::spawn(move || {
            let mut dec = FrameDecoder::new(MAX_WIRE_FRAME);
            let mut inbox = Inbox::default();
            let mut got = Vec::new();
            let mut buf = vec![0; 64 << 10];
            while got.len() < 3 {
                let n = b.read(&mut buf).unwrap();
                assert!(n > 0, "closed early");
                dec.push(&buf[..n]);
                while let Some(f) = dec.next_frame().unwrap() {
                    if let Some(m) = inbox.accept(f).unwrap() {
                        got.push((m.kind, m.payload.len()));
                    }
                }
            }
            got
        });
        assert_ne!(q.drain(&threads, usize::MAX), Drained::Ended);
        q.push(Lane::Control, Out::Frame(framed(4, 10)));
        let t0 = Instant::now();
        while queued(&q) || !q.wire().as_ref().unwrap().idle() {
            assert!(t0.elapsed() < Duration::from_secs(30), "never written");
            assert_ne!(q.drain(&threads, usize::MAX), Drained::Ended);
            std::thread::sleep(Duration::from_millis(1));
        }
        let got = reader.join().unwrap();
        let at = |kind| got.iter().position(|(k, _)| *k == kind).unwrap();
        assert!(at(3) < at(5), "bulk messages keep their order: {got:?}");
        assert_eq!(got[at(3)].1, big);
        assert_eq!(threads.wait_all(Duration::from_secs(5)), 0);
    }
}
