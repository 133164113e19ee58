//! Unit tests of the certifier against the contract's rules.

use super::*;
use KeyType::{Exclusive as X, Reference as R, Shared as S, Update as U};

pub(super) const NODE_A: NodeId = [0xa; 16];
pub(super) const NODE_B: NodeId = [0xb; 16];

fn key(parts: &[&str], kind: KeyType) -> Key {
    Key::new(parts.iter().map(|p| p.as_bytes().to_vec()), kind)
}

fn row(db: &str, table: &str, id: &str, kind: KeyType) -> Key {
    key(&[db, table, id], kind)
}

#[derive(Clone, Copy, Default)]
struct Flags {
    toi: bool,
    pa_unsafe: bool,
    implicit: bool,
}

const PLAIN: Flags = Flags {
    toi: false,
    pa_unsafe: false,
    implicit: false,
};
const TOI: Flags = Flags {
    toi: true,
    pa_unsafe: false,
    implicit: false,
};

/// Certifies and checks the invariants that hold for every call.
fn cert(
    c: &mut Certifier,
    s: Seqno,
    ls: Seqno,
    node: NodeId,
    keys: &[Key],
    f: Flags,
) -> CertOutcome {
    let before_size = c.index_size();
    let out = c
        .certify(&CertRequest {
            seqno: s,
            last_seen: ls,
            source: node,
            is_toi: f.toi,
            pa_unsafe: f.pa_unsafe,
            implicit_deps: f.implicit,
            keys,
        })
        .expect("in order");
    match &out {
        CertOutcome::Pass { depends_on } => {
            assert!(
                -1 <= *depends_on && *depends_on < s,
                "invariant: {depends_on} vs {s}"
            );
        }
        CertOutcome::Fail { .. } => {
            assert_eq!(
                c.index_size(),
                before_size,
                "a failure adds nothing to the index"
            );
        }
    }
    assert_eq!(c.position(), s);
    out
}

fn pass(d: Seqno) -> CertOutcome {
    CertOutcome::Pass { depends_on: d }
}

fn conflict_with(out: &CertOutcome) -> Option<Seqno> {
    match out {
        CertOutcome::Fail {
            reason: CertFailure::Conflict { with_seqno, .. },
        } => Some(*with_seqno),
        _ => None,
    }
}

/// The table of §5.2 as printed there, rows = earlier, columns = new.
const SPEC_TABLE: [&str; 4] = ["--DD", "--DC", "DDCC", "CCCC"];

/// Every cell × same/other node × inside/outside the interval × earlier TOI
/// or not, plus a TOI as the new writeset.
#[test]
fn certification_conflict_table_every_cell() {
    let mut checked = 0;
    for earlier in KeyType::ALL {
        for new in KeyType::ALL {
            for same_node in [false, true] {
                for inside in [false, true] {
                    for earlier_toi in [false, true] {
                        for new_toi in [false, true] {
                            let mut c = Certifier::new(0);
                            let r = row("db", "t", "1", earlier);
                            let f1 = if earlier_toi { TOI } else { PLAIN };
                            assert_eq!(cert(&mut c, 1, 0, NODE_A, &[r], f1), pass(0));
                            let ls = if inside { 0 } else { 1 };
                            let node = if same_node { NODE_A } else { NODE_B };
                            let w = row("db", "t", "1", new);
                            let f2 = if new_toi { TOI } else { PLAIN };
                            let out = cert(&mut c, 2, ls, node, &[w], f2);

                            // A TOI enters its keys as EXCLUSIVE.
                            let e = if earlier_toi { X } else { earlier };
                            let cell = SPEC_TABLE[e.index()].as_bytes()[new.index()];
                            let real = cell == b'C' && inside && (earlier_toi || !same_node);
                            let expect = if new_toi {
                                pass(1) // TOI: no key checks, s - 1
                            } else if real {
                                CertOutcome::Fail {
                                    reason: CertFailure::Conflict {
                                        key: row("db", "t", "1", new),
                                        earlier: e,
                                        with_seqno: 1,
                                    },
                                }
                            } else if cell == b'-' {
                                pass(0) // lowest in map (1) − 1
                            } else {
                                pass(1) // dependency on 1
                            };
                            assert_eq!(
                                out, expect,
                                "earlier {earlier} (toi {earlier_toi}) new {new} (toi {new_toi}) \
                                 same_node {same_node} inside {inside}"
                            );
                            checked += 1;
                        }
                    }
                }
            }
        }
    }
    assert_eq!(checked, 4 * 4 * 2 * 2 * 2 * 2);
}

