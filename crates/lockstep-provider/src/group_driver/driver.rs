//! Who runs the group's rounds (ADR 0023). A round takes the pending
//! inputs, steps Raft and sends and delivers what that produced (`Worker`).
//! The group thread runs one at least every `POLL` (Raft's ticks, the
//! timed checks) and whenever a server thread sends input and wakes it
//! (`InputTx::send`). The transport's event loop when it brings a peer
//! message (`InputTx::submit_from_network`, at most `NETWORK_ROUNDS` in a
//! row), and a client thread that orders its own writeset
//! (`InputTx::drive` from `Provider::order`), run the round themselves when no other thread is in one: on two busy cores the
//! hand-off to the group thread, a wake-up and a sleep per message, costs
//! more than the round. One thread at a time holds the driver, so Raft
//! and the group state still have one writer, and inputs are taken in the
//! order they were queued.

use super::POLL;
use crate::group_input::{Drain, InputTx};
use crate::log::{error, warn};
use crate::sleepers::Sleepers;
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::thread;
use std::time::{Duration, Instant};

/// What the driver runs: the group's rounds (`Worker`; a counting stand-in
/// in the tests below).
pub(super) trait Rounds: Send + 'static {
    /// What a round leaves to do after the driver is let go: the messages
    /// it sends (ADR 0033).
    type After: After;
    /// Takes every pending input and does what follows; `true` when the
    /// group is to stop.
    fn round(&mut self) -> bool;
    /// What the last round left (empty if nothing).
    fn take_after(&mut self) -> Self::After;
    /// Closes the transport (on the group thread, at the end).
    fn shut(&mut self);
    /// How long the group thread may sleep without input after the last
    /// round: `POLL` while anything is under way, longer when nothing is.
    fn idle_wait(&self) -> Duration;
}

/// A round's work that needs no driver: run later, in round order, by one
/// thread at a time (`Driver::hand_over`).
pub(super) trait After: Send + 'static {
    fn is_empty(&self) -> bool;
    fn run(self);
}

impl After for lockstep_net::transport::Staged {
    fn is_empty(&self) -> bool {
        lockstep_net::transport::Staged::is_empty(self)
    }

    fn run(self) {
        self.send();
    }
}

struct Held<W> {
    rounds: W,
    /// A round stopped the group or panicked: none runs again.
    stopping: bool,
}

/// What a thread that is not the group thread does when a round panics
/// on it (`group_thread_failed`).
pub(super) type OnFailure = Box<dyn Fn(&str) + Send + Sync>;

/// Rounds' leftovers waiting for their hand-over: past this many, only the
/// group thread runs rounds, and it waits for the hand-over after each
/// (`HAND_OVER_WAIT` at most each time), so the queue grows past it by at
/// most one list per such wait.
const AFTER_MAX: usize = 256;

/// Rounds' lists one hand-over takes, at most, on a thread other than the
/// group thread: the transport's event loop has its connections to get
/// back to (ADR 0031) and a client thread its transaction; the group
/// thread, woken, takes the rest.
const HAND_OVER_MAX: usize = 8;

/// How long a thread waits for another's hand-over, at most: it writes to
/// sockets that never block, so this is only reached when that thread
/// does not get a core for that long.
const HAND_OVER_WAIT: Duration = Duration::from_secs(1);

/// What rounds left (`Rounds::take_after`), oldest first, and whether a
/// thread is handing them over.
struct Leftovers<A> {
    /// Added to while the driver is held, so in round order; held near
    /// `AFTER_MAX` (see there).
    queue: VecDeque<A>,
    /// A thread is handing over: it takes every leftover queued until it
    /// finds none, and then (under this same lock) lets go, so none is
    /// left behind with no one at it.
    handing: bool,
}

pub(super) struct Driver<W: Rounds> {
    held: Mutex<Held<W>>,
    /// Lock order: `held`, then `after`.
    after: Mutex<Leftovers<W::After>>,
    /// Signalled when a hand-over ends: at the end of almost every round,
    /// and almost never waited on, so it counts its sleepers.
    handed: Sleepers,
    inputs: InputTx,
    on_failure: OnFailure,
}

impl<W: Rounds> Driver<W> {
    pub(super) fn new(rounds: W, inputs: InputTx, on_failure: OnFailure) -> Driver<W> {
        Driver {
            held: Mutex::new(Held {
                rounds,
                stopping: false,
            }),
            after: Mutex::new(Leftovers {
                queue: VecDeque::new(),
                handing: false,
            }),
            handed: Sleepers::default(),
            inputs,
            on_failure,
        }
    }

