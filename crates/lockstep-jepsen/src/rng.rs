//! A seeded generator (SplitMix64): a run's choices repeat with its seed.

#[derive(Debug, Clone)]
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

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// True with probability `num / den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_repeats_its_sequence_and_stays_in_range() {
        let a: Vec<u64> = (0..5).scan(Rng::new(7), |r, _| Some(r.below(10))).collect();
        let b: Vec<u64> = (0..5).scan(Rng::new(7), |r, _| Some(r.below(10))).collect();
        assert_eq!(a, b);
        assert!(a.iter().all(|&x| x < 10));
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
    }
}
