//! The two levels every ordered seqno passes on this node, one owned
//! part: the commit gate (seqnos that left commit order) and the apply
//! gate (seqnos fully finished: `last_committed`, contract §6.6), with
//! their overlap statistics (`wsrep_apply_*`, `wsrep_commit_*`) and the
//! levels at which turn waiters were last woken.
//!
//! The watermarks are `lockstep_core::gates`'; this part keeps each level
//! beside its statistics so that a seqno marked is always counted.

use lockstep_core::gates::{GateStats, OrderError, Watermark};

#[derive(Debug)]
pub struct OrderGates {
    finished: Watermark,
    commit: Watermark,
    /// How the apply gate (enter: dependencies met; leave: `finished`)
    /// and the commit gate overlapped.
    apply_stats: GateStats,
    commit_stats: GateStats,
    /// `(commit, finished)` when turn waiters were last woken
    /// ([`OrderGates::turns_passed`]).
    told: (i64, i64),
}

impl OrderGates {
    /// Both gates at `level`: everything up to it is done.
    pub fn new(level: i64) -> OrderGates {
        OrderGates {
            finished: Watermark::new(level),
            commit: Watermark::new(level),
            apply_stats: GateStats::default(),
            commit_stats: GateStats::default(),
            told: (level, level),
        }
    }

    /// The node's state is now at `level` (a state transfer, a new
    /// session): both gates stand there.
    pub fn reset(&mut self, level: i64) {
        self.finished.reset(level);
        self.commit.reset(level);
    }

    /// `last_committed` as the contract defines it: everything finished.
    pub fn last_committed(&self) -> i64 {
        self.finished.level()
    }

    /// Every seqno up to this one has left commit order.
    pub fn commit_level(&self) -> i64 {
        self.commit.level()
    }

    /// The commit gate itself, for what reads its seqnos ahead of the
    /// level (the bypass behind a large writeset, ADR 0011).
    pub fn commit(&self) -> &Watermark {
        &self.commit
    }

    /// An applier picked up `seqno`; it waits for its dependencies.
    pub fn arrive_apply(&mut self, seqno: i64) {
        self.apply_stats.arrived(seqno);
    }

    /// `seqno` starts applying: its dependencies have finished.
    pub fn enter_apply(&mut self, seqno: i64) {
        self.apply_stats.entered(seqno, self.finished.level());
    }

    /// `seqno` enters commit order: everything before it has committed.
    pub fn enter_commit(&mut self, seqno: i64) {
        self.commit_stats.entered(seqno, self.commit.level());
    }

    /// `seqno` leaves commit order; the commit level after it.
    pub fn leave_commit(&mut self, seqno: i64) -> Result<i64, OrderError> {
        self.commit.mark(seqno)?;
        let level = self.commit.level();
        self.commit_stats.left(seqno, level);
        Ok(level)
    }

    /// `seqno` is finished (applied or rolled back, and committed); the
    /// apply level after it.
    pub fn leave_apply(&mut self, seqno: i64) -> Result<i64, OrderError> {
        self.finished.mark(seqno)?;
        let level = self.finished.level();
        self.apply_stats.left(seqno, level);
        Ok(level)
    }

    /// The levels the commit and apply gates passed since the last call,
    /// as `(from, to)`: whose turn waiters (`Wake::Turn`) to wake.
    pub fn turns_passed(&mut self) -> [(i64, i64); 2] {
        let now = (self.commit.level(), self.finished.level());
        let was = std::mem::replace(&mut self.told, now);
        [(was.0, now.0), (was.1, now.1)]
    }

    pub fn apply_stats(&self) -> &GateStats {
        &self.apply_stats
    }

    pub fn commit_stats(&self) -> &GateStats {
        &self.commit_stats
    }

    /// `FLUSH STATUS`.
    pub fn reset_stats(&mut self) {
        self.apply_stats.reset();
        self.commit_stats.reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_passed_covers_each_level_once() {
        let mut g = OrderGates::new(4);
        assert_eq!(g.turns_passed(), [(4, 4), (4, 4)]);
        g.enter_commit(5);
        assert_eq!(g.leave_commit(5), Ok(5));
        assert_eq!(g.turns_passed(), [(4, 5), (4, 4)]);
        assert_eq!(g.leave_apply(6), Ok(4), "6 waits for 5");
        assert_eq!(g.leave_apply(5), Ok(6));
        assert_eq!(g.last_committed(), 6);
        assert_eq!(g.turns_passed(), [(5, 5), (4, 6)]);
        assert!(g.leave_apply(6).is_err(), "a seqno finishes once");
    }
}
