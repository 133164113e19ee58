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
//! [`encode_action`]: super::action::encode_action

use super::action::{write_key, write_writeset_head, Writeset, ACTION_VERSION, T_WRITESET};
use crate::certification::Key;
use crate::wire::codec::Writer;

/// A writeset's keys and data, encoded in parts of at most `step` bytes.
#[derive(Debug)]
pub struct EncodedBody {
    key_count: u32,
    parts: Vec<Vec<u8>>,
}

impl EncodedBody {
    /// Encodes `keys` and `data`; every byte is copied once, straight into
    /// its part.
    pub fn encode(keys: &[Key], data: &[u8], step: usize) -> EncodedBody {
        let mut out = Parts::new(step.max(1));
        let mut w = Writer::new();
        for k in keys {
            w.buf.clear();
            write_key(&mut w, k);
            out.put(&w.buf);
        }
        out.put(&(data.len() as u32).to_le_bytes());
        out.put(data);
        EncodedBody {
            key_count: keys.len() as u32,
            parts: out.finish(),
        }
    }

    /// The fragments' bytes: a head part with `ws`'s fields, then the
    /// body. `ws` gives only its header fields; its own keys and data are
    /// ignored (they are the body's).
    pub fn with_head(self, ws: &Writeset) -> Vec<Vec<u8>> {
        let mut w = Writer::new();
        w.u8(ACTION_VERSION).u8(T_WRITESET);
        write_writeset_head(&mut w, ws, self.key_count);
        let mut parts = Vec::with_capacity(self.parts.len() + 1);
        parts.push(w.finish());
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

    fn split(ws: &Writeset, step: usize) -> Vec<Vec<u8>> {
        let body = EncodedBody::encode(&ws.keys, &ws.data.contiguous(), step);
        let head = Writeset {
            keys: Vec::new(),
            data: Payload::default(),
            ..ws.clone()
        };
        body.with_head(&head)
    }

    #[test]
    fn parts_are_step_sized_and_the_head_comes_first() {
        let ws = writeset(10, 1000);
        let parts = split(&ws, 64);
        assert!(parts[1..parts.len() - 1].iter().all(|p| p.len() == 64));
        assert!(parts.last().is_some_and(|p| !p.is_empty() && p.len() <= 64));
        assert_eq!(parts[0][0], ACTION_VERSION);
    }

    proptest! {
        #[test]
        fn concatenated_parts_are_the_action_encoding(
            keys in 0usize..40, data in 0usize..3000, step in 1usize..500,
        ) {
            let ws = writeset(keys, data);
            let parts = split(&ws, step);
            let whole: Vec<u8> = parts.concat();
            let action = Action::Writeset(ws);
            prop_assert_eq!(&whole, &encode_action(&action));
            prop_assert_eq!(decode_action(&whole), Ok(action));
        }
    }
}