#[test]
fn certification_toi_table_key_conflicts_with_rows_of_that_table_only() {
    let mut c = Certifier::new(0);
    // TOI on db.t1 from A (the caller may pass any type: it is forced).
    assert_eq!(
        cert(&mut c, 1, 0, NODE_A, &[key(&["db", "t1"], S)], TOI),
        pass(0)
    );
    // A row write in db.t1 from B that had not seen the TOI: conflict on
    // the SHARED [db, t1] branch.
    let out = cert(&mut c, 2, 0, NODE_B, &[row("db", "t1", "7", X)], PLAIN);
    assert_eq!(
        out,
        CertOutcome::Fail {
            reason: CertFailure::Conflict {
                key: key(&["db", "t1"], S),
                earlier: X,
                with_seqno: 1,
            }
        }
    );
    // Also from the TOI's own node: a TOI conflicts whatever the source.
    let out = cert(&mut c, 3, 0, NODE_A, &[row("db", "t1", "8", S)], PLAIN);
    assert_eq!(conflict_with(&out), Some(1));
    // A row in another table does not conflict and does not depend.
    assert_eq!(
        cert(&mut c, 4, 0, NODE_B, &[row("db", "t2", "7", X)], PLAIN),
        pass(0)
    );
    // Having seen the TOI, the row write passes and depends on it.
    assert_eq!(
        cert(&mut c, 5, 1, NODE_B, &[row("db", "t1", "7", X)], PLAIN),
        pass(1)
    );
    // A TOI never fails, even against unseen row writes of other nodes.
    assert_eq!(
        cert(&mut c, 6, 0, NODE_B, &[key(&["db", "t2"], X)], TOI),
        pass(5)
    );
    assert_eq!(cert(&mut c, 7, 0, NODE_A, &[key(&["db"], X)], TOI), pass(6));
}

#[test]
fn certification_schema_level_toi_covers_all_tables_of_the_schema() {
    let mut c = Certifier::new(0);
    cert(&mut c, 1, 0, NODE_A, &[key(&["db1"], X)], TOI);
    let out = cert(&mut c, 2, 0, NODE_B, &[row("db1", "any", "1", X)], PLAIN);
    assert_eq!(conflict_with(&out), Some(1));
    assert_eq!(
        cert(&mut c, 3, 0, NODE_B, &[row("db2", "any", "1", X)], PLAIN),
        pass(0)
    );
}

#[test]
fn certification_server_level_key_and_zero_level_key() {
    let mut c = Certifier::new(0);
    // Writesets without keys only carry the zero-level SHARED key: no
    // conflicts, no dependencies.
    assert_eq!(cert(&mut c, 1, 0, NODE_A, &[], PLAIN), pass(0));
    assert_eq!(cert(&mut c, 2, 0, NODE_B, &[], PLAIN), pass(0));
    assert_eq!(c.index_size(), 1);
    // A key with no parts is the server-level key of its type.
    let server_x = Key::new(Vec::<Vec<u8>>::new(), X);
    assert_eq!(
        cert(&mut c, 3, 2, NODE_A, std::slice::from_ref(&server_x), PLAIN),
        pass(2)
    );
    // ... which every unseen writeset of another node conflicts with.
    let out = cert(&mut c, 4, 2, NODE_B, &[row("x", "y", "z", S)], PLAIN);
    assert_eq!(conflict_with(&out), Some(3));
    let out = cert(&mut c, 5, 2, NODE_B, &[], PLAIN);
    assert_eq!(conflict_with(&out), Some(3));
    // Not the same node, and not once seen.
    assert_eq!(cert(&mut c, 6, 2, NODE_A, &[], PLAIN), pass(3));
    assert_eq!(cert(&mut c, 7, 3, NODE_B, &[], PLAIN), pass(3));
}

