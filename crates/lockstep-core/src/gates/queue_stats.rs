//! Length statistics of a queue, sampled at every push: Galera's
//! `wsrep_local_recv_queue_{avg,max,min}`.

/// Samples of a queue's length since the last reset.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueStats {
    samples: u64,
    sum: u64,
    max: usize,
    min: Option<usize>,
}

impl QueueStats {
    /// The queue holds `len` items right after a push.
    pub fn sample(&mut self, len: usize) {
        self.samples += 1;
        self.sum += len as u64;
        self.max = self.max.max(len);
        self.min = Some(self.min.map_or(len, |m| m.min(len)));
    }

    /// Mean length seen at pushes; 0 before the first.
    pub fn avg(&self) -> f64 {
        if self.samples == 0 {
            0.0
        } else {
            self.sum as f64 / self.samples as f64
        }
    }

    /// Longest length seen, at least `now` (the current length).
    pub fn max(&self, now: usize) -> usize {
        self.max.max(now)
    }

    /// Shortest length seen, at most `now`.
    pub fn min(&self, now: usize) -> usize {
        self.min.map_or(now, |m| m.min(now))
    }

    /// `FLUSH STATUS`.
    pub fn reset(&mut self) {
        *self = QueueStats::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn averages_the_lengths_seen_at_pushes() {
        let mut q = QueueStats::default();
        assert_eq!((q.avg(), q.max(0), q.min(0)), (0.0, 0, 0));
        for len in [1, 2, 3, 1] {
            q.sample(len);
        }
        assert_eq!(q.avg(), 7.0 / 4.0);
        assert_eq!(q.max(0), 3);
        assert_eq!(q.max(5), 5);
        assert_eq!(q.min(2), 1);
        q.reset();
        assert_eq!(q.avg(), 0.0);
    }
}
