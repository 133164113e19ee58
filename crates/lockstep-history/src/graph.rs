//! The dependency graph between transactions: edges labelled write-write,
//! write-read, read-write or real-time; strongly connected components
//! (Tarjan, iterative so a long history cannot overflow the stack); and
//! the shortest cycle through given edge kinds, which is the minimal
//! explanation of an anomaly.

use std::collections::{BTreeMap, VecDeque};

/// The kind of a dependency edge `a -> b`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EdgeKind {
    /// `b` overwrote (appended after) `a`'s write.
    Ww,
    /// `b` read `a`'s write.
    Wr,
    /// `a` read a version that `b` then overwrote (anti-dependency).
    Rw,
    /// `a` completed before `b` was invoked.
    Rt,
}

impl EdgeKind {
    pub fn bit(self) -> u8 {
        match self {
            EdgeKind::Ww => 1,
            EdgeKind::Wr => 2,
            EdgeKind::Rw => 4,
            EdgeKind::Rt => 8,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            EdgeKind::Ww => "ww",
            EdgeKind::Wr => "wr",
            EdgeKind::Rw => "rw",
            EdgeKind::Rt => "rt",
        }
    }
}

/// A set of edge kinds, as bits.
pub type Kinds = u8;
pub const WW: Kinds = 1;
pub const WW_WR: Kinds = 1 | 2;
pub const DATA: Kinds = 1 | 2 | 4;
pub const ALL: Kinds = 1 | 2 | 4 | 8;

/// Why an edge exists: its kind and the key (none for real time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Why {
    pub kind: EdgeKind,
    pub key: Option<u64>,
}

/// A directed graph over nodes `0..n`.
#[derive(Debug, Default)]
pub struct Graph {
    out: Vec<BTreeMap<usize, Kinds>>,
    /// The first reason recorded for each (from, to, kind).
    why: BTreeMap<(usize, usize, EdgeKind), Option<u64>>,
}

impl Graph {
    pub fn new(n: usize) -> Graph {
        Graph {
            out: vec![BTreeMap::new(); n],
            why: BTreeMap::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.out.len()
    }

    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    /// Adds `a -> b` of `kind`; self-loops are ignored (a transaction does
    /// not depend on itself).
    pub fn add(&mut self, a: usize, b: usize, kind: EdgeKind, key: Option<u64>) {
        if a == b {
            return;
        }
        *self.out[a].entry(b).or_insert(0) |= kind.bit();
        self.why.entry((a, b, kind)).or_insert(key);
    }

    /// The kinds of edge `a -> b` (0 if none).
    pub fn kinds(&self, a: usize, b: usize) -> Kinds {
        self.out[a].get(&b).copied().unwrap_or(0)
    }

    /// The reasons of `a -> b` among `mask`, most specific first.
    pub fn reasons(&self, a: usize, b: usize, mask: Kinds) -> Vec<Why> {
        [EdgeKind::Ww, EdgeKind::Wr, EdgeKind::Rw, EdgeKind::Rt]
            .into_iter()
            .filter(|k| self.kinds(a, b) & mask & k.bit() != 0)
            .map(|kind| Why {
                kind,
                key: self.why.get(&(a, b, kind)).copied().flatten(),
            })
            .collect()
    }

    /// All edges `(a, b, kinds)`.
    pub fn edges(&self) -> impl Iterator<Item = (usize, usize, Kinds)> + '_ {
        self.out
            .iter()
            .enumerate()
            .flat_map(|(a, m)| m.iter().map(move |(&b, &k)| (a, b, k)))
    }

