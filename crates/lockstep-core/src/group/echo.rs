//! A writeset written on a follower goes to the leader (Raft's forward)
//! and comes back in the leader's append. The second copy is an echo: the
//! origin still holds the bytes. So the leader sends the origin its own
//! entries without their data (a stub), and the origin puts its copy back
//! before Raft sees the append (ADR 0020). Across a WAN that halves what a
//! write from a site without the leader costs.
//!
//! A forwarded entry's `context` names its origin: the origin's Raft id
//! and a sequence number of its own (16 bytes, little-endian). A stub has
//! empty data and a 17th context byte, 1. The origin keeps the data of
//! what it forwarded until it stores the entry (bounded below); a stub it
//! cannot fill makes it drop the whole append, and the leader sends each
//! entry to each member as a stub at most once, so Raft's own retry brings
//! the data.

use bytes::Bytes;
use raft::eraftpb::{Entry, Message, MessageType};
use std::collections::{BTreeMap, BTreeSet};

const CONTEXT_LEN: usize = 16;
const STUB_FLAG: u8 = 1;

/// Stubs are not worth it below this (the context costs 17 bytes).
const MIN_ELIDED: usize = 64;

/// Bounds on what an origin keeps of its forwarded entries (beyond them
/// the oldest go; a stub for one then costs a retry, not correctness).
const KEEP_ENTRIES: usize = 16_384;
const KEEP_BYTES: usize = 256 << 20;

/// Bound on the leader's record of stubs sent (pruned as peers match).
const STUBS_SENT: usize = 65_536;

/// The context of an entry this node forwards to the leader.
pub fn context(origin: u64, seq: u64) -> Vec<u8> {
    let mut c = Vec::with_capacity(CONTEXT_LEN + 1);
    c.extend_from_slice(&origin.to_le_bytes());
    c.extend_from_slice(&seq.to_le_bytes());
    c
}

/// The origin and sequence number an entry's context names, and whether
/// the entry is a stub.
fn origin_of(e: &Entry) -> Option<(u64, u64, bool)> {
    let c = &e.context;
    let stub = match c.len() {
        CONTEXT_LEN => false,
        n if n == CONTEXT_LEN + 1 && c[CONTEXT_LEN] == STUB_FLAG => true,
        _ => return None,
    };
    let origin = u64::from_le_bytes(c[..8].try_into().ok()?);
    let seq = u64::from_le_bytes(c[8..16].try_into().ok()?);
    Some((origin, seq, stub))
}

pub fn is_stub(e: &Entry) -> bool {
    origin_of(e).is_some_and(|(_, _, stub)| stub)
}

/// The origin's side: the data of entries it forwarded, by sequence number.
#[derive(Debug, Default)]
pub struct Forwarded {
    by_seq: BTreeMap<u64, Bytes>,
    bytes: usize,
}

impl Forwarded {
    /// Keeps the data of `msg`'s entries if it is this node's forward.
    pub fn remember(&mut self, me: u64, msg: &Message) {
        if msg.get_msg_type() != MessageType::MsgPropose {
            return;
        }
        for e in msg.entries.iter() {
            if let Some((origin, seq, false)) = origin_of(e) {
                if origin == me && e.data.len() >= MIN_ELIDED && !self.by_seq.contains_key(&seq) {
                    self.bytes += e.data.len();
                    self.by_seq.insert(seq, e.data.clone());
                }
            }
        }
        while self.by_seq.len() > KEEP_ENTRIES || self.bytes > KEEP_BYTES {
            match self.by_seq.pop_first() {
                Some((_, d)) => self.bytes -= d.len(),
                None => break,
            }
        }
    }

    /// Forgets entries stored in the log. The leader sends a stored entry
    /// again only when the logs disagree; a stub of one then makes this
    /// node drop the append, and Raft's retry carries the data.
    pub fn stored(&mut self, me: u64, entries: &[Entry]) {
        for e in entries {
            if let Some((origin, seq, _)) = origin_of(e) {
                if origin == me {
                    if let Some(d) = self.by_seq.remove(&seq) {
                        self.bytes -= d.len();
                    }
                }
            }
        }
    }

    /// Fills the stubs of this node's own entries in `msg`; false if one
    /// cannot be filled (the message must then be dropped).
    pub fn fill(&self, me: u64, msg: &mut Message) -> bool {
        for e in msg.mut_entries().iter_mut() {
            if let Some((origin, seq, true)) = origin_of(e) {
                if origin != me {
                    continue;
                }
                let Some(data) = self.by_seq.get(&seq) else {
                    return false;
                };
                e.data = data.clone();
                let mut c = e.context.to_vec();
                c.truncate(CONTEXT_LEN);
                e.context = c.into();
            }
        }
        true
    }

