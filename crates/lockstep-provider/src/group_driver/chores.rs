//! What a round decides and the event loop must not do itself (ADR 0039):
//! disk writes, and the freeing of big writesets. One long-lived thread
//! runs them in the order the rounds gave them. The round goes on at
//! once; a spill's result comes back to the shared state from here.

use crate::log::warn;
use crate::shared::Shared;
use crate::viewstate::ViewKeeper;
use lockstep_core::group::action::CertFingerprint;
use lockstep_core::group::Writeset;
use std::collections::BTreeMap;
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
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
    /// The members' certificates changed: saved with the view (pc.recovery).
    Bindings(Arc<ViewKeeper>, BTreeMap<u64, CertFingerprint>),
    /// Purged writesets: a million keys are a million frees and more.
    Free(Vec<Arc<Writeset>>),
    #[cfg(test)]
    Test(Box<dyn FnOnce() + Send>),
}

pub(super) struct Chores {
    tx: Option<SyncSender<Chore>>,
    shared: Arc<Shared>,
    /// Closed by the thread when it ends.
    ended: Receiver<()>,
}

impl Chores {
    pub(super) fn start(shared: Arc<Shared>) -> Chores {
        let (tx, rx) = sync_channel(CHORES_MAX);
        let (ended_tx, ended) = sync_channel(0);
        let theirs = shared.clone();
        // Counted with the detached threads: unloading the library waits
        // for it (`Shared::detached`).
        let started = shared.detached.spawn("lockstep-chores", move || {
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
        Chores { tx, shared, ended }
    }

    /// Queues `chore` for the thread; runs it here if the thread is gone
    /// or `CHORES_MAX` wait.
    pub(super) fn give(&self, chore: Chore) {
        let chore = match &self.tx {
            Some(tx) => match tx.try_send(chore) {
                Ok(()) => return,
                Err(TrySendError::Full(c) | TrySendError::Disconnected(c)) => c,
            },
            None => chore,
        };
        run(&self.shared, chore);
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

fn run(shared: &Shared, chore: Chore) {
    match chore {
        Chore::Spill(job) => {
            let done = job.run();
            shared.lock().queue.spilled(done);
        }
        Chore::Marker(job) => {
            crate::bypass::run_marker_job(job, &crate::storage::Disk);
        }
        Chore::Bindings(views, table) => {
            if let Err(e) = views.bindings_changed(&table) {
                warn!("{e}");
            }
        }
        Chore::Free(reaped) => drop(reaped),
        #[cfg(test)]
        Chore::Test(f) => f(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
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
        Arc::new(Shared {
            inner: std::sync::Mutex::new(inner),
            changed: Default::default(),
            work: Default::default(),
            resolved: Default::default(),
            turns: std::array::from_fn(|_| Default::default()),
            detached: Default::default(),
            stopping: Default::default(),
        })
    }

    #[test]
    fn chores_run_in_order_off_the_round_and_finish_waits_for_them() {
        let mut chores = Chores::start(shared());
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
    fn past_the_bound_a_chore_runs_on_the_giving_thread() {
        let mut chores = Chores::start(shared());
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
