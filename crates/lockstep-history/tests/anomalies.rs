//! Crafted histories, one per anomaly the checker names: each must be
//! found, with nothing else reported; clean histories (serial, or with
//! only unknown outcomes) must pass.

use lockstep_history::list_append::Options;
use lockstep_history::{check, AnomalyKind, History, Mop, Outcome, Txn};

use AnomalyKind::*;
use Outcome::{Fail, Ok, Unknown};

/// A history under construction; transactions get ids 1, 2, ...
#[derive(Default)]
struct H {
    txns: Vec<Txn>,
}

impl H {
    /// A transaction on `node` running from `t0` to `t1` (microseconds).
    fn at(&mut self, node: u32, t0: u64, t1: u64, outcome: Outcome, mops: Vec<Mop>) -> &mut Self {
        let id = self.txns.len() as u64 + 1;
        self.txns.push(Txn {
            id,
            process: id as u32,
            node,
            invoke_us: t0,
            complete_us: t1,
            outcome,
            mops,
            is_final: false,
            error: None,
        });
        self
    }

    /// The final read of every node after healing.
    fn finals(&mut self, per_node: &[Vec<Mop>]) -> &mut Self {
        for (node, mops) in per_node.iter().enumerate() {
            self.at(node as u32, 1_000_000, 1_000_001, Ok, mops.clone());
            self.txns.last_mut().unwrap().is_final = true;
        }
        self
    }

    fn check(&self, realtime: bool) -> lockstep_history::Report {
        let h = History::new(self.txns.clone());
        // The history file round-trips: what we keep is what we checked.
        let again = History::from_jsonl(&h.to_jsonl()).expect("history parses back");
        assert_eq!(again, h);
        check(&h, &Options { realtime })
    }

    /// Exactly these kinds, with these counts, are found.
    #[track_caller]
    fn expect(&self, realtime: bool, expected: &[(AnomalyKind, usize)]) {
        let report = self.check(realtime);
        let found: Vec<(AnomalyKind, usize)> = report
            .counts
            .iter()
            .filter(|(_, &n)| n > 0)
            .map(|(&k, &n)| (k, n))
            .collect();
        let mut want = expected.to_vec();
        want.sort();
        assert_eq!(found, want, "report:\n{report}");
        for (kind, _) in expected {
            let a = report
                .anomalies
                .iter()
                .find(|a| a.kind == *kind)
                .unwrap_or_else(|| panic!("{kind} counted but not explained"));
            assert!(!a.explanation.is_empty() && !a.txns.is_empty(), "{a}");
        }
    }
}

fn ap(key: u64, value: u64) -> Mop {
    Mop::Append { key, value }
}
fn rd(key: u64, values: &[u64]) -> Mop {
    Mop::Read {
        key,
        values: Some(values.to_vec()),
    }
}
fn rr(key: u64, value: u64) -> Mop {
    Mop::RegRead {
        key,
        value: Some(value),
    }
}
fn rw(key: u64, value: u64) -> Mop {
    Mop::RegWrite { key, value }
}

#[test]
fn a_serial_history_passes_with_and_without_real_time() {
    let mut h = H::default();
    h.at(0, 0, 10, Ok, vec![ap(1, 1), ap(2, 2)])
        .at(1, 20, 30, Ok, vec![rd(1, &[1]), ap(1, 3), rd(2, &[2])])
        .at(2, 40, 50, Fail, vec![ap(2, 4)])
        .at(
            2,
            60,
            70,
            Ok,
            vec![rd(1, &[1, 3]), ap(2, 5), rd(2, &[2, 5])],
        )
        .at(0, 80, 90, Ok, vec![rr(7, 0), rw(7, 100)])
        .at(1, 95, 99, Ok, vec![rr(7, 100), rw(7, 101)])
        .finals(&vec![vec![rd(1, &[1, 3]), rd(2, &[2, 5]), rr(7, 101)]; 3]);
    h.expect(false, &[]);
    h.expect(true, &[]);
}

#[test]
fn a_history_of_unknown_outcomes_only_passes() {
    let mut h = H::default();
    h.at(0, 0, 10, Unknown, vec![ap(1, 1)])
        .at(1, 5, 15, Unknown, vec![ap(1, 2)])
        .at(2, 20, 30, Unknown, vec![ap(1, 3), rd(1, &[2, 3])])
        .at(0, 40, 50, Unknown, vec![rr(7, 0), rw(7, 9)])
        .at(1, 40, 50, Unknown, vec![rr(7, 0), rw(7, 8)])
        .finals(&vec![vec![rd(1, &[2]), rr(7, 8)]; 3]);
    h.expect(true, &[]);
}

#[test]
fn g0_a_write_cycle_is_found() {
    let mut h = H::default();
    h.at(0, 0, 10, Ok, vec![ap(1, 1), ap(2, 2)])
        .at(1, 0, 10, Ok, vec![ap(1, 3), ap(2, 4)])
        .finals(&vec![vec![rd(1, &[1, 3]), rd(2, &[4, 2])]; 2]);
    h.expect(false, &[(G0, 1)]);
}

