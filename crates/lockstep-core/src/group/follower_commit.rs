//! A follower that stores an entry of its leader's term knows at once that
//! it is committed when it and the leader alone form a quorum (ADR 0017).
//!
//! Raft commits an entry of the current term once a majority of voters
//! store it; only the leader counts, and followers learn the commit index
//! from its next message. In a cluster of three voters the follower
//! storing the entry and the leader that sent it are already two of three:
//! no later leader can be elected without one of them, and both would
//! refuse a candidate whose log lacks it (Raft's election restriction).
//! So the follower may commit it on arrival, half a round trip before the
//! leader itself learns it and a full round trip before raft-rs would tell
//! the follower.
//!
//! Why it matters: without it, a transaction written on a follower waits
//! for the forward to the leader, a replication round and the commit
//! message back (two round trips), the leader's own for one; and every
//! follower sees the others' commits half a round trip after the leader,
//! so its transactions certify against a staler view. Both made the node
//! matter (issue 14, item 3). With it, a follower's own transaction commits
//! one round trip after it was sent, as the leader's does, and its view
//! of the others' commits is no staler than the leader's.
//!
//! The rule is applied only where it is plainly Raft's commit rule:
//! - this node is a follower of a known leader, both are voters, there is
//!   no joint configuration, and there are at most three voters;
//! - the entry is stored here and is of the current term (an entry of an
//!   earlier term on a majority may still be overwritten: Raft's figure 8);
//! - no configuration change is stored above the applied index and at or
//!   below it: the leader's configuration may already be the changed one.
//!   Entries below the first such change still qualify.
//!
//! Causal reads must cover what a follower acknowledged before its leader
//! knows it is committed: the leader answers them with its last log index,
//! not its commit index (`node::read_lease`).

use std::collections::BTreeSet;

/// The most voters among which a follower and its leader alone are a
/// quorum.
pub const MAX_VOTERS_COMMITTING_ON_STORE: usize = 3;

/// What the rule is decided on: the follower's Raft state right now.
#[derive(Debug, Clone)]
pub struct FollowerView<'a> {
    pub me: u64,
    /// 0 (raft-rs's INVALID_ID) when no leader is known.
    pub leader: u64,
    pub is_follower: bool,
    /// The voters of the configuration this node applied.
    pub voters: &'a [u64],
    /// The configuration is joint (outgoing voters present).
    pub joint: bool,
    /// The last index stored here and its term, and the current term.
    pub stored: u64,
    pub stored_term: u64,
    pub term: u64,
    pub applied: u64,
    pub committed: u64,
}

/// The configuration-change entries stored and not applied yet (one
/// per configuration change in flight: raft-rs allows one at a time per
/// leader, and a change leaves the set when applied or passed).
#[derive(Debug, Default)]
pub struct FollowerCommit {
    conf_changes: BTreeSet<u64>,
}

impl FollowerCommit {
    /// A configuration-change entry was stored at `index`.
    pub fn stored_conf_change(&mut self, index: u64) {
        self.conf_changes.insert(index);
    }

    /// The newest configuration change stored above `applied`, if any
    /// (possibly one since cut from the log: the set only grows between
    /// applies, so this errs towards "pending").
    pub fn pending_above(&self, applied: u64) -> Option<u64> {
        self.conf_changes.range(applied + 1..).next_back().copied()
    }

    /// The index this follower may commit up to now, if above its commit
    /// index.
    pub fn commit_index(&mut self, v: &FollowerView<'_>) -> Option<u64> {
        // Applied (or passed by a snapshot): no longer pending.
        self.conf_changes = self.conf_changes.split_off(&(v.applied + 1));
        let quorum_of_two = v.is_follower
            && v.leader != 0
            && v.leader != v.me
            && !v.joint
            && v.voters.len() <= MAX_VOTERS_COMMITTING_ON_STORE
            && v.voters.contains(&v.me)
            && v.voters.contains(&v.leader);
        if !quorum_of_two || v.stored_term != v.term {
            return None;
        }
        let upto = match self.conf_changes.first() {
            Some(&c) => v.stored.min(c - 1),
            None => v.stored,
        };
        (upto > v.committed).then_some(upto)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(voters: &[u64]) -> FollowerView<'_> {
        FollowerView {
            me: 2,
            leader: 1,
            is_follower: true,
            voters,
            joint: false,
            stored: 10,
            stored_term: 3,
            term: 3,
            applied: 5,
            committed: 6,
        }
    }

    #[test]
    fn a_follower_of_three_commits_what_it_stores_of_the_current_term() {
        let mut f = FollowerCommit::default();
        assert_eq!(f.commit_index(&view(&[1, 2, 3])), Some(10));
        assert_eq!(f.commit_index(&view(&[1, 2])), Some(10), "two voters");
    }

    #[test]
    fn nothing_outside_the_plain_rule() {
        let mut f = FollowerCommit::default();
        let cases: Vec<(&str, FollowerView<'_>)> = vec![
            ("four voters need a third copy", view(&[1, 2, 3, 4])),
            ("a learner's copy does not count", view(&[1, 3, 4])),
            ("the leader is no voter", view(&[2, 3, 4])),
            (
                "no leader",
                FollowerView {
                    leader: 0,
                    ..view(&[1, 2, 3])
                },
            ),
            (
                "a candidate",
                FollowerView {
                    is_follower: false,
                    ..view(&[1, 2, 3])
                },
            ),
            (
                "joint configuration",
                FollowerView {
                    joint: true,
                    ..view(&[1, 2, 3])
                },
            ),
            (
                "an earlier term's entry (figure 8)",
                FollowerView {
                    stored_term: 2,
                    ..view(&[1, 2, 3])
                },
            ),
            (
                "already committed",
                FollowerView {
                    committed: 10,
                    ..view(&[1, 2, 3])
                },
            ),
        ];
        for (why, v) in cases {
            assert_eq!(f.commit_index(&v), None, "{why}");
        }
    }

    #[test]
    fn a_pending_configuration_change_stops_the_rule_just_below_it() {
        let mut f = FollowerCommit::default();
        f.stored_conf_change(4); // applied already
        f.stored_conf_change(9);
        assert_eq!(f.commit_index(&view(&[1, 2, 3])), Some(8));
        let applied = FollowerView {
            applied: 9,
            committed: 9,
            ..view(&[1, 2, 3])
        };
        assert_eq!(
            f.commit_index(&applied),
            Some(10),
            "applied: no longer pending"
        );
        f.stored_conf_change(7);
        assert_eq!(
            f.commit_index(&view(&[1, 2, 3])),
            None,
            "below the commit index"
        );
    }
}
