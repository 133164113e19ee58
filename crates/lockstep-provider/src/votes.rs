//! This node's side of the consistency votes (`vote.rs` runs them), as
//! one owned part.

use std::collections::{BTreeMap, BTreeSet};

/// Votes and outcomes remembered per node (failures are rare).
const KEEP: usize = 256;

/// This node's side of the votes, one owned part: its own outcomes, the
/// seqnos the group asked about and it has not answered, and the group's
/// outcomes. Each bounded by [`KEEP`] (the oldest go first).
#[derive(Debug, Default)]
pub struct Votes {
    mine: BTreeMap<i64, u64>,
    asked: BTreeSet<i64>,
    results: BTreeMap<i64, u64>,
}

fn remember(map: &mut BTreeMap<i64, u64>, seqno: i64, value: u64) {
    map.insert(seqno, value);
    while map.len() > KEEP {
        map.pop_first();
    }
}

impl Votes {
    /// This node's outcome for `seqno` (0: applied): it answers any ask.
    pub fn record_mine(&mut self, seqno: i64, digest: u64) {
        remember(&mut self.mine, seqno, digest);
        self.asked.remove(&seqno);
    }

    /// The asked seqnos at or below `done` (finished here) that this node
    /// has not voted on: it applied them, and owes a success vote. They
    /// leave the asked set.
    pub fn take_due(&mut self, done: i64) -> Vec<i64> {
        let mut due: Vec<i64> = self.asked.range(..=done).copied().collect();
        for seqno in &due {
            self.asked.remove(seqno);
        }
        due.retain(|s| !self.mine.contains_key(s));
        due
    }

    pub fn ask(&mut self, seqno: i64) {
        if !self.mine.contains_key(&seqno) && self.asked.len() < KEEP {
            self.asked.insert(seqno);
        }
    }

    pub fn decide(&mut self, seqno: i64, digest: u64) {
        remember(&mut self.results, seqno, digest);
        if self.mine.contains_key(&seqno) {
            self.asked.remove(&seqno);
        }
    }

    /// The group's outcome for `seqno`, once decided.
    pub fn outcome(&self, seqno: i64) -> Option<u64> {
        self.results.get(&seqno).copied()
    }

    /// Whether this node failed `seqno` and the group decided otherwise.
    pub fn lost(&self, seqno: i64) -> bool {
        self.mine
            .get(&seqno)
            .is_some_and(|d| *d != 0 && self.outcome(seqno) != Some(*d))
    }

    /// Whether this node voted success on `seqno`.
    pub fn applied(&self, seqno: i64) -> bool {
        self.mine.get(&seqno) == Some(&0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn votes_stay_bounded_and_a_lost_vote_is_told_from_a_won_one() {
        let mut v = Votes::default();
        for seqno in 0..(KEEP as i64 * 2) {
            v.ask(seqno);
            v.record_mine(seqno, 7);
            v.decide(seqno, 7);
        }
        assert!(v.mine.len() <= KEEP && v.results.len() <= KEEP && v.asked.len() <= KEEP);
        let top = KEEP as i64 * 2 - 1;
        assert!(!v.lost(top), "the group failed it the same way");
        v.record_mine(top + 1, 7);
        v.decide(top + 1, 9);
        assert!(v.lost(top + 1));
        v.ask(top + 2);
        v.ask(top + 3);
        assert_eq!(v.take_due(top + 2), [top + 2], "only what finished here");
        assert_eq!(v.take_due(top + 3), [top + 3]);
        assert!(v.take_due(i64::MAX).is_empty());
    }
}
