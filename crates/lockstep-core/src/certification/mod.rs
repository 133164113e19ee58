//! Certification (contract §5.2 keys, §6.2 rules, §6.3 `depends_on`, §6.4
//! purging, §6.5 preload for joiners). Pure logic, no I/O.
//!
//! Every node feeds every delivered writeset, in seqno order, to its
//! [`Certifier`]; since the index is built from the same sequence on every
//! node, the pass/fail decisions are identical everywhere. Ordered events
//! that are not writesets (views, …) are reported with
//! [`Certifier::note_non_writeset`] so the position stays continuous.
//!
//! Layout: `key` (types, encoding, hierarchy), `rules` (the table and the
//! conflict conditions), `index` (the key index), `purge` (the writeset map
//! and purging).

mod coarse;
mod index;
mod key;
mod purge;
mod rules;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_prop;

use std::collections::HashMap;
use std::fmt;

pub use key::{Key, KeyType};
pub use rules::{is_real_conflict, relation, Relation, TABLE};

use coarse::CoarseRefs;
use index::{KeyIndex, NO_REF, NO_SLOT, TOI_BIT};
use purge::WritesetMap;

/// Global sequence number (`wsrep_seqno_t`); `-1` is "undefined".
pub type Seqno = i64;
/// Originator member id.
pub type NodeId = [u8; 16];

/// Default of the hidden `cert.max_length`.
pub const DEFAULT_MAX_LENGTH: u64 = 16384;

/// A writeset with more keys than this enters its row keys (three parts
/// or more) into the index at their table: one EXCLUSIVE key per table
/// instead of a key per row. See [`Certifier::enter`].
pub const COARSE_AFTER: usize = 1 << 17;

/// One writeset to certify.
#[derive(Clone, Copy, Debug)]
pub struct CertRequest<'a> {
    /// Global seqno `s`.
    pub seqno: Seqno,
    /// Last seen seqno `ls` set by the originator.
    pub last_seen: Seqno,
    /// Originator member id.
    pub source: NodeId,
    /// Total order isolation writeset: skips key checks, `depends_on = s-1`,
    /// its leaf keys are entered as EXCLUSIVE.
    pub is_toi: bool,
    /// `WSREP_FLAG_PA_UNSAFE`: later writesets depend on this one.
    pub pa_unsafe: bool,
    /// `WSREP_FLAG_IMPLICIT_DEPS`: `depends_on >= last_seen`.
    pub implicit_deps: bool,
    /// The keys as appended by the server (leaves only).
    pub keys: &'a [Key],
}

/// Result of certifying one writeset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertOutcome {
    /// Commit it; it may be applied once everything `<= depends_on` is
    /// committed. `-1 <= depends_on < seqno`.
    Pass { depends_on: Seqno },
    /// Roll it back (it still occupies its seqno).
    Fail { reason: CertFailure },
}

impl CertOutcome {
    pub fn is_pass(&self) -> bool {
        matches!(self, CertOutcome::Pass { .. })
    }

    /// `depends_on` of a passed writeset.
    pub fn depends_on(&self) -> Option<Seqno> {
        match self {
            CertOutcome::Pass { depends_on } => Some(*depends_on),
            CertOutcome::Fail { .. } => None,
        }
    }
}

/// Why a writeset failed certification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertFailure {
    /// A key (`key`, at the hierarchy level where it clashed, with the type
    /// the writeset holds it under) clashes with the `earlier` reference of
    /// writeset `with_seqno`.
    Conflict {
        key: Key,
        earlier: KeyType,
        with_seqno: Seqno,
    },
    /// `last_seen < initial_position`: made before this index starts.
    TooOld {
        last_seen: Seqno,
        initial_position: Seqno,
    },
    /// `seqno - last_seen > max_length`.
    IntervalTooLong {
        seqno: Seqno,
        last_seen: Seqno,
        max_length: u64,
    },
    /// `last_seen >= seqno`: impossible for a well-formed writeset.
    InvalidLastSeen { seqno: Seqno, last_seen: Seqno },
    /// Read back from a Galera cache that marks it failed or skipped
    /// (`galera_cache`): the reason stayed with Galera.
    FailedInGalera,
}

