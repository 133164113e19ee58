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
///
/// The parts are kept in the index's encoding (module doc), in one
/// allocation however many parts there are: a writeset of a million keys
/// was four million allocations on every node when each part had its own,
/// and certification reads every level of the key as a prefix of it
/// without encoding it again.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Key {
    /// The parts, outermost first (`[db, table, row id]`), each as its
    /// LEB128 length then its bytes. Built only here, so always well-formed.
    encoded: Box<[u8]>,
    /// How many parts `encoded` holds.
    nparts: u32,
    /// The type of the leaf.
    pub kind: KeyType,
}

impl Key {
    /// Builds a key from anything that yields byte strings.
    pub fn new<I, P>(parts: I, kind: KeyType) -> Key
    where
        I: IntoIterator<Item = P>,
        P: AsRef<[u8]>,
    {
        let parts: Vec<P> = parts.into_iter().collect();
        Key::from_slices(parts.iter().map(AsRef::as_ref), kind)
    }

    /// Builds a key from its parts in one allocation of the exact size
    /// (the iterator is walked twice).
    pub fn from_slices<'a, I>(parts: I, kind: KeyType) -> Key
    where
        I: Iterator<Item = &'a [u8]> + Clone,
    {
        let size = parts.clone().map(|p| len_bytes(p.len()) + p.len()).sum();
        let mut encoded = Vec::with_capacity(size);
        let mut nparts = 0u32;
        for part in parts {
            push_len(&mut encoded, part.len());
            encoded.extend_from_slice(part);
            nparts += 1;
        }
        Key {
            encoded: encoded.into_boxed_slice(),
            nparts,
            kind,
        }
    }

    /// The parts, outermost first.
    pub fn parts(&self) -> Parts<'_> {
        Parts {
            rest: &self.encoded,
            left: self.nparts,
        }
    }

    /// How many parts the key has (0: the server-level key).
    pub fn nparts(&self) -> usize {
        self.nparts as usize
    }

    /// The bytes of its parts, without their lengths.
    pub fn part_bytes(&self) -> usize {
        self.parts().map(<[u8]>::len).sum()
    }

    /// The key of the first `level` parts (all of them if `level` is
    /// larger), of type `kind`.
    pub fn prefix(&self, level: usize, kind: KeyType) -> Key {
        let level = level.min(self.nparts());
        Key {
            encoded: self.encoded[..self.level_end(level)].into(),
            nparts: level as u32,
            kind,
        }
    }

    /// The parts as owned byte strings.
    pub fn to_parts(&self) -> Vec<Vec<u8>> {
        self.parts().map(<[u8]>::to_vec).collect()
    }

    /// The index's encoding of the whole key: every level is a prefix.
    pub fn encoded(&self) -> &[u8] {
        &self.encoded
    }

    /// The encodings of levels 1 to [`Key::nparts`], in order: each the
    /// prefix of [`Key::encoded`] that holds the first `l` parts.
    pub fn levels(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let mut parts = self.parts();
        std::iter::from_fn(move || {
            parts.next()?;
            Some(&self.encoded[..self.encoded.len() - parts.rest.len()])
        })
    }

    /// Where the encoding of the first `level` parts ends in
    /// [`Key::encoded`] (`level` at most [`Key::nparts`]).
    pub fn level_end(&self, level: usize) -> usize {
        match level.checked_sub(1) {
            None => 0,
            Some(l) => self.levels().nth(l).map_or(self.encoded.len(), <[u8]>::len),
        }
    }

    /// Every level's end in [`Key::encoded`] into `ends` (cleared first):
    /// `ends[l]` ends the first `l` parts, `ends[0] == 0`.
    pub fn level_ends(&self, ends: &mut Vec<usize>) {
        ends.clear();
        ends.push(0);
        ends.extend(self.levels().map(<[u8]>::len));
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Key")
            .field("parts", &self.parts().collect::<Vec<_>>())
            .field("kind", &self.kind)
            .finish()
    }
}

impl fmt::Display for Key {
    /// `db/table/0x0001` style: printable ASCII parts as text, others in hex;
    /// the server-level key prints as `<server>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nparts == 0 {
            f.write_str("<server>")?;
        }
        for (i, part) in self.parts().enumerate() {
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

/// A key's parts, outermost first ([`Key::parts`]).
#[derive(Clone)]
pub struct Parts<'a> {
    rest: &'a [u8],
    left: u32,
}

