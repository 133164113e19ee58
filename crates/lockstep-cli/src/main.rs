//! `lockstep`: one command for operators of Lockstep (and Galera) clusters.

#![forbid(unsafe_code)]

mod arbitrator;
mod bench;
mod check;
mod check_config;
mod cluster_bench;
mod commands;
mod error;
mod failover;
mod mariadb;
mod probe;
mod rlimit;
mod stats;
mod table;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

use crate::error::CliError;

#[derive(Debug, Parser)]
#[command(
    name = "lockstep",
    version,
    about = "Run and inspect Lockstep clusters"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start a local N-node cluster on loopback and leave it running.
    Up(commands::up::Args),
    /// Show the wsrep state of every node of the local cluster.
    Status(commands::status::Args),
    /// Stop the local cluster gracefully (last node first).
    Down(commands::down::Args),
    /// HTTP health service for HAProxy (clustercheck successor); --once for keepalived.
    Check(commands::check::Args),
    /// Write on node A, read on node B: stale-read rate and propagation delay.
    Probe(commands::probe::Args),
    /// Load generator for `lockstep check`: keep-alive clients and connection churn.
    CheckBench(commands::check_bench::Args),
    /// sysbench workloads on Lockstep and on Galera: throughput, latency, ratios, plots.
    Bench(commands::bench::Args),
    /// What an application behind HAProxy or keepalived sees when a node fails, Lockstep beside Galera.
    FailoverBench(commands::failover_bench::Args),
    /// A CA and node certificates for peer TLS (socket.ssl_cert, _key, _ca).
    Cert(commands::cert::Args),
    /// A voting member without data (Galera's garbd): the third vote of two nodes.
    Arbitrator(commands::arbitrator::Args),
    /// Check a server's option files for a Lockstep node: missing, unsafe or ignored settings.
    CheckConfig(commands::check_config::Args),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(commands::docs::CompletionArgs),
    /// Write the man pages (the package's build runs it).
    #[command(hide = true)]
    Man(commands::docs::ManArgs),
}

fn main() -> ExitCode {
    // Installed as `garbd` (a symlink), it is the arbitrator with garbd's
    // command line.
    let mut argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if argv
        .first()
        .is_some_and(|a| commands::arbitrator::invoked_as_garbd(a))
    {
        argv.insert(1, "arbitrator".into());
    }
    let cli = Cli::parse_from(argv);
    let result: Result<ExitCode, CliError> = match cli.command {
        Command::Up(args) => commands::up::run(args),
        Command::Cert(args) => commands::cert::run(args),
        Command::Status(args) => commands::status::run(args),
        Command::Down(args) => commands::down::run(args),
        Command::Check(args) => commands::check::run(args),
        Command::Probe(args) => commands::probe::run(args),
        Command::CheckBench(args) => commands::check_bench::run(args),
        Command::Bench(args) => commands::bench::run(args),
        Command::FailoverBench(args) => commands::failover_bench::run(args),
        Command::Arbitrator(args) => commands::arbitrator::run(args),
        Command::CheckConfig(args) => commands::check_config::run(args),
        Command::Completions(args) => commands::docs::completions(args, Cli::command()),
        Command::Man(args) => commands::docs::man(args, Cli::command()),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("lockstep: error: {e}");
            ExitCode::FAILURE
        }
    }
}
