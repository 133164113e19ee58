//! The writeset cache's disk writes (ADR 0032): a round queues the events
//! it ordered and ends its batch; a committing thread that waits for one
//! of them, or the cache's own thread (`lockstep-cache`), encodes and
//! writes them (write(2), and fsync with `lockstep.cache_sync`), away from
//! the round, the provider's lock and the event loop that runs the
//! rounds.
//!
//! What a process crash must keep is kept by a wait, not by the round:
//! before the storage engine commits an event (`commit_order_enter`, a
//! remote writeset's or TOI's apply, a local TOI, a view the server
//! stores), its thread waits until the event is in the cache file
//! (`Written`). So the cache always reaches
//! the engine's position after a crash (ADR 0026 replays the run past it,
//! and a cache that ended below it would start over at the next event),
//! and every acknowledged commit is in it.
//!
//! Who writes: a thread that waits for its event and finds the writer
//! idle writes everything queued itself, without the provider's lock
//! (`Written::wait`): one committing thread writes the batch of every
//! event ordered so far, as InnoDB's group commit does, and nobody is
//! woken for it. The round wakes the writer thread only when its queue
//! holds `WAKE_BYTES` or more (a big writeset, a joiner's catch-up); the
//! thread also looks once per `IDLE` and whenever a reader or the
//! back-pressure waits for it, and deletes the files rotations set aside.
//! Before, each round's batch woke the thread: about 0.65 context
//! switches per transaction on every node (docs/bench.md, 2026-11-30).
//!
//! Bounds: queueing never waits, since it happens under the provider's
//! lock (issue 53: no blocking wait under a lock that client threads
//! take). A round that leaves more than `MAX_QUEUED_BYTES` of event data
//! queued holds back the next round until there is room (`Room::is_free`,
//! looked at by the event loop, which does not wait: ADR 0039): so the queue holds at most `MAX_QUEUED_BYTES`
//! plus what one round delivered (raft-rs sets no size limit per ready:
//! what one poll committed), or what a joiner's catch-up queued
//! (`Inner::cache_catch_up`: the apply queue's writesets in memory, at
//! most `recv_spool::MEMORY_BUDGET`); the group log and the apply queue
//! hold those writesets anyway: the queue shares them, it copies none. A
//! commit's wait has a deadline (`ACK_WAIT`), except while that thread
//! writes the batch itself: it then waits for the disk, as the storage
//! engine's commit that follows would; every other commit still fails at
//! its deadline, and the node leaves. The round's and the readers' waits
//! for the writer have none (they wait for the disk, as the round did)
//! but are logged every `SLOW_WRITER`; every wait ends when the writer is
//! gone.
//!
//! A cache that fails (a write or fsync error, a writer that panicked, or
//! an event still unwritten at the commit's deadline: a stuck disk) fails
//! every commit that waits on it from then on (`Written::wait` gives the
//! reason): the node stops acknowledging and leaves the cluster
//! (`Replication::cached_first`, ADR 0032's update), since it would
//! otherwise acknowledge commits that a crash of every node may lose.

use crate::log::{info, warn};
use crate::sleepers::Sleepers;
use crate::writeset_cache::WritesetCache;
// The queue's holders change it in whole steps; the cache is dropped
// when its writer panics (`Gone`), and the failure is a whole string.
use lockstep_core::sync::unpoisoned as lock;
use lockstep_core::writeset_cache::CachedEvent;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Event data queued for the writer past which no round runs until there
/// is room (`Room::is_free`): the rounds get ahead of the disk by this
/// much, plus one round's deliveries.
pub const MAX_QUEUED_BYTES: usize = 64 << 20;

/// How long a commit waits for its event to be written: a disk that
/// takes this long is stuck, and the node leaves the cluster rather than
/// hold its clients for ever or acknowledge without the cache. (The
/// largest cached event is half of `gcache.size`; writing one takes well
/// under a second on a working disk.)
pub const ACK_WAIT: Duration = Duration::from_secs(30);

/// Queued event data from which the round wakes the writer thread;
/// below it, the committing threads write (a write(2) of this much takes
/// well under a millisecond on a working disk).
const WAKE_BYTES: usize = 256 << 10;

/// How often a round or a reader that waits for the writer says so.
const SLOW_WRITER: Duration = Duration::from_secs(10);

/// The writer's own look at its queue when nothing wakes it.
const IDLE: Duration = Duration::from_secs(1);

enum Op {
    Append(CachedEvent),
    /// An event too big to keep was ordered: the run starts over after it.
    SkipOversized,
}

/// An event: its history and seqno.
type At = ([u8; 16], i64);

