//! `lockstep check-bench`: load generator for `lockstep check` (see `crate::bench`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::bench::{self, BenchConfig, BenchError};
use crate::error::CliError;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Start the service first, e.g. `lockstep check --listen 127.0.0.1:9200 ...`. \
Exit status: 0 when every request got a well-formed 200 or 503, 1 otherwise.")]
pub struct Args {
    /// Address of the health service.
    #[arg(long, default_value = "127.0.0.1:9200")]
    target: SocketAddr,
    /// Keep-alive clients held open at once (phase 1; 0 skips it).
    #[arg(long, default_value_t = 1000)]
    clients: usize,
    /// Length of phase 1.
    #[arg(long, default_value_t = 10, value_name = "SECONDS")]
    duration: u64,
    /// Pause between one client's requests (0: back to back, closed loop).
    #[arg(long, default_value_t = 100, value_name = "MS")]
    interval_ms: u64,
    /// Connections opened, used once and closed (phase 2; 0 skips it).
    #[arg(long, default_value_t = 10_000)]
    connections: u64,
    /// Phase-2 connections in flight at most.
    #[arg(long, default_value_t = 100)]
    concurrency: usize,
    /// Phase-2 connections started per second (0: back to back, to measure
    /// capacity; the latency is then mostly queueing in the generator).
    #[arg(long, default_value_t = 5_000, value_name = "PER_S")]
    rate: u64,
    /// A request without a complete answer after this long is an error.
    #[arg(long, default_value_t = 5_000, value_name = "MS")]
    timeout_ms: u64,
    /// Event-loop threads of the load generator.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Also write the results as JSON.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    if args.timeout_ms == 0 || args.duration == 0 && args.clients > 0 {
        return Err(
            BenchError::Usage("--timeout-ms and --duration must be at least 1".into()).into(),
        );
    }
    let cfg = BenchConfig {
        target: args.target,
        clients: args.clients,
        duration: Duration::from_secs(args.duration),
        interval: Duration::from_millis(args.interval_ms),
        connections: args.connections,
        concurrency: args.concurrency,
        rate: args.rate,
        timeout: Duration::from_millis(args.timeout_ms),
        threads: args.threads.max(1),
    };
    println!(
        "check-bench: {} keep-alive clients for {} s ({}), then {} connections opened and \
         closed ({}, at most {} at a time), against {}",
        cfg.clients,
        args.duration,
        if cfg.interval.is_zero() {
            "back to back".to_string()
        } else {
            format!("one request per client every {} ms", args.interval_ms)
        },
        cfg.connections,
        if cfg.rate == 0 {
            "back to back".to_string()
        } else {
            format!("{} per second", cfg.rate)
        },
        cfg.concurrency,
        cfg.target
    );
    let results = bench::run(&cfg)?;
    print!("{}", bench::render(&results));
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&results).unwrap_or_default() + "\n";
        std::fs::write(path, text)
            .map_err(|e| CliError::Usage(format!("cannot write {}: {e}", path.display())))?;
    }
    let errors: u64 = results.iter().map(|r| r.errors).sum();
    Ok(if errors == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
