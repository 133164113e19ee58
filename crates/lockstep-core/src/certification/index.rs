//! The key index: per key and per type, the latest writer.
//!
//! Entries live in a slab addressed by a `u32` slot; a hash table maps the
//! encoded key bytes to the slot. Lookups compare the full bytes, so a hash
//! collision costs a comparison, never a wrong match. Slots are stable for an
//! entry's lifetime, which lets the writeset map remember which entries each
//! writeset referenced and purge exactly those (see `purge.rs`).
//!
//! A key of up to [`INLINE`] bytes (a database, a table, most row ids
//! under them) is kept in its slab entry: a lookup then compares bytes it
//! already loaded with the entry's hash, instead of following a pointer
//! to a cache miss of its own, and entering a new key allocates nothing.

use std::hash::BuildHasher;

use hashbrown::HashTable;

use super::key::KeyType;
use super::Seqno;

/// "No reference of this type".
pub(crate) const NO_REF: Seqno = Seqno::MIN;
/// "Key not in the index".
pub(crate) const NO_SLOT: u32 = u32::MAX;
/// Bit of an origin tag marking a TOI writer; the rest is the node number.
pub(crate) const TOI_BIT: u32 = 1 << 31;

/// Key bytes kept in the slab entry itself, at most.
pub(crate) const INLINE: usize = 38;

/// A key's bytes: inline when short, else on the heap.
enum KeyBytes {
    Inline(u8, [u8; INLINE]),
    Heap(Box<[u8]>),
}

impl KeyBytes {
    fn new(key: &[u8]) -> KeyBytes {
        if key.len() <= INLINE {
            let mut buf = [0; INLINE];
            buf[..key.len()].copy_from_slice(key);
            KeyBytes::Inline(key.len() as u8, buf)
        } else {
            KeyBytes::Heap(key.into())
        }
    }

    #[inline]
    fn as_slice(&self) -> &[u8] {
        match self {
            KeyBytes::Inline(len, buf) => &buf[..usize::from(*len)],
            KeyBytes::Heap(b) => b,
        }
    }

    /// No bytes, nothing held (a released entry).
    fn empty() -> KeyBytes {
        KeyBytes::Inline(0, [0; INLINE])
    }
}

/// One key of the index.
pub(crate) struct Entry {
    /// Latest writer's seqno per [`KeyType::index`], or [`NO_REF`].
    pub refs: [Seqno; 4],
    /// Origin tag of each reference: interned node number | [`TOI_BIT`].
    pub origin: [u32; 4],
    hash: u64,
    key: KeyBytes,
}

impl Entry {
    fn is_free(&self) -> bool {
        self.refs.iter().all(|&r| r == NO_REF)
    }
}

pub(crate) struct KeyIndex {
    table: HashTable<u32>,
    slab: Vec<Entry>,
    free: Vec<u32>,
    hasher: foldhash::fast::RandomState,
}

