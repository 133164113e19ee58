//! Everything a benchmark run measured, as written to `results.json`, and
//! the Lockstep/Galera ratios derived from it.

use std::path::PathBuf;

use lockstep_testkit::{ChecksumReport, IntervalSample, SysbenchReport};
use serde::Serialize;

/// The latency percentiles of the report, from sysbench's histogram.
pub const PERCENTILES: [(&str, f64); 6] = [
    ("p50", 50.0),
    ("p75", 75.0),
    ("p90", 90.0),
    ("p95", 95.0),
    ("p99", 99.0),
    ("p99.9", 99.9),
];

/// The whole run: settings, environment, one entry per provider.
#[derive(Debug, Clone, Serialize)]
pub struct BenchResults {
    pub started_utc: String,
    pub finished_utc: String,
    pub settings: Settings,
    pub environment: Environment,
    pub runs: Vec<ProviderRun>,
    /// Ratios when two providers ran.
    pub comparison: Option<Comparison>,
}

/// What was asked for.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    pub nodes: usize,
    pub time_secs: u64,
    pub warmup_secs: u64,
    pub tables: u32,
    pub table_size: u32,
    pub slave_threads: u32,
    pub workloads: Vec<String>,
    pub providers: Vec<String>,
}

/// Where it ran.
#[derive(Debug, Clone, Serialize)]
pub struct Environment {
    pub cpus: usize,
    pub sysbench: String,
    /// `/proc/loadavg`'s 1, 5 and 15 minute figures before and after the
    /// run: a busy machine makes noisy numbers.
    pub load_average_before: Option<String>,
    pub load_average_after: Option<String>,
}

/// One provider's cluster and its workloads.
#[derive(Debug, Clone, Serialize)]
pub struct ProviderRun {
    /// `lockstep`, `galera` or the library path.
    pub provider: String,
    pub library: PathBuf,
    /// `wsrep_provider_version` as the server reports it.
    pub provider_version: Option<String>,
    /// `version` of mariadbd.
    pub server_version: Option<String>,
    /// The cluster could not be started (its workloads did not run) or stopped.
    pub error: Option<String>,
    pub workloads: Vec<WorkloadRun>,
}

/// One workload on one provider's cluster.
#[derive(Debug, Clone, Serialize)]
pub struct WorkloadRun {
    pub workload: String,
    pub threads: u32,
    /// The nodes sysbench connected to.
    pub nodes: Vec<String>,
    /// `None` when sysbench failed (see `error`).
    pub measured: Option<Measured>,
    /// `None` when the run did not get as far as the check.
    pub consistency: Option<Consistency>,
    pub error: Option<String>,
}

/// sysbench's figures for the measured run (the warm-up is not counted).
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    pub tps: f64,
    pub qps: f64,
    pub transactions: u64,
    /// Transactions aborted by a conflict (1213, 1205, 1020) and retried.
    pub aborts: u64,
    pub aborts_per_sec: f64,
    pub reconnects: u64,
    pub seconds: f64,
    pub latency_ms: Latency,
    /// sysbench's progress lines: one per second.
    pub per_second: Vec<IntervalSample>,
}

/// Transaction latency in milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Latency {
    pub min: Option<f64>,
    pub avg: Option<f64>,
    /// sysbench's own 95th percentile (equal to the histogram's p95).
    pub p95: Option<f64>,
    pub max: Option<f64>,
    /// [`PERCENTILES`] from the histogram, then `max`.
    pub percentiles: Vec<Percentile>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Percentile {
    pub name: String,
    pub ms: f64,
}

/// Did every node end the workload with the same data?
#[derive(Debug, Clone, Serialize)]
pub struct Consistency {
    /// Every table has the same CHECKSUM TABLE value on every node.
    pub equal: bool,
    /// The common `wsrep_last_committed` the nodes reached.
    pub last_committed: Option<i64>,
    /// The checksums, one row per table, one column per node.
    pub grid: String,
    /// Why the check could not be completed (e.g. the nodes never caught up).
    pub problem: Option<String>,
}

/// `candidate / reference` for each workload both ran.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub candidate: String,
    pub reference: String,
    pub workloads: Vec<Ratios>,
}

