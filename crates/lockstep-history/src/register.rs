//! The register analysis: read-modify-write transactions that read a
//! register and overwrite it with a unique value. A committed history of
//! such transactions is a chain from the initial value 0: each write names
//! the version it replaced. Two committed transactions that replaced the
//! same version fork the chain: one update is lost. When they ran
//! concurrently that is P4 (lost update); when one was acknowledged
//! before the other began, the second read a version already overwritten
//! and acknowledged: a lost write.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::anomaly::{Anomaly, AnomalyKind, Report};
use crate::history::{History, Mop, Outcome, Txn};

/// A committed read-modify-write: read `read` at `key`, wrote `wrote`.
#[derive(Debug, Clone, Copy)]
struct Rmw {
    txn: usize,
    key: u64,
    read: u64,
    wrote: u64,
}

/// Checks the register part of `history`.
pub fn check(history: &History) -> Report {
    let txns = history.txns_with(Mop::is_register);
    let mut report = Report::default();
    let mut writer: HashMap<(u64, u64), usize> = HashMap::new();
    for (i, t) in txns.iter().enumerate() {
        for m in &t.mops {
            if let Mop::RegWrite { key, value } = *m {
                writer.insert((key, value), i);
            }
        }
    }
    // Values read by ok transactions: an unknown writer of one committed.
    let mut observed = BTreeSet::new();
    for t in txns.iter().filter(|t| t.is_ok()) {
        for m in &t.mops {
            if let Mop::RegRead {
                key,
                value: Some(v),
            } = *m
            {
                observed.insert((key, v));
                check_read_source(&txns, &writer, t, key, v, &mut report);
            }
        }
    }
    let committed = |t: &Txn| match t.outcome {
        Outcome::Ok => true,
        Outcome::Unknown => t.mops.iter().any(
            |m| matches!(*m, Mop::RegWrite { key, value } if observed.contains(&(key, value))),
        ),
        Outcome::Fail => false,
    };
    let rmws: Vec<Rmw> = txns
        .iter()
        .enumerate()
        .filter(|(_, t)| !t.is_final && committed(t))
        .filter_map(|(i, t)| rmw_of(i, t))
        .collect();
    let mut grouped = BTreeSet::new();
    let mut by_version: BTreeMap<(u64, u64), Vec<Rmw>> = BTreeMap::new();
    for r in &rmws {
        by_version.entry((r.key, r.read)).or_default().push(*r);
    }
    for ((key, read), group) in &by_version {
        if group.len() < 2 {
            continue;
        }
        grouped.extend(group.iter().map(|r| r.txn));
        let sequential = group
            .iter()
            .any(|a| group.iter().any(|b| txns[a.txn].precedes(txns[b.txn])));
        let kind = if sequential {
            AnomalyKind::LostWrite
        } else {
            AnomalyKind::P4
        };
        let mut explanation: Vec<String> = group
            .iter()
            .map(|r| {
                format!(
                    "{} read key {key} = {read} and wrote {}",
                    txns[r.txn].label(),
                    r.wrote
                )
            })
            .collect();
        explanation.push(if sequential {
            "one was acknowledged before another began, which still read the version it had replaced".into()
        } else {
            "they ran concurrently and all committed: every update but one is lost".into()
        });
        report.add(Anomaly {
            kind,
            txns: group.iter().map(|r| txns[r.txn].id).collect(),
            explanation,
        });
    }
    check_finals(&txns, &rmws, &grouped, &mut report);
    report
}

/// The read and the write of a read-modify-write transaction.
fn rmw_of(i: usize, t: &Txn) -> Option<Rmw> {
    let mut read = None;
    let mut wrote = None;
    for m in &t.mops {
        match *m {
            Mop::RegRead {
                key,
                value: Some(v),
            } => read = Some((key, v)),
            Mop::RegWrite { key, value } => wrote = Some((key, value)),
            _ => {}
        }
    }
    let ((key, read), (wkey, wrote)) = (read?, wrote?);
    (key == wkey).then_some(Rmw {
        txn: i,
        key,
        read,
        wrote,
    })
}

/// A read of a value nobody wrote (phantom) or a failed transaction wrote
/// (G1a).
fn check_read_source(
    txns: &[&Txn],
    writer: &HashMap<(u64, u64), usize>,
    reader: &Txn,
    key: u64,
    v: u64,
    report: &mut Report,
) {
    if v == 0 {
        return;
    }
    match writer.get(&(key, v)) {
        None => report.add(Anomaly {
            kind: AnomalyKind::PhantomElement,
            txns: vec![reader.id],
            explanation: vec![format!(
                "{} read register {key} = {v}, which nobody wrote",
                reader.label()
            )],
        }),
        Some(&w) if txns[w].outcome == Outcome::Fail => report.add(Anomaly {
            kind: AnomalyKind::G1a,
            txns: vec![txns[w].id, reader.id],
            explanation: vec![
                format!("{} wrote {v} to register {key} and failed", txns[w].label()),
                format!("{} read register {key} = {v}", reader.label()),
            ],
        }),
        Some(_) => {}
    }
}

/// Every acknowledged write not already in a fork is on the chain that
/// ends at each node's final value; the nodes' final values agree.
fn check_finals(txns: &[&Txn], rmws: &[Rmw], grouped: &BTreeSet<usize>, report: &mut Report) {
    let replaced: HashMap<(u64, u64), u64> =
        rmws.iter().map(|r| ((r.key, r.wrote), r.read)).collect();
    let mut finals: BTreeMap<u64, Vec<(&Txn, u64)>> = BTreeMap::new();
    for t in txns.iter().filter(|t| t.is_final && t.is_ok()) {
        for m in &t.mops {
            if let Mop::RegRead {
                key,
                value: Some(v),
            } = *m
            {
                finals.entry(key).or_default().push((t, v));
            }
        }
    }
    for (key, values) in &finals {
        let (first, v0) = values[0];
        if let Some((other, v)) = values.iter().find(|(_, v)| *v != v0) {
            report.add(Anomaly {
                kind: AnomalyKind::Divergence,
                txns: vec![first.id, other.id],
                explanation: vec![
                    format!(
                        "after healing, node {} has register {key} = {v0}",
                        first.node + 1
                    ),
                    format!("and node {} has register {key} = {v}", other.node + 1),
                ],
            });
        }
        for &(f, end) in values {
            // The chain back from the final value; bounded by the history.
            let mut chain = BTreeSet::new();
            let mut at = end;
            while at != 0 && chain.insert(at) && chain.len() <= rmws.len() + 1 {
                match replaced.get(&(*key, at)) {
                    Some(&prev) => at = prev,
                    None => break,
                }
            }
            for r in rmws.iter().filter(|r| r.key == *key && txns[r.txn].is_ok()) {
                if !chain.contains(&r.wrote) && !grouped.contains(&r.txn) {
                    report.add(Anomaly {
                        kind: AnomalyKind::LostWrite,
                        txns: vec![txns[r.txn].id, f.id],
                        explanation: vec![
                            format!(
                                "{} wrote {} to register {key} and was acknowledged",
                                txns[r.txn].label(),
                                r.wrote
                            ),
                            format!(
                                "node {}'s final value {end} does not descend from it",
                                f.node + 1
                            ),
                        ],
                    });
                }
            }
        }
    }
}
