//! Who may send what (ADR 0014, "Every message against its sender"). The
//! transport binds a connection to the Raft id its certificate is bound
//! to; the caller passes that id as `from`. These rules then make sure a
//! message acts only for `from`:
//!
//! - a Raft message is `from`'s own (the caller checks `msg.from == from`);
//! - the leader takes a proposal only if every action in it names `from`
//!   as its origin: the sequencer trusts `Proposal::origin` for the
//!   actions a member may take only for itself (`Bind`, `Weight`, `Vote`,
//!   `Remerge`, flow control), so a member must not propose under
//!   another's id;
//! - a relayed message (`PeerMsg::Relayed`, ADR 0020) carries nothing
//!   that proves its original sender, so where peers are authenticated
//!   (`GroupConfig::checked_senders`) there are no relays: the leader
//!   sends every append directly and a relayed message is refused.
//!   Elsewhere one is taken only as what a relay may pass on: another
//!   node's append.
//!
//! Not here: a member refuses Raft messages from outside its configuration
//! only while it hears from its leader (`Group::ignores_stranger`). A node
//! that catches up applies an old configuration, so it cannot tell a
//! member that joined since from a stranger; refusing them all stalled
//! joiners and lagging followers in the simulations.
//!
//! Every refusal is counted and kept for the caller's log (bounded).

use super::Group;
use crate::group::action::decode_batch_shared;
use raft::eraftpb::{EntryType, Message, MessageType};

/// Refusals kept between two `take_refusals` calls; more are only counted.
const MAX_KEPT: usize = 64;

/// A message refused because of its sender.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The connection's (bound) Raft id.
    pub from: u64,
    /// The message, e.g. "Raft MsgAppend", "relayed MsgAppend".
    pub what: String,
    /// Why, for an operator.
    pub why: &'static str,
}

#[derive(Debug, Default)]
pub(super) struct Refusals {
    kept: Vec<Refusal>,
    /// Refused in all, since the start.
    total: u64,
}

impl Group {
    /// A leader's Raft message passed on by `from`, a relay in this node's
    /// segment (`PeerMsg::Relayed`).
    pub fn step_relayed(&mut self, from: u64, msg: Message) {
        let why = if self.cfg.checked_senders {
            Some(
                "relays are off where peers are authenticated: a relayed message cannot show who \
                 first sent it",
            )
        } else if msg.get_msg_type() != MessageType::MsgAppend {
            Some("only appends are relayed")
        } else if msg.from == self.me.raft_id || msg.from == from {
            Some("a relay passes on the leader's messages, not its own")
        } else {
            None
        };
        match why {
            Some(why) => self.refuse(from, &msg, "relayed", why),
            None => self.step(msg),
        }
    }

    /// Leader: whether every proposal in a follower's forwarded entries
    /// names `msg.from` as its origin. Entries that do not decode are left
    /// to the sequencer, which skips them on every node alike. A forwarded
    /// configuration change (a member admits a joiner whose request
    /// reached it, or removes itself on leaving) passes: it cannot rebind a
    /// member, since the sequencer ignores the admission of a member.
    pub(super) fn proposals_are_senders_own(&self, msg: &Message) -> bool {
        msg.entries.iter().all(|e| {
            e.get_entry_type() != EntryType::EntryNormal
                || e.data.is_empty()
                || decode_batch_shared(&e.data)
                    .map_or(true, |batch| batch.iter().all(|p| p.origin == msg.from))
        })
    }

    pub(super) fn refuse(&mut self, from: u64, msg: &Message, how: &str, why: &'static str) {
        self.refusals.total += 1;
        if self.refusals.kept.len() < MAX_KEPT {
            self.refusals.kept.push(Refusal {
                from,
                what: format!(
                    "{how} {:?} (claims sender {:#x})",
                    msg.get_msg_type(),
                    msg.from
                ),
                why,
            });
        }
    }

    /// The refusals since the last call, for the log (at most `MAX_KEPT`).
    pub fn take_refusals(&mut self) -> Vec<Refusal> {
        std::mem::take(&mut self.refusals.kept)
    }

    /// Messages refused because of their sender, since the start.
    pub fn refused_total(&self) -> u64 {
        self.refusals.total
    }
}