    fn after(&self) -> MutexGuard<'_, Leftovers<W::After>> {
        self.after.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues what the round just run left, while the driver is held.
    /// `true` when more than `AFTER_MAX` lists wait (the group thread
    /// then waits for the hand-over).
    fn leave_after(&self, held: &mut Held<W>) -> bool {
        let after = held.rounds.take_after();
        let mut left = self.after();
        if !after.is_empty() {
            left.queue.push_back(after);
        }
        left.queue.len() > AFTER_MAX
    }

    /// Runs what rounds left, oldest first, on this thread, at most `max`
    /// lists (then it wakes the group thread for the rest), unless another
    /// thread is at it (it runs this thread's too). With `wait`, waits for
    /// that thread's hand-over to end first (at most `HAND_OVER_WAIT` each
    /// time), and hands over what is left then.
    fn hand_over(&self, wait: bool, max: usize) {
        let mut left = self.after();
        loop {
            if !left.handing {
                if left.queue.is_empty() {
                    return;
                }
                left.handing = true;
                break;
            }
            if !wait {
                return;
            }
            let asleep = Instant::now();
            left = self.handed.wait(left, Some(HAND_OVER_WAIT));
            if left.handing && asleep.elapsed() >= HAND_OVER_WAIT {
                warn!(
                    "a round's messages waited {} ms for another thread to send its own",
                    HAND_OVER_WAIT.as_millis()
                );
                return;
            }
        }
        let mut handed = 0;
        loop {
            let next = if handed < max {
                left.queue.pop_front()
            } else {
                None
            };
            let Some(after) = next else {
                let more = !left.queue.is_empty();
                left.handing = false;
                drop(left);
                self.handed.notify_all();
                if more {
                    self.inputs.wake();
                }
                return;
            };
            drop(left);
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| after.run())) {
                // A bug in the transport: these messages are lost, as
                // over a dropped connection, and Raft resends them.
                error!(
                    "sending a round's messages failed: {}",
                    crate::log::panic_message(&*payload)
                );
            }
            handed += 1;
            left = self.after();
        }
    }

    /// So many rounds' lists wait that a thread other than the group
    /// thread runs no round now (`AFTER_MAX`): the group thread, which
    /// waits for the hand-over, runs the next.
    fn crowded(&self) -> bool {
        self.after().queue.len() > AFTER_MAX
    }

    /// The group thread: a round when woken, or when the last round's
    /// `idle_wait` passed (`POLL` while anything is under way), until a round
    /// stops the group. A panic in a round closes the transport and
    /// unwinds out of here (the caller reports it); no round runs again.
    pub(super) fn run(self: Arc<Self>, first: impl FnOnce(&mut W)) {
        first(&mut self.held.lock().unwrap_or_else(|p| p.into_inner()).rounds);
        self.inputs
            .set_driver(Arc::downgrade(&(self.clone() as Arc<dyn Drain>)));
        let mut wait = POLL;
        loop {
            if !self.inputs.left_round() {
                thread::park_timeout(wait);
            }
            let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
            let stop = held.stopping || {
                match catch_unwind(AssertUnwindSafe(|| held.rounds.round())) {
                    Ok(stop) => stop,
                    Err(payload) => {
                        // Close the connections here, not wherever the
                        // last reference to the driver happens to go.
                        held.stopping = true;
                        held.rounds.shut();
                        drop(held);
                        std::panic::resume_unwind(payload);
                    }
                }
            };
            // A round another thread ran since counts too: it may have
            // found work under way.
            wait = held.rounds.idle_wait();
            let crowded = self.leave_after(&mut held);
            if stop {
                // The last round's messages (a farewell) go before the
                // connections close.
                held.stopping = true;
                self.hand_over(true, usize::MAX);
                held.rounds.shut();
                return;
            }
            drop(held);
            self.hand_over(crowded, usize::MAX);
        }
    }
}

