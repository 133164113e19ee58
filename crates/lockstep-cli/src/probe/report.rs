//! The probe's numbers: stale-read rate and delay distributions.

use std::time::Duration;

use serde::Serialize;

use super::load::LoadStats;
use super::rounds::Sample;
use super::ProbeConfig;
use crate::stats::Summary;
use crate::table;

/// Everything a probe run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub writer: String,
    pub reader: String,
    pub rounds: u64,
    /// The reader's `wsrep_sync_wait` (0, or 1 with `--sync-wait`).
    pub sync_wait: u32,
    pub load_threads: usize,
    /// Rounds whose first read on B returned an older value.
    pub stale_rounds: u64,
    pub stale_percent: f64,
    /// Rounds whose value B had not shown after `--max-wait-ms`.
    pub never_visible: u64,
    pub stale_reads_total: u64,
    pub stale_reads_max: u32,
    /// Delay until the value was visible, stale rounds only (what the
    /// original PHP probe reported).
    pub stale_delay: Option<Summary>,
    /// From A's commit to B returning the value, every round.
    pub visible: Option<Summary>,
    /// Commit latency of the UPDATE on A.
    pub write: Option<Summary>,
    pub load: LoadStats,
    pub load_updates_per_s: f64,
    pub duration_s: f64,
    #[serde(skip)]
    pub samples: Vec<Sample>,
}

impl Report {
    pub fn new(cfg: &ProbeConfig, samples: Vec<Sample>, load: LoadStats, took: Duration) -> Report {
        let stale: Vec<&Sample> = samples.iter().filter(|s| s.is_stale()).collect();
        let mut stale_delays: Vec<Duration> = stale.iter().map(|s| s.visible).collect();
        let mut visible: Vec<Duration> = samples.iter().map(|s| s.visible).collect();
        let mut write: Vec<Duration> = samples.iter().map(|s| s.write).collect();
        let n = samples.len() as u64;
        let secs = took.as_secs_f64();
        Report {
            writer: cfg.a_label.clone(),
            reader: cfg.b_label.clone(),
            rounds: n,
            sync_wait: u32::from(cfg.sync_wait),
            load_threads: cfg.load_threads,
            stale_rounds: stale.len() as u64,
            stale_percent: if n == 0 {
                0.0
            } else {
                (stale.len() as f64 * 100.0 / n as f64 * 1000.0).round() / 1000.0
            },
            never_visible: samples.iter().filter(|s| !s.seen).count() as u64,
            stale_reads_total: samples.iter().map(|s| u64::from(s.stale_reads)).sum(),
            stale_reads_max: samples.iter().map(|s| s.stale_reads).max().unwrap_or(0),
            stale_delay: Summary::of(&mut stale_delays),
            visible: Summary::of(&mut visible),
            write: Summary::of(&mut write),
            load_updates_per_s: if secs > 0.0 {
                (load.updates as f64 / secs).round()
            } else {
                0.0
            },
            load,
            duration_s: (secs * 1000.0).round() / 1000.0,
            samples,
        }
    }

    /// The human-readable report.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "probe: {} rounds, write on {}, read on {}, wsrep_sync_wait={}, {} load thread(s), \
             {:.1} s\n",
            self.rounds,
            self.writer,
            self.reader,
            self.sync_wait,
            self.load_threads,
            self.duration_s
        );
        out.push_str(&format!(
            "stale reads: {} of {} rounds ({:.3} %); {} stale read(s) in all, at most {} in a \
             round; {} never visible\n",
            self.stale_rounds,
            self.rounds,
            self.stale_percent,
            self.stale_reads_total,
            self.stale_reads_max,
            self.never_visible
        ));
        if self.load_threads > 0 {
            out.push_str(&format!(
                "background load: {} updates ({}/s), {} error(s){}\n",
                self.load.updates,
                self.load_updates_per_s,
                self.load.errors,
                self.load
                    .first_error
                    .as_ref()
                    .map_or(String::new(), |e| format!(", first: {e}"))
            ));
        }
        out.push('\n');
        let header = [
            "METRIC", "N", "MIN_MS", "AVG_MS", "P50_MS", "P99_MS", "MAX_MS",
        ];
        let rows: Vec<Vec<String>> = [
            (
                "delay until visible (stale rounds)",
                self.stale_delay.as_ref(),
            ),
            (
                "commit on A -> read on B (all rounds)",
                self.visible.as_ref(),
            ),
            ("commit latency on A", self.write.as_ref()),
        ]
        .into_iter()
        .map(|(name, s)| {
            let mut row = vec![name.to_string()];
            row.extend(Summary::cells(s));
            row
        })
        .collect();
        out.push_str(&table::render(&header, &rows));
        out
    }

    pub fn to_json(&self) -> String {
        let mut s =
            serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
        s.push('\n');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mariadb::{ConnectSpec, Credentials, Endpoint};

    fn cfg() -> ProbeConfig {
        let spec = ConnectSpec {
            endpoint: Endpoint::Socket("/s".into()),
            credentials: Credentials {
                user: "u".into(),
                password: None,
            },
        };
        ProbeConfig {
            a: spec.clone(),
            b: spec,
            a_label: "node1".into(),
            b_label: "node2".into(),
            rounds: 4,
            sync_wait: false,
            load_threads: 0,
            rows: 10,
            max_wait: Duration::from_secs(1),
            database: "p".into(),
        }
    }

    fn sample(visible_us: u64, stale_reads: u32) -> Sample {
        Sample {
            write: Duration::from_micros(900),
            visible: Duration::from_micros(visible_us),
            stale_reads,
            seen: true,
        }
    }

    #[test]
    fn stale_rounds_are_counted_and_only_they_make_the_delay_distribution() {
        let samples = vec![
            sample(100, 0),
            sample(2500, 3),
            sample(120, 0),
            sample(1500, 1),
        ];
        let r = Report::new(
            &cfg(),
            samples,
            LoadStats::default(),
            Duration::from_secs(2),
        );
        assert_eq!((r.rounds, r.stale_rounds, r.stale_percent), (4, 2, 50.0));
        assert_eq!((r.stale_reads_total, r.stale_reads_max), (4, 3));
        let d = r.stale_delay.unwrap();
        assert_eq!((d.n, d.min_ms, d.max_ms, d.avg_ms), (2, 1.5, 2.5, 2.0));
        assert_eq!(r.visible.unwrap().n, 4);
        let text = r.to_text();
        assert!(
            text.contains("stale reads: 2 of 4 rounds (50.000 %)"),
            "{text}"
        );
        assert!(
            text.contains("delay until visible (stale rounds)"),
            "{text}"
        );
        let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(v["stale_rounds"], 2);
        assert_eq!(v["stale_delay"]["p99_ms"], 2.5);
        assert!(v.get("samples").is_none());
    }

    #[test]
    fn a_run_without_stale_rounds_has_no_delay_distribution() {
        let r = Report::new(
            &cfg(),
            vec![sample(100, 0)],
            LoadStats::default(),
            Duration::ZERO,
        );
        assert_eq!(r.stale_rounds, 0);
        assert!(r.stale_delay.is_none());
        let text = r.to_text();
        let row = text
            .lines()
            .find(|l| l.starts_with("delay until visible"))
            .unwrap();
        let last: Vec<&str> = row.split_whitespace().rev().take(6).collect();
        assert_eq!(last, ["-", "-", "-", "-", "-", "0"], "{row:?}");
    }
}
