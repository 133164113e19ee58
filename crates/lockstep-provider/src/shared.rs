//! The state the group thread shares with the server's threads: the one
//! lock around [`Inner`] and the condition variables its waiters sleep on.

use crate::state::Inner;
use lockstep_net::threads::Threads;
use std::sync::atomic::AtomicBool;
use std::sync::{Condvar, Mutex, MutexGuard};

/// The state the group thread shares with the server's threads: one lock
/// (see `state`) and three condition variables, one per kind of waiter, so
/// that the frequent changes wake only the threads that wait for them: on
/// two cores, waking a dozen threads per commit costs more than the commit.
pub struct Shared {
    pub inner: Mutex<Inner>,
    /// Anything else: ordering gates, transaction states, the life cycle.
    pub changed: Condvar,
    /// Idle appliers waiting for an event to run.
    pub work: Condvar,
    /// Local threads waiting for their proposal's place in the order.
    pub resolved: Condvar,
    /// Threads no caller joins (IST senders, the freeing of big
    /// writesets): `free` waits for them, so none runs our code after the
    /// library is unloaded.
    pub detached: Threads,
    /// Set by `free`: detached work stops at its next step.
    pub stopping: AtomicBool,
}

/// Which waiters a `Provider::wait_on` call belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    Changed,
    Work,
    Resolved,
}

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wakes every waiter: the safe choice for any change.
    pub fn notify(&self) {
        self.changed.notify_all();
        self.work.notify_all();
        self.resolved.notify_all();
    }

    /// Wakes the waiters on ordering gates and transaction states only:
    /// for changes that neither queue events nor resolve proposals.
    pub fn notify_gates(&self) {
        self.changed.notify_all();
    }

    pub(crate) fn condvar(&self, wake: Wake) -> &Condvar {
        match wake {
            Wake::Changed => &self.changed,
            Wake::Work => &self.work,
            Wake::Resolved => &self.resolved,
        }
    }
}