impl<W: Rounds> Drain for Driver<W> {
    /// Runs rounds on the calling thread while inputs are pending and no
    /// other thread runs one, at most `max_rounds` (then the group thread
    /// is woken for the rest); returns at once when one does (it looks at
    /// the pending inputs after it lets go, `InputTx::left_round`). The
    /// caller holds no provider lock: a round takes them. `false` once
    /// the group has stopped.
    fn drain_if_free(&self, max_rounds: usize) -> bool {
        for _ in 0..max_rounds {
            let mut held = match self.held.try_lock() {
                Ok(h) => h,
                Err(TryLockError::WouldBlock) => return true,
                Err(TryLockError::Poisoned(_)) => return false,
            };
            if held.stopping {
                return false;
            }
            if self.crowded() {
                drop(held);
                self.hand_over(false, HAND_OVER_MAX);
                self.inputs.wake();
                return true;
            }
            let outcome = catch_unwind(AssertUnwindSafe(|| held.rounds.round()));
            if outcome.is_ok() {
                // Over `AFTER_MAX`, the next call runs no round (above).
                self.leave_after(&mut held);
            }
            match outcome {
                Ok(false) => {}
                Ok(true) => {
                    // Stop or a closed input: the group thread ends it.
                    held.stopping = true;
                    drop(held);
                    self.hand_over(false, HAND_OVER_MAX);
                    self.inputs.wake();
                    return false;
                }
                Err(payload) => {
                    // A bug, on this thread instead of the group thread:
                    // the node leaves as if the group thread had failed,
                    // and the group thread closes the connections.
                    held.stopping = true;
                    drop(held);
                    (self.on_failure)(&crate::log::panic_message(&*payload));
                    self.inputs.wake();
                    return false;
                }
            }
            drop(held);
            // The round's messages, outside the driver: the next round
            // need not wait for their socket writes.
            self.hand_over(false, HAND_OVER_MAX);
            if !self.inputs.left_round() {
                return true;
            }
        }
        // More came meanwhile: the group thread takes it.
        self.inputs.wake();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group_input::Input;
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    use std::sync::mpsc::{channel, Receiver};
    use std::time::{Duration, Instant};

    const THREADS: u64 = 4;

    /// Records the inputs its rounds take (`ReadFence { id }`, the highest
    /// id per submitting thread) and checks that no two rounds overlap.
    struct Counting {
        rx: Receiver<Input>,
        inputs: InputTx,
        taken: Arc<Vec<AtomicU64>>,
        inside: Arc<AtomicUsize>,
        /// When set, a round that took inputs says so and waits for a
        /// word before it ends (the deterministic test).
        gate: Gate,
        /// Rounds run so far; each leaves its number (`Numbered`).
        ran: u64,
        /// Where the numbers left are written when handed over.
        handed: Arc<Mutex<Vec<u64>>>,
        /// Whether rounds leave anything (only the hand-over tests want
        /// them: the others have no group thread to take what piles up).
        leaves: bool,
    }

    /// A round's leftover: its number (0: nothing left), recorded when
    /// run, after a pause so that other threads' rounds end meanwhile.
    struct Numbered(u64, Arc<Mutex<Vec<u64>>>);

    impl After for Numbered {
        fn is_empty(&self) -> bool {
            self.0 == 0
        }

        fn run(self) {
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_micros(50) {
                std::hint::spin_loop();
            }
            // A chance for another hand-over to record first, were two
            // allowed at once.
            thread::yield_now();
            self.1.lock().unwrap().push(self.0);
        }
    }

    impl Rounds for Counting {
        type After = Numbered;

        fn take_after(&mut self) -> Numbered {
            if !self.leaves {
                return Numbered(0, self.handed.clone());
            }
            self.ran += 1;
            Numbered(self.ran, self.handed.clone())
        }

        fn round(&mut self) -> bool {
            assert_eq!(
                self.inside.fetch_add(1, Ordering::SeqCst),
                0,
                "rounds overlap"
            );
            while let Ok(input) = self.rx.try_recv() {
                self.inputs.took();
                match input {
                    Input::ReadFence { id } => {
                        self.taken[(id % THREADS) as usize].fetch_max(id, Ordering::SeqCst);
                    }
                    _ => {
                        self.inside.fetch_sub(1, Ordering::SeqCst);
                        return true;
                    }
                }
            }
            if let Some((inside, go)) = &self.gate {
                let _ = inside.send(());
                let _ = go.recv_timeout(Duration::from_secs(5));
            }
            // Rounds take a while, so that submitters often find the
            // driver busy: the case under test.
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_micros(100) {
                std::hint::spin_loop();
            }
            self.inside.fetch_sub(1, Ordering::SeqCst);
            false
        }

        fn shut(&mut self) {}

        fn idle_wait(&self) -> Duration {
            POLL
        }
    }

    type Gate = Option<(std::sync::mpsc::Sender<()>, Receiver<()>)>;

    /// A driver of `Counting` rounds, registered with its input as the
    /// group thread registers it, and no group thread.
    fn registered(gate: Gate) -> (InputTx, Arc<Vec<AtomicU64>>, Arc<Driver<Counting>>) {
        registered_leaving(gate, false)
    }

    /// [`registered`] with rounds that leave their number (`Numbered`).
    fn registered_leaving(
        gate: Gate,
        leaves: bool,
    ) -> (InputTx, Arc<Vec<AtomicU64>>, Arc<Driver<Counting>>) {
        let (tx, rx) = channel();
        let inputs = InputTx::new(tx);
        let taken: Arc<Vec<AtomicU64>> =
            Arc::new((0..THREADS).map(|_| AtomicU64::new(0)).collect());
        let rounds = Counting {
            rx,
            inputs: inputs.clone(),
            taken: taken.clone(),
            inside: Arc::new(AtomicUsize::new(0)),
            gate,
            ran: 0,
            leaves,
            handed: Arc::new(Mutex::new(Vec::new())),
        };
        let on_failure: OnFailure = Box::new(|why| panic!("no round panics here: {why}"));
        let driver = Arc::new(Driver::new(rounds, inputs.clone(), on_failure));
        inputs.set_driver(Arc::downgrade(&(driver.clone() as Arc<dyn Drain>)));
        (inputs, taken, driver)
    }

    /// Fails unless this thread, standing in for the group thread, was
    /// woken (or is, within 4 s): an unwoken one would sleep the 5 s.
    fn assert_woken(what: &str) {
        let t0 = Instant::now();
        thread::park_timeout(Duration::from_secs(5));
        assert!(t0.elapsed() < Duration::from_secs(4), "{what}");
    }

    /// The numbers the rounds left, in the order they were handed over.
    fn handed(driver: &Driver<Counting>) -> Vec<u64> {
        let held = driver.held.lock().unwrap();
        let handed = held.rounds.handed.lock().unwrap().clone();
        handed
    }

    /// The event loop runs at most `NETWORK_ROUNDS` rounds in a row: with
    /// inputs arriving during each of its rounds, its `submit_from_network`
    /// returns after that many and leaves the last input to the group
    /// thread (woken: here the test thread, which takes it).
    #[test]
    fn the_event_loop_runs_a_bounded_number_of_rounds_in_a_row() {
        use crate::group_input::NETWORK_ROUNDS;
        let (inside_tx, inside_rx) = channel();
        let (go_tx, go_rx) = channel();
        let (inputs, _taken, driver) = registered(Some((inside_tx, go_rx)));
        inputs.set_group_thread(thread::current());
        let event_loop = {
            let inputs = inputs.clone();
            thread::spawn(move || assert!(inputs.submit_from_network(Input::ReadFence { id: 0 })))
        };
        for n in 1..=NETWORK_ROUNDS as u64 {
            inside_rx
                .recv_timeout(Duration::from_secs(5))
                .expect("the event loop runs a round");
            // An input during each round.
            assert!(inputs.submit(Input::ReadFence { id: n }));
            go_tx.send(()).unwrap();
        }
        event_loop.join().unwrap();
        assert!(
            inputs.left_round(),
            "the last input is left to the group thread"
        );
        // The wake-up reached the group thread: it does not park now.
        assert_woken("the group thread was not woken");
        go_tx.send(()).unwrap();
        assert!(driver.drain_if_free(usize::MAX));
        assert!(!inputs.left_round());
    }

    /// The hand-over, step by step: thread A's round runs (and waits) when
    /// B submits; B finds the driver busy and returns at once; when A's
    /// round ends, A takes B's input in a second round before its own
    /// `submit` returns. No group thread runs.
    #[test]
    fn an_input_sent_during_a_round_is_taken_by_the_rounds_holder() {
        let (inside_tx, inside_rx) = channel();
        let (go_tx, go_rx) = channel();
        let (inputs, taken, _driver) = registered(Some((inside_tx, go_rx)));
        let a = {
            let inputs = inputs.clone();
            thread::spawn(move || assert!(inputs.submit(Input::ReadFence { id: THREADS })))
        };
        inside_rx.recv().unwrap();
        // B, during A's round.
        assert!(inputs.submit(Input::ReadFence { id: THREADS + 1 }));
        assert_eq!(
            taken[1].load(Ordering::SeqCst),
            0,
            "A's round is still waiting"
        );
        go_tx.send(()).unwrap(); // A's first round ends
        inside_rx
            .recv_timeout(Duration::from_secs(5))
            .expect("A runs a second round for B's input");
        go_tx.send(()).unwrap();
        a.join().unwrap();
        assert_eq!(taken[0].load(Ordering::SeqCst), THREADS);
        assert_eq!(taken[1].load(Ordering::SeqCst), THREADS + 1);
        assert!(!inputs.left_round(), "nothing pending");
    }

    /// With no group thread at all, an input submitted by a reading thread
    /// is taken soon after its `submit` returns: when that thread found
    /// the driver busy, the round's holder looks at the pending inputs
    /// again after it lets go. Each submitter waits for its own input
    /// before it sends the next; a lost hand-over leaves it waiting (the
    /// group thread's `POLL` would hide that in a node; here nothing does).
    #[test]
    fn every_submitted_input_is_taken_without_the_group_thread() {
        let (inputs, taken, driver) = registered(None);
        let submitters: Vec<_> = (0..THREADS)
            .map(|t| {
                let (inputs, taken) = (inputs.clone(), taken.clone());
                thread::spawn(move || {
                    for n in 1..=2_000u64 {
                        let id = n * THREADS + t;
                        assert!(inputs.submit(Input::ReadFence { id }));
                        let deadline = Instant::now() + Duration::from_secs(2);
                        while taken[t as usize].load(Ordering::SeqCst) < id {
                            assert!(Instant::now() < deadline, "input {id} was never taken");
                            thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        for s in submitters {
            s.join().unwrap();
        }
        assert!(!inputs.left_round(), "nothing pending");
        // Stop taken on a reading thread: the driver runs no more rounds.
        assert!(!inputs.submit(Input::Stop));
        assert!(!driver.drain_if_free(usize::MAX));
    }

    /// What rounds leave is handed over outside the driver, one thread at
    /// a time, in the order the rounds ran, and none is lost: once every
    /// submitter has returned, every round's number has been handed over,
    /// in order, or what is left waits for the group thread, which was
    /// woken for it (a hand-over off the group thread stops after
    /// `HAND_OVER_MAX`). The test thread stands in for the group thread.
    #[test]
    fn leftovers_are_handed_over_in_round_order_and_none_is_lost() {
        let (inputs, _taken, driver) = registered_leaving(None, true);
        inputs.set_group_thread(thread::current());
        let submitters: Vec<_> = (0..THREADS)
            .map(|t| {
                let inputs = inputs.clone();
                thread::spawn(move || {
                    for n in 1..=3_000u64 {
                        assert!(inputs.submit(Input::ReadFence {
                            id: n * THREADS + t
                        }));
                    }
                })
            })
            .collect();
        for s in submitters {
            s.join().unwrap();
        }
        if !driver.after().queue.is_empty() {
            assert_woken("leftovers were left and the group thread was not woken");
            driver.hand_over(false, usize::MAX);
        }
        let ran = driver.held.lock().unwrap().rounds.ran;
        assert!(
            driver.after().queue.is_empty(),
            "a leftover was never handed over"
        );
        assert_eq!(
            handed(&driver),
            (1..=ran).collect::<Vec<u64>>(),
            "leftovers handed over out of round order, or lost"
        );
    }

    /// A thread other than the group thread hands over `HAND_OVER_MAX`
    /// lists at most and wakes the group thread for the rest, which it
    /// leaves queued in order (the event loop must get back to its
    /// connections).
    #[test]
    fn a_hand_over_off_the_group_thread_is_bounded_and_wakes_the_group_thread() {
        let (inputs, _taken, driver) = registered_leaving(None, true);
        inputs.set_group_thread(thread::current());
        {
            let mut held = driver.held.lock().unwrap();
            for _ in 0..20 {
                driver.leave_after(&mut held);
            }
        }
        driver.hand_over(false, HAND_OVER_MAX);
        assert_eq!(
            handed(&driver),
            (1..=HAND_OVER_MAX as u64).collect::<Vec<u64>>()
        );
        assert_eq!(driver.after().queue.len(), 20 - HAND_OVER_MAX);
        assert!(!driver.after().handing, "the turn is let go");
        assert_woken("the group thread was not woken for the rest");
        driver.hand_over(false, usize::MAX);
        assert_eq!(handed(&driver), (1..=20).collect::<Vec<u64>>());
    }
}
