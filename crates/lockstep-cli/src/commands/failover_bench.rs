//! `lockstep failover-bench`: command-line surface of `crate::failover`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use crate::cluster_bench::contender::Contender;
use crate::error::CliError;
use crate::failover::haproxy::CheckTiming;
use crate::failover::keepalived::ScriptTiming;
use crate::failover::{self, report, Fault, Layout, Plan};

#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "\
Starts real clusters with each provider behind Debian's HAProxy (every node active, or one \
writer with backups) and keepalived (a virtual IP moved between network namespaces), runs an \
application that writes through the balancer and records every statement, then hits node1 with \
each fault in turn. Reports the outage, failed statements by error code, acknowledged writes \
lost, and writes answered by a node that was not Synced and Primary; timeline plots per fault. \
keepalived and the namespace cut need root (network namespaces); without root they are skipped.

Exit code 1 when a run failed or an acknowledged write was lost; writes answered by a node that \
was not Synced and Primary are reported. See docs/failover.md.")]
pub struct Args {
    /// Comma-separated contenders, as for `lockstep bench` (`lockstep`, `galera`, a library
    /// path; settings after `+`).
    #[arg(long, default_value = "lockstep,galera", value_name = "LIST")]
    providers: String,
    /// Comma-separated layouts: haproxy-leastconn, haproxy-writer, keepalived.
    #[arg(
        long,
        default_value = "haproxy-leastconn,haproxy-writer,keepalived",
        value_name = "LIST"
    )]
    layouts: String,
    /// Comma-separated faults: kill, cut, isolate, drain, donor, spare-donor.
    #[arg(
        long,
        default_value = "kill,cut,isolate,drain,donor,spare-donor",
        value_name = "LIST"
    )]
    faults: String,
    /// Application clients writing through the balancer.
    #[arg(long, default_value_t = 4, value_name = "N")]
    clients: u32,
    /// Pause of each client between two statements.
    #[arg(long, default_value_t = 20, value_name = "MS")]
    pace_ms: u64,
    /// Seconds node1 stays down or cut.
    #[arg(long, default_value_t = 10, value_name = "SECS")]
    down_secs: u64,
    /// Quiet seconds before each fault and after each recovery.
    #[arg(long, default_value_t = 3, value_name = "SECS")]
    settle_secs: u64,
    /// MiB of rows loaded first when the donor fault runs (its SST copies them).
    #[arg(long, default_value_t = 256, value_name = "MIB")]
    sst_mb: u64,
    /// HAProxy's `inter`.
    #[arg(long, default_value_t = CheckTiming::README.inter_ms, value_name = "MS")]
    inter_ms: u64,
    /// HAProxy's and keepalived's `fall`.
    #[arg(long, default_value_t = CheckTiming::README.fall, value_name = "N")]
    fall: u32,
    /// HAProxy's and keepalived's `rise`.
    #[arg(long, default_value_t = CheckTiming::README.rise, value_name = "N")]
    rise: u32,
    /// keepalived's script `interval`.
    #[arg(long, default_value_t = ScriptTiming::README.interval_s, value_name = "SECS")]
    interval_secs: u32,
    /// `lockstep check --cache-ms` of the HTTP service (README: 500).
    #[arg(long, default_value_t = 500, value_name = "MS")]
    check_cache_ms: u64,
    /// sysbench oltp_write_only threads through the balancer beside the application (0: none).
    #[arg(long, default_value_t = 2, value_name = "N")]
    sysbench_threads: u32,
    /// sysbench's cap in transactions per second (--rate).
    #[arg(long, default_value_t = 100, value_name = "TPS")]
    sysbench_rate: u32,
    /// Run on loopback even as root (no keepalived, no cut).
    #[arg(long)]
    no_netns: bool,
    /// Our library, instead of target/release/liblockstep.so.
    #[arg(long, value_name = "PATH")]
    lockstep_lib: Option<PathBuf>,
    /// Report folder; default failover-out/<UTC timestamp>.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Also write the report here (plots copied beside it, in <name>/).
    #[arg(long, value_name = "FILE")]
    doc: Option<PathBuf>,
}

fn list<T>(s: &str, parse: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, CliError> {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| parse(x).map_err(CliError::Usage))
        .collect()
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    let contenders = list(&args.providers, |p| {
        Contender::parse(p, args.lockstep_lib.as_ref())
    })?;
    let root = nix::unistd::geteuid().is_root();
    let stamp = crate::cluster_bench::utc(SystemTime::now(), true);
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("failover-out").join(&stamp));
    std::fs::create_dir_all(&out)
        .map_err(|e| CliError::Usage(format!("creating {}: {e}", out.display())))?;
    let plan = Plan {
        contenders,
        layouts: list(&args.layouts, Layout::parse)?,
        faults: list(&args.faults, Fault::parse)?,
        out: out.clone(),
        clients: args.clients.max(1),
        pace: Duration::from_millis(args.pace_ms),
        settle: Duration::from_secs(args.settle_secs),
        down: Duration::from_secs(args.down_secs),
        netns: root && !args.no_netns,
        sst_mb: args.sst_mb,
        haproxy_timing: CheckTiming {
            inter_ms: args.inter_ms,
            fall: args.fall,
            rise: args.rise,
        },
        keepalived_timing: ScriptTiming {
            interval_s: args.interval_secs,
            fall: args.fall,
            rise: args.rise,
        },
        check_cache_ms: args.check_cache_ms,
        sysbench_threads: args.sysbench_threads,
        sysbench_rate: args.sysbench_rate,
    };
    let runs = failover::run(&plan);
    let json = serde_json::to_string_pretty(&runs).unwrap_or_default();
    let _ = std::fs::write(out.join("results.json"), json);
    let header = format!(
        "Written by `lockstep failover-bench` ({stamp}{}). Raw files: statements, \
         events and configurations per run in the run's `raw/` folder.",
        commit()
            .map(|c| format!(", commit {c}"))
            .unwrap_or_default()
    );
    let local = report::markdown(&plan, &runs, &header, &|p: &Path| {
        p.strip_prefix(&out).unwrap_or(p).display().to_string()
    });
    std::fs::write(out.join("report.md"), &local)
        .map_err(|e| CliError::Usage(format!("writing {}/report.md: {e}", out.display())))?;
    if let Some(doc) = &args.doc {
        write_doc(doc, &plan, &runs, &header)?;
    }
    println!("{local}");
    println!("report: {}", out.join("report.md").display());
    Ok(if report::all_good(&runs) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The document, with each plot copied to `<doc dir>/<doc stem>/`.
fn write_doc(
    doc: &Path,
    plan: &Plan,
    runs: &[failover::LayoutRun],
    header: &str,
) -> Result<(), CliError> {
    let stem = doc
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "failover".into());
    let img_dir = doc.parent().unwrap_or(Path::new(".")).join(&stem);
    std::fs::create_dir_all(&img_dir)
        .map_err(|e| CliError::Usage(format!("creating {}: {e}", img_dir.display())))?;
    let text = report::markdown(plan, runs, header, &|p: &Path| {
        // raw/<layout>-<provider>/<fault>.png -> <stem>/<layout>-<provider>-<fault>.png
        let run = p
            .parent()
            .and_then(Path::file_name)
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_default();
        let file = p
            .file_name()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_default();
        let name = format!("{run}-{file}");
        let _ = std::fs::copy(p, img_dir.join(&name));
        format!("{stem}/{name}")
    });
    std::fs::write(doc, text)
        .map_err(|e| CliError::Usage(format!("writing {}: {e}", doc.display())))
}

fn commit() -> Option<String> {
    let o = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}
