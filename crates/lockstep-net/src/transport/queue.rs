//! What a connection sends: the group thread queues messages on a
//! connection's two lanes, its writer thread encodes and writes them.

use super::REFUSAL_LOG_EVERY;
use lockstep_core::wire::lanes::{Lane, Next, Outbox, Outgoing};
use lockstep_core::wire::peer::PeerMsg;
use log::{info, warn};
use protobuf::Message as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

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
pub(super) struct Queue {
    outbox: Mutex<Outbox<Out>>,
    ready: Condvar,
    closed: AtomicBool,
}

/// Messages at least this big are logged when sent and received.
pub(super) const LOG_BIG: usize = 64 << 20;

/// Messages dropped because a lane was full (all connections).
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// When a drop was last logged (seconds since the epoch of this process).
static DROP_LOGGED: Mutex<Option<Instant>> = Mutex::new(None);

impl Queue {
    pub(super) fn push(&self, lane: Lane, bytes: Out) {
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

    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let _g = self.outbox.lock().unwrap_or_else(|p| p.into_inner());
        self.ready.notify_all();
    }

    /// The next bytes to write, waiting for some; `None` once closed.
    /// Messages are encoded here, outside the outbox lock, so the group
    /// thread never waits for a big message's encoding to queue another.
    pub(super) fn next(&self) -> Option<Vec<u8>> {
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