    /// Strongly connected components with more than one node, using only
    /// edges whose kinds meet `mask`.
    pub fn cyclic_components(&self, mask: Kinds) -> Vec<Vec<usize>> {
        let n = self.len();
        let mut index = vec![usize::MAX; n];
        let mut low = vec![0; n];
        let mut on_stack = vec![false; n];
        let mut stack = Vec::new();
        let mut next = 0;
        let mut components = Vec::new();
        for root in 0..n {
            if index[root] != usize::MAX {
                continue;
            }
            // Explicit call stack of (node, its out-neighbours, position).
            let mut calls: Vec<(usize, Vec<usize>, usize)> = Vec::new();
            index[root] = next;
            low[root] = next;
            next += 1;
            stack.push(root);
            on_stack[root] = true;
            calls.push((root, self.successors(root, mask), 0));
            while let Some((v, succ, pos)) = calls.last_mut() {
                let v = *v;
                if *pos < succ.len() {
                    let w = succ[*pos];
                    *pos += 1;
                    if index[w] == usize::MAX {
                        index[w] = next;
                        low[w] = next;
                        next += 1;
                        stack.push(w);
                        on_stack[w] = true;
                        let ws = self.successors(w, mask);
                        calls.push((w, ws, 0));
                    } else if on_stack[w] {
                        low[v] = low[v].min(index[w]);
                    }
                    continue;
                }
                calls.pop();
                if let Some((parent, _, _)) = calls.last() {
                    low[*parent] = low[*parent].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut component = Vec::new();
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        component.push(w);
                        if w == v {
                            break;
                        }
                    }
                    if component.len() > 1 {
                        component.sort_unstable();
                        components.push(component);
                    }
                }
            }
        }
        components
    }

    fn successors(&self, v: usize, mask: Kinds) -> Vec<usize> {
        self.out[v]
            .iter()
            .filter(|(_, &k)| k & mask != 0)
            .map(|(&w, _)| w)
            .collect()
    }

    /// The shortest cycle through `v` over edges meeting `mask`, inside
    /// `allowed`: `v` first, the node that closes the cycle last.
    pub fn shortest_cycle(&self, v: usize, mask: Kinds, allowed: &[bool]) -> Option<Vec<usize>> {
        let out = self.successors(v, mask).into_iter().filter(|&w| allowed[w]);
        self.shortest_closing(out.map(|w| (v, w)), mask, allowed)
    }

    /// The edges `a -> b` of `kind` with `a` in `comp` and `b` allowed.
    pub fn edges_within<'a>(
        &'a self,
        comp: &'a [usize],
        allowed: &'a [bool],
        kind: EdgeKind,
    ) -> impl Iterator<Item = (usize, usize)> + 'a {
        comp.iter().flat_map(move |&a| {
            self.out[a]
                .iter()
                .filter(move |(&b, &k)| allowed[b] && k & kind.bit() != 0)
                .map(move |(&b, _)| (a, b))
        })
    }

    /// Of the cycles that take one of `edges` and return over edges meeting
    /// `mask` inside `allowed`, the shortest: the edge's source first.
    pub fn shortest_closing(
        &self,
        edges: impl Iterator<Item = (usize, usize)>,
        mask: Kinds,
        allowed: &[bool],
    ) -> Option<Vec<usize>> {
        edges
            .filter_map(|(a, b)| {
                let mut path = self.shortest_path(b, a, mask, allowed)?;
                path.pop(); // `a` again
                path.insert(0, a);
                Some(path)
            })
            .min_by_key(Vec::len)
    }

    /// The shortest path `from -> ... -> to` over edges meeting `mask`,
    /// staying inside `allowed` (a membership vector); the nodes in order.
    pub fn shortest_path(
        &self,
        from: usize,
        to: usize,
        mask: Kinds,
        allowed: &[bool],
    ) -> Option<Vec<usize>> {
        let mut parent: BTreeMap<usize, usize> = BTreeMap::new();
        let mut queue = VecDeque::from([from]);
        parent.insert(from, from);
        while let Some(v) = queue.pop_front() {
            for w in self.successors(v, mask) {
                if !allowed[w] || parent.contains_key(&w) {
                    continue;
                }
                parent.insert(w, v);
                if w == to {
                    let mut path = vec![to];
                    let mut at = to;
                    while at != from {
                        at = parent[&at];
                        path.push(at);
                    }
                    path.reverse();
                    return Some(path);
                }
                queue.push_back(w);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_are_found_per_edge_mask() {
        let mut g = Graph::new(5);
        g.add(0, 1, EdgeKind::Ww, Some(1));
        g.add(1, 0, EdgeKind::Rw, Some(1));
        g.add(2, 3, EdgeKind::Ww, None);
        g.add(3, 2, EdgeKind::Ww, None);
        g.add(3, 4, EdgeKind::Wr, None);
        assert_eq!(g.cyclic_components(ALL), vec![vec![0, 1], vec![2, 3]]);
        assert_eq!(g.cyclic_components(WW), vec![vec![2, 3]]);
        assert!(g.cyclic_components(EdgeKind::Wr.bit()).is_empty());
    }

    #[test]
    fn the_shortest_path_stays_inside_the_allowed_nodes() {
        let mut g = Graph::new(4);
        g.add(0, 1, EdgeKind::Ww, None);
        g.add(1, 3, EdgeKind::Ww, None);
        g.add(0, 2, EdgeKind::Ww, None);
        g.add(2, 3, EdgeKind::Ww, None);
        let all = vec![true; 4];
        assert_eq!(g.shortest_path(0, 3, WW, &all), Some(vec![0, 1, 3]));
        let no_one = vec![true, false, true, true];
        assert_eq!(g.shortest_path(0, 3, WW, &no_one), Some(vec![0, 2, 3]));
        assert_eq!(g.shortest_path(0, 3, WW_WR & !WW, &all), None);
    }

    #[test]
    fn a_long_chain_does_not_overflow_the_stack() {
        let n = 200_000;
        let mut g = Graph::new(n);
        for i in 0..n - 1 {
            g.add(i, i + 1, EdgeKind::Ww, None);
        }
        g.add(n - 1, 0, EdgeKind::Rw, None);
        let c = g.cyclic_components(ALL);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].len(), n);
        assert!(g.cyclic_components(WW).is_empty());
    }
}
