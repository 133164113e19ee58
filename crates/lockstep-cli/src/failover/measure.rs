//! What an application saw during one fault, computed from the recorded
//! statements and the rows read back from every node afterwards. Pure
//! functions: the run collects, this module judges (unit-tested below).
//!
//! The definitions, as `docs/failover.md` states them:
//! - **outage**: for each client that saw a failure after the fault, from
//!   the sending of its first failed statement to the end of its first
//!   statement then acknowledged by a node other than the faulted one; the
//!   longest over the clients. A statement that hung and then failed
//!   counts from when it was sent. (With every node active, clients on the
//!   other nodes never fail; the clients that were on the faulted node
//!   are the ones that wait.)
//! - **longest wait**: the longest time one client went between two
//!   successful statements (a hang is an outage without an error).
//! - **lost**: statements acknowledged (COMMIT returned OK) whose row is
//!   missing on some node after recovery.
//! - **bad answers**: acknowledged statements whose row says the node that
//!   ran them was not Synced (`wsrep_local_state` 4) or not Primary.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

/// How one statement ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Outcome {
    Ok,
    /// A server error with its MariaDB code (1047 not ready, 1213 deadlock ...).
    Server(u16),
    /// No session: refused, reset during the handshake, or timed out.
    Connect,
    /// The session broke while the statement ran: the outcome is unknown.
    Lost,
    /// No answer within the statement timeout: unknown too.
    Timeout,
}

impl Outcome {
    /// The name failures are counted under in the report.
    pub fn code(&self) -> String {
        match self {
            Outcome::Ok => "ok".into(),
            Outcome::Server(c) => c.to_string(),
            Outcome::Connect => "connect".into(),
            Outcome::Lost => "lost connection".into(),
            Outcome::Timeout => "timeout".into(),
        }
    }
}

/// One statement of the recording application: an autocommit `INSERT` of
/// row `id`, whose row also records the node that ran it and its state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Statement {
    pub client: u32,
    pub id: u64,
    /// Microseconds since the run began.
    pub start_us: u64,
    pub end_us: u64,
    pub outcome: Outcome,
}

/// What a row says about the node that inserted it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Answer {
    pub node: String,
    pub local_state: String,
    pub cluster_status: String,
}

impl Answer {
    fn is_good(&self) -> bool {
        self.local_state == "4" && self.cluster_status == "Primary"
    }
}

/// The measured result of one fault.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FaultResult {
    pub statements: u64,
    pub succeeded: u64,
    /// Failed statements (and failed connection attempts) by code.
    pub failed: BTreeMap<String, u64>,
    /// None when no statement failed, or a client that failed never
    /// succeeded elsewhere in the window.
    pub outage_ms: Option<u64>,
    /// When the first statement that failed was sent, after the fault.
    pub first_failure_ms: Option<u64>,
    pub longest_wait_ms: u64,
    /// Acknowledged rows missing, per node name.
    pub lost: BTreeMap<String, u64>,
    /// Acknowledged statements answered by a node not Synced or not Primary,
    /// by `node state/status`.
    pub bad_answers: BTreeMap<String, u64>,
    /// Acknowledged statements per node that ran them.
    pub answered_by: BTreeMap<String, u64>,
}

impl FaultResult {
    pub fn failed_total(&self) -> u64 {
        self.failed.values().sum()
    }
    pub fn lost_total(&self) -> u64 {
        self.lost.values().sum()
    }
}