#[derive(Default)]
struct Queue {
    ops: VecDeque<Op>,
    /// Event data in `ops` and in the writer's hands.
    bytes: usize,
    /// The newest event written (and flushed), and the epoch it was
    /// queued in.
    written: Option<(At, u64)>,
    /// The newest event queued.
    last_queued: Option<At>,
    /// Moves on whenever an event is queued that does not follow the
    /// newest queued one (another history, or a seqno not above it: a
    /// later session that joins again below what the cache holds). An
    /// event written in an older epoch says nothing about the ones queued
    /// since, so `reached` trusts `written` only within the epoch.
    epoch: u64,
    /// The writer holds ops taken from `ops` and not yet written.
    busy: bool,
    /// Since when, while `busy`: a committing thread that writes has no
    /// deadline of its own, so the writer thread fails the cache once a
    /// write has lasted `ACK_WAIT` (a stuck disk).
    busy_since: Option<Instant>,
    /// Asked to write what is queued and end.
    closing: bool,
    /// The writer thread has ended (closed, or a panic): nothing waits
    /// for it any more, and ops are dropped.
    gone: bool,
    /// Files that rotations set aside, for the writer thread to delete
    /// (a committing thread that wrote does not wait for that). At most
    /// the cache's two files.
    doomed: Vec<crate::writeset_cache::Doomed>,
    /// Tests hold the writer back (`CacheWriter::pause`).
    #[cfg(test)]
    paused: bool,
}

impl Queue {
    /// The writer has nothing it may take now. Closing writes what is
    /// queued even when tests hold the writer.
    fn idle(&self) -> bool {
        #[cfg(test)]
        if self.paused && !self.closing {
            return true;
        }
        self.ops.is_empty()
    }

    /// Whether a waiting thread may write what is queued now: something
    /// is, and nobody is writing (nor held back, nor gone).
    fn may_write(&self) -> bool {
        !self.idle() && !self.busy && !self.gone
    }

    /// Whether the event `at` is written, or cannot be waiting: nothing
    /// is queued or being written (an event the cache does not take is
    /// never queued), or the writer is gone. Ops are written in order, so
    /// a newer event of the same history written means `at` is too.
    fn reached(&self, at: At) -> bool {
        self.gone
            || (self.ops.is_empty() && !self.busy)
            || self.written.is_some_and(|((history, seqno), epoch)| {
                epoch == self.epoch && history == at.0 && seqno >= at.1
            })
    }
}

struct Writes {
    queue: Mutex<Queue>,
    /// The writer thread waits here for ops (a batch of `WAKE_BYTES`, a
    /// reader, the back-pressure, the close, files to delete). Like
    /// `progress`, it counts its sleepers, so a notification with nobody
    /// asleep needs no system call.
    more: Sleepers,
    /// Rounds, readers and committing threads wait here for the writer.
    progress: Sleepers,
    /// Locked by the writer while it writes, and by readers once it is
    /// idle (`CacheWriter::with_cache`).
    cache: Mutex<Option<WritesetCache>>,
    /// The cache was dropped after a write error (or a panic).
    disabled: AtomicBool,
    /// Why the cache failed, for commits that wait on it and the status.
    failure: Mutex<Option<String>>,
    /// The lowest seqno held (`WritesetCache::first`), -1 for none:
    /// status queries read it without waiting for a write.
    first: AtomicI64,
    /// A write that lasts this long is stuck: `ACK_WAIT` (shorter in
    /// tests).
    stuck_after: Duration,
}

impl Writes {
    /// The reason the cache failed, if it did (a writer closed on purpose
    /// has not failed: nothing waits for it).
    fn failed(&self) -> Option<String> {
        lock(&self.failure).clone()
    }

    fn fail(&self, why: String) {
        lock(&self.failure).get_or_insert(why);
        self.disabled.store(true, Ordering::Release);
    }

    /// Wakes the writer and waits while `behind` holds and the writer
    /// lives; no deadline (the writer's own write(2) is what is waited
    /// for, as the round used to wait for its own), but logged every
    /// `SLOW_WRITER`.
    fn wait_for_writer(&self, behind: impl Fn(&Queue) -> bool, what: &str) {
        let t0 = Instant::now();
        let mut said = Duration::ZERO;
        let mut q = lock(&self.queue);
        while behind(&q) && !q.gone {
            self.more.notify_one();
            q = self.progress.wait(q, Some(IDLE));
            if t0.elapsed() >= said + SLOW_WRITER {
                said = t0.elapsed();
                let queued = q.bytes >> 20;
                // Not under the queue's lock: the server's logger may be
                // as slow as the disk.
                drop(q);
                warn!(
                    "waiting {} s for the writeset cache's writer ({queued} MiB queued) to \
                     make {what}: the disk under gcache.dir is slow",
                    said.as_secs()
                );
                q = lock(&self.queue);
            }
        }
    }

    fn publish_first(&self, cache: &Option<WritesetCache>) {
        let first = cache.as_ref().and_then(WritesetCache::first).unwrap_or(-1);
        self.first.store(first, Ordering::Release);
    }
}

/// A cache and its writer thread. Dropping it writes what is queued and
/// joins the thread.
pub struct CacheWriter {
    writes: Arc<Writes>,
    thread: Option<JoinHandle<()>>,
    /// `WritesetCache::max_record`, fixed at open.
    max_record: u64,
}

/// What a thread about to commit an event waits on: that event in the
/// cache file.
#[derive(Clone)]
pub struct Written {
    writes: Option<Arc<Writes>>,
    at: At,
}