#[test]
fn certification_rows_of_one_table() {
    let mut c = Certifier::new(0);
    cert(&mut c, 1, 0, NODE_A, &[row("db", "t", "1", X)], PLAIN);
    // Another row of the same table: the SHARED branches do not interact.
    assert_eq!(
        cert(&mut c, 2, 0, NODE_B, &[row("db", "t", "2", X)], PLAIN),
        pass(0)
    );
    // The same row: conflict.
    let out = cert(&mut c, 3, 0, NODE_B, &[row("db", "t", "1", X)], PLAIN);
    assert_eq!(conflict_with(&out), Some(1));
    // A table-level SHARED key (table without PK) depends on nothing here…
    assert_eq!(
        cert(&mut c, 4, 0, NODE_B, &[key(&["db", "t"], S)], PLAIN),
        pass(0)
    );
    // …but a table-level EXCLUSIVE key depends on the SHARED branches.
    assert_eq!(
        cert(&mut c, 5, 0, NODE_B, &[key(&["db", "t"], X)], PLAIN),
        pass(4)
    );
    // And now unseen row writes of other nodes conflict with it.
    let out = cert(&mut c, 6, 4, NODE_A, &[row("db", "t", "9", R)], PLAIN);
    assert_eq!(conflict_with(&out), Some(5));
    // The key index: zero, db, db/t, db/t/1, db/t/2.
    assert_eq!(c.index_size(), 5);
}

#[test]
fn certification_fk_reference_vs_exclusive() {
    let mut c = Certifier::new(0);
    // Child insert references the parent row; parent delete is EXCLUSIVE.
    cert(&mut c, 1, 0, NODE_A, &[row("db", "parent", "1", R)], PLAIN);
    let out = cert(&mut c, 2, 0, NODE_B, &[row("db", "parent", "1", X)], PLAIN);
    assert_eq!(conflict_with(&out), Some(1));
    // Two references do not interact.
    assert_eq!(
        cert(&mut c, 3, 0, NODE_B, &[row("db", "parent", "1", R)], PLAIN),
        pass(0)
    );
    // An UPDATE on the parent row depends on the references, no conflict.
    assert_eq!(
        cert(&mut c, 4, 0, NODE_B, &[row("db", "parent", "1", U)], PLAIN),
        pass(3)
    );
}

#[test]
fn certification_duplicate_keys_keep_the_stronger_type() {
    let mut c = Certifier::new(0);
    // [db, t] appears as a branch (SHARED) and as a leaf (EXCLUSIVE).
    let keys = [
        row("db", "t", "1", X),
        key(&["db", "t"], X),
        row("db", "t", "1", S),
    ];
    assert_eq!(cert(&mut c, 1, 0, NODE_A, &keys, PLAIN), pass(0));
    // Rows of that table from other nodes conflict (the leaf is EXCLUSIVE).
    let out = cert(&mut c, 2, 0, NODE_B, &[row("db", "t", "2", S)], PLAIN);
    assert_eq!(conflict_with(&out), Some(1));
    // A writeset whose own keys clash with each other still passes.
    let keys = [
        row("db", "u", "1", X),
        row("db", "u", "1", X),
        key(&["db", "u"], X),
    ];
    assert_eq!(cert(&mut c, 3, 2, NODE_B, &keys, PLAIN), pass(0));
    assert_eq!(c.index_size(), 6);
}