/// Judges the statements started in `[from_us, to_us)`. `faulted` names the
/// node the fault hit; `answers` maps row ids to what the row says (read
/// from a node that has them all); `rows` holds, per node, the ids it has.
pub fn judge(
    statements: &[Statement],
    from_us: u64,
    to_us: u64,
    faulted: &str,
    answers: &HashMap<u64, Answer>,
    rows: &BTreeMap<String, BTreeSet<u64>>,
) -> FaultResult {
    let mut window: Vec<&Statement> = statements
        .iter()
        .filter(|s| s.start_us >= from_us && s.start_us < to_us)
        .collect();
    window.sort_by_key(|s| (s.start_us, s.client));
    let mut r = FaultResult {
        statements: window.len() as u64,
        ..FaultResult::default()
    };
    for s in &window {
        if s.outcome == Outcome::Ok {
            r.succeeded += 1;
            if let Some(a) = answers.get(&s.id) {
                *r.answered_by.entry(a.node.clone()).or_default() += 1;
                if !a.is_good() {
                    let key = format!("{} {}/{}", a.node, a.local_state, a.cluster_status);
                    *r.bad_answers.entry(key).or_default() += 1;
                }
            }
        } else {
            *r.failed.entry(s.outcome.code()).or_default() += 1;
        }
    }
    if let Some(first) = window.iter().find(|s| s.outcome != Outcome::Ok) {
        r.first_failure_ms = Some((first.start_us - from_us) / 1000);
        r.outage_ms = client_outages_us(&window, faulted, answers)
            .into_iter()
            .try_fold(0u64, |longest, o| o.map(|o| longest.max(o)))
            .map(|us| us / 1000);
    }
    r.longest_wait_ms = longest_wait_us(statements, from_us, to_us) / 1000;
    let acked: Vec<u64> = statements
        .iter()
        .filter(|s| s.outcome == Outcome::Ok && s.start_us < to_us)
        .map(|s| s.id)
        .collect();
    for (node, ids) in rows {
        let missing = acked.iter().filter(|id| !ids.contains(id)).count() as u64;
        if missing > 0 {
            r.lost.insert(node.clone(), missing);
        }
    }
    r
}

/// Per client that failed: its first failure's sending to its first
/// success elsewhere after it (None if it never succeeded elsewhere).
fn client_outages_us(
    window: &[&Statement],
    faulted: &str,
    answers: &HashMap<u64, Answer>,
) -> Vec<Option<u64>> {
    let clients: BTreeSet<u32> = window.iter().map(|s| s.client).collect();
    clients
        .into_iter()
        .filter_map(|c| {
            let first = window
                .iter()
                .find(|s| s.client == c && s.outcome != Outcome::Ok)?;
            let back = window
                .iter()
                .filter(|s| s.client == c && s.outcome == Outcome::Ok)
                .filter(|s| s.end_us > first.start_us)
                .filter(|s| answers.get(&s.id).is_some_and(|a| a.node != faulted))
                .map(|s| s.end_us)
                .min();
            Some(back.map(|end| end - first.start_us))
        })
        .collect()
}

