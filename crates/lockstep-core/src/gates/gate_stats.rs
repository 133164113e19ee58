//! Statistics of an ordering gate, as Galera reports them for its apply
//! and commit monitors (`wsrep_apply_oooe`, `_oool`, `_window`, and the
//! `commit_` trio).
//!
//! A gate is entered by seqnos in any order their dependencies allow and
//! left in any order; its level (the [`super::Watermark`]) is the
//! contiguous prefix that has left. Three ratios describe how much the
//! gate overlapped work, per entered seqno:
//! - **oooe** (out-of-order enter): a seqno entered while a lower one had
//!   not left yet, i.e. it ran in parallel with something before it;
//! - **oool** (out-of-order leave): a seqno's leave closed a gap and so
//!   released higher seqnos that had left before it;
//! - **window**: the mean distance, at each enter, between the highest
//!   seqno that has *arrived* at the gate (it may still wait for its
//!   dependencies) and the level: how many seqnos were in flight.
//!
//! With one applier oooe and oool are 0 and the window is 1; with several
//! appliers on dependent work oooe stays 0 while the window grows with the
//! appliers waiting at the gate (Galera counts the same way).

/// Counters of one gate since the last reset. Pure bookkeeping: the caller
/// reports enters and leaves together with the gate level it observed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GateStats {
    entered: u64,
    oooe: u64,
    oool: u64,
    window_sum: u64,
    last_entered: i64,
}

impl GateStats {
    /// `seqno` reached the gate; it enters once its dependencies allow.
    pub fn arrived(&mut self, seqno: i64) {
        self.last_entered = self.last_entered.max(seqno);
    }

    /// `seqno` entered the gate while the gate's level was `level`.
    pub fn entered(&mut self, seqno: i64, level: i64) {
        self.entered += 1;
        if level + 1 < seqno {
            self.oooe += 1;
        }
        self.arrived(seqno);
        self.window_sum += self.last_entered.saturating_sub(level).max(0) as u64;
    }

    /// `seqno` left the gate and the level became `level_after`. A level
    /// beyond `seqno` means this leave released seqnos that had left
    /// before it. Leaves of seqnos that never entered (rolled back before
    /// reaching the gate) count too: they release the same way.
    pub fn left(&mut self, seqno: i64, level_after: i64) {
        if level_after > seqno {
            self.oool += 1;
        }
    }

    /// Seqnos entered since the last reset.
    pub fn entered_count(&self) -> u64 {
        self.entered
    }

    /// Fraction of enters that overtook a seqno still in the gate.
    pub fn oooe(&self) -> f64 {
        ratio(self.oooe, self.entered)
    }

    /// Fraction of enters whose leave released later seqnos.
    pub fn oool(&self) -> f64 {
        ratio(self.oool, self.entered)
    }

    /// Mean number of seqnos in flight at each enter.
    pub fn window(&self) -> f64 {
        ratio(self.window_sum, self.entered)
    }

    /// `FLUSH STATUS`: starts the averages over, keeping the high mark of
    /// entered seqnos (it describes the gate, not the period).
    pub fn reset(&mut self) {
        *self = GateStats {
            last_entered: self.last_entered,
            ..GateStats::default()
        };
    }
}

