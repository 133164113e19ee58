//! `lockstep`: one command for operators of Lockstep (and Galera) clusters.

mod commands;
mod error;
mod table;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result: Result<ExitCode, CliError> = match cli.command {
        Command::Up(args) => commands::up::run(args),
        Command::Status(args) => commands::status::run(args),
        Command::Down(args) => commands::down::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("lockstep: error: {e}");
            ExitCode::FAILURE
        }
    }
}