/// The longest time any client went without a success, within the window:
/// from its last success (or the window's start) to its next success (or
/// the window's end if it never succeeded again).
fn longest_wait_us(statements: &[Statement], from_us: u64, to_us: u64) -> u64 {
    let mut per_client: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for s in statements {
        if s.outcome == Outcome::Ok && s.end_us >= from_us && s.end_us < to_us {
            per_client.entry(s.client).or_default().push(s.end_us);
        }
    }
    let clients: BTreeSet<u32> = statements.iter().map(|s| s.client).collect();
    let mut longest = 0;
    for c in clients {
        let mut ends = per_client.remove(&c).unwrap_or_default();
        ends.sort_unstable();
        let mut last = from_us;
        for e in ends.iter().copied().chain(std::iter::once(to_us)) {
            longest = longest.max(e.saturating_sub(last));
            last = e;
        }
    }
    longest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(client: u32, id: u64, start_ms: u64, end_ms: u64, outcome: Outcome) -> Statement {
        Statement {
            client,
            id,
            start_us: start_ms * 1000,
            end_us: end_ms * 1000,
            outcome,
        }
    }

    fn ans(node: &str, state: &str, status: &str) -> Answer {
        Answer {
            node: node.into(),
            local_state: state.into(),
            cluster_status: status.into(),
        }
    }

    #[test]
    fn the_outage_runs_from_the_first_failure_sent_to_the_first_success_elsewhere() {
        let statements = vec![
            st(0, 1, 1000, 1010, Outcome::Ok),
            st(1, 6, 1000, 1005, Outcome::Ok),
            // Sent at 1100, hung, failed at 4000: the outage starts at 1100.
            st(0, 2, 1100, 4000, Outcome::Lost),
            st(0, 3, 4100, 4200, Outcome::Connect),
            // Still node1 (and another client: neither ends client 0's outage) ...
            st(1, 4, 4300, 4310, Outcome::Ok),
            // ... node2 does.
            st(0, 5, 4400, 4500, Outcome::Ok),
            st(1, 7, 4550, 4560, Outcome::Ok),
        ];
        let answers: HashMap<u64, Answer> = [
            (1, ans("node1", "4", "Primary")),
            (4, ans("node1", "4", "Primary")),
            (5, ans("node2", "4", "Primary")),
        ]
        .into_iter()
        .collect();
        let all: BTreeSet<u64> = [1, 4, 5].into_iter().collect();
        let rows: BTreeMap<String, BTreeSet<u64>> = [
            ("node1".to_string(), all.clone()),
            ("node2".to_string(), all),
        ]
        .into_iter()
        .collect();
        let r = judge(&statements, 500_000, 4_600_000, "node1", &answers, &rows);
        assert_eq!(r.outage_ms, Some(3400));
        assert_eq!(r.first_failure_ms, Some(600));
        assert_eq!(r.failed_total(), 2);
        assert_eq!(r.failed["lost connection"], 1);
        assert_eq!(r.failed["connect"], 1);
        assert_eq!(r.succeeded, 5);
        // Rows 6 and 7 are acknowledged but on no node: lost everywhere.
        assert_eq!(r.lost.get("node1"), Some(&2));
        assert!(r.bad_answers.is_empty());
        assert_eq!(r.answered_by["node1"], 2);
        // Client 0: from 1010 to 4500.
        assert_eq!(r.longest_wait_ms, 3490);
    }

    #[test]
    fn a_missing_acknowledged_row_and_an_answer_from_a_donor_are_counted() {
        let statements = vec![
            st(0, 1, 0, 10, Outcome::Ok),
            st(0, 2, 20, 30, Outcome::Ok),
            st(0, 3, 40, 50, Outcome::Timeout),
        ];
        let answers: HashMap<u64, Answer> = [
            (1, ans("node1", "2", "Primary")),
            (2, ans("node1", "4", "Primary")),
        ]
        .into_iter()
        .collect();
        let rows: BTreeMap<String, BTreeSet<u64>> = [
            ("node1".to_string(), [1, 2].into_iter().collect()),
            // Row 2 acknowledged but not on node3: lost there. Row 3's
            // outcome is unknown, so its absence is no loss.
            ("node3".to_string(), [1].into_iter().collect()),
        ]
        .into_iter()
        .collect();
        let r = judge(&statements, 0, 1_000_000, "node1", &answers, &rows);
        assert_eq!(r.lost.get("node3"), Some(&1));
        assert_eq!(r.lost.get("node1"), None);
        assert_eq!(r.bad_answers.get("node1 2/Primary"), Some(&1));
        assert_eq!(r.failed.get("timeout"), Some(&1));
        // Nothing succeeded on another node after the timeout.
        assert_eq!(r.outage_ms, None);
    }

    #[test]
    fn the_outage_is_the_longest_of_the_clients_that_failed() {
        // Client 1 was on node2 all along and never failed; clients 0 and 2
        // were on node1: 0 is back on node3 after 1 s, 2 after 2.5 s.
        let statements = vec![
            st(0, 1, 100, 1100, Outcome::Lost),
            st(0, 2, 1150, 1200, Outcome::Ok),
            st(1, 3, 120, 130, Outcome::Ok),
            st(1, 4, 140, 150, Outcome::Ok),
            st(2, 5, 200, 210, Outcome::Connect),
            st(2, 6, 2600, 2700, Outcome::Ok),
        ];
        let answers: HashMap<u64, Answer> = [
            (2, ans("node3", "4", "Primary")),
            (3, ans("node2", "4", "Primary")),
            (4, ans("node2", "4", "Primary")),
            (6, ans("node3", "4", "Primary")),
        ]
        .into_iter()
        .collect();
        let r = judge(
            &statements,
            0,
            3_000_000,
            "node1",
            &answers,
            &BTreeMap::new(),
        );
        assert_eq!(r.outage_ms, Some(2500));
        assert_eq!(r.first_failure_ms, Some(100));
        // A client that failed and never came back: no outage figure.
        let cut: Vec<Statement> = statements.iter().filter(|s| s.id != 6).cloned().collect();
        let r = judge(&cut, 0, 3_000_000, "node1", &answers, &BTreeMap::new());
        assert_eq!(r.outage_ms, None);
    }

    #[test]
    fn without_failures_there_is_no_outage_but_a_hang_is_still_a_wait() {
        let statements = vec![
            st(0, 1, 0, 10, Outcome::Ok),
            st(0, 2, 20, 3020, Outcome::Ok),
            st(0, 3, 3030, 3040, Outcome::Ok),
        ];
        let r = judge(
            &statements,
            0,
            4_000_000,
            "node1",
            &HashMap::new(),
            &BTreeMap::new(),
        );
        assert_eq!(r.outage_ms, None);
        assert_eq!(r.failed_total(), 0);
        assert_eq!(r.longest_wait_ms, 3010);
    }
}
