//! What the server's threads and the transport tell the group's rounds
//! (`group_driver`): the one way into them, over a channel. The rounds run
//! on the transport's event loop, their one owner (ADR 0039): sending
//! queues the input and wakes the loop, and nothing else runs a round.

use lockstep_core::group::peer::PeerMsg;
use lockstep_core::group::Action;
use lockstep_net::transport::LoopWaker;
use std::sync::mpsc::Sender;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The sending side of the group's input, shared by every thread that has
/// input for it. Bounded where the inputs come from: one proposal per
/// server thread, the transport's input budget for peer messages, one
/// `FlowCheck` in flight, and operator commands.
#[derive(Clone)]
pub struct InputTx(Arc<Inputs>);

/// The group's driver has ended (its input is closed); the input was
/// dropped.
#[derive(Debug)]
pub struct GroupGone;

struct Inputs {
    tx: Sender<Input>,
    /// The event loop that runs the rounds, registered once it has them.
    waker: OnceLock<LoopWaker>,
}

impl InputTx {
    pub fn new(tx: Sender<Input>) -> InputTx {
        InputTx(Arc::new(Inputs {
            tx,
            waker: OnceLock::new(),
        }))
    }

    /// Queues `input` and wakes the rounds' loop. May be called under the
    /// provider's lock: the wake-up is a flag and at most one `eventfd`
    /// write.
    pub fn send(&self, input: Input) -> Result<(), GroupGone> {
        self.queue(input)?;
        self.wake();
        Ok(())
    }

    /// [`InputTx::send`] for the transport (its event loop, or an opening
    /// thread's `PeerUp`): `false` once the group is gone.
    pub fn send_from_network(&self, input: Input) -> bool {
        self.send(input).is_ok()
    }

    /// Lets go of the provider's lock (`held`, taken by value so that it
    /// cannot outlive this call), then wakes the rounds' loop for what
    /// was queued under it: the loop's round takes that lock, so it
    /// should not find it held by the thread that woke it.
    pub(crate) fn wake_after<T>(&self, held: crate::state_lock::Guard<'_, T>) {
        drop(held);
        self.wake();
    }

    /// Queues `input` without waking anyone: the caller wakes the loop
    /// once it holds no lock ([`InputTx::wake_after`]).
    pub fn queue(&self, input: Input) -> Result<(), GroupGone> {
        self.0.tx.send(input).map_err(|_| GroupGone)
    }

    /// The loop registers itself once it runs the rounds; inputs queued
    /// before then are taken by its first round.
    pub(crate) fn set_waker(&self, waker: LoopWaker) {
        let _ = self.0.waker.set(waker);
        self.wake();
    }

    /// Wakes the rounds' loop (once it has registered).
    pub(crate) fn wake(&self) {
        if let Some(w) = self.0.waker.get() {
            w.wake();
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
    /// ends the rounds, and `GroupChannel::stop` closes the transport.
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
