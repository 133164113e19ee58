//! When a node may found a primary component alone (`pc.bootstrap=YES`
//! on a survivor, or the weighted quorum after its peers went silent)
//! without dropping an acknowledged commit or making a second primary
//! (issue 34 item 4, ADR 0027).
//!
//! Raft commits an entry once a majority of voters stored it, so a
//! survivor may lack entries that the others committed and acknowledged.
//! A node holds every committed entry in two cases only:
//! - it led the group last (Raft's leader completeness: a leader holds
//!   every entry committed before and during its term);
//! - commits need it ([`commits_need_me`]): it votes, at most one other
//!   member votes, and no configuration change is in flight.
//!
//! The weighted quorum's shortcut asks for more ([`in_every_quorum`]):
//! the others, alive on the other side of a cut, must not be able to
//! elect a leader without it in any configuration they may still count
//! with, so it also waits until every member reported applying the last
//! change. Then a weight change never leaves two primaries at any step.

use super::Group;
use raft::StateRole;

/// Why a node holds every entry its group committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldsAll {
    /// It led the group last.
    Led,
    /// No entry commits without it storing it (`commits_need_me`).
    CommitsNeedIt,
    /// It never was a member: it continues after what it committed
    /// itself (its position is the server's).
    NeverMember,
}

/// A node that may lack committed entries, and who holds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MayLack {
    /// The last leader this node knew (`None`: it never knew one), which
    /// holds every entry committed up to when this node lost it.
    pub leader: Option<u64>,
    /// Voters of this node's configuration.
    pub voters: usize,
    /// A configuration change was in flight (it may add a voter).
    pub change_in_flight: bool,
}

/// The configuration as one node sees it, for [`in_every_quorum`].
#[derive(Debug, Clone)]
pub struct QuorumView<'a> {
    pub me: u64,
    pub voters: &'a [u64],
    /// Outgoing voters present (a joint configuration).
    pub joint: bool,
    /// A configuration change is stored or proposed above the applied
    /// index: the group may already count with the changed one.
    pub change_pending: bool,
    /// Some member has not reported applying the last configuration
    /// change applied here: it may still count with the one before.
    pub others_behind: bool,
}

/// Every quorum of every configuration the members may count with
/// includes `me`: it votes, at most one other member votes (two voters
/// need both), no change is in flight, and every member has applied the
/// last one. Raft applies a change when it applies its entry, so members
/// count with different configurations for a while: a change pending
/// could give the others a quorum without `me` (a third voter added), and
/// a member that has not applied the last change (a demotion) may still
/// win an election with the voters before it. A later configuration
/// cannot commit without `me` storing it, so one stored here is all
/// there is to check.
pub fn in_every_quorum(v: &QuorumView<'_>) -> bool {
    commits_need_me(v) && !v.others_behind
}

/// No entry commits without `me` storing it: it votes, at most one other
/// member votes, and no change is stored or proposed that could add a
/// voter. Unlike [`in_every_quorum`] this does not wait for the other
/// members to apply the last change: in a configuration of two voters
/// the other one leads (a leader hands over before it leaves), and a
/// leader applies a change before anyone. Whether the others could
/// still elect a leader of their own does not matter here: a survivor
/// founds after the others died, and `pc.bootstrap` beside a running
/// primary component is a split brain the operator asked for.
pub fn commits_need_me(v: &QuorumView<'_>) -> bool {
    !v.joint && !v.change_pending && v.voters.contains(&v.me) && v.voters.len() <= 2
}

/// Whether a node holds every committed entry (see the module comment).
pub fn holds_every_commit(
    v: &QuorumView<'_>,
    last_leader: Option<u64>,
    was_member: bool,
) -> Result<HoldsAll, MayLack> {
    if !was_member {
        return Ok(HoldsAll::NeverMember);
    }
    if last_leader == Some(v.me) {
        return Ok(HoldsAll::Led);
    }
    if commits_need_me(v) {
        return Ok(HoldsAll::CommitsNeedIt);
    }
    Err(MayLack {
        leader: last_leader,
        voters: v.voters.len(),
        change_in_flight: v.change_pending || v.joint,
    })
}

