//! The state the rounds share with the server's threads: the one
//! lock around [`Inner`] and the condition variables its waiters sleep on.

use crate::proposals::RESOLVED_SLOTS;
use crate::sleepers::Sleepers;
use crate::state::Inner;
use lockstep_net::threads::Threads;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::time::Duration;

/// Condition variables for threads waiting for their turn at an ordering
/// gate, by the level they wait for modulo this (`Wake::Turn`).
pub const TURN_SLOTS: usize = 64;

/// How long a turn waiter sleeps before it looks again without being
/// woken: a safety net, not the way turns are passed (a level that moves
/// wakes its slot, `Shared::notify_turns`). Long in unit tests, so that
/// a turn passed only by this timeout fails them.
#[cfg(not(test))]
pub const TURN_RECHECK: Duration = Duration::from_millis(50);
#[cfg(test)]
pub const TURN_RECHECK: Duration = Duration::from_secs(20);

/// From this many events queued in one round, the appliers are woken
/// with one broadcast rather than one by one (`notify_delivered`).
const WAKE_APPLIERS_AT_ONCE: usize = 64;

/// The state the rounds share with the server's threads: one lock
/// (see `state`) and condition variables, one per kind of waiter, so
/// that the frequent changes wake only the threads that wait for them: on
/// two cores, waking a dozen threads per commit costs more than the commit.
/// Each counts its sleepers (`Sleepers`): a notification with none asleep
/// makes no system call.
pub struct Shared {
    pub inner: Mutex<Inner>,
    /// Anything else: ordering gates, transaction states, the life cycle.
    pub changed: Sleepers,
    /// Idle appliers waiting for an event to run.
    pub work: Sleepers,
    /// Local threads waiting for their proposal's place in the order, by
    /// `proposals::resolved_slot` of its id: a round wakes the slots of
    /// the proposals it resolved, not every proposer (on a loaded leader,
    /// those still in flight woke and slept again at every delivery).
    pub resolved: [Sleepers; RESOLVED_SLOTS],
    /// Threads waiting for a commit or apply level to reach a seqno:
    /// commit order and the apply gate, the waits of every transaction.
    /// Waking all of them at each commit (they were on `changed`) woke a
    /// dozen threads for the one whose turn it was: 37 `futex` calls and
    /// 61 context switches per transaction on 12-thread read-write load,
    /// against Galera's 27 and 53.
    pub turns: [Sleepers; TURN_SLOTS],
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
    /// Waits for a proposal: the slot (`proposals::resolved_slot`) of
    /// its id.
    Resolved(usize),
    /// Waits for the commit level or the apply level (`last_committed`)
    /// to reach this seqno. Its condition may use anything that
    /// [`Shared::notify`] announces, and the two levels.
    Turn(i64),
}

fn turn_slot(level: i64) -> usize {
    level.rem_euclid(TURN_SLOTS as i64) as usize
}

/// The provider's state lock, held (`state_lock`).
pub type StateGuard<'a> = crate::state_lock::Guard<'a, Inner>;

impl Shared {
    /// The state `inner` behind its lock, with no waiter yet.
    pub fn new(inner: Inner) -> Shared {
        Shared {
            inner: Mutex::new(inner),
            changed: Default::default(),
            work: Default::default(),
            resolved: std::array::from_fn(|_| Default::default()),
            turns: std::array::from_fn(|_| Default::default()),
            detached: Default::default(),
            stopping: Default::default(),
        }
    }

    pub fn lock(&self) -> StateGuard<'_> {
        crate::state_lock::Guard::new(self.inner.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Wakes every waiter: the safe choice for any change.
    pub fn notify(&self) {
        self.changed.notify_all();
        self.work.notify_all();
        self.notify_resolved(u64::MAX);
        self.notify_all_turns();
    }

    /// Wakes the proposers of the slots in `slots` (a bit set,
    /// `Proposals::take_resolved_slots`).
    pub fn notify_resolved(&self, mut slots: u64) {
        while slots != 0 {
            let slot = slots.trailing_zeros() as usize;
            slots &= slots - 1;
            self.resolved[slot].notify_all();
        }
    }

    /// After deliveries that changed no view and queued `added` events:
    /// one idle applier per event (each wakes with work to take), the
    /// proposers of the `resolved` slots and the `changed` waiters, but
    /// no turn waiter, since a delivery moves no gate level. Waking every
    /// applier and every turn waiter per round woke a dozen threads to
    /// run one or two.
    pub fn notify_delivered(&self, added: usize, resolved: u64) {
        self.changed.notify_all();
        self.notify_resolved(resolved);
        if added >= WAKE_APPLIERS_AT_ONCE {
            self.work.notify_all();
        } else {
            for _ in 0..added {
                self.work.notify_one();
            }
        }
    }

    /// Wakes the waiters on ordering gates and transaction states only:
    /// for changes that neither queue events nor resolve proposals.
    /// `passed`: the levels the gates moved across since the last call
    /// (`Inner::turns_passed`); only those levels' turn waiters wake.
    pub fn notify_gates(&self, passed: [(i64, i64); 2]) {
        self.changed.notify_all();
        for (from, to) in passed {
            self.notify_turns(from, to);
        }
    }

    /// Wakes the turn waiters of levels `from + 1 ..= to`: all of them
    /// when a level went back (a state transfer reset it) or the range
    /// covers every slot.
    fn notify_turns(&self, from: i64, to: i64) {
        if to < from || to - from >= TURN_SLOTS as i64 {
            self.notify_all_turns();
            return;
        }
        for level in from + 1..=to {
            self.notify_turn_slot(turn_slot(level));
        }
    }

    /// Wakes every turn waiter (a change other than a level: pause and
    /// resume, shutdown, a BF abort).
    pub fn notify_all_turns(&self) {
        for slot in 0..TURN_SLOTS {
            self.notify_turn_slot(slot);
        }
    }

    fn notify_turn_slot(&self, slot: usize) {
        self.turns[slot].notify_all();
    }

    /// The condition variable of `wake`.
    pub(crate) fn condvar(&self, wake: Wake) -> &Sleepers {
        match wake {
            Wake::Changed => &self.changed,
            Wake::Work => &self.work,
            Wake::Resolved(slot) => &self.resolved[slot],
            Wake::Turn(level) => &self.turns[turn_slot(level)],
        }
    }
}
