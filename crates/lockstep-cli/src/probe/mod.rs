//! `lockstep probe`: how stale is a read on node B right after a commit on
//! node A? Each round writes a fresh value on A, then reads it on B until it
//! shows up; a round is *stale* when the first read still saw the old value.
//! With `--sync-wait` B's session uses `wsrep_sync_wait=1` (causal reads),
//! which should close the gap to zero stale rounds.
//!
//! - `schema`: the probe table;
//! - `rounds`: the write/read loop;
//! - `load`: optional background updates on A;
//! - `report`: the numbers, as a table and JSON;
//! - `histogram`: the PNG.

pub mod histogram;
pub mod load;
pub mod report;
pub mod rounds;
pub mod schema;

use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::mariadb::{connect, ConnectSpec, DbError, OptionFileError};
use report::Report;

/// Why the probe could not run or finish.
#[derive(Debug)]
pub enum ProbeError {
    OptionFile(OptionFileError),
    /// Reading the `lockstep up` state file failed.
    Cluster(lockstep_testkit::Error),
    Db {
        node: &'static str,
        source: DbError,
    },
    /// The reader never saw the probe table that the writer created.
    NotReplicated {
        waited: Duration,
        seen: String,
    },
    Png {
        path: PathBuf,
        message: String,
    },
    Output {
        path: PathBuf,
        source: std::io::Error,
    },
    Runtime(std::io::Error),
    Usage(String),
}

impl fmt::Display for ProbeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeError::OptionFile(e) => write!(f, "{e}"),
            ProbeError::Cluster(e) => write!(f, "{e}"),
            ProbeError::Db { node, source } => write!(f, "node {node}: {source}"),
            ProbeError::NotReplicated { waited, seen } => write!(
                f,
                "node B did not see the probe table of node A within {} s (last seen: {seen}); \
                 are A and B members of the same cluster?",
                waited.as_secs()
            ),
            ProbeError::Png { path, message } => {
                write!(f, "cannot draw the histogram {}: {message}", path.display())
            }
            ProbeError::Output { path, source } => {
                write!(f, "cannot write {}: {source}", path.display())
            }
            ProbeError::Runtime(e) => write!(f, "cannot start the event loop: {e}"),
            ProbeError::Usage(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for ProbeError {}

impl From<OptionFileError> for ProbeError {
    fn from(e: OptionFileError) -> Self {
        ProbeError::OptionFile(e)
    }
}

impl From<lockstep_testkit::Error> for ProbeError {
    fn from(e: lockstep_testkit::Error) -> Self {
        ProbeError::Cluster(e)
    }
}

/// The labels used in errors.
pub const WRITER: &str = "A (writer)";
pub const READER: &str = "B (reader)";

/// A resolved probe run.
#[derive(Debug, Clone)]
pub struct ProbeConfig {
    pub a: ConnectSpec,
    pub b: ConnectSpec,
    /// Names shown in the report (`node1`, or the address).
    pub a_label: String,
    pub b_label: String,
    pub rounds: u64,
    /// Causal reads on B (`wsrep_sync_wait=1`); otherwise 0.
    pub sync_wait: bool,
    pub load_threads: usize,
    /// Rows in the probe table; odd ids are probed, even ids loaded.
    pub rows: u32,
    /// A round whose value is still not visible after this counts as lost.
    pub max_wait: Duration,
    pub database: String,
}

/// Runs the probe; returns the report with every round's samples.
pub fn run(cfg: &ProbeConfig) -> Result<Report, ProbeError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(ProbeError::Runtime)?;
    rt.block_on(run_async(cfg))
}

async fn run_async(cfg: &ProbeConfig) -> Result<Report, ProbeError> {
    let db = |node| move |source| ProbeError::Db { node, source };
    // The writer's own reads must never wait; the reader's is the variable.
    let mut a = connect(&cfg.a, Some(0)).await.map_err(db(WRITER))?;
    let mut b = connect(&cfg.b, Some(u32::from(cfg.sync_wait)))
        .await
        .map_err(db(READER))?;
    let (a_end, b_end) = (cfg.a.endpoint.to_string(), cfg.b.endpoint.to_string());
    schema::prepare(&mut a, &a_end, &cfg.database, cfg.rows)
        .await
        .map_err(db(WRITER))?;
    let limit = Duration::from_secs(60);
    schema::wait_replicated(&mut b, &b_end, &cfg.database, cfg.rows, limit).await?;

    let stop = Arc::new(AtomicBool::new(false));
    let mut loaders = Vec::new();
    for i in 0..cfg.load_threads {
        loaders.push(tokio::spawn(load::run(
            cfg.a.clone(),
            cfg.database.clone(),
            cfg.rows,
            Arc::clone(&stop),
            seed() ^ (i as u64 + 1),
        )));
    }
    let t0 = Instant::now();
    let outcome = rounds::run(&mut a, &mut b, cfg, seed()).await;
    let elapsed = t0.elapsed();
    stop.store(true, Ordering::Relaxed);
    let mut load_stats = load::LoadStats::default();
    for l in loaders {
        if let Ok(s) = l.await {
            load_stats.add(&s);
        }
    }
    let _ = a.disconnect().await;
    let _ = b.disconnect().await;
    let samples = outcome?;
    Ok(Report::new(cfg, samples, load_stats, elapsed))
}

/// A seed for the id choice; reproducibility is not a goal, spread is.
fn seed() -> u64 {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    (t ^ (u64::from(std::process::id()) << 32)) | 1
}

/// xorshift64*: enough randomness to pick rows, no dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform-enough in `0..n` (n > 0).
    pub fn below(&mut self, n: u32) -> u32 {
        (self.next_u64() % u64::from(n)) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rng_covers_its_range() {
        let mut r = Rng::new(42);
        let mut seen = [false; 10];
        for _ in 0..1000 {
            seen[r.below(10) as usize] = true;
        }
        assert!(seen.iter().all(|s| *s));
        assert_eq!(Rng::new(0).next_u64(), Rng::new(1).next_u64());
    }
}