impl Written {
    /// Nothing to wait for (no cache).
    pub fn nothing() -> Written {
        Written {
            writes: None,
            at: ([0; 16], 0),
        }
    }

    /// Whether the event is written (or cannot be waiting), and the cache
    /// has not failed.
    pub fn done(&self) -> bool {
        self.writes
            .as_ref()
            .is_none_or(|w| w.failed().is_none() && lock(&w.queue).reached(self.at))
    }

    /// Waits until the event is written, at most `deadline`. `Err` with
    /// the reason if the cache failed, or the event is still not written
    /// at the deadline (a stuck disk: the cache is then failed too, so
    /// later commits do not wait for it again).
    pub fn wait(&self, deadline: Duration) -> Result<(), String> {
        let Some(w) = &self.writes else {
            return Ok(());
        };
        let t0 = Instant::now();
        let mut q = lock(&w.queue);
        loop {
            if let Some(why) = w.failed() {
                return Err(why);
            }
            if q.reached(self.at) {
                return Ok(());
            }
            if q.may_write() {
                // Nobody is writing: this thread writes what is queued,
                // its own event and every one before it.
                write_queued(w, q);
                q = lock(&w.queue);
                continue;
            }
            let left = deadline.saturating_sub(t0.elapsed());
            if left.is_zero() {
                drop(q);
                let why = format!(
                    "seqno {} is still not written to the writeset cache after {} s (the disk \
                     under gcache.dir is stuck)",
                    self.at.1,
                    t0.elapsed().as_secs()
                );
                w.fail(why.clone());
                return Err(why);
            }
            q = w.progress.wait(q, Some(left));
        }
    }
}

/// Room in the writer's queue, which the next round looks for after a
/// round let go of the provider's lock (the bound: `MAX_QUEUED_BYTES`).
pub struct Room {
    writes: Arc<Writes>,
}

impl Room {
    /// Whether the queue holds at most `MAX_QUEUED_BYTES` now (or the
    /// writer has ended). A look, not a wait: the rounds run on the event
    /// loop, which must not block (ADR 0039); they look again after
    /// `ROOM_RETRY` and run no round meanwhile. Nudges the writer if not.
    pub fn is_free(&self) -> bool {
        let q = lock(&self.writes.queue);
        if q.bytes <= MAX_QUEUED_BYTES || q.gone {
            return true;
        }
        // A committing thread that writes wakes the writer when it is
        // done if this much is still queued (`write_queued`).
        let writing = q.busy;
        drop(q);
        // A failed cache fails every commit waiting for it, and the node
        // leaves (ADR 0032): its queue no longer holds the rounds back.
        if self.writes.failed().is_some() {
            return true;
        }
        if !writing {
            self.writes.more.notify_one();
        }
        false
    }

    /// Waits while more than `MAX_QUEUED_BYTES` are queued and the writer
    /// lives (no deadline: the disk is what is waited for; logged every
    /// `SLOW_WRITER`). For the tests' rounds.
    #[cfg(test)]
    pub fn wait(self) {
        crate::state_lock::expect_unlocked("a wait for the writeset cache's writer");
        self.writes.wait_for_writer(
            |q| q.bytes > MAX_QUEUED_BYTES,
            "room in its queue (the group waits)",
        );
    }
}

/// How soon a round that found no room looks again.
pub const ROOM_RETRY: Duration = Duration::from_millis(1);

/// How often a round that finds no room for so long says so.
pub const ROOM_NOTE: Duration = SLOW_WRITER;

impl CacheWriter {
    /// Starts the writer thread for `cache`; `None` (logged: the node
    /// runs without a cache, joiners then take SST) if no thread could
    /// start.
    pub fn start(cache: WritesetCache) -> Option<CacheWriter> {
        Self::start_stuck_after(cache, ACK_WAIT)
    }

    fn start_stuck_after(cache: WritesetCache, stuck_after: Duration) -> Option<CacheWriter> {
        let max_record = cache.max_record();
        let writes = Arc::new(Writes {
            queue: Mutex::new(Queue::default()),
            more: Sleepers::default(),
            progress: Sleepers::default(),
            cache: Mutex::new(None),
            disabled: AtomicBool::new(false),
            failure: Mutex::new(None),
            first: AtomicI64::new(-1),
            stuck_after,
        });
        {
            let mut c = lock(&writes.cache);
            *c = Some(cache);
            writes.publish_first(&c);
        }
        let theirs = writes.clone();
        match std::thread::Builder::new()
            .name("lockstep-cache".into())
            .spawn(move || write_loop(&theirs))
        {
            Ok(thread) => Some(CacheWriter {
                writes,
                thread: Some(thread),
                max_record,
            }),
            Err(e) => {
                warn!(
                    "cannot start the writeset cache's writer thread ({e}); running without \
                     a writeset cache (joiners that need events from this node will take a \
                     full SST)"
                );
                None
            }
        }
    }

    /// The cache is still written (no write error dropped it).
    pub fn is_open(&self) -> bool {
        !self.writes.disabled.load(Ordering::Acquire)
    }

