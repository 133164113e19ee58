//! One fragmented action being received (ADR 0009).
//!
//! Parts are appended to one buffer as they are ordered, so that the log
//! position of the last part does not have to copy the whole action
//! together: for a 300 MB writeset that copy (and the page faults of a
//! fresh 300 MB allocation) was a good part of the group thread's longest
//! round, the one every small writeset ordered after it waits for. A part
//! that comes ahead of its turn (a re-proposed earlier part was ordered
//! later) waits aside until the parts before it are there.

use std::collections::BTreeMap;

use super::action::{check_version, read_key, read_writeset_fields, Action, Writeset, T_WRITESET};
use crate::wire::codec::{DecodeError, Reader};

/// A fragmented writeset's header and keys, decoded while its parts
/// arrive (they come first in its encoding), so the round of its last
/// part only decodes the data length and takes the data in place. A cache
/// of what the joined bytes say: rebuilt the same way from a snapshot's
/// parts, and when it cannot be used the whole is decoded at the end.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct KeysAhead {
    /// Header fields (keys gathered into it), once its bytes are there.
    head: Option<Writeset>,
    /// Keys the header announces.
    count: usize,
    /// Where the next undecoded byte of `joined` is.
    at: usize,
    /// Not a writeset, or malformed: decode it all at the end.
    off: bool,
}

/// What a partial action reserves at most ahead of the bytes it has.
const RESERVE_AHEAD: usize = 64 << 20;

/// The parts of one fragmented action received so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partial {
    count: u32,
    /// Parts `0..lens.len()` concatenated.
    joined: Vec<u8>,
    /// Length of each part in `joined` (a snapshot lists them as they came).
    lens: Vec<usize>,
    /// Parts received before all those below them.
    ahead: BTreeMap<u32, Vec<u8>>,
    bytes: usize,
    keys: KeysAhead,
}

