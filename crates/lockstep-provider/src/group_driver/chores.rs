//! What a round decides and the event loop must not do itself (ADR 0039):
//! disk writes, and the freeing of big writesets. One long-lived thread
//! runs them in the order the rounds gave them. The round goes on at
//! once, except after a spill: no round runs until it is back (the
//! receive queue's memory bound, as when the round wrote it itself); its
//! result goes to the shared state from here, and the loop is woken.

use crate::group_input::InputTx;
use crate::log::{error, warn};
use crate::shared::Shared;
use crate::viewstate::ViewKeeper;
use lockstep_core::group::action::CertFingerprint;
use lockstep_core::group::Writeset;
// A chore that panicked while holding one of its locks left nothing half
// done in it (an `Option` taken, or no data at all).
use lockstep_core::sync::unpoisoned;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Chores queued and not yet run, at most: past it a round runs its chore
/// itself, as before this thread (a slow disk then slows the rounds, not
/// the memory).
const CHORES_MAX: usize = 64;

/// How long the end of a session waits for the chores already queued
/// (a spill's writes, a marker's removal).
const FINISH_WAIT: Duration = Duration::from_secs(30);

pub(super) enum Chore {
    /// Writesets queued past the receive queue's memory budget, to the
    /// spool (ADR 0038); its result goes back to the apply queue.
    Spill(crate::recv_spool::SpillJob),
    /// A closed commit bypass's marker, removed durably (ADR 0011).
    Marker(crate::storage::marker::MarkerJob),
    /// The members' certificates changed: the newest table given
    /// (`Chores::give_bindings`) is saved with the view (pc.recovery).
    Bindings,
    /// Purged writesets: a million keys are a million frees and more.
    Free(Vec<Arc<Writeset>>),
    #[cfg(test)]
    Test(Box<dyn FnOnce() + Send>),
}

pub(super) struct Chores {
    tx: Option<SyncSender<Chore>>,
    ctx: Arc<Ctx>,
    /// Closed by the thread when it ends.
    ended: Receiver<()>,
}

/// What running a chore needs.
struct Ctx {
    shared: Arc<Shared>,
    /// A spill job is out: no round runs until it is back.
    spilling: AtomicBool,
    /// Wakes the rounds' loop when a spill is back.
    inputs: InputTx,
    /// The newest certificate bindings to save with the view.
    bindings: Newest<(Arc<ViewKeeper>, BTreeMap<u64, CertFingerprint>)>,
}

/// The newest of a state that is saved whole, written in order. One
/// writer at a time writes the newest given so far, under `writing`, so
/// an older state cannot be written after a newer one. A caller that
/// finds another writing does not wait for it (a round that runs the
/// chore itself because the queue is full must not sit behind a disk
/// write): whoever ends a write looks again, after letting go, and writes
/// what was given meanwhile.
struct Newest<T> {
    pending: Mutex<Option<T>>,
    writing: Mutex<()>,
}

impl<T> Newest<T> {
    fn new() -> Newest<T> {
        Newest {
            pending: Mutex::new(None),
            writing: Mutex::new(()),
        }
    }

    fn put(&self, t: T) {
        *unpoisoned(&self.pending) = Some(t);
    }

    /// Writes the newest state given, unless another thread is writing:
    /// that one writes it after its own. A giver puts before it tries the
    /// lock, and a writer looks at `pending` after it lets go, so one of
    /// the two sees every state given.
    fn write(&self, mut f: impl FnMut(T)) {
        loop {
            let writing = match self.writing.try_lock() {
                Ok(w) => w,
                Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return,
            };
            let newest = unpoisoned(&self.pending).take();
            if let Some(t) = newest {
                f(t);
            }
            drop(writing);
            if unpoisoned(&self.pending).is_none() {
                return;
            }
        }
    }
}

impl Chores {
    pub(super) fn start(shared: Arc<Shared>, inputs: InputTx) -> Chores {
        let (tx, rx) = sync_channel(CHORES_MAX);
        let (ended_tx, ended) = sync_channel(0);
        let ctx = Arc::new(Ctx {
            shared,
            spilling: AtomicBool::new(false),
            inputs,
            bindings: Newest::new(),
        });
        let theirs = ctx.clone();
        // Counted with the detached threads: unloading the library waits
        // for it (`Shared::detached`).
        let started = ctx.shared.detached.spawn("lockstep-chores", move || {
            let _ended = ended_tx;
            for chore in rx {
                run(&theirs, chore);
            }
        });
        let tx = if started {
            Some(tx)
        } else {
            warn!("cannot start the chores thread; the rounds do their disk work themselves");
            None
        };
        Chores { tx, ctx, ended }
    }

    /// A spill job is out (`Chore::Spill`): the next round waits for it.
    pub(super) fn spilling(&self) -> bool {
        self.ctx.spilling.load(Ordering::SeqCst)
    }

    /// The members' certificates changed: `table` is saved with the view,
    /// after any table given before.
    pub(super) fn give_bindings(
        &self,
        views: Arc<ViewKeeper>,
        table: BTreeMap<u64, CertFingerprint>,
    ) {
        self.ctx.bindings.put((views, table));
        self.give(Chore::Bindings);
    }

    /// Queues `chore` for the thread; runs it here if the thread is gone
    /// or `CHORES_MAX` wait.
    pub(super) fn give(&self, chore: Chore) {
        if matches!(chore, Chore::Spill(_)) {
            self.ctx.spilling.store(true, Ordering::SeqCst);
        }
        let chore = match &self.tx {
            Some(tx) => match tx.try_send(chore) {
                Ok(()) => return,
                Err(TrySendError::Full(c) | TrySendError::Disconnected(c)) => c,
            },
            None => chore,
        };
        run(&self.ctx, chore);
    }