#[test]
fn certification_depends_on_empty_index_is_serial() {
    let mut c = Certifier::new(10);
    assert_eq!(
        cert(&mut c, 11, 10, NODE_A, &[row("d", "t", "1", X)], PLAIN),
        pass(10)
    );
    // After purging everything the map is empty again.
    c.purge_upto(11);
    assert_eq!(c.index_size(), 0);
    assert_eq!(c.map_len(), 0);
    assert_eq!(
        cert(&mut c, 12, 11, NODE_A, &[row("d", "t", "2", X)], PLAIN),
        pass(11)
    );
    // Noted non-writesets do not enter the map.
    c.purge_upto(12);
    c.note_non_writeset(13).unwrap();
    assert_eq!(cert(&mut c, 14, 12, NODE_A, &[], PLAIN), pass(13));
}

#[test]
fn certification_depends_on_lowest_in_map() {
    let mut c = Certifier::new(0);
    for s in 1..=5 {
        let id = s.to_string();
        let out = cert(&mut c, s, 0, NODE_A, &[row("d", "t", &id, X)], PLAIN);
        assert_eq!(out, pass(0));
    }
    c.purge_upto(3);
    assert_eq!(c.lowest_in_map(), Some(4));
    assert_eq!(
        cert(&mut c, 6, 3, NODE_A, &[row("d", "t", "x", X)], PLAIN),
        pass(3)
    );
}

#[test]
fn certification_depends_on_implicit_deps_and_optimistic_pa() {
    let mut c = Certifier::new(0);
    for s in 1..=5 {
        cert(
            &mut c,
            s,
            0,
            NODE_A,
            &[row("d", "t", &s.to_string(), X)],
            PLAIN,
        );
    }
    let implicit = Flags {
        implicit: true,
        ..PLAIN
    };
    assert_eq!(
        cert(&mut c, 6, 4, NODE_A, &[row("d", "t", "a", X)], implicit),
        pass(4)
    );
    assert_eq!(
        cert(&mut c, 7, 4, NODE_A, &[row("d", "t", "b", X)], PLAIN),
        pass(0)
    );
    c.set_optimistic_pa(false);
    assert_eq!(
        cert(&mut c, 8, 5, NODE_A, &[row("d", "t", "c", X)], PLAIN),
        pass(5)
    );
    c.set_optimistic_pa(true);
    assert_eq!(
        cert(&mut c, 9, 5, NODE_A, &[row("d", "t", "d", X)], PLAIN),
        pass(0)
    );
    // A key dependency above ls is kept (same node, so no conflict).
    assert_eq!(
        cert(&mut c, 10, 5, NODE_A, &[row("d", "t", "c", X)], PLAIN),
        pass(8)
    );
}

#[test]
fn certification_depends_on_pa_unsafe() {
    let mut c = Certifier::new(0);
    cert(&mut c, 1, 0, NODE_A, &[row("d", "t", "1", X)], PLAIN);
    let unsafe_ = Flags {
        pa_unsafe: true,
        ..PLAIN
    };
    // The flagged writeset itself is bounded only by earlier PA-unsafe ones.
    assert_eq!(
        cert(&mut c, 2, 0, NODE_A, &[row("d", "t", "2", X)], unsafe_),
        pass(0)
    );
    assert_eq!(c.last_pa_unsafe(), 2);
    // Later ones depend on it.
    assert_eq!(
        cert(&mut c, 3, 0, NODE_B, &[row("d", "t", "3", X)], PLAIN),
        pass(2)
    );
    assert_eq!(cert(&mut c, 4, 0, NODE_B, &[], PLAIN), pass(2));
    // A failed PA-unsafe writeset does not count.
    let out = cert(&mut c, 5, 0, NODE_B, &[row("d", "t", "1", X)], unsafe_);
    assert_eq!(conflict_with(&out), Some(1));
    assert_eq!(c.last_pa_unsafe(), 2);
    assert_eq!(cert(&mut c, 6, 0, NODE_B, &[], PLAIN), pass(2));
    // Purging does not forget it.
    c.purge_upto(4);
    assert_eq!(cert(&mut c, 7, 4, NODE_B, &[], PLAIN), pass(4));
}