impl Group {
    /// This node's configuration, for the rules above.
    fn with_quorum_view<T>(&self, f: impl FnOnce(&QuorumView<'_>) -> T) -> T {
        let raft = &self.raw.raft;
        let conf = raft.prs().conf().to_conf_state();
        let applied = raft.raft_log.applied;
        let change_pending = raft.pending_conf_index > applied
            || self.follower_commit.pending_above(applied).is_some();
        f(&QuorumView {
            me: self.me.raft_id,
            voters: &conf.voters,
            joint: !conf.voters_outgoing.is_empty(),
            change_pending,
            others_behind: self.seq.compactable_index() < self.conf_applied_at,
        })
    }

    /// Whether every quorum of this node's configuration includes it.
    pub fn in_every_quorum(&self) -> bool {
        self.with_quorum_view(in_every_quorum)
    }

    /// Whether the members' recorded `pc.weight`s are in force: the
    /// voters are the ones the weights ask for (`wanted_voters`), no
    /// change is in flight, and every member has applied the last one.
    /// Until then a cut may still be decided by the configuration before
    /// the change, so `SET GLOBAL wsrep_provider_options='pc.weight=N'`
    /// waits for this (bounded) before it returns.
    pub fn weights_in_force(&self) -> bool {
        let mut wanted = super::wanted_voters(self.seq.members());
        wanted.sort_unstable();
        self.with_quorum_view(|v| {
            let mut voters = v.voters.to_vec();
            voters.sort_unstable();
            voters == wanted && !v.joint && !v.change_pending && !v.others_behind
        })
    }

    /// Whether this node holds every entry its group committed, so that
    /// founding a primary component from it drops no acknowledged commit.
    pub fn holds_every_commit(&self) -> Result<HoldsAll, MayLack> {
        let last_leader = self.last_leader;
        let was_member = self.was_member;
        self.with_quorum_view(|v| holds_every_commit(v, last_leader, was_member))
    }

    /// The weighted quorum's shortcut: this node holds more than half of
    /// the members' `pc.weight`, so alone it is a primary component as
    /// with Galera, and the other voters cannot elect a leader without it
    /// (so the shortcut never makes a second primary).
    pub fn stands_alone_by_weight(&self) -> bool {
        let me = self.me.raft_id;
        super::weight_majority(self.seq.members()).is_some_and(|m| m.info.raft_id == me)
            && self.in_every_quorum()
    }

    /// Before founding alone from a node that holds every commit: commits
    /// what it stored, as Raft does when a node becomes leader (an entry
    /// it stored may have been acknowledged elsewhere before this node
    /// learned it committed), and releases what the read gate held (the
    /// old group's leases end with it). The entries come out of the next
    /// [`Group::poll`]. Does nothing where the node may lack entries.
    pub fn commit_stored(&mut self) {
        if self.holds_every_commit().is_err() || self.failed || self.retired {
            return;
        }
        let log = &self.raw.raft.raft_log;
        let stored = log.persisted.min(log.last_index());
        if stored > log.committed && self.raw.raft.state != StateRole::Leader {
            self.raw.raft.raft_log.commit_to(stored);
        }
        self.release_all_held();
    }

    /// Raft index of the last configuration change applied here. Members
    /// report applying it soon (`Action::Committed`), which closes the
    /// window where some may count with the configuration before.
    pub fn conf_applied_at(&self) -> u64 {
        self.conf_applied_at
    }

    /// Notes the leader this node knows, each round.
    pub(super) fn note_leader(&mut self) {
        let leader = self.raw.raft.leader_id;
        if leader != raft::INVALID_ID {
            self.last_leader = Some(leader);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(me: u64, voters: &[u64]) -> QuorumView<'_> {
        QuorumView {
            me,
            voters,
            joint: false,
            change_pending: false,
            others_behind: false,
        }
    }

    #[test]
    fn only_a_voter_of_at_most_two_is_in_every_quorum() {
        assert!(in_every_quorum(&view(1, &[1])));
        assert!(in_every_quorum(&view(1, &[1, 2])));
        assert!(
            !in_every_quorum(&view(1, &[1, 2, 3])),
            "2 and 3 are a quorum"
        );
        assert!(!in_every_quorum(&view(3, &[1, 2])), "a learner");
        let mut v = view(1, &[1, 2]);
        v.change_pending = true;
        assert!(!in_every_quorum(&v), "a third voter may be on its way");
        let mut v = view(1, &[1, 2]);
        v.joint = true;
        assert!(!in_every_quorum(&v));
        let mut v = view(1, &[1, 2]);
        v.others_behind = true;
        assert!(
            !in_every_quorum(&v),
            "a member may still count the third voter"
        );
    }

    #[test]
    fn a_follower_of_three_may_lack_commits_and_names_the_leader() {
        let v = view(2, &[1, 2, 3]);
        assert_eq!(
            holds_every_commit(&v, Some(1), true),
            Err(MayLack {
                leader: Some(1),
                voters: 3,
                change_in_flight: false,
            })
        );
        assert_eq!(holds_every_commit(&v, Some(2), true), Ok(HoldsAll::Led));
        assert_eq!(
            holds_every_commit(&v, None, false),
            Ok(HoldsAll::NeverMember)
        );
        assert_eq!(
            holds_every_commit(&view(2, &[1, 2]), Some(1), true),
            Ok(HoldsAll::CommitsNeedIt)
        );
        let mut v = view(2, &[1, 2]);
        v.others_behind = true;
        assert_eq!(
            holds_every_commit(&v, Some(1), true),
            Ok(HoldsAll::CommitsNeedIt),
            "commits need it whatever the others applied"
        );
        v.change_pending = true;
        assert!(holds_every_commit(&v, Some(1), true).is_err());
    }
}
