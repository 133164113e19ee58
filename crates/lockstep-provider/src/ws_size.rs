//! A writeset's size as Galera counts it against `repl.max_ws_size`, so
//! that a limit set for Galera refuses the same transactions here
//! (MariaDB's `galera.MDEV-26597` sets 512 bytes and expects an 8-row
//! INSERT to exceed it).
//!
//! Galera 4 starts every writeset at a fixed count (its header and the
//! headers and checksums of its key, data and unordered record sets:
//! 64 + 3 × 40 bytes), adds 8 bytes per key part it stores under its
//! default key format (FLAT8: an 8-byte hash per part; the database and
//! table parts are stored once per writeset, a key equal to the previous
//! one not at all) and the data as appended. The limit is exceeded when
//! the count is strictly above it. This is what is counted, not the bytes
//! Lockstep sends (its own encoding differs).

use lockstep_core::certification::Key;
use std::collections::HashSet;

/// Galera's count of a writeset with no key and no data.
pub const WS_OVERHEAD: usize = 64 + 3 * 40;

/// Bytes counted per stored key part (FLAT8).
const PART_BYTES: usize = 8;

/// The key parts of one writeset, counted as Galera stores them.
#[derive(Debug, Default)]
pub struct KeyCount {
    /// Every prefix short of a whole key (database, database + table)
    /// seen so far, in the keys' encoding; bounded by the keys appended.
    branches: HashSet<Box<[u8]>>,
    /// The last key appended, encoded (empty: none, since a key with a
    /// part never encodes empty): an equal one costs nothing. Overwritten
    /// in place, so appending keys allocates nothing after the first.
    previous: Vec<u8>,
    /// Bytes counted for the keys so far.
    pub bytes: usize,
}

impl KeyCount {
    /// Adds a key; returns what it added to the count.
    pub fn add(&mut self, key: &Key) -> usize {
        let encoded = key.encoded();
        if key.nparts() == 0 || self.previous == encoded {
            return 0;
        }
        let mut added = PART_BYTES; // the leaf
                                    // Every level short of the whole key, a prefix of its encoding;
                                    // looked up by slice first: known prefixes are not copied.
        for prefix in key.levels().take(key.nparts() - 1) {
            if !self.branches.contains(prefix) {
                self.branches.insert(prefix.into());
                added += PART_BYTES;
            }
        }
        self.previous.clear();
        self.previous.extend_from_slice(encoded);
        self.bytes += added;
        added
    }
}

/// Galera's count of a writeset of `keys` and `data_len` bytes of data.
pub fn counted(keys: &KeyCount, data_len: usize) -> usize {
    WS_OVERHEAD + keys.bytes + data_len
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstep_core::certification::KeyType;

    fn key(db: &str, table: &str, row: &[u8]) -> Key {
        Key::new([db.as_bytes(), table.as_bytes(), row], KeyType::Exclusive)
    }

    #[test]
    fn database_and_table_are_counted_once_and_each_row_once() {
        let mut k = KeyCount::default();
        assert_eq!(k.add(&key("test", "t3", &[1, 0, 0, 0])), 24);
        for row in 2..=8u8 {
            assert_eq!(k.add(&key("test", "t3", &[row, 0, 0, 0])), 8);
        }
        assert_eq!(
            k.add(&key("test", "t3", &[8, 0, 0, 0])),
            0,
            "same as the previous"
        );
        assert_eq!(k.add(&key("test", "t4", &[1, 0, 0, 0])), 16, "a new table");
        assert_eq!(
            k.add(&Key::new(["test", "t4"], KeyType::Shared)),
            8,
            "a table-level key"
        );
        assert_eq!(k.bytes, 24 + 7 * 8 + 16 + 8);
    }

    #[test]
    fn mdev_26597s_eight_rows_exceed_512_bytes_as_with_galera() {
        // 8 rows into test.t3: Galera counts 184 + 80 + the row events.
        let mut k = KeyCount::default();
        for row in 1..=8u8 {
            k.add(&key("test", "t3", &[row, 0, 0, 0]));
        }
        assert_eq!(counted(&k, 0), 264);
        assert!(counted(&k, 249) > 512);
        assert!(counted(&k, 248) <= 512, "equal to the limit passes");
    }
}