fn ratio(n: u64, d: u64) -> f64 {
    if d == 0 {
        0.0
    } else {
        n as f64 / d as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gates::Watermark;

    /// Drives a gate: `script` is a list of enters (+s) and leaves (-s).
    fn run(start: i64, script: &[i64]) -> GateStats {
        let mut gate = Watermark::new(start);
        let mut stats = GateStats::default();
        for &step in script {
            if step > 0 {
                stats.entered(step, gate.level());
            } else {
                gate.mark(-step).unwrap();
                stats.left(-step, gate.level());
            }
        }
        stats
    }

    #[test]
    fn serial_work_is_in_order_with_a_window_of_one() {
        let s = run(0, &[1, -1, 2, -2, 3, -3]);
        assert_eq!(s.entered_count(), 3);
        assert_eq!((s.oooe(), s.oool(), s.window()), (0.0, 0.0, 1.0));
    }

    #[test]
    fn parallel_enters_overtake_and_widen_the_window() {
        // 1, 2, 3 all enter before any leaves; 3 leaves first, then 2,
        // then 1 releases both.
        let s = run(0, &[1, 2, 3, -3, -2, -1]);
        assert_eq!(s.entered_count(), 3);
        assert!((s.oooe() - 2.0 / 3.0).abs() < 1e-9, "{}", s.oooe());
        assert!((s.oool() - 1.0 / 3.0).abs() < 1e-9, "{}", s.oool());
        assert!((s.window() - 2.0).abs() < 1e-9, "{}", s.window()); // (1+2+3)/3
    }

    #[test]
    fn waiting_arrivals_widen_the_window_but_enter_in_order() {
        // 1, 2, 3 arrive together; each enters only after its predecessor
        // left (dependent work on three appliers).
        let mut gate = Watermark::new(0);
        let mut s = GateStats::default();
        for seqno in 1..=3 {
            s.arrived(seqno);
        }
        for seqno in 1..=3 {
            s.entered(seqno, gate.level());
            gate.mark(seqno).unwrap();
            s.left(seqno, gate.level());
        }
        assert_eq!((s.oooe(), s.oool()), (0.0, 0.0));
        assert!((s.window() - 2.0).abs() < 1e-9, "{}", s.window()); // (3+2+1)/3
    }

    #[test]
    fn a_seqno_that_never_entered_still_releases_on_leave() {
        // 2 enters and leaves while 1 (rolled back) never entered; 1's
        // leave releases 2.
        let s = run(0, &[2, -2, -1]);
        assert_eq!(s.entered_count(), 1);
        assert_eq!(s.oooe(), 1.0);
        assert_eq!(s.oool(), 1.0);
    }

    use proptest::prelude::*;

    proptest! {
        /// Any schedule of parallel appliers: seqnos arrive in order, each
        /// enters once the seqnos it depends on have left, and leaves in
        /// any order the schedule picks. The ratios stay within [0, 1],
        /// the window is at least 1, and work whose every seqno depends on
        /// its predecessor never counts as out of order.
        #[test]
        fn ratios_are_bounded_and_serial_work_is_in_order(
            deps in proptest::collection::vec(0usize..4, 1..40),
            picks in proptest::collection::vec(any::<prop::sample::Index>(), 200),
        ) {
            let n = deps.len() as i64;
            // seqno s (1-based) depends on s - 1 - deps[s-1] (0 = nothing).
            let depends = |s: i64| (s - 1 - deps[(s - 1) as usize] as i64).max(0);
            let serial = deps.iter().all(|&d| d == 0);
            let mut gate = Watermark::new(0);
            let mut stats = GateStats::default();
            let mut entered: Vec<i64> = Vec::new();
            let mut next = 1;
            let mut picks = picks.into_iter();
            while gate.level() < n {
                // Enter everything whose dependencies have left.
                while next <= n && gate.level() >= depends(next) {
                    stats.arrived(next);
                    stats.entered(next, gate.level());
                    entered.push(next);
                    next += 1;
                }
                let i = picks.next().map_or(0, |p| p.index(entered.len()));
                let s = entered.swap_remove(i);
                gate.mark(s).unwrap();
                stats.left(s, gate.level());
            }
            prop_assert_eq!(stats.entered_count(), n as u64);
            for r in [stats.oooe(), stats.oool()] {
                prop_assert!((0.0..=1.0).contains(&r), "{:?}", stats);
            }
            prop_assert!(stats.window() >= 1.0, "{:?}", stats);
            if serial {
                prop_assert_eq!((stats.oooe(), stats.oool()), (0.0, 0.0));
                prop_assert_eq!(stats.window(), 1.0);
            }
        }
    }

    #[test]
    fn reset_starts_the_averages_over() {
        let mut s = run(0, &[1, 2, -2, -1]);
        assert!(s.oooe() > 0.0);
        s.reset();
        assert_eq!((s.oooe(), s.oool(), s.window()), (0.0, 0.0, 0.0));
        s.entered(3, 2);
        assert_eq!(s.window(), 1.0);
    }
}
