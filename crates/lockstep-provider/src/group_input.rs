//! What the server's threads and the transport tell the group's driver
//! (`group_driver`): the one way into it, over a channel, so that only the
//! thread running a round touches Raft (ADR 0023).
//!
//! A round takes the provider's lock (`state::Inner`), so a thread must not
//! run one while it holds that lock: it would deadlock. That rule is a
//! type here, not a comment: [`InputTx::drive`] takes the guard by value
//! and drops it before the round, so code that still holds it does not
//! compile. The transport's event loop ([`InputTx::submit_from_network`]) never
//! takes the provider's lock at all.

use lockstep_core::group::peer::PeerMsg;
use lockstep_core::group::Action;
use std::sync::atomic::{fence, AtomicIsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, OnceLock, Weak};
use std::thread::Thread;
use std::time::Duration;

/// The sending side of the group's input, shared by every thread that has
/// input for it. Bounded where the inputs come from: one proposal per
/// server thread, the transport's input budget for peer messages, one
/// `FlowCheck` in flight, and operator commands.
#[derive(Clone)]
pub struct InputTx(Arc<Inputs>);

/// The state whose lock a round takes: `state::Inner`, and nothing else.
/// [`InputTx::drive`] wants its guard.
pub(crate) trait TakenByRounds {}

/// Runs the group's rounds on the calling thread when no other thread
/// does (`group_driver::Driver`).
pub(crate) trait Drain: Send + Sync {
    /// At most `max_rounds` rounds in a row; inputs still pending then go
    /// to the group thread, woken. `false` once the group has stopped.
    fn drain_if_free(&self, max_rounds: usize) -> bool;
}

/// Rounds the transport's event loop runs in a row, at most, before it
/// leaves the inputs still coming to the group thread: while it runs
/// rounds it reads and writes no peer connection (ADR 0031).
pub const NETWORK_ROUNDS: usize = 4;

/// The group's driver has ended (its input is closed); the input was
/// dropped.
#[derive(Debug)]
pub struct GroupGone;

struct Inputs {
    tx: Sender<Input>,
    /// Inputs sent and not yet taken by a round. A thread that leaves a
    /// round looks at it after it lets go of the driver, so an input sent
    /// while the driver was busy never waits for the next tick. May be
    /// below zero for a moment: a round can take an input before its
    /// sender counts it.
    pending: AtomicIsize,
    /// The group thread, woken by [`InputTx::send`].
    group_thread: OnceLock<Thread>,
    /// The driver, registered by the group thread when it starts: from
    /// then on a thread that holds no lock may run a round itself
    /// ([`InputTx::submit_from_network`], [`InputTx::drive`]).
    driver: OnceLock<Weak<dyn Drain>>,
}

impl InputTx {
    pub fn new(tx: Sender<Input>) -> InputTx {
        InputTx(Arc::new(Inputs {
            tx,
            pending: AtomicIsize::new(0),
            group_thread: OnceLock::new(),
            driver: OnceLock::new(),
        }))
    }

    /// Queues `input` and wakes the group thread, whose round takes it
    /// unless another thread's round does first. For threads that may
    /// hold the provider's lock (a round takes it).
    pub fn send(&self, input: Input) -> Result<(), GroupGone> {
        self.queue(input)?;
        self.wake();
        Ok(())
    }

    /// Queues `input` and, if no round runs now, runs rounds on this
    /// thread while inputs are pending (ADR 0023), at most
    /// [`NETWORK_ROUNDS`] in a row (the group thread, woken, takes the
    /// rest); a round already running takes it. For the transport's event
    /// loop, which holds no lock: a message then costs no hand-off to the
    /// group thread. `false` once the group is gone.
    pub fn submit_from_network(&self, input: Input) -> bool {
        if self.queue(input).is_err() {
            return false;
        }
        self.run_rounds(NETWORK_ROUNDS)
    }

    /// Queues `input` and runs rounds until nothing is pending, however
    /// many: the hand-over rule of ADR 0023 alone, for its tests.
    #[cfg(test)]
    pub(crate) fn submit(&self, input: Input) -> bool {
        if self.queue(input).is_err() {
            return false;
        }
        self.run_rounds(usize::MAX)
    }

    /// Lets go of the provider's lock (`held`, taken by value so that it
    /// cannot outlive this call), then runs rounds on this thread if none
    /// runs now (the one running takes what is queued otherwise); before
    /// the group thread's first round, wakes it instead. `false` once the
    /// group has stopped.
    pub(crate) fn drive<T: TakenByRounds>(&self, held: crate::state_lock::Guard<'_, T>) -> bool {
        drop(held);
        self.run_rounds(usize::MAX)
    }