impl fmt::Display for CertFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CertFailure::Conflict {
                key,
                earlier,
                with_seqno,
            } => write!(
                f,
                "key {key} conflicts with {earlier} reference of seqno {with_seqno}"
            ),
            CertFailure::TooOld {
                last_seen,
                initial_position,
            } => write!(
                f,
                "last seen seqno {last_seen} is below the index start {initial_position}"
            ),
            CertFailure::IntervalTooLong {
                seqno,
                last_seen,
                max_length,
            } => write!(
                f,
                "certification interval {seqno} - {last_seen} exceeds cert.max_length {max_length}"
            ),
            CertFailure::InvalidLastSeen { seqno, last_seen } => {
                write!(f, "last seen seqno {last_seen} is not below seqno {seqno}")
            }
            CertFailure::FailedInGalera => {
                f.write_str("failed certification in Galera (its cache marks it skipped)")
            }
        }
    }
}

/// Misuse of the certifier by its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CertError {
    /// Events must come in strictly increasing seqno order.
    OutOfOrder { expected_above: Seqno, got: Seqno },
}

impl fmt::Display for CertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CertError::OutOfOrder {
                expected_above,
                got,
            } => write!(
                f,
                "certification out of order: got seqno {got}, expected above {expected_above}"
            ),
        }
    }
}

impl std::error::Error for CertError {}

/// Running certification statistics (sums, so they can be averaged over any
/// window by differencing two snapshots).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CertStats {
    /// Writesets given to [`Certifier::certify`].
    pub certified: u64,
    pub passed: u64,
    /// Failures on keys.
    pub conflicts: u64,
    /// Structural failures (too old, interval too long, invalid last seen).
    pub structural_failures: u64,
    /// Sum of `s - depends_on` over passed writesets.
    pub deps_distance_sum: u64,
    /// Sum of `s - ls - 1` over writesets that reached the key checks.
    pub interval_sum: u64,
    /// Number of writesets counted in `interval_sum`.
    pub interval_count: u64,
    /// Expanded keys (hierarchy levels) looked up.
    pub keys_processed: u64,
}

impl CertStats {
    /// Average `s - depends_on` of passed writesets (`cert_deps_distance`).
    pub fn avg_deps_distance(&self) -> f64 {
        if self.passed == 0 {
            0.0
        } else {
            self.deps_distance_sum as f64 / self.passed as f64
        }
    }

    /// The figures counted after `base` was taken (`FLUSH STATUS` keeps a
    /// base instead of resetting the group's certifier). A base from an
    /// earlier session (larger than now) counts as zero.
    pub fn since(&self, base: &CertStats) -> CertStats {
        CertStats {
            certified: self.certified.saturating_sub(base.certified),
            passed: self.passed.saturating_sub(base.passed),
            conflicts: self.conflicts.saturating_sub(base.conflicts),
            structural_failures: self
                .structural_failures
                .saturating_sub(base.structural_failures),
            deps_distance_sum: self
                .deps_distance_sum
                .saturating_sub(base.deps_distance_sum),
            interval_sum: self.interval_sum.saturating_sub(base.interval_sum),
            interval_count: self.interval_count.saturating_sub(base.interval_count),
            keys_processed: self.keys_processed.saturating_sub(base.keys_processed),
        }
    }

    /// Average `s - ls - 1` (`cert_interval`).
    pub fn avg_cert_interval(&self) -> f64 {
        if self.interval_count == 0 {
            0.0
        } else {
            self.interval_sum as f64 / self.interval_count as f64
        }
    }
}

/// Marker for the zero-level key in [`Probe::key`].
const ZERO_KEY: u32 = u32::MAX;

/// One expanded key of the writeset being certified.
#[derive(Clone, Copy)]
struct Probe {
    hash: u64,
    /// Index slot, or [`NO_SLOT`] if the key is not in the index yet.
    slot: u32,
    /// Position in `CertRequest::keys`, or [`ZERO_KEY`].
    key: u32,
    /// Number of parts of this level.
    level: u32,
    /// Where this level ends in its key's encoding ([`Probe::bytes`]).
    end: u32,
    kind: KeyType,
}

