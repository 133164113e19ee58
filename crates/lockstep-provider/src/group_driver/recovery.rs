//! `pc.recovery` in the rounds: a node that starts with a saved view
//! (`gvwstate.dat`) and finds no running primary component exchanges
//! votes with the other restarting members and, when
//! `lockstep_core::group::recovery::decide` says so, founds the primary
//! component again (continuing the history at its own seqno); the others
//! keep asking to join and are added by it. A node that reaches a running
//! primary component simply joins it: running members send no votes, so
//! no vote can outweigh them.

use super::Worker;
use crate::log::{error, info};
use lockstep_core::group::action::CertFingerprint;
use lockstep_core::group::peer::PeerMsg;
use lockstep_core::group::recovery::{decide, Decision, Vote};
use lockstep_core::group::Group;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use wsrep_abi::Uuid;

/// How often a restarting node announces its vote and redials.
const VOTE_EVERY: Duration = Duration::from_millis(500);
/// How often it logs who it still waits for.
const LOG_EVERY: Duration = Duration::from_secs(10);
/// Votes kept (one per member id): more than any saved view names.
const MAX_VOTES: usize = 256;

/// What a restarting node brings to `pc.recovery` (from `gvwstate.dat`).
pub struct RecoveryStart {
    pub vote: Vote,
    /// Group addresses of the saved view's members (and the seeds).
    pub addrs: Vec<String>,
    /// The certificate each member of the saved view was bound to (TLS):
    /// a vote for a member is taken only from a peer presenting it.
    pub certs: HashMap<Uuid, CertFingerprint>,
}

/// The recovery in progress.
pub struct Recovery {
    pub vote: Vote,
    /// Group addresses of the saved view's members (and the seeds).
    pub addrs: Vec<String>,
    /// See [`RecoveryStart::certs`].
    certs: HashMap<Uuid, CertFingerprint>,
    heard: HashMap<Uuid, Vote>,
    last_vote: Option<Instant>,
    last_log: Option<Instant>,
    last_decision: Option<Decision>,
    /// Since when this node has been the one to found (see `drive_recovery`).
    found_since: Option<Instant>,
}

impl Recovery {
    pub fn new(start: RecoveryStart) -> Recovery {
        Recovery {
            vote: start.vote,
            addrs: start.addrs,
            certs: start.certs,
            heard: HashMap::new(),
            last_vote: None,
            last_log: None,
            last_decision: None,
            found_since: None,
        }
    }

    /// A peer's vote; the newest per member counts.
    pub fn heard(&mut self, v: Vote) {
        if self.heard.len() >= MAX_VOTES && !self.heard.contains_key(&v.member) {
            return;
        }
        self.heard.insert(v.member, v);
    }

    /// Why a vote that came on a connection presenting `presented` is
    /// refused, where peers are authenticated (ADR 0014, "Every message
    /// against its sender"): it must come with the certificate its member
    /// was bound to when the view was saved. A vote decides who founds the
    /// component and whom it may pass over, so a forged one could make a
    /// node found without the member that holds the newest commits.
    pub fn refuses(&self, v: &Vote, presented: Option<&CertFingerprint>) -> Option<&'static str> {
        if v.member == self.vote.member {
            return Some("a vote for this node itself");
        }
        if !self.vote.view.contains(&v.member) {
            // Not counted by `decide` anyway; refused to say so.
            return Some("a vote for a member this node's saved view does not name");
        }
        match (self.certs.get(&v.member), presented) {
            (None, _) => Some(
                "the saved view names no certificate for that member, so its vote cannot be \
                 checked (it was saved before the member's binding was ordered); if the \
                 component cannot re-form, bootstrap the most advanced node by hand",
            ),
            (Some(_), None) => Some("a vote without a certificate"),
            (Some(bound), Some(p)) if bound != p => {
                Some("a vote for a member whose certificate the connection does not present")
            }
            _ => None,
        }
    }
}

