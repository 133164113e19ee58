//! A writeset's data: one buffer, or the parts of a reassembled big
//! writeset, shared with the log entries that ordered them.
//!
//! A 300 MB writeset arrives as about 1 200 log entries of 256 KiB. Joining
//! them into one buffer in the driver's round cost every node a copy of
//! the whole and the page faults of a fresh 300 MB allocation, in the
//! rounds every small writeset waits for (about half of the rounds' time
//! while the writeset streamed, by `perf`). The parts stay where the log
//! put them; whoever needs the bytes in one piece (the applier handing
//! them to the server) joins them on its own thread, and the origin,
//! which applies nothing, never does.

use std::borrow::Cow;
use std::fmt;

use bytes::Bytes;

/// Bytes in one or more shared chunks. Equal when the bytes are equal,
/// however they are cut.
#[derive(Clone, Default)]
pub struct Payload {
    chunks: Vec<Bytes>,
    len: usize,
}

impl Payload {
    /// The chunks in order; empty ones are left out.
    pub fn from_chunks(chunks: impl IntoIterator<Item = Bytes>) -> Payload {
        let chunks: Vec<Bytes> = chunks.into_iter().filter(|c| !c.is_empty()).collect();
        let len = chunks.iter().map(Bytes::len).sum();
        Payload { chunks, len }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The chunks, in order.
    pub fn chunks(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.chunks.iter().map(|c| &c[..])
    }

    /// The bytes in one piece: borrowed when they are in one chunk, else
    /// joined here (a copy of the whole: call it outside the driver's round).
    pub fn contiguous(&self) -> Cow<'_, [u8]> {
        match self.chunks.as_slice() {
            [] => Cow::Borrowed(&[]),
            [one] => Cow::Borrowed(&one[..]),
            _ => {
                let mut v = Vec::with_capacity(self.len);
                self.append_to(&mut v);
                Cow::Owned(v)
            }
        }
    }

    /// Appends the bytes to `v` (for a caller that prepares the buffer).
    pub fn append_to(&self, v: &mut Vec<u8>) {
        for c in &self.chunks {
            v.extend_from_slice(c);
        }
    }

    /// The chunks themselves, to slice without copying.
    pub fn shared_chunks(&self) -> &[Bytes] {
        &self.chunks
    }

    /// How many chunks hold the bytes.
    pub fn chunk_count(&self) -> usize {
        self.chunks.len()
    }
}

impl From<Vec<u8>> for Payload {
    fn from(v: Vec<u8>) -> Payload {
        Payload::from_chunks([Bytes::from(v)])
    }
}

impl From<&[u8]> for Payload {
    fn from(v: &[u8]) -> Payload {
        Payload::from_chunks([Bytes::copy_from_slice(v)])
    }
}

impl FromIterator<u8> for Payload {
    fn from_iter<I: IntoIterator<Item = u8>>(iter: I) -> Payload {
        Payload::from(iter.into_iter().collect::<Vec<u8>>())
    }
}

impl PartialEq for Payload {
    fn eq(&self, other: &Payload) -> bool {
        if self.len != other.len {
            return false;
        }
        // Walk both chunk lists side by side, comparing the overlap.
        let (mut a, mut b) = (self.chunks(), other.chunks());
        let (mut x, mut y): (&[u8], &[u8]) = (&[], &[]);
        loop {
            if x.is_empty() {
                match a.next() {
                    Some(c) => x = c,
                    None => return y.is_empty() && b.next().is_none(),
                }
            }
            if y.is_empty() {
                match b.next() {
                    Some(c) => y = c,
                    None => return false,
                }
            }
            let n = x.len().min(y.len());
            if x[..n] != y[..n] {
                return false;
            }
            x = &x[n..];
            y = &y[n..];
        }
    }
}

impl Eq for Payload {}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 32;
        let head: Vec<u8> = self.chunks().flatten().take(SHOWN).copied().collect();
        write!(
            f,
            "Payload({} bytes in {} chunks: {head:?}",
            self.len,
            self.chunks.len()
        )?;
        if self.len > SHOWN {
            write!(f, "…")?;
        }
        write!(f, ")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cut(bytes: &[u8], at: &[usize]) -> Payload {
        let mut cuts: Vec<usize> = at.iter().map(|a| a % (bytes.len() + 1)).collect();
        cuts.sort_unstable();
        let mut from = 0;
        let mut chunks = Vec::new();
        for c in cuts.into_iter().chain([bytes.len()]) {
            chunks.push(Bytes::copy_from_slice(&bytes[from..c]));
            from = c;
        }
        Payload::from_chunks(chunks)
    }

    proptest! {
        #[test]
        fn equal_bytes_are_equal_however_cut(
            bytes in proptest::collection::vec(0u8..3, 0..40),
            other in proptest::collection::vec(0u8..3, 0..40),
            at_a in proptest::collection::vec(0usize..50, 0..6),
            at_b in proptest::collection::vec(0usize..50, 0..6),
        ) {
            let a = cut(&bytes, &at_a);
            prop_assert_eq!(a.len(), bytes.len());
            prop_assert_eq!(&a.contiguous()[..], &bytes[..]);
            prop_assert_eq!(&a, &Payload::from(bytes.clone()));
            prop_assert_eq!(&a, &cut(&bytes, &at_b));
            prop_assert_eq!(a == cut(&other, &at_b), bytes == other);
        }
    }

    #[test]
    fn one_chunk_is_lent_not_copied() {
        let p = Payload::from(vec![1, 2, 3]);
        assert!(matches!(p.contiguous(), Cow::Borrowed(b) if b == [1, 2, 3]));
        let q = Payload::from_chunks([
            Bytes::from_static(b"ab"),
            Bytes::new(),
            Bytes::from_static(b"c"),
        ]);
        assert_eq!(q.chunk_count(), 2, "empty chunks are left out");
        assert!(matches!(q.contiguous(), Cow::Owned(ref b) if b == b"abc"));
        assert!(format!("{q:?}").starts_with("Payload(3 bytes in 2 chunks"));
    }
}
