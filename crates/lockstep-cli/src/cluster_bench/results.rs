//! Everything a benchmark run measured, as written to `results.json`, and
//! the Lockstep/Galera ratios derived from it.
//!
//! Every provider runs every workload once per round; the headline figures
//! of a provider and workload are the median over its rounds (TPS, p95),
//! the highest max, and the latency of every round's histogram merged.

use std::path::PathBuf;

use lockstep_testkit::{ChecksumReport, IntervalSample, LatencyHistogram, SysbenchReport};
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
    /// In the order of round 0.
    pub providers: Vec<ProviderResults>,
    /// Ratios of the summaries when two providers ran.
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
    /// In the order of round 0; odd rounds run them in reverse.
    pub providers: Vec<String>,
    pub rounds: usize,
    /// Peers talked mutual TLS (`lockstep bench --tls`).
    pub peer_tls: bool,
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

/// One provider over every round.
#[derive(Debug, Clone, Serialize)]
pub struct ProviderResults {
    /// `lockstep`, `galera` or the library path.
    pub provider: String,
    pub library: PathBuf,
    /// `wsrep_provider_version` as the server reports it (first round that said).
    pub provider_version: Option<String>,
    /// `version` of mariadbd (first round that said).
    pub server_version: Option<String>,
    /// This provider's cluster in each round.
    pub clusters: Vec<ClusterRound>,
    pub workloads: Vec<WorkloadResults>,
}

/// Where a provider's run stood in its round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Slot {
    /// 0, 1, …
    pub round: usize,
    /// 0 when the provider ran first in that round.
    pub position: usize,
}

/// One provider's cluster in one round.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterRound {
    #[serde(flatten)]
    pub slot: Slot,
    /// The cluster could not be started (its workloads did not run) or stopped.
    pub error: Option<String>,
}

/// One workload on one provider, every round.
#[derive(Debug, Clone, Serialize)]
pub struct WorkloadResults {
    pub workload: String,
    pub threads: u32,
    /// The nodes sysbench connected to.
    pub nodes: Vec<String>,
    /// Over the rounds that measured it; `None` when none did.
    pub summary: Option<Summary>,
    pub rounds: Vec<WorkloadRound>,
}

/// One workload on one provider in one round.
#[derive(Debug, Clone, Serialize)]
pub struct WorkloadRound {
    #[serde(flatten)]
    pub slot: Slot,
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// The headline figures of a workload on a provider.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Rounds that measured the workload (the others failed).
    pub measured_rounds: usize,
    /// Medians over those rounds (with two, the mean).
    pub tps: f64,
    pub p95_ms: Option<f64>,
    pub aborts_per_sec: f64,
    /// The median of the rounds' CPU per 1000 transactions.
    pub cpu_ms_per_1000: Option<f64>,
    /// The slowest transaction of any round.
    pub max_ms: Option<f64>,
    /// Every round's latency histogram merged (counts summed): min of the
    /// minima, average over all transactions, percentiles of the merged
    /// histogram (its p95 may differ from the median `p95_ms`), max.
    pub merged_latency_ms: Latency,
}

/// What a workload run gave: figures, the check, or the failure.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
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
    /// sysbench's latency histogram: (bucket value in ms, transactions).
    pub histogram: LatencyHistogram,
    /// sysbench's progress lines: one per second.
    pub per_second: Vec<IntervalSample>,
    /// CPU time of all the cluster's `mariadbd` processes during the
    /// measured run, per 1000 transactions (`cpu.rs`); `None` if unknown.
    pub cpu_ms_per_1000: Option<f64>,
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

/// One provider's cluster in one round, as `run::run_provider` returns it.
#[derive(Debug, Clone)]
pub struct ProviderRun {
    pub provider: String,
    pub slot: Slot,
    pub library: PathBuf,
    pub provider_version: Option<String>,
    pub server_version: Option<String>,
    /// The cluster could not be started or stopped.
    pub error: Option<String>,
    pub workloads: Vec<WorkloadRun>,
}

