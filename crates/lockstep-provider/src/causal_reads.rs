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

use crate::read_asks::{Join, ReadAsks};
use std::collections::HashMap;
use std::thread::Thread;
use std::time::{Duration, Instant};

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
    /// This node's asks of the leader (batched).
    asks: ReadAsks,
    /// The server threads whose reads wait for an answer to an ask, each
    /// woken alone (`Thread::unpark`) when its answer comes: a broadcast
    /// also woke the reads that wait for the next ask, for nothing.
    /// Bound: one per waiting read, like `asks`.
    waiters: HashMap<u64, Thread>,
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

    /// Read `id` of the current thread wants `leader`'s read index: it
    /// waits to be unparked by the answer ([`CausalReads::answered`]).
    pub fn join_ask(&mut self, id: u64, leader: u64, now: Instant, lost: Duration) -> Join {
        self.waiters.insert(id, std::thread::current());
        self.asks.join(id, leader, now, lost)
    }

    /// Read `id` stopped waiting (answered, or given up).
    pub fn leave_ask(&mut self, id: u64) {
        self.waiters.remove(&id);
    }

    /// Ask `n` came back from `from`: the reads it answers, each with
    /// the thread to wake, and the next ask to send if reads joined
    /// meanwhile (numbered `next_n`).
    pub fn answered(
        &mut self,
        n: u64,
        from: u64,
        next_n: u64,
        now: Instant,
    ) -> (Vec<(u64, Option<Thread>)>, Option<u64>) {
        let (reads, next) = self.asks.answered(n, from, next_n, now);
        let reads = reads
            .into_iter()
            .map(|id| (id, self.waiters.remove(&id)))
            .collect();
        (reads, next)
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
    fn an_answer_wakes_the_threads_of_the_reads_it_answers() {
        let mut r = CausalReads::default();
        let now = Instant::now();
        let wait = Duration::from_secs(1);
        assert_eq!(r.join_ask(10, 2, now, wait), Join::Send { n: 10 });
        assert_eq!(r.join_ask(11, 2, now, wait), Join::Wait);
        let (reads, next) = r.answered(10, 2, 12, now);
        let ids: Vec<u64> = reads.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, [10]);
        assert!(reads[0].1.is_some(), "the waiting thread is handed back");
        assert_eq!(next, Some(12), "read 11 goes with the next ask");
        r.leave_ask(11);
        assert!(r.waiters.is_empty());
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
