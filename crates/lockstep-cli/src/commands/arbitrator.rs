//! `lockstep arbitrator` (and `garbd` by name): a voting member with no
//! database, for two-node and two-site clusters (ADR 0018). It takes
//! garbd's flags, its `--cfg` file and Debian's `/etc/default/garb`
//! (`--defaults-file`), and writes its status where `lockstep status
//! --arbitrator` and `lockstep check --arbitrator` read it.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lockstep::arbitrator::{Arbitrator, ArbitratorConfig};
use lockstep::log::Level;

use crate::arbitrator::config::{
    listen_address, parse_cfg, parse_defaults, Settings, DEFAULT_GROUP, DEFAULT_NAME,
};
use crate::arbitrator::status_file;
use crate::cluster_bench::utc;
use crate::error::CliError;

/// Set in the environment of the process `--daemon` starts, which must
/// not start another.
const DAEMON_CHILD: &str = "LOCKSTEP_ARBITRATOR_DAEMON_CHILD";

#[derive(Debug, clap::Args)]
#[command(after_help = "garbd's flags and files work as they do for garbd; \
    invoked as `garbd` (a symlink), `lockstep` runs this command. Exit status: 0 after \
    SIGTERM/SIGINT and a graceful leave, 1 on error or when the cluster drops it.")]
pub struct Args {
    /// Group address: gcomm://host:port,host:port of running members.
    #[arg(short = 'a', long)]
    address: Option<String>,
    /// The group address, as garbd takes it without a flag.
    #[arg(value_name = "ADDRESS", conflicts_with = "address")]
    positional: Option<String>,
    /// Cluster name (wsrep_cluster_name of the data nodes).
    #[arg(short = 'g', long)]
    group: Option<String>,
    /// Provider options, `key=value;...` (gmcast.listen_addr, pc.weight,
    /// socket.ssl_cert/_key/_ca, evs.suspect_timeout, ...).
    #[arg(short = 'o', long)]
    options: Option<String>,
    /// Member name shown in the cluster.
    #[arg(short = 'n', long)]
    name: Option<String>,
    /// Log file (default: standard error).
    #[arg(short = 'l', long)]
    log: Option<String>,
    /// Run in the background.
    #[arg(short = 'd', long)]
    daemon: bool,
    /// garbd configuration file: `key = value` lines with the long names.
    #[arg(short = 'c', long)]
    cfg: Option<PathBuf>,
    /// Working directory: the status file (and, rarely, a receive spool).
    #[arg(short = 'w', long)]
    workdir: Option<String>,
    /// Debian's garbd settings (`GALERA_NODES`, `GALERA_GROUP`, ...).
    #[arg(long, value_name = "FILE")]
    defaults_file: Option<PathBuf>,
    /// garbd's backup request: not supported (take backups on a data node).
    #[arg(long, hide = true)]
    sst: Option<String>,
    #[arg(long, hide = true)]
    donor: Option<String>,
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    let s = settings(&args)?;
    if s.sst.is_some() || s.donor.is_some() {
        return Err(CliError::Usage(
            "--sst/--donor (a backup through the arbitrator) are not supported: Lockstep's \
             arbitrator holds no data; run mariabackup on a data node"
                .into(),
        ));
    }
    let address = s
        .address
        .clone()
        .ok_or_else(|| CliError::Usage("Group address not specified (--address)".into()))?;
    let workdir = PathBuf::from(s.workdir.clone().unwrap_or_else(|| ".".into()));
    if !workdir.is_dir() {
        return Err(CliError::Usage(format!(
            "working directory {} does not exist",
            workdir.display()
        )));
    }
    if s.daemon && std::env::var_os(DAEMON_CHILD).is_none() {
        return daemonize(s.log.as_deref());
    }
    set_log(s.log.as_deref())?;
    let options = s.options.clone().unwrap_or_default();
    let cfg = ArbitratorConfig {
        name: s.name.clone().unwrap_or_else(|| DEFAULT_NAME.into()),
        cluster_name: s.group.clone().unwrap_or_else(|| DEFAULT_GROUP.into()),
        address,
        node_address: listen_address(&options),
        options,
        work_dir: workdir.clone(),
    };
    let mut arb = Arbitrator::start(cfg.clone(), log_line).map_err(CliError::Usage)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Usage(format!("cannot start the runtime: {e}")))?;
    let outcome = rt.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .map_err(|e| format!("cannot watch SIGTERM: {e}"))?;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    publish(&workdir, &cfg, &arb);
                    if let Some(rc) = arb.ended() {
                        return Err(format!("the arbitrator's session ended (status {rc})"));
                    }
                }
                _ = term.recv() => return Ok("SIGTERM"),
                _ = tokio::signal::ctrl_c() => return Ok("SIGINT"),
            }
        }
    });
    let _ = std::fs::remove_file(status_file::path_in(&workdir));
    match outcome {
        Ok(signal) => {
            log_line(Level::Info, &format!("{signal}: leaving the cluster"));
            arb.stop();
            Ok(ExitCode::SUCCESS)
        }
        Err(why) => {
            log_line(Level::Error, &why);
            Ok(ExitCode::FAILURE)
        }
    }
}

