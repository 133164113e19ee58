//! One fragmented action being received (ADR 0009).
//!
//! Parts are kept as they were ordered, shared with the log entries that
//! carried them ([`Bytes`]): the writeset's data is handed on as those
//! parts ([`Payload`]), never joined in the driver's round. Joining them
//! here (one fresh 300 MB buffer for a 1M-row writeset, on every node) was
//! half of the rounds' time while such a writeset streamed, most of it
//! page faults, in the rounds every small writeset ordered meanwhile waits
//! for. Only the header and keys, which certification needs, are decoded
//! as the parts arrive. A part that comes ahead of its turn (a re-proposed
//! earlier part was ordered later) waits aside until the parts before it
//! are there.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::action::{check_version, read_key, read_writeset_fields, Action, Writeset, T_WRITESET};
use super::payload::Payload;
use crate::wire::codec::{DecodeError, Reader};

/// A fragmented writeset's header and keys, decoded while its parts
/// arrive (they come first in its encoding), and where its data lies. A
/// cache of what the joined bytes say: rebuilt the same way from a
/// snapshot's parts, and when it cannot be used the whole is decoded at
/// the end.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct KeysAhead {
    /// Header fields (keys gathered into it), once its bytes are there.
    head: Option<Writeset>,
    /// Keys the header announces.
    count: usize,
    /// The received bytes from `at` on, not decoded yet: what is left of
    /// a part when a key (or the header) goes on in the next one. Only the
    /// header and keys pass through here, never the data.
    carry: Vec<u8>,
    /// Offset in the action of `carry`'s first byte.
    at: usize,
    /// Offset and length of the data, once its length prefix is read.
    data: Option<(usize, usize)>,
    /// Not a writeset, or malformed: decode it all at the end.
    off: bool,
}

impl KeysAhead {
    /// Takes the next in-order part: decodes the header, as many whole
    /// keys as there are, then the data's length.
    fn feed(&mut self, part: &[u8]) {
        if self.off || self.data.is_some() {
            return;
        }
        let mut carry = std::mem::take(&mut self.carry);
        carry.extend_from_slice(part);
        let mut r = Reader::new(&carry);
        let outcome = self.decode(&mut r, carry.len());
        let used = carry.len() - r.remaining();
        match outcome {
            Ok(()) | Err(DecodeError::Truncated { .. }) => {
                carry.drain(..used);
                self.at += used;
            }
            Err(_) => self.off = true,
        }
        if self.data.is_none() && !self.off {
            self.carry = carry;
        }
    }

    /// Decodes what `r` holds (the `carry` of `len` bytes); stops cleanly
    /// (`Truncated`) at the first item cut short, having consumed only
    /// whole items.
    fn decode(&mut self, r: &mut Reader<'_>, len: usize) -> Result<(), DecodeError> {
        if self.head.is_none() {
            let mut h = r.clone();
            check_version(&mut h)?;
            if h.u8("action.tag")? != T_WRITESET {
                return Err(DecodeError::Invalid {
                    field: "action.tag",
                    value: 0,
                });
            }
            let ws = read_writeset_fields(&mut h)?;
            self.count = h.u32("ws.keys")? as usize;
            self.head = Some(ws);
            *r = h;
        }
        let Some(ws) = self.head.as_mut() else {
            return Ok(());
        };
        while ws.keys.len() < self.count {
            let mut k = r.clone();
            ws.keys.push(read_key(&mut k)?);
            *r = k;
        }
        let mut d = r.clone();
        let data_len = d.u32("ws.data")? as usize;
        *r = d;
        self.data = Some((self.at + len - r.remaining(), data_len));
        Ok(())
    }
}

/// The parts of one fragmented action received so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partial {
    count: u32,
    /// Parts `0..parts.len()`, in order.
    parts: Vec<Bytes>,
    /// Parts received before all those below them.
    ahead: BTreeMap<u32, Bytes>,
    bytes: usize,
    keys: KeysAhead,
}

impl Partial {
    pub fn new(count: u32) -> Partial {
        Partial {
            count,
            parts: Vec::new(),
            ahead: BTreeMap::new(),
            bytes: 0,
            keys: KeysAhead::default(),
        }
    }

