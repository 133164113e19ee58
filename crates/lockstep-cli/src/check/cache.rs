//! The cached verdict and the single task that refreshes it.
//!
//! Requests never touch MariaDB: they read the last published snapshot. One
//! refresher task runs checks back to back, at most one every `--cache-ms`,
//! so a thousand clients cause one query per interval and a stuck server
//! cannot pile up checks (no stampede): the next check starts only after the
//! previous one finished or hit its timeout.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::health::{decide, Observation, Policy, ServerState, Verdict};
use super::source::Source;

/// One published result.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub verdict: Verdict,
    /// What the server reported, if it could be asked.
    pub state: Option<ServerState>,
    pub maintenance_present: bool,
    /// When the check finished; `None` before the first one.
    pub checked_at: Option<SystemTime>,
    pub checked_instant: Instant,
    /// How long the check took.
    pub took: Duration,
    /// Checks completed so far.
    pub checks: u64,
    /// The one-line text body (`message` + newline), rendered once.
    pub text_body: Arc<str>,
}

impl Snapshot {
    /// The state before the first check: 503 "No health check has completed yet."
    pub fn pending() -> Snapshot {
        Snapshot::new(Verdict::Pending, None, false, None, Duration::ZERO, 0)
    }

    fn new(
        verdict: Verdict,
        state: Option<ServerState>,
        maintenance_present: bool,
        checked_at: Option<SystemTime>,
        took: Duration,
        checks: u64,
    ) -> Snapshot {
        let text_body: Arc<str> = format!("{}\n", verdict.message()).into();
        Snapshot {
            verdict,
            state,
            maintenance_present,
            checked_at,
            checked_instant: Instant::now(),
            took,
            checks,
            text_body,
        }
    }
}

/// The current snapshot, shared by all connections.
#[derive(Debug)]
pub struct Cache {
    current: RwLock<Arc<Snapshot>>,
}

impl Cache {
    pub fn new() -> Cache {
        Cache {
            current: RwLock::new(Arc::new(Snapshot::pending())),
        }
    }

    /// The latest snapshot (a pointer copy under a read lock held for
    /// nanoseconds; writers publish once per interval).
    pub fn get(&self) -> Arc<Snapshot> {
        // A poisoned lock still holds a valid Arc: a panic elsewhere must
        // not take the health endpoint down with it.
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn publish(&self, s: Snapshot) -> Arc<Snapshot> {
        let new = Arc::new(s);
        let mut cur = self.current.write().unwrap_or_else(|e| e.into_inner());
        std::mem::replace(&mut *cur, new)
    }
}

impl Default for Cache {
    fn default() -> Self {
        Cache::new()
    }
}

/// What the refresher needs besides the server.
#[derive(Debug, Clone)]
pub struct RefreshPlan {
    pub policy: Policy,
    pub maintenance_file: Option<PathBuf>,
    /// `--cache-ms`: minimum time between check starts.
    pub interval: Duration,
}

/// One check: ask the server, look for the maintenance file, decide.
pub async fn check_once(source: &mut Source, plan: &RefreshPlan, checks: u64) -> Snapshot {
    let t0 = Instant::now();
    let obs = match source.observe().await {
        Ok(s) => Observation::Server(s),
        Err(e) => Observation::Failed(e),
    };
    let took = t0.elapsed();
    let present = plan.maintenance_file.as_ref().filter(|p| p.exists());
    let verdict = decide(&obs, present, &plan.policy);
    let state = match obs {
        Observation::Server(s) => Some(s),
        _ => None,
    };
    Snapshot::new(
        verdict,
        state,
        present.is_some(),
        Some(SystemTime::now()),
        took,
        checks,
    )
}

/// Runs until `stop` fires: check, publish, wait out the rest of the
/// interval. On stop, the MariaDB session is closed cleanly.
pub async fn refresh_until(
    mut source: Source,
    plan: RefreshPlan,
    cache: Arc<Cache>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let mut checks = 0u64;
    loop {
        let started = Instant::now();
        checks += 1;
        let snap = check_once(&mut source, &plan, checks).await;
        let old = cache.publish(snap.clone());
        if old.verdict != snap.verdict {
            // Transitions only: a steady state does not flood the journal.
            eprintln!(
                "lockstep check: {} {}",
                snap.verdict.http_status(),
                snap.verdict.message()
            );
        }
        tokio::select! {
            _ = tokio::time::sleep_until(started + plan.interval) => {}
            _ = &mut stop => break,
        }
    }
    source.close().await;
}
