use std::collections::BTreeSet;
use std::fmt;

/// A seqno was marked twice, or below the level: the caller lost track of
/// the total order. The node must stop rather than guess.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrderError {
    AlreadyPassed { seqno: i64, level: i64 },
}

impl fmt::Display for OrderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OrderError::AlreadyPassed { seqno, level } => write!(
                f,
                "seqno {seqno} passed an ordering gate twice (gate level {level}); \
                 the node's view of the total order is inconsistent"
            ),
        }
    }
}

impl std::error::Error for OrderError {}

/// The contiguous prefix of seqnos that have passed a gate.
///
/// Seqnos may pass out of order (parallel appliers finish in any order);
/// the level only moves when the gap below a seqno is closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watermark {
    level: i64,
    ahead: BTreeSet<i64>,
}

impl Watermark {
    /// A gate where everything up to and including `level` has passed.
    pub fn new(level: i64) -> Self {
        Watermark {
            level,
            ahead: BTreeSet::new(),
        }
    }

    /// Largest `L` such that every seqno `<= L` has passed.
    pub fn level(&self) -> i64 {
        self.level
    }

    /// Whether `seqno` has passed (below the level or marked ahead of it).
    pub fn has_passed(&self, seqno: i64) -> bool {
        seqno <= self.level || self.ahead.contains(&seqno)
    }

    /// Seqnos that passed out of order and wait for a gap below them.
    pub fn ahead_count(&self) -> usize {
        self.ahead.len()
    }

    /// Marks `seqno` as passed. Returns whether the level moved.
    pub fn mark(&mut self, seqno: i64) -> Result<bool, OrderError> {
        if self.has_passed(seqno) {
            return Err(OrderError::AlreadyPassed {
                seqno,
                level: self.level,
            });
        }
        if seqno != self.level + 1 {
            self.ahead.insert(seqno);
            return Ok(false);
        }
        self.level = seqno;
        while self.ahead.remove(&(self.level + 1)) {
            self.level += 1;
        }
        Ok(true)
    }

    /// Starts over at `level` (a new history, or a state transfer).
    pub fn reset(&mut self, level: i64) {
        self.level = level;
        self.ahead.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn in_order_marks_advance_the_level() {
        let mut w = Watermark::new(0);
        assert_eq!(w.mark(1), Ok(true));
        assert_eq!(w.mark(2), Ok(true));
        assert_eq!(w.level(), 2);
    }

    #[test]
    fn a_gap_holds_the_level_until_closed() {
        let mut w = Watermark::new(10);
        assert_eq!(w.mark(12), Ok(false));
        assert_eq!(w.mark(13), Ok(false));
        assert_eq!(w.level(), 10);
        assert!(w.has_passed(13));
        assert_eq!(w.mark(11), Ok(true));
        assert_eq!(w.level(), 13);
        assert_eq!(w.ahead_count(), 0);
    }

    #[test]
    fn passing_twice_is_an_error_not_a_silent_skip() {
        let mut w = Watermark::new(5);
        assert!(w.mark(5).is_err());
        w.mark(7).unwrap();
        assert!(w.mark(7).is_err());
    }

    proptest! {
        /// Whatever order a window of seqnos passes in, the level ends at
        /// the top of the window and never moves backwards.
        #[test]
        fn any_permutation_reaches_the_top(mut order in Just((1..=64i64).collect::<Vec<_>>()).prop_shuffle()) {
            let mut w = Watermark::new(0);
            let mut last = 0;
            for s in order.drain(..) {
                w.mark(s).unwrap();
                prop_assert!(w.level() >= last);
                last = w.level();
                for below in 1..=w.level() {
                    prop_assert!(w.has_passed(below));
                }
            }
            prop_assert_eq!(w.level(), 64);
            prop_assert_eq!(w.ahead_count(), 0);
        }
    }
}
