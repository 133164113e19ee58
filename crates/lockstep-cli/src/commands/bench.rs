//! `lockstep bench`: command-line surface of the provider benchmark (see
//! `crate::cluster_bench`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use lockstep_testkit::Provider;

use crate::cluster_bench::run::Plan;
use crate::cluster_bench::workload::Workload;
use crate::cluster_bench::{self, report, Bench};
use crate::error::CliError;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Workloads: oltp_write_only (8 threads on node1), oltp_read_write (12 threads over \
the 3 nodes), oltp_update_non_index (1 thread on node1). In each round, for each \
provider a fresh 3-node cluster runs every workload on fresh tables, then CHECKSUM \
TABLE is compared on all nodes; odd rounds run the providers in reverse order \
(ABBA). The figures are medians over the rounds (max: the highest). Ratios are \
Lockstep/Galera: TPS higher is better, latency lower is better.

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
    /// odd ones): `lockstep`, `galera`, or library paths.
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
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    let bench = bench(&args)?;
    let (results, drawing) = cluster_bench::run(&bench)?;
    print!("{}", report::to_text(&results));
    for problem in &drawing {
        eprintln!("lockstep bench: {problem}");
    }
    println!("report: {}", bench.out.display());
    Ok(if results.has_failures() || !drawing.is_empty() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn bench(args: &Args) -> Result<Bench, CliError> {
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
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("bench-out").join(cluster_bench::utc(SystemTime::now(), true))
    });
    Ok(Bench {
        plan: Plan {
            nodes: 3,
            time: Duration::from_secs(args.time),
            warmup: Duration::from_secs(args.warmup),
            tables: args.tables,
            table_size: args.table_size,
            slave_threads: args.slave_threads,
            workloads,
            raw_dir: out.join("raw"),
        },
        providers,
        rounds: args.rounds,
        out,
    })
}

fn providers(list: &str, lockstep_lib: Option<&PathBuf>) -> Result<Vec<Provider>, CliError> {
    let mut out: Vec<Provider> = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let p = match (name, lockstep_lib) {
            ("lockstep", Some(path)) => Provider::Lockstep(path.clone()),
            _ => Provider::from_name(name),
        };
        if !out.contains(&p) {
            out.push(p);
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

    #[test]
    fn lockstep_lib_replaces_the_default_library() {
        let lib = PathBuf::from("/opt/liblockstep.so");
        let p = providers("lockstep, galera,lockstep", Some(&lib)).unwrap();
        assert_eq!(p, [Provider::Lockstep(lib), Provider::Galera]);
        assert!(providers(",", None).is_err());
    }
}