/// TPS ratio: higher is better. Latency ratios: lower is better.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ratios {
    pub workload: String,
    pub tps: Option<f64>,
    pub p95: Option<f64>,
    pub max: Option<f64>,
}

impl Measured {
    pub fn from_report(r: &SysbenchReport) -> Measured {
        Measured {
            tps: r.tps,
            qps: r.qps,
            transactions: r.transactions,
            aborts: r.ignored_errors,
            aborts_per_sec: if r.seconds > 0.0 {
                r.ignored_errors as f64 / r.seconds
            } else {
                0.0
            },
            reconnects: r.reconnects,
            seconds: r.seconds,
            latency_ms: Latency::from_report(r),
            per_second: r.intervals.clone(),
        }
    }
}

impl Latency {
    fn from_report(r: &SysbenchReport) -> Latency {
        let summary = r.latency.as_ref();
        let max = summary.map(|l| l.max_ms);
        let mut percentiles: Vec<Percentile> = PERCENTILES
            .iter()
            .filter_map(|(name, p)| {
                Some(Percentile {
                    name: name.to_string(),
                    ms: r.histogram.percentile(*p)?,
                })
            })
            .collect();
        if let Some(ms) = max {
            percentiles.push(Percentile {
                name: "max".into(),
                ms,
            });
        }
        let own_p95 = summary
            .and_then(|l| l.percentile)
            .filter(|(rank, _)| *rank == 95.0)
            .map(|(_, ms)| ms);
        Latency {
            min: summary.map(|l| l.min_ms),
            avg: summary.map(|l| l.avg_ms),
            p95: own_p95.or_else(|| r.histogram.percentile(95.0)),
            max,
            percentiles,
        }
    }
}

impl Consistency {
    pub fn checked(last_committed: i64, report: &ChecksumReport) -> Consistency {
        Consistency {
            equal: report.is_consistent(),
            last_committed: Some(last_committed),
            grid: report.to_string(),
            problem: None,
        }
    }

    /// The check itself failed: counts as a mismatch.
    pub fn failed(problem: String) -> Consistency {
        Consistency {
            equal: false,
            last_committed: None,
            grid: String::new(),
            problem: Some(problem),
        }
    }
}

impl WorkloadRun {
    /// The run failed, or the nodes did not end equal.
    pub fn is_bad(&self) -> bool {
        self.error.is_some() || self.consistency.as_ref().is_some_and(|c| !c.equal)
    }
}

impl BenchResults {
    /// Anything that should make the command exit non-zero.
    pub fn has_failures(&self) -> bool {
        self.runs
            .iter()
            .any(|r| r.error.is_some() || r.workloads.iter().any(WorkloadRun::is_bad))
    }
}

impl Comparison {
    /// With exactly two providers: `galera` is the reference when it ran,
    /// else the second one; `None` otherwise.
    pub fn of(runs: &[ProviderRun]) -> Option<Comparison> {
        let [a, b] = runs else { return None };
        let (candidate, reference) = if a.provider == "galera" {
            (b, a)
        } else {
            (a, b)
        };
        let workloads = candidate
            .workloads
            .iter()
            .filter_map(|c| {
                let r = reference
                    .workloads
                    .iter()
                    .find(|r| r.workload == c.workload)?;
                Some(Ratios::of(
                    &c.workload,
                    c.measured.as_ref(),
                    r.measured.as_ref(),
                ))
            })
            .collect();
        Some(Comparison {
            candidate: candidate.provider.clone(),
            reference: reference.provider.clone(),
            workloads,
        })
    }

    pub fn label(&self) -> String {
        format!("{}/{}", self.candidate, self.reference)
    }
}

impl Ratios {
    fn of(workload: &str, c: Option<&Measured>, r: Option<&Measured>) -> Ratios {
        let ratio = |f: fn(&Measured) -> Option<f64>| -> Option<f64> {
            let (x, y) = (f(c?)?, f(r?)?);
            (y > 0.0).then(|| x / y)
        };
        Ratios {
            workload: workload.to_string(),
            tps: ratio(|m| Some(m.tps)),
            p95: ratio(|m| m.latency_ms.p95),
            max: ratio(|m| m.latency_ms.max),
        }
    }
}

