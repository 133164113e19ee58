//! `lockstep check-bench`: load generator for the health service.
//!
//! Phase 1 holds `clients` keep-alive connections at once (all connected
//! before measuring starts) and sends requests on each for `duration`,
//! paced at one per `interval` per client (0: back to back). Phase 2 opens,
//! uses and closes `connections` connections with `Connection: close`, at
//! most `concurrency` at a time, started at a fixed `rate` or back to back,
//! and checks that the server ends each cleanly.
//! Every response is checked: status 200 or 503, exact Content-Length.

pub mod client;

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::sync::Barrier;
use tokio::time::Instant;

use crate::stats::Summary;
use crate::table;
use client::Failure;

/// What to run.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    pub target: SocketAddr,
    pub clients: usize,
    pub duration: Duration,
    pub interval: Duration,
    pub connections: u64,
    pub concurrency: usize,
    /// Phase 2 pacing in connections per second; 0: as fast as
    /// `concurrency` allows (closed loop, measures capacity, and then the
    /// latency is mostly queueing).
    pub rate: u64,
    pub timeout: Duration,
    pub threads: usize,
}

#[derive(Debug)]
pub enum BenchError {
    Runtime(std::io::Error),
    Usage(String),
}

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BenchError::Runtime(e) => write!(f, "cannot start the event loop: {e}"),
            BenchError::Usage(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for BenchError {}

/// One phase's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseResult {
    pub name: String,
    pub connections: u64,
    pub requests: u64,
    pub seconds: f64,
    pub requests_per_s: f64,
    pub latency: Option<Summary>,
    pub errors: u64,
    pub errors_by_kind: BTreeMap<String, u64>,
    pub status_200: u64,
    pub status_503: u64,
}

/// What a worker brings back.
#[derive(Debug, Default)]
struct Tally {
    latencies: Vec<Duration>,
    errors: BTreeMap<Failure, u64>,
    ok200: u64,
    ok503: u64,
    connections: u64,
}

impl Tally {
    fn merge(&mut self, o: Tally) {
        self.latencies.extend(o.latencies);
        for (k, v) in o.errors {
            *self.errors.entry(k).or_default() += v;
        }
        self.ok200 += o.ok200;
        self.ok503 += o.ok503;
        self.connections += o.connections;
    }

    fn answered(&mut self, status: u16, took: Duration) {
        self.latencies.push(took);
        if status == 200 {
            self.ok200 += 1;
        } else {
            self.ok503 += 1;
        }
    }

    fn failed(&mut self, f: Failure) {
        *self.errors.entry(f).or_default() += 1;
    }

    fn into_result(mut self, name: String, took: Duration) -> PhaseResult {
        let errors: u64 = self.errors.values().sum();
        let requests = self.latencies.len() as u64;
        let secs = took.as_secs_f64();
        PhaseResult {
            name,
            connections: self.connections,
            requests,
            seconds: (secs * 1000.0).round() / 1000.0,
            requests_per_s: if secs > 0.0 {
                (requests as f64 / secs).round()
            } else {
                0.0
            },
            latency: Summary::of(&mut self.latencies),
            errors,
            errors_by_kind: self
                .errors
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            status_200: self.ok200,
            status_503: self.ok503,
        }
    }
}

const KEEPALIVE_REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: lockstep-check\r\n\r\n";
const CLOSE_REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: lockstep-check\r\nConnection: close\r\n\r\n";

/// Runs both phases (a phase with zero clients/connections is skipped).
pub fn run(cfg: &BenchConfig) -> Result<Vec<PhaseResult>, BenchError> {
    crate::rlimit::raise_nofile();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cfg.threads)
        .enable_all()
        .build()
        .map_err(BenchError::Runtime)?;
    rt.block_on(async {
        let mut out = Vec::new();
        if cfg.clients > 0 {
            out.push(keepalive_phase(cfg).await);
        }
        if cfg.connections > 0 {
            out.push(close_phase(cfg).await);
        }
        Ok(out)
    })
}

async fn keepalive_phase(cfg: &BenchConfig) -> PhaseResult {
    let barrier = Arc::new(Barrier::new(cfg.clients + 1));
    let start_at = Arc::new(tokio::sync::OnceCell::<Instant>::new());
    let mut tasks = Vec::new();
    for i in 0..cfg.clients {
        let cfg = cfg.clone();
        let barrier = Arc::clone(&barrier);
        let start_at = Arc::clone(&start_at);
        tasks.push(tokio::spawn(async move {
            keepalive_client(&cfg, i, barrier, start_at).await
        }));
    }
    // Everyone connected (or failed to): the clock starts now.
    barrier.wait().await;
    let t0 = Instant::now();
    let _ = start_at.set(t0);
    let mut tally = Tally::default();
    for t in tasks {
        if let Ok(part) = t.await {
            tally.merge(part);
        }
    }
    tally.into_result(format!("keep-alive, {} clients", cfg.clients), t0.elapsed())
}