#[test]
fn g1a_a_read_of_a_failed_append_is_found() {
    let mut h = H::default();
    h.at(0, 0, 10, Fail, vec![ap(1, 5)])
        .at(1, 20, 30, Ok, vec![rd(1, &[5])]);
    h.expect(false, &[(G1a, 1)]);
}

#[test]
fn g1a_a_read_of_a_failed_register_write_is_found() {
    let mut h = H::default();
    h.at(0, 0, 10, Fail, vec![rr(1, 0), rw(1, 5)])
        .at(1, 20, 30, Ok, vec![rr(1, 5), rw(1, 6)]);
    h.expect(false, &[(G1a, 1)]);
}

#[test]
fn g1b_an_intermediate_read_is_found() {
    let mut h = H::default();
    h.at(0, 0, 10, Ok, vec![ap(1, 1), ap(1, 2)])
        .at(1, 5, 8, Ok, vec![rd(1, &[1])]);
    h.expect(false, &[(G1b, 1)]);
}

#[test]
fn g1c_circular_information_flow_is_found() {
    let mut h = H::default();
    h.at(0, 0, 10, Ok, vec![ap(1, 1), rd(2, &[2])])
        .at(1, 0, 10, Ok, vec![ap(2, 2), rd(1, &[1])]);
    h.expect(false, &[(G1c, 1)]);
}

#[test]
fn an_unknown_transaction_whose_write_was_read_committed() {
    // As g1c, with the second transaction's outcome unknown: its append
    // was read, so it committed, and the cycle stands.
    let mut h = H::default();
    h.at(0, 0, 10, Ok, vec![ap(1, 1), rd(2, &[2])])
        .at(1, 0, 10, Unknown, vec![ap(2, 2), rd(1, &[1])])
        .at(2, 20, 30, Ok, vec![rd(1, &[1])]);
    h.expect(false, &[(G1c, 1)]);
}

#[test]
fn g_single_read_skew_is_found_and_explained() {
    let mut h = H::default();
    h.at(0, 0, 10, Ok, vec![ap(1, 10), ap(2, 20)])
        .at(1, 0, 10, Ok, vec![rd(1, &[10]), rd(2, &[])])
        .finals(&vec![vec![rd(1, &[10]), rd(2, &[20])]; 3]);
    h.expect(false, &[(GSingle, 1)]);
    let report = h.check(false);
    let text = report.anomalies[0].explanation.join("\n");
    assert!(
        text.contains("rw: T2 read key 2 without T1's append"),
        "{text}"
    );
    assert!(text.contains("wr: T2 read T1's append to key 1"), "{text}");
}

#[test]
fn g_single_the_innodb_lost_update_shape_is_found() {
    // T1 reads key 1 from its snapshot, T2 appends, T1 appends on top of
    // T2 (a locking write sees the newest version): rw then ww.
    let mut h = H::default();
    h.at(0, 0, 30, Ok, vec![rd(1, &[1]), ap(1, 3)])
        .at(1, 5, 10, Ok, vec![ap(1, 2)])
        .at(2, 0, 1, Ok, vec![ap(1, 1)])
        .finals(&vec![vec![rd(1, &[1, 2, 3])]; 3]);
    h.expect(false, &[(GSingle, 1)]);
}

#[test]
fn g2_item_write_skew_is_found() {
    let mut h = H::default();
    h.at(0, 0, 10, Ok, vec![rd(1, &[]), ap(2, 2)])
        .at(1, 0, 10, Ok, vec![rd(2, &[]), ap(1, 1)])
        .finals(&vec![vec![rd(1, &[1]), rd(2, &[2])]; 3]);
    h.expect(false, &[(G2Item, 1)]);
}

#[test]
fn p4_concurrent_lost_update_is_found() {
    let mut h = H::default();
    h.at(0, 0, 10, Ok, vec![rr(1, 0), rw(1, 1)])
        .at(1, 2, 12, Ok, vec![rr(1, 0), rw(1, 2)])
        .finals(&vec![vec![rr(1, 2)]; 3]);
    h.expect(false, &[(P4, 1)]);
}

#[test]
fn a_register_version_reread_after_its_overwrite_was_acknowledged_is_a_lost_write() {
    let mut h = H::default();
    h.at(0, 0, 10, Ok, vec![rr(1, 0), rw(1, 1)])
        .at(1, 20, 30, Ok, vec![rr(1, 0), rw(1, 2)])
        .finals(&vec![vec![rr(1, 2)]; 3]);
    h.expect(false, &[(LostWrite, 1)]);
}

#[test]
fn an_acknowledged_register_write_missing_at_the_end_is_a_lost_write() {
    let mut h = H::default();
    h.at(0, 0, 10, Ok, vec![rr(1, 0), rw(1, 1)])
        .at(1, 20, 30, Ok, vec![rr(1, 1), rw(1, 2)])
        .finals(&[vec![rr(1, 2)], vec![rr(1, 1)]]);
    // Node 2 lacks T2's write, and the nodes disagree.
    h.expect(false, &[(LostWrite, 1), (Divergence, 1)]);
}

