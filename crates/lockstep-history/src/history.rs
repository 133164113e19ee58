//! What clients record: one [`Txn`] per attempted transaction.
//!
//! A history file is JSON lines, one transaction per line, in invocation
//! order; [`History::to_jsonl`] and [`History::from_jsonl`] write and read
//! it, so a run's evidence can be kept and checked again later.

use serde::{Deserialize, Serialize};

/// How a transaction ended, as the client saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// COMMIT returned OK: the cluster acknowledged it.
    Ok,
    /// The database said it did not commit (a deadlock, a statement error
    /// before COMMIT, a node that refused it).
    Fail,
    /// The connection died or timed out during COMMIT: it may have
    /// committed or not.
    Unknown,
}

/// One micro-operation of a transaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mop {
    /// Appends `value` (unique in the history) to the list at `key`.
    Append { key: u64, value: u64 },
    /// Reads the list at `key`: `None` when the read did not complete.
    Read { key: u64, values: Option<Vec<u64>> },
    /// Reads the register at `key` (0 is its initial value).
    RegRead { key: u64, value: Option<u64> },
    /// Overwrites the register at `key` with `value` (unique, never 0).
    RegWrite { key: u64, value: u64 },
}

impl Mop {
    /// A micro-operation of the list-append workload.
    pub fn is_list(&self) -> bool {
        matches!(self, Mop::Append { .. } | Mop::Read { .. })
    }

    /// A micro-operation of the register workload.
    pub fn is_register(&self) -> bool {
        matches!(self, Mop::RegRead { .. } | Mop::RegWrite { .. })
    }

    pub fn key(&self) -> u64 {
        match *self {
            Mop::Append { key, .. }
            | Mop::Read { key, .. }
            | Mop::RegRead { key, .. }
            | Mop::RegWrite { key, .. } => key,
        }
    }
}

/// One transaction as a client attempted it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Txn {
    /// Unique in the history; anomalies name transactions by it.
    pub id: u64,
    /// The client (one connection at a time) that ran it.
    pub process: u32,
    /// The node (0-based) it ran on.
    pub node: u32,
    /// Microseconds since the run began, when the client sent its first
    /// statement, and when it had the outcome.
    pub invoke_us: u64,
    pub complete_us: u64,
    pub outcome: Outcome,
    pub mops: Vec<Mop>,
    /// Final reads taken after the faults healed, one per node.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_final: bool,
    /// The error that ended it, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Txn {
    pub fn is_ok(&self) -> bool {
        self.outcome == Outcome::Ok
    }

    /// Completed strictly before `other` was invoked.
    pub fn precedes(&self, other: &Txn) -> bool {
        self.complete_us < other.invoke_us
    }

    /// `T12 (node 2, process 5, ok)`: how explanations name it.
    pub fn label(&self) -> String {
        let outcome = match self.outcome {
            Outcome::Ok => "ok",
            Outcome::Fail => "failed",
            Outcome::Unknown => "unknown",
        };
        let fin = if self.is_final { ", final read" } else { "" };
        format!(
            "T{} (node {}, process {}, {outcome}{fin}, {:.3}-{:.3} s)",
            self.id,
            self.node + 1,
            self.process,
            self.invoke_us as f64 / 1e6,
            self.complete_us as f64 / 1e6
        )
    }
}

/// A whole run's transactions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    pub txns: Vec<Txn>,
}

impl History {
    pub fn new(txns: Vec<Txn>) -> History {
        History { txns }
    }

    /// The transactions with a micro-operation `of` selects (a workload's
    /// part of the history), in history order.
    pub fn txns_with(&self, of: fn(&Mop) -> bool) -> Vec<&Txn> {
        self.txns.iter().filter(|t| t.mops.iter().any(of)).collect()
    }

    /// The transaction with `id`.
    pub fn get(&self, id: u64) -> Option<&Txn> {
        self.txns.iter().find(|t| t.id == id)
    }

    pub fn count(&self, outcome: Outcome) -> usize {
        self.txns
            .iter()
            .filter(|t| !t.is_final && t.outcome == outcome)
            .count()
    }

    /// One JSON object per line.
    pub fn to_jsonl(&self) -> String {
        let mut out = String::new();
        for t in &self.txns {
            out.push_str(&serde_json::to_string(t).expect("a Txn always serializes"));
            out.push('\n');
        }
        out
    }

    /// Reads [`History::to_jsonl`]'s format; the error names the line.
    pub fn from_jsonl(text: &str) -> Result<History, String> {
        let mut txns = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let t: Txn =
                serde_json::from_str(line).map_err(|e| format!("history line {}: {e}", i + 1))?;
            txns.push(t);
        }
        Ok(History { txns })
    }
}
