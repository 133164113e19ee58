//! Relaying the leader's appends inside a remote segment (`gmcast.segment`,
//! ADR 0020): one copy of each log entry crosses the WAN per site.
//!
//! raft-rs addresses every append to one follower. When several followers
//! of one remote segment are due the same entries, the leader sends one
//! **bundle** to one of them (the relay): the messages without their
//! entries, and each entry they carry once. The relay steps its own
//! message and forwards the others to their destinations over its LAN.
//! Raft tolerates what a relay can do wrong (a lost or late message), so
//! a relay that dies costs a retry, not safety.
//!
//! Bundle layout (little-endian, `wire::codec`): a format byte (1); the
//! entries in ascending index order (count, then each as a length-prefixed
//! protobuf `Entry`); the messages (count, then each as a length-prefixed
//! protobuf `Message` without entries, its first entry index and its entry
//! count). Decoding bounds every count by the bytes present and checks
//! that each message's entries are all in the bundle.

use crate::wire::codec::{DecodeError, Reader, Writer};
use bytes::Bytes;
use protobuf::Message as _;
use raft::eraftpb::{Entry, Message, MessageType};
use std::collections::BTreeMap;

const FORMAT: u8 = 1;

/// More messages than this in one bundle are refused (one per member).
pub const MAX_BUNDLE_MESSAGES: usize = crate::saved_view::MAX_MEMBERS;

/// The leader's appends to members of other segments than ours, grouped
/// by segment: every `MsgAppend` to a segment with a relay goes through it,
/// with or without entries, so each follower's appends keep one path and
/// their order (raft-rs rejects an append that overtakes an earlier one,
/// and a rejection costs a probe and a resend). `relay_for` names the
/// relay of a segment (None: send directly); appends to the relay alone
/// go directly, on the same connection the bundles take. Returns the
/// messages to send directly, and the bundles as (relay, messages).
pub fn plan(
    msgs: Vec<Message>,
    my_segment: u8,
    segment_of: impl Fn(u64) -> Option<u8>,
    mut relay_for: impl FnMut(u8) -> Option<u64>,
) -> (Vec<Message>, Vec<(u64, Vec<Message>)>) {
    let mut direct = Vec::new();
    let mut by_segment: BTreeMap<u8, Vec<Message>> = BTreeMap::new();
    for m in msgs {
        let remote = segment_of(m.to).filter(|s| *s != my_segment);
        match remote {
            Some(s) if m.get_msg_type() == MessageType::MsgAppend => {
                by_segment.entry(s).or_default().push(m)
            }
            _ => direct.push(m),
        }
    }
    let mut bundles = Vec::new();
    for (segment, group) in by_segment {
        let relay = relay_for(segment)
            .filter(|via| group.iter().any(|m| m.to != *via) && same_entries(&group));
        match relay {
            Some(via) => bundles.push((via, group)),
            None => direct.extend(group),
        }
    }
    (direct, bundles)
}

/// Whether the messages agree on every index they share (one leader's log
/// in one term always does; anything else is sent as raft-rs made it).
fn same_entries(msgs: &[Message]) -> bool {
    let mut seen: BTreeMap<u64, &Entry> = BTreeMap::new();
    for e in msgs.iter().flat_map(|m| m.entries.iter()) {
        match seen.get(&e.index) {
            Some(prev) if prev.term != e.term || prev.data != e.data => return false,
            Some(_) => {}
            None => {
                seen.insert(e.index, e);
            }
        }
    }
    true
}

/// The number of distinct entries a bundle carries.
pub fn distinct_entries(msgs: &[Message]) -> usize {
    let mut idx: Vec<u64> = msgs
        .iter()
        .flat_map(|m| m.entries.iter().map(|e| e.index))
        .collect();
    idx.sort_unstable();
    idx.dedup();
    idx.len()
}

