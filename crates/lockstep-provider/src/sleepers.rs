//! A condition variable that counts the threads asleep on it, so that a
//! notification nobody waits for costs no system call. std's
//! `notify_one` and `notify_all` make one every time; the rounds notify
//! several kinds of waiter per commit whether or not any sleeps, and on a
//! loaded leader those calls were most of its event loop's `futex` calls.
//!
//! Why no wake-up is lost: a sleeper counts itself while it holds the
//! mutex, after it found its condition false and before the wait
//! releases the mutex. A notifier changes the condition under the same
//! mutex and reads the count after that. Either the sleeper's check came
//! after the change (and saw it), or its count came before the notifier
//! took the mutex, and the notifier's read, ordered after it by the
//! mutex, sees it. So every notifier must change what the sleepers wait
//! for under the mutex they sleep with.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Condvar, MutexGuard};
use std::time::Duration;

#[derive(Default)]
pub struct Sleepers {
    cv: Condvar,
    asleep: AtomicU32,
}

impl Sleepers {
    pub fn notify_all(&self) {
        if self.asleep.load(Ordering::Acquire) > 0 {
            self.cv.notify_all();
        }
    }

    pub fn notify_one(&self) {
        if self.asleep.load(Ordering::Acquire) > 0 {
            self.cv.notify_one();
        }
    }

    /// Sleeps until notified (or spuriously woken), at most `timeout` if
    /// one is given; the mutex is released meanwhile.
    pub fn wait<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        timeout: Option<Duration>,
    ) -> MutexGuard<'a, T> {
        self.asleep.fetch_add(1, Ordering::AcqRel);
        let guard = match timeout {
            None => self.cv.wait(guard).unwrap_or_else(|p| p.into_inner()),
            Some(t) => {
                self.cv
                    .wait_timeout(guard, t)
                    .unwrap_or_else(|p| p.into_inner())
                    .0
            }
        };
        self.asleep.fetch_sub(1, Ordering::AcqRel);
        guard
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    #[test]
    fn a_sleeper_is_woken_and_a_notification_without_one_is_free() {
        let s = Sleepers::default();
        s.notify_all(); // nobody asleep: nothing to do
        s.notify_one();
        let shared = Arc::new((Mutex::new(false), s));
        let waiter = {
            let shared = shared.clone();
            std::thread::spawn(move || {
                let (m, s) = &*shared;
                let mut g = m.lock().unwrap();
                let t0 = Instant::now();
                while !*g {
                    g = s.wait(g, Some(Duration::from_secs(30)));
                }
                t0.elapsed()
            })
        };
        // Until the waiter counts itself, a notification would find
        // nobody; the flag under the mutex is what it checks first.
        while shared.1.asleep.load(Ordering::Acquire) == 0 {
            std::thread::yield_now();
        }
        *shared.0.lock().unwrap() = true;
        shared.1.notify_one();
        let waited = waiter.join().unwrap();
        assert!(
            waited < Duration::from_secs(10),
            "woken by the notification, not the timeout"
        );
        assert_eq!(shared.1.asleep.load(Ordering::Acquire), 0);
    }
}
