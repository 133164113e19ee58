//! `lockstep bench`: the same sysbench workloads on an N-node cluster (3
//! unless `--nodes` asks for several sizes, `scaling`) with
//! each provider in turn (Lockstep, then Galera), same my.cnf but
//! `wsrep_provider`, and a report of throughput, latency and their ratios.
//! The whole is repeated `rounds` times, the provider order reversed every
//! other round (ABBA), so that a machine whose load drifts over minutes
//! weighs on both providers alike; the headline figures are medians.
//!
//! - `workload`: the workloads and where their connections go;
//! - `run`: one cluster per provider and round, fresh tables per workload,
//!   warm-up, measured run, CHECKSUM TABLE on every node;
//! - `results`: the numbers (`results.json`), the medians and the ratios;
//! - `report`: stdout and `report.md`;
//! - `plot`: the PNGs;
//! - `scaling`: with several `--nodes`, each size's figures side by side.
//!
//! A benchmark reports; it asserts nothing about speed. It fails (exit
//! code 1) only when a run fails or the nodes end with different data.

pub mod contender;
pub mod cpu;
pub mod large_trx;
pub mod plot;
pub mod report;
pub mod results;
pub mod run;
pub mod scaling;
pub mod workload;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use lockstep_testkit::Error;

use crate::check::http::civil_from_days;
use contender::Contender;
use plot::Series;
use results::{BenchResults, Comparison, Environment, ProviderResults, Settings, Slot};
use run::Plan;

/// A whole benchmark: the plan every provider runs in every round, and
/// where the report goes.
#[derive(Debug, Clone)]
pub struct Bench {
    pub plan: Plan,
    /// In the order of round 0.
    pub providers: Vec<Contender>,
    /// At least 1.
    pub rounds: usize,
    /// Also measure the floor (`run::run_floor`) in every round, after the
    /// providers, with the first provider's library loaded.
    pub floor: bool,
    pub out: PathBuf,
}

/// The providers in the order of `round`: as given in even rounds,
/// reversed in odd ones.
pub fn round_order<T>(providers: &[T], round: usize) -> Vec<&T> {
    let mut order: Vec<&T> = providers.iter().collect();
    if round % 2 == 1 {
        order.reverse();
    }
    order
}

/// A progress line on stderr, so that a long run shows life.
fn progress(tag: &str, message: &str) {
    eprintln!("lockstep bench: [{tag}] {message}");
}

/// Runs every round, provider and workload and writes the report. Fails before
/// starting anything when sysbench, a provider library or the report
/// folder is missing; after that, failures are recorded in the results.
/// Also returns the drawing problems (the report is complete without them).
pub fn run(bench: &Bench) -> Result<(BenchResults, Vec<String>), Error> {
    let sysbench = sysbench_version()?;
    for c in &bench.providers {
        if !c.provider.path().is_file() {
            return Err(Error::ProviderMissing {
                tried: vec![c.provider.path()],
            });
        }
    }
    std::fs::create_dir_all(&bench.plan.raw_dir).map_err(|source| Error::Io {
        what: format!("creating the report folder {}", bench.out.display()),
        source,
    })?;
    let plan = &bench.plan;
    let started = utc(SystemTime::now(), false);
    let load_before = load_average();
    if let Some(load) = &load_before {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        if load.split(' ').next().and_then(|l| l.parse::<f64>().ok()) > Some(cpus as f64) {
            eprintln!(
                "lockstep bench: the machine is already busy (load average {load} on {cpus} \
                 CPUs): expect noisy numbers"
            );
        }
    }
    let mut runs = Vec::new();
    for round in 0..bench.rounds {
        let order = round_order(&bench.providers, round);
        for (position, p) in order.iter().enumerate() {
            runs.push(run::run_provider(plan, p, Slot { round, position }));
        }
        if let (true, Some(p)) = (bench.floor, bench.providers.first()) {
            let position = order.len();
            runs.push(run::run_floor(plan, p, Slot { round, position }));
        }
    }
    let providers = ProviderResults::group(runs);
    let results = BenchResults {
        started_utc: started,
        finished_utc: utc(SystemTime::now(), false),
        settings: Settings {
            nodes: plan.nodes,
            time_secs: plan.time.as_secs(),
            warmup_secs: plan.warmup.as_secs(),
            tables: plan.tables,
            table_size: plan.table_size,
            slave_threads: plan.slave_threads,
            workloads: plan.workloads.iter().map(|w| w.name.to_string()).collect(),
            providers: bench
                .providers
                .iter()
                .map(|c| c.label.clone())
                .chain(bench.floor.then(|| run::FLOOR.to_string()))
                .collect(),
            rounds: bench.rounds,
            peer_tls: plan.tls,
        },
        environment: Environment {
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            sysbench,
            load_average_before: load_before,
            load_average_after: load_average(),
        },
        comparison: Comparison::of(&providers),
        providers,
    };
    let drawing = write_report(&bench.out, &results)?;
    Ok((results, drawing))
}

/// Writes `text` to `dir/name`.
fn write_file(dir: &Path, name: &str, text: String) -> Result<(), Error> {
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(|source| Error::Io {
        what: format!("writing {}", path.display()),
        source,
    })
}

/// Pretty JSON and a final newline (an `error` object if it cannot be
/// serialised).
fn json(v: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}")) + "\n"
}

