//! The application behind the balancer: a few clients, each one connection
//! at a time through the balancer's address, each running autocommit
//! `INSERT`s one after the other and recording every statement's outcome
//! and time. Each row records the node that ran it and that node's state,
//! read inside the same statement, so that afterwards the rows tell which
//! node answered and whether it was Synced and Primary.
//!
//! A client behaves like a connection pool: after any error other than a
//! deadlock it drops the connection and opens a new one (through the
//! balancer, which picks a server); a failed attempt to connect is recorded
//! as a failed statement, then retried after [`RECONNECT_PAUSE`].

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder};

use super::measure::{Outcome, Statement};

/// How long one statement may take before the client gives up on it.
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long opening a connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Wait after a failed connection attempt before the next.
const RECONNECT_PAUSE: Duration = Duration::from_millis(100);
/// Statements kept per run: a 4-client run records about 200 a second, so
/// this holds over an hour; a run that fills it stops its clients and
/// fails (`App::stop`) rather than judge a partial record.
const MAX_STATEMENTS: usize = 1_000_000;
/// Deadlock: the application retries on the same connection.
const ER_LOCK_DEADLOCK: u16 = 1213;

/// The table every client writes to.
pub const TABLE: &str = "failover.w";

/// The table's DDL, run once on a node before the clients start.
pub fn create_table_sql() -> String {
    format!(
        "CREATE DATABASE IF NOT EXISTS failover; DROP TABLE IF EXISTS {TABLE}; \
         CREATE TABLE {TABLE} (id BIGINT PRIMARY KEY, client INT NOT NULL, \
         node VARCHAR(64) NOT NULL, local_state VARCHAR(8) NOT NULL, \
         cluster_status VARCHAR(16) NOT NULL, at TIMESTAMP(6) DEFAULT CURRENT_TIMESTAMP(6))"
    )
}

fn insert_sql(id: u64, client: u32) -> String {
    const STATUS: &str =
        "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME";
    format!(
        "INSERT INTO {TABLE} (id, client, node, local_state, cluster_status) \
         SELECT {id}, {client}, @@wsrep_node_name, \
         ({STATUS} = 'WSREP_LOCAL_STATE'), ({STATUS} = 'WSREP_CLUSTER_STATUS')"
    )
}

/// Where the clients connect: the balancer's address or the virtual IP.
#[derive(Debug, Clone)]
pub struct Target {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: String,
}

/// The running application.
pub struct App {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    t0: Instant,
    stop: AtomicBool,
    next_id: AtomicU64,
    statements: Mutex<Vec<Statement>>,
}

impl Shared {
    fn now_us(&self) -> u64 {
        self.t0.elapsed().as_micros() as u64
    }
    fn record(&self, s: Statement) {
        let mut all = self.statements.lock().unwrap_or_else(|p| p.into_inner());
        if all.len() < MAX_STATEMENTS {
            all.push(s);
        } else {
            self.stop.store(true, Ordering::Relaxed);
        }
    }
}

impl App {
    /// Starts `clients` clients against `target`, each pausing `pace`
    /// between statements. Times are measured from `t0`.
    pub fn start(target: Target, clients: u32, pace: Duration, t0: Instant) -> App {
        let shared = Arc::new(Shared {
            t0,
            stop: AtomicBool::new(false),
            next_id: AtomicU64::new(1),
            statements: Mutex::new(Vec::new()),
        });
        let s = shared.clone();
        let thread = std::thread::spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("failover: cannot start the application's runtime: {e}");
                    return;
                }
            };
            rt.block_on(async move {
                let tasks: Vec<_> = (0..clients)
                    .map(|c| tokio::spawn(client(s.clone(), target.clone(), c, pace)))
                    .collect();
                for t in tasks {
                    let _ = t.await;
                }
            });
        });
        App {
            shared,
            thread: Some(thread),
        }
    }

    /// Microseconds since `t0`.
    pub fn now_us(&self) -> u64 {
        self.shared.now_us()
    }

    /// The statements recorded so far.
    pub fn statements(&self) -> Vec<Statement> {
        self.shared
            .statements
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Successful statements so far.
    pub fn successes(&self) -> usize {
        self.shared
            .statements
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|s| s.outcome == Outcome::Ok)
            .count()
    }

    /// Stops the clients (each finishes its statement, at most
    /// [`STATEMENT_TIMEOUT`]) and returns every statement, or an error if
    /// the record filled up ([`MAX_STATEMENTS`]).
    pub fn stop(mut self) -> Result<Vec<Statement>, String> {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let all = self.statements();
        if all.len() >= MAX_STATEMENTS {
            return Err(format!(
                "the application recorded {MAX_STATEMENTS} statements and stopped: \
                 fewer faults or clients per run"
            ));
        }
        Ok(all)
    }
}

impl Drop for App {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
    }
}

fn opts(t: &Target) -> OptsBuilder {
    // Fixed here what mysql_async would otherwise ask the server for at
    // login: a node that is not ready may refuse those queries.
    OptsBuilder::default()
        .ip_or_hostname(t.host.clone())
        .tcp_port(t.port)
        .user(Some(t.user.clone()))
        .pass(Some(t.password.clone()))
        .prefer_socket(false)
        .stmt_cache_size(0)
        .max_allowed_packet(Some(4 << 20))
        .wait_timeout(Some(28_800))
        .tcp_nodelay(true)
}

fn classify(e: &mysql_async::Error) -> Outcome {
    match e {
        mysql_async::Error::Server(se) => Outcome::Server(se.code),
        _ => Outcome::Lost,
    }
}

async fn client(shared: Arc<Shared>, target: Target, client: u32, pace: Duration) {
    let mut conn: Option<Conn> = None;
    while !shared.stop.load(Ordering::Relaxed) {
        let Some(c) = conn.as_mut() else {
            let start_us = shared.now_us();
            match tokio::time::timeout(CONNECT_TIMEOUT, Conn::new(opts(&target))).await {
                Ok(Ok(c)) => conn = Some(c),
                Ok(Err(_)) | Err(_) => {
                    shared.record(Statement {
                        client,
                        id: 0,
                        start_us,
                        end_us: shared.now_us(),
                        outcome: Outcome::Connect,
                    });
                    tokio::time::sleep(RECONNECT_PAUSE).await;
                }
            }
            continue;
        };
        let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
        let sql = insert_sql(id, client);
        let start_us = shared.now_us();
        let outcome = match tokio::time::timeout(STATEMENT_TIMEOUT, c.query_drop(sql)).await {
            Ok(Ok(())) => Outcome::Ok,
            Ok(Err(e)) => classify(&e),
            Err(_) => Outcome::Timeout,
        };
        let keep = matches!(outcome, Outcome::Ok | Outcome::Server(ER_LOCK_DEADLOCK));
        shared.record(Statement {
            client,
            id,
            start_us,
            end_us: shared.now_us(),
            outcome,
        });
        if !keep {
            // Dropped, not closed politely: the server may be gone.
            conn = None;
        }
        tokio::time::sleep(pace).await;
    }
    if let Some(c) = conn {
        let _ = tokio::time::timeout(Duration::from_secs(2), c.disconnect()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_insert_records_the_node_and_its_state_in_the_same_statement() {
        let sql = insert_sql(7, 2);
        assert!(sql.starts_with("INSERT INTO failover.w"));
        assert!(sql.contains("SELECT 7, 2, @@wsrep_node_name"));
        assert!(sql.contains("'WSREP_LOCAL_STATE'"));
        assert!(sql.contains("'WSREP_CLUSTER_STATUS'"));
    }
}