impl KeyIndex {
    pub fn new() -> KeyIndex {
        KeyIndex {
            table: HashTable::new(),
            slab: Vec::new(),
            free: Vec::new(),
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    /// Number of keys in the index.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn clear(&mut self) {
        self.table.clear();
        self.slab.clear();
        self.free.clear();
    }

    #[inline]
    pub fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The slot of `key`, or [`NO_SLOT`].
    #[inline]
    pub fn find(&self, hash: u64, key: &[u8]) -> u32 {
        let slab = &self.slab;
        match self.table.find(hash, |&s| {
            slab[s as usize].hash == hash && slab[s as usize].key.as_slice() == key
        }) {
            Some(&s) => s,
            None => NO_SLOT,
        }
    }

    #[inline]
    pub fn entry(&self, slot: u32) -> &Entry {
        &self.slab[slot as usize]
    }

    /// Makes room for `more` new keys at once: a writeset of a million
    /// keys would otherwise grow the table and the slab by doubling, each
    /// time rehashing or moving everything in them.
    pub fn reserve(&mut self, more: usize) {
        let reusable = self.free.len();
        if more > reusable {
            self.slab.reserve(more - reusable);
        }
        let slab = &self.slab;
        self.table.reserve(more, |&s| slab[s as usize].hash);
    }

    /// The slot of `key`, creating an empty entry if it is absent. A created
    /// entry must receive a reference before the next purge.
    pub fn find_or_insert(&mut self, hash: u64, key: &[u8]) -> u32 {
        let found = self.find(hash, key);
        if found != NO_SLOT {
            return found;
        }
        let entry = Entry {
            refs: [NO_REF; 4],
            origin: [0; 4],
            hash,
            key: KeyBytes::new(key),
        };
        let slot = match self.free.pop() {
            Some(s) => {
                self.slab[s as usize] = entry;
                s
            }
            None => {
                self.slab.push(entry);
                (self.slab.len() - 1) as u32
            }
        };
        let slab = &self.slab;
        self.table
            .insert_unique(hash, slot, |&s| slab[s as usize].hash);
        slot
    }

    /// Records `seqno` (tagged `origin`) as the latest `kind` reference of the
    /// entry. Returns `false` if this writeset already referenced the entry
    /// (under any type), so callers list each entry once per writeset.
    #[inline]
    pub fn reference(&mut self, slot: u32, kind: KeyType, seqno: Seqno, origin: u32) -> bool {
        let e = &mut self.slab[slot as usize];
        let first = !e.refs.contains(&seqno);
        e.refs[kind.index()] = seqno;
        e.origin[kind.index()] = origin;
        first
    }

    /// Drops the entry's references `<= cut`; removes the entry when none is
    /// left. Calling it again for an already removed entry does nothing.
    pub fn release_upto(&mut self, slot: u32, cut: Seqno) {
        let e = &mut self.slab[slot as usize];
        if e.is_free() {
            return;
        }
        for r in e.refs.iter_mut() {
            if *r <= cut {
                *r = NO_REF;
            }
        }
        if !e.is_free() {
            return;
        }
        let hash = e.hash;
        e.key = KeyBytes::empty();
        if let Ok(found) = self.table.find_entry(hash, |&s| s == slot) {
            found.remove();
        }
        self.free.push(slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_find_release() {
        let mut ix = KeyIndex::new();
        let k1 = b"\x02db\x01t".to_vec();
        let k2 = b"\x02db".to_vec();
        let h1 = ix.hash(&k1);
        assert_eq!(ix.find(h1, &k1), NO_SLOT);
        let s1 = ix.find_or_insert(h1, &k1);
        assert_eq!(ix.find_or_insert(h1, &k1), s1);
        assert!(ix.reference(s1, KeyType::Exclusive, 5, 0));
        assert!(!ix.reference(s1, KeyType::Shared, 5, 0));
        assert!(ix.reference(s1, KeyType::Shared, 7, 1));
        assert_eq!(ix.entry(s1).refs, [7, NO_REF, NO_REF, 5]);
        let h2 = ix.hash(&k2);
        let s2 = ix.find_or_insert(h2, &k2);
        ix.reference(s2, KeyType::Shared, 6, 0);
        assert_eq!(ix.len(), 2);

        ix.release_upto(s1, 5);
        assert_eq!(ix.entry(s1).refs, [7, NO_REF, NO_REF, NO_REF]);
        assert_eq!(ix.find(h1, &k1), s1);
        ix.release_upto(s1, 7);
        assert_eq!(ix.find(h1, &k1), NO_SLOT);
        assert_eq!(ix.len(), 1);
        // Releasing again is harmless, even with the slot free.
        ix.release_upto(s1, 7);
        assert_eq!(ix.len(), 1);
        // The free slot is reused.
        let s3 = ix.find_or_insert(h1, &k1);
        assert_eq!(s3, s1);
        ix.reference(s3, KeyType::Update, 9, 0);
        assert_eq!(ix.find(h2, &k2), s2);
        assert_eq!(ix.len(), 2);
    }

    /// Keys on either side of the inline size are told apart and found.
    #[test]
    fn short_keys_inline_and_long_ones_on_the_heap_are_found_alike() {
        let mut ix = KeyIndex::new();
        let keys: Vec<Vec<u8>> = [0, 1, INLINE - 1, INLINE, INLINE + 1, 300]
            .iter()
            .map(|&n| vec![7; n])
            .collect();
        let slots: Vec<u32> = keys
            .iter()
            .map(|k| ix.find_or_insert(ix.hash(k), k))
            .collect();
        for (k, &s) in keys.iter().zip(&slots) {
            ix.reference(s, KeyType::Shared, 1, 0);
            assert_eq!(ix.find(ix.hash(k), k), s);
            assert_eq!(ix.entry(s).key.as_slice(), &k[..]);
        }
        assert!(matches!(ix.entry(slots[3]).key, KeyBytes::Inline(..)));
        assert!(matches!(ix.entry(slots[4]).key, KeyBytes::Heap(_)));
        // Under the same hash, bytes that differ in the last inline byte
        // are another key.
        let mut other = keys[3].clone();
        other[INLINE - 1] = 8;
        assert_eq!(ix.find(ix.hash(&keys[3]), &other), NO_SLOT);
        ix.release_upto(slots[5], 1);
        assert_eq!(ix.entry(slots[5]).key.as_slice(), b"");
    }

    /// Even if every key hashed to the same value, lookups stay exact.
    #[test]
    fn colliding_hashes_do_not_merge_keys() {
        let mut ix = KeyIndex::new();
        let keys: Vec<Vec<u8>> = (0u8..50).map(|i| vec![1, i]).collect();
        let slots: Vec<u32> = keys.iter().map(|k| ix.find_or_insert(42, k)).collect();
        for (i, k) in keys.iter().enumerate() {
            ix.reference(slots[i], KeyType::Shared, i as Seqno + 1, 0);
            assert_eq!(ix.find(42, k), slots[i]);
        }
        assert_eq!(ix.len(), 50);
        for (i, &s) in slots.iter().enumerate().step_by(2) {
            ix.release_upto(s, i as Seqno + 1);
        }
        assert_eq!(ix.len(), 25);
        for (i, k) in keys.iter().enumerate() {
            let found = ix.find(42, k);
            if i % 2 == 0 {
                assert_eq!(found, NO_SLOT);
            } else {
                assert_eq!(found, slots[i]);
            }
        }
    }
}
