//! `lockstep bench`: command-line surface of the provider benchmark (see
//! `crate::cluster_bench`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use crate::cluster_bench::contender::Contender;
use crate::cluster_bench::large_trx::{self, LargeTrxPlan};
use crate::cluster_bench::results::BenchResults;
use crate::cluster_bench::run::Plan;
use crate::cluster_bench::workload::Workload;
use crate::cluster_bench::{self, report, scaling, Bench};
use crate::error::CliError;

#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "\
Workloads: oltp_write_only (8 threads on node1), oltp_read_write (12 threads over \
the nodes), oltp_update_non_index (1 thread on node1); large_trx (a 1M-row UPDATE \
on node1 of 3 nodes while node2 runs 4-thread point updates: node2's worst second against its \
median, and its maximum latency; one run per provider, report in large_trx.png). In each round, for each \
provider a fresh cluster of --nodes nodes runs every workload on fresh tables, then CHECKSUM \
TABLE is compared on all nodes; odd rounds run the providers in reverse order \
(ABBA). The figures are medians over the rounds (max: the highest). Ratios are \
Lockstep/Galera: TPS higher is better, latency lower is better. With several \
--nodes (`3,5,7`) the whole benchmark runs once per size, each report in nodes-N/, \
and scaling.md puts TPS, p95 and the ratios side by side by number of nodes.

Exit code 1 when a run failed or the nodes ended with different data; the numbers \
and the report are written all the same. See docs/bench.md.")]
pub struct Args {
    /// Measured seconds per workload, provider and round.
    #[arg(long, default_value_t = 20, value_name = "SECS")]
    time: u64,
    /// Unmeasured seconds of the same load before each measured run.
    #[arg(long, default_value_t = 5, value_name = "SECS")]
    warmup: u64,
    /// Comma-separated workloads, or `all`.
    #[arg(long, default_value = "all", value_name = "LIST")]
    workloads: String,
    /// Comma-separated providers, run in this order in even rounds (reversed in
    /// odd ones): `lockstep`, `galera`, or library paths. An item may add its
    /// own settings after `+`, to compare configurations in one run:
    /// `lockstep+innodb_flush_log_at_trx_commit=0+lockstep.cache_sync=yes`
    /// (a name with a dot is a provider option, any other a [mysqld] line).
    #[arg(long, default_value = "lockstep,galera", value_name = "LIST")]
    providers: String,
    /// Rounds: every provider runs every workload once per round.
    #[arg(long, default_value_t = 2, value_name = "N")]
    rounds: usize,
    /// Report folder [default: bench-out/<UTC timestamp>].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// wsrep_slave_threads, for every provider.
    #[arg(long, default_value_t = 4, value_name = "N")]
    slave_threads: u32,
    /// Lockstep's library [default: $LOCKSTEP_PROVIDER or target/release/liblockstep.so].
    #[arg(long, value_name = "PATH")]
    lockstep_lib: Option<PathBuf>,
    /// sysbench tables.
    #[arg(long, default_value_t = 4, value_name = "N")]
    tables: u32,
    /// Rows per table.
    #[arg(long, default_value_t = 10_000, value_name = "ROWS")]
    table_size: u32,
    /// Peers talk mutual TLS in every cluster (socket.ssl_cert/_key/_ca from a
    /// CA made per cluster), Lockstep and Galera alike.
    #[arg(long)]
    tls: bool,
    /// Extra wsrep_provider_options for Lockstep's clusters only (Galera's
    /// keep their defaults), e.g. `lockstep.commit_bypass=64M`: `lockstep`
    /// and every provider given as a library path, unless its file name
    /// starts with `libgalera`.
    #[arg(long, default_value = "", value_name = "OPTS")]
    lockstep_options: String,
    /// Also measure the floor: one MariaDB with the same my.cnf and wsrep
    /// off, in every round; the report gives each provider's share of it.
    #[arg(long)]
    floor: bool,
    /// Cluster sizes, comma-separated: the whole benchmark runs once per
    /// size (reports in nodes-N/), then scaling.md compares them.
    #[arg(long, default_value = "3", value_name = "LIST")]
    nodes: String,
    /// large_trx: rows the big UPDATE changes.
    #[arg(long, default_value_t = 1_000_000, value_name = "ROWS")]
    large_rows: u64,
    /// large_trx: seconds of point updates on node 2 (the UPDATE starts after 5).
    #[arg(long, default_value_t = 30, value_name = "SECS")]
    large_time: u64,
    /// large_trx: stream the UPDATE (both providers) in fragments of this
    /// many rows (`wsrep_trx_fragment_size`); by default it replicates as
    /// one writeset at commit.
    #[arg(long, value_name = "ROWS")]
    large_fragment_rows: Option<u64>,
}

/// `large_trx` is not a sysbench script: it is split off the list and run
/// on its own after the others.
const LARGE_TRX: &str = "large_trx";

fn split_large_trx(list: &str) -> (String, bool) {
    let names: Vec<&str> = list.split(',').map(str::trim).collect();
    let large = names.iter().any(|n| *n == LARGE_TRX || *n == "all");
    let rest: Vec<&str> = names.into_iter().filter(|n| *n != LARGE_TRX).collect();
    (rest.join(","), large)
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    let (rest, large) = split_large_trx(&args.workloads);
    let mut failed = false;
    let out;
    if rest.trim().is_empty() {
        let providers = providers(&args.providers, args.lockstep_lib.as_ref())?;
        out = out_dir(&args);
        failed |= run_large_trx(&args, &providers, &out);
    } else {
        let sizes = scaling::parse_sizes(&args.nodes).map_err(CliError::Usage)?;
        let top = out_dir(&args);
        let mut providers = Vec::new();
        let mut all = Vec::new();
        for &nodes in &sizes {
            // One size: the report in the folder itself, as always.
            let dir = if sizes.len() == 1 {
                top.clone()
            } else {
                top.join(format!("nodes-{nodes}"))
            };
            let bench = bench(
                &Args {
                    workloads: rest.clone(),
                    out: Some(dir),
                    ..args.clone()
                },
                nodes,
            )?;
            let (results, drawing) = cluster_bench::run(&bench)?;
            print!("{}", report::to_text(&results));
            for problem in &drawing {
                eprintln!("lockstep bench: {problem}");
            }
            failed |= results.has_failures() || !drawing.is_empty();
            providers = bench.providers.clone();
            all.push((nodes, results));
        }
        out = top;
        if sizes.len() > 1 {
            failed |= !write_scaling(&out, &all);
        }
        if large {
            failed |= run_large_trx(&args, &providers, &out);
        }
    }
    println!("report: {}", out.display());
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Prints the table over the sizes and writes `scaling.md`, `scaling.json`
/// and the PNGs. Whether everything was written and drawn.
fn write_scaling(out: &std::path::Path, all: &[(usize, BenchResults)]) -> bool {
    let runs: Vec<(usize, &BenchResults)> = all.iter().map(|(n, r)| (*n, r)).collect();
    let s = scaling::Scaling::of(&runs);
    print!("\n{}", s.to_text());
    let problems = match cluster_bench::write_scaling(out, &s) {
        Ok(problems) => problems,
        Err(e) => vec![e.to_string()],
    };
    for problem in &problems {
        eprintln!("lockstep bench: {problem}");
    }
    problems.is_empty()
}

/// Runs `large_trx`, prints its table; whether a run failed.
fn run_large_trx(args: &Args, providers: &[Contender], out: &std::path::Path) -> bool {
    let plan = LargeTrxPlan {
        rows: args.large_rows.max(1),
        time: Duration::from_secs(args.large_time.max(10)),
        slave_threads: args.slave_threads.max(1),
        lockstep_options: args.lockstep_options.clone(),
        fragment_rows: args.large_fragment_rows.filter(|rows| *rows > 0),
        ..LargeTrxPlan::default()
    };
    let runs = large_trx::run(&plan, providers, out);
    let text = large_trx::to_text(&plan, &runs);
    print!("{text}");
    let _ = std::fs::write(out.join("large_trx.txt"), &text);
    runs.iter().any(|r| r.error.is_some() || !r.consistent)
}

fn out_dir(args: &Args) -> PathBuf {
    args.out.clone().unwrap_or_else(|| {
        PathBuf::from("bench-out").join(cluster_bench::utc(SystemTime::now(), true))
    })
}

fn bench(args: &Args, nodes: usize) -> Result<Bench, CliError> {
    if args.time == 0
        || args.rounds == 0
        || args.tables == 0
        || args.table_size == 0
        || args.slave_threads == 0
    {
        return Err(CliError::Usage(
            "--time, --rounds, --tables, --table-size and --slave-threads must be at least 1"
                .into(),
        ));
    }
    let workloads = Workload::parse_list(&args.workloads).map_err(CliError::Usage)?;
    let providers = providers(&args.providers, args.lockstep_lib.as_ref())?;
    let out = out_dir(args);
    Ok(Bench {
        plan: Plan {
            nodes,
            time: Duration::from_secs(args.time),
            warmup: Duration::from_secs(args.warmup),
            tables: args.tables,
            table_size: args.table_size,
            slave_threads: args.slave_threads,
            workloads,
            raw_dir: out.join("raw"),
            tls: args.tls,
            lockstep_options: args.lockstep_options.clone(),
        },
        providers,
        rounds: args.rounds,
        floor: args.floor,
        out,
    })
}

fn providers(list: &str, lockstep_lib: Option<&PathBuf>) -> Result<Vec<Contender>, CliError> {
    let mut out: Vec<Contender> = Vec::new();
    for item in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let c = Contender::parse(item, lockstep_lib)
            .map_err(|e| CliError::Usage(format!("--providers: {e}")))?;
        if !out.iter().any(|o| o.label == c.label) {
            out.push(c);
        }
    }
    if out.is_empty() {
        return Err(CliError::Usage("--providers names no provider".into()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstep_testkit::Provider;

    #[test]
    fn lockstep_lib_replaces_the_default_library() {
        let lib = PathBuf::from("/opt/liblockstep.so");
        let p = providers("lockstep, galera,lockstep", Some(&lib)).unwrap();
        let p: Vec<Provider> = p.into_iter().map(|c| c.provider).collect();
        assert_eq!(p, [Provider::Lockstep(lib.clone()), Provider::Galera]);
        assert!(providers(",", None).is_err());
        // The same provider with other settings is another contender.
        let p = providers(
            "lockstep,lockstep+innodb_flush_log_at_trx_commit=0",
            Some(&lib),
        )
        .unwrap();
        assert_eq!(p.len(), 2);
        assert!(providers("lockstep+flush", None).is_err());
    }

    #[test]
    fn large_trx_is_split_off_the_sysbench_workloads() {
        assert_eq!(split_large_trx("large_trx"), (String::new(), true));
        assert_eq!(
            split_large_trx("oltp_write_only, large_trx"),
            ("oltp_write_only".into(), true)
        );
        assert_eq!(split_large_trx("all"), ("all".into(), true));
        assert_eq!(
            split_large_trx("oltp_read_write"),
            ("oltp_read_write".into(), false)
        );
    }
}
