//! The list-append analysis (Elle's): version orders from reads,
//! dependency edges, cycles, and the direct checks.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::anomaly::{Anomaly, AnomalyKind, Report};
use crate::graph::{self, EdgeKind, Graph, Kinds};
use crate::history::{History, Mop, Outcome, Txn};

/// What the history claims beyond serializability of its dependencies.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Every read was causal (`wsrep_sync_wait`): it must see every append
    /// acknowledged before its transaction began. Turns on the stale-read
    /// check and real-time edges.
    pub realtime: bool,
}

/// How many edges a cycle search starts from per component: bounds the
/// checker's time on a badly broken history; every component is still
/// counted.
const SEARCH_STARTS: usize = 256;

/// Where an appended value came from.
#[derive(Debug, Clone, Copy)]
struct AppendSite {
    txn: usize,
    key: u64,
    /// Not the transaction's last append to this key.
    intermediate: bool,
}

/// The transactions with list micro-operations, and what they wrote.
struct Index<'h> {
    txns: Vec<&'h Txn>,
    appends: HashMap<u64, AppendSite>,
    /// Ok transactions, and unknown ones whose appends were read.
    committed: Vec<bool>,
}

impl<'h> Index<'h> {
    fn build(history: &'h History) -> Index<'h> {
        let txns = history.txns_with(Mop::is_list);
        let mut appends = HashMap::new();
        for (i, t) in txns.iter().enumerate() {
            let mut last_of_key: BTreeMap<u64, u64> = BTreeMap::new();
            for m in &t.mops {
                if let Mop::Append { key, value } = *m {
                    last_of_key.insert(key, value);
                }
            }
            for m in &t.mops {
                if let Mop::Append { key, value } = *m {
                    let intermediate = last_of_key[&key] != value;
                    appends.insert(
                        value,
                        AppendSite {
                            txn: i,
                            key,
                            intermediate,
                        },
                    );
                }
            }
        }
        let mut committed: Vec<bool> = txns.iter().map(|t| t.is_ok()).collect();
        let oks = committed.clone();
        for (_, _, values) in reads(&txns, &oks) {
            for v in values {
                if let Some(site) = appends.get(v) {
                    if txns[site.txn].outcome == Outcome::Unknown {
                        committed[site.txn] = true;
                    }
                }
            }
        }
        Index {
            txns,
            appends,
            committed,
        }
    }

    fn writer(&self, value: u64) -> Option<usize> {
        self.appends
            .get(&value)
            .map(|s| s.txn)
            .filter(|&t| self.committed[t])
    }
}

/// Every completed read of the transactions `which` selects: (txn, key,
/// values). An unknown transaction that committed returned its reads
/// before its COMMIT, so they count once it is known to have committed.
fn reads<'a>(
    txns: &'a [&'a Txn],
    which: &'a [bool],
) -> impl Iterator<Item = (usize, u64, &'a [u64])> + 'a {
    txns.iter()
        .enumerate()
        .filter(|(i, _)| which[*i])
        .flat_map(|(i, t)| {
            t.mops.iter().filter_map(move |m| match m {
                Mop::Read {
                    key,
                    values: Some(v),
                } => Some((i, *key, v.as_slice())),
                _ => None,
            })
        })
}

/// Checks the list-append part of `history`.
pub fn check(history: &History, options: &Options) -> Report {
    let index = Index::build(history);
    let mut report = Report::default();
    check_elements(&index, &mut report);
    let orders = version_orders(&index, &mut report);
    check_final_reads(&index, &mut report);
    let graph = dependency_graph(&index, &orders, options);
    find_cycles(&index, &graph, &mut report);
    if options.realtime {
        check_stale_reads(&index, &mut report);
        find_realtime_cycles(&index, &graph, &mut report);
    }
    report
}

/// Duplicated, phantom, aborted (G1a) and intermediate (G1b) reads.
fn check_elements(index: &Index, report: &mut Report) {
    for (r, key, values) in reads(&index.txns, &index.committed) {
        let reader = index.txns[r];
        let mut seen = BTreeSet::new();
        for &v in values {
            if !seen.insert(v) {
                report.add(Anomaly {
                    kind: AnomalyKind::DuplicateElement,
                    txns: vec![reader.id],
                    explanation: vec![format!(
                        "{} read key {key} = {} with {v} twice",
                        reader.label(),
                        show_list(values)
                    )],
                });
                break;
            }
        }
        for &v in values {
            match index.appends.get(&v) {
                Some(site) if site.key == key => {
                    let writer = index.txns[site.txn];
                    if writer.outcome == Outcome::Fail {
                        report.add(Anomaly {
                            kind: AnomalyKind::G1a,
                            txns: vec![writer.id, reader.id],
                            explanation: vec![
                                format!("{} appended {v} to key {key} and failed", writer.label()),
                                format!(
                                    "{} read key {key} = {}",
                                    reader.label(),
                                    show_list(values)
                                ),
                            ],
                        });
                    }
                }
                _ => report.add(Anomaly {
                    kind: AnomalyKind::PhantomElement,
                    txns: vec![reader.id],
                    explanation: vec![format!(
                        "{} read key {key} = {}: no transaction appended {v} to key {key}",
                        reader.label(),
                        show_list(values)
                    )],
                }),
            }
        }
        if let Some(&last) = values.last() {
            if let Some(site) = index.appends.get(&last) {
                if site.intermediate && site.txn != r {
                    let writer = index.txns[site.txn];
                    report.add(Anomaly {
                        kind: AnomalyKind::G1b,
                        txns: vec![writer.id, reader.id],
                        explanation: vec![
                            format!(
                                "{} appended {last} to key {key}, then appended to it again",
                                writer.label()
                            ),
                            format!(
                                "{} read key {key} = {}: the version between the two",
                                reader.label(),
                                show_list(values)
                            ),
                        ],
                    });
                }
            }
        }
    }
}

/// Each key's version order: its longest read. A read that is not a
/// prefix of it is an incompatible order (reported once per key).
fn version_orders(index: &Index, report: &mut Report) -> BTreeMap<u64, Vec<u64>> {
    let mut longest: BTreeMap<u64, (usize, &[u64])> = BTreeMap::new();
    for (r, key, values) in reads(&index.txns, &index.committed) {
        let e = longest.entry(key).or_insert((r, values));
        if values.len() > e.1.len() {
            *e = (r, values);
        }
    }
    let mut bad_keys = BTreeSet::new();
    for (r, key, values) in reads(&index.txns, &index.committed) {
        let (lr, order) = longest[&key];
        if !order.starts_with(values) && bad_keys.insert(key) {
            report.add(Anomaly {
                kind: AnomalyKind::IncompatibleOrder,
                txns: vec![index.txns[r].id, index.txns[lr].id],
                explanation: vec![
                    format!(
                        "{} read key {key} = {}",
                        index.txns[r].label(),
                        show_list(values)
                    ),
                    format!(
                        "{} read key {key} = {}",
                        index.txns[lr].label(),
                        show_list(order)
                    ),
                    "neither is a prefix of the other".to_string(),
                ],
            });
        }
    }
    longest
        .into_iter()
        .map(|(k, (_, v))| (k, v.to_vec()))
        .collect()
}

/// Every acknowledged append is in every node's final read of its key, and
/// the nodes' final reads agree.
fn check_final_reads(index: &Index, report: &mut Report) {
    let finals: Vec<&Txn> = index
        .txns
        .iter()
        .copied()
        .filter(|t| t.is_final && t.is_ok())
        .collect();
    let mut final_lists: BTreeMap<u64, Vec<(&Txn, &[u64])>> = BTreeMap::new();
    for f in &finals {
        for m in &f.mops {
            if let Mop::Read {
                key,
                values: Some(v),
            } = m
            {
                final_lists.entry(*key).or_default().push((f, v.as_slice()));
            }
        }
    }
    for t in index.txns.iter().filter(|t| t.is_ok() && !t.is_final) {
        for m in &t.mops {
            let Mop::Append { key, value } = *m else {
                continue;
            };
            let Some(lists) = final_lists.get(&key) else {
                continue;
            };
            let missing: Vec<&Txn> = lists
                .iter()
                .filter(|(_, l)| !l.contains(&value))
                .map(|(f, _)| *f)
                .collect();
            if !missing.is_empty() {
                let nodes: Vec<String> = missing.iter().map(|f| (f.node + 1).to_string()).collect();
                let mut txns = vec![t.id];
                txns.extend(missing.iter().map(|f| f.id));
                report.add(Anomaly {
                    kind: AnomalyKind::LostWrite,
                    txns,
                    explanation: vec![
                        format!(
                            "{} appended {value} to key {key} and was acknowledged",
                            t.label()
                        ),
                        format!(
                            "the final read of key {key} on node(s) {} lacks it",
                            nodes.join(", ")
                        ),
                    ],
                });
            }
        }
    }
    for (key, lists) in &final_lists {
        let (first, l0) = lists[0];
        if let Some((other, l)) = lists.iter().find(|(_, l)| l != &l0) {
            report.add(Anomaly {
                kind: AnomalyKind::Divergence,
                txns: vec![first.id, other.id],
                explanation: vec![
                    format!(
                        "after healing, node {} has key {key} = {}",
                        first.node + 1,
                        show_list(l0)
                    ),
                    format!(
                        "and node {} has key {key} = {}",
                        other.node + 1,
                        show_list(l)
                    ),
                ],
            });
        }
    }
}

/// ww, wr and rw edges from the version orders; rt edges when asked.
fn dependency_graph(index: &Index, orders: &BTreeMap<u64, Vec<u64>>, options: &Options) -> Graph {
    let mut g = Graph::new(index.txns.len());
    for (&key, order) in orders {
        for pair in order.windows(2) {
            if let (Some(a), Some(b)) = (index.writer(pair[0]), index.writer(pair[1])) {
                g.add(a, b, EdgeKind::Ww, Some(key));
            }
        }
    }
    for (r, key, values) in reads(&index.txns, &index.committed) {
        let order = &orders[&key];
        if let Some(w) = values.last().and_then(|&v| index.writer(v)) {
            g.add(w, r, EdgeKind::Wr, Some(key));
        }
        if order.starts_with(values) {
            if let Some(next) = order.get(values.len()).and_then(|&v| index.writer(v)) {
                g.add(r, next, EdgeKind::Rw, Some(key));
            }
        }
    }
    if options.realtime {
        add_realtime_edges(index, &mut g);
    }
    g
}

/// `a -> b` for every ok `a` that completed before ok `b` began, reduced
/// to the edges no third transaction sits between (a transaction `c`
/// invoked after `a` completed and completed before `b` began makes
/// `a -> b` implied by `a -> c -> b`).
fn add_realtime_edges(index: &Index, g: &mut Graph) {
    let mut oks: Vec<usize> = (0..index.txns.len())
        .filter(|&i| index.txns[i].is_ok())
        .collect();
    oks.sort_by_key(|&i| index.txns[i].complete_us);
    // For each completion time in order, the latest invocation among the
    // transactions completed so far.
    let mut latest_invoke = Vec::with_capacity(oks.len());
    let mut m = 0;
    for &i in &oks {
        m = m.max(index.txns[i].invoke_us);
        latest_invoke.push(m);
    }
    for &b in &oks {
        let tb = index.txns[b];
        // Transactions completed before b began: a prefix of `oks`.
        let end = oks.partition_point(|&i| index.txns[i].complete_us < tb.invoke_us);
        if end == 0 {
            continue;
        }
        let floor = latest_invoke[end - 1];
        for &a in oks[..end].iter().rev() {
            if index.txns[a].complete_us < floor {
                break;
            }
            g.add(a, b, EdgeKind::Rt, None);
        }
    }
}

/// G0, G1c, G-single and G2-item: one anomaly per component, the most
/// severe cycle it holds, explained by the shortest such cycle.
fn find_cycles(index: &Index, g: &Graph, report: &mut Report) {
    for comp in g.cyclic_components(graph::WW) {
        let allowed = members(g.len(), &comp);
        if let Some(cycle) = g.shortest_cycle(comp[0], graph::WW, &allowed) {
            report_cycle(index, g, AnomalyKind::G0, &cycle, graph::WW, report);
        }
    }
    for comp in g.cyclic_components(graph::WW_WR) {
        let allowed = members(g.len(), &comp);
        let wr = g
            .edges_within(&comp, &allowed, EdgeKind::Wr)
            .take(SEARCH_STARTS);
        if let Some(cycle) = g.shortest_closing(wr, graph::WW_WR, &allowed) {
            report_cycle(index, g, AnomalyKind::G1c, &cycle, graph::WW_WR, report);
        }
    }
    for comp in g.cyclic_components(graph::DATA) {
        let allowed = members(g.len(), &comp);
        let rw = || {
            g.edges_within(&comp, &allowed, EdgeKind::Rw)
                .take(SEARCH_STARTS)
        };
        // One rw edge closed by ww/wr edges only: G-single; else G2-item.
        if let Some(cycle) = g.shortest_closing(rw(), graph::WW_WR, &allowed) {
            report_cycle(index, g, AnomalyKind::GSingle, &cycle, graph::DATA, report);
        } else if let Some(cycle) = g.shortest_closing(rw(), graph::DATA, &allowed) {
            report_cycle(index, g, AnomalyKind::G2Item, &cycle, graph::DATA, report);
        }
    }
}

/// Cycles that exist only with real-time edges: an rt edge between two
/// transactions that no data dependency cycle already joins.
fn find_realtime_cycles(index: &Index, g: &Graph, report: &mut Report) {
    let mut data_comp = vec![usize::MAX; g.len()];
    for (c, comp) in g.cyclic_components(graph::DATA).iter().enumerate() {
        for &v in comp {
            data_comp[v] = c;
        }
    }
    let same_data_comp =
        |a: usize, b: usize| data_comp[a] != usize::MAX && data_comp[a] == data_comp[b];
    for comp in g.cyclic_components(graph::ALL) {
        let allowed = members(g.len(), &comp);
        let rt = g
            .edges_within(&comp, &allowed, EdgeKind::Rt)
            .filter(|&(a, b)| !same_data_comp(a, b))
            .take(SEARCH_STARTS);
        let cycle = g.shortest_closing(rt, graph::ALL, &allowed);
        if let Some(cycle) = cycle {
            let kind = if anti_dependencies(g, &cycle) >= 2 {
                AnomalyKind::G2ItemRealtime
            } else {
                AnomalyKind::GSingleRealtime
            };
            report_cycle(index, g, kind, &cycle, graph::ALL, report);
        }
    }
}

/// How many steps of `cycle` can only be anti-dependencies (no other data
/// edge joins the two transactions).
fn anti_dependencies(g: &Graph, cycle: &[usize]) -> usize {
    (0..cycle.len())
        .filter(|&i| {
            let k = g.kinds(cycle[i], cycle[(i + 1) % cycle.len()]);
            k & EdgeKind::Rw.bit() != 0 && k & graph::WW_WR == 0
        })
        .count()
}

fn members(n: usize, comp: &[usize]) -> Vec<bool> {
    let mut m = vec![false; n];
    for &v in comp {
        m[v] = true;
    }
    m
}

/// Each transaction of the cycle with its operations, then each edge.
fn report_cycle(
    index: &Index,
    g: &Graph,
    kind: AnomalyKind,
    cycle: &[usize],
    mask: Kinds,
    report: &mut Report,
) {
    let mut explanation = vec![format!("a cycle of {} transactions:", cycle.len())];
    for &v in cycle {
        let t = index.txns[v];
        explanation.push(format!("{}: {}", t.label(), show_mops(&t.mops)));
    }
    for (i, &a) in cycle.iter().enumerate() {
        let b = cycle[(i + 1) % cycle.len()];
        let (ta, tb) = (index.txns[a], index.txns[b]);
        let why = g.reasons(a, b, mask);
        let text: Vec<String> = why
            .iter()
            .map(|w| match (w.kind, w.key) {
                (EdgeKind::Ww, Some(k)) => {
                    format!("ww: T{} appended to key {k} right after T{}", tb.id, ta.id)
                }
                (EdgeKind::Wr, Some(k)) => {
                    format!("wr: T{} read T{}'s append to key {k}", tb.id, ta.id)
                }
                (EdgeKind::Rw, Some(k)) => {
                    format!(
                        "rw: T{} read key {k} without T{}'s append, the next version",
                        ta.id, tb.id
                    )
                }
                (EdgeKind::Rt, _) => format!("rt: T{} completed before T{} began", ta.id, tb.id),
                (kind, None) => format!("{}: T{} -> T{}", kind.name(), ta.id, tb.id),
            })
            .collect();
        explanation.push(format!("T{} -> T{}: {}", ta.id, tb.id, text.join("; ")));
    }
    report.add(Anomaly {
        kind,
        txns: cycle.iter().map(|&v| index.txns[v].id).collect(),
        explanation,
    });
}

/// Reads that miss an append acknowledged before their transaction
/// began (the causal-read claim).
fn check_stale_reads(index: &Index, report: &mut Report) {
    // Per key, ok appends by completion time.
    let mut acked: BTreeMap<u64, Vec<(u64, u64, usize)>> = BTreeMap::new();
    for (i, t) in index.txns.iter().enumerate() {
        if !t.is_ok() || t.is_final {
            continue;
        }
        for m in &t.mops {
            if let Mop::Append { key, value } = *m {
                acked
                    .entry(key)
                    .or_default()
                    .push((t.complete_us, value, i));
            }
        }
    }
    for list in acked.values_mut() {
        list.sort_unstable();
    }
    for (r, key, values) in reads(&index.txns, &index.committed) {
        let reader = index.txns[r];
        if reader.is_final {
            continue; // the lost-write check covers final reads
        }
        let Some(list) = acked.get(&key) else {
            continue;
        };
        let seen: BTreeSet<u64> = values.iter().copied().collect();
        let missed: Vec<&(u64, u64, usize)> = list
            .iter()
            .take_while(|(done, _, _)| *done < reader.invoke_us)
            .filter(|(_, v, _)| !seen.contains(v))
            .collect();
        if let Some(&&(_, value, w)) = missed.last() {
            let writer = index.txns[w];
            report.add(Anomaly {
                kind: AnomalyKind::StaleRead,
                txns: vec![writer.id, reader.id],
                explanation: vec![
                    format!("{} appended {value} to key {key} and was acknowledged", writer.label()),
                    format!(
                        "{} began after that and read key {key} = {}, without it ({} acknowledged append(s) missed)",
                        reader.label(),
                        show_list(values),
                        missed.len()
                    ),
                ],
            });
        }
    }
}

/// `[1, 2, 3]`, or `[…, 8, 9, 10] (10 values)` for long lists.
pub fn show_list(values: &[u64]) -> String {
    const TAIL: usize = 4;
    let shown: Vec<String> = values
        .iter()
        .rev()
        .take(TAIL)
        .rev()
        .map(u64::to_string)
        .collect();
    if values.len() > TAIL {
        format!("[…, {}] ({} values)", shown.join(", "), values.len())
    } else {
        format!("[{}]", shown.join(", "))
    }
}

fn show_mops(mops: &[Mop]) -> String {
    let parts: Vec<String> = mops
        .iter()
        .map(|m| match m {
            Mop::Append { key, value } => format!("append {key} {value}"),
            Mop::Read {
                key,
                values: Some(v),
            } => format!("read {key} {}", show_list(v)),
            Mop::Read { key, values: None } => format!("read {key} ?"),
            Mop::RegRead { key, value } => format!("r {key} {value:?}"),
            Mop::RegWrite { key, value } => format!("w {key} {value}"),
        })
        .collect();
    parts.join(", ")
}
