//! A write load that remembers what the cluster acknowledged, for fault
//! tests: while nodes are killed, restarted or cut off, one writer per node
//! inserts rows with unique ids and records each id whose COMMIT returned
//! OK. Afterwards [`Cluster::verify_acked`] checks the rule that matters:
//! every acknowledged row is on every node, and the nodes are identical.
//!
//! A failed statement (a node down, non-Primary, a deadlock) is counted
//! and not acknowledged; the writer reconnects and goes on, so the load
//! keeps running across the fault.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::cluster::Cluster;
use crate::error::{Error, Result};
use crate::session::Session;

/// Pause between two inserts of one writer: a steady load that leaves the
/// two cores of a small machine room for the servers.
const PACE: Duration = Duration::from_millis(5);
/// How long one insert may take before the writer gives up on it.
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(30);
/// Wait before reconnecting to a node that refused or is down.
const RECONNECT: Duration = Duration::from_millis(200);

/// What one writer did.
#[derive(Debug, Default, Clone)]
pub struct WriterReport {
    pub node: String,
    /// Ids whose insert returned OK.
    pub acked: Vec<u64>,
    /// Statements that failed (not acknowledged).
    pub errors: u64,
    /// The first few error messages, for failure reports.
    pub first_errors: Vec<String>,
    /// The longest time one statement took (a hung commit shows here).
    pub slowest: Duration,
}

/// Writers running against the nodes of a cluster.
pub struct AckedLoad {
    table: String,
    stop: Arc<AtomicBool>,
    acked: Arc<AtomicU64>,
    writers: Vec<JoinHandle<WriterReport>>,
}

impl AckedLoad {
    /// Creates `table` (through the first running node) and starts one
    /// writer per node. Writers of stopped nodes retry until they start.
    pub fn start(cluster: &Cluster, table: &str) -> Result<AckedLoad> {
        let first = cluster
            .nodes()
            .iter()
            .find(|n| n.is_running())
            .ok_or_else(|| Error::config("no running node to create the load's table on"))?;
        first.sql(&format!(
            "CREATE TABLE {table} (id BIGINT PRIMARY KEY, node VARCHAR(16), \
             pad VARCHAR(100)) ENGINE=InnoDB"
        ))?;
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(AtomicU64::new(0));
        let writers = cluster
            .nodes()
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let w = Writer {
                    node: n.name().to_string(),
                    socket: n.socket().to_path_buf(),
                    table: table.to_string(),
                    id_base: (i as u64 + 1) << 40,
                    stop: stop.clone(),
                    acked: acked.clone(),
                };
                std::thread::spawn(move || w.run())
            })
            .collect();
        Ok(AckedLoad {
            table: table.to_string(),
            stop,
            acked,
            writers,
        })
    }

    /// Inserts acknowledged so far, by all writers.
    pub fn acked(&self) -> u64 {
        self.acked.load(Ordering::Relaxed)
    }

    /// Waits until at least `more` further inserts are acknowledged: proof
    /// that the cluster takes writes (at the moment of the call).
    pub fn wait_for_progress(&self, more: u64, timeout: Duration) -> Result<()> {
        let want = self.acked() + more;
        let t0 = Instant::now();
        while self.acked() < want {
            if t0.elapsed() > timeout {
                return Err(Error::config(format!(
                    "the load acknowledged {} of {more} more inserts in {timeout:?}",
                    self.acked() + more - want
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Stops the writers and returns what each did.
    pub fn stop(self) -> (String, Vec<WriterReport>) {
        self.stop.store(true, Ordering::Relaxed);
        let reports = self
            .writers
            .into_iter()
            // A writer that panicked took its acknowledged ids with it:
            // checking the others alone would hide them, so the panic
            // goes on to the caller.
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect();
        (self.table, reports)
    }
}

struct Writer {
    node: String,
    socket: PathBuf,
    table: String,
    id_base: u64,
    stop: Arc<AtomicBool>,
    acked: Arc<AtomicU64>,
}

impl Writer {
    fn run(self) -> WriterReport {
        let mut report = WriterReport {
            node: self.node.clone(),
            ..Default::default()
        };
        let mut session: Option<Session> = None;
        let mut next = self.id_base;
        while !self.stop.load(Ordering::Relaxed) {
            let s = match session.as_mut() {
                Some(s) => s,
                None => match Session::open(&self.node, &self.socket, Duration::from_secs(10)) {
                    Ok(mut s) => {
                        s.set_timeout(STATEMENT_TIMEOUT);
                        session.insert(s)
                    }
                    Err(_) => {
                        std::thread::sleep(RECONNECT);
                        continue;
                    }
                },
            };
            let id = next;
            next += 1;
            let t0 = Instant::now();
            let result = s.sql(&format!(
                "INSERT INTO {} VALUES ({id}, '{}', REPEAT('x', 100))",
                self.table, self.node
            ));
            report.slowest = report.slowest.max(t0.elapsed());
            match result {
                Ok(_) => {
                    report.acked.push(id);
                    self.acked.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(PACE);
                }
                Err(e) => {
                    report.errors += 1;
                    if report.first_errors.len() < 5 {
                        report.first_errors.push(e.to_string());
                    }
                    // A fresh connection after any error: the old one may
                    // be dead, and a refused node may come back.
                    session = None;
                    std::thread::sleep(RECONNECT);
                }
            }
        }
        report
    }
}

impl Cluster {
    /// After a load: waits until every running node has applied the same
    /// last seqno, then checks that every acknowledged id is present on
    /// every running node and that the table is identical everywhere.
    /// Returns the number of acknowledged rows checked.
    pub fn verify_acked(&self, table: &str, reports: &[WriterReport]) -> Result<usize> {
        self.wait_for_equal_last_committed(Duration::from_secs(120))?;
        let acked: BTreeSet<u64> = reports
            .iter()
            .flat_map(|r| r.acked.iter().copied())
            .collect();
        for node in self.nodes().iter().filter(|n| n.is_running()) {
            let rows = node.query_rows(&format!("SELECT id FROM {table}"))?;
            let present: BTreeSet<u64> = rows
                .iter()
                .filter_map(|r| r.first().and_then(|v| v.parse().ok()))
                .collect();
            let missing: Vec<&u64> = acked.difference(&present).collect();
            if !missing.is_empty() {
                return Err(Error::config(format!(
                    "{}: {} of {} acknowledged rows are missing (first: {:?})",
                    node.name(),
                    missing.len(),
                    acked.len(),
                    &missing[..missing.len().min(5)]
                )));
            }
        }
        let sums = self.checksums(&[table])?;
        if !sums.is_consistent() {
            return Err(Error::config(format!("the nodes differ:\n{sums}")));
        }
        Ok(acked.len())
    }
}
