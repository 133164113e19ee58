//! The write-then-read loop, one round at a time.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use super::{schema, ProbeConfig, ProbeError, Rng, READER, WRITER};
use crate::mariadb::client::query_error;

/// Deadlock and lock-wait timeout: worth retrying the write.
const RETRYABLE: [u16; 2] = [1213, 1205];
const WRITE_ATTEMPTS: u32 = 5;

/// What one round measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// The UPDATE's commit latency on A.
    pub write: Duration,
    /// From the commit's return until B returned the new value (for a
    /// fresh round, the duration of the one read).
    pub visible: Duration,
    /// Reads on B that still returned an older value.
    pub stale_reads: u32,
    /// False when the value did not show up within `--max-wait-ms`.
    pub seen: bool,
}

impl Sample {
    pub fn is_stale(&self) -> bool {
        self.stale_reads > 0
    }
}

/// Runs `cfg.rounds` rounds on the open sessions.
pub async fn run(
    a: &mut Conn,
    b: &mut Conn,
    cfg: &ProbeConfig,
    seed: u64,
) -> Result<Vec<Sample>, ProbeError> {
    let (a_end, b_end) = (cfg.a.endpoint.to_string(), cfg.b.endpoint.to_string());
    let t = schema::table(&cfg.database);
    let update_sql = format!("UPDATE {t} SET k = ? WHERE id = ?");
    let select_sql = format!("SELECT k FROM {t} WHERE id = ?");
    let db_a = |sql: &str| {
        let sql = sql.to_string();
        let end = a_end.clone();
        move |e| ProbeError::Db {
            node: WRITER,
            source: query_error(&end, &sql, e),
        }
    };
    let db_b = |sql: &str| {
        let sql = sql.to_string();
        let end = b_end.clone();
        move |e| ProbeError::Db {
            node: READER,
            source: query_error(&end, &sql, e),
        }
    };
    let update = a.prep(&update_sql).await.map_err(db_a(&update_sql))?;
    let select = b.prep(&select_sql).await.map_err(db_b(&select_sql))?;

    // Values unique across runs, so a leftover value from an earlier run
    // can never be mistaken for this round's write.
    let base = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
        * 10_000;
    let odd_ids = cfg.rows.div_ceil(2).max(1);
    let mut rng = Rng::new(seed);
    let mut samples = Vec::with_capacity(cfg.rounds as usize);
    for round in 0..cfg.rounds {
        let id = rng.below(odd_ids) * 2 + 1;
        let value = base + round as i64;
        let started = Instant::now();
        let mut attempt = 0;
        loop {
            attempt += 1;
            match a.exec_drop(&update, (value, id)).await {
                Ok(()) => break,
                Err(mysql_async::Error::Server(e))
                    if RETRYABLE.contains(&e.code) && attempt < WRITE_ATTEMPTS => {}
                Err(e) => return Err(db_a(&update_sql)(e)),
            }
        }
        let committed = Instant::now();
        let mut stale_reads = 0u32;
        let seen = loop {
            let got: Option<i64> = b
                .exec_first(&select, (id,))
                .await
                .map_err(db_b(&select_sql))?;
            if got == Some(value) {
                break true;
            }
            stale_reads += 1;
            if committed.elapsed() >= cfg.max_wait {
                break false;
            }
        };
        samples.push(Sample {
            write: committed - started,
            visible: committed.elapsed(),
            stale_reads,
            seen,
        });
    }
    let _ = a.close(update).await;
    let _ = b.close(select).await;
    Ok(samples)
}
