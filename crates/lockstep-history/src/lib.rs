//! A Jepsen-style history checker, after Elle (Kingsbury & Alvaro, 2020).
//!
//! Clients of a cluster record every transaction they attempt as a [`Txn`]:
//! when it was invoked, when it completed, on which node, with what outcome
//! ([`Outcome::Ok`], [`Outcome::Fail`] when the database said it did not
//! commit, [`Outcome::Unknown`] when the connection died during the commit),
//! and its micro-operations with the values the database returned. This
//! crate has no I/O and no clock: it takes a finished [`History`] and
//! returns a [`Report`] of the [`Anomaly`]s it shows, each with a minimal
//! explanation (the transactions and the edges between them).
//!
//! Two workloads are understood:
//! - **list-append** ([`list_append`]): transactions of reads and appends of
//!   unique values over a few keys. Each key's version order is inferred
//!   from the reads (every read of a list is a prefix of the next one); the
//!   write-write, write-read and read-write (anti-) dependencies between
//!   transactions, plus real-time edges when the claim is about real time,
//!   form a graph whose cycles are Adya's anomalies (G0, G1c, G-single,
//!   G2-item). Reads of aborted or intermediate values (G1a, G1b),
//!   duplicated and phantom elements, acknowledged appends missing from the
//!   final reads (lost writes), final reads that differ between nodes
//!   (divergence), and reads that miss an append acknowledged before they
//!   began (stale reads, the causal-read claim) are found directly.
//! - **register** ([`register`]): read-modify-write transactions that read a
//!   register and overwrite it with a unique value. Two committed
//!   transactions that read the same version and both overwrote it are a
//!   lost update (P4).
//!
//! Transactions whose outcome is unknown are treated as Elle treats them:
//! they may or may not have committed; one whose write was observed by a
//! committed read did commit, one whose write nobody saw is left out.

#![forbid(unsafe_code)]

pub mod anomaly;
pub mod graph;
pub mod history;
pub mod list_append;
pub mod register;

pub use anomaly::{Anomaly, AnomalyKind, Isolation, Report};
pub use history::{History, Mop, Outcome, Txn};

/// Checks `history` with the analysis its workload needs: list-append
/// micro-operations and register ones may be mixed in one history (on
/// disjoint keys), each key is analysed by the workload that wrote it.
pub fn check(history: &History, options: &list_append::Options) -> Report {
    let mut report = list_append::check(history, options);
    report.merge(register::check(history));
    report
}
