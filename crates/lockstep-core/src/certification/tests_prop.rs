//! Property tests: a naive reference model written from the contract's words,
//! and purge/determinism checks.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

// ---------------------------------------------------------------------------
// Reference model: keeps every writeset and scans them all (O(n²)).
// ---------------------------------------------------------------------------

/// §5.2 table, rows = earlier type, columns = new type: `-` none,
/// `D` dependency, `C` conflict.
const SPEC_TABLE: [&str; 4] = ["--DD", "--DC", "DDCC", "CCCC"];

type Parts = Vec<Vec<u8>>;

struct ModelWs {
    seqno: Seqno,
    node: NodeId,
    toi: bool,
    pa_unsafe: bool,
    passed: bool,
    /// The writeset's keys after hierarchy expansion, one type per key.
    keys: BTreeMap<Parts, KeyType>,
    /// Tables it holds EXCLUSIVE in place of its rows (a big writeset):
    /// unlike `keys`, never hidden by a later writer.
    coarse: std::collections::BTreeSet<Parts>,
}

struct Model {
    initial_position: Seqno,
    max_length: u64,
    optimistic_pa: bool,
    /// Writesets with more keys enter row keys as their table, EXCLUSIVE.
    coarse_after: usize,
    /// Writesets `<= purged` are gone (map and index).
    purged: Seqno,
    all: Vec<ModelWs>,
}

/// §5.2 hierarchy: every prefix SHARED, the leaf with its type (EXCLUSIVE for
/// a TOI), a zero-level SHARED key, duplicates merged to the stronger type;
/// a key of no parts is the server-level key of its type.
fn model_expand(keys: &[Key], toi: bool) -> BTreeMap<Parts, KeyType> {
    let mut out = BTreeMap::new();
    let mut add = |k: Parts, t: KeyType| {
        let e = out.entry(k).or_insert(t);
        if t > *e {
            *e = t;
        }
    };
    add(Vec::new(), KeyType::Shared);
    for k in keys {
        let leaf_type = if toi { KeyType::Exclusive } else { k.kind };
        // The model keeps its own list of parts, not the key's encoding.
        let parts = k.to_parts();
        for l in 1..parts.len() {
            add(parts[..l].to_vec(), KeyType::Shared);
        }
        add(parts, leaf_type);
    }
    out
}

impl Model {
    fn new(initial_position: Seqno, max_length: u64, optimistic_pa: bool) -> Model {
        Model {
            initial_position,
            max_length,
            optimistic_pa,
            coarse_after: usize::MAX,
            purged: Seqno::MIN,
            all: Vec::new(),
        }
    }

    fn live(&self) -> impl Iterator<Item = &ModelWs> {
        let purged = self.purged;
        self.all.iter().filter(move |w| w.seqno > purged)
    }

    /// Keys in the index: keys of live passed writesets.
    fn index_size(&self) -> usize {
        let mut keys = std::collections::BTreeSet::new();
        for w in self.live().filter(|w| w.passed) {
            keys.extend(w.keys.keys().cloned());
        }
        keys.len()
    }

    /// Latest live passed writeset that holds `key` with type `t`.
    fn latest(&self, key: &Parts, t: KeyType) -> Option<&ModelWs> {
        self.live()
            .filter(|w| w.passed && w.keys.get(key) == Some(&t))
            .max_by_key(|w| w.seqno)
    }

