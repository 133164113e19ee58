//! A big writeset's encoding, cut into the parts its fragments carry
//! (ADR 0009). The parts concatenated are exactly [`encode_action`] of the
//! writeset, so the sequencer reassembles and decodes them like any other
//! fragmented action.
//!
//! Encoding is split in two so that the replicating thread does the
//! expensive part: [`EncodedBody`] (keys and data, O(size)) is built
//! before the provider takes its lock and outside the group's round,
//! which steps heartbeats and orders everybody's writesets; only the
//! head (a few dozen bytes, with the `last_seen` seqno that must be read
//! under the lock) is written later, by [`EncodedBody::with_head`].
//!
//! The data, most of a big writeset, is not copied at all: it comes last
//! in the encoding, so its parts are slices of the buffers the server's
//! rows were gathered in (`Bytes` shared with the transaction, which
//! keeps them for a replay). Only the keys and the data's length are
//! encoded into parts of their own; the parts before the data may
//! therefore end short of `step`.
//!
//! [`encode_action`]: super::action::encode_action

use super::action::{write_key, write_writeset_head, Writeset, ACTION_VERSION, T_WRITESET};
use super::payload::Payload;
use crate::certification::Key;
use crate::wire::codec::Writer;
use bytes::Bytes;

/// A writeset's keys and data, encoded in parts of at most `step` bytes.
#[derive(Debug)]
pub struct EncodedBody {
    key_count: u32,
    parts: Vec<Bytes>,
}

impl EncodedBody {
    /// Encodes `keys` (copied once, straight into their parts) and
    /// `data` (sliced, not copied).
    pub fn encode(keys: &[Key], data: &Payload, step: usize) -> EncodedBody {
        let step = step.max(1);
        let mut out = Parts::new(step);
        let mut w = Writer::new();
        for k in keys {
            w.buf.clear();
            write_key(&mut w, k);
            out.put(&w.buf);
        }
        out.put(&(data.len() as u32).to_le_bytes());
        let mut parts: Vec<Bytes> = out.finish().into_iter().map(Bytes::from).collect();
        for chunk in data.shared_chunks() {
            let mut at = 0;
            while at < chunk.len() {
                let end = chunk.len().min(at + step);
                parts.push(chunk.slice(at..end));
                at = end;
            }
        }
        EncodedBody {
            key_count: keys.len() as u32,
            parts,
        }
    }

    /// The fragments' bytes: a head part with `ws`'s fields, then the
    /// body. `ws` gives only its header fields; its own keys and data are
    /// ignored (they are the body's).
    pub fn with_head(self, ws: &Writeset) -> Vec<Bytes> {
        let mut w = Writer::new();
        w.u8(ACTION_VERSION).u8(T_WRITESET);
        write_writeset_head(&mut w, ws, self.key_count);
        let mut parts = Vec::with_capacity(self.parts.len() + 1);
        parts.push(Bytes::from(w.finish()));
        parts.extend(self.parts);
        parts
    }
}

/// Appends bytes to parts of `step` bytes (the last one may be shorter).
struct Parts {
    step: usize,
    done: Vec<Vec<u8>>,
    current: Vec<u8>,
}

impl Parts {
    fn new(step: usize) -> Parts {
        Parts {
            step,
            done: Vec::new(),
            current: Vec::new(),
        }
    }

    fn put(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.current.capacity() == 0 {
                self.current.reserve_exact(self.step);
            }
            let room = self.step - self.current.len();
            let n = room.min(bytes.len());
            self.current.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            if self.current.len() == self.step {
                self.done.push(std::mem::take(&mut self.current));
            }
        }
    }

    fn finish(mut self) -> Vec<Vec<u8>> {
        if !self.current.is_empty() {
            self.done.push(self.current);
        }
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::super::action::{decode_action, encode_action, Action};
    use super::super::payload::Payload;
    use super::*;
    use crate::certification::KeyType;
    use proptest::prelude::*;

    fn writeset(keys: usize, data: usize) -> Writeset {
        Writeset {
            source: [3; 16],
            trx_id: 11,
            conn_id: 12,
            last_seen: 13,
            flags: 1,
            keys: (0..keys)
                .map(|i| Key::new([b"db".to_vec(), vec![i as u8; i % 7]], KeyType::Exclusive))
                .collect(),
            data: (0..data).map(|i| i as u8).collect(),
        }
    }

    fn split(ws: &Writeset, step: usize) -> Vec<Bytes> {
        let body = EncodedBody::encode(&ws.keys, &ws.data, step);
        let head = Writeset {
            keys: Vec::new(),
            data: Payload::default(),
            ..ws.clone()
        };
        body.with_head(&head)
    }

    #[test]
    fn parts_are_at_most_step_sized_and_the_head_comes_first() {
        let ws = writeset(10, 1000);
        let parts = split(&ws, 64);
        assert!(parts.iter().all(|p| !p.is_empty() && p.len() <= 64));
        assert_eq!(parts[0][0], ACTION_VERSION);
        // The data's parts are full ones but for the last.
        let data_parts = 1000usize.div_ceil(64);
        let tail = &parts[parts.len() - data_parts..];
        assert!(tail[..data_parts - 1].iter().all(|p| p.len() == 64));
    }

    /// The data's parts point into the buffers it was gathered in, even
    /// across several of them: nothing of it is copied.
    #[test]
    fn the_data_is_sliced_not_copied() {
        let a = Bytes::from(vec![1u8; 100]);
        let b = Bytes::from(vec![2u8; 30]);
        let data = Payload::from_chunks([a.clone(), b.clone()]);
        let body = EncodedBody::encode(&[], &data, 64);
        let inside = |p: &Bytes, of: &Bytes| {
            let (start, end) = (of.as_ptr() as usize, of.as_ptr() as usize + of.len());
            p.as_ptr() as usize >= start && p.as_ptr() as usize + p.len() <= end
        };
        let data_parts: Vec<&Bytes> = body.parts.iter().skip(1).collect();
        assert_eq!(
            data_parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            vec![64, 36, 30]
        );
        assert!(inside(data_parts[0], &a) && inside(data_parts[1], &a));
        assert!(inside(data_parts[2], &b));
    }

    proptest! {
        #[test]
        fn concatenated_parts_are_the_action_encoding(
            keys in 0usize..40, data in 0usize..3000, step in 1usize..500,
        ) {
            let ws = writeset(keys, data);
            let parts = split(&ws, step);
            let whole: Vec<u8> = parts.iter().flat_map(|p| p.iter().copied()).collect();
            let action = Action::Writeset(ws);
            prop_assert_eq!(&whole, &encode_action(&action));
            prop_assert_eq!(decode_action(&whole), Ok(action));
        }
    }
}