#[test]
fn certification_depends_on_toi_is_serial() {
    let mut c = Certifier::new(0);
    cert(&mut c, 1, 0, NODE_A, &[row("d", "t", "1", X)], PLAIN);
    cert(&mut c, 2, 0, NODE_B, &[row("e", "t", "1", X)], PLAIN);
    assert_eq!(cert(&mut c, 3, 0, NODE_B, &[key(&["z"], X)], TOI), pass(2));
    assert_eq!(cert(&mut c, 4, 3, NODE_B, &[], TOI), pass(3));
}

#[test]
fn certification_failed_writesets_stay_in_map_as_dummies() {
    let mut c = Certifier::new(0);
    cert(&mut c, 1, 0, NODE_A, &[row("d", "t", "1", X)], PLAIN);
    let out = cert(
        &mut c,
        2,
        0,
        NODE_B,
        &[row("d", "t", "1", X), row("d", "t", "2", X)],
        PLAIN,
    );
    assert_eq!(conflict_with(&out), Some(1));
    assert_eq!(c.map_len(), 2);
    c.purge_upto(1);
    assert_eq!(c.lowest_in_map(), Some(2));
    // Nothing of the failed writeset was entered.
    assert_eq!(
        cert(&mut c, 3, 1, NODE_A, &[row("d", "t", "2", X)], PLAIN),
        pass(1)
    );
}

#[test]
fn certification_structural_failures() {
    let mut c = Certifier::new(100);
    let k = [row("d", "t", "1", X)];
    let out = cert(&mut c, 101, 99, NODE_A, &k, PLAIN);
    assert_eq!(
        out,
        CertOutcome::Fail {
            reason: CertFailure::TooOld {
                last_seen: 99,
                initial_position: 100
            }
        }
    );
    // Even a TOI fails structurally.
    let out = cert(&mut c, 102, 99, NODE_A, &k, TOI);
    assert!(matches!(
        out,
        CertOutcome::Fail {
            reason: CertFailure::TooOld { .. }
        }
    ));
    assert_eq!(c.index_size(), 0);

    c.set_max_length(4);
    assert_eq!(cert(&mut c, 104, 100, NODE_A, &k, PLAIN), pass(100));
    let out = cert(&mut c, 105, 100, NODE_B, &k, PLAIN);
    assert_eq!(
        out,
        CertOutcome::Fail {
            reason: CertFailure::IntervalTooLong {
                seqno: 105,
                last_seen: 100,
                max_length: 4
            }
        }
    );
    let out = cert(&mut c, 106, 106, NODE_B, &k, PLAIN);
    assert_eq!(
        out,
        CertOutcome::Fail {
            reason: CertFailure::InvalidLastSeen {
                seqno: 106,
                last_seen: 106
            }
        }
    );
    // Extreme values neither panic nor overflow.
    c.set_max_length(u64::MAX);
    let out = cert(&mut c, Seqno::MAX, 100, NODE_B, &[], PLAIN);
    assert!(out.is_pass());
    let s = c.stats();
    assert_eq!(s.structural_failures, 4);
    assert_eq!(s.certified, 6);
    assert!(!CertFailure::TooOld {
        last_seen: 1,
        initial_position: 2
    }
    .to_string()
    .is_empty());
}

