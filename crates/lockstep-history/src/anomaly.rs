//! The anomalies the checker names, and the report it returns.

use std::collections::BTreeMap;
use std::fmt;

/// Every kind of anomaly the checker can report. The names are Adya's and
/// Elle's where they have one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AnomalyKind {
    /// A cycle of write-write dependencies only (dirty write).
    G0,
    /// A read saw a value written by a transaction that failed.
    G1a,
    /// A read saw a value another transaction overwrote itself before it
    /// committed (an intermediate version).
    G1b,
    /// A cycle of write-write and write-read dependencies (circular
    /// information flow).
    G1c,
    /// A cycle with exactly one read-write anti-dependency (read skew).
    GSingle,
    /// A cycle with two or more anti-dependencies (write skew).
    G2Item,
    /// A cycle that exists only with real-time edges and has at most one
    /// anti-dependency: something ordered before a transaction that had
    /// completed before it began, or missed by a causal read (strong
    /// snapshot isolation forbids it).
    GSingleRealtime,
    /// A cycle that exists only with real-time edges and has two or more
    /// anti-dependencies (snapshot isolation allows it).
    G2ItemRealtime,
    /// Two committed transactions read the same version of a register and
    /// both overwrote it: one update is lost.
    P4,
    /// An acknowledged write is missing from a final read.
    LostWrite,
    /// A read missed a write acknowledged before the read began, under a
    /// causal-read claim.
    StaleRead,
    /// A value appears twice in one read.
    DuplicateElement,
    /// A read saw a value no transaction wrote.
    PhantomElement,
    /// Two reads of a key are not prefixes of one another: no single
    /// version order explains them.
    IncompatibleOrder,
    /// After healing, the nodes' final reads of a key differ.
    Divergence,
}

impl AnomalyKind {
    pub const ALL: [AnomalyKind; 15] = [
        AnomalyKind::G0,
        AnomalyKind::G1a,
        AnomalyKind::G1b,
        AnomalyKind::G1c,
        AnomalyKind::GSingle,
        AnomalyKind::G2Item,
        AnomalyKind::GSingleRealtime,
        AnomalyKind::G2ItemRealtime,
        AnomalyKind::P4,
        AnomalyKind::LostWrite,
        AnomalyKind::StaleRead,
        AnomalyKind::DuplicateElement,
        AnomalyKind::PhantomElement,
        AnomalyKind::IncompatibleOrder,
        AnomalyKind::Divergence,
    ];

    /// The name used in reports and tables.
    pub fn name(self) -> &'static str {
        match self {
            AnomalyKind::G0 => "G0",
            AnomalyKind::G1a => "G1a",
            AnomalyKind::G1b => "G1b",
            AnomalyKind::G1c => "G1c",
            AnomalyKind::GSingle => "G-single",
            AnomalyKind::G2Item => "G2-item",
            AnomalyKind::GSingleRealtime => "G-single-realtime",
            AnomalyKind::G2ItemRealtime => "G2-item-realtime",
            AnomalyKind::P4 => "P4",
            AnomalyKind::LostWrite => "lost-write",
            AnomalyKind::StaleRead => "stale-read",
            AnomalyKind::DuplicateElement => "duplicate",
            AnomalyKind::PhantomElement => "phantom",
            AnomalyKind::IncompatibleOrder => "incompatible-order",
            AnomalyKind::Divergence => "divergence",
        }
    }
}

/// The isolation a run claims, which decides which cycles are anomalies
/// and which are allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// `innodb_snapshot_isolation=ON` with causal reads: strong snapshot
    /// isolation. Write skew (G2-item) is allowed, nothing else.
    Snapshot,
    /// InnoDB's REPEATABLE READ as the server ships it: a plain read sees
    /// a snapshot, a write the newest version, so read-modify-write loses
    /// updates (P4, G-single) as well.
    RepeatableRead,
}

impl AnomalyKind {
    /// Whether `isolation` allows histories showing this kind.
    pub fn allowed_under(self, isolation: Isolation) -> bool {
        use AnomalyKind::*;
        match isolation {
            Isolation::Snapshot => matches!(self, G2Item | G2ItemRealtime),
            Isolation::RepeatableRead => {
                matches!(
                    self,
                    G2Item | G2ItemRealtime | GSingle | GSingleRealtime | P4
                )
            }
        }
    }
}

impl fmt::Display for AnomalyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One anomaly: its kind, the transactions involved, and a few lines that
/// explain it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anomaly {
    pub kind: AnomalyKind,
    pub txns: Vec<u64>,
    pub explanation: Vec<String>,
}

impl fmt::Display for Anomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}:", self.kind)?;
        for line in &self.explanation {
            writeln!(f, "  {line}")?;
        }
        Ok(())
    }
}

/// Explanations kept per kind: the count is exact, the text is bounded.
pub const EXPLAINED_PER_KIND: usize = 8;

/// What a check found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Exact counts by kind.
    pub counts: BTreeMap<AnomalyKind, usize>,
    /// At most [`EXPLAINED_PER_KIND`] explained anomalies of each kind.
    pub anomalies: Vec<Anomaly>,
}

impl Report {
    pub fn add(&mut self, anomaly: Anomaly) {
        let n = self.counts.entry(anomaly.kind).or_insert(0);
        *n += 1;
        if *n <= EXPLAINED_PER_KIND {
            self.anomalies.push(anomaly);
        }
    }

    pub fn merge(&mut self, other: Report) {
        for (kind, n) in other.counts {
            *self.counts.entry(kind).or_insert(0) += n;
        }
        self.anomalies.extend(other.anomalies);
    }

    pub fn count(&self, kind: AnomalyKind) -> usize {
        self.counts.get(&kind).copied().unwrap_or(0)
    }

    pub fn is_clean(&self) -> bool {
        self.counts.values().all(|&n| n == 0)
    }

    /// No kind that `isolation` forbids was found.
    pub fn is_clean_under(&self, isolation: Isolation) -> bool {
        self.counts
            .iter()
            .all(|(k, &n)| n == 0 || k.allowed_under(isolation))
    }

    /// [`Report::summary`] of the kinds `isolation` forbids (`allowed`
    /// false) or allows (`allowed` true).
    pub fn summary_under(&self, isolation: Isolation, allowed: bool) -> String {
        self.summary_of(|k| k.allowed_under(isolation) == allowed)
    }

    /// `G-single 2, lost-write 1`, or `none`.
    pub fn summary(&self) -> String {
        self.summary_of(|_| true)
    }

    fn summary_of(&self, which: impl Fn(AnomalyKind) -> bool) -> String {
        let parts: Vec<String> = self
            .counts
            .iter()
            .filter(|(k, &n)| n > 0 && which(**k))
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(", ")
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "anomalies: {}", self.summary())?;
        for a in &self.anomalies {
            write!(f, "{a}")?;
        }
        Ok(())
    }
}
