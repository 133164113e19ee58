//! Table-level references of very big writesets.
//!
//! A writeset of more than [`super::COARSE_AFTER`] keys enters its row keys
//! (three parts or more) here, as one EXCLUSIVE reference per table,
//! instead of one index entry per row: a 1M-row `UPDATE` then adds one
//! entry where it added a million (~150 MB of index, and the allocations
//! of the group's round every later writeset waits for).
//!
//! These references are kept apart from the key index on purpose. The
//! index keeps only the latest writer per key and type, so a later writer
//! of the table would replace a coarse reference and hide the rows behind
//! it; here every reference stays until it is purged, and every later
//! probe of the table is checked against all of them. EXCLUSIVE conflicts
//! with every type, so a later writeset touching any row of the table
//! conflicts with (or depends on) the big one whenever the rows would
//! have made it: coarse entering only adds conflicts (the property test
//! `coarse_entering_only_adds_conflicts`), never misses one. The price is
//! false conflicts for concurrent writes to other rows of that table until
//! the big writeset is purged.

use std::collections::HashMap;

use super::Seqno;

/// One table-level reference.
pub(crate) struct CoarseRef {
    pub key: Box<[u8]>,
    pub seqno: Seqno,
    /// Origin tag, as in the index (node number | `TOI_BIT`).
    pub origin: u32,
}

/// References by the index's hash of the table key. Bounded by the
/// writesets above the purge cut that had more than `COARSE_AFTER` keys,
/// times their tables.
#[derive(Default)]
pub(crate) struct CoarseRefs {
    by_hash: HashMap<u64, Vec<CoarseRef>>,
}

impl CoarseRefs {
    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }

    pub fn clear(&mut self) {
        self.by_hash.clear();
    }

    /// Adds a reference; the same table twice for one seqno is kept once.
    pub fn insert(&mut self, hash: u64, key: &[u8], seqno: Seqno, origin: u32) {
        let refs = self.by_hash.entry(hash).or_default();
        if !refs.iter().any(|r| r.seqno == seqno && *r.key == *key) {
            refs.push(CoarseRef {
                key: key.into(),
                seqno,
                origin,
            });
        }
    }

    /// Whether any reference may be for a key of this hash.
    pub fn may_hold(&self, hash: u64) -> bool {
        self.by_hash.contains_key(&hash)
    }

    /// The references for exactly `key`.
    pub fn refs<'a>(&'a self, hash: u64, key: &'a [u8]) -> impl Iterator<Item = &'a CoarseRef> {
        self.by_hash
            .get(&hash)
            .into_iter()
            .flatten()
            .filter(move |r| *r.key == *key)
    }

    /// Drops references `<= cut` (the commit cut, as for the index).
    pub fn purge_upto(&mut self, cut: Seqno) {
        if self.is_empty() {
            return;
        }
        self.by_hash.retain(|_, refs| {
            refs.retain(|r| r.seqno > cut);
            !refs.is_empty()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_stay_until_purged_and_match_exact_bytes() {
        let mut c = CoarseRefs::default();
        c.insert(7, b"db/t", 10, 1);
        c.insert(7, b"db/t", 10, 1);
        c.insert(7, b"db/u", 11, 2);
        c.insert(7, b"db/t", 12, 2);
        assert!(c.may_hold(7) && !c.may_hold(8));
        let seqnos: Vec<Seqno> = c.refs(7, b"db/t").map(|r| r.seqno).collect();
        assert_eq!(seqnos, vec![10, 12], "no reference replaces another");
        c.purge_upto(11);
        let seqnos: Vec<Seqno> = c.refs(7, b"db/t").map(|r| r.seqno).collect();
        assert_eq!(seqnos, vec![12]);
        c.purge_upto(12);
        assert!(c.is_empty());
    }
}