#[test]
fn certification_out_of_order_is_an_error() {
    let mut c = Certifier::new(5);
    let k = [row("d", "t", "1", X)];
    let req = |s| CertRequest {
        seqno: s,
        last_seen: 5,
        source: NODE_A,
        is_toi: false,
        pa_unsafe: false,
        implicit_deps: false,
        keys: &k,
    };
    assert_eq!(
        c.certify(&req(5)),
        Err(CertError::OutOfOrder {
            expected_above: 5,
            got: 5
        })
    );
    assert!(c.certify(&req(7)).unwrap().is_pass());
    // Gaps are allowed; repeats and going back are not.
    for s in [7, 6, -1, Seqno::MIN] {
        assert_eq!(
            c.certify(&req(s)),
            Err(CertError::OutOfOrder {
                expected_above: 7,
                got: s
            })
        );
        assert!(c.note_non_writeset(s).is_err());
        assert!(c.preload(&req(s), true).is_err());
    }
    assert_eq!(c.position(), 7);
    assert_eq!(c.index_size(), 4);
    assert_eq!(c.map_len(), 1);
    assert_eq!(c.stats().certified, 1);
    c.note_non_writeset(8).unwrap();
    assert_eq!(c.position(), 8);
    assert!(c.certify(&req(8)).is_err());
    assert!(c.certify(&req(9)).unwrap().is_pass());
    assert!(!CertError::OutOfOrder {
        expected_above: 1,
        got: 1
    }
    .to_string()
    .is_empty());
}

#[test]
fn certification_purge_keeps_entries_with_live_references() {
    let mut c = Certifier::new(0);
    cert(&mut c, 1, 0, NODE_A, &[row("d", "t", "1", X)], PLAIN);
    cert(&mut c, 2, 0, NODE_A, &[row("d", "t", "2", X)], PLAIN);
    cert(&mut c, 3, 2, NODE_B, &[row("d", "t", "1", S)], PLAIN);
    assert_eq!(c.index_size(), 5);
    c.purge_upto(1);
    // d/t/1 keeps its SHARED reference from 3; everything stays.
    assert_eq!(c.index_size(), 5);
    c.purge_upto(2);
    // d/t/2 is gone.
    assert_eq!(c.index_size(), 4);
    // d/t/1 no longer has the EXCLUSIVE reference of 1: an UPDATE from A
    // that saw 2 only depends on 3.
    assert_eq!(
        cert(&mut c, 4, 2, NODE_A, &[row("d", "t", "1", U)], PLAIN),
        pass(3)
    );
    c.purge_upto(100);
    assert_eq!(c.index_size(), 0);
    assert_eq!(c.map_len(), 0);
    // Purging below the map does nothing.
    c.purge_upto(-5);
    assert_eq!(
        cert(&mut c, 5, 4, NODE_A, &[row("d", "t", "1", U)], PLAIN),
        pass(4)
    );
    assert_eq!(c.index_size(), 4);
}

#[test]
fn certification_reset_starts_over() {
    let mut c = Certifier::new(0);
    let unsafe_ = Flags {
        pa_unsafe: true,
        ..PLAIN
    };
    cert(&mut c, 1, 0, NODE_A, &[row("d", "t", "1", X)], unsafe_);
    c.reset(50);
    assert_eq!(c.position(), 50);
    assert_eq!(c.initial_position(), 50);
    assert_eq!(c.index_size(), 0);
    assert_eq!(c.map_len(), 0);
    assert_eq!(c.last_pa_unsafe(), -1);
    assert!(matches!(
        cert(&mut c, 51, 49, NODE_A, &[], PLAIN),
        CertOutcome::Fail {
            reason: CertFailure::TooOld { .. }
        }
    ));
    assert_eq!(
        cert(&mut c, 52, 50, NODE_B, &[row("d", "t", "1", X)], PLAIN),
        pass(50)
    );
}

