//! The seeded generator of the simulations and the Jepsen runs
//! (SplitMix64): tiny, fast, good enough for choosing faults and
//! schedules, and the same sequence for a seed on every platform, so a
//! failing seed replays. Not for anything secret.

/// See the module documentation.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`; multiply-shift, no modulo bias worth
    /// the name).
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0);
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && ((self.next_u64() >> 11) as f64) < p * (1u64 << 53) as f64
    }

    /// Uniform in `0..len` (`len > 0`).
    pub fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_repeats_its_sequence_and_stays_in_range() {
        let a: Vec<u64> = (0..50)
            .scan(Rng::new(7), |r, _| Some(r.below(10)))
            .collect();
        let b: Vec<u64> = (0..50)
            .scan(Rng::new(7), |r, _| Some(r.below(10)))
            .collect();
        assert_eq!(a, b);
        assert!(a.iter().all(|&x| x < 10));
        assert!(
            (0..10).all(|x| a.contains(&x)),
            "every value comes up: {a:?}"
        );
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
        let mut r = Rng::new(3);
        assert!((0..100).all(|_| (5..=9).contains(&r.range(5, 9))));
        assert!(!(0..100).any(|_| r.chance(0.0)));
        assert!((0..100).all(|_| r.chance(1.0)));
    }
}
