//! The registry of this node's local transactions and TOI statements, one
//! owned part: where each transaction is in its life as other threads see
//! it (`TrxState`), changed only by the transitions below. A BF abort from
//! another thread and the transaction's own thread meet here, under the
//! provider's lock, so each transition is one method that checks the
//! state it starts from.
//!
//! Bound: one record per transaction object the server holds (one per
//! client connection in a transaction), one TOI per connection.

use crate::trx::{TrxRecord, TrxState};
use std::collections::HashMap;

/// What certification made of a local transaction ([`LocalTrxs::ordered`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Certified {
    /// It passed: on to commit order.
    Passed,
    /// It failed certification; its seqno still passes the gates.
    Failed,
    /// A BF abort came while it was in flight: it keeps its seqno and
    /// replays (contract §2.11).
    MustReplay,
    /// A BF-aborted open streaming fragment: it cannot replay, it fails
    /// (the server rolls the streaming transaction back everywhere).
    AbortedFragment,
}

/// Why a transaction may not enter commit order ([`LocalTrxs::enter_commit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoCommit {
    /// Not registered.
    Missing,
    /// BF-aborted after ordering: it replays (`BF_ABORT`).
    Replay,
    /// A BF-aborted open fragment: it fails (`TRX_FAIL`).
    Fail,
}

/// What a BF abort did to its victim ([`LocalTrxs::bf_abort`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BfAbort {
    /// The victim's seqno (-1: not ordered, or not registered).
    pub seqno: i64,
    /// `false`: the victim is ahead of the aborter in total order, already
    /// aborting, or inside commit order; it finishes first.
    pub allowed: bool,
}

/// Why a replay cannot start ([`LocalTrxs::start_replay`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoReplay {
    /// It failed certification: nothing to replay.
    CertFailed,
    /// It was not BF-aborted after ordering.
    NotWaiting,
}

#[derive(Debug, Default)]
pub struct LocalTrxs {
    trxs: HashMap<u64, TrxRecord>,
    /// Local TOI in progress: its seqno, by connection id.
    toi: HashMap<u64, i64>,
}

impl LocalTrxs {
    /// A new local transaction object: registered so BF aborts find it.
    pub fn begin(&mut self, trx_id: u64) {
        self.trxs.insert(trx_id, TrxRecord::new());
    }

    /// Whether `trx_id` was BF-aborted (or is gone) before it replicated:
    /// a wait before replication ends for it.
    pub fn aborted_before_replicating(&self, trx_id: u64) -> bool {
        self.trxs
            .get(&trx_id)
            .is_none_or(|r| r.state != TrxState::Executing)
    }

    /// `trx_id` goes to the group; `false` if it was BF-aborted first
    /// (it must never replicate).
    pub fn start_replicating(&mut self, trx_id: u64, open_fragment: bool) -> bool {
        match self.trxs.get_mut(&trx_id) {
            Some(rec) if rec.state == TrxState::Executing => {
                rec.state = TrxState::Replicating;
                rec.open_fragment = open_fragment;
                true
            }
            _ => false,
        }
    }

    /// `trx_id` was not ordered (the node left the group first).
    pub fn not_ordered(&mut self, trx_id: u64) {
        if let Some(rec) = self.trxs.get_mut(&trx_id) {
            rec.state = TrxState::MustAbort;
        }
    }

    /// `trx_id` was ordered at `seqno`, after `depends_on`, and `passed`
    /// certification or not. `None` if it is not registered.
    pub fn ordered(
        &mut self,
        trx_id: u64,
        seqno: i64,
        depends_on: i64,
        passed: bool,
    ) -> Option<Certified> {
        let rec = self.trxs.get_mut(&trx_id)?;
        rec.seqno = seqno;
        rec.depends_on = depends_on;
        let bf_aborted = rec.state == TrxState::MustAbort;
        Some(if !passed {
            rec.state = TrxState::CertFailed;
            Certified::Failed
        } else if bf_aborted && rec.open_fragment {
            // Its seqno passes the gates at `release`.
            Certified::AbortedFragment
        } else if bf_aborted {
            rec.state = TrxState::MustReplay;
            Certified::MustReplay
        } else {
            rec.state = TrxState::Certified;
            Certified::Passed
        })
    }

