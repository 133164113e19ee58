//! Background load on the writer: small autocommit updates of even ids, so
//! they never touch the rows the probe reads (odd ids).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use mysql_async::prelude::Queryable;
use serde::Serialize;

use super::{schema, Rng};
use crate::mariadb::{connect, ConnectSpec};

/// What the load threads did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LoadStats {
    pub updates: u64,
    pub errors: u64,
    /// The first error seen, for the report.
    pub first_error: Option<String>,
}

impl LoadStats {
    pub fn add(&mut self, other: &LoadStats) {
        self.updates += other.updates;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error.clone_from(&other.first_error);
        }
    }

    fn error(&mut self, e: impl ToString) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(e.to_string());
        }
    }
}

/// One load thread: its own session on A, updates until `stop`.
pub async fn run(
    spec: ConnectSpec,
    db: String,
    rows: u32,
    stop: Arc<AtomicBool>,
    seed: u64,
) -> LoadStats {
    let mut stats = LoadStats::default();
    let mut conn = match connect(&spec, Some(0)).await {
        Ok(c) => c,
        Err(e) => {
            stats.error(e);
            return stats;
        }
    };
    let sql = format!("UPDATE {} SET k = k + 1 WHERE id = ?", schema::table(&db));
    let stmt = match conn.prep(&sql).await {
        Ok(s) => s,
        Err(e) => {
            stats.error(e);
            return stats;
        }
    };
    let even_ids = (rows / 2).max(1);
    let mut rng = Rng::new(seed);
    while !stop.load(Ordering::Relaxed) {
        let id = (rng.below(even_ids) + 1) * 2;
        match conn.exec_drop(&stmt, (id,)).await {
            Ok(()) => stats.updates += 1,
            // A broken session ends this thread; the report shows why.
            Err(e) if e.is_fatal() => {
                stats.error(e);
                return stats;
            }
            Err(e) => stats.error(e),
        }
    }
    let _ = conn.close(stmt).await;
    let _ = conn.disconnect().await;
    stats
}