/// A joiner that resets to the start of the preload range and preloads the
/// writesets up to its snapshot certifies later writesets like a node that
/// saw everything (§6.5).
#[test]
fn certification_preload_makes_joiner_agree() {
    let mut full = Certifier::new(0);
    let seq: Vec<(Seqno, Seqno, NodeId, Vec<Key>)> = vec![
        (1, 0, NODE_A, vec![row("d", "t", "1", X)]),
        (2, 0, NODE_B, vec![row("d", "t", "1", X)]), // fails
        (3, 1, NODE_B, vec![row("d", "t", "2", X)]),
        (4, 1, NODE_A, vec![row("d", "t", "3", U)]),
        (5, 2, NODE_A, vec![row("d", "t", "3", X)]),
    ];
    let mut outcomes = Vec::new();
    for (s, ls, n, k) in &seq {
        outcomes.push(cert(&mut full, *s, *ls, *n, k, PLAIN));
    }
    assert!(!outcomes[1].is_pass());
    // Joiner: snapshot at 5, lowest in-flight ls is 2, preload (2, 5].
    let mut joiner = Certifier::new(0);
    joiner.reset(2);
    for (i, (s, ls, n, k)) in seq.iter().enumerate().skip(2) {
        let req = CertRequest {
            seqno: *s,
            last_seen: *ls,
            source: *n,
            is_toi: false,
            pa_unsafe: false,
            implicit_deps: false,
            keys: k,
        };
        joiner.preload(&req, outcomes[i].is_pass()).unwrap();
    }
    let later: Vec<(Seqno, Seqno, NodeId, Vec<Key>)> = vec![
        (6, 2, NODE_B, vec![row("d", "t", "2", X)]),
        (7, 2, NODE_B, vec![row("d", "t", "3", S)]),
        (8, 3, NODE_A, vec![row("d", "t", "2", S)]),
        (9, 5, NODE_B, vec![row("d", "t", "3", X)]),
    ];
    for (s, ls, n, k) in &later {
        let a = cert(&mut full, *s, *ls, *n, k, PLAIN);
        let b = cert(&mut joiner, *s, *ls, *n, k, PLAIN);
        assert_eq!(a.is_pass(), b.is_pass(), "seqno {s}");
        assert_eq!(conflict_with(&a), conflict_with(&b));
    }
}

#[test]
fn certification_stats() {
    let mut c = Certifier::new(0);
    cert(&mut c, 1, 0, NODE_A, &[row("d", "t", "1", X)], PLAIN);
    cert(&mut c, 2, 0, NODE_B, &[row("d", "t", "1", X)], PLAIN); // conflict
    cert(&mut c, 3, 1, NODE_B, &[row("d", "t", "1", X)], PLAIN); // depends 1
    let st = c.stats();
    assert_eq!(st.certified, 3);
    assert_eq!(st.passed, 2);
    assert_eq!(st.conflicts, 1);
    // deps distance: (1 - 0) + (3 - 1)
    assert_eq!(st.deps_distance_sum, 3);
    assert_eq!(st.avg_deps_distance(), 1.5);
    // interval: 0 + 1 + 1
    assert_eq!(st.interval_sum, 2);
    assert!((st.avg_cert_interval() - 2.0 / 3.0).abs() < 1e-9);
    assert_eq!(st.keys_processed, 12);
    c.reset_stats();
    assert_eq!(c.stats(), CertStats::default());
    assert_eq!(c.stats().avg_deps_distance(), 0.0);
    let base = st;
    assert_eq!(st.since(&base).avg_deps_distance(), 0.0);
    assert_eq!(st.since(&CertStats::default()), st);
    assert_eq!(c.stats().avg_cert_interval(), 0.0);
}

#[test]
fn certification_binary_and_long_key_parts() {
    let mut c = Certifier::new(0);
    let long = vec![0u8; 5000];
    let k1 = Key::new([b"d".to_vec(), b"t".to_vec(), long.clone()], X);
    let mut long2 = long.clone();
    long2.push(0);
    let k2 = Key::new([b"d".to_vec(), b"t".to_vec(), long2], X);
    // Parts that only differ in how bytes split across parts.
    let k3 = Key::new([b"d".to_vec(), b"t\x01".to_vec(), vec![0u8]], X);
    let k4 = Key::new([b"d".to_vec(), b"t".to_vec(), vec![1u8, 0]], X);
    cert(&mut c, 1, 0, NODE_A, &[k1.clone(), k3.clone()], PLAIN);
    assert_eq!(cert(&mut c, 2, 0, NODE_B, &[k2, k4], PLAIN), pass(0));
    let out = cert(&mut c, 3, 0, NODE_B, &[k1], PLAIN);
    assert_eq!(conflict_with(&out), Some(1));
    assert!(out != pass(0));
    let text = format!("{out:?}");
    assert!(text.contains("Conflict"));
}