impl<'a> Iterator for Parts<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        // `Key` wrote the encoding itself; a malformed one (impossible)
        // ends the parts rather than panics.
        let (len, at) = read_len(self.rest)?;
        let part = self.rest.get(at..at.checked_add(len)?)?;
        self.rest = &self.rest[at + len..];
        self.left -= 1;
        Some(part)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

impl ExactSizeIterator for Parts<'_> {}

/// Appends the LEB128 encoding of `n`.
#[inline]
fn push_len(buf: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        buf.push((n as u8) | 0x80);
        n >>= 7;
    }
    buf.push(n as u8);
}

/// The bytes [`push_len`] writes for `n`.
#[inline]
fn len_bytes(mut n: usize) -> usize {
    let mut bytes = 1;
    while n >= 0x80 {
        n >>= 7;
        bytes += 1;
    }
    bytes
}

/// Reads a LEB128 length: the length and the bytes it took.
#[inline]
fn read_len(bytes: &[u8]) -> Option<(usize, usize)> {
    let mut n = 0usize;
    for (i, &b) in bytes.iter().enumerate().take(10) {
        n |= usize::from(b & 0x7f).checked_shl(7 * i as u32)?;
        if b & 0x80 == 0 {
            return Some((n, i + 1));
        }
    }
    None
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
        let a = Key::new([&b"ab"[..], b"c"], KeyType::Shared);
        let b = Key::new([&b"a"[..], b"bc"], KeyType::Shared);
        let mut ends = Vec::new();
        a.level_ends(&mut ends);
        assert_eq!(ends, vec![0, 3, 5]);
        assert_ne!(a.encoded(), b.encoded());
        assert_ne!(a, b);
        assert_eq!(a.prefix(1, KeyType::Shared).encoded(), &a.encoded()[..3]);
        assert_eq!(a.level_end(1), 3);
        assert_eq!(a.level_end(0), 0);
        let levels: Vec<&[u8]> = a.levels().collect();
        assert_eq!(levels, vec![&a.encoded()[..3], a.encoded()]);
        assert!(a.prefix(0, KeyType::Shared).encoded().is_empty());
        assert_eq!(a.prefix(9, KeyType::Shared), a, "at most every part");
        // Long parts use multi-byte lengths.
        let long = Key::new([vec![7u8; 300]], KeyType::Shared);
        assert_eq!(&long.encoded()[..2], &[0xac, 0x02]);
        long.level_ends(&mut ends);
        assert_eq!(ends, vec![0, 302]);
        // An empty part differs from no part.
        let empty = Key::new([Vec::new()], KeyType::Shared);
        assert_eq!(empty.encoded(), &[0]);
        assert_ne!(empty, Key::new(Vec::<Vec<u8>>::new(), KeyType::Shared));
    }

    #[test]
    fn parts_come_back_as_they_went_in() {
        let parts = vec![b"db".to_vec(), Vec::new(), vec![0xff; 200], vec![1; 70_000]];
        let k = Key::new(parts.clone(), KeyType::Update);
        assert_eq!(k.nparts(), 4);
        assert_eq!(k.parts().len(), 4);
        assert_eq!(k.to_parts(), parts);
        assert_eq!(k.part_bytes(), 2 + 200 + 70_000);
        assert_eq!(k.prefix(2, KeyType::Shared).to_parts(), parts[..2].to_vec());
        assert_eq!(
            Key::from_slices(parts.iter().map(Vec::as_slice), KeyType::Update),
            k
        );
        for n in [0, 1, 127, 128, 16_383, 16_384, usize::from(u16::MAX) << 8] {
            let mut buf = Vec::new();
            push_len(&mut buf, n);
            assert_eq!(buf.len(), len_bytes(n));
            assert_eq!(read_len(&buf), Some((n, buf.len())));
        }
        assert_eq!(read_len(&[0x80]), None, "an unfinished length");
        assert!(format!("{k:?}").contains("parts"));
    }

    #[test]
    fn display() {
        let k = Key::new([&b"db"[..], b"t1", &[0, 1]], KeyType::Exclusive);
        assert_eq!(k.to_string(), "db/t1/0x0001 (EXCLUSIVE)");
        let z = Key::new(Vec::<Vec<u8>>::new(), KeyType::Shared);
        assert_eq!(z.to_string(), "<server> (SHARED)");
    }
}
