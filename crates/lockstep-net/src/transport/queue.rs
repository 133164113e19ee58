//! What a connection sends: the owner's round queues messages on a
//! connection's two lanes, its writer thread encodes and writes them.

use super::REFUSAL_LOG_EVERY;
use crate::secure::Writer;
use lockstep_core::wire::lanes::{Lane, Next, Outbox, Outgoing};
use log::{info, warn};
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

/// What the owner's round hands a connection: a framed message, or a Raft
/// message the writer thread encodes (a 300 MB append is copied there,
/// not in the round).
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

/// One connection's outbox, shared by the owner's rounds (which queue)
/// and the connection's writer thread (which sends).
#[derive(Default)]
pub(super) struct Queue {
    outbox: Mutex<Outbox<Out>>,
    ready: Condvar,
    closed: AtomicBool,
    /// The writer thread holds a message it took from the outbox and has
    /// not finished writing (set under the outbox lock).
    in_hand: AtomicBool,
    /// The socket's writing half once the hello is done. The writer thread
    /// writes each frame under this lock, and so does a thread that finds
    /// nothing queued or in hand (`Queue::write_now`).
    wire: Mutex<Option<Writer>>,
}

/// Frames at most this big are written by the thread that sends them
/// when nothing waits before them (`Queue::write_now`). A third of the
/// smallest send buffer Linux starts a TCP socket with (16 KiB) holds
/// one, so the write never blocks once `POLLOUT` is reported.
const DIRECT_MAX: usize = 4096;

/// Whether a write of a small frame to `tcp` would not block: a
/// zero-timeout poll for `POLLOUT` (a TCP socket reports it while at least
/// a third of its send buffer is free).
fn has_room(tcp: &TcpStream) -> bool {
    let mut fds = [PollFd::new(tcp, PollFlags::OUT)];
    let zero = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    matches!(poll(&mut fds, Some(&zero)), Ok(1)) && fds[0].revents().contains(PollFlags::OUT)
}

/// Messages at least this big are logged when sent and received.
pub(super) const LOG_BIG: usize = 64 << 20;

/// Messages dropped because a lane was full (all connections).
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// When a drop was last logged (seconds since the epoch of this process).
static DROP_LOGGED: Mutex<Option<Instant>> = Mutex::new(None);

impl Queue {
    /// Sends `msg`: written at once by this thread if nothing is queued
    /// or being written before it (`write_now`), else queued on `lane`
    /// for the writer thread.
    pub(super) fn push(&self, lane: Lane, msg: Out) {
        let Some(msg) = self.write_now(msg) else {
            return;
        };
        let pushed = self
            .outbox
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(lane, msg);
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

    /// The writing half, once the connection's hello is done.
    pub(super) fn attach(&self, writer: Writer) {
        *self.wire.lock().unwrap_or_else(|p| p.into_inner()) = Some(writer);
    }

    /// Writes one frame the writer thread took (`next`); `false` once the
    /// connection is broken, which is then closed.
    pub(super) fn write(&self, bytes: &[u8]) -> bool {
        let wire = self.wire.lock().unwrap_or_else(|p| p.into_inner());
        let written = self.write_on(wire, bytes);
        self.in_hand.store(false, Ordering::SeqCst);
        written
    }

    /// Writes `bytes` on the locked writing half; a failed write ends the
    /// connection (its socket, then this queue). `false` then, or when
    /// there is no writing half.
    fn write_on(&self, mut wire: MutexGuard<'_, Option<Writer>>, bytes: &[u8]) -> bool {
        let written = wire.as_mut().is_some_and(|w| match w.write_all(bytes) {
            Ok(()) => true,
            Err(_) => {
                w.close();
                false
            }
        });
        drop(wire);
        if !written {
            self.close();
        }
        written
    }

    /// Writes a small message from the calling thread when nothing is
    /// queued or in the writer thread's hands (so the order of messages is
    /// kept) and the socket has room (so this never blocks); gives it
    /// back otherwise, to be queued. Each message a thread hands to the
    /// writer thread costs two context switches (its wake-up and its
    /// sleep), which on two busy cores cost more than the network: a
    /// commit round and a causal read's ask are a few such messages.
    fn write_now(&self, msg: Out) -> Option<Out> {
        if msg.frame_len() > DIRECT_MAX || self.closed.load(Ordering::SeqCst) {
            return Some(msg);
        }
        let outbox = self.outbox.lock().unwrap_or_else(|p| p.into_inner());
        if !outbox.is_empty() || self.in_hand.load(Ordering::SeqCst) {
            return Some(msg);
        }
        // Lock order: outbox, then wire; the writer thread never holds
        // both. Held by another thread writing directly: queue behind it.
        let wire = match self.wire.try_lock() {
            Ok(w) => w,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return Some(msg),
        };
        drop(outbox);
        if !wire.as_ref().is_some_and(|w| has_room(w.tcp())) {
            return Some(msg);
        }
        // A message that cannot be encoded is dropped, as the writer
        // thread drops it.
        let frame = msg.encode()?;
        self.write_on(wire, &frame);
        None
    }

    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let _g = self.outbox.lock().unwrap_or_else(|p| p.into_inner());
        self.ready.notify_all();
    }