impl Partial {
    pub fn new(count: u32) -> Partial {
        Partial {
            count,
            joined: Vec::new(),
            lens: Vec::new(),
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
    /// `room`: how many more bytes this action may still grow by, which
    /// caps what is reserved ahead.
    pub fn insert(&mut self, index: u32, part: Vec<u8>, room: usize) {
        let next = self.lens.len() as u32;
        if index < next || self.ahead.contains_key(&index) || index >= self.count {
            return;
        }
        self.bytes += part.len();
        if index > next {
            self.ahead.insert(index, part);
            return;
        }
        // Parts after the first are all of the size this one has, but for
        // the last: reserve for them at once instead of doubling the
        // buffer (and copying it) as it grows.
        // The count is the sender's word, though: ahead of what arrived,
        // reserve at most 64 MiB or 8 times what arrived, so a made-up
        // count (found by the fuzzer: 2^32 parts of a few bytes) cannot
        // make this node allocate gigabytes it never receives.
        let rest = (self.count - index) as usize;
        let arrived = self.joined.len() + part.len();
        let ahead = RESERVE_AHEAD.max(arrived.saturating_mul(8));
        let want = part.len().saturating_mul(rest).min(room).min(ahead);
        // Only when this part does not fit: growing then by all that is
        // wanted keeps the copies few (64 MiB once for a 257 MB action).
        if self.joined.capacity() - self.joined.len() < part.len() {
            self.joined.reserve_exact(want.max(part.len()));
        }
        self.append(part);
        while let Some(part) = self.ahead.remove(&(self.lens.len() as u32)) {
            self.append(part);
        }
        self.decode_ahead();
    }

    /// Decodes the header and as many whole keys as `joined` holds.
    fn decode_ahead(&mut self) {
        let k = &mut self.keys;
        if k.off {
            return;
        }
        if k.head.is_none() {
            let mut r = Reader::new(&self.joined);
            let head = (|| {
                check_version(&mut r)?;
                if r.u8("action.tag")? != T_WRITESET {
                    return Err(DecodeError::Invalid {
                        field: "action.tag",
                        value: 0,
                    });
                }
                let ws = read_writeset_fields(&mut r)?;
                Ok((ws, r.u32("ws.keys")? as usize))
            })();
            match head {
                Ok((ws, count)) => {
                    k.head = Some(ws);
                    k.count = count;
                    k.at = self.joined.len() - r.remaining();
                }
                Err(DecodeError::Truncated { .. }) => return,
                Err(_) => {
                    k.off = true;
                    return;
                }
            }
        }
        let Some(ws) = k.head.as_mut() else { return };
        let mut r = Reader::new(&self.joined[k.at..]);
        while ws.keys.len() < k.count {
            let before = r.remaining();
            match read_key(&mut r) {
                Ok(key) => {
                    ws.keys.push(key);
                    k.at += before - r.remaining();
                }
                Err(DecodeError::Truncated { .. }) => return,
                Err(_) => {
                    k.off = true;
                    return;
                }
            }
        }
    }

    /// The whole action, once complete: a writeset from the keys decoded
    /// ahead and its data taken out of the joined bytes in place; anything
    /// else decoded whole (`decode_action_owned`).
    pub fn into_action(self) -> Option<Result<Action, DecodeError>> {
        if !self.is_complete() {
            return None;
        }
        let k = self.keys;
        let mut joined = self.joined;
        let ahead = match k.head {
            Some(ws) if !k.off && ws.keys.len() == k.count => Some(ws),
            _ => None,
        };
        let Some(ws) = ahead else {
            return Some(super::action::decode_action_owned(joined));
        };
        let (data_at, len) = {
            let mut r = Reader::new(&joined[k.at..]);
            let data = match r.bytes("ws.data") {
                Ok(d) => d.len(),
                Err(e) => return Some(Err(e)),
            };
            if let Err(e) = r.end() {
                return Some(Err(e));
            }
            (k.at + 4, data)
        };
        joined.truncate(data_at + len);
        joined.drain(..data_at);
        Some(Ok(Action::Writeset(Writeset { data: joined, ..ws })))
    }

    fn append(&mut self, part: Vec<u8>) {
        self.joined.extend_from_slice(&part);
        self.lens.push(part.len());
    }

    pub fn is_complete(&self) -> bool {
        self.lens.len() == self.count as usize
    }

    /// The whole action's bytes, once complete (`None` before).
    #[cfg(test)]
    pub fn into_bytes(self) -> Option<Vec<u8>> {
        self.is_complete().then_some(self.joined)
    }

    /// The parts received, by index (for snapshots).
    pub fn parts(&self) -> impl Iterator<Item = (u32, &[u8])> + '_ {
        let mut at = 0;
        let joined = self.lens.iter().enumerate().map(move |(i, &len)| {
            let part = &self.joined[at..at + len];
            at += len;
            (i as u32, part)
        });
        joined.chain(self.ahead.iter().map(|(&i, p)| (i, p.as_slice())))
    }

    /// Number of parts received.
    pub fn received(&self) -> usize {
        self.lens.len() + self.ahead.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_made_up_part_count_reserves_little_ahead_of_what_arrived() {
        let mut p = Partial::new(u32::MAX);
        p.insert(0, vec![1; 3], usize::MAX);
        assert!(
            p.joined.capacity() <= RESERVE_AHEAD,
            "{}",
            p.joined.capacity()
        );
        // A real big action still gets its room in two steps: 64 MiB at
        // its first part, the rest when those are full.
        let part = vec![0u8; 1 << 20];
        let mut p = Partial::new(256);
        let mut grew = 0;
        for i in 0..256 {
            let before = p.joined.capacity();
            p.insert(i, part.clone(), usize::MAX);
            grew += usize::from(p.joined.capacity() != before);
        }
        assert_eq!(grew, 2);
        assert_eq!(p.joined.capacity(), 256 << 20);
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
                p.insert(i as u32, parts[i].clone(), usize::MAX);
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
            data: (0..data).map(|i| (i * 7) as u8).collect(),
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
                p.insert(i as u32, parts[i].clone(), usize::MAX);
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
        p.insert(0, bytes[..3].to_vec(), usize::MAX);
        assert_eq!(p.clone().into_action(), None, "incomplete");
        p.insert(1, bytes[3..].to_vec(), usize::MAX);
        assert_eq!(p.into_action(), Some(Ok(a)));
    }

    #[test]
    fn incomplete_actions_give_no_bytes_and_reserve_within_room() {
        let mut p = Partial::new(3);
        p.insert(1, vec![1; 100], 250);
        assert_eq!(p.joined.capacity(), 0, "nothing reserved for a part ahead");
        p.insert(0, vec![0; 100], 250);
        assert!(p.joined.capacity() <= 250);
        assert_eq!(p.received(), 2);
        p.insert(7, vec![7; 10], 250);
        assert_eq!(p.received(), 2, "an index beyond the count is ignored");
        assert_eq!(p.into_bytes(), None);
    }
}
