//! `lockstep probe`: command-line surface of the propagation probe (see `crate::probe`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use lockstep_testkit::{ClusterState, TCP_PASSWORD, TCP_USER};

use super::DEFAULT_DIR;
use crate::error::CliError;
use crate::mariadb::option_file::OptionFile;
use crate::mariadb::settings;
use crate::mariadb::{ConnectSpec, Credentials, Endpoint};
use crate::probe::{self, histogram, ProbeConfig, ProbeError};

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Nodes come from --a/--b (HOST:PORT, [V6]:PORT or a socket path, credentials from \
--defaults-file), or else from the `lockstep up` cluster in --dir (node numbers \
--node-a/--node-b, its TCP account unless --defaults-file is given).

The probe creates the table `<database>.probe` on A and updates its odd rows; \
background load (--load-threads) updates even rows on A.")]
pub struct Args {
    /// Node A, the writer: HOST:PORT, [V6ADDR]:PORT or /path/to/socket.
    #[arg(long = "a", value_name = "ADDR", requires = "b")]
    a: Option<String>,
    /// Node B, the reader.
    #[arg(long = "b", value_name = "ADDR", requires = "a")]
    b: Option<String>,
    /// Cluster directory of `lockstep up` (when --a/--b are not given).
    #[arg(long, env = "LOCKSTEP_HOME", default_value = DEFAULT_DIR)]
    dir: PathBuf,
    /// With --dir: the writer's node number.
    #[arg(long, default_value_t = 1)]
    node_a: usize,
    /// With --dir: the reader's node number.
    #[arg(long, default_value_t = 2)]
    node_b: usize,
    /// MariaDB option file with user= and password= ([client], [clustercheck]).
    #[arg(long, value_name = "FILE")]
    defaults_file: Option<PathBuf>,
    /// Rounds of write-on-A, read-on-B.
    #[arg(long, default_value_t = 2000)]
    rounds: u64,
    /// Causal reads on B (wsrep_sync_wait=1): expect 0 stale rounds.
    #[arg(long)]
    sync_wait: bool,
    /// Sessions doing small updates on A meanwhile.
    #[arg(long, default_value_t = 0, value_name = "N")]
    load_threads: usize,
    /// Rows in the probe table.
    #[arg(long, default_value_t = 1000)]
    rows: u32,
    /// Give up on a round whose value B has not shown after this long.
    #[arg(long, default_value_t = 10_000, value_name = "MS")]
    max_wait_ms: u64,
    /// Database for the probe table.
    #[arg(long, default_value = "lockstep_probe")]
    database: String,
    /// Write a histogram of the delays as PNG.
    #[arg(long, value_name = "PATH")]
    png: Option<PathBuf>,
    /// Write the report as JSON (`-` for stdout instead of the table).
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    let cfg = config(&args)?;
    let report = probe::run(&cfg)?;
    let to_stdout = args.json.as_deref() == Some(Path::new("-"));
    if !to_stdout {
        print!("{}", report.to_text());
    }
    if let Some(path) = &args.json {
        if to_stdout {
            print!("{}", report.to_json());
        } else {
            std::fs::write(path, report.to_json()).map_err(|source| ProbeError::Output {
                path: path.clone(),
                source,
            })?;
        }
    }
    if let Some(path) = &args.png {
        histogram::write_png(path, &report)?;
        if !to_stdout {
            println!("histogram: {}", path.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn config(args: &Args) -> Result<ProbeConfig, ProbeError> {
    if args.rounds == 0 || args.rows == 0 {
        return Err(ProbeError::Usage(
            "--rounds and --rows must be at least 1".into(),
        ));
    }
    let file = settings::load(args.defaults_file.as_deref())?;
    let ((a, a_label), (b, b_label)) = match (&args.a, &args.b) {
        (Some(a), Some(b)) => {
            let creds = settings::credentials(&file);
            (
                from_address(a, &creds, "--a")?,
                from_address(b, &creds, "--b")?,
            )
        }
        _ => {
            let state = ClusterState::load(&args.dir)?;
            let creds = cluster_credentials(args.defaults_file.is_some(), &file);
            (
                from_cluster(&state, args.node_a, &creds, "--node-a")?,
                from_cluster(&state, args.node_b, &creds, "--node-b")?,
            )
        }
    };
    if a == b {
        return Err(ProbeError::Usage(format!(
            "A and B are the same server ({}); the probe needs two nodes",
            a.endpoint
        )));
    }
    Ok(ProbeConfig {
        a,
        b,
        a_label,
        b_label,
        rounds: args.rounds,
        sync_wait: args.sync_wait,
        load_threads: args.load_threads,
        rows: args.rows,
        max_wait: Duration::from_millis(args.max_wait_ms.max(1)),
        database: args.database.clone(),
    })
}

/// A `lockstep up` cluster has a known TCP account; a given file wins.
fn cluster_credentials(have_file: bool, file: &OptionFile) -> Credentials {
    if have_file {
        settings::credentials(file)
    } else {
        Credentials {
            user: TCP_USER.into(),
            password: Some(TCP_PASSWORD.into()),
        }
    }
}

fn from_address(
    addr: &str,
    creds: &Credentials,
    flag: &str,
) -> Result<(ConnectSpec, String), ProbeError> {
    let endpoint = Endpoint::parse(addr).map_err(|e| ProbeError::Usage(format!("{flag}: {e}")))?;
    let label = endpoint.to_string();
    Ok((
        ConnectSpec {
            endpoint,
            credentials: creds.clone(),
        },
        label,
    ))
}

fn from_cluster(
    state: &ClusterState,
    number: usize,
    creds: &Credentials,
    flag: &str,
) -> Result<(ConnectSpec, String), ProbeError> {
    let node = number
        .checked_sub(1)
        .and_then(|i| state.nodes.get(i))
        .ok_or_else(|| {
            ProbeError::Usage(format!(
                "{flag} {number}: the cluster has nodes 1 to {}",
                state.nodes.len()
            ))
        })?;
    let endpoint = Endpoint::Tcp {
        host: "127.0.0.1".into(),
        port: node.port,
    };
    let label = format!("{} ({endpoint})", node.name);
    Ok((
        ConnectSpec {
            endpoint,
            credentials: creds.clone(),
        },
        label,
    ))
}
