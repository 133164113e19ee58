//! Latency distributions: min, average, percentiles, max.

use std::time::Duration;

use serde::Serialize;

/// A distribution summary in milliseconds (microsecond precision).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    pub n: usize,
    pub min_ms: f64,
    pub avg_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Summary {
    /// `None` for an empty sample. Sorts `samples` in place.
    pub fn of(samples: &mut [Duration]) -> Option<Summary> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_unstable();
        let n = samples.len();
        let total: Duration = samples.iter().sum();
        Some(Summary {
            n,
            min_ms: ms(samples[0]),
            avg_ms: round3(total.as_secs_f64() * 1000.0 / n as f64),
            p50_ms: ms(percentile(samples, 50.0)),
            p99_ms: ms(percentile(samples, 99.0)),
            max_ms: ms(samples[n - 1]),
        })
    }

    /// The cells `N MIN AVG P50 P99 MAX` for a table row.
    pub fn cells(s: Option<&Summary>) -> Vec<String> {
        match s {
            Some(s) => vec![
                s.n.to_string(),
                fmt_ms(s.min_ms),
                fmt_ms(s.avg_ms),
                fmt_ms(s.p50_ms),
                fmt_ms(s.p99_ms),
                fmt_ms(s.max_ms),
            ],
            None => {
                let mut v = vec!["-".to_string(); 6];
                v[0] = "0".into();
                v
            }
        }
    }
}

/// Nearest-rank percentile of sorted samples (`p` in 0..=100).
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let n = sorted.len();
    let rank = ((p / 100.0) * n as f64).ceil() as usize;
    sorted[rank.clamp(1, n) - 1]
}

pub fn ms(d: Duration) -> f64 {
    round3(d.as_secs_f64() * 1000.0)
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Milliseconds with three decimals.
pub fn fmt_ms(x: f64) -> String {
    format!("{x:.3}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_use_nearest_rank_percentiles() {
        let mut v: Vec<Duration> = (1..=100).rev().map(Duration::from_millis).collect();
        let s = Summary::of(&mut v).unwrap();
        assert_eq!(s.n, 100);
        assert_eq!(
            (s.min_ms, s.p50_ms, s.p99_ms, s.max_ms),
            (1.0, 50.0, 99.0, 100.0)
        );
        assert_eq!(s.avg_ms, 50.5);
        let mut one = vec![Duration::from_micros(1500)];
        let s = Summary::of(&mut one).unwrap();
        assert_eq!((s.min_ms, s.p99_ms, s.max_ms), (1.5, 1.5, 1.5));
        assert!(Summary::of(&mut []).is_none());
        assert_eq!(Summary::cells(None), ["0", "-", "-", "-", "-", "-"]);
    }
}