async fn keepalive_client(
    cfg: &BenchConfig,
    index: usize,
    barrier: Arc<Barrier>,
    start_at: Arc<tokio::sync::OnceCell<Instant>>,
) -> Tally {
    let mut tally = Tally::default();
    let mut stream = client::connect(cfg.target, client::deadline(cfg.timeout)).await;
    // CONNS in the report: connections actually held when measuring began.
    tally.connections = u64::from(stream.is_ok());
    barrier.wait().await;
    let t0 = start_at.get().copied().unwrap_or_else(Instant::now);
    let end = t0 + cfg.duration;
    // Spread the clients over the interval instead of firing in lockstep.
    let offset = cfg
        .interval
        .mul_f64(index as f64 / cfg.clients.max(1) as f64);
    let mut next = t0 + offset;
    let mut buf = Vec::with_capacity(1024);
    loop {
        if !cfg.interval.is_zero() {
            tokio::time::sleep_until(next).await;
            next += cfg.interval;
        }
        if Instant::now() >= end {
            break;
        }
        let s = match &mut stream {
            Ok(s) => s,
            Err(f) => {
                tally.failed(*f);
                // Reconnect (counted) rather than give up the slot.
                stream = client::connect(cfg.target, client::deadline(cfg.timeout)).await;
                continue;
            }
        };
        let sent = Instant::now();
        match client::exchange(
            s,
            KEEPALIVE_REQUEST,
            &mut buf,
            client::deadline(cfg.timeout),
        )
        .await
        {
            Ok(a) if !a.close => tally.answered(a.status, sent.elapsed()),
            // The server must keep an HTTP/1.1 connection open.
            Ok(_) => {
                tally.failed(Failure::Closed);
                stream = client::connect(cfg.target, client::deadline(cfg.timeout)).await;
            }
            Err(f) => {
                tally.failed(f);
                stream = client::connect(cfg.target, client::deadline(cfg.timeout)).await;
            }
        }
    }
    tally
}

async fn close_phase(cfg: &BenchConfig) -> PhaseResult {
    let t0 = Instant::now();
    let tally = if cfg.rate == 0 {
        closed_loop(cfg).await
    } else {
        paced(cfg, t0).await
    };
    let name = if cfg.rate == 0 {
        format!("open/close, {} at a time", cfg.concurrency.max(1))
    } else {
        format!("open/close, {}/s", cfg.rate)
    };
    tally.into_result(name, t0.elapsed())
}

/// `concurrency` workers, each opening the next connection as soon as its
/// previous one is done.
async fn closed_loop(cfg: &BenchConfig) -> Tally {
    let remaining = Arc::new(AtomicU64::new(cfg.connections));
    let mut tasks = Vec::new();
    for _ in 0..cfg.concurrency.max(1) {
        let cfg = cfg.clone();
        let remaining = Arc::clone(&remaining);
        tasks.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            let mut buf = Vec::with_capacity(1024);
            // Take tickets until none are left.
            while remaining
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok()
            {
                one_connection(&cfg, &mut buf, &mut tally).await;
            }
            tally
        }));
    }
    let mut tally = Tally::default();
    for t in tasks {
        if let Ok(part) = t.await {
            tally.merge(part);
        }
    }
    tally
}

/// One connection every 1/`rate` s (open loop), at most `concurrency` open.
async fn paced(cfg: &BenchConfig, t0: Instant) -> Tally {
    let permits = Arc::new(tokio::sync::Semaphore::new(cfg.concurrency.max(1)));
    let period = Duration::from_secs_f64(1.0 / cfg.rate as f64);
    let mut set = tokio::task::JoinSet::new();
    for i in 0..cfg.connections {
        tokio::time::sleep_until(t0 + period.mul_f64(i as f64)).await;
        let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
            break;
        };
        let cfg = cfg.clone();
        set.spawn(async move {
            let mut tally = Tally::default();
            let mut buf = Vec::with_capacity(512);
            one_connection(&cfg, &mut buf, &mut tally).await;
            drop(permit);
            tally
        });
    }
    let mut tally = Tally::default();
    while let Some(part) = set.join_next().await {
        if let Ok(part) = part {
            tally.merge(part);
        }
    }
    tally
}

/// Connect, one `Connection: close` request, expect the server's FIN.
async fn one_connection(cfg: &BenchConfig, buf: &mut Vec<u8>, tally: &mut Tally) {
    tally.connections += 1;
    let started = Instant::now();
    let deadline = client::deadline(cfg.timeout);
    let result = async {
        let mut s = client::connect(cfg.target, deadline).await?;
        let a = client::exchange(&mut s, CLOSE_REQUEST, buf, deadline).await?;
        if !a.close {
            return Err(Failure::Malformed);
        }
        client::expect_eof(&mut s, deadline).await?;
        Ok(a)
    }
    .await;
    match result {
        Ok(a) => tally.answered(a.status, started.elapsed()),
        Err(f) => tally.failed(f),
    }
}

/// The results as a table.
pub fn render(results: &[PhaseResult]) -> String {
    let header = [
        "PHASE", "CONNS", "REQUESTS", "REQ/S", "ERRORS", "N", "MIN_MS", "AVG_MS", "P50_MS",
        "P99_MS", "MAX_MS", "200", "503",
    ];
    let rows: Vec<Vec<String>> = results
        .iter()
        .map(|r| {
            let mut row = vec![
                r.name.clone(),
                r.connections.to_string(),
                r.requests.to_string(),
                format!("{:.0}", r.requests_per_s),
                r.errors.to_string(),
            ];
            row.extend(Summary::cells(r.latency.as_ref()));
            row.push(r.status_200.to_string());
            row.push(r.status_503.to_string());
            row
        })
        .collect();
    let mut out = table::render(&header, &rows);
    for r in results.iter().filter(|r| r.errors > 0) {
        let kinds: Vec<String> = r
            .errors_by_kind
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        out.push_str(&format!("errors in {}: {}\n", r.name, kinds.join(", ")));
    }
    out
}
