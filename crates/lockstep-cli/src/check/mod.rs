//! `lockstep check`: the health service for load balancers (HAProxy
//! `option httpchk`) and the one-shot check for keepalived / Nagios.
//!
//! - `health`: the decision, a pure function;
//! - `source`: reading the node's state from MariaDB;
//! - `cache`: the published verdict and its single refresher;
//! - `http`, `server`, `listen`: the HTTP/1.1 service;
//! - `report`: the JSON body.

pub mod cache;
pub mod health;
pub mod http;
pub mod listen;
pub mod metrics;
pub mod report;
pub mod server;
pub mod source;

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::mariadb::{ConnectSpec, OptionFileError};
use cache::{Cache, RefreshPlan};
use health::Policy;
use server::{Limits, Service};
use source::Source;

/// Why the check service could not run.
#[derive(Debug)]
pub enum CheckError {
    OptionFile(OptionFileError),
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    Runtime(std::io::Error),
    Usage(String),
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckError::OptionFile(e) => write!(f, "{e}"),
            CheckError::Bind { addr, source } => {
                let hint = match source.kind() {
                    std::io::ErrorKind::AddrInUse => {
                        " (another clustercheck or `lockstep check` already listens there? \
                         see `ss -ltnp`)"
                    }
                    std::io::ErrorKind::PermissionDenied => " (ports below 1024 need root)",
                    _ => "",
                };
                write!(f, "cannot listen on {addr}: {source}{hint}")
            }
            CheckError::Runtime(e) => write!(f, "cannot start the event loop: {e}"),
            CheckError::Usage(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for CheckError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CheckError::OptionFile(e) => Some(e),
            CheckError::Bind { source, .. } | CheckError::Runtime(source) => Some(source),
            CheckError::Usage(_) => None,
        }
    }
}

impl From<OptionFileError> for CheckError {
    fn from(e: OptionFileError) -> Self {
        CheckError::OptionFile(e)
    }
}

/// Output of `--once`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnceFormat {
    Text,
    Json,
}

/// A fully resolved configuration.
#[derive(Debug, Clone)]
pub struct CheckConfig {
    pub spec: ConnectSpec,
    pub policy: Policy,
    pub maintenance_file: Option<PathBuf>,
    /// Check this arbitrator's status file instead of MariaDB.
    pub arbitrator: Option<PathBuf>,
    pub cache_interval: Duration,
    pub timeout: Duration,
    pub listen: Vec<SocketAddr>,
    /// True when the addresses are the defaults (IPv6 may be missing).
    pub listen_is_default: bool,
    pub limits: Limits,
    pub worker_threads: usize,
}

impl CheckConfig {
    fn plan(&self) -> RefreshPlan {
        RefreshPlan {
            policy: self.policy.clone(),
            maintenance_file: self.maintenance_file.clone(),
            interval: self.cache_interval,
        }
    }
}

/// `--once`: one check, the verdict on stdout, exit 0 / 1 / 2.
pub fn run_once(cfg: &CheckConfig, format: OnceFormat) -> Result<ExitCode, CheckError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(CheckError::Runtime)?;
    let plan = cfg.plan();
    let snap = rt.block_on(async {
        let mut source =
            Source::new(cfg.spec.clone(), cfg.timeout).of_arbitrator(cfg.arbitrator.clone());
        let snap = cache::check_once(&mut source, &plan, 1).await;
        source.close().await;
        snap
    });
    match format {
        OnceFormat::Text => println!("{}", snap.verdict.message()),
        OnceFormat::Json => print!(
            "{}",
            report::json(
                &snap,
                &cfg.policy,
                cfg.maintenance_file.as_deref(),
                &cfg.spec.endpoint.to_string()
            )
        ),
    }
    Ok(ExitCode::from(snap.verdict.exit_status() as u8))
}

/// The HTTP service; runs until SIGTERM or SIGINT.
pub fn run_service(cfg: CheckConfig) -> Result<ExitCode, CheckError> {
    crate::rlimit::raise_nofile();
    let std_listeners = listen::bind_all(&cfg.listen, cfg.listen_is_default)?;
    if std_listeners.is_empty() {
        return Err(CheckError::Usage("no address to listen on".into()));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cfg.worker_threads)
        .enable_all()
        .build()
        .map_err(CheckError::Runtime)?;
    rt.block_on(async move {
        let mut listeners = Vec::new();
        for l in std_listeners {
            let l = TcpListener::from_std(l).map_err(CheckError::Runtime)?;
            if let Ok(addr) = l.local_addr() {
                // Tests and scripts read this line to find an ephemeral port.
                eprintln!("lockstep check: listening on {addr}");
            }
            listeners.push(l);
        }
        eprintln!(
            "lockstep check: checking MariaDB at {} as `{}` every {} ms (timeout {} ms)",
            cfg.spec.endpoint,
            cfg.spec.credentials.user,
            cfg.cache_interval.as_millis(),
            cfg.timeout.as_millis()
        );
        let cache = Arc::new(Cache::new());
        let source =
            Source::new(cfg.spec.clone(), cfg.timeout).of_arbitrator(cfg.arbitrator.clone());
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let refresher = tokio::spawn(cache::refresh_until(
            source,
            cfg.plan(),
            Arc::clone(&cache),
            stopped,
        ));
        let service = Arc::new(Service {
            cache,
            policy: cfg.policy.clone(),
            maintenance_file: cfg.maintenance_file.clone(),
            server: cfg.spec.endpoint.to_string(),
            limits: cfg.limits,
        });
        tokio::select! {
            _ = server::serve(listeners, service) => {}
            sig = shutdown_signal() => eprintln!("lockstep check: {sig}, stopping"),
        }
        // Let a check in flight finish (bounded by its timeout) and log out.
        let _ = stop.send(());
        let _ = tokio::time::timeout(cfg.timeout + Duration::from_secs(1), refresher).await;
        Ok(ExitCode::SUCCESS)
    })
}

async fn shutdown_signal() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        // Without signal handlers the default action (exit) still applies.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    }
}
