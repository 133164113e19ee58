//! Certification keys (contract §5.2): types, the byte encoding used by the
//! index, and the expansion of a key into its hierarchy.
//!
//! A key `[p1, …, pn]` of type `T` stands for the entries
//! `[p1]`, `[p1, p2]`, …, `[p1, …, pn-1]` as [`KeyType::Shared`] plus the leaf
//! `[p1, …, pn]` as `T`; every writeset also carries the zero-level
//! (server-wide) key `[]` as `Shared`.
//!
//! Inside the index a key of any level is one contiguous byte string: each
//! part is written as its length (LEB128) followed by its bytes. The encoding
//! is injective (two different part lists never share an encoding) and the
//! encoding of a prefix is a prefix of the encoding of the full key, so one
//! encoding pass yields every level of the hierarchy as a sub-slice.

use std::fmt;

/// The four wsrep key types, weakest first (`wsrep_key_type_t` values 0..=3).
///
/// The derived ordering is the strength ordering used when duplicates merge.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub enum KeyType {
    /// `WSREP_KEY_SHARED` (0).
    Shared,
    /// `WSREP_KEY_REFERENCE` (1).
    Reference,
    /// `WSREP_KEY_UPDATE` (2).
    Update,
    /// `WSREP_KEY_EXCLUSIVE` (3).
    Exclusive,
}

impl KeyType {
    /// All types, weakest first; `ALL[t.index()] == t`.
    pub const ALL: [KeyType; 4] = [
        KeyType::Shared,
        KeyType::Reference,
        KeyType::Update,
        KeyType::Exclusive,
    ];

    /// Maps a `wsrep_key_type_t` value; `None` for anything outside 0..=3.
    pub fn from_wsrep(value: i32) -> Option<KeyType> {
        match value {
            0 => Some(KeyType::Shared),
            1 => Some(KeyType::Reference),
            2 => Some(KeyType::Update),
            3 => Some(KeyType::Exclusive),
            _ => None,
        }
    }

    /// The `wsrep_key_type_t` value.
    pub fn to_wsrep(self) -> i32 {
        self as i32
    }

    /// Position in [`KeyType::ALL`] (same as the wsrep value).
    #[inline]
    pub fn index(self) -> usize {
        self as usize
    }

    fn name(self) -> &'static str {
        match self {
            KeyType::Shared => "SHARED",
            KeyType::Reference => "REFERENCE",
            KeyType::Update => "UPDATE",
            KeyType::Exclusive => "EXCLUSIVE",
        }
    }
}

impl fmt::Display for KeyType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One key as appended by the server: 1..=3 parts (the leaf) and its type.
///
/// A key with no parts stands for the server-level key of the given type.
/// More than 3 parts are accepted and expand the same way.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Key {
    /// The parts, outermost first (`[db, table, row id]`).
    pub parts: Vec<Vec<u8>>,
    /// The type of the leaf.
    pub kind: KeyType,
}

impl Key {
    /// Builds a key from anything that yields byte strings.
    pub fn new<I, P>(parts: I, kind: KeyType) -> Key
    where
        I: IntoIterator<Item = P>,
        P: Into<Vec<u8>>,
    {
        Key {
            parts: parts.into_iter().map(Into::into).collect(),
            kind,
        }
    }
}

impl fmt::Display for Key {
    /// `db/table/0x0001` style: printable ASCII parts as text, others in hex;
    /// the server-level key prints as `<server>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.parts.is_empty() {
            f.write_str("<server>")?;
        }
        for (i, part) in self.parts.iter().enumerate() {
            if i > 0 {
                f.write_str("/")?;
            }
            if !part.is_empty() && part.iter().all(|b| b.is_ascii_graphic() && *b != b'/') {
                // All bytes are ASCII, so this cannot fail.
                f.write_str(std::str::from_utf8(part).unwrap_or("?"))?;
            } else {
                f.write_str("0x")?;
                for b in part {
                    write!(f, "{b:02x}")?;
                }
            }
        }
        write!(f, " ({})", self.kind)
    }
}

/// Appends the LEB128 encoding of `n`.
#[inline]
fn push_len(buf: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        buf.push((n as u8) | 0x80);
        n >>= 7;
    }
    buf.push(n as u8);
}

/// Encodes `parts` into `buf` (cleared first) and records in `ends` the end
/// offset of every level: `ends[l]` is the length of the encoding of the
/// first `l` parts (`ends[0] == 0`, the zero-level key).
#[inline]
pub(crate) fn encode_levels(parts: &[Vec<u8>], buf: &mut Vec<u8>, ends: &mut Vec<usize>) {
    buf.clear();
    ends.clear();
    ends.push(0);
    for part in parts {
        push_len(buf, part.len());
        buf.extend_from_slice(part);
        ends.push(buf.len());
    }
}

/// Encodes the first `level` parts of `parts` into `buf` (cleared first).
pub(crate) fn encode_prefix(parts: &[Vec<u8>], level: usize, buf: &mut Vec<u8>) {
    buf.clear();
    for part in &parts[..level.min(parts.len())] {
        push_len(buf, part.len());
        buf.extend_from_slice(part);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wsrep_values_round_trip() {
        for t in KeyType::ALL {
            assert_eq!(KeyType::from_wsrep(t.to_wsrep()), Some(t));
            assert_eq!(KeyType::ALL[t.index()], t);
        }
        assert_eq!(KeyType::from_wsrep(-1), None);
        assert_eq!(KeyType::from_wsrep(4), None);
        assert!(KeyType::Shared < KeyType::Reference);
        assert!(KeyType::Reference < KeyType::Update);
        assert!(KeyType::Update < KeyType::Exclusive);
    }

    #[test]
    fn encoding_is_injective_and_prefix_structured() {
        let mut buf = Vec::new();
        let mut ends = Vec::new();
        let a = vec![b"ab".to_vec(), b"c".to_vec()];
        let b = vec![b"a".to_vec(), b"bc".to_vec()];
        encode_levels(&a, &mut buf, &mut ends);
        let ea = buf.clone();
        assert_eq!(ends, vec![0, 3, 5]);
        encode_levels(&b, &mut buf, &mut ends);
        assert_ne!(ea, buf);
        let mut p = Vec::new();
        encode_prefix(&a, 1, &mut p);
        assert_eq!(&ea[..3], &p[..]);
        encode_prefix(&a, 0, &mut p);
        assert!(p.is_empty());
        // Long parts use multi-byte lengths.
        let long = vec![vec![7u8; 300]];
        encode_levels(&long, &mut buf, &mut ends);
        assert_eq!(&buf[..2], &[0xac, 0x02]);
        assert_eq!(ends, vec![0, 302]);
        // An empty part differs from no part.
        let empty = vec![Vec::new()];
        encode_levels(&empty, &mut buf, &mut ends);
        assert_eq!(buf, vec![0]);
    }

    #[test]
    fn display() {
        let k = Key::new([&b"db"[..], b"t1", &[0, 1]], KeyType::Exclusive);
        assert_eq!(k.to_string(), "db/t1/0x0001 (EXCLUSIVE)");
        let z = Key::new(Vec::<Vec<u8>>::new(), KeyType::Shared);
        assert_eq!(z.to_string(), "<server> (SHARED)");
    }
}