/// `results.json`, `report.md` and the PNGs; the drawing problems.
fn write_report(dir: &Path, r: &BenchResults) -> Result<Vec<String>, Error> {
    write_file(dir, "results.json", json(r))?;
    write_file(dir, "report.md", report::to_markdown(r))?;
    let mut problems = Vec::new();
    for name in &r.settings.workloads {
        if let Err(e) = draw_workload(dir, r, name) {
            problems.push(e);
        }
    }
    if let Err(e) = draw_sweep(dir, r) {
        problems.push(e);
    }
    Ok(problems)
}

/// `scaling.json`, `scaling.md` and the PNGs of a run over several
/// cluster sizes (`--nodes`); the drawing problems.
pub fn write_scaling(dir: &Path, s: &scaling::Scaling) -> Result<Vec<String>, Error> {
    write_file(dir, "scaling.json", json(s))?;
    write_file(dir, "scaling.md", s.to_markdown())?;
    Ok(s.draw(dir))
}

/// Throughput over time of each provider's first measured round (round 0
/// unless it failed); latency percentiles of every round merged.
fn draw_workload(dir: &Path, r: &BenchResults, workload: &str) -> Result<(), String> {
    let runs: Vec<(&str, &results::WorkloadResults)> = r
        .providers
        .iter()
        .filter_map(|p| Some((p.provider.as_str(), p.workload(workload)?)))
        .collect();
    let load = workload::find(workload)
        .map(|w| w.load_label(r.settings.nodes))
        .unwrap_or_default();
    let (throughput, latency) = report::plot_names(workload);
    let series: Vec<Series> = runs
        .iter()
        .filter_map(|(provider, w)| {
            let (round, m) = w
                .rounds
                .iter()
                .find_map(|x| Some((x.slot.round, x.outcome.measured.as_ref()?)))?;
            Some(Series {
                label: format!("{provider}, round {round}: {:.1} tps", m.tps),
                points: m.per_second.iter().map(|s| (s.second, s.tps)).collect(),
            })
        })
        .collect();
    let path = dir.join(&throughput);
    let title = format!("{workload}, {load}: transactions per second");
    plot::throughput(&path, &title, &series)
        .map_err(|e| format!("cannot draw {}: {e}", path.display()))?;
    let names: Vec<&str> = results::PERCENTILES
        .iter()
        .map(|(name, _)| *name)
        .chain(["max"])
        .collect();
    let series: Vec<Series> = runs
        .iter()
        .filter_map(|(provider, w)| {
            let s = w.summary.as_ref()?;
            Some(Series {
                label: provider.to_string(),
                points: s
                    .merged_latency_ms
                    .percentiles
                    .iter()
                    .filter_map(|p| {
                        let i = names.iter().position(|n| *n == p.name)?;
                        Some((i as f64, p.ms))
                    })
                    .collect(),
            })
        })
        .collect();
    let path = dir.join(&latency);
    let title = match r.settings.rounds {
        1 => format!("{workload}, {load}: latency percentiles"),
        n => format!("{workload}, {load}: latency percentiles, {n} rounds merged"),
    };
    plot::latency(&path, &title, &names, &series)
        .map_err(|e| format!("cannot draw {}: {e}", path.display()))
}

/// The thread sweep's curve, `sweep.png`: each provider's median tps at
/// each thread count of the sweep that ran (nothing when fewer than two
/// points did).
fn draw_sweep(dir: &Path, r: &BenchResults) -> Result<(), String> {
    let points = workload::sweep();
    let series: Vec<Series> = r
        .providers
        .iter()
        .filter_map(|p| {
            let pts: Vec<(f64, f64)> = points
                .iter()
                .filter_map(|w| {
                    Some((
                        f64::from(w.threads),
                        p.workload(w.name)?.summary.as_ref()?.tps,
                    ))
                })
                .collect();
            (pts.len() >= 2).then(|| Series {
                label: p.provider.clone(),
                points: pts,
            })
        })
        .collect();
    if series.is_empty() {
        return Ok(());
    }
    let path = dir.join(report::SWEEP_PNG);
    plot::sweep(
        &path,
        "oltp_write_only on node1: transactions per second by client threads",
        &series,
    )
    .map_err(|e| format!("cannot draw {}: {e}", path.display()))
}

/// `0.52 0.31 0.20`: the 1, 5 and 15 minute load averages.
fn load_average() -> Option<String> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let figures: Vec<&str> = text.split_whitespace().take(3).collect();
    Some(figures.join(" "))
}

/// `sysbench 1.0.20`, or an error that says how to install it.
fn sysbench_version() -> Result<String, Error> {
    let out = Command::new("sysbench")
        .arg("--version")
        .output()
        .map_err(|source| Error::Io {
            what: "cannot run `sysbench --version`; install sysbench (scripts/setup.sh)".into(),
            source,
        })?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// `2025-01-31T23:59:59Z`, or `20250131T235959Z` when `compact` (for a folder name).
pub fn utc(t: SystemTime, compact: bool) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    let (hh, mm, ss) = (rem / 3600, rem % 3600 / 60, rem % 60);
    if compact {
        format!("{y:04}{m:02}{d:02}T{hh:02}{mm:02}{ss:02}Z")
    } else {
        format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z")
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn odd_rounds_reverse_the_provider_order() {
        let p = ["lockstep", "galera"];
        let orders: Vec<Vec<&&str>> = (0..4).map(|r| round_order(&p, r)).collect();
        assert_eq!(
            orders,
            [
                [&"lockstep", &"galera"],
                [&"galera", &"lockstep"],
                [&"lockstep", &"galera"],
                [&"galera", &"lockstep"]
            ]
        );
    }

    #[test]
    fn timestamps_are_utc() {
        let t = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(utc(t, false), "2023-11-14T22:13:20Z");
        assert_eq!(utc(t, true), "20231114T221320Z");
    }
}
