//! The ordered work appliers run inside `recv()`: writesets, views,
//! donations and the session's turns, in the order the group delivered
//! them.

use crate::recv_spool::Spilled;
use crate::remote_ws::RemoteWs;
use crate::server::View;
use lockstep_core::group::CacheIst;

/// Ordered work for the applier threads, processed inside `recv()`.
pub enum Event {
    Connected(View),
    /// The first view of a joining node: transfer state if needed, then
    /// (or instead) deliver it.
    JoinView(View),
    /// A primary configuration with its seqno (`state_id.seqno`).
    PrimaryView(View),
    /// A view from before this node joined, replayed by IST: its seqno
    /// passes the gates. With its members (known when the group log is
    /// replayed) the server sees it too, as Galera delivers IST views: it
    /// then rolls back the streaming transactions whose origin had left
    /// before the writesets after it are applied.
    PastView(i64, u32, Option<Box<View>>),
    /// A writeset from another member.
    Apply(RemoteWs),
    /// A writeset from another member that waits in the receive spool
    /// (`recv_spool`): read back when its turn comes.
    Spilled(Spilled),
    /// This node was chosen to donate its state.
    Donate {
        request: Vec<u8>,
        seqno: i64,
        joiner: u64,
        /// IST: the joiner has everything after this seqno (bypass).
        ist_after: Option<i64>,
        /// IST from this node's writeset cache to the joiner's receiver.
        from_cache: Option<CacheIst>,
    },
    /// This node is no longer in the primary component's view.
    Removed,
    /// The primary component removed this node while the session goes
    /// on: join again as a new member (`session::rejoin`).
    Rejoin,
    /// A consistency vote found this node inconsistent: leave (the reason).
    Inconsistent(String),
    /// The writeset cache cannot take events (a write error, a stuck
    /// disk): leave, not diverged (the reason).
    CacheFailed(String),
    /// This node lost contact with the majority: a non-primary view.
    NonPrimary,
    /// Time to tell the server it is synced.
    Synced,
    /// The last event of a session: the empty final view.
    Final,
}

impl Event {
    /// Events that run alone: nothing after them starts until they end.
    pub fn isolating(&self) -> bool {
        !matches!(self, Event::Apply(_) | Event::Spilled(_))
    }

    /// Bytes this event holds in memory (a spilled writeset: none).
    pub fn memory_bytes(&self) -> usize {
        match self {
            Event::Apply(ws) => ws.size,
            _ => 0,
        }
    }

    /// Bytes this event holds in the receive queue (its writeset).
    pub fn bytes(&self) -> usize {
        match self {
            Event::Apply(ws) => ws.size,
            Event::Spilled(s) => s.bytes,
            _ => 0,
        }
    }

    /// The seqno an ordered event occupies, if any.
    pub fn seqno(&self) -> Option<i64> {
        match self {
            Event::Apply(ws) => Some(ws.seqno),
            Event::Spilled(s) => Some(s.seqno),
            Event::PrimaryView(v) => Some(v.state_id.seqno),
            Event::PastView(seqno, ..) => Some(*seqno),
            _ => None,
        }
    }
}
