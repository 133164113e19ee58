//! `lockstep check`: command-line surface of the health service (see `crate::check`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::check::health::Policy;
use crate::check::server::Limits;
use crate::check::{listen, run_once, run_service, CheckConfig, CheckError, OnceFormat};
use crate::error::CliError;
use crate::mariadb::settings::{self, CliTarget};

/// `--once` exit status when the configuration is unusable (bad option file, ...).
const ONCE_CONFIG_ERROR: u8 = 3;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Healthy (HTTP 200) when the node is in the Primary component, wsrep_ready=ON, \
Synced (or Donor/Desynced with --available-when-donor), not rejecting queries, \
not read-only (with --disable-when-readonly), under --max-recv-queue, and no \
maintenance file exists; otherwise 503. Any path answers; ?format=json or \
`Accept: application/json` returns every input of the decision.

Credentials come from --defaults-file only (groups [client], then [clustercheck]).

Exit status with --once: 0 healthy, 1 unhealthy, 2 MariaDB cannot be reached, \
3 configuration error.")]
pub struct Args {
    /// Address to serve on, repeatable: 0.0.0.0:9200, [::1]:9200, :9200 (all).
    /// Default: 0.0.0.0:9200 and [::]:9200.
    #[arg(long = "listen", value_name = "ADDR:PORT")]
    listen: Vec<String>,
    /// MariaDB unix socket (default: the option file's, else /run/mysqld/mysqld.sock).
    #[arg(long, value_name = "PATH", conflicts_with = "host")]
    socket: Option<PathBuf>,
    /// Check the arbitrator whose working directory this is (`lockstep
    /// arbitrator --workdir`) instead of a MariaDB server: healthy while it
    /// is running, Synced and in the primary component.
    #[arg(long, value_name = "WORKDIR", conflicts_with_all = ["socket", "host", "port", "defaults_file"])]
    arbitrator: Option<PathBuf>,
    /// MariaDB host for TCP (`localhost` means the socket, as for `mariadb`).
    #[arg(long)]
    host: Option<String>,
    /// MariaDB TCP port (default 3306).
    #[arg(long)]
    port: Option<u16>,
    /// MariaDB option file with user= and password= (never pass them as arguments).
    #[arg(long, value_name = "FILE")]
    defaults_file: Option<PathBuf>,
    /// Report a Donor/Desynced node (wsrep_local_state=2) as available.
    #[arg(long)]
    available_when_donor: bool,
    /// Report a node with read_only=ON as unavailable.
    #[arg(long)]
    disable_when_readonly: bool,
    /// While this file exists the node is reported unavailable (drain it for maintenance).
    #[arg(long, value_name = "PATH")]
    maintenance_file: Option<PathBuf>,
    /// Report unavailable when wsrep_local_recv_queue exceeds N.
    #[arg(long, value_name = "N")]
    max_recv_queue: Option<u64>,
    /// Check MariaDB at most this often; answers come from the last result.
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    cache_ms: u64,
    /// A check that takes longer reports the node unavailable.
    #[arg(long, default_value_t = 2000, value_name = "MS")]
    timeout_ms: u64,
    /// Close keep-alive connections idle this long.
    #[arg(long, default_value_t = 30_000, value_name = "MS")]
    idle_timeout_ms: u64,
    /// A request head must arrive within this time of its first byte (else 408).
    #[arg(long, default_value_t = 5_000, value_name = "MS")]
    request_timeout_ms: u64,
    /// Open connections at most; more wait in the listen backlog.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    max_connections: usize,
    /// Event-loop threads (default: CPUs, at most 4).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Check once, print the verdict, exit 0 healthy / 1 unhealthy / 2 unreachable.
    #[arg(long)]
    once: bool,
    /// Output of --once: one line of text, or the JSON report.
    #[arg(long, value_enum, default_value = "text", requires = "once")]
    format: FormatArg,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum FormatArg {
    Text,
    Json,
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    let once = args.once;
    let format = match args.format {
        FormatArg::Text => OnceFormat::Text,
        FormatArg::Json => OnceFormat::Json,
    };
    let cfg = match config(args) {
        Ok(c) => c,
        // A check that cannot even start is Nagios' UNKNOWN (3): keepalived
        // treats it as a failure like any non-zero status.
        Err(e) if once => {
            println!("Cannot check: {e}.");
            return Ok(ExitCode::from(ONCE_CONFIG_ERROR));
        }
        Err(e) => return Err(e.into()),
    };
    let code = if once {
        run_once(&cfg, format)?
    } else {
        run_service(cfg)?
    };
    Ok(code)
}

fn config(args: Args) -> Result<CheckConfig, CheckError> {
    let positive = |v: u64, flag: &str| {
        if v == 0 {
            Err(CheckError::Usage(format!("{flag} must be at least 1")))
        } else {
            Ok(Duration::from_millis(v))
        }
    };
    let cache_interval = positive(args.cache_ms, "--cache-ms")?;
    let timeout = positive(args.timeout_ms, "--timeout-ms")?;
    let limits = Limits {
        idle: positive(args.idle_timeout_ms, "--idle-timeout-ms")?,
        request: positive(args.request_timeout_ms, "--request-timeout-ms")?,
        write: Duration::from_secs(5),
        max_connections: args.max_connections.max(1),
    };
    let listen_is_default = args.listen.is_empty();
    let listen = if listen_is_default {
        listen::default_addrs()
    } else {
        let mut all = Vec::new();
        for l in &args.listen {
            all.extend(listen::parse_listen(l).map_err(CheckError::Usage)?);
        }
        all
    };
    let target = CliTarget {
        socket: args.socket,
        host: args.host,
        port: args.port,
    };
    let spec = settings::resolve(&target, args.defaults_file.as_deref())?;

    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    Ok(CheckConfig {
        spec,
        policy: Policy {
            available_when_donor: args.available_when_donor,
            disable_when_readonly: args.disable_when_readonly,
            max_recv_queue: args.max_recv_queue,
        },
        maintenance_file: args.maintenance_file,
        arbitrator: args.arbitrator,
        cache_interval,
        timeout,
        listen,
        listen_is_default,
        limits,
        worker_threads: args.threads.unwrap_or(cpus.min(4)).max(1),
    })
}
