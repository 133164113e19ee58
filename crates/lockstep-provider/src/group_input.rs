//! What the server's threads and the transport tell the group thread
//! (`channel`): the one way into it, over a channel, so that only that
//! thread touches Raft.

use lockstep_core::group::Action;
use lockstep_core::wire::peer::PeerMsg;
use std::time::Duration;

/// What the group thread is told.
pub enum Input {
    /// A message from a connected peer.
    Peer { from: u64, msg: PeerMsg },
    /// A peer finished its hello.
    PeerUp { raft_id: u64, peer_addr: String },
    /// The last connection to a peer closed.
    PeerDown { raft_id: u64 },
    /// Order this action (proposal id chosen by the caller).
    Propose { id: u64, action: Action },
    /// A causal read: resolve proposal `id` with a fence
    /// (`Group::read_fence`; no log entry).
    ReadFence { id: u64 },
    /// Order an action already cut into fragment parts
    /// (`Group::propose_fragments`).
    ProposeFragments { id: u64, parts: Vec<Vec<u8>> },
    /// `gmcast.isolate`: cut every peer connection and refuse new ones
    /// (`true`), or connect again (`false`).
    Isolate(bool),
    /// `evs.suspect_timeout` changed at runtime.
    SuspectTimeout(Duration),
    /// `pc.bootstrap=YES`: make this node's component primary.
    Bootstrap,
    /// `pc.ignore_sb` / `pc.ignore_quorum` changed at runtime.
    IgnoreQuorum(bool),
    /// `pc.weight` changed at runtime.
    Weight(u32),
    /// An applier took an event and the receive queue fell below what
    /// this node announced to flow control (`Inner::check_flow_control`):
    /// the round that follows withdraws it.
    FlowCheck,
    /// Leave the cluster gracefully.
    Leave,
    /// Stop the thread (after the final view).
    Stop,
    /// A bug on the group thread, injected by a test.
    #[cfg(any(test, feature = "fault-injection"))]
    Panic,
}