    /// Parts the action was cut into.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Bytes received so far.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Adds part `index` (`< count`); a part already received is ignored.
    pub fn insert(&mut self, index: u32, part: Bytes) {
        let next = self.parts.len() as u32;
        if index < next || self.ahead.contains_key(&index) || index >= self.count {
            return;
        }
        self.bytes += part.len();
        if index > next {
            self.ahead.insert(index, part);
            return;
        }
        self.append(part);
        while let Some(part) = self.ahead.remove(&(self.parts.len() as u32)) {
            self.append(part);
        }
    }

    fn append(&mut self, part: Bytes) {
        self.keys.feed(&part);
        self.parts.push(part);
    }

    /// The whole action, once complete: a writeset from the keys decoded
    /// ahead and its data as slices of the parts; anything else (or a
    /// writeset the decoding ahead gave up on) joined and decoded whole
    /// (`decode_action_owned`).
    pub fn into_action(self) -> Option<Result<Action, DecodeError>> {
        if !self.is_complete() {
            return None;
        }
        let k = self.keys;
        let ws = match (k.head, k.data) {
            (Some(ws), Some(data)) if !k.off && ws.keys.len() == k.count => Some((ws, data)),
            _ => None,
        };
        let Some((ws, (data_at, len))) = ws else {
            return Some(super::action::decode_action_owned(join(&self.parts)));
        };
        if data_at + len != self.bytes {
            // Short or trailing bytes: the error decoding the whole gives.
            return Some(super::action::decode_action_owned(join(&self.parts)));
        }
        Some(Ok(Action::Writeset(Writeset {
            data: slice(&self.parts, data_at, len),
            ..ws
        })))
    }

    pub fn is_complete(&self) -> bool {
        self.parts.len() == self.count as usize
    }

    /// The whole action's bytes, once complete (`None` before).
    #[cfg(test)]
    pub fn into_bytes(self) -> Option<Vec<u8>> {
        self.is_complete().then(|| join(&self.parts))
    }

    /// The parts received, by index (for snapshots).
    pub fn parts(&self) -> impl Iterator<Item = (u32, &[u8])> + '_ {
        let in_order = self
            .parts
            .iter()
            .enumerate()
            .map(|(i, p)| (i as u32, &p[..]));
        in_order.chain(self.ahead.iter().map(|(&i, p)| (i, &p[..])))
    }

    /// Number of parts received.
    pub fn received(&self) -> usize {
        self.parts.len() + self.ahead.len()
    }
}

fn join(parts: &[Bytes]) -> Vec<u8> {
    let mut v = Vec::with_capacity(parts.iter().map(Bytes::len).sum());
    for p in parts {
        v.extend_from_slice(p);
    }
    v
}