impl Worker {
    /// One step of the recovery: announce, decide, and found if chosen.
    /// A member that lost the primary component takes part in
    /// `pc.recovery` too: if every member of its last primary view turns
    /// out to be restarting or cut off alike (nobody runs a primary
    /// component any more), the most advanced one re-forms it. While some
    /// member still runs one, nobody gets its vote and nothing happens.
    pub(super) fn start_member_recovery(&mut self, last_ordered: i64) {
        if !self.pc_recovery || self.recovery.is_some() {
            return;
        }
        let Some(view) = &self.last_view else {
            return;
        };
        let bindings = self.group.sequencer().bindings();
        let certs = view
            .members
            .iter()
            .filter_map(|m| Some((Uuid::from_bytes(m.uuid), *bindings.get(&m.raft_id)?)))
            .collect();
        let vote = Vote {
            member: Uuid::from_bytes(self.me.uuid),
            history: Uuid::from_bytes(view.history),
            seqno: last_ordered,
            view_seqno: view.seqno,
            view: view
                .members
                .iter()
                .map(|m| Uuid::from_bytes(m.uuid))
                .collect(),
            // Only a member of the group (in it, without a leader)
            // recovers this way; a restarted node votes from session.rs.
            in_group: true,
        };
        let addrs = view
            .members
            .iter()
            .filter(|m| m.raft_id != self.me.raft_id)
            .map(|m| m.peer_addr.clone())
            .collect();
        self.recovery = Some(Recovery::new(RecoveryStart { vote, addrs, certs }));
    }

    pub(super) fn drive_recovery(&mut self) {
        if self.group.is_member() && self.group.has_leader() {
            if self.recovery.take().is_some() {
                info!("pc.recovery: in a primary component again");
            }
            return;
        }
        let Some(r) = self.recovery.as_mut() else {
            return;
        };
        if r.last_vote.is_some_and(|t| t.elapsed() < VOTE_EVERY) {
            return;
        }
        r.last_vote = Some(Instant::now());
        if let Ok(frame) = PeerMsg::Recovery(r.vote.clone()).to_frame() {
            self.transport.stage_broadcast(&mut self.staged, &frame);
        }
        for a in &r.addrs {
            self.transport.dial(a);
        }
        let heard: Vec<Vote> = r.heard.values().cloned().collect();
        let decision = decide(&r.vote, &heard);
        let changed = r.last_decision.as_ref() != Some(&decision);
        let due = changed || r.last_log.is_none_or(|t| t.elapsed() >= LOG_EVERY);
        if due {
            r.last_log = Some(Instant::now());
        }
        r.last_decision = Some(decision.clone());
        if decision != Decision::Found {
            r.found_since = None;
        }
        match decision {
            Decision::Wait { missing } if due => {
                let missing: Vec<String> = missing.iter().map(ToString::to_string).collect();
                info!(
                    "pc.recovery: waiting for the members of the last primary component to \
                     come back: {} (found {} of them)",
                    missing.join(", "),
                    heard.len() + 1
                );
            }
            Decision::Unknown { members, best } if due => {
                let name = |id: &Uuid| self.member_name(id);
                let unknown: Vec<String> = members.iter().map(name).collect();
                error!(
                    "pc.recovery: every member of the last primary component is back, but {} \
                     cannot tell its position (seqno -1): it may hold commits the others lack, \
                     so nobody re-forms the component without it. On {}: stop mariadbd, run \
                     `mariadbd --wsrep-recover` (or `galera_recovery`) and start it with the \
                     printed position, `--wsrep_start_position=<uuid:seqno>` (the systemd unit \
                     does both); the members then re-form the component by themselves. If it \
                     cannot be recovered, accept losing what only it may hold: on {} (the most \
                     advanced of the others) run SET GLOBAL \
                     wsrep_provider_options='lockstep.force_bootstrap=YES; pc.bootstrap=YES'",
                    unknown.join(", "),
                    unknown.join(", "),
                    name(&best)
                );
            }
            Decision::GroupAlive { in_group, of } if due => info!(
                "pc.recovery: {in_group} of the {of} members of the last primary component are \
                 still in its group, which elects a leader by itself; nobody re-forms it \
                 beside them (that would split the cluster): this node joins it"
            ),
            Decision::Follow(founder) if changed => info!(
                "pc.recovery: member {founder} is the most advanced; joining the primary \
                 component it re-forms"
            ),
            Decision::Found => {
                // A member whose old group has every member back gives Raft
                // the time it needs to elect a leader there (a healed
                // partition re-merges without a new component); only a
                // group that cannot come back (a member restarted under a
                // new identity) is re-formed.
                let since = *r.found_since.get_or_insert_with(Instant::now);
                let member = self.shared.lock().membership.in_group();
                if !member || since.elapsed() >= self.non_primary_after {
                    self.found_again();
                }
            }
            _ => {}
        }
    }