/// Encodes a bundle (messages that passed `plan`).
pub fn encode(msgs: &[Message]) -> Result<Vec<u8>, protobuf::ProtobufError> {
    let mut entries: BTreeMap<u64, &Entry> = BTreeMap::new();
    for e in msgs.iter().flat_map(|m| m.entries.iter()) {
        entries.entry(e.index).or_insert(e);
    }
    let mut w = Writer::new();
    w.u8(FORMAT).u32(entries.len() as u32);
    for e in entries.values() {
        w.bytes(&e.write_to_bytes()?);
    }
    w.u32(msgs.len() as u32);
    for m in msgs {
        let first = m.entries.first().map_or(0, |e| e.index);
        let count = m.entries.len() as u32;
        let mut head = m.clone();
        head.clear_entries();
        w.bytes(&head.write_to_bytes()?).u64(first).u32(count);
    }
    Ok(w.finish())
}

/// Decodes a bundle into its messages, entries restored. The entries'
/// data are slices of `bytes`, not copies.
pub fn decode(bytes: &Bytes) -> Result<Vec<Message>, DecodeError> {
    let mut r = Reader::new(bytes);
    let format = r.u8("relay.format")?;
    if format != FORMAT {
        return Err(DecodeError::Invalid {
            field: "relay.format",
            value: u64::from(format),
        });
    }
    let n = r.count("relay.entries", 4)?;
    let mut entries: BTreeMap<u64, Entry> = BTreeMap::new();
    for _ in 0..n {
        let raw = r.bytes("relay.entry")?;
        let e = Entry::parse_from_carllerche_bytes(&bytes.slice_ref(raw)).map_err(|_| {
            DecodeError::Invalid {
                field: "relay.entry",
                value: raw.len() as u64,
            }
        })?;
        let index = e.index;
        if entries
            .last_key_value()
            .is_some_and(|(last, _)| *last >= index)
        {
            return Err(DecodeError::Invalid {
                field: "relay.entry_index",
                value: index,
            });
        }
        entries.insert(index, e);
    }
    let n = r.count("relay.messages", 16)?;
    if n > MAX_BUNDLE_MESSAGES {
        return Err(DecodeError::Invalid {
            field: "relay.messages",
            value: n as u64,
        });
    }
    let mut msgs = Vec::with_capacity(n);
    for _ in 0..n {
        let raw = r.bytes("relay.message")?;
        let mut m = Message::parse_from_bytes(raw).map_err(|_| DecodeError::Invalid {
            field: "relay.message",
            value: raw.len() as u64,
        })?;
        let first = r.u64("relay.first_index")?;
        let count = u64::from(r.u32("relay.entry_count")?);
        if !m.entries.is_empty() {
            return Err(DecodeError::Invalid {
                field: "relay.message_entries",
                value: m.entries.len() as u64,
            });
        }
        for i in 0..count {
            let index = first.checked_add(i);
            let e = index
                .and_then(|i| entries.get(&i))
                .ok_or(DecodeError::Invalid {
                    field: "relay.entry_missing",
                    value: first.wrapping_add(i),
                })?;
            m.mut_entries().push(e.clone());
        }
        msgs.push(m);
    }
    r.end()?;
    Ok(msgs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entry(index: u64, term: u64, data: &[u8]) -> Entry {
        Entry {
            index,
            term,
            data: Bytes::copy_from_slice(data),
            ..Default::default()
        }
    }

    fn append(to: u64, entries: Vec<Entry>) -> Message {
        let mut m = Message::default();
        m.set_msg_type(MessageType::MsgAppend);
        m.from = 1;
        m.to = to;
        m.term = 3;
        m.index = entries.first().map_or(0, |e| e.index - 1);
        m.commit = 7;
        m.set_entries(entries.into());
        m
    }

    fn heartbeat(to: u64) -> Message {
        let mut m = Message::default();
        m.set_msg_type(MessageType::MsgHeartbeat);
        m.from = 1;
        m.to = to;
        m
    }

    /// Members 2 and 3 are in segment 1, 4 in segment 2, 5 in ours (0).
    fn segment_of(id: u64) -> Option<u8> {
        match id {
            2 | 3 => Some(1),
            4 => Some(2),
            5 => Some(0),
            _ => None,
        }
    }

    #[test]
    fn appends_to_one_remote_segment_go_to_one_relay() {
        let e = || vec![entry(8, 3, b"ws-a"), entry(9, 3, b"ws-b")];
        let msgs = vec![
            append(2, e()),
            append(3, e()),
            append(4, e()),
            append(5, e()),
            heartbeat(3),
        ];
        let relays = |s: u8| [None, Some(2), Some(4)][s as usize];
        let (direct, bundles) = plan(msgs, 0, segment_of, relays);
        let direct_to: Vec<u64> = direct.iter().map(|m| m.to).collect();
        assert_eq!(
            direct_to,
            vec![5, 3, 4],
            "own segment, heartbeats, the relay alone"
        );
        assert_eq!(bundles.len(), 1);
        assert_eq!(bundles[0].0, 2);
        assert_eq!(distinct_entries(&bundles[0].1), 2);
        // An append to a member behind a relay goes through it, even alone
        // and without entries: its appends keep one path.
        let (direct, bundles) = plan(vec![append(3, vec![])], 0, segment_of, relays);
        assert!(direct.is_empty());
        assert_eq!((bundles[0].0, bundles[0].1.len()), (2, 1));
    }

    #[test]
    fn no_relay_when_none_is_usable_or_entries_disagree() {
        let msgs = vec![
            append(2, vec![entry(8, 3, b"a")]),
            append(3, vec![entry(8, 3, b"a")]),
        ];
        let (direct, bundles) = plan(msgs, 0, segment_of, |_| None);
        assert_eq!((direct.len(), bundles.len()), (2, 0));
        let msgs = vec![
            append(2, vec![entry(8, 3, b"a")]),
            append(3, vec![entry(8, 4, b"a")]),
        ];
        let (direct, bundles) = plan(msgs, 0, segment_of, |_| Some(2));
        assert_eq!((direct.len(), bundles.len()), (2, 0));
    }

    #[test]
    fn a_bundle_carries_each_entry_once_and_restores_every_message() {
        let msgs = vec![
            append(2, vec![entry(5, 3, b"five"), entry(6, 3, &[6; 1000])]),
            append(3, vec![entry(6, 3, &[6; 1000])]),
        ];
        let bytes = encode(&msgs).unwrap();
        assert!(
            bytes.len() < 1200,
            "the big entry travels once: {}",
            bytes.len()
        );
        assert_eq!(decode(&Bytes::from(bytes)).unwrap(), msgs);
    }

    #[test]
    fn bad_bundles_are_refused() {
        let msgs = vec![append(2, vec![entry(5, 3, b"x"), entry(6, 3, b"y")])];
        let good = encode(&msgs).unwrap();
        let mut wrong_format = good.clone();
        wrong_format[0] = 9;
        assert!(decode(&Bytes::from(wrong_format)).is_err());
        // The message claims three entries: the third is not there.
        let mut missing = good.clone();
        let n = missing.len();
        missing[n - 4] = 3;
        assert!(decode(&Bytes::from(missing)).is_err());
        for cut in 0..good.len() {
            assert!(
                decode(&Bytes::copy_from_slice(&good[..cut])).is_err(),
                "{cut}"
            );
        }
    }

    proptest! {
        #[test]
        fn any_bundle_round_trips(
            first in 1u64..1000,
            spans in proptest::collection::vec((0u64..6, 0u64..6), 1..6),
            data in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let msgs: Vec<Message> = spans
                .iter()
                .enumerate()
                .map(|(i, (skip, len))| {
                    let es = (first + skip..first + skip + len)
                        .map(|ix| entry(ix, 3, &[&data[..], &ix.to_le_bytes()].concat()))
                        .collect();
                    append(10 + i as u64, es)
                })
                .collect();
            let bytes = encode(&msgs).unwrap();
            prop_assert_eq!(decode(&Bytes::from(bytes)).unwrap(), msgs);
        }

        #[test]
        fn any_bytes_decode_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode(&Bytes::from(bytes));
        }
    }
}
