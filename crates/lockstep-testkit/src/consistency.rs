//! Are the nodes identical? Replication positions, table checksums, and the
//! error logs of every node for failure reports.

use std::fmt;
use std::time::{Duration, Instant};

use crate::cluster::Cluster;
use crate::error::{Error, LogTail, Result};
use crate::node::{Node, LOG_TAIL_LINES};

impl Node {
    /// `wsrep_last_committed`: the seqno up to which this node has committed
    /// (its own transactions and applied ones) in the cluster's total order.
    pub fn last_committed(&self) -> Result<i64> {
        let value = self.status("wsrep_last_committed")?;
        value
            .as_deref()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| {
                Error::config(format!(
                    "{}: wsrep_last_committed is {value:?}, not a number",
                    self.name()
                ))
            })
    }

    /// `CHECKSUM TABLE` of `tables` (qualified names such as `sbtest.sbtest1`),
    /// in the given order. `None` for a table the server does not have.
    pub fn checksum_tables(&self, tables: &[&str]) -> Result<Vec<Option<String>>> {
        let rows = self.query_rows(&format!("CHECKSUM TABLE {}", tables.join(", ")))?;
        if rows.len() != tables.len() {
            return Err(Error::config(format!(
                "{}: CHECKSUM TABLE of {} table(s) returned {} row(s): {rows:?}",
                self.name(),
                tables.len(),
                rows.len()
            )));
        }
        Ok(rows
            .into_iter()
            .map(|r| r.get(1).filter(|v| *v != "NULL").cloned())
            .collect())
    }
}

impl Cluster {
    /// Waits until every running node reports the same
    /// `wsrep_last_committed`, and returns it. Once writes have stopped this
    /// means every node has applied every transaction; call it before
    /// comparing data across nodes. On timeout the error names the node
    /// furthest behind and carries its log.
    pub fn wait_for_equal_last_committed(&self, timeout: Duration) -> Result<i64> {
        self.wait_for_last_committed(
            timeout,
            "the same wsrep_last_committed on every node",
            |min, max| min == max,
        )
    }

    /// Waits until every running node reports a `wsrep_last_committed` of
    /// at least `seqno`: every node has committed as much. Unlike
    /// [`Cluster::wait_for_equal_last_committed`] this ends while writes
    /// go on (under load the nodes seldom agree at the instant of a poll).
    pub fn wait_for_last_committed_at_least(&self, seqno: i64, timeout: Duration) -> Result<i64> {
        let what = format!("wsrep_last_committed of at least {seqno} on every node");
        self.wait_for_last_committed(timeout, &what, |min, _| min >= seqno)
    }

    /// Polls every running node's `wsrep_last_committed` until `done(min,
    /// max)` holds; returns the minimum. On timeout the error names the
    /// node furthest behind and carries its log.
    fn wait_for_last_committed(
        &self,
        timeout: Duration,
        waiting_for: &str,
        done: impl Fn(i64, i64) -> bool,
    ) -> Result<i64> {
        let t0 = Instant::now();
        loop {
            let seen = self.last_committed_all()?;
            let (min, max) = seen.iter().fold((i64::MAX, i64::MIN), |(lo, hi), (_, v)| {
                (lo.min(*v), hi.max(*v))
            });
            if done(min, max) {
                return Ok(min);
            }
            if t0.elapsed() >= timeout {
                let laggard = seen.iter().find(|(_, v)| *v == min).map(|(n, _)| *n);
                let laggard = laggard.expect("the minimum belongs to a node");
                let shown: Vec<String> = seen
                    .iter()
                    .map(|(n, v)| format!("{}={v}", n.name()))
                    .collect();
                return Err(Error::Timeout {
                    node: laggard.name().to_string(),
                    waiting_for: waiting_for.into(),
                    waited: t0.elapsed(),
                    last_seen: shown.join(", "),
                    log: LogTail::read(laggard.error_log_path(), LOG_TAIL_LINES),
                });
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn last_committed_all(&self) -> Result<Vec<(&Node, i64)>> {
        self.nodes()
            .iter()
            .filter(|n| n.is_running())
            .map(|n| Ok((n, n.last_committed()?)))
            .collect()
    }

    /// `CHECKSUM TABLE` of `tables` on every running node.
    pub fn checksums(&self, tables: &[&str]) -> Result<ChecksumReport> {
        let mut per_node = Vec::new();
        for n in self.nodes().iter().filter(|n| n.is_running()) {
            per_node.push((n.name().to_string(), n.checksum_tables(tables)?));
        }
        Ok(ChecksumReport {
            tables: tables.iter().map(|t| t.to_string()).collect(),
            per_node,
        })
    }

    /// The last `lines` lines of every node's error log, one section per
    /// node: what a failing multi-node test should print.
    pub fn log_tails(&self, lines: usize) -> String {
        self.nodes()
            .iter()
            .map(|n| format!("{}", LogTail::read(n.error_log_path(), lines)))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Table checksums per node, from [`Cluster::checksums`]. Its `Display` is
/// a grid (one row per table, one column per node) marking differences.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChecksumReport {
    /// The tables, in the order asked for.
    pub tables: Vec<String>,
    /// For each node, its checksum of each table (`None`: no such table).
    pub per_node: Vec<(String, Vec<Option<String>>)>,
}

impl ChecksumReport {
    /// True when every table exists on every node with the same checksum.
    pub fn is_consistent(&self) -> bool {
        (0..self.tables.len()).all(|t| self.table_is_consistent(t))
    }

    fn table_is_consistent(&self, t: usize) -> bool {
        let mut values = self.per_node.iter().map(|(_, sums)| &sums[t]);
        match values.next() {
            Some(Some(first)) => values.all(|v| v.as_ref() == Some(first)),
            Some(None) => false,
            None => true,
        }
    }
}

impl fmt::Display for ChecksumReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:<24}", "table")?;
        for (node, _) in &self.per_node {
            write!(f, " {node:>12}")?;
        }
        for (t, table) in self.tables.iter().enumerate() {
            write!(f, "\n{table:<24}")?;
            for (_, sums) in &self.per_node {
                write!(f, " {:>12}", sums[t].as_deref().unwrap_or("(missing)"))?;
            }
            if !self.table_is_consistent(t) {
                write!(f, "   <-- differs")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(sums: &[(&str, &[Option<&str>])]) -> ChecksumReport {
        ChecksumReport {
            tables: vec!["db.a".into(), "db.b".into()],
            per_node: sums
                .iter()
                .map(|(n, s)| {
                    (
                        n.to_string(),
                        s.iter().map(|v| v.map(String::from)).collect(),
                    )
                })
                .collect(),
        }
    }

    #[test]
    fn equal_checksums_are_consistent() {
        let r = report(&[
            ("node1", &[Some("1"), Some("2")]),
            ("node2", &[Some("1"), Some("2")]),
        ]);
        assert!(r.is_consistent(), "{r}");
        assert!(!r.to_string().contains("differs"));
    }

    #[test]
    fn a_difference_or_a_missing_table_is_marked() {
        let r = report(&[
            ("node1", &[Some("1"), Some("2")]),
            ("node2", &[Some("1"), Some("3")]),
        ]);
        assert!(!r.is_consistent());
        let text = r.to_string();
        let line = text.lines().find(|l| l.starts_with("db.b")).unwrap();
        assert!(line.ends_with("<-- differs"), "{text}");
        let r = report(&[("node1", &[None, Some("2")]), ("node2", &[None, Some("2")])]);
        assert!(!r.is_consistent(), "a table missing everywhere is no proof");
        assert!(r.to_string().contains("(missing)"));
    }
}
