//! This node's proposals to the group, one owned part: the id each gets,
//! what became of it (`Resolution`, which its waiting thread reads), the
//! ones nobody waits for any more, and the send queue (proposals the
//! rounds have not had ordered yet).
//!
//! A proposal's life: [`Proposals::open`] when sent (`Pending` if a
//! thread waits), one of the `resolve_*` calls from a round, a connection
//! thread or the end of the session, then [`Proposals::take`] by its
//! waiter. Abandoned and detached ones have no waiter: once ordered they
//! are applied like remote writesets ([`Proposals::ordered_mine`]).
//! Bound: one entry per client thread in `certify`/TOI or causal read,
//! plus one per streaming rollback in flight.

use lockstep_core::certification::CertOutcome;
use lockstep_core::gates::QueueStats;
use std::collections::{HashMap, HashSet};

/// What a local proposal turned into.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolution {
    Pending,
    Ordered {
        seqno: i64,
        outcome: CertOutcome,
        /// What it depends on (`Certifier::last_related`).
        related: Option<Vec<i64>>,
    },
    /// A causal-read fence passed after `seqno` was ordered.
    Fence {
        seqno: i64,
    },
    /// A causal read asked the leader directly (`PeerMsg::ReadAsk`): its
    /// commit index, which this node must apply before reading.
    ReadIndex {
        index: u64,
    },
    /// The leader asked holds no lease: ask through Raft instead.
    NoLease,
    /// Not ordered (the node left the group first).
    Dropped,
}

/// What a delivery of this node's own proposal means here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mine {
    /// A thread waits for it: it is resolved for that thread.
    Waited,
    /// Its caller got an error when the node lost the primary component;
    /// ordered after all, it is applied like a remote writeset.
    Abandoned,
    /// Nobody waits (a streaming rollback): applied like a remote
    /// writeset, this node included.
    Detached,
}

pub struct Proposals {
    resolutions: HashMap<u64, Resolution>,
    /// The next id: high bit set, so that ids never meet Raft's small
    /// numbers in logs.
    next_id: u64,
    abandoned: HashSet<u64>,
    detached: HashSet<u64>,
    /// Last seen seqno of this node's writesets not yet ordered: the
    /// commit report must not exceed it (`Certifier::purge_upto`).
    last_seen: HashMap<u64, i64>,
    /// What the rounds took of the proposals sent on the current link.
    taken: u64,
    /// `wsrep_local_send_queue`: proposals not ordered yet (Galera's send
    /// queue: actions waiting to enter the total order), sampled each
    /// round into `send_queue_stats`.
    send_queue: usize,
    send_queue_stats: QueueStats,
    /// The waiters' slots (`resolved_slot`) of the proposals resolved
    /// since the rounds last took them (`take_resolved_slots`): a
    /// delivering round wakes those alone, not every proposer.
    resolved_slots: u64,
}

/// Threads waiting for their proposal sleep on one of this many
/// condition variables, by id (`Shared::resolved`).
pub const RESOLVED_SLOTS: usize = 64;

/// The slot proposal `id`'s waiter sleeps on.
pub fn resolved_slot(id: u64) -> usize {
    (id % RESOLVED_SLOTS as u64) as usize
}

/// Proposal `id`'s slot in a bit set of slots (`take_resolved_slots`).
fn slot_bit(id: u64) -> u64 {
    1 << resolved_slot(id)
}

impl Default for Proposals {
    fn default() -> Self {
        Proposals {
            resolutions: HashMap::new(),
            next_id: 1 << 63,
            abandoned: HashSet::new(),
            detached: HashSet::new(),
            last_seen: HashMap::new(),
            taken: 0,
            send_queue: 0,
            send_queue_stats: QueueStats::default(),
            resolved_slots: 0,
        }
    }
}

impl Proposals {
    /// The id the next [`Proposals::open`] hands out.
    pub fn peek_id(&self) -> u64 {
        self.next_id
    }