/// One workload of a [`ProviderRun`].
#[derive(Debug, Clone)]
pub struct WorkloadRun {
    pub workload: String,
    pub threads: u32,
    pub nodes: Vec<String>,
    pub outcome: Outcome,
}

/// `candidate / reference` for each workload both ran, from the summaries.
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
    /// CPU per transaction: lower is better.
    pub cpu: Option<f64>,
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
            histogram: r.histogram.clone(),
            per_second: r.intervals.clone(),
            cpu_ms_per_1000: None,
        }
    }
}

impl Latency {
    fn from_report(r: &SysbenchReport) -> Latency {
        let summary = r.latency.as_ref();
        let max = summary.map(|l| l.max_ms);
        let own_p95 = summary
            .and_then(|l| l.percentile)
            .filter(|(rank, _)| *rank == 95.0)
            .map(|(_, ms)| ms);
        Latency {
            min: summary.map(|l| l.min_ms),
            avg: summary.map(|l| l.avg_ms),
            p95: own_p95.or_else(|| r.histogram.percentile(95.0)),
            max,
            percentiles: percentiles(&r.histogram, max),
        }
    }

    /// Every run's histogram merged: as if the runs were one long run.
    fn merged(runs: &[&Measured]) -> Latency {
        let histogram = merge(runs.iter().map(|m| &m.histogram));
        let of = |f: fn(&Latency) -> Option<f64>| runs.iter().filter_map(move |m| f(&m.latency_ms));
        let max = of(|l| l.max).reduce(f64::max);
        let (sum, count) = runs
            .iter()
            .filter_map(|m| Some((m.latency_ms.avg?, m.transactions)))
            .fold((0.0, 0), |(s, c), (avg, n)| (s + avg * n as f64, c + n));
        Latency {
            min: of(|l| l.min).reduce(f64::min),
            avg: (count > 0).then(|| sum / count as f64),
            p95: histogram.percentile(95.0),
            max,
            percentiles: percentiles(&histogram, max),
        }
    }
}

/// [`PERCENTILES`] of `histogram`, then `max`.
fn percentiles(histogram: &LatencyHistogram, max: Option<f64>) -> Vec<Percentile> {
    PERCENTILES
        .iter()
        .filter_map(|(name, p)| {
            Some(Percentile {
                name: name.to_string(),
                ms: histogram.percentile(*p)?,
            })
        })
        .chain(max.map(|ms| Percentile {
            name: "max".into(),
            ms,
        }))
        .collect()
}

/// The counts of equal buckets summed (sysbench's buckets are fixed).
fn merge<'a>(histograms: impl Iterator<Item = &'a LatencyHistogram>) -> LatencyHistogram {
    let mut all: Vec<(f64, u64)> = histograms.flat_map(|h| h.buckets.iter().copied()).collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut buckets: Vec<(f64, u64)> = Vec::new();
    for (value, n) in all {
        match buckets.last_mut() {
            Some(last) if last.0 == value => last.1 += n,
            _ => buckets.push((value, n)),
        }
    }
    LatencyHistogram { buckets }
}

/// The middle value, or the mean of the two middle ones; `None` when empty.
pub fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