#[test]
fn certification_many_keys_and_nodes() {
    let mut c = Certifier::new(0);
    let keys: Vec<Key> = (0..10_000)
        .map(|i| row("d", "t", &i.to_string(), X))
        .collect();
    assert_eq!(cert(&mut c, 1, 0, NODE_A, &keys, PLAIN), pass(0));
    assert_eq!(c.index_size(), 10_003);
    // Many distinct nodes each writing their own row.
    for n in 0..300u32 {
        let mut id = [0u8; 16];
        id[..4].copy_from_slice(&n.to_le_bytes());
        let s = 2 + n as Seqno;
        let k = [row("e", "t", &n.to_string(), X)];
        assert!(cert(&mut c, s, s - 1, id, &k, PLAIN).is_pass());
    }
    let out = cert(&mut c, 400, 0, NODE_B, &keys[9_999..], PLAIN);
    assert_eq!(conflict_with(&out), Some(1));
    c.purge_upto(1);
    assert_eq!(c.index_size(), 3 + 300);
    assert!(format!("{c:?}").contains("index_size"));
}

/// `last_related` names each seqno after the last-seen one that a passed
/// writeset depends on, not just the highest (`depends_on`); a TOI is
/// ordered after everything and names none.
#[test]
fn related_lists_every_dependency_after_last_seen() {
    let mut c = Certifier::new(0);
    cert(&mut c, 1, 0, NODE_B, &[row("d", "t", "1", U)], PLAIN);
    cert(&mut c, 2, 0, NODE_B, &[row("d", "t", "9", U)], PLAIN); // the big one
    cert(&mut c, 3, 0, NODE_A, &[row("d", "t", "2", U)], PLAIN);
    // Node A's next transaction touches its own row 2 and reads row 1.
    let keys = [row("d", "t", "2", U), row("d", "t", "1", R)];
    let out = cert(&mut c, 4, 0, NODE_A, &keys, PLAIN);
    assert_eq!(out, CertOutcome::Pass { depends_on: 3 });
    let mut related = c.last_related().expect("listed").to_vec();
    related.sort_unstable();
    assert_eq!(related, vec![1, 3], "seqno 2 is not a dependency");
    // Seqnos up to last-seen are committed at the origin: not listed.
    let out = cert(&mut c, 5, 3, NODE_A, &keys, PLAIN);
    assert!(out.is_pass());
    assert_eq!(c.last_related().expect("listed"), &[4]);
    cert(&mut c, 6, 5, NODE_A, &[row("d", "t", "3", U)], TOI);
    assert_eq!(c.last_related(), None, "a TOI comes after everything");
}

#[test]
fn a_big_writesets_scratch_room_is_given_back_at_the_next_one() {
    let mut c = Certifier::new(0);
    let ids: Vec<String> = (0..100_000).map(|i| i.to_string()).collect();
    let big: Vec<Key> = ids.iter().map(|id| row("db", "t", id, U)).collect();
    assert!(matches!(
        cert(&mut c, 1, 0, NODE_A, &big, PLAIN),
        CertOutcome::Pass { .. }
    ));
    assert!(c.scratch.probes.capacity() >= 100_000);
    let small = [row("db", "u", "1", U)];
    assert!(matches!(
        cert(&mut c, 2, 1, NODE_B, &small, PLAIN),
        CertOutcome::Pass { .. }
    ));
    assert!(c.scratch.probes.capacity() <= KEEP_PROBES);
    assert!(c.scratch.entered.capacity() <= KEEP_PROBES);
}
