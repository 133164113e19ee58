//! Consistency votes (Galera 4): when applying an ordered event fails on
//! some member, every member reports its outcome for that seqno (0 =
//! applied, otherwise a digest of its error) through the log, and the
//! group agrees on the outcome; members that got another one are
//! inconsistent and leave. Pure bookkeeping, driven by the sequencer in
//! log order, so every member decides the same.
//!
//! Decision: as soon as one outcome has more than half of the electorate
//! (members that hold state: joined, synced or donor), it wins. If every
//! elector voted and none has a majority, the most common outcome wins,
//! ties going to success (0), then to the lowest digest: a two-node
//! cluster where one node fails keeps the one that applied.

use crate::certification::Seqno;
use std::collections::{BTreeMap, HashMap};

/// Open votes tracked at once; a vote beyond this is ignored (logged by
/// the provider as a plain apply error). Failures are rare; this bounds
/// memory against a flood of bogus votes.
pub const MAX_OPEN_VOTES: usize = 256;
/// Decided outcomes remembered, for members that vote late.
const KEEP_RESULTS: usize = 256;

/// What a vote changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VoteEvent {
    /// The first vote for `seqno`: every member must report its outcome.
    Requested(Seqno),
    /// The group's outcome for `seqno`.
    Decided { seqno: Seqno, digest: u64 },
    /// This member's outcome differs from the group's.
    Inconsistent { raft_id: u64, seqno: Seqno },
}

#[derive(Debug, Default, Clone)]
pub struct Votes {
    open: BTreeMap<Seqno, HashMap<u64, u64>>,
    decided: BTreeMap<Seqno, u64>,
}

impl Votes {
    /// `raft_id` reports `digest` for `seqno`; `electorate` are the
    /// members whose outcome counts.
    pub fn vote(
        &mut self,
        raft_id: u64,
        seqno: Seqno,
        digest: u64,
        electorate: &[u64],
        out: &mut Vec<VoteEvent>,
    ) {
        if !electorate.contains(&raft_id) {
            return;
        }
        if let Some(&winner) = self.decided.get(&seqno) {
            if digest != winner {
                out.push(VoteEvent::Inconsistent { raft_id, seqno });
            }
            return;
        }
        if !self.open.contains_key(&seqno) {
            if self.open.len() >= MAX_OPEN_VOTES {
                return;
            }
            out.push(VoteEvent::Requested(seqno));
        }
        let ballots = self.open.entry(seqno).or_default();
        ballots.insert(raft_id, digest);
        let mut counts: BTreeMap<u64, usize> = BTreeMap::new();
        let mut voted = 0;
        for (id, d) in ballots.iter() {
            if electorate.contains(id) {
                *counts.entry(*d).or_default() += 1;
                voted += 1;
            }
        }
        let majority = counts
            .iter()
            .find(|(_, n)| 2 * **n > electorate.len())
            .map(|(d, _)| *d);
        let winner = majority.or_else(|| {
            (voted >= electorate.len()).then(|| {
                // BTreeMap order puts digest 0 (success) first, then the
                // lowest digest: the first maximum wins ties.
                let best = counts.values().copied().max().unwrap_or(0);
                counts
                    .iter()
                    .find(|(_, n)| **n == best)
                    .map_or(0, |(d, _)| *d)
            })
        });
        if let Some(winner) = winner {
            let ballots = self.open.remove(&seqno).unwrap_or_default();
            out.push(VoteEvent::Decided {
                seqno,
                digest: winner,
            });
            let mut losers: Vec<u64> = ballots
                .iter()
                .filter(|(_, d)| **d != winner)
                .map(|(id, _)| *id)
                .collect();
            losers.sort_unstable();
            for raft_id in losers {
                out.push(VoteEvent::Inconsistent { raft_id, seqno });
            }
            self.decided.insert(seqno, winner);
            while self.decided.len() > KEEP_RESULTS {
                self.decided.pop_first();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(votes: &mut Votes, ballots: &[(u64, u64)], electorate: &[u64]) -> Vec<VoteEvent> {
        let mut out = Vec::new();
        for (id, d) in ballots {
            votes.vote(*id, 7, *d, electorate, &mut out);
        }
        out
    }

    #[test]
    fn the_failing_minority_is_inconsistent() {
        let mut v = Votes::default();
        let out = run(&mut v, &[(3, 99), (1, 0), (2, 0)], &[1, 2, 3]);
        assert_eq!(
            out,
            vec![
                VoteEvent::Requested(7),
                VoteEvent::Decided {
                    seqno: 7,
                    digest: 0
                },
                VoteEvent::Inconsistent {
                    raft_id: 3,
                    seqno: 7
                },
            ]
        );
    }

    #[test]
    fn everyone_failing_the_same_way_is_consistent() {
        let mut v = Votes::default();
        let out = run(&mut v, &[(1, 5), (2, 5)], &[1, 2, 3]);
        assert_eq!(
            out[1],
            VoteEvent::Decided {
                seqno: 7,
                digest: 5
            }
        );
        assert_eq!(out.len(), 2);
        // The third member, late and successful, is the odd one out.
        let mut late = Vec::new();
        v.vote(3, 7, 0, &[1, 2, 3], &mut late);
        assert_eq!(
            late,
            vec![VoteEvent::Inconsistent {
                raft_id: 3,
                seqno: 7
            }]
        );
    }

    #[test]
    fn a_tie_of_two_goes_to_the_node_that_applied() {
        let mut v = Votes::default();
        let out = run(&mut v, &[(2, 42), (1, 0)], &[1, 2]);
        assert_eq!(
            out[1],
            VoteEvent::Decided {
                seqno: 7,
                digest: 0
            }
        );
        assert_eq!(
            out[2],
            VoteEvent::Inconsistent {
                raft_id: 2,
                seqno: 7
            }
        );
    }

    #[test]
    fn non_members_do_not_vote_and_open_votes_are_bounded() {
        let mut v = Votes::default();
        let mut out = Vec::new();
        v.vote(9, 1, 5, &[1, 2], &mut out);
        assert!(out.is_empty());
        for s in 0..(MAX_OPEN_VOTES as i64 + 10) {
            v.vote(1, s, 5, &[1, 2, 3], &mut out);
        }
        assert_eq!(v.open.len(), MAX_OPEN_VOTES);
    }
}