/// A provider run of one `oltp_write_only` workload, for tests.
#[cfg(test)]
pub fn one_workload(
    provider: &str,
    measured: Option<Measured>,
    consistency: Option<Consistency>,
    error: Option<&str>,
) -> ProviderRun {
    ProviderRun {
        provider: provider.into(),
        library: PathBuf::from("/lib.so"),
        provider_version: None,
        server_version: None,
        error: None,
        workloads: vec![WorkloadRun {
            workload: "oltp_write_only".into(),
            threads: 8,
            nodes: vec!["node1".into()],
            measured,
            consistency,
            error: error.map(String::from),
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sysbench summary with a latency section and a 4-event histogram.
    const OUTPUT: &str = "\
[ 1s ] thds: 2 tps: 3.00 qps: 3.00 (r/w/o: 0.00/3.00/0.00) lat (ms,95%): 9.00 err/s: 1.00 reconn/s: 0.00
Latency histogram (values are in milliseconds)
       value  ------------- distribution ------------- count
       1.000 |****************************************  2
       2.000 |********************                      1
       9.000 |********************                      1
 
SQL statistics:
    transactions:                        4      (2.00 per sec.)
    queries:                             4      (2.00 per sec.)
    ignored errors:                      1      (0.50 per sec.)
    reconnects:                          0      (0.00 per sec.)

General statistics:
    total time:                          2.0000s

Latency (ms):
         min:                                    0.90
         avg:                                    3.25
         max:                                    9.40
         95th percentile:                        9.00
         sum:                                   13.00
";

    fn measured(tps: f64, p95: f64) -> Measured {
        let mut m = Measured::from_report(&SysbenchReport::parse(OUTPUT).unwrap());
        m.tps = tps;
        m.latency_ms.p95 = Some(p95);
        m
    }

    fn run(provider: &str, tps: f64, p95: f64) -> ProviderRun {
        one_workload(provider, Some(measured(tps, p95)), None, None)
    }

    #[test]
    fn percentiles_come_from_the_histogram_and_max_from_the_summary() {
        let m = Measured::from_report(&SysbenchReport::parse(OUTPUT).unwrap());
        let shown: Vec<(&str, f64)> = m
            .latency_ms
            .percentiles
            .iter()
            .map(|p| (p.name.as_str(), p.ms))
            .collect();
        assert_eq!(
            shown,
            [
                ("p50", 1.0),
                ("p75", 2.0),
                ("p90", 9.0),
                ("p95", 9.0),
                ("p99", 9.0),
                ("p99.9", 9.0),
                ("max", 9.4)
            ]
        );
        assert_eq!(m.latency_ms.p95, Some(9.0));
        assert_eq!(m.aborts_per_sec, 0.5);
        assert_eq!(m.per_second.len(), 1);
    }

    #[test]
    fn ratios_put_galera_in_the_denominator_whatever_the_run_order() {
        for runs in [
            vec![run("lockstep", 300.0, 5.0), run("galera", 200.0, 10.0)],
            vec![run("galera", 200.0, 10.0), run("lockstep", 300.0, 5.0)],
        ] {
            let c = Comparison::of(&runs).unwrap();
            assert_eq!(c.label(), "lockstep/galera");
            assert_eq!(c.workloads[0].tps, Some(1.5));
            assert_eq!(c.workloads[0].p95, Some(0.5));
            assert_eq!(c.workloads[0].max, Some(1.0));
        }
    }

    #[test]
    fn no_ratios_for_one_provider_or_a_failed_side() {
        assert!(Comparison::of(&[run("lockstep", 1.0, 1.0)]).is_none());
        let mut runs = vec![run("lockstep", 300.0, 5.0), run("galera", 200.0, 10.0)];
        runs[1].workloads[0].measured = None;
        let c = Comparison::of(&runs).unwrap();
        assert_eq!(c.workloads[0].tps, None);
    }

    #[test]
    fn a_failed_check_counts_as_a_mismatch() {
        let mut r = run("lockstep", 1.0, 1.0);
        assert!(!r.workloads[0].is_bad());
        r.workloads[0].consistency = Some(Consistency::failed("timeout".into()));
        assert!(r.workloads[0].is_bad());
    }
}