    /// A new id; `Pending` until resolved when a thread `waits` for it.
    pub fn open(&mut self, waits: bool) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        if waits {
            self.resolutions.insert(id, Resolution::Pending);
        }
        id
    }

    /// Whether `id` still waits for the group.
    pub fn is_pending(&self, id: u64) -> bool {
        self.resolutions.get(&id) == Some(&Resolution::Pending)
    }

    /// Sets what became of `id`, if a thread waits for it.
    pub fn resolve(&mut self, id: u64, r: Resolution) {
        if let Some(w) = self.resolutions.get_mut(&id) {
            *w = r;
            self.resolved_slots |= slot_bit(id);
        }
    }

    /// Sets what became of `id` unless it was resolved already.
    pub fn resolve_pending(&mut self, id: u64, r: Resolution) {
        if let Some(w) = self.resolutions.get_mut(&id) {
            if *w == Resolution::Pending {
                *w = r;
                self.resolved_slots |= slot_bit(id);
            }
        }
    }

    /// The slots of the waiters of the proposals resolved since the last
    /// call, as a bit set (bit `resolved_slot(id)`), cleared. Whoever
    /// resolves and then wakes only these takes them under the lock it
    /// resolved under; `Shared::notify` wakes every slot.
    pub fn take_resolved_slots(&mut self) -> u64 {
        std::mem::take(&mut self.resolved_slots)
    }

    /// The waiter takes its resolution (and the entry goes).
    pub fn take(&mut self, id: u64) -> Option<Resolution> {
        self.last_seen.remove(&id);
        self.resolutions.remove(&id)
    }

    /// Every proposal still pending is dropped (the session ended).
    pub fn drop_pending(&mut self) {
        for (id, w) in self.resolutions.iter_mut() {
            if *w == Resolution::Pending {
                *w = Resolution::Dropped;
                self.resolved_slots |= slot_bit(*id);
            }
        }
    }

    /// Fails every proposal not ordered yet, remembering each: if one is
    /// ordered after all, this node applies it like any other member
    /// (the node lost the primary component). How many there were.
    pub fn abandon_pending(&mut self) -> usize {
        let mut n = 0;
        for (id, w) in self.resolutions.iter_mut() {
            if *w == Resolution::Pending {
                *w = Resolution::Dropped;
                self.resolved_slots |= slot_bit(*id);
                self.abandoned.insert(*id);
                n += 1;
            }
        }
        n
    }

    /// Proposal `id` has no waiter: it is applied once ordered.
    pub fn detach(&mut self, id: u64) {
        self.detached.insert(id);
    }

    /// Whether a detached proposal is still unordered.
    #[cfg(test)]
    pub fn any_detached(&self) -> bool {
        !self.detached.is_empty()
    }

    /// This node's proposal `id` was ordered: whom it is for.
    pub fn ordered_mine(&mut self, id: u64) -> Mine {
        if self.abandoned.remove(&id) {
            Mine::Abandoned
        } else if self.detached.remove(&id) {
            Mine::Detached
        } else {
            Mine::Waited
        }
    }

    /// This node's proposal `id` will never be ordered (the group settled
    /// it as dropped).
    pub fn settled(&mut self, id: u64) {
        self.abandoned.remove(&id);
        self.detached.remove(&id);
        self.resolve_pending(id, Resolution::Dropped);
    }

    /// The writeset of proposal `id` was certified against `last_seen`.
    pub fn set_last_seen(&mut self, id: u64, last_seen: i64) {
        self.last_seen.insert(id, last_seen);
    }

    /// The lowest last-seen seqno among writesets not yet ordered.
    pub fn min_last_seen(&self) -> Option<i64> {
        self.last_seen.values().min().copied()
    }

    /// What a round saw: proposals it took on this link, and those not
    /// ordered yet.
    pub fn publish(&mut self, taken: u64, in_flight: usize) {
        self.taken = taken;
        self.send_queue = in_flight;
    }

    /// Whether the rounds have taken all `sent` and none is unordered.
    pub fn all_ordered(&self, sent: u64) -> bool {
        self.send_queue == 0 && self.taken == sent
    }

    /// `wsrep_local_send_queue`.
    pub fn send_queue(&self) -> usize {
        self.send_queue
    }

    /// Samples the send queue (each round).
    pub fn sample_send_queue(&mut self) {
        self.send_queue_stats.sample(self.send_queue);
    }

    pub fn send_queue_stats(&self) -> &QueueStats {
        &self.send_queue_stats
    }

    /// `FLUSH STATUS`.
    pub fn reset_stats(&mut self) {
        self.send_queue_stats.reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_resolution_marks_its_waiters_slot_and_only_that() {
        let mut p = Proposals::default();
        let ids: Vec<u64> = (0..4).map(|_| p.open(true)).collect();
        let unwaited = p.open(false);
        let bit = |id: u64| 1u64 << resolved_slot(id);
        assert_eq!(p.take_resolved_slots(), 0, "opening wakes nobody");
        p.resolve(unwaited, Resolution::Dropped);
        assert_eq!(p.take_resolved_slots(), 0, "nobody waits for it");
        p.resolve(ids[0], Resolution::Fence { seqno: 1 });
        p.resolve_pending(ids[1], Resolution::NoLease);
        assert_eq!(p.take_resolved_slots(), bit(ids[0]) | bit(ids[1]));
        assert_eq!(p.take_resolved_slots(), 0, "taken once");
        p.resolve_pending(ids[1], Resolution::Dropped);
        assert_eq!(p.take_resolved_slots(), 0, "already resolved");
        p.settled(ids[2]);
        assert_eq!(p.take_resolved_slots(), bit(ids[2]));
        assert_eq!(p.abandon_pending(), 1);
        assert_eq!(p.take_resolved_slots(), bit(ids[3]));
        let more = p.open(true);
        p.drop_pending();
        assert_eq!(p.take_resolved_slots(), bit(more));
        assert_ne!(
            resolved_slot(ids[0]),
            resolved_slot(ids[1]),
            "neighbours apart"
        );
    }

    #[test]
    fn an_abandoned_proposal_ordered_after_all_is_applied_not_resolved() {
        let mut p = Proposals::default();
        let a = p.open(true);
        let b = p.open(true);
        p.resolve(b, Resolution::Fence { seqno: 3 });
        assert_eq!(p.abandon_pending(), 1, "only the pending one");
        assert_eq!(p.ordered_mine(a), Mine::Abandoned);
        assert_eq!(p.ordered_mine(a), Mine::Waited, "once");
        assert_eq!(p.take(a), Some(Resolution::Dropped));
        assert_eq!(p.take(b), Some(Resolution::Fence { seqno: 3 }));
        assert_eq!(p.take(b), None);
    }

    #[test]
    fn a_settled_proposal_is_dropped_unless_resolved_first() {
        let mut p = Proposals::default();
        let a = p.open(true);
        let d = p.open(false);
        p.detach(d);
        assert!(p.is_pending(a) && !p.is_pending(d));
        p.settled(d);
        assert!(!p.any_detached());
        p.resolve(a, Resolution::Fence { seqno: 1 });
        p.settled(a);
        assert_eq!(p.take(a), Some(Resolution::Fence { seqno: 1 }));
    }

    #[test]
    fn the_lowest_last_seen_goes_with_its_proposal() {
        let mut p = Proposals::default();
        let a = p.open(true);
        let b = p.open(true);
        p.set_last_seen(a, 5);
        p.set_last_seen(b, 9);
        assert_eq!(p.min_last_seen(), Some(5));
        p.take(a);
        assert_eq!(p.min_last_seen(), Some(9));
        p.publish(2, 0);
        assert!(p.all_ordered(2) && !p.all_ordered(3));
    }
}
