//! What clients ask for: list-append transactions over a sliding window of
//! keys, and register read-modify-writes; the schema they use; the SQL of
//! each micro-operation.

use std::sync::atomic::{AtomicU64, Ordering};

use lockstep_history::Mop;

use lockstep_core::rng::Rng;

/// The database the runs use.
pub const DB: &str = "jepsen";

/// Tables: lists as comma-separated text (appends with CONCAT), and
/// registers holding the last writer's unique value.
pub fn schema(registers: u64) -> String {
    let rows: Vec<String> = (0..registers).map(|k| format!("({k}, 0)")).collect();
    format!(
        "CREATE DATABASE {DB}; \
         CREATE TABLE {DB}.la (k INT PRIMARY KEY, v MEDIUMTEXT NOT NULL) ENGINE=InnoDB; \
         CREATE TABLE {DB}.reg (k INT PRIMARY KEY, v BIGINT NOT NULL) ENGINE=InnoDB; \
         INSERT INTO {DB}.reg VALUES {}",
        rows.join(", ")
    )
}

/// Which workload a client runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    ListAppend,
    Register,
}

/// List-append keys live for this many transactions each (of all
/// clients), so lists stay short and new keys keep coming.
const KEY_WINDOW_TXNS: u64 = 30;
/// Keys a transaction chooses from at a time.
const ACTIVE_KEYS: u64 = 4;
/// Micro-operations per list-append transaction: 1 to this many.
const MAX_MOPS: u64 = 4;

/// Counters shared by every client of a run.
#[derive(Debug, Default)]
pub struct Counters {
    next_value: AtomicU64,
    txns: AtomicU64,
    max_key: AtomicU64,
}

impl Counters {
    /// A value no other append or register write of the run uses (never 0).
    pub fn unique_value(&self) -> u64 {
        self.next_value.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The largest list key any transaction used.
    pub fn max_key(&self) -> u64 {
        self.max_key.load(Ordering::Relaxed)
    }
}

/// The micro-operations of the next transaction (reads without values).
pub fn next_txn(
    workload: Workload,
    rng: &mut Rng,
    counters: &Counters,
    registers: u64,
) -> Vec<Mop> {
    match workload {
        Workload::Register => {
            let key = rng.below(registers);
            vec![
                Mop::RegRead { key, value: None },
                Mop::RegWrite {
                    key,
                    value: counters.unique_value(),
                },
            ]
        }
        Workload::ListAppend => {
            let n = counters.txns.fetch_add(1, Ordering::Relaxed);
            let base = n / KEY_WINDOW_TXNS;
            let mops: Vec<Mop> = (0..1 + rng.below(MAX_MOPS))
                .map(|_| {
                    let key = base + rng.below(ACTIVE_KEYS);
                    counters.max_key.fetch_max(key, Ordering::Relaxed);
                    if rng.chance(0.5) {
                        Mop::Read { key, values: None }
                    } else {
                        Mop::Append {
                            key,
                            value: counters.unique_value(),
                        }
                    }
                })
                .collect();
            mops
        }
    }
}

/// The statement that performs `mop`.
pub fn sql_of(mop: &Mop) -> String {
    match *mop {
        Mop::Append { key, value } => format!(
            "INSERT INTO {DB}.la (k, v) VALUES ({key}, '{value}') \
             ON DUPLICATE KEY UPDATE v = CONCAT(v, ',{value}')"
        ),
        Mop::Read { key, .. } => format!("SELECT v FROM {DB}.la WHERE k = {key}"),
        Mop::RegRead { key, .. } => format!("SELECT v FROM {DB}.reg WHERE k = {key}"),
        Mop::RegWrite { key, value } => format!("UPDATE {DB}.reg SET v = {value} WHERE k = {key}"),
    }
}

/// A list as the table stores it: `1,2,3`, or nothing for no row. A value
/// that is not a number reads as `u64::MAX`, which nobody appends, so the
/// checker reports it as a phantom instead of the client failing.
pub fn parse_list(text: &str) -> Vec<u64> {
    let text = text.trim();
    if text.is_empty() {
        return Vec::new();
    }
    text.split(',')
        .map(|v| v.trim().parse().unwrap_or(u64::MAX))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_as_stored_and_garbage_becomes_a_phantom() {
        assert_eq!(parse_list(""), Vec::<u64>::new());
        assert_eq!(parse_list("7"), vec![7]);
        assert_eq!(parse_list("1,2,30\n"), vec![1, 2, 30]);
        assert_eq!(parse_list("1,x"), vec![1, u64::MAX]);
    }

    #[test]
    fn values_are_unique_and_keys_slide() {
        let c = Counters::default();
        let mut rng = Rng::new(1);
        let mut values = std::collections::BTreeSet::new();
        for _ in 0..300 {
            for m in next_txn(Workload::ListAppend, &mut rng, &c, 3) {
                if let Mop::Append { value, .. } = m {
                    assert!(values.insert(value), "value {value} twice");
                }
            }
        }
        assert!(
            c.max_key() >= 300 / KEY_WINDOW_TXNS,
            "keys did not move: {}",
            c.max_key()
        );
        let reg = next_txn(Workload::Register, &mut rng, &c, 3);
        assert!(
            matches!(reg[..], [Mop::RegRead { key: k1, .. }, Mop::RegWrite { key: k2, value }] if k1 == k2 && k1 < 3 && !values.contains(&value))
        );
    }
}