    pub fn len(&self) -> usize {
        self.by_seq.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_seq.is_empty()
    }
}

/// The leader's side: which (member, index) went as a stub already.
#[derive(Debug, Default)]
pub struct Stubs {
    sent: BTreeSet<(u64, u64)>,
}

impl Stubs {
    /// Replaces the data of `to`'s own entries in `msgs` (all of one
    /// append or one bundle, which must agree) by stubs, the first time
    /// each goes to it, and only above `matched`, what it is known to
    /// store (raft-rs may probe below it; `to` no longer holds a copy of
    /// what it stored, and the record of those stubs is pruned). Returns
    /// the bytes left out.
    pub fn elide(&mut self, to: u64, matched: u64, msgs: &mut [Message]) -> usize {
        let mut indexes = BTreeSet::new();
        for e in msgs.iter().flat_map(|m| m.entries.iter()) {
            if let Some((origin, _, false)) = origin_of(e) {
                if origin == to
                    && e.index > matched
                    && e.data.len() >= MIN_ELIDED
                    && !self.sent.contains(&(e.index, to))
                {
                    indexes.insert(e.index);
                }
            }
        }
        let mut saved = 0;
        for m in msgs.iter_mut() {
            for e in m.mut_entries().iter_mut() {
                if indexes.contains(&e.index) && !is_stub(e) {
                    saved += e.data.len();
                    e.data = Bytes::new();
                    let mut c = e.context.to_vec();
                    c.push(STUB_FLAG);
                    e.context = c.into();
                }
            }
        }
        for i in &indexes {
            self.sent.insert((*i, to));
        }
        while self.sent.len() > STUBS_SENT {
            self.sent.pop_first();
        }
        saved
    }

    /// Forgets stubs of entries each member has matched.
    pub fn prune(&mut self, matched: impl Fn(u64) -> u64) {
        self.sent.retain(|(index, to)| *index > matched(*to));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u64, origin: Option<(u64, u64)>, data: &[u8]) -> Entry {
        Entry {
            index,
            term: 2,
            data: Bytes::copy_from_slice(data),
            context: origin.map_or(Bytes::new(), |(o, s)| context(o, s).into()),
            ..Default::default()
        }
    }

    fn msg(kind: MessageType, to: u64, entries: Vec<Entry>) -> Message {
        let mut m = Message::default();
        m.set_msg_type(kind);
        m.to = to;
        m.set_entries(entries.into());
        m
    }

    #[test]
    fn the_origin_gets_its_own_entries_as_stubs_and_fills_them() {
        let big = [7u8; 500];
        // Node 2 forwards two entries to leader 1.
        let forward = msg(
            MessageType::MsgPropose,
            1,
            vec![
                entry(0, Some((2, 10)), &big),
                entry(0, Some((2, 11)), b"tiny"),
            ],
        );
        let mut kept = Forwarded::default();
        kept.remember(2, &forward);
        assert_eq!(kept.len(), 1, "small entries are not worth a stub");
        // The leader's append to 2 carries them and one of node 3's.
        let append = || {
            msg(
                MessageType::MsgAppend,
                2,
                vec![
                    entry(5, Some((2, 10)), &big),
                    entry(6, Some((2, 11)), b"tiny"),
                    entry(7, Some((3, 4)), &big),
                ],
            )
        };
        let mut stubs = Stubs::default();
        let mut out = [append()];
        assert_eq!(stubs.elide(2, 4, &mut out), 500);
        assert!(is_stub(&out[0].entries[0]) && out[0].entries[0].data.is_empty());
        assert!(!is_stub(&out[0].entries[2]), "node 3's entry goes whole");
        let mut got = out[0].clone();
        assert!(kept.fill(2, &mut got));
        assert_eq!(got, append(), "filled, the append is what raft-rs made");
        // Sent once as a stub: a retry carries the data.
        let mut again = [append()];
        assert_eq!(stubs.elide(2, 4, &mut again), 0);
        // Stored: a late stub can no longer be filled.
        kept.stored(2, &got.entries);
        assert!(kept.is_empty());
        assert!(!kept.fill(2, &mut out[0].clone()));
        stubs.prune(|_| 5);
        assert_eq!(
            stubs.elide(2, 5, &mut [append()]),
            0,
            "never at or below matched"
        );
    }

    #[test]
    fn what_an_origin_keeps_is_bounded() {
        let mut kept = Forwarded::default();
        for seq in 0..(KEEP_ENTRIES as u64 + 10) {
            let m = msg(
                MessageType::MsgPropose,
                1,
                vec![entry(0, Some((2, seq)), &[1; 64])],
            );
            kept.remember(2, &m);
        }
        assert_eq!(kept.len(), KEEP_ENTRIES);
    }
}