    fn certify(&mut self, req: &CertRequest<'_>) -> CertOutcome {
        let (s, ls) = (req.seqno, req.last_seen);
        let keys = model_expand(req.keys, req.is_toi);
        let structural = if ls >= s {
            Some(CertFailure::InvalidLastSeen {
                seqno: s,
                last_seen: ls,
            })
        } else if ls < self.initial_position {
            Some(CertFailure::TooOld {
                last_seen: ls,
                initial_position: self.initial_position,
            })
        } else if (s - ls) as u64 > self.max_length {
            Some(CertFailure::IntervalTooLong {
                seqno: s,
                last_seen: ls,
                max_length: self.max_length,
            })
        } else {
            None
        };
        if let Some(reason) = structural {
            self.record(req, keys, false);
            return CertOutcome::Fail { reason };
        }

        // Lower bound: lowest seqno in the map − 1, or s − 1 if it is empty.
        let mut depends = match self.live().map(|w| w.seqno).min() {
            Some(low) => low - 1,
            None => s - 1,
        };
        if req.implicit_deps || !self.optimistic_pa {
            depends = depends.max(ls);
        }
        if !req.is_toi {
            for (k, &t) in &keys {
                // Earlier references: every live table-level one of a big
                // writeset (EXCLUSIVE), then the latest writer per type.
                let coarse = self
                    .live()
                    .filter(|w| w.passed && w.coarse.contains(k))
                    .map(|w| (KeyType::Exclusive, w));
                let latest = KeyType::ALL
                    .into_iter()
                    .filter_map(|e| self.latest(k, e).map(|w| (e, w)));
                let earlier: Vec<(KeyType, Seqno, bool, NodeId)> = coarse
                    .chain(latest)
                    .map(|(e, w)| (e, w.seqno, w.toi, w.node))
                    .collect();
                for (e, r, toi, node) in earlier {
                    match SPEC_TABLE[e.index()].as_bytes()[t.index()] {
                        b'-' => {}
                        b'D' => depends = depends.max(r),
                        _ => {
                            if r > ls && (toi || node != req.source) {
                                self.record(req, keys.clone(), false);
                                return CertOutcome::Fail {
                                    reason: CertFailure::Conflict {
                                        key: Key::new(k.clone(), t),
                                        earlier: e,
                                        with_seqno: r,
                                    },
                                };
                            }
                            depends = depends.max(r);
                        }
                    }
                }
            }
        }
        // last_pa_unsafe: the most recent earlier passed PA_UNSAFE writeset
        // (purging does not forget it).
        let last_pa_unsafe = self
            .all
            .iter()
            .filter(|w| w.passed && w.pa_unsafe)
            .map(|w| w.seqno)
            .max()
            .unwrap_or(-1);
        depends = depends.max(last_pa_unsafe);
        if req.is_toi {
            depends = s - 1;
        }
        if req.keys.len() > self.coarse_after {
            let (rows, tables): (Vec<Key>, Vec<Key>) =
                req.keys.iter().cloned().partition(|k| k.nparts() >= 3);
            let mut entered = model_expand(&tables, req.is_toi);
            for r in &rows {
                let parts = r.to_parts();
                for l in 1..parts.len() {
                    let e = entered
                        .entry(parts[..l].to_vec())
                        .or_insert(KeyType::Shared);
                    *e = (*e).max(KeyType::Shared);
                }
            }
            self.record(req, entered, true);
            let last = self.all.last_mut().expect("just recorded");
            last.coarse = rows
                .iter()
                .map(|r| {
                    let parts = r.to_parts();
                    parts[..parts.len() - 1].to_vec()
                })
                .collect();
        } else {
            self.record(req, keys, true);
        }
        CertOutcome::Pass {
            depends_on: depends,
        }
    }

    fn record(&mut self, req: &CertRequest<'_>, keys: BTreeMap<Parts, KeyType>, passed: bool) {
        self.all.push(ModelWs {
            seqno: req.seqno,
            node: req.source,
            toi: req.is_toi,
            pa_unsafe: req.pa_unsafe,
            passed,
            keys,
            coarse: Default::default(),
        });
    }

    fn purge_upto(&mut self, cut: Seqno) {
        self.purged = self.purged.max(cut);
    }
}

// ---------------------------------------------------------------------------
// Generators.
// ---------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct GenKey {
    /// 0..=3 parts from a small space.
    parts: Vec<u8>,
    kind: KeyType,
}