impl Probe {
    /// The index's bytes of this level: a prefix of its key's encoding.
    fn bytes<'k>(&self, keys: &'k [Key]) -> &'k [u8] {
        if self.key == ZERO_KEY {
            &[]
        } else {
            &keys[self.key as usize].encoded()[..self.end as usize]
        }
    }
}

/// Probes the scratch keeps room for between writesets: a writeset of a
/// million keys makes room for millions, which are given back at the next
/// writeset instead of being held for the life of the certifier.
const KEEP_PROBES: usize = 1 << 16;

/// Buffers reused across calls so the hot path does not allocate.
#[derive(Default)]
struct Scratch {
    /// The level ends of the key being expanded, and of the one before.
    ends: Vec<usize>,
    prev_ends: Vec<usize>,
    /// The coarse path's table key last entered.
    prev: Vec<u8>,
    probes: Vec<Probe>,
    listed: Vec<u32>,
    /// (slot, type) pairs to enter, merged to one strongest type per slot.
    entered: Vec<(u32, KeyType)>,
}

impl Scratch {
    /// Expands `keys` into the hierarchy and looks every level up in `index`.
    ///
    /// Duplicates are not merged here: since the table is monotone in the new
    /// type (see `rules`), *checking* a key under a weaker type as well as
    /// under a stronger one gives the same result as the stronger one alone.
    /// *Entering* is different: a weaker duplicate would replace the latest
    /// holder of that type and hide an earlier holder from another node, so
    /// `Certifier::enter` merges duplicates to the strongest type first. Prefix levels equal to the previous key's are skipped, which
    /// removes the bulk of the duplicates (rows of one table) cheaply.
    fn expand(&mut self, keys: &[Key], is_toi: bool, index: &KeyIndex) {
        self.probes.clear();
        if self.probes.capacity() > KEEP_PROBES {
            self.probes.shrink_to(KEEP_PROBES);
            self.entered.clear();
            self.entered.shrink_to(KEEP_PROBES);
        }
        self.prev_ends.clear();
        let mut prev: &[u8] = &[];
        let zero_hash = index.hash(&[]);
        let zero_slot = index.find(zero_hash, &[]);
        self.probes.push(Probe {
            hash: zero_hash,
            slot: zero_slot,
            key: ZERO_KEY,
            level: 0,
            end: 0,
            kind: KeyType::Shared,
        });
        for (i, k) in keys.iter().enumerate() {
            let kind = if is_toi { KeyType::Exclusive } else { k.kind };
            let n = k.nparts();
            if n == 0 {
                // A server-level key of the requested type.
                self.probes.push(Probe {
                    hash: zero_hash,
                    slot: zero_slot,
                    key: ZERO_KEY,
                    level: 0,
                    end: 0,
                    kind,
                });
                continue;
            }
            let encoded = k.encoded();
            k.level_ends(&mut self.ends);
            // Levels 1..l are identical to levels of the previous key.
            let mut l = 1;
            while l < n
                && l < self.prev_ends.len()
                && self.ends[l] == self.prev_ends[l]
                && encoded[self.ends[l - 1]..self.ends[l]] == prev[self.ends[l - 1]..self.ends[l]]
            {
                l += 1;
            }
            for level in l..=n {
                let bytes = &encoded[..self.ends[level]];
                let hash = index.hash(bytes);
                self.probes.push(Probe {
                    hash,
                    slot: index.find(hash, bytes),
                    key: i as u32,
                    level: level as u32,
                    end: self.ends[level] as u32,
                    kind: if level == n { kind } else { KeyType::Shared },
                });
            }
            prev = encoded;
            std::mem::swap(&mut self.ends, &mut self.prev_ends);
        }
    }
}