    /// [`InputTx::drive`] for a thread that holds no provider lock.
    fn run_rounds(&self, max_rounds: usize) -> bool {
        crate::state_lock::expect_unlocked("a group round");
        match self.0.driver.get().and_then(Weak::upgrade) {
            Some(driver) => driver.drain_if_free(max_rounds),
            None => {
                self.wake();
                true
            }
        }
    }

    /// Queues `input` without waking anyone: the caller runs the round
    /// itself with [`InputTx::drive`] once it holds no lock.
    pub fn queue(&self, input: Input) -> Result<(), GroupGone> {
        self.0.tx.send(input).map_err(|_| GroupGone)?;
        self.0.pending.fetch_add(1, Ordering::SeqCst);
        // Pairs with the fence in `left_round`: either the round's holder
        // sees this input counted after it lets go, or our `try_lock`
        // finds the driver free.
        fence(Ordering::SeqCst);
        Ok(())
    }

    /// A round took one input.
    pub(crate) fn took(&self) {
        self.0.pending.fetch_sub(1, Ordering::SeqCst);
    }

    /// Whether inputs wait for a round; called after letting go of the
    /// driver.
    pub(crate) fn left_round(&self) -> bool {
        fence(Ordering::SeqCst);
        self.0.pending.load(Ordering::SeqCst) > 0
    }

    /// The group thread registers itself, then the driver once its
    /// rounds may run anywhere.
    pub(crate) fn set_group_thread(&self, t: Thread) {
        let _ = self.0.group_thread.set(t);
    }

    pub(crate) fn set_driver(&self, driver: Weak<dyn Drain>) {
        let _ = self.0.driver.set(driver);
    }

    /// Wakes the group thread (once it has registered).
    pub(crate) fn wake(&self) {
        if let Some(t) = self.0.group_thread.get() {
            t.unpark();
        }
    }
}

/// What the group's rounds are told.
pub enum Input {
    /// A message from a connected peer.
    Peer { from: u64, msg: PeerMsg },
    /// A peer finished its hello.
    PeerUp {
        raft_id: u64,
        peer_addr: String,
        /// The certificate it presented (`None`: plain TCP).
        cert: Option<lockstep_core::group::action::CertFingerprint>,
    },
    /// The last connection to a peer closed.
    PeerDown { raft_id: u64 },
    /// Order this action (proposal id chosen by the caller).
    Propose { id: u64, action: Action },
    /// A causal read: resolve proposal `id` with a fence
    /// (`Group::read_fence`; no log entry).
    ReadFence { id: u64 },
    /// Order an action already cut into fragment parts
    /// (`Group::propose_fragments`).
    ProposeFragments { id: u64, parts: Vec<bytes::Bytes> },
    /// `gmcast.isolate`: cut every peer connection and refuse new ones
    /// (`true`), or connect again (`false`).
    Isolate(bool),
    /// `evs.suspect_timeout` changed at runtime.
    SuspectTimeout(Duration),
    /// `pc.bootstrap=YES`: make this node's component primary.
    /// `pc.bootstrap=YES`; `force`: `lockstep.force_bootstrap`, found
    /// even where acknowledged commits may be missing here.
    Bootstrap { force: bool },
    /// `pc.ignore_sb` / `pc.ignore_quorum` changed at runtime.
    IgnoreQuorum(QuorumOverrides),
    /// `pc.weight` changed at runtime.
    Weight(u32),
    /// An applier took an event and the receive queue fell below what
    /// this node announced to flow control (`Inner::check_flow_control`):
    /// the round that follows withdraws it.
    FlowCheck,
    /// Leave the cluster gracefully.
    Leave,
    /// Stop the group (after the final view): the round that takes it
    /// ends the rounds, and the group thread closes the transport.
    Stop,
    /// A bug in a round, injected by a test (handled as a failed group
    /// thread).
    #[cfg(any(test, feature = "fault-injection"))]
    Panic,
}

/// What a node without a majority may do anyway (Galera's options).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QuorumOverrides {
    /// `pc.ignore_quorum`: stay primary alone, whatever the split.
    pub ignore_quorum: bool,
    /// `pc.ignore_sb`: stay primary when this side holds exactly half of
    /// the weight (a split brain), not when it is a minority.
    pub ignore_sb: bool,
}