    /// The next bytes to write, waiting for some; `None` once closed.
    /// Messages are encoded here, outside the outbox lock, so the owner's
    /// round never waits for a big message's encoding to queue another.
    pub(super) fn next(&self) -> Option<Vec<u8>> {
        let mut outbox = self.outbox.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if self.closed.load(Ordering::SeqCst) {
                return None;
            }
            let next = outbox.take_next();
            self.in_hand.store(next.is_some(), Ordering::SeqCst);
            match next {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{ErrorKind, Read};
    use std::net::TcpListener;

    fn attached() -> (Queue, TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        let q = Queue::default();
        q.attach(Writer::Plain(a.try_clone().unwrap()));
        (q, a, b)
    }

    fn queued(q: &Queue) -> bool {
        !q.outbox.lock().unwrap().is_empty()
    }

    fn read(b: &mut TcpStream, n: usize) -> Vec<u8> {
        let mut buf = vec![0; n];
        b.read_exact(&mut buf).unwrap();
        buf
    }

    #[test]
    fn an_idle_connection_is_written_by_the_sender_and_a_busy_one_keeps_the_order() {
        let (q, _a, mut b) = attached();
        q.push(Lane::Bulk, Out::Frame(b"one".to_vec()));
        assert!(!queued(&q), "nothing waited: written at once");
        assert_eq!(read(&mut b, 3), b"one");

        // The writer thread holds a message it has not written yet.
        q.in_hand.store(true, Ordering::SeqCst);
        q.push(Lane::Bulk, Out::Frame(b"two".to_vec()));
        assert!(queued(&q), "must not overtake the message in hand");
        q.in_hand.store(false, Ordering::SeqCst);
        q.push(Lane::Bulk, Out::Frame(b"three".to_vec()));
        assert!(queued(&q), "must not overtake what is queued");
        while queued(&q) {
            let f = q.next().unwrap();
            assert!(q.write(&f));
        }
        assert_eq!(read(&mut b, 8), b"twothree");

        q.push(Lane::Bulk, Out::Frame(vec![7; DIRECT_MAX + 1]));
        assert!(queued(&q), "a big message goes through the writer thread");
    }

    #[test]
    fn a_full_socket_is_left_to_the_writer_thread() {
        let (q, a, mut b) = attached();
        // Fill the send buffer (and the peer's receive buffer).
        a.set_nonblocking(true).unwrap();
        let chunk = vec![0u8; 64 << 10];
        let mut sent = 0;
        loop {
            match (&a).write(&chunk) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        a.set_nonblocking(false).unwrap();
        q.push(Lane::Control, Out::Frame(b"late".to_vec()));
        assert!(queued(&q), "a full socket would block the sender");
        assert_eq!(read(&mut b, sent).len(), sent);
        let f = q.next().unwrap();
        assert!(q.write(&f));
        assert_eq!(read(&mut b, 4), b"late");
    }
}