/// The certification state of one node: key index, writeset map and
/// position. See the module documentation.
pub struct Certifier {
    initial_position: Seqno,
    /// Highest cut purged so far: the index is complete only above it.
    purged_upto: Seqno,
    position: Seqno,
    last_pa_unsafe: Seqno,
    optimistic_pa: bool,
    max_length: u64,
    coarse_after: usize,
    index: KeyIndex,
    /// Table-level references of very big writesets (`coarse.rs`).
    coarse: CoarseRefs,
    map: WritesetMap,
    scratch: Scratch,
    nodes: HashMap<NodeId, u32>,
    last_node: Option<(NodeId, u32)>,
    stats: CertStats,
    /// The seqnos after its last-seen one that the last passed writeset
    /// depends on (`last_related`); `None` when there were more than
    /// [`MAX_RELATED`].
    related: Option<Vec<Seqno>>,
}

/// Dependencies listed per writeset at most (`Certifier::last_related`).
pub const MAX_RELATED: usize = 64;

impl Certifier {
    /// An empty certifier whose index starts after `initial_position` (the
    /// last seqno before the first writeset it will see).
    pub fn new(initial_position: Seqno) -> Certifier {
        Certifier {
            initial_position,
            purged_upto: initial_position,
            position: initial_position,
            last_pa_unsafe: -1,
            optimistic_pa: true,
            max_length: DEFAULT_MAX_LENGTH,
            coarse_after: COARSE_AFTER,
            index: KeyIndex::new(),
            coarse: CoarseRefs::default(),
            map: WritesetMap::default(),
            scratch: Scratch::default(),
            nodes: HashMap::new(),
            last_node: None,
            stats: CertStats::default(),
            related: Some(Vec::new()),
        }
    }

    /// Empties the index and map and restarts after `initial_position` (after
    /// a state transfer or a reconnect). Settings and statistics are kept.
    pub fn reset(&mut self, initial_position: Seqno) {
        self.initial_position = initial_position;
        self.purged_upto = initial_position;
        self.position = initial_position;
        self.last_pa_unsafe = -1;
        self.index.clear();
        self.coarse.clear();
        self.map.clear();
        self.nodes.clear();
        self.last_node = None;
    }

    /// `cert.optimistic_pa` (default on). Off: `depends_on >= last_seen`.
    pub fn set_optimistic_pa(&mut self, on: bool) {
        self.optimistic_pa = on;
    }

    /// `cert.max_length` (default 16384).
    pub fn set_max_length(&mut self, n: u64) {
        self.max_length = n;
    }

    /// [`COARSE_AFTER`] for this certifier (tests use small values).
    pub fn set_coarse_after(&mut self, n: usize) {
        self.coarse_after = n;
    }

    /// Last seqno certified, preloaded or noted.
    pub fn position(&self) -> Seqno {
        self.position
    }

    /// Where the index starts (`ls` below this fails as too old).
    pub fn initial_position(&self) -> Seqno {
        self.initial_position
    }

    /// Keys in the index (`cert_index_size`).
    pub fn index_size(&self) -> usize {
        self.index.len()
    }

    /// Writesets in the map (not yet purged).
    pub fn map_len(&self) -> usize {
        self.map.len()
    }

    /// Lowest seqno in the writeset map.
    pub fn lowest_in_map(&self) -> Option<Seqno> {
        self.map.lowest()
    }

    /// Seqno of the latest passed `PA_UNSAFE` writeset, or -1.
    pub fn last_pa_unsafe(&self) -> Seqno {
        self.last_pa_unsafe
    }

    /// Highest purge cut applied (writesets seen below it fail as too old).
    pub fn purged_upto(&self) -> Seqno {
        self.purged_upto
    }

    /// Restores `last_pa_unsafe` after rebuilding an index from a snapshot
    /// (the writeset that set it may have been purged).
    pub fn restore_last_pa_unsafe(&mut self, seqno: Seqno) {
        self.last_pa_unsafe = self.last_pa_unsafe.max(seqno);
    }

    pub fn stats(&self) -> CertStats {
        self.stats
    }

    pub fn reset_stats(&mut self) {
        self.stats = CertStats::default();
    }