impl Summary {
    /// `None` when no round measured anything.
    fn of(rounds: &[WorkloadRound]) -> Option<Summary> {
        let runs: Vec<&Measured> = rounds
            .iter()
            .filter_map(|r| r.outcome.measured.as_ref())
            .collect();
        let median_of =
            |f: fn(&Measured) -> Option<f64>| median(runs.iter().filter_map(|m| f(m)).collect());
        Some(Summary {
            measured_rounds: runs.len(),
            tps: median_of(|m| Some(m.tps))?,
            p95_ms: median_of(|m| m.latency_ms.p95),
            aborts_per_sec: median_of(|m| Some(m.aborts_per_sec))?,
            cpu_ms_per_1000: median_of(|m| m.cpu_ms_per_1000),
            max_ms: runs
                .iter()
                .filter_map(|m| m.latency_ms.max)
                .reduce(f64::max),
            merged_latency_ms: Latency::merged(&runs),
        })
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

impl Outcome {
    /// The run failed, or the nodes did not end equal.
    pub fn is_bad(&self) -> bool {
        self.error.is_some() || self.consistency.as_ref().is_some_and(|c| !c.equal)
    }
}

impl ProviderResults {
    /// The runs of every round grouped by provider, providers in the order
    /// they first ran, rounds in the order given; then the summaries.
    pub fn group(runs: Vec<ProviderRun>) -> Vec<ProviderResults> {
        let mut out: Vec<ProviderResults> = Vec::new();
        for run in runs {
            let i = match out.iter().position(|p| p.provider == run.provider) {
                Some(i) => i,
                None => {
                    out.push(ProviderResults {
                        provider: run.provider.clone(),
                        library: run.library.clone(),
                        provider_version: None,
                        server_version: None,
                        clusters: Vec::new(),
                        workloads: Vec::new(),
                    });
                    out.len() - 1
                }
            };
            out[i].add(run);
        }
        for w in out.iter_mut().flat_map(|p| p.workloads.iter_mut()) {
            w.summary = Summary::of(&w.rounds);
        }
        out
    }

    fn add(&mut self, run: ProviderRun) {
        self.provider_version = self.provider_version.take().or(run.provider_version);
        self.server_version = self.server_version.take().or(run.server_version);
        self.clusters.push(ClusterRound {
            slot: run.slot,
            error: run.error,
        });
        for w in run.workloads {
            let round = WorkloadRound {
                slot: run.slot,
                outcome: w.outcome,
            };
            match self.workloads.iter_mut().find(|x| x.workload == w.workload) {
                Some(x) => {
                    if x.nodes.is_empty() {
                        x.nodes = w.nodes;
                    }
                    x.rounds.push(round);
                }
                None => self.workloads.push(WorkloadResults {
                    workload: w.workload,
                    threads: w.threads,
                    nodes: w.nodes,
                    summary: None,
                    rounds: vec![round],
                }),
            }
        }
    }

    pub fn workload(&self, name: &str) -> Option<&WorkloadResults> {
        self.workloads.iter().find(|w| w.workload == name)
    }
}

impl BenchResults {
    /// Anything that should make the command exit non-zero.
    pub fn has_failures(&self) -> bool {
        self.providers.iter().any(|p| {
            p.clusters.iter().any(|c| c.error.is_some())
                || p.workloads
                    .iter()
                    .flat_map(|w| &w.rounds)
                    .any(|r| r.outcome.is_bad())
        })
    }
}

impl Comparison {
    /// With exactly two providers: `galera` is the reference when it ran,
    /// else the second one; `None` otherwise.
    pub fn of(providers: &[ProviderResults]) -> Option<Comparison> {
        // The floor is no provider to compare: it has its own lines.
        let compared: Vec<&ProviderResults> = providers
            .iter()
            .filter(|p| p.provider != super::run::FLOOR)
            .collect();
        let [a, b] = compared[..] else { return None };
        let (candidate, reference) = if a.provider == "galera" {
            (b, a)
        } else {
            (a, b)
        };
        let workloads = candidate
            .workloads
            .iter()
            .filter_map(|c| {
                let r = reference.workload(&c.workload)?;
                Some(Ratios::of(
                    &c.workload,
                    c.summary.as_ref(),
                    r.summary.as_ref(),
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
    fn of(workload: &str, c: Option<&Summary>, r: Option<&Summary>) -> Ratios {
        let ratio = |f: fn(&Summary) -> Option<f64>| -> Option<f64> {
            let (x, y) = (f(c?)?, f(r?)?);
            (y > 0.0).then(|| x / y)
        };
        Ratios {
            workload: workload.to_string(),
            tps: ratio(|s| Some(s.tps)),
            p95: ratio(|s| s.p95_ms),
            max: ratio(|s| s.max_ms),
            cpu: ratio(|s| s.cpu_ms_per_1000),
        }
    }
}

/// A provider's run of one `oltp_write_only` workload in `round`, for tests.
#[cfg(test)]
pub fn one_workload(
    provider: &str,
    slot: (usize, usize),
    measured: Option<Measured>,
    consistency: Option<Consistency>,
    error: Option<&str>,
) -> ProviderRun {
    ProviderRun {
        provider: provider.into(),
        slot: Slot {
            round: slot.0,
            position: slot.1,
        },
        library: PathBuf::from("/lib.so"),
        provider_version: None,
        server_version: None,
        error: None,
        workloads: vec![WorkloadRun {
            workload: "oltp_write_only".into(),
            threads: 8,
            nodes: vec!["node1".into()],
            outcome: Outcome {
                measured,
                consistency,
                error: error.map(String::from),
            },
        }],
    }
}

#[cfg(test)]
pub mod tests {
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

    /// Figures of [`OUTPUT`] with another TPS, p95 and max.
    pub fn measured(tps: f64, p95: f64, max: f64) -> Measured {
        let mut m = Measured::from_report(&SysbenchReport::parse(OUTPUT).unwrap());
        m.tps = tps;
        m.latency_ms.p95 = Some(p95);
        m.latency_ms.max = Some(max);
        m
    }

    fn run(provider: &str, slot: (usize, usize), tps: f64, p95: f64) -> ProviderRun {
        one_workload(provider, slot, Some(measured(tps, p95, 9.4)), None, None)
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
            vec![
                run("lockstep", (0, 0), 300.0, 5.0),
                run("galera", (0, 1), 200.0, 10.0),
            ],
            vec![
                run("galera", (0, 0), 200.0, 10.0),
                run("lockstep", (0, 1), 300.0, 5.0),
            ],
        ] {
            let c = Comparison::of(&ProviderResults::group(runs)).unwrap();
            assert_eq!(c.label(), "lockstep/galera");
            assert_eq!(c.workloads[0].tps, Some(1.5));
            assert_eq!(c.workloads[0].p95, Some(0.5));
            assert_eq!(c.workloads[0].max, Some(1.0));
            assert_eq!(c.workloads[0].cpu, None, "no CPU figures, no ratio");
        }
    }

    #[test]
    fn the_cpu_ratio_is_of_the_medians_per_1000_transactions() {
        let with_cpu = |provider, slot, cpu| {
            let mut r = run(provider, slot, 100.0, 5.0);
            r.workloads[0]
                .outcome
                .measured
                .as_mut()
                .unwrap()
                .cpu_ms_per_1000 = cpu;
            r
        };
        let p = ProviderResults::group(vec![
            with_cpu("lockstep", (0, 0), Some(600.0)),
            with_cpu("galera", (0, 1), Some(1000.0)),
            with_cpu("galera", (1, 0), Some(800.0)),
            with_cpu("lockstep", (1, 1), Some(700.0)),
            with_cpu("galera", (2, 0), Some(900.0)),
            with_cpu("lockstep", (2, 1), None),
        ]);
        let c = Comparison::of(&p).unwrap();
        // Lockstep's median of 600 and 700 (the unknown round left out),
        // Galera's of 800, 900 and 1000.
        assert_eq!(c.workloads[0].cpu, Some(650.0 / 900.0));
    }

    #[test]
    fn rounds_are_kept_per_provider_and_workload_with_their_slot() {
        let p = ProviderResults::group(vec![
            run("lockstep", (0, 0), 100.0, 5.0),
            run("galera", (0, 1), 200.0, 10.0),
            run("galera", (1, 0), 220.0, 12.0),
            run("lockstep", (1, 1), 140.0, 7.0),
        ]);
        let names: Vec<&str> = p.iter().map(|p| p.provider.as_str()).collect();
        assert_eq!(names, ["lockstep", "galera"]);
        let slots = |i: usize| -> Vec<(usize, usize)> {
            p[i].workloads[0]
                .rounds
                .iter()
                .map(|r| (r.slot.round, r.slot.position))
                .collect()
        };
        assert_eq!(slots(0), [(0, 0), (1, 1)]);
        assert_eq!(slots(1), [(0, 1), (1, 0)]);
        assert_eq!(p[0].clusters.len(), 2);
        let json = serde_json::to_value(&p[1]).unwrap();
        let round = &json["workloads"][0]["rounds"][1];
        assert_eq!(
            (round["round"].as_u64(), round["position"].as_u64()),
            (Some(1), Some(0))
        );
        assert_eq!(round["measured"]["tps"].as_f64(), Some(220.0));
    }

    #[test]
    fn summaries_take_medians_the_highest_max_and_merge_the_histograms() {
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![3.0, 1.0]), Some(2.0));
        assert_eq!(median(vec![5.0, 1.0, 2.0]), Some(2.0));
        let rounds = |tps: &[(f64, f64, f64)]| -> Summary {
            let runs = tps
                .iter()
                .enumerate()
                .map(|(i, &(tps, p95, max))| {
                    one_workload(
                        "lockstep",
                        (i, 0),
                        Some(measured(tps, p95, max)),
                        None,
                        None,
                    )
                })
                .collect();
            ProviderResults::group(runs)[0].workloads[0]
                .summary
                .clone()
                .unwrap()
        };
        let s = rounds(&[(100.0, 4.0, 9.0), (300.0, 8.0, 30.0)]);
        assert_eq!(
            (s.measured_rounds, s.tps, s.p95_ms, s.max_ms),
            (2, 200.0, Some(6.0), Some(30.0))
        );
        let s = rounds(&[(100.0, 4.0, 9.0), (500.0, 8.0, 30.0), (200.0, 5.0, 12.0)]);
        assert_eq!((s.tps, s.p95_ms, s.max_ms), (200.0, Some(5.0), Some(30.0)));
        // Two copies of the same 4-event histogram: same percentiles, 8 events.
        let l = &s.merged_latency_ms;
        assert_eq!(
            l.percentiles[0],
            Percentile {
                name: "p50".into(),
                ms: 1.0
            }
        );
        assert_eq!(l.percentiles.last().unwrap().ms, 30.0);
        assert_eq!((l.min, l.avg, l.p95), (Some(0.9), Some(3.25), Some(9.0)));
        let mut a = measured(1.0, 1.0, 1.0);
        a.histogram.buckets = vec![(1.0, 3), (2.0, 1)];
        let mut b = a.clone();
        b.histogram.buckets = vec![(0.5, 1), (2.0, 5), (4.0, 10)];
        let merged = Latency::merged(&[&a, &b]);
        assert_eq!(
            merge([&a.histogram, &b.histogram].into_iter()).buckets,
            [(0.5, 1), (1.0, 3), (2.0, 6), (4.0, 10)]
        );
        let p50_p95: Vec<f64> = merged.percentiles.iter().take(4).map(|p| p.ms).collect();
        assert_eq!(p50_p95, [2.0, 4.0, 4.0, 4.0]);
    }

    #[test]
    fn no_ratios_for_one_provider_or_a_failed_side() {
        let one = ProviderResults::group(vec![run("lockstep", (0, 0), 1.0, 1.0)]);
        assert!(Comparison::of(&one).is_none());
        let mut failed = run("galera", (0, 1), 200.0, 10.0);
        failed.workloads[0].outcome.measured = None;
        let p = ProviderResults::group(vec![run("lockstep", (0, 0), 300.0, 5.0), failed.clone()]);
        assert!(p[1].workloads[0].summary.is_none());
        assert_eq!(Comparison::of(&p).unwrap().workloads[0].tps, None);
        // One failed round of two: the other one is the summary.
        failed.slot = Slot {
            round: 1,
            position: 0,
        };
        let p = ProviderResults::group(vec![run("galera", (0, 1), 200.0, 10.0), failed]);
        let s = p[0].workloads[0].summary.as_ref().unwrap();
        assert_eq!((s.measured_rounds, s.tps), (1, 200.0));
    }

    #[test]
    fn a_failed_check_counts_as_a_mismatch() {
        let mut r = run("lockstep", (0, 0), 1.0, 1.0);
        assert!(!r.workloads[0].outcome.is_bad());
        r.workloads[0].outcome.consistency = Some(Consistency::failed("timeout".into()));
        assert!(r.workloads[0].outcome.is_bad());
    }
}