    /// What `trx_id` depends on, once ordered.
    pub fn depends_on(&self, trx_id: u64) -> Option<i64> {
        self.trxs.get(&trx_id).map(|r| r.depends_on)
    }

    /// Whether `trx_id` was BF-aborted after ordering (its commit-order
    /// wait ends: it replays).
    pub fn must_replay(&self, trx_id: u64) -> bool {
        self.trxs
            .get(&trx_id)
            .is_some_and(|r| r.state == TrxState::MustReplay)
    }

    /// `trx_id`'s turn in commit order came: it enters, unless a BF abort
    /// came first (a final writeset replays; an open streaming fragment
    /// fails, contract §2.12, as Galera does).
    pub fn enter_commit(&mut self, trx_id: u64) -> Result<(), NoCommit> {
        let rec = self.trxs.get_mut(&trx_id).ok_or(NoCommit::Missing)?;
        if rec.state == TrxState::MustReplay {
            return Err(if rec.open_fragment {
                rec.state = TrxState::MustAbort;
                NoCommit::Fail
            } else {
                NoCommit::Replay
            });
        }
        if rec.state == TrxState::Certified {
            rec.state = TrxState::Committing;
        }
        Ok(())
    }

    /// `trx_id` left commit order.
    pub fn left_commit(&mut self, trx_id: u64) {
        if let Some(rec) = self.trxs.get_mut(&trx_id) {
            rec.commit_left = true;
        }
    }

    /// `trx_id` is released: its record goes (the caller finishes its
    /// seqno).
    pub fn release(&mut self, trx_id: u64) -> Option<TrxRecord> {
        self.trxs.remove(&trx_id)
    }

    /// A streaming transaction's next fragment starts with a new record
    /// under the same id.
    pub fn next_fragment(&mut self, trx_id: u64) {
        self.begin(trx_id);
    }

    /// The server rolls back streaming transaction `trx_id` (contract
    /// §2.17): a fragment not ordered yet must not replicate.
    pub fn rolled_back(&mut self, trx_id: u64) {
        if let Some(rec) = self.trxs.get_mut(&trx_id) {
            if matches!(rec.state, TrxState::Executing | TrxState::Replicating) {
                rec.state = TrxState::MustAbort;
            }
        }
    }

    /// A writeset ordered at `bf_seqno` needs `victim`'s locks.
    pub fn bf_abort(&mut self, victim: u64, bf_seqno: i64) -> BfAbort {
        let Some(rec) = self.trxs.get_mut(&victim) else {
            return BfAbort {
                seqno: -1,
                allowed: true,
            };
        };
        let allowed = match rec.state {
            TrxState::Executing | TrxState::Replicating => {
                rec.state = TrxState::MustAbort;
                true
            }
            // An open streaming fragment never commits the transaction, so
            // it holds nothing the aborter must wait for: it fails wherever
            // it is (contract §2.16, "not TRX_END"). Inside commit order the
            // abort is deferred to `release`.
            TrxState::Certified if rec.open_fragment || rec.seqno > bf_seqno => {
                rec.state = TrxState::MustReplay;
                true
            }
            TrxState::Committing if rec.open_fragment => {
                rec.state = TrxState::MustAbort;
                true
            }
            // Ahead of the aborter in total order, already aborting, or
            // inside commit order: it will finish first.
            _ => false,
        };
        BfAbort {
            seqno: rec.seqno,
            allowed,
        }
    }

    /// The replay of BF-aborted `trx_id` starts: its seqno and what it
    /// depends on.
    pub fn start_replay(&mut self, trx_id: u64) -> Result<(i64, i64), NoReplay> {
        match self.trxs.get_mut(&trx_id) {
            Some(rec) if rec.state == TrxState::MustReplay => {
                rec.state = TrxState::Replaying;
                Ok((rec.seqno, rec.depends_on))
            }
            Some(rec) if rec.state == TrxState::CertFailed => Err(NoReplay::CertFailed),
            _ => Err(NoReplay::NotWaiting),
        }
    }