    fn advance(&mut self, seqno: Seqno) -> Result<(), CertError> {
        if seqno <= self.position {
            return Err(CertError::OutOfOrder {
                expected_above: self.position,
                got: seqno,
            });
        }
        self.position = seqno;
        Ok(())
    }

    /// An ordered event without keys (view, …) consumed `seqno`.
    pub fn note_non_writeset(&mut self, seqno: Seqno) -> Result<(), CertError> {
        self.advance(seqno)
    }

    fn node_number(&mut self, id: NodeId) -> u32 {
        if let Some((last, n)) = self.last_node {
            if last == id {
                return n;
            }
        }
        let next = self.nodes.len() as u32 & !TOI_BIT;
        let n = *self.nodes.entry(id).or_insert(next);
        self.last_node = Some((id, n));
        n
    }

    fn structural_check(&self, req: &CertRequest<'_>) -> Option<CertFailure> {
        let (s, ls) = (req.seqno, req.last_seen);
        if ls >= s {
            return Some(CertFailure::InvalidLastSeen {
                seqno: s,
                last_seen: ls,
            });
        }
        let start = self.initial_position.max(self.purged_upto);
        if ls < start {
            return Some(CertFailure::TooOld {
                last_seen: ls,
                initial_position: start,
            });
        }
        if (s as i128 - ls as i128) > self.max_length as i128 {
            return Some(CertFailure::IntervalTooLong {
                seqno: s,
                last_seen: ls,
                max_length: self.max_length,
            });
        }
        None
    }

    /// Certifies the next delivered writeset. Must be called for every
    /// delivered writeset, in strictly increasing seqno order; a seqno at or
    /// below [`Certifier::position`] is refused with
    /// [`CertError::OutOfOrder`] and changes nothing.
    ///
    /// On failure nothing is entered in the index; the writeset still takes
    /// its place in the writeset map.
    pub fn certify(&mut self, req: &CertRequest<'_>) -> Result<CertOutcome, CertError> {
        self.advance(req.seqno)?;
        self.related = None;
        let (s, ls) = (req.seqno, req.last_seen);
        self.stats.certified += 1;
        if let Some(reason) = self.structural_check(req) {
            self.stats.structural_failures += 1;
            self.map.push_dummy(s);
            return Ok(CertOutcome::Fail { reason });
        }
        self.stats.interval_sum += (s as i128 - ls as i128 - 1) as u64;
        self.stats.interval_count += 1;

        let node = self.node_number(req.source);
        let mut related = Some(Vec::new());
        let mut relate = |r: Seqno| {
            if r <= ls {
                return;
            }
            if let Some(list) = related.as_mut() {
                if !list.contains(&r) {
                    if list.len() == MAX_RELATED {
                        related = None;
                    } else {
                        list.push(r);
                    }
                }
            }
        };
        self.scratch.expand(req.keys, req.is_toi, &self.index);
        self.stats.keys_processed += self.scratch.probes.len() as u64;

        // Lower bound (§6.3).
        let mut depends = match self.map.lowest() {
            None => s - 1,
            Some(low) => low.saturating_sub(1),
        };
        if req.implicit_deps || !self.optimistic_pa {
            depends = depends.max(ls);
        }

        if !req.is_toi {
            for p in &self.scratch.probes {
                if !self.coarse.is_empty() && self.coarse.may_hold(p.hash) {
                    for c in self.coarse.refs(p.hash, p.bytes(req.keys)) {
                        let earlier = KeyType::Exclusive;
                        match weigh(relation(earlier, p.kind), c.seqno, c.origin, node, ls) {
                            Weight::None => {}
                            Weight::Depends => {
                                depends = depends.max(c.seqno);
                                relate(c.seqno);
                            }
                            Weight::Conflict => {
                                let failure = (req.keys, p, earlier, c.seqno, s);
                                return Ok(conflict(&mut self.stats, &mut self.map, failure));
                            }
                        }
                    }
                }
                if p.slot == NO_SLOT {
                    continue;
                }
                let e = self.index.entry(p.slot);
                for earlier in KeyType::ALL {
                    let r = e.refs[earlier.index()];
                    if r == NO_REF {
                        continue;
                    }
                    let origin = e.origin[earlier.index()];
                    match weigh(relation(earlier, p.kind), r, origin, node, ls) {
                        Weight::None => {}
                        Weight::Depends => {
                            depends = depends.max(r);
                            relate(r);
                        }
                        Weight::Conflict => {
                            let failure = (req.keys, p, earlier, r, s);
                            return Ok(conflict(&mut self.stats, &mut self.map, failure));
                        }
                    }
                }
            }
        }
        depends = depends.max(self.last_pa_unsafe);
        relate(self.last_pa_unsafe);
        if req.is_toi || req.implicit_deps || !self.optimistic_pa {
            // Ordered after everything before it, not just its keys.
            related = None;
        }
        self.related = related;
        if req.is_toi {
            depends = s - 1;
        }
        // Invariant -1 <= depends_on < s (holds by construction; enforced
        // rather than asserted so that odd inputs can never panic).
        depends = depends.min(s - 1).max(-1);

        let origin = node | if req.is_toi { TOI_BIT } else { 0 };
        self.enter(req.keys, s, origin);
        if req.pa_unsafe {
            self.last_pa_unsafe = s;
        }
        self.stats.passed += 1;
        self.stats.deps_distance_sum += (s as i128 - depends as i128) as u64;
        Ok(CertOutcome::Pass {
            depends_on: depends,
        })
    }