    /// Why the cache failed, if it did (`wsrep_lockstep_cache_failure`).
    pub fn failure(&self) -> Option<String> {
        self.writes.failed()
    }

    pub fn max_record(&self) -> u64 {
        self.max_record
    }

    /// `WritesetCache::first`, as of the last write.
    pub fn first(&self) -> Option<i64> {
        let f = self.writes.first.load(Ordering::Acquire);
        (f >= 0).then_some(f)
    }

    /// Queues an event of `bytes` (its writeset's size, counted once by
    /// the caller).
    pub fn append(&self, ev: CachedEvent, bytes: usize) {
        let at = (ev.history, ev.seqno);
        self.queue(Op::Append(ev), bytes, Some(at));
    }

    pub fn skip_oversized(&self) {
        self.queue(Op::SkipOversized, 0, None);
    }

    /// The round's batch is queued: wakes the writer if `WAKE_BYTES` or
    /// more wait (below that, the threads that commit the events write
    /// them: `Written::wait`).
    pub fn end_batch(&self) {
        let q = lock(&self.writes.queue);
        let wake = !q.ops.is_empty() && q.bytes >= WAKE_BYTES;
        drop(q);
        if wake {
            self.writes.more.notify_one();
        }
    }

    /// What committing the event at `seqno` of `history` waits for.
    pub fn written(&self, history: [u8; 16], seqno: i64) -> Written {
        Written {
            writes: Some(self.writes.clone()),
            at: (history, seqno),
        }
    }

    /// What a round waits on once it has let go of the provider's lock:
    /// room in the queue.
    pub fn room(&self) -> Room {
        Room {
            writes: self.writes.clone(),
        }
    }

    /// Queues `op` (the event `at`, if it is one). Never waits: the
    /// caller holds the provider's lock, and waits for room after it lets
    /// go of it (`Room::is_free`).
    fn queue(&self, op: Op, bytes: usize, at: Option<At>) {
        let mut q = lock(&self.writes.queue);
        if q.gone {
            self.writes.disabled.store(true, Ordering::Release);
            return;
        }
        if let Some(at) = at {
            let follows = q
                .last_queued
                .is_some_and(|(history, seqno)| history == at.0 && at.1 > seqno);
            if !follows {
                q.epoch += 1;
            }
            q.last_queued = Some(at);
        }
        q.bytes += bytes;
        q.ops.push_back(op);
    }

    /// Waits until the writer has written everything queued, then runs
    /// `f` on the cache (`None`: it was dropped after a write error).
    /// The caller holds the provider's lock, which the writer never
    /// takes, and so nothing is queued meanwhile.
    pub fn with_cache<R>(&self, f: impl FnOnce(&mut WritesetCache) -> R) -> Option<R> {
        self.writes.wait_for_writer(
            |q| !q.ops.is_empty() || q.busy,
            "everything queued to be written",
        );
        let mut c = lock(&self.writes.cache);
        c.as_mut().map(f)
    }

    /// Writes what is queued, ends the thread and gives the cache back.
    pub fn close(mut self) -> Option<WritesetCache> {
        self.stop();
        lock(&self.writes.cache).take()
    }

    /// Holds the writer back (`true`) or lets it go on, for tests of what
    /// waits for it.
    #[cfg(test)]
    pub fn pause(&self, on: bool) {
        lock(&self.writes.queue).paused = on;
        self.writes.more.notify_one();
    }

    fn stop(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        lock(&self.writes.queue).closing = true;
        self.writes.more.notify_one();
        if thread.join().is_err() {
            warn!("the writeset cache's writer thread panicked");
        }
    }
}

impl Drop for CacheWriter {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The writer thread: takes every queued op, writes them under the cache's
/// lock, flushes once (one fsync for every batch taken), then publishes
/// the newest event written. Ends once closing and nothing is left.
fn write_loop(w: &Writes) {
    /// Marks the writer gone however it ends, a panic included, and
    /// wakes whoever waits for it. After a panic the cache may be half
    /// written: it is dropped (disabled) here, so that nothing of it
    /// writes later into a file a new cache has opened.
    struct Gone<'a>(&'a Writes);
    impl Drop for Gone<'_> {
        fn drop(&mut self) {
            let mut q = lock(&self.0.queue);
            q.gone = true;
            q.busy = false;
            q.ops.clear();
            let doomed = std::mem::take(&mut q.doomed);
            drop(q);
            delete(doomed);
            if std::thread::panicking() {
                self.0
                    .fail("the writeset cache's writer thread panicked".into());
                drop(lock(&self.0.cache).take());
            }
            self.0.progress.notify_all();
        }
    }
    let _gone = Gone(w);
    loop {
        let mut q = lock(&w.queue);
        // A committing thread may be writing (`busy`): never two writers.
        while (q.idle() || q.busy) && q.doomed.is_empty() && !q.closing {
            q = w.more.wait(q, Some(IDLE));
            let stuck = q.busy_since.is_some_and(|t| t.elapsed() >= w.stuck_after);
            if stuck && w.failed().is_none() {
                drop(q);
                w.fail(format!(
                    "a write to the writeset cache has not returned after {} s (the disk \
                     under gcache.dir is stuck)",
                    w.stuck_after.as_secs()
                ));
                w.progress.notify_all();
                q = lock(&w.queue);
            }
        }
        let doomed = std::mem::take(&mut q.doomed);
        if q.may_write() {
            write_queued(w, q);
            // Freeing a file of half of gcache.size takes tens of ms:
            // after the waiters are told, with no lock held (the files
            // this write set aside are taken at the next turn).
            delete(doomed);
            continue;
        }
        if q.closing && q.busy {
            // A committing thread is writing: its end is waited for.
            drop(w.progress.wait(q, Some(IDLE)));
            delete(doomed);
            continue;
        }
        let done = q.closing;
        drop(q);
        delete(doomed);
        if done {
            return; // closing, all written
        }
    }
}