#[derive(Clone, Debug)]
enum GenEvent {
    Ws {
        node: u8,
        back: u8,
        toi: bool,
        pa_unsafe: bool,
        implicit: bool,
        keys: Vec<GenKey>,
    },
    NonWs,
    Gap,
    Purge(u8),
}

fn gen_key() -> impl Strategy<Value = GenKey> {
    let kind = prop_oneof![
        Just(KeyType::Shared),
        Just(KeyType::Reference),
        Just(KeyType::Update),
        Just(KeyType::Exclusive),
    ];
    let parts = prop_oneof![
        1 => Just(0usize),
        2 => Just(1usize),
        3 => Just(2usize),
        10 => Just(3usize),
    ]
    .prop_flat_map(|n| proptest::collection::vec(0u8..3, n));
    (parts, kind).prop_map(|(parts, kind)| GenKey { parts, kind })
}

fn gen_event() -> impl Strategy<Value = GenEvent> {
    let ws = (
        0u8..3,
        0u8..12,
        proptest::bool::weighted(0.1),
        proptest::bool::weighted(0.1),
        proptest::bool::weighted(0.1),
        proptest::collection::vec(gen_key(), 0..5),
    )
        .prop_map(
            |(node, back, toi, pa_unsafe, implicit, keys)| GenEvent::Ws {
                node,
                back,
                toi,
                pa_unsafe,
                implicit,
                keys,
            },
        );
    prop_oneof![
        20 => ws,
        1 => Just(GenEvent::NonWs),
        1 => Just(GenEvent::Gap),
        3 => any::<u8>().prop_map(GenEvent::Purge),
    ]
}

/// A concrete step with seqnos assigned.
#[derive(Clone, Debug)]
enum Step {
    Ws {
        seqno: Seqno,
        last_seen: Seqno,
        source: NodeId,
        toi: bool,
        pa_unsafe: bool,
        implicit: bool,
        keys: Vec<Key>,
    },
    NonWs(Seqno),
    /// A purge at a point that is safe for every later writeset.
    Purge(Seqno),
}

fn node_id(n: u8) -> NodeId {
    [n + 1; 16]
}

fn make_key(g: &GenKey) -> Key {
    let names: [&[u8]; 3] = [b"db", b"tbl", b"row"];
    Key::new(
        g.parts.iter().enumerate().map(|(level, v)| {
            let mut p = names[level].to_vec();
            p.push(b'0' + v);
            p
        }),
        g.kind,
    )
}

/// Assigns seqnos (starting after `initial`) and turns purge events into
/// cuts that are at most the lowest last seen seqno of any later writeset.
fn build_steps(initial: Seqno, events: &[GenEvent]) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut pos = initial;
    let mut purges = Vec::new();
    for ev in events {
        match ev {
            GenEvent::Ws {
                node,
                back,
                toi,
                pa_unsafe,
                implicit,
                keys,
            } => {
                pos += 1;
                steps.push(Step::Ws {
                    seqno: pos,
                    last_seen: pos - 1 - *back as Seqno,
                    source: node_id(*node),
                    toi: *toi,
                    pa_unsafe: *pa_unsafe,
                    implicit: *implicit,
                    keys: keys.iter().map(make_key).collect(),
                });
            }
            GenEvent::NonWs => {
                pos += 1;
                steps.push(Step::NonWs(pos));
            }
            GenEvent::Gap => pos += 2,
            GenEvent::Purge(x) => {
                purges.push((steps.len(), *x, pos));
                steps.push(Step::Purge(0));
            }
        }
    }
    for (i, x, pos_then) in purges {
        let safe = steps[i + 1..]
            .iter()
            .filter_map(|s| match s {
                Step::Ws { last_seen, .. } => Some(*last_seen),
                _ => None,
            })
            .min()
            .unwrap_or(pos_then)
            .min(pos_then);
        steps[i] = Step::Purge(safe - (x % 4) as Seqno);
    }
    steps
}