    /// Enters the probes of the current writeset into the index and map.
    ///
    /// A writeset of more than `coarse_after` keys enters its row keys as
    /// table-level references instead (`coarse.rs`).
    fn enter(&mut self, keys: &[Key], s: Seqno, origin: u32) {
        let coarse = keys.len() > self.coarse_after;
        let sc = &mut self.scratch;
        sc.listed.clear();
        sc.entered.clear();
        sc.prev.clear();
        let missing = sc.probes.iter().filter(|p| p.slot == NO_SLOT).count();
        self.index.reserve(if coarse { 0 } else { missing });
        for p in &sc.probes {
            let key = (p.key != ZERO_KEY).then(|| &keys[p.key as usize]);
            let nparts = key.map_or(0, Key::nparts);
            if let Some(key) = key.filter(|_| coarse && nparts >= 3 && p.level as usize == nparts) {
                // The row's table instead, once per run of rows of a table.
                let table = &key.encoded()[..key.level_end(nparts - 1)];
                if table != sc.prev.as_slice() {
                    let hash = self.index.hash(table);
                    self.coarse.insert(hash, table, s, origin);
                    sc.prev.clear();
                    sc.prev.extend_from_slice(table);
                }
                continue;
            }
            let slot = if p.slot != NO_SLOT {
                p.slot
            } else {
                self.index.find_or_insert(p.hash, p.bytes(keys))
            };
            sc.entered.push((slot, p.kind));
        }
        // One reference per key, of the strongest type the writeset holds
        // it under (contract §5.2: duplicates merge to the stronger type).
        sc.entered
            .sort_unstable_by_key(|&(slot, kind)| (slot, std::cmp::Reverse(kind)));
        sc.entered.dedup_by_key(|e| e.0);
        for &(slot, kind) in &sc.entered {
            if self.index.reference(slot, kind, s, origin) {
                sc.listed.push(slot);
            }
        }
        self.map.push(s, sc.listed.iter().copied());
    }

    /// Cert index preload (§6.5): enters a writeset that was already
    /// certified elsewhere, with its known outcome, without checking it
    /// ("already certified: everything passes"). Used by a joiner for the
    /// writesets between the lowest in-flight last seen seqno and its state
    /// transfer position, after [`Certifier::reset`] to the start of that
    /// range. Failed writesets (`passed == false`) only take their seqno.
    pub fn preload(&mut self, req: &CertRequest<'_>, passed: bool) -> Result<(), CertError> {
        self.advance(req.seqno)?;
        if !passed {
            self.map.push_dummy(req.seqno);
            return Ok(());
        }
        let node = self.node_number(req.source);
        self.scratch.expand(req.keys, req.is_toi, &self.index);
        let origin = node | if req.is_toi { TOI_BIT } else { 0 };
        self.enter(req.keys, req.seqno, origin);
        if req.pa_unsafe {
            self.last_pa_unsafe = req.seqno;
        }
        Ok(())
    }