    /// The seqnos of local transactions ordered and not released yet.
    pub fn unreleased_seqnos(&self) -> Vec<i64> {
        self.trxs
            .values()
            .map(|r| r.seqno)
            .filter(|s| *s >= 0)
            .collect()
    }

    /// Whether `trx_id` is registered.
    #[cfg(test)]
    pub fn contains(&self, trx_id: u64) -> bool {
        self.trxs.contains_key(&trx_id)
    }

    /// `wsrep_open_transactions`.
    pub fn open(&self) -> usize {
        self.trxs.len()
    }

    /// A TOI statement of connection `conn_id` runs at `seqno`.
    pub fn start_toi(&mut self, conn_id: u64, seqno: i64) {
        self.toi.insert(conn_id, seqno);
    }

    /// The TOI statement of `conn_id` ended: its seqno.
    pub fn end_toi(&mut self, conn_id: u64) -> Option<i64> {
        self.toi.remove(&conn_id)
    }

    /// TOI statements running (`wsrep_open_connections`).
    pub fn open_tois(&self) -> usize {
        self.toi.len()
    }

    /// The session ended: every record goes.
    pub fn clear(&mut self) {
        self.trxs.clear();
        self.toi.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_abort_before_ordering_means_replay_once_ordered() {
        let mut t = LocalTrxs::default();
        t.begin(1);
        assert!(t.start_replicating(1, false));
        let abort = t.bf_abort(1, 5);
        assert_eq!(
            abort,
            BfAbort {
                seqno: -1,
                allowed: true
            }
        );
        assert_eq!(t.ordered(1, 7, 6, true), Some(Certified::MustReplay));
        assert!(t.must_replay(1));
        assert_eq!(t.enter_commit(1), Err(NoCommit::Replay));
        assert_eq!(t.start_replay(1), Ok((7, 6)));
        assert_eq!(t.start_replay(1), Err(NoReplay::NotWaiting), "once");
    }

    #[test]
    fn an_aborted_transaction_never_replicates() {
        let mut t = LocalTrxs::default();
        t.begin(1);
        assert!(!t.aborted_before_replicating(1));
        assert!(t.bf_abort(1, 3).allowed);
        assert!(t.aborted_before_replicating(1));
        assert!(!t.start_replicating(1, false));
        assert!(!t.start_replicating(9, false), "unknown");
    }

    #[test]
    fn a_transaction_ahead_of_the_aborter_or_committing_finishes_first() {
        let mut t = LocalTrxs::default();
        t.begin(1);
        t.start_replicating(1, false);
        assert_eq!(t.ordered(1, 4, 3, true), Some(Certified::Passed));
        assert!(!t.bf_abort(1, 9).allowed, "ordered before the aborter");
        assert!(t.bf_abort(1, 2).allowed, "ordered after it");
        t.begin(2);
        t.start_replicating(2, false);
        t.ordered(2, 5, 4, true);
        assert_eq!(t.enter_commit(2), Ok(()));
        assert_eq!(
            t.bf_abort(2, 1),
            BfAbort {
                seqno: 5,
                allowed: false
            }
        );
        t.left_commit(2);
        let rec = t.release(2).unwrap();
        assert!(rec.commit_left && rec.state == TrxState::Committing);
        assert_eq!(t.unreleased_seqnos(), [4]);
    }

    #[test]
    fn an_open_fragment_fails_instead_of_replaying() {
        let mut t = LocalTrxs::default();
        t.begin(1);
        t.start_replicating(1, true);
        t.ordered(1, 4, 3, true);
        assert!(t.bf_abort(1, 9).allowed, "a fragment holds nothing back");
        assert_eq!(t.enter_commit(1), Err(NoCommit::Fail));
        t.begin(2);
        t.start_replicating(2, true);
        t.bf_abort(2, 1);
        assert_eq!(t.ordered(2, 6, 5, true), Some(Certified::AbortedFragment));
        t.rolled_back(3);
        t.start_toi(7, 8);
        assert_eq!((t.open(), t.open_tois()), (2, 1));
        assert_eq!(t.end_toi(7), Some(8));
        t.clear();
        assert_eq!((t.open(), t.open_tois()), (0, 0));
    }
}
