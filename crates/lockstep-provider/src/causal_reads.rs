//! What this node knows for causal reads (`wsrep_sync_wait`, ADR 0016 and
//! 0022), in one owned part: the leader's lease and read index as the
//! rounds publish them, how far this node has applied the Raft log, and
//! the follower's asks of the leader with the threads waiting for their
//! answers.
//!
//! Three kinds of thread meet here: the rounds publish the lease and the
//! applied index; server threads read them and join asks; the
//! transport's event loop answers asks (`group_driver/read_ask.rs`).
//! All of them under the provider's one lock, through these methods.

use crate::read_asks::ReadAsks;

/// The leader's lease as a round publishes it
/// (`Group::read_lease`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLease {
    /// No other leader can exist before this (`state::mono_ns`).
    pub until_ns: u64,
    /// The read index when published (the leader's last log index,
    /// `Group::read_lease`): no message with a higher one has left this
    /// node.
    pub index: u64,
}

#[derive(Default)]
pub struct CausalReads {
    /// The leader's lease, published by the round before it sends
    /// anything (ADR 0016); `None` on a node that holds none.
    lease: Option<ReadLease>,
    /// The Raft leader as the rounds last saw it (0: none): a follower's
    /// reads ask it directly.
    leader: u64,
    /// The Raft index whose deliveries are in the provider's state.
    applied_index: u64,
    /// A read came (here, or a follower asked) since a round last looked:
    /// the rounds then keep the lease renewed.
    asked: bool,
    /// This node's asks of the leader (batched), with the threads
    /// waiting for their answers.
    asks: ReadAsks,
}

impl CausalReads {
    /// What a round saw: the lease (if this node holds one) and the
    /// leader. `true` when the leader changed: reads waiting for the old
    /// one's index must ask again.
    pub fn publish(&mut self, lease: Option<ReadLease>, leader: u64) -> bool {
        let changed = leader != self.leader;
        self.lease = lease;
        self.leader = leader;
        changed
    }

    /// A new group channel: no leader known, no lease held.
    pub fn forget_leader(&mut self) {
        self.publish(None, 0);
    }

    /// The Raft leader (0: none known).
    pub fn leader(&self) -> u64 {
        self.leader
    }

    /// The leader's read index while its lease holds: what a causal read
    /// on the leader waits for without a round, and what it answers a
    /// follower's `ReadAsk`. Once this node has applied the log that far,
    /// `last_ordered` covers every commit acknowledged anywhere before
    /// now.
    pub fn lease_index(&self, now_ns: u64) -> Option<u64> {
        let lease = self.lease?;
        (now_ns < lease.until_ns).then_some(lease.index)
    }

    pub fn applied_index(&self) -> u64 {
        self.applied_index
    }

    /// The rounds delivered up to `index`; `true` if it moved.
    pub fn set_applied_index(&mut self, index: u64) -> bool {
        std::mem::replace(&mut self.applied_index, index) != index
    }

    /// A read came: the rounds keep the lease renewed.
    pub fn mark_asked(&mut self) {
        self.asked = true;
    }

    /// Whether a read came since the last call (the rounds look each
    /// round).
    pub fn take_asked(&mut self) -> bool {
        std::mem::take(&mut self.asked)
    }

    /// The follower's asks of the leader.
    pub fn asks(&mut self) -> &mut ReadAsks {
        &mut self.asks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_serves_reads_until_it_expires() {
        let mut r = CausalReads::default();
        let now = 5_000_000_000;
        let lease = ReadLease {
            until_ns: now + 100_000_000,
            index: 7,
        };
        assert!(r.publish(Some(lease), 1), "a first leader is a change");
        assert!(!r.publish(Some(lease), 1));
        assert_eq!(r.lease_index(now), Some(7));
        assert_eq!(r.lease_index(now + 100_000_000), None);
        r.forget_leader();
        assert_eq!((r.leader(), r.lease_index(now)), (0, None));
    }

    #[test]
    fn the_applied_index_reports_a_move_only() {
        let mut r = CausalReads::default();
        assert!(r.set_applied_index(3));
        assert!(!r.set_applied_index(3));
        assert_eq!(r.applied_index(), 3);
        r.mark_asked();
        assert!(r.take_asked());
        assert!(!r.take_asked());
    }
}