    /// What the last passed writeset depends on beyond its last-seen seqno:
    /// the seqnos of its related keys (a dependency, or a conflict that is
    /// not a real one) and the last PA-unsafe writeset. `depends_on` is
    /// their maximum (or the lower bound); this is the set itself, for a
    /// node that lets a local transaction commit ahead of unrelated earlier
    /// writesets (`lockstep.commit_bypass`). Local information: it changes
    /// no outcome. `None`: more than [`MAX_RELATED`], or a writeset ordered
    /// after everything before it (TOI, implicit dependencies).
    pub fn last_related(&self) -> Option<&[Seqno]> {
        self.related.as_deref()
    }

    /// [`Certifier::last_related`], moved out.
    pub fn take_related(&mut self) -> Option<Vec<Seqno>> {
        self.related.take()
    }

    /// Purges writesets `<= cut` from the map and their references from the
    /// index (commit cut, §6.4). The caller must not cut above the lowest
    /// last seen seqno of any writeset still to be certified; writesets with
    /// `ls >= cut` then certify exactly as without the purge (only the
    /// `depends_on` lower bound may rise to the new lowest seqno − 1).
    ///
    /// A writeset that still arrives with `ls < cut` cannot be checked
    /// against what was purged: it fails as too old, the same way on every
    /// node, instead of passing a conflict it can no longer see.
    pub fn purge_upto(&mut self, cut: Seqno) {
        self.map.purge_upto(cut, &mut self.index);
        self.coarse.purge_upto(cut);
        // Nothing above the last certified seqno was ever indexed.
        self.purged_upto = self.purged_upto.max(cut.min(self.position));
    }
}

impl fmt::Debug for Certifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Certifier")
            .field("initial_position", &self.initial_position)
            .field("position", &self.position)
            .field("last_pa_unsafe", &self.last_pa_unsafe)
            .field("optimistic_pa", &self.optimistic_pa)
            .field("max_length", &self.max_length)
            .field("index_size", &self.index.len())
            .field("map_len", &self.map.len())
            .finish()
    }
}

/// The key (at the clashing level) for a conflict report.
/// What one earlier reference (`r`, tagged `origin`) means for a probe.
enum Weight {
    None,
    Depends,
    Conflict,
}

/// The table cell `rel`, with the §6.2 conditions that make a conflict
/// cell a real conflict (otherwise it is a dependency).
#[inline]
fn weigh(rel: Relation, r: Seqno, origin: u32, node: u32, last_seen: Seqno) -> Weight {
    match rel {
        Relation::None => Weight::None,
        Relation::Dependency => Weight::Depends,
        Relation::Conflict => {
            let toi = origin & TOI_BIT != 0;
            let same_node = origin & !TOI_BIT == node;
            if is_real_conflict(r, toi, same_node, last_seen) {
                Weight::Conflict
            } else {
                Weight::Depends
            }
        }
    }
}

/// A writeset failing on a real conflict of `probe` with `earlier` at
/// `with_seqno`: counted, and its seqno kept in the map as a dummy.
fn conflict(
    stats: &mut CertStats,
    map: &mut WritesetMap,
    (keys, probe, earlier, with_seqno, s): (&[Key], &Probe, KeyType, Seqno, Seqno),
) -> CertOutcome {
    stats.conflicts += 1;
    map.push_dummy(s);
    CertOutcome::Fail {
        reason: CertFailure::Conflict {
            key: conflict_key(keys, probe),
            earlier,
            with_seqno,
        },
    }
}

fn conflict_key(keys: &[Key], p: &Probe) -> Key {
    if p.key == ZERO_KEY {
        Key::new(Vec::<Vec<u8>>::new(), p.kind)
    } else {
        keys[p.key as usize].prefix(p.level as usize, p.kind)
    }
}