#[test]
fn an_acknowledged_append_missing_from_a_final_read_is_a_lost_write() {
    let mut h = H::default();
    h.at(0, 0, 10, Ok, vec![ap(1, 1)])
        .at(0, 20, 30, Ok, vec![ap(1, 2)])
        .finals(&vec![vec![rd(1, &[1])]; 3]);
    h.expect(false, &[(LostWrite, 1)]);
}

#[test]
fn nodes_that_disagree_after_healing_diverge() {
    let mut h = H::default();
    h.at(0, 0, 10, Ok, vec![ap(1, 1)])
        .at(1, 0, 10, Unknown, vec![ap(1, 2)])
        .finals(&[vec![rd(1, &[1, 2])], vec![rd(1, &[1])]]);
    h.expect(false, &[(Divergence, 1)]);
}

#[test]
fn a_read_that_misses_an_earlier_acknowledged_append_is_stale_under_causal_reads() {
    let mut h = H::default();
    h.at(0, 0, 10, Ok, vec![ap(1, 1)])
        .at(1, 20, 30, Ok, vec![rd(1, &[])])
        .finals(&vec![vec![rd(1, &[1])]; 3]);
    // Without the causal claim this is a legal (serializable) history.
    h.expect(false, &[]);
    h.expect(true, &[(StaleRead, 1), (GSingleRealtime, 1)]);
}

#[test]
fn a_write_order_against_real_time_is_a_g_single_realtime_cycle() {
    // T2 began after T1 was acknowledged, yet its append comes first.
    let mut h = H::default();
    h.at(0, 0, 10, Ok, vec![ap(1, 1)])
        .at(1, 20, 30, Ok, vec![ap(1, 2)])
        .finals(&vec![vec![rd(1, &[2, 1])]; 3]);
    h.expect(false, &[]);
    h.expect(true, &[(GSingleRealtime, 1)]);
}

#[test]
fn write_skew_through_real_time_is_g2_item_realtime() {
    // T1 misses T2's append to key 1; T3 began after T2 was acknowledged
    // and misses T1's append to key 2: two anti-dependencies joined by
    // real time, and no stale read (T1 was not acknowledged before T3).
    let mut h = H::default();
    h.at(0, 0, 100, Ok, vec![rd(1, &[]), ap(2, 2)])
        .at(1, 10, 20, Ok, vec![ap(1, 1)])
        .at(2, 30, 40, Ok, vec![rd(2, &[])])
        .finals(&vec![vec![rd(1, &[1]), rd(2, &[2])]; 3]);
    h.expect(false, &[]);
    h.expect(true, &[(G2ItemRealtime, 1)]);
}

#[test]
fn the_isolation_level_decides_which_kinds_are_allowed() {
    use lockstep_history::Isolation::*;
    for kind in AnomalyKind::ALL {
        let si = kind.allowed_under(Snapshot);
        let rr = kind.allowed_under(RepeatableRead);
        // Whatever snapshot isolation allows, repeatable read allows too.
        assert!(!si || rr, "{kind}");
    }
    assert!(G2Item.allowed_under(Snapshot) && !GSingle.allowed_under(Snapshot));
    assert!(P4.allowed_under(RepeatableRead) && !P4.allowed_under(Snapshot));
    for kind in [
        G0,
        G1a,
        G1b,
        G1c,
        LostWrite,
        StaleRead,
        DuplicateElement,
        PhantomElement,
        IncompatibleOrder,
        Divergence,
    ] {
        assert!(!kind.allowed_under(RepeatableRead), "{kind}");
    }
}

#[test]
fn a_duplicated_element_is_found() {
    let mut h = H::default();
    h.at(0, 0, 10, Ok, vec![ap(1, 1)])
        .at(1, 20, 30, Ok, vec![rd(1, &[1, 1])]);
    h.expect(false, &[(DuplicateElement, 1)]);
}

#[test]
fn a_phantom_element_is_found() {
    let mut h = H::default();
    h.at(0, 0, 10, Ok, vec![ap(1, 1)])
        .at(1, 20, 30, Ok, vec![rd(1, &[1, 99])]);
    h.expect(false, &[(PhantomElement, 1)]);
}

#[test]
fn a_register_value_nobody_wrote_is_a_phantom() {
    let mut h = H::default();
    h.at(1, 20, 30, Ok, vec![rr(1, 42), rw(1, 43)]);
    h.expect(false, &[(PhantomElement, 1)]);
}

#[test]
fn reads_that_are_not_prefixes_of_one_another_are_an_incompatible_order() {
    let mut h = H::default();
    h.at(0, 0, 10, Ok, vec![ap(1, 1)])
        .at(1, 0, 10, Ok, vec![ap(1, 2)])
        .at(2, 20, 30, Ok, vec![rd(1, &[1, 2])])
        .at(2, 40, 50, Ok, vec![rd(1, &[2, 1])]);
    h.expect(false, &[(IncompatibleOrder, 1)]);
}
