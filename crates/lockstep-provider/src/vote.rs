//! Consistency votes on apply errors (contract §2.13, §2.24; Galera 4):
//! a member that fails to apply an ordered event (a remote writeset, or a
//! TOI statement) reports a digest of its error through the log and waits
//! for the group's outcome (`lockstep_core::group::vote`); the others
//! report success for that seqno once they have finished it. A member whose
//! outcome differs from the group's leaves the cluster ("Inconsistent by
//! consensus", the message Galera logs and MariaDB's tests expect); if
//! every member failed the same way, the event counts as consistent.

use crate::event::Event;
use crate::log::{error, info};
use crate::provider::{Provider, Until};
use crate::state::{Conn, Inner};
use lockstep_core::group::Action;
use std::time::{Duration, Instant};
use wsrep_abi::{status, Status};

/// How long a failed member waits for the group's outcome before it
/// assumes the worst and leaves.
const VOTE_TIMEOUT: Duration = Duration::from_secs(60);

/// FNV-1a of the error text: equal errors give equal digests on every
/// node; never 0, which means "applied".
pub fn error_digest(err: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in err {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h.max(1)
}

impl Inner {
    /// Records and proposes this node's outcome for `seqno`; false when
    /// there is no group to vote in (a single node is consistent alone).
    fn cast_vote(&mut self, seqno: i64, digest: u64) -> bool {
        self.votes.record_mine(seqno, digest);
        let Some(link) = &self.group else {
            return false;
        };
        let raft_id = link.raft_id;
        self.propose(
            Action::Vote {
                raft_id,
                seqno,
                digest,
            },
            false,
        )
        .is_some()
    }

    /// Reports success for every asked vote whose seqno this node has
    /// finished without voting (each round).
    pub fn answer_votes(&mut self) {
        let done = self.last_committed();
        for seqno in self.votes.take_due(done) {
            self.cast_vote(seqno, 0);
        }
    }

    /// A vote was opened for `seqno` (delivery).
    pub fn vote_asked(&mut self, seqno: i64) {
        self.votes.ask(seqno);
    }

    /// The group's outcome for `seqno` (delivery). A member that has not
    /// voted yet (the majority decided before it finished the seqno, or in
    /// the same batch as the request) still votes once it has finished:
    /// the group then compares that late vote with the outcome, so a node
    /// that applied what the majority failed leaves as it must.
    pub fn vote_decided(&mut self, seqno: i64, digest: u64) {
        self.votes.decide(seqno, digest);
    }

    /// The group found this node inconsistent at `seqno` (delivery). A
    /// node that failed itself learns it from the outcome it waits for;
    /// one that applied while the others failed alike leaves from here.
    pub fn found_inconsistent(&mut self, seqno: i64) {
        if self.votes.applied(seqno) {
            // Galera's wording, which MariaDB's tests expect.
            let why = format!(
                "Vote 0 (success) on {}:{seqno} is inconsistent with group. Leaving cluster. \
                 (Inconsistency detected: this node applied it, the other members failed it \
                 alike)",
                self.history
            );
            self.enqueue(Event::Inconsistent(why));
        }
    }
}

/// A failure's vote, cast and not yet decided ([`Inner::vote_failure`]).
#[must_use = "wait for the group's outcome with Provider::await_vote"]
pub(crate) struct CastVote {
    seqno: i64,
    digest: u64,
}

impl Inner {
    /// This node failed `seqno` with `err`: casts its vote, under the
    /// same lock as the commit-order leave that follows. Casting after
    /// letting go of the lock let a round in between find the seqno
    /// finished and unvoted and report success for it (`answer_votes`),
    /// so the group saw this node both apply and fail it, and the node
    /// left as inconsistent (MariaDB's GCF-360, four nodes failing the
    /// same DDL at once). `None` without a group to vote in.
    pub(crate) fn vote_failure(&mut self, seqno: i64, err: &[u8]) -> Option<CastVote> {
        let digest = error_digest(err);
        if !self.cast_vote(seqno, digest) {
            return None;
        }
        info!(
            "seqno {seqno} failed here ({}); voting on the outcome",
            String::from_utf8_lossy(err)
        );
        Some(CastVote { seqno, digest })
    }
}

impl Provider {
    /// Waits for the group's outcome of a vote cast by
    /// [`Inner::vote_failure`]: `OK` when the group failed the same way,
    /// `NODE_FAIL` when this node is the odd one out.
    pub(crate) fn await_vote(&self, vote: CastVote) -> Status {
        let CastVote { seqno, digest } = vote;
        let g = self.lock();
        let deadline = Instant::now() + VOTE_TIMEOUT;
        let (g, _) = self.wait_until(g, Until::Deadline(deadline), |s| {
            s.votes.outcome(seqno).is_some() || s.conn != Conn::Open
        });
        match g.votes.outcome(seqno) {
            Some(d) if d == digest => {
                info!("seqno {seqno}: every member failed it the same way; consistent");
                status::OK
            }
            Some(_) => {
                error!(
                    "Inconsistency detected: Inconsistent by consensus on {}:{seqno}",
                    g.history
                );
                status::NODE_FAIL
            }
            None => {
                error!(
                    "Inconsistency detected: no outcome of the consistency vote on {}:{seqno} \
                     within {VOTE_TIMEOUT:?}",
                    g.history
                );
                status::NODE_FAIL
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MariaDB's GCF-360: a vote asked for a seqno this node failed, a
    /// round's `answer_votes` right after the seqno finished. The vote
    /// cast before the leave is the only one: no success vote follows.
    #[test]
    fn a_failed_seqno_never_gets_a_success_vote_from_a_round() {
        use crate::group_input::Input;
        let (mut g, rx) = Inner::linked();
        g.vote_asked(1);
        g.gates.enter_apply(1);
        g.gates.enter_commit(1);
        let cast = g
            .vote_failure(1, b"Error_code: 1051;")
            .expect("a group to vote in");
        g.leave_commit(1).unwrap();
        g.leave_apply(1).unwrap();
        assert_eq!(g.last_committed(), 1);
        g.answer_votes();
        let votes: Vec<(i64, u64)> = rx
            .try_iter()
            .filter_map(|i| match i {
                Input::Propose {
                    action: Action::Vote { seqno, digest, .. },
                    ..
                } => Some((seqno, digest)),
                _ => None,
            })
            .collect();
        assert_eq!(votes, [(1, cast.digest)], "one vote, the failure's");
        // Had the round run before the vote was cast, it would have
        // reported success: the case the order above rules out.
        let (mut late, rx) = Inner::linked();
        late.vote_asked(1);
        late.gates.enter_apply(1);
        late.gates.enter_commit(1);
        late.leave_commit(1).unwrap();
        late.leave_apply(1).unwrap();
        late.answer_votes();
        assert!(rx.try_iter().any(|i| matches!(
            i,
            Input::Propose {
                action: Action::Vote { digest: 0, .. },
                ..
            }
        )));
    }

    #[test]
    fn digests_are_stable_and_never_mean_success() {
        let a = error_digest(b"Error_code: 1050; Table 't1' already exists");
        assert_eq!(
            a,
            error_digest(b"Error_code: 1050; Table 't1' already exists")
        );
        assert_ne!(a, error_digest(b"Error_code: 1062; Duplicate entry"));
        assert_ne!(error_digest(b""), 0);
    }
}