    /// A member of the saved view by name and address, for the log.
    fn member_name(&self, id: &Uuid) -> String {
        self.last_view
            .as_ref()
            .and_then(|v| v.members.iter().find(|m| m.uuid == id.data))
            .map(|m| format!("{} ({}, member {id})", m.name, m.peer_addr))
            .unwrap_or_else(|| format!("member {id}"))
    }

    /// This node re-forms the primary component from its own state.
    fn found_again(&mut self) {
        let Some(r) = self.recovery.as_ref() else {
            return;
        };
        if self.shared.lock().membership.in_group() {
            // A non-primary member: what it has ordered is applied before
            // the new view, as with pc.bootstrap.
            self.bootstrap_here(
                "pc.recovery: every member of the last primary component is back and this \
                 node is the most advanced",
                false,
                super::Founding::AllMembersVoted,
            );
            self.recovery = None;
            return;
        }
        let vote = r.vote.clone();
        if vote.seqno < 0 {
            // Nothing is guessed: founding at an unknown position could
            // drop acknowledged commits or fork the history (issue 34).
            // The node waits, with one connection per peer, and says what
            // to run (at once, then every LOG_EVERY).
            if r.last_log
                .is_some_and(|t| t.elapsed() < Duration::from_millis(100))
            {
                error!(
                    "pc.recovery: this node is the one to re-form the primary component, but it \
                     was started without a position after a crash (seqno -1), so it cannot \
                     tell what its storage engine committed. On every member of the last \
                     primary component, stop mariadbd, run `mariadbd --wsrep-recover` (or \
                     `galera_recovery`), and start it with the printed position: \
                     `--wsrep_start_position=<uuid:seqno>` (the systemd unit does both). The \
                     members then re-form the component by themselves, led by the most \
                     advanced"
                );
            }
            return;
        }
        let now = self.clock_ms();
        match Group::bootstrap(
            self.me.clone(),
            self.config.clone(),
            vote.history.data,
            vote.seqno,
            now,
        ) {
            Ok(group) => {
                info!(
                    "pc.recovery: every member of the last primary component is back and this \
                     node is the most advanced (seqno {}): re-forming the primary component, \
                     history {} continues",
                    vote.seqno, vote.history
                );
                self.group = group;
                self.recovery = None;
            }
            Err(e) => error!("pc.recovery: cannot re-form the primary component: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(b: u8) -> Uuid {
        Uuid::from_bytes([b; 16])
    }

    fn vote(member: u8) -> Vote {
        Vote {
            member: u(member),
            history: u(9),
            seqno: 10,
            view_seqno: 3,
            view: vec![u(1), u(2), u(3)],
            in_group: false,
        }
    }

    /// Node 1 restarts with a saved view naming members 1-3; member 3's
    /// certificate was not bound when the view was saved.
    fn recovery() -> Recovery {
        Recovery::new(RecoveryStart {
            vote: vote(1),
            addrs: vec![],
            certs: [(u(1), [1; 32]), (u(2), [2; 32])].into_iter().collect(),
        })
    }

    #[test]
    fn a_vote_counts_only_with_its_member_s_certificate() {
        let r = recovery();
        assert_eq!(r.refuses(&vote(2), Some(&[2; 32])), None);
        for (v, presented) in [
            (vote(2), Some([7; 32])), // a certificate of the CA, not member 2's
            (vote(2), None),          // plain TCP
            (vote(2), Some([1; 32])), // node 1's own certificate, for another
            (vote(1), Some([1; 32])), // a vote for the receiver itself
            (vote(4), Some([2; 32])), // a member the view does not name
            (vote(3), Some([3; 32])), // no certificate saved for member 3
        ] {
            assert!(
                r.refuses(&v, presented.as_ref()).is_some(),
                "took a vote for {} presented with {presented:?}",
                v.member
            );
        }
    }
}
