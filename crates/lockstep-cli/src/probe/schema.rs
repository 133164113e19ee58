//! The probe table: `id` → `k`, created on the writer, awaited on the reader.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use tokio::time::Instant;

use super::ProbeError;
use crate::mariadb::client::query_error;
use crate::mariadb::DbError;

/// Rows inserted per statement while filling the table.
const BATCH: u32 = 1000;

/// `db`.`probe`, quoted.
pub fn table(db: &str) -> String {
    format!("`{}`.`probe`", db.replace('`', "``"))
}

/// Creates the database and table if needed and makes sure ids `1..=rows` exist.
pub async fn prepare(a: &mut Conn, endpoint: &str, db: &str, rows: u32) -> Result<(), DbError> {
    let t = table(db);
    let statements = [
        format!("CREATE DATABASE IF NOT EXISTS `{}`", db.replace('`', "``")),
        format!(
            "CREATE TABLE IF NOT EXISTS {t} (id INT UNSIGNED NOT NULL PRIMARY KEY, \
             k BIGINT NOT NULL) ENGINE=InnoDB"
        ),
    ];
    for sql in &statements {
        run(a, endpoint, sql).await?;
    }
    let mut start = 1;
    while start <= rows {
        let end = (start + BATCH - 1).min(rows);
        let values: Vec<String> = (start..=end).map(|i| format!("({i},0)")).collect();
        let sql = format!("INSERT IGNORE INTO {t} (id, k) VALUES {}", values.join(","));
        run(a, endpoint, &sql).await?;
        start = end + 1;
    }
    Ok(())
}

async fn run(conn: &mut Conn, endpoint: &str, sql: &str) -> Result<(), DbError> {
    conn.query_drop(sql)
        .await
        .map_err(|e| query_error(endpoint, sql, e))
}

/// Polls the reader until it has every row, so the first rounds do not
/// measure the table's own replication.
pub async fn wait_replicated(
    b: &mut Conn,
    endpoint: &str,
    db: &str,
    rows: u32,
    limit: Duration,
) -> Result<(), ProbeError> {
    let sql = format!("SELECT COUNT(*) FROM {} WHERE id <= {rows}", table(db));
    let t0 = Instant::now();
    loop {
        let seen = match b.query_first::<u64, _>(&sql).await {
            Ok(Some(n)) if n >= u64::from(rows) => return Ok(()),
            Ok(n) => format!("{} of {rows} rows", n.unwrap_or(0)),
            // The table may not have arrived yet (1146): keep waiting.
            Err(mysql_async::Error::Server(e)) => format!("error {}: {}", e.code, e.message),
            Err(e) => {
                return Err(ProbeError::Db {
                    node: super::READER,
                    source: query_error(endpoint, &sql, e),
                })
            }
        };
        if t0.elapsed() >= limit {
            return Err(ProbeError::NotReplicated {
                waited: limit,
                seen,
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_quoted() {
        assert_eq!(table("lockstep_probe"), "`lockstep_probe`.`probe`");
        assert_eq!(table("a`b"), "`a``b`.`probe`");
    }
}
