//! Reads the node's wsrep state over one long-lived session, reconnecting
//! when it breaks, every step bounded by the refresh timeout.

use std::path::PathBuf;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use tokio::time::{timeout_at, Instant};

use super::health::ServerState;
use crate::arbitrator::status_file;
use crate::mariadb::client::query_error;
use crate::mariadb::{connect, ConnectSpec, DbError};

/// Every `wsrep_%` row: the health rules read six, `/metrics` all.
const STATUS_SQL: &str = "SHOW GLOBAL STATUS LIKE 'wsrep%'";
const VARIABLES_SQL: &str =
    "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('read_only','wsrep_reject_queries')";

/// One MariaDB server and our session with it.
pub struct Source {
    spec: ConnectSpec,
    endpoint: String,
    timeout: Duration,
    conn: Option<Conn>,
    /// An arbitrator's working directory: its status file is read instead
    /// of asking MariaDB.
    arbitrator: Option<PathBuf>,
}

impl Source {
    pub fn new(spec: ConnectSpec, timeout: Duration) -> Source {
        Source {
            endpoint: spec.endpoint.to_string(),
            spec,
            timeout,
            conn: None,
            arbitrator: None,
        }
    }

    /// Reads the arbitrator's status file in `workdir` instead (if any).
    pub fn of_arbitrator(mut self, workdir: Option<PathBuf>) -> Source {
        if let Some(dir) = &workdir {
            self.endpoint = status_file::path_in(dir).display().to_string();
        }
        self.arbitrator = workdir;
        self
    }

    /// One observation, within the timeout. Never hangs: a server that
    /// accepts and then says nothing yields [`DbError::Timeout`].
    pub async fn observe(&mut self) -> Result<ServerState, DbError> {
        let deadline = Instant::now() + self.timeout;
        let reused = self.conn.is_some();
        match self.observe_until(deadline).await {
            // A session that sat idle may have been killed (wait_timeout,
            // wsrep_reject_queries=ALL_KILL, a restart): one fresh try
            // before reporting the node down.
            Err(DbError::Lost { .. }) if reused => self.observe_until(deadline).await,
            other => other,
        }
    }

    async fn observe_until(&mut self, deadline: Instant) -> Result<ServerState, DbError> {
        if let Some(dir) = &self.arbitrator {
            // A small local file: read in place. Missing = not running,
            // stale = stopped or hung: both "cannot be reached".
            let st = status_file::read(dir).map_err(|reason| DbError::Connect {
                endpoint: self.endpoint.clone(),
                reason,
            })?;
            let rows =
                st.rows(std::time::SystemTime::now())
                    .map_err(|reason| DbError::Connect {
                        endpoint: self.endpoint.clone(),
                        reason,
                    })?;
            return Ok(parse_state(rows));
        }
        let result = self.try_observe(deadline).await;
        if result.is_err() {
            // Whatever state the session is in, it is not to be trusted.
            self.conn = None;
        }
        result
    }

    async fn try_observe(&mut self, deadline: Instant) -> Result<ServerState, DbError> {
        let mut conn = match self.conn.take() {
            Some(c) => c,
            None => timeout_at(deadline, connect(&self.spec, Some(0)))
                .await
                .map_err(|_| self.timeout_error("connecting"))??,
        };
        let status = timeout_at(deadline, conn.query::<(String, String), _>(STATUS_SQL))
            .await
            .map_err(|_| self.timeout_error("reading wsrep status"))?
            .map_err(|e| query_error(&self.endpoint, STATUS_SQL, e))?;
        let vars = timeout_at(deadline, conn.query::<(String, String), _>(VARIABLES_SQL))
            .await
            .map_err(|_| self.timeout_error("reading read_only"))?
            .map_err(|e| query_error(&self.endpoint, VARIABLES_SQL, e))?;
        self.conn = Some(conn);
        Ok(parse_state(status.into_iter().chain(vars)))
    }

    /// Ends the session with COM_QUIT, so the server does not log an
    /// "Aborted connection" warning for every `check --once`.
    pub async fn close(&mut self) {
        if let Some(conn) = self.conn.take() {
            let _ = tokio::time::timeout(Duration::from_millis(500), conn.disconnect()).await;
        }
    }

    fn timeout_error(&self, what: &'static str) -> DbError {
        DbError::Timeout {
            endpoint: self.endpoint.clone(),
            what,
            after: self.timeout,
        }
    }
}

/// Builds the state from `(name, value)` rows of SHOW STATUS / VARIABLES.
pub fn parse_state(rows: impl IntoIterator<Item = (String, String)>) -> ServerState {
    let mut s = ServerState::default();
    for (name, value) in rows {
        let lower = name.to_ascii_lowercase();
        if lower.starts_with("wsrep_") && s.wsrep.len() < MAX_ROWS {
            s.wsrep.push((lower.clone(), value.clone()));
        }
        match lower.as_str() {
            "wsrep_cluster_status" => s.wsrep_cluster_status = Some(value),
            "wsrep_ready" => s.wsrep_ready = Some(value),
            "wsrep_connected" => s.wsrep_connected = Some(value),
            "wsrep_local_state" => s.wsrep_local_state = value.trim().parse().ok(),
            "wsrep_local_state_comment" => s.wsrep_local_state_comment = Some(value),
            "wsrep_local_recv_queue" => s.wsrep_local_recv_queue = value.trim().parse().ok(),
            "wsrep_reject_queries" => s.wsrep_reject_queries = Some(value),
            "read_only" => s.read_only = Some(is_on(&value)),
            _ => {}
        }
    }
    s
}

/// Bound on the rows kept for `/metrics` (MariaDB 10.11 with Lockstep
/// reports about 80).
const MAX_ROWS: usize = 512;

fn is_on(v: &str) -> bool {
    matches!(v.trim().to_ascii_uppercase().as_str(), "ON" | "1" | "TRUE")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_map_to_the_state_case_insensitively() {
        let rows = [
            ("WSREP_CLUSTER_STATUS", "Primary"),
            ("wsrep_ready", "ON"),
            ("wsrep_local_state", "4"),
            ("wsrep_local_state_comment", "Synced"),
            ("wsrep_local_recv_queue", "3"),
            ("read_only", "ON"),
            ("wsrep_reject_queries", "NONE"),
            ("unrelated", "x"),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()));
        let s = parse_state(rows);
        assert_eq!(s.wsrep_cluster_status.as_deref(), Some("Primary"));
        assert_eq!(s.wsrep_local_state, Some(4));
        assert_eq!(s.wsrep_local_recv_queue, Some(3));
        assert_eq!(s.read_only, Some(true));
        assert_eq!(s.wsrep_connected, None);
        let s = parse_state([("read_only".to_string(), "OFF".to_string())]);
        assert_eq!(s.read_only, Some(false));
    }
}