    /// Closes the queue and waits (at most `FINISH_WAIT`) for what is in
    /// it to be done, so that no chore of this session runs in the next.
    pub(super) fn finish(&mut self) {
        if self.tx.take().is_none() {
            return;
        }
        match self.ended.recv_timeout(FINISH_WAIT) {
            Err(RecvTimeoutError::Timeout) => warn!(
                "the chores thread did not finish its disk work within {} s",
                FINISH_WAIT.as_secs()
            ),
            Ok(()) | Err(RecvTimeoutError::Disconnected) => {}
        }
    }
}

/// Runs one chore; a panic in it (a bug) is logged and the thread goes
/// on. A spill that panicked counts as a failed write: the queue stays in
/// memory from then on.
fn run(ctx: &Ctx, chore: Chore) {
    match chore {
        Chore::Spill(job) => {
            let abandoned = job.abandoned();
            let done = guarded("writing to the receive spool", || job.run()).unwrap_or(abandoned);
            ctx.shared.lock().queue.spilled(done);
            ctx.spilling.store(false, Ordering::SeqCst);
            ctx.inputs.wake();
        }
        Chore::Marker(job) => {
            guarded("removing the commit bypass marker", || {
                crate::bypass::run_marker_job(job, &crate::storage::Disk)
            });
        }
        Chore::Bindings => ctx.bindings.write(|(views, table)| {
            if let Some(Err(e)) = guarded("saving the view's bindings", || {
                views.bindings_changed(&table)
            }) {
                warn!("{e}");
            }
        }),
        Chore::Free(reaped) => drop(reaped),
        #[cfg(test)]
        Chore::Test(f) => {
            guarded("a test's chore", f);
        }
    }
}

fn guarded<T>(what: &str, f: impl FnOnce() -> T) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(t) => Some(t),
        Err(payload) => {
            error!(
                "lockstep internal error: the chores thread failed {what}: {}",
                crate::log::panic_message(&*payload)
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread::ThreadId;

    type Log = Arc<Mutex<Vec<(u32, ThreadId)>>>;

    fn logged(log: &Log, n: u32, pause: Duration) -> Chore {
        let log = log.clone();
        Chore::Test(Box::new(move || {
            std::thread::sleep(pause);
            log.lock().unwrap().push((n, std::thread::current().id()));
        }))
    }

    fn shared() -> Arc<Shared> {
        let inner = crate::state::Inner::new(wsrep_abi::Uuid::default(), -1);
        Arc::new(Shared::new(inner))
    }

    fn inputs() -> InputTx {
        InputTx::new(std::sync::mpsc::channel().0)
    }

    #[test]
    fn chores_run_in_order_off_the_round_and_finish_waits_for_them() {
        let mut chores = Chores::start(shared(), inputs());
        let log = Log::default();
        for n in 0..10 {
            chores.give(logged(&log, n, Duration::from_millis(2)));
        }
        chores.finish();
        let log = log.lock().unwrap();
        let order: Vec<u32> = log.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            order,
            (0..10).collect::<Vec<_>>(),
            "all done, in order, at finish"
        );
        let here = std::thread::current().id();
        assert!(
            log.iter().all(|(_, t)| *t != here),
            "none on the giving thread"
        );
    }

    #[test]
    fn a_chore_that_panics_is_logged_and_the_next_ones_run() {
        let mut chores = Chores::start(shared(), inputs());
        let log = Log::default();
        chores.give(Chore::Test(Box::new(|| panic!("a bug in a chore"))));
        chores.give(logged(&log, 1, Duration::ZERO));
        chores.finish();
        assert_eq!(log.lock().unwrap().len(), 1, "the thread went on");
    }

    #[test]
    fn the_newest_state_is_written_last_and_nobody_waits_for_a_write() {
        let newest = Arc::new(Newest::new());
        let log = Arc::new(Mutex::new(Vec::new()));
        // The chores thread writes table 1, slowly.
        newest.put(1);
        let (n, l) = (newest.clone(), log.clone());
        let thread = std::thread::spawn(move || {
            n.write(|t| {
                std::thread::sleep(Duration::from_millis(300));
                l.lock().unwrap().push(t);
            })
        });
        std::thread::sleep(Duration::from_millis(50));
        // Tables 2 and 3 are given while it writes; the queue is full, so
        // the giving thread tries to write: it does not wait, and the
        // writing thread writes the newest after its own.
        newest.put(2);
        newest.put(3);
        let started = std::time::Instant::now();
        newest.write(|t| log.lock().unwrap().push(t));
        assert!(
            started.elapsed() < Duration::from_millis(150),
            "the giver waited"
        );
        thread.join().unwrap();
        // The chores still queued for 2 and 3 find nothing newer.
        newest.write(|t| log.lock().unwrap().push(t));
        newest.write(|t| log.lock().unwrap().push(t));
        assert_eq!(*log.lock().unwrap(), vec![1, 3]);
    }

    #[test]
    fn past_the_bound_a_chore_runs_on_the_giving_thread() {
        let mut chores = Chores::start(shared(), inputs());
        let log = Log::default();
        // The first holds the thread while the queue fills up.
        chores.give(logged(&log, 0, Duration::from_millis(300)));
        for n in 1..=(CHORES_MAX as u32 + 1) {
            chores.give(logged(&log, n, Duration::ZERO));
        }
        let here = std::thread::current().id();
        let inline = log
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, t)| *t == here)
            .count();
        assert!(inline >= 1, "the queue is bounded: a chore ran here");
        chores.finish();
        assert_eq!(log.lock().unwrap().len(), CHORES_MAX + 2);
    }
}