fn request(step: &Step) -> Option<CertRequest<'_>> {
    match step {
        Step::Ws {
            seqno,
            last_seen,
            source,
            toi,
            pa_unsafe,
            implicit,
            keys,
        } => Some(CertRequest {
            seqno: *seqno,
            last_seen: *last_seen,
            source: *source,
            is_toi: *toi,
            pa_unsafe: *pa_unsafe,
            implicit_deps: *implicit,
            keys,
        }),
        _ => None,
    }
}

fn check_invariant(out: &CertOutcome, s: Seqno) {
    if let CertOutcome::Pass { depends_on } = out {
        assert!(-1 <= *depends_on && *depends_on < s, "{depends_on} vs {s}");
    }
}

fn settings() -> impl Strategy<Value = (Seqno, u64, bool)> {
    (
        0i64..4,
        prop_oneof![1 => Just(6u64), 1 => Just(10u64), 3 => Just(DEFAULT_MAX_LENGTH)],
        proptest::bool::weighted(0.8),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// The certifier agrees with the naive model on every decision,
    /// `depends_on` and index size, purges included.
    #[test]
    fn certification_matches_reference_model(
        (initial, max_length, optimistic) in settings(),
        coarse_after in prop_oneof![3 => Just(usize::MAX), 1 => Just(0usize), 1 => Just(2usize)],
        events in proptest::collection::vec(gen_event(), 1..120),
    ) {
        let steps = build_steps(initial, &events);
        let mut real = Certifier::new(initial);
        real.set_max_length(max_length);
        real.set_optimistic_pa(optimistic);
        real.set_coarse_after(coarse_after);
        let mut model = Model::new(initial, max_length, optimistic);
        model.coarse_after = coarse_after;
        for step in &steps {
            match step {
                Step::Ws { seqno, .. } => {
                    let req = request(step).unwrap();
                    let got = real.certify(&req).unwrap();
                    let want = model.certify(&req);
                    check_invariant(&got, *seqno);
                    check_invariant(&want, *seqno);
                    match (&got, &want) {
                        (
                            CertOutcome::Fail { reason: CertFailure::Conflict { .. } },
                            CertOutcome::Fail { reason: CertFailure::Conflict { .. } },
                        ) => {}
                        _ => prop_assert_eq!(&got, &want, "seqno {}", seqno),
                    }
                }
                Step::NonWs(s) => real.note_non_writeset(*s).unwrap(),
                Step::Purge(cut) => {
                    real.purge_upto(*cut);
                    model.purge_upto(*cut);
                }
            }
            prop_assert_eq!(real.index_size(), model.index_size());
        }
    }

    /// Purging at safe points changes no decision or conflict report, and
    /// `depends_on` only by the raised lower bound; certifiers with
    /// different hash seeds agree exactly.
    #[test]
    fn certification_purge_and_determinism(
        (initial, max_length, optimistic) in settings(),
        events in proptest::collection::vec(gen_event(), 1..200),
    ) {
        let steps = build_steps(initial, &events);
        let mk = || {
            let mut c = Certifier::new(initial);
            c.set_max_length(max_length);
            c.set_optimistic_pa(optimistic);
            c
        };
        let (mut plain, mut twin, mut purged) = (mk(), mk(), mk());
        for step in &steps {
            match step {
                Step::Ws { seqno, .. } => {
                    let req = request(step).unwrap();
                    let floor = purged.lowest_in_map().map_or(seqno - 1, |l| l - 1);
                    let a = plain.certify(&req).unwrap();
                    let b = twin.certify(&req).unwrap();
                    let p = purged.certify(&req).unwrap();
                    check_invariant(&a, *seqno);
                    check_invariant(&p, *seqno);
                    prop_assert_eq!(&a, &b);
                    match (&a, &p) {
                        (
                            CertOutcome::Pass { depends_on: da },
                            CertOutcome::Pass { depends_on: dp },
                        ) => prop_assert_eq!(*dp, (*da).max(floor), "seqno {}", seqno),
                        _ => prop_assert_eq!(&a, &p, "seqno {}", seqno),
                    }
                }
                Step::NonWs(s) => {
                    plain.note_non_writeset(*s).unwrap();
                    twin.note_non_writeset(*s).unwrap();
                    purged.note_non_writeset(*s).unwrap();
                }
                Step::Purge(cut) => purged.purge_upto(*cut),
            }
            prop_assert_eq!(plain.index_size(), twin.index_size());
            prop_assert!(purged.index_size() <= plain.index_size());
        }
        // Purging everything empties the index.
        purged.purge_upto(purged.position());
        prop_assert_eq!(purged.index_size(), 0);
        prop_assert_eq!(purged.map_len(), 0);
    }

    /// Calls out of order are refused and change nothing.
    #[test]
    fn certification_out_of_order_never_panics(
        seqnos in proptest::collection::vec(-5i64..40, 1..60),
        events in proptest::collection::vec(gen_event(), 1..40),
    ) {
        let keys: Vec<Key> = events
            .iter()
            .filter_map(|e| match e {
                GenEvent::Ws { keys, .. } => Some(keys.iter().map(make_key)),
                _ => None,
            })
            .flatten()
            .collect();
        let mut c = Certifier::new(0);
        for (i, &s) in seqnos.iter().enumerate() {
            let before = (c.position(), c.index_size(), c.map_len());
            let req = CertRequest {
                seqno: s,
                last_seen: s - 1 - (i % 3) as Seqno,
                source: node_id((i % 3) as u8),
                is_toi: i % 7 == 0,
                pa_unsafe: false,
                implicit_deps: false,
                keys: &keys[..keys.len().min(i)],
            };
            let r = if i % 5 == 4 {
                c.note_non_writeset(s).map(|_| None)
            } else {
                c.certify(&req).map(Some)
            };
            match r {
                Err(CertError::OutOfOrder { expected_above, got }) => {
                    prop_assert!(s <= before.0);
                    prop_assert_eq!((expected_above, got), (before.0, s));
                    prop_assert_eq!((c.position(), c.index_size(), c.map_len()), before);
                }
                Ok(out) => {
                    prop_assert!(s > before.0);
                    prop_assert_eq!(c.position(), s);
                    if let Some(out) = out {
                        check_invariant(&out, s);
                    }
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Entering big writesets at table level only adds conflicts and
    /// dependencies: fed the same decisions, a row-by-row certifier (the
    /// model without coarsening) passes everything the coarse one passes,
    /// with `depends_on` no higher.
    #[test]
    fn coarse_entering_only_adds_conflicts(
        initial in 0i64..4,
        coarse_after in 0usize..3,
        events in proptest::collection::vec(gen_event(), 1..120),
    ) {
        let steps = build_steps(initial, &events);
        let mut coarse = Certifier::new(initial);
        coarse.set_coarse_after(coarse_after);
        let mut exact = Model::new(initial, DEFAULT_MAX_LENGTH, true);
        for step in &steps {
            match step {
                Step::Ws { seqno, .. } => {
                    let req = request(step).unwrap();
                    let got = coarse.certify(&req).unwrap();
                    let want = exact.certify(&req);
                    // The model's index follows the coarse run's decisions.
                    exact.all.last_mut().unwrap().passed = got.is_pass();
                    if let CertOutcome::Pass { depends_on } = got {
                        let CertOutcome::Pass { depends_on: exact_deps } = want else {
                            return Err(TestCaseError::fail(format!(
                                "seqno {seqno} passed coarse, failed row by row: {want:?}"
                            )));
                        };
                        prop_assert!(depends_on >= exact_deps, "seqno {}", seqno);
                    }
                }
                Step::NonWs(s) => coarse.note_non_writeset(*s).unwrap(),
                Step::Purge(cut) => {
                    coarse.purge_upto(*cut);
                    exact.purge_upto(*cut);
                }
            }
        }
    }
}
