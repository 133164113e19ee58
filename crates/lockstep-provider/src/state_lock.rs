//! The provider's state lock as a type: its guard counts itself per
//! thread, so that what must never run under the lock can check, at
//! every call, that it does not (`expect_unlocked`). A leaf module: the
//! guard is generic, so the modules below `state` can name it.

use crate::log::error;
use crate::sleepers::Sleepers;
use std::cell::Cell;
use std::ops::{Deref, DerefMut};
use std::sync::MutexGuard;
use std::time::Duration;

thread_local! {
    /// State guards this thread holds: 0 or 1, since the mutex is not
    /// reentrant (a second `lock` on the same thread would deadlock).
    static STATE_GUARDS: Cell<u32> = const { Cell::new(0) };
}

fn count_guard(delta: i32) {
    STATE_GUARDS.with(|n| n.set(n.get().saturating_add_signed(delta)));
}

/// The provider's state lock, held. It counts itself per thread, so that
/// what must never run under it can tell (`expect_unlocked`): the
/// server's callbacks (contract P27: the server calls back into the
/// provider, which takes this lock) and the durable writes that must
/// never keep every client thread waiting (ADR 0038).
pub struct Guard<'a, T> {
    /// `None` only while the thread sleeps in [`Guard::sleep`].
    guard: Option<MutexGuard<'a, T>>,
}

impl<'a, T> Guard<'a, T> {
    pub fn new(guard: MutexGuard<'a, T>) -> Guard<'a, T> {
        count_guard(1);
        Guard { guard: Some(guard) }
    }
}

impl<T> Guard<'_, T> {
    /// Sleeps on `on`, the lock released meanwhile, for at most
    /// `timeout` if one is given.
    pub fn sleep(&mut self, on: &Sleepers, timeout: Option<Duration>) {
        let Some(guard) = self.guard.take() else {
            return;
        };
        count_guard(-1);
        let guard = on.wait(guard, timeout);
        count_guard(1);
        self.guard = Some(guard);
    }
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.guard
            .as_deref()
            .expect("a state guard is held outside its wait")
    }
}

impl<T> DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.guard
            .as_deref_mut()
            .expect("a state guard is held outside its wait")
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        if self.guard.is_some() {
            count_guard(-1);
        }
    }
}

/// Whether this thread holds the provider's state lock.
pub fn holds_state_lock() -> bool {
    STATE_GUARDS.with(|n| n.get() > 0)
}

/// `what` must not run under the state lock: a call from a thread that
/// holds it is a bug in the provider, which may deadlock. Logged loudly
/// (the marker is what tests and operators grep for); unit tests fail on
/// it. The call goes ahead: refusing it would fail the server's work
/// for a lock that may well be released in time.
pub fn expect_unlocked(what: &str) {
    if holds_state_lock() {
        error!(
            "lockstep internal error: {what} called while this thread holds the provider's \
             state lock (contract P27); it may deadlock"
        );
        #[cfg(test)]
        panic!("{what} called under the provider's state lock");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn a_guard_counts_while_held_and_not_while_it_waits() {
        let m = Mutex::new(1);
        let cv = Sleepers::default();
        assert!(!holds_state_lock());
        {
            let mut g = Guard::new(m.lock().unwrap());
            assert!(holds_state_lock());
            *g += 1;
            g.sleep(&cv, Some(Duration::from_millis(1)));
            assert!(holds_state_lock(), "held again after the wait");
            assert_eq!(*g, 2);
        }
        assert!(!holds_state_lock());
        expect_unlocked("a callback");
    }

    #[test]
    #[should_panic(expected = "under the provider's state lock")]
    fn a_callback_under_the_lock_fails_a_test() {
        let m = Mutex::new(());
        let _g = Guard::new(m.lock().unwrap());
        expect_unlocked("apply_cb");
    }
}