fn delete(doomed: Vec<crate::writeset_cache::Doomed>) {
    for file in doomed {
        let path = file.path.clone();
        if let Err(e) = file.delete() {
            info!("{}: {e}", path.display());
        }
    }
}

/// Takes every queued op and writes it without the queue's lock (marked
/// `busy` meanwhile: one writer at a time), then publishes the newest
/// event written and wakes whoever waits. By the writer thread or by a
/// committing thread (`Written::wait`), which is why a panic in the write
/// (a bug) is caught here: the cache fails and is dropped, as when the
/// writer thread panicked, and the waiters hear of it. The files
/// rotations set aside go to the writer thread in the same look at the
/// queue that ends `busy` (so a closing thread cannot miss them), and the
/// thread is woken for them, or for a batch of `WAKE_BYTES` queued
/// meanwhile (its wake-up came while this write was on).
fn write_queued(w: &Writes, mut q: MutexGuard<'_, Queue>) {
    let ops = std::mem::take(&mut q.ops);
    // Every op queued so far is taken: the newest of them is of the
    // current epoch.
    let epoch = q.epoch;
    // Counted until written, so that the bound covers what the writer
    // holds too.
    let taken_bytes = q.bytes;
    q.busy = true;
    q.busy_since = Some(Instant::now());
    drop(q);
    let wrote = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| write(w, ops)));
    let (newest, doomed) = wrote.unwrap_or_else(|_| {
        w.fail("writing the writeset cache panicked".into());
        drop(lock(&w.cache).take());
        (None, Vec::new())
    });
    let mut q = lock(&w.queue);
    q.busy = false;
    q.busy_since = None;
    if let Some(at) = newest {
        q.written = Some((at, epoch));
    }
    q.bytes -= taken_bytes;
    let wake = !doomed.is_empty() || q.bytes >= WAKE_BYTES;
    q.doomed.extend(doomed);
    drop(q);
    w.progress.notify_all();
    if wake {
        w.more.notify_one();
    }
}

/// Writes `ops` and flushes; returns the newest event among them and the
/// files rotations set aside.
fn write(w: &Writes, ops: VecDeque<Op>) -> (Option<At>, Vec<crate::writeset_cache::Doomed>) {
    let mut newest = None;
    let mut doomed = Vec::new();
    let mut c = lock(&w.cache);
    for op in ops {
        let result = match (op, c.as_mut()) {
            (Op::Append(ev), cache) => {
                newest = Some((ev.history, ev.seqno));
                cache.map_or(Ok(()), |cache| cache.append(&ev))
            }
            (Op::SkipOversized, Some(cache)) => cache.skip_oversized(),
            (Op::SkipOversized, None) => Ok(()),
        };
        if let Err(e) = result {
            disable(w, &mut c, &e);
        }
        if let Some(path) = c.as_mut().and_then(WritesetCache::take_doomed) {
            doomed.push(path);
        }
    }
    if let Some(Err(e)) = c.as_mut().map(WritesetCache::flush) {
        disable(w, &mut c, &e);
    }
    w.publish_first(&c);
    (newest, doomed)
}

