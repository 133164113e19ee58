//! Detached threads, counted so that their owner can wait for them at
//! shutdown: the provider library may be unloaded after `free`, and no
//! thread may still run its code then. The transport counts its event
//! loop, dialers, opening connections and big-message encoders; the
//! provider its IST senders and the chores thread (disk work and frees
//! off the event loop).

use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

#[derive(Clone, Default)]
pub struct Threads(Arc<(Mutex<usize>, Condvar)>);

/// Counts its thread out when dropped, panics included.
struct Running(Threads);

impl Drop for Running {
    fn drop(&mut self) {
        let (count, ended) = &*(self.0).0;
        let mut n = count.lock().unwrap_or_else(|p| p.into_inner());
        *n -= 1;
        ended.notify_all();
    }
}

impl Threads {
    /// Starts `f` on a counted thread; `false` if no thread could start.
    pub fn spawn(&self, name: &str, f: impl FnOnce() + Send + 'static) -> bool {
        *self.0 .0.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        let running = Running(self.clone());
        thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let _running = running;
                f()
            })
            .is_ok()
        // (On failure the closure, and `running` with it, is dropped.)
    }

    /// Starts `f` on a counted thread, or runs it on this one if no
    /// thread could start (the work is done either way).
    pub fn spawn_or_run(&self, name: &str, f: impl FnOnce() + Send + 'static) {
        let cell = Arc::new(Mutex::new(Some(f)));
        let theirs = cell.clone();
        let take = |c: &Mutex<Option<_>>| c.lock().unwrap_or_else(|p| p.into_inner()).take();
        if !self.spawn(name, move || {
            if let Some(f) = take(&theirs) {
                f()
            }
        }) {
            if let Some(f) = take(&cell) {
                f()
            }
        }
    }

    /// Waits up to `deadline` for every counted thread to end; how many
    /// still run.
    pub fn wait_all(&self, deadline: Duration) -> usize {
        let (count, ended) = &*self.0;
        let until = Instant::now() + deadline;
        let mut n = count.lock().unwrap_or_else(|p| p.into_inner());
        while *n > 0 {
            let now = Instant::now();
            if now >= until {
                break;
            }
            n = ended
                .wait_timeout(n, until - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        *n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_for_counted_threads_and_gives_up_at_the_deadline() {
        let t = Threads::default();
        assert!(t.spawn("short", || thread::sleep(Duration::from_millis(50))));
        assert_eq!(t.wait_all(Duration::from_secs(5)), 0);
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        assert!(t.spawn("held", move || {
            let _ = rx.recv();
        }));
        assert_eq!(t.wait_all(Duration::from_millis(50)), 1, "a held thread");
        drop(tx);
        assert_eq!(t.wait_all(Duration::from_secs(5)), 0);
        assert!(t.spawn("panics", || panic!("counted out anyway")));
        assert_eq!(t.wait_all(Duration::from_secs(5)), 0);
    }

    #[test]
    fn spawn_or_run_does_the_work_once() {
        let t = Threads::default();
        let (tx, rx) = std::sync::mpsc::channel();
        t.spawn_or_run("work", move || tx.send(7).unwrap());
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(7));
        assert_eq!(t.wait_all(Duration::from_secs(5)), 0);
        assert!(rx.recv().is_err(), "done twice");
    }
}