/// Whether the program was started under the name `garbd` (a symlink),
/// which makes it this command with garbd's command line.
pub fn invoked_as_garbd(arg0: &std::ffi::OsStr) -> bool {
    Path::new(arg0).file_name().is_some_and(|n| n == "garbd")
}

/// Command line over `--cfg` over `--defaults-file`.
fn settings(args: &Args) -> Result<Settings, CliError> {
    let read = |p: &Path| {
        std::fs::read_to_string(p)
            .map_err(|e| CliError::Usage(format!("cannot read {}: {e}", p.display())))
    };
    let cfg = match &args.cfg {
        Some(p) => {
            parse_cfg(&read(p)?).map_err(|e| CliError::Usage(format!("{}: {e}", p.display())))?
        }
        None => Settings::default(),
    };
    let defaults = match &args.defaults_file {
        Some(p) => parse_defaults(&read(p)?)
            .map_err(|e| CliError::Usage(format!("{}: {e}", p.display())))?,
        None => Settings::default(),
    };
    let cli = Settings {
        address: args.address.clone().or(args.positional.clone()),
        group: args.group.clone(),
        options: args.options.clone(),
        name: args.name.clone(),
        log: args.log.clone(),
        workdir: args.workdir.clone(),
        daemon: args.daemon,
        sst: args.sst.clone(),
        donor: args.donor.clone(),
    };
    Ok(cli.over(cfg.over(defaults)))
}

/// The same command again in the background, in its own process group,
/// detached from the terminal; this process reports its pid and exits.
fn daemonize(log: Option<&str>) -> Result<ExitCode, CliError> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe()
        .map_err(|e| CliError::Usage(format!("cannot find this program: {e}")))?;
    let mut argv = std::env::args_os();
    let argv0 = argv.next();
    let mut cmd = Command::new(exe);
    if argv0.is_some_and(|a| invoked_as_garbd(&a)) {
        cmd.arg("arbitrator");
    }
    let stderr = match log {
        Some(_) => Stdio::null(),
        None => Stdio::inherit(),
    };
    let child = cmd
        .args(argv)
        .env(DAEMON_CHILD, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .process_group(0)
        .spawn()
        .map_err(|e| CliError::Usage(format!("cannot start in the background: {e}")))?;
    println!(
        "lockstep arbitrator running in the background, pid {}",
        child.id()
    );
    Ok(ExitCode::SUCCESS)
}

/// Where log lines go: the `--log` file, or standard error.
static LOG: Mutex<Option<std::fs::File>> = Mutex::new(None);

fn set_log(path: Option<&str>) -> Result<(), CliError> {
    if let Some(p) = path {
        let f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .map_err(|e| CliError::Usage(format!("cannot open log file {p}: {e}")))?;
        *LOG.lock().unwrap_or_else(|p| p.into_inner()) = Some(f);
    }
    Ok(())
}

fn log_line(level: Level, msg: &str) {
    let tag = match level {
        Level::Error => "ERROR",
        Level::Warn => "WARN",
        Level::Info => "INFO",
    };
    let line = format!("{} {tag}: {msg}\n", utc(SystemTime::now(), false));
    let mut guard = LOG.lock().unwrap_or_else(|p| p.into_inner());
    match guard.as_mut() {
        Some(f) => {
            let _ = f.write_all(line.as_bytes());
        }
        None => {
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
    }
}

fn publish(workdir: &Path, cfg: &ArbitratorConfig, arb: &Arbitrator) {
    let status = status_file::Status {
        name: cfg.name.clone(),
        pid: std::process::id(),
        listen: cfg.node_address.clone(),
        updated_ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        wsrep: arb
            .status()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    };
    if let Err(e) = status_file::write(workdir, &status) {
        log_line(
            Level::Warn,
            &format!("cannot write the status file in {}: {e}", workdir.display()),
        );
    }
}
