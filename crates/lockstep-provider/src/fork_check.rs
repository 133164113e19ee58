//! Whether this node's history is a prefix of the group's, one owned
//! part. A joiner that keeps a writeset cache knows the digests of its own
//! newest events at or before its position; the group's events at those
//! seqnos (replayed from the log, or sent by a donor's cache) must be the
//! same. A difference is a fork: the node then takes a full state
//! transfer instead of an IST on top of other data.

use crate::writeset_cache::WritesetCache;
use lockstep_core::writeset_cache::{event_digest, CachedEvent, CachedKind};
use wsrep_abi::{Gtid, Uuid};

/// This node's history and the group's differ at the same UUID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fork {
    pub detail: String,
    /// The difference is only in views after this node's last writeset,
    /// which the group has too: no commit of this node would be lost by
    /// a full state transfer.
    pub views_only: bool,
}

/// The points still to check, and a fork once found.
#[derive(Debug, Default)]
pub struct ForkCheck {
    /// (seqno, `event_digest`) of this node's own events: the newest
    /// writeset and the newest event at or before its position. Bounded:
    /// two.
    points: Vec<(i64, u32)>,
    /// The seqno of the writeset among `points`, if there is one.
    writeset: Option<i64>,
    fork: Option<Fork>,
}

impl ForkCheck {
    /// The points of a node at `have`, from its writeset cache (none
    /// without one).
    pub fn from_cache(cache: Option<&WritesetCache>, have: Gtid) -> ForkCheck {
        ForkCheck {
            points: cache
                .map(|c| c.check_points(have.uuid, have.seqno))
                .unwrap_or_default(),
            writeset: cache.and_then(|c| c.last_writeset_at(have.uuid, have.seqno)),
            fork: None,
        }
    }

    /// The points still to check (a donor's cache sends its records for
    /// them).
    pub fn points(&self) -> &[(i64, u32)] {
        &self.points
    }

    /// Whether every point has been checked.
    pub fn is_done(&self) -> bool {
        self.points.is_empty()
    }

    /// Compares the group's event at `seqno` of `history` with this
    /// node's own, if `seqno` is a point.
    pub fn check(&mut self, history: [u8; 16], seqno: i64, kind: &CachedKind) {
        let Some(i) = self.points.iter().position(|(at, _)| *at == seqno) else {
            return;
        };
        let (_, own) = self.points.remove(i);
        let theirs = event_digest(&CachedEvent {
            history,
            seqno,
            kind: kind.clone(),
        });
        if theirs != own {
            // Only views of its own after its last writeset, which the
            // group's matched (it was checked first: the log replays in
            // order): a primary component this node formed alone
            // (`pc.ignore_quorum`, a bootstrap of one side). Its data is the
            // group's at that writeset; only its seqnos went another way.
            let views_only =
                Some(seqno) != self.writeset && self.points.iter().all(|(at, _)| *at > seqno);
            self.fork = Some(Fork {
                detail: format!(
                    "the group's event at seqno {seqno} of history {} is not the one this node \
                     committed there (digests {theirs:#010x} and {own:#010x})",
                    Uuid::from_bytes(history)
                ),
                views_only,
            });
        }
    }

    /// A fork found elsewhere (a donor's cache stream).
    pub fn found(&mut self, fork: Fork) {
        self.fork = Some(fork);
    }

    /// The fork found, if any (taken: it is acted on once).
    pub fn take_fork(&mut self) -> Option<Fork> {
        self.fork.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: [u8; 16] = [7; 16];

    fn view(members: u32) -> CachedKind {
        CachedKind::View { members, who: None }
    }

    fn digest(seqno: i64, kind: CachedKind) -> u32 {
        event_digest(&CachedEvent {
            history: H,
            seqno,
            kind,
        })
    }

    #[test]
    fn the_same_event_passes_and_another_one_is_a_fork() {
        let mut c = ForkCheck {
            points: vec![(4, digest(4, view(1))), (6, digest(6, view(2)))],
            writeset: None,
            fork: None,
        };
        c.check(H, 5, &view(9));
        assert_eq!(c.points().len(), 2, "not a point");
        c.check(H, 4, &view(1));
        assert!(c.take_fork().is_none());
        c.check(H, 6, &view(3));
        assert!(c.is_done());
        let fork = c.take_fork().expect("a fork");
        assert!(fork.views_only, "only a view after the last writeset");
        assert!(c.take_fork().is_none(), "taken once");
    }
}