fn disable(w: &Writes, cache: &mut Option<WritesetCache>, e: &std::io::Error) {
    crate::writeset_cache::disable(cache, e);
    w.fail(format!("writing the writeset cache failed: {e}"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstep_core::writeset_cache::CachedKind;
    use std::sync::Arc as StdArc;
    use wsrep_abi::{Gtid, Uuid};

    const H: [u8; 16] = [7; 16];

    fn view(seqno: i64) -> CachedEvent {
        CachedEvent {
            history: H,
            seqno,
            kind: CachedKind::View {
                members: 0,
                who: None,
            },
        }
    }

    /// A cache of 1 MiB for a node at seqno 0 of `H`, or of `size`.
    fn open_sized(dir: &std::path::Path, size: u64) -> WritesetCache {
        let start = Gtid {
            uuid: Uuid::from_bytes(H),
            seqno: 0,
        };
        crate::writeset_cache::tests::open(dir, size, true, start)
    }

    fn open(dir: &std::path::Path) -> WritesetCache {
        open_sized(dir, 1 << 20)
    }

    /// Events queued in batches reach the file in order; a reader sees
    /// every one once the writer has drained, and a wait for an event
    /// ends once it is written.
    #[test]
    fn queued_batches_are_written_in_order_and_waits_end_once_written() {
        let dir = tempfile::tempdir().unwrap();
        let w = CacheWriter::start(open(dir.path())).expect("a thread");
        for batch in 0..50 {
            for s in 1..=4 {
                w.append(view(batch * 4 + s), 0);
            }
            w.end_batch();
            let last = w.written(H, batch * 4 + 4);
            assert_eq!(last.wait(Duration::from_secs(5)), Ok(()), "batch {batch}");
            assert!(last.done());
            assert!(w.written(H, batch * 4 + 1).done(), "an older one too");
        }
        let got: Vec<i64> = w
            .with_cache(|c| {
                c.reader(Uuid::from_bytes(H), 0, 200)
                    .unwrap()
                    .map(|e| e.unwrap().seqno)
                    .collect()
            })
            .unwrap();
        assert_eq!(got, (1..=200).collect::<Vec<_>>());
        assert_eq!(w.first(), Some(1));
        let cache = w.close().expect("the cache comes back");
        assert!(cache.covers(Uuid::from_bytes(H), 0, 200));
    }

    /// A wait for an event queued while the writer is held up lasts
    /// until it is written, and not past its deadline; an event of
    /// another history is not mistaken for it; closing writes what is
    /// queued.
    #[test]
    fn a_wait_lasts_while_the_writer_is_held_and_closing_writes_the_queue() {
        let dir = tempfile::tempdir().unwrap();
        let w = CacheWriter::start(open(dir.path())).expect("a thread");
        w.append(view(5), 0);
        w.end_batch();
        assert_eq!(w.written(H, 5).wait(Duration::from_secs(5)), Ok(()));
        let held = lock(&w.writes.cache); // the writer cannot write
        w.append(view(6), 0);
        w.end_batch();
        let ack = w.written(H, 6);
        assert!(!ack.done(), "5 was written, 6 is still queued");
        assert!(
            !w.written([9; 16], 1).done(),
            "another history's 1 waits too while something is queued"
        );
        let waiter = {
            let ack = ack.clone();
            std::thread::spawn(move || ack.wait(Duration::from_secs(10)))
        };
        std::thread::sleep(Duration::from_millis(50));
        drop(held);
        assert_eq!(waiter.join().unwrap(), Ok(()), "woken once written");
        w.append(view(7), 0);
        w.end_batch();
        let cache = w.close().unwrap();
        assert!(
            cache.covers(Uuid::from_bytes(H), 4, 7),
            "closing wrote the queue"
        );
        assert_eq!(Written::nothing().wait(Duration::ZERO), Ok(()));
    }

    type HeldDisk<'a> = MutexGuard<'a, Option<WritesetCache>>;
    type StuckCommit = std::thread::JoinHandle<Result<(), String>>;

    /// A disk that does not answer (the cache's lock held), and a commit
    /// of seqno 1 on another thread: the first to wait, it writes the
    /// batch itself and hangs with the disk, as InnoDB's own commit on it
    /// would.
    fn commit_on_a_stuck_disk(w: &StdArc<CacheWriter>) -> (HeldDisk<'_>, StuckCommit) {
        // The thread's first look, at its start, finds nothing to write.
        std::thread::sleep(Duration::from_millis(50));
        let held = lock(&w.writes.cache);
        w.append(view(1), 0);
        w.end_batch();
        let writer = w.clone();
        let stuck = std::thread::spawn(move || writer.written(H, 1).wait(ACK_WAIT));
        (held, stuck)
    }

    /// A stuck disk: a commit whose event is still unwritten at its
    /// deadline fails with the reason, and so does every later wait, at
    /// once, even after the writer moves on: the node must not go back to
    /// acknowledging commits a crash of every node may lose.
    #[test]
    fn a_commit_fails_when_the_disk_is_stuck_and_so_do_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let w = StdArc::new(CacheWriter::start(open(dir.path())).expect("a thread"));
        let (held, stuck) = commit_on_a_stuck_disk(&w);
        let t0 = Instant::now();
        while !lock(&w.writes.queue).busy {
            assert!(t0.elapsed() < Duration::from_secs(5), "nobody writes");
            std::thread::sleep(Duration::from_millis(1));
        }
        // Every other commit keeps its deadline.
        let t0 = Instant::now();
        let why = w.written(H, 1).wait(Duration::from_millis(200));
        assert!(t0.elapsed() >= Duration::from_millis(200));
        assert!(
            why.as_ref()
                .is_err_and(|e| e.contains("seqno 1 is still not written")),
            "{why:?}"
        );
        drop(held);
        let late = stuck.join().unwrap();
        assert_eq!(late, why, "written late, but the cache failed meanwhile");
        w.append(view(2), 0);
        w.end_batch();
        let t0 = Instant::now();
        let again = w.written(H, 2).wait(Duration::from_secs(5));
        assert!(
            again.is_err() && t0.elapsed() < Duration::from_secs(1),
            "{again:?}"
        );
        assert!(!w.written(H, 2).done());
        assert_eq!(w.failure(), why.err());
    }

    /// The committing thread that writes has no deadline of its own: if it
    /// is the only one waiting and the disk does not answer, the writer
    /// thread fails the cache at its next look past `stuck_after`, so the
    /// node stops acknowledging and leaves as with any stuck write.
    #[test]
    fn a_write_stuck_on_a_committing_thread_fails_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let stuck_after = Duration::from_millis(100);
        let w = StdArc::new(
            CacheWriter::start_stuck_after(open(dir.path()), stuck_after).expect("a thread"),
        );
        let (held, stuck) = commit_on_a_stuck_disk(&w);
        let t0 = Instant::now();
        while w.failure().is_none() {
            assert!(
                t0.elapsed() < stuck_after + IDLE * 3,
                "the writer thread never failed the cache"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(w.failure().unwrap().contains("has not returned"));
        drop(held);
        assert!(stuck.join().unwrap().is_err(), "its commit fails too");
    }

    /// A committing thread's write that rotated the cache hands the file
    /// it set aside to the writer thread, which deletes it: none is left
    /// once the writer is closed right after.
    #[test]
    fn files_a_committing_thread_set_aside_are_deleted_by_the_close() {
        let dir = tempfile::tempdir().unwrap();
        let w = CacheWriter::start(open_sized(dir.path(), 128 << 10)).expect("a thread");
        std::thread::sleep(Duration::from_millis(50));
        for batch in 0..40 {
            for s in 1..=100 {
                w.append(view(batch * 100 + s), 100);
            }
            w.end_batch();
            let last = w.written(H, batch * 100 + 100);
            assert_eq!(last.wait(Duration::from_secs(5)), Ok(()));
        }
        let aside = |dir: &std::path::Path| {
            std::fs::read_dir(dir)
                .unwrap()
                .filter(|e| {
                    let name = e.as_ref().unwrap().file_name();
                    name.to_string_lossy().contains(".old.")
                })
                .count()
        };
        assert!(w.first() > Some(1), "it rotated: {:?}", w.first());
        let cache = w.close().expect("the cache comes back");
        assert!(
            cache.covers(Uuid::from_bytes(H), 3000, 4000),
            "it rotated and kept the newest"
        );
        assert_eq!(aside(dir.path()), 0, "no file set aside is left");
    }

    /// Issue 53, fewer wake-ups: a small batch wakes nobody; the first
    /// thread that waits for one of its events writes all of it. A batch
    /// of `WAKE_BYTES` or more wakes the writer thread.
    #[test]
    fn a_small_batch_is_written_by_its_first_waiter_a_big_one_by_the_thread() {
        let dir = tempfile::tempdir().unwrap();
        let w = CacheWriter::start(open(dir.path())).expect("a thread");
        // The thread's first look, at its start, finds nothing.
        std::thread::sleep(Duration::from_millis(50));
        for s in 1..=3 {
            w.append(view(s), 100);
        }
        w.end_batch();
        // Well within the thread's next look (`IDLE`).
        std::thread::sleep(Duration::from_millis(100));
        assert!(!w.written(H, 1).done(), "nobody woke the writer thread");
        assert_eq!(w.written(H, 2).wait(Duration::from_secs(5)), Ok(()));
        assert!(w.written(H, 3).done(), "the waiter wrote the whole batch");
        w.append(view(4), WAKE_BYTES);
        w.end_batch();
        let t0 = Instant::now();
        while !w.written(H, 4).done() {
            assert!(
                t0.elapsed() < IDLE / 2,
                "the writer thread wrote the big batch without a waiter"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// A write error (here `ENOSPC`) fails the commits that wait, with the
    /// error in the reason; before it nothing had failed.
    #[test]
    fn a_write_error_fails_the_commits_that_wait() {
        let dir = tempfile::tempdir().unwrap();
        let w = CacheWriter::start(open(dir.path())).expect("a thread");
        w.append(view(1), 0);
        w.end_batch();
        assert_eq!(w.written(H, 1).wait(Duration::from_secs(5)), Ok(()));
        assert_eq!(w.failure(), None);
        {
            let mut c = lock(&w.writes.cache);
            disable(&w.writes, &mut c, &std::io::Error::from_raw_os_error(28));
        }
        w.append(view(2), 0);
        w.end_batch();
        let why = w.written(H, 2).wait(Duration::from_secs(5));
        assert!(
            why.as_ref()
                .is_err_and(|e| e.contains("No space left on device")),
            "{why:?}"
        );
        assert!(!w.is_open());
    }

    /// Issue 52 items 2 and 3: the writer thread on a cache behind the
    /// storage seam with `lockstep.cache_sync=yes`, the power cut after
    /// every number of file operations. A wait that returned `Ok` (the
    /// commit was acknowledged) always finds its event in the cache
    /// recovered after the power loss; once the cut is reached every wait
    /// fails with the reason (the commit fails and the node leaves), none
    /// waits for its deadline.
    #[test]
    fn with_cache_sync_an_acknowledged_event_survives_a_power_cut_at_any_step() {
        use crate::storage::power_loss::SimFs;
        let start = Gtid {
            uuid: Uuid::from_bytes(H),
            seqno: 0,
        };
        let ws = |seqno: i64| CachedEvent {
            history: H,
            seqno,
            kind: crate::ist_replay::tests::ws_kind(seqno, 3000),
        };
        let open_on = |fs: &SimFs| {
            WritesetCache::open_on(
                StdArc::new(fs.clone()),
                std::path::Path::new("/cache"),
                "galera.cache",
                128 << 10,
                1 << 20,
                true,
                start,
            )
        };
        for cut in 0.. {
            let fs = SimFs::new();
            let mut cache = open_on(&fs).expect("a cache");
            cache.set_sync(true).expect("synced");
            fs.cut_after(cut);
            let w = CacheWriter::start(cache).expect("a thread");
            let (mut acked, mut failed) = (0, false);
            for batch in 0..12 {
                for s in 1..=4 {
                    w.append(ws(batch * 4 + s), 3000);
                }
                w.end_batch();
                let t0 = Instant::now();
                match w.written(H, batch * 4 + 4).wait(Duration::from_secs(5)) {
                    Ok(()) => acked = batch * 4 + 4,
                    Err(why) => {
                        assert!(why.contains("power loss"), "cut {cut}: {why}");
                        assert!(t0.elapsed() < Duration::from_secs(4), "cut {cut}: waited");
                        failed = true;
                        break;
                    }
                }
            }
            assert_eq!(w.is_open(), !failed, "cut {cut}");
            drop(w.close());
            fs.power_loss();
            // The newest events are what a replay needs (older ones leave
            // by rotation, as they would without a cut).
            let mut c = open_on(&fs).expect("reopened");
            if acked > 0 {
                let first = c.first().unwrap_or(i64::MAX);
                let covered = c.covers(Uuid::from_bytes(H), first - 1, acked);
                assert!(
                    covered,
                    "cut {cut}: {acked} acknowledged, the cache holds {}",
                    c.describe()
                );
                let read = c.reader(Uuid::from_bytes(H), first - 1, acked).unwrap();
                assert!(
                    read.map(|e| e.map(|e| e.seqno)).eq((first..=acked).map(Ok)),
                    "cut {cut}"
                );
            }
            if !failed {
                assert!(cut > 20, "only {cut} operations");
                break;
            }
        }
    }

    /// A later session that joins the same history below what the cache
    /// has written: its events are not taken as written because newer
    /// seqnos of that history were.
    #[test]
    fn an_event_queued_below_what_was_written_still_waits() {
        let dir = tempfile::tempdir().unwrap();
        let w = CacheWriter::start(open(dir.path())).expect("a thread");
        for s in 1..=10 {
            w.append(view(s), 0);
        }
        w.end_batch();
        assert_eq!(w.written(H, 10).wait(Duration::from_secs(5)), Ok(()));
        w.pause(true);
        w.append(view(6), 0); // starts the cache over at 6
        w.end_batch();
        assert!(
            !w.written(H, 6).done(),
            "10 was written, but before 6 came again"
        );
        w.pause(false);
        assert_eq!(w.written(H, 6).wait(Duration::from_secs(5)), Ok(()));
        assert!(w
            .with_cache(|c| c.covers(Uuid::from_bytes(H), 5, 6))
            .unwrap());
    }

    /// The queue is bounded: queueing never waits (it runs under the
    /// provider's lock), and past `MAX_QUEUED_BYTES` a round waits for
    /// room, afterwards, until the writer (here held) makes it.
    #[test]
    fn a_round_waits_for_room_past_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let w = StdArc::new(CacheWriter::start(open_sized(dir.path(), 1 << 30)).expect("a thread"));
        let ws = |seqno: i64| CachedEvent {
            history: H,
            seqno,
            kind: crate::ist_replay::tests::ws_kind(seqno, 1024),
        };
        let big = MAX_QUEUED_BYTES / 2 + 1;
        let held = lock(&w.writes.cache);
        w.append(ws(1), big);
        w.end_batch();
        assert!(w.room().is_free(), "within the bound");
        w.room().wait(); // within the bound: returns at once
        w.append(ws(2), big); // past the bound, and queued at once
        w.append(ws(3), big);
        w.end_batch();
        assert!(
            !w.room().is_free(),
            "past the bound while the writer is held"
        );
        let round = {
            let room = w.room();
            std::thread::spawn(move || room.wait())
        };
        std::thread::sleep(Duration::from_millis(200));
        assert!(!round.is_finished(), "the round waits for room");
        drop(held);
        round.join().unwrap();
        assert!(w.room().is_free(), "room once the writer caught up");
        assert_eq!(w.written(H, 3).wait(Duration::from_secs(10)), Ok(()));
        assert!(w
            .with_cache(|c| c.covers(Uuid::from_bytes(H), 0, 3))
            .unwrap());
    }
}