/// Bytes `at..at + len` of the parts joined, as slices of them.
fn slice(parts: &[Bytes], at: usize, len: usize) -> Payload {
    let (mut from, to) = (at, at + len);
    let mut start = 0;
    let mut chunks = Vec::new();
    for p in parts {
        let end = start + p.len();
        if end > from && start < to {
            chunks.push(p.slice(from - start..to.min(end) - start));
            from = to.min(end);
        }
        start = end;
    }
    Payload::from_chunks(chunks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn b(v: &[u8]) -> Bytes {
        Bytes::copy_from_slice(v)
    }

    #[test]
    fn a_writesets_data_is_slices_of_its_parts() {
        let bytes = super::super::action::encode_action(&sample_writeset(40, 5000));
        let mut p = Partial::new(bytes.chunks(700).count() as u32);
        for (i, part) in bytes.chunks(700).enumerate() {
            p.insert(i as u32, b(part));
        }
        assert!(p.keys.carry.is_empty(), "the data is not carried");
        let Some(Ok(Action::Writeset(ws))) = p.into_action() else {
            panic!("a writeset");
        };
        assert_eq!(
            Some(Action::Writeset(ws.clone())),
            Some(sample_writeset(40, 5000))
        );
        assert!(ws.data.chunk_count() >= 5000 / 700, "{:?}", ws.data);
    }

    proptest! {
        #[test]
        fn any_arrival_order_gives_the_parts_in_order(
            sizes in proptest::collection::vec(0usize..50, 1..12),
            order in proptest::collection::vec(0usize..12, 0..40),
        ) {
            let parts: Vec<Vec<u8>> = sizes
                .iter()
                .enumerate()
                .map(|(i, &n)| vec![i as u8; n])
                .collect();
            let count = parts.len() as u32;
            let mut p = Partial::new(count);
            // Some parts in a made-up order (with repeats), then all.
            for i in order.iter().map(|i| i % parts.len()).chain(0..parts.len()) {
                p.insert(i as u32, b(&parts[i]));
                let listed: Vec<(u32, Vec<u8>)> =
                    p.parts().map(|(i, b)| (i, b.to_vec())).collect();
                prop_assert_eq!(listed.len(), p.received());
                prop_assert_eq!(
                    p.bytes(),
                    listed.iter().map(|(_, b)| b.len()).sum::<usize>()
                );
            }
            prop_assert!(p.is_complete());
            prop_assert_eq!(p.into_bytes(), Some(parts.concat()));
        }
    }

    fn sample_writeset(keys: usize, data: usize) -> Action {
        use crate::certification::{Key, KeyType};
        Action::Writeset(Writeset {
            source: [5; 16],
            trx_id: 1,
            conn_id: 2,
            last_seen: 3,
            flags: 4,
            keys: (0..keys)
                .map(|i| Key::new([b"db".to_vec(), vec![i as u8; i % 5]], KeyType::Update))
                .collect(),
            data: (0..data).map(|i| (i * 7) as u8).collect::<Vec<u8>>().into(),
        })
    }

    proptest! {
        /// Whatever the cut and the arrival order, keys decoded ahead give
        /// what decoding the whole gives: the writeset, or the same error
        /// for bytes that are not one (truncated, flipped, another action).
        #[test]
        fn decoding_ahead_gives_what_decoding_the_whole_gives(
            keys in 0usize..30,
            data in 0usize..400,
            step in 1usize..300,
            flip in proptest::option::of((0usize..2000, 1u8..255)),
            cut in proptest::option::of(0usize..2000),
            rev in proptest::bool::ANY,
        ) {
            let mut bytes = super::super::action::encode_action(&sample_writeset(keys, data));
            if let Some((at, x)) = flip {
                let n = bytes.len();
                bytes[at % n] ^= x;
            }
            if let Some(c) = cut {
                bytes.truncate(c % (bytes.len() + 1));
            }
            let parts: Vec<Vec<u8>> = if bytes.is_empty() {
                vec![Vec::new()]
            } else {
                bytes.chunks(step).map(<[u8]>::to_vec).collect()
            };
            let mut p = Partial::new(parts.len() as u32);
            let order: Vec<usize> = if rev {
                (0..parts.len()).rev().collect()
            } else {
                (0..parts.len()).collect()
            };
            for i in order {
                p.insert(i as u32, b(&parts[i]));
            }
            let want = super::super::action::decode_action_owned(bytes);
            prop_assert_eq!(p.into_action(), Some(want));
        }
    }

    #[test]
    fn another_action_is_decoded_whole() {
        let a = Action::Committed {
            raft_id: 1,
            seqno: 2,
            applied: 3,
        };
        let bytes = super::super::action::encode_action(&a);
        let mut p = Partial::new(2);
        p.insert(0, b(&bytes[..3]));
        assert_eq!(p.clone().into_action(), None, "incomplete");
        p.insert(1, b(&bytes[3..]));
        assert_eq!(p.into_action(), Some(Ok(a)));
    }

    #[test]
    fn incomplete_actions_give_no_bytes() {
        let mut p = Partial::new(3);
        p.insert(1, b(&[1; 100]));
        p.insert(0, b(&[0; 100]));
        assert_eq!(p.received(), 2);
        p.insert(7, b(&[7; 10]));
        assert_eq!(p.received(), 2, "an index beyond the count is ignored");
        assert_eq!(p.into_bytes(), None);
    }
}
