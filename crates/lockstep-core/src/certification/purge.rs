//! The writeset map and purging (contract §6.4).
//!
//! The map holds every certified writeset (passed or failed, TOI or not) that
//! has not been purged, in seqno order, with the index slots it referenced.
//! Its lowest seqno bounds `depends_on` from below (§6.3). Purging up to a
//! cut pops the writesets `<= cut` and drops their references from the
//! index; an entry disappears once none of its references is left.
//!
//! Every reference `r` in the index was written by writeset `r`, which listed
//! the entry, so purging writesets `<= cut` reaches every reference `<= cut`.

use std::collections::VecDeque;

use super::index::KeyIndex;
use super::Seqno;

#[derive(Clone, Copy, Debug)]
struct WsRecord {
    seqno: Seqno,
    /// Number of slots this writeset appended to `slots`.
    nkeys: u32,
}

#[derive(Default)]
pub(crate) struct WritesetMap {
    records: VecDeque<WsRecord>,
    /// Slots referenced by the writesets of `records`, concatenated in order.
    slots: VecDeque<u32>,
}

impl WritesetMap {
    pub fn clear(&mut self) {
        self.records.clear();
        self.slots.clear();
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Lowest seqno in the map.
    pub fn lowest(&self) -> Option<Seqno> {
        self.records.front().map(|r| r.seqno)
    }

    /// Appends a writeset that referenced no entry (failed or keyless).
    pub fn push_dummy(&mut self, seqno: Seqno) {
        self.records.push_back(WsRecord { seqno, nkeys: 0 });
    }

    /// Appends a writeset that referenced `slots` (each once).
    pub fn push(&mut self, seqno: Seqno, slots: impl Iterator<Item = u32>) {
        let before = self.slots.len();
        self.slots.extend(slots);
        let nkeys = (self.slots.len() - before) as u32;
        self.records.push_back(WsRecord { seqno, nkeys });
    }

    /// Pops every writeset `<= cut` and releases its references in `index`.
    pub fn purge_upto(&mut self, cut: Seqno, index: &mut KeyIndex) {
        while let Some(rec) = self.records.front().copied() {
            if rec.seqno > cut {
                break;
            }
            self.records.pop_front();
            for _ in 0..rec.nkeys {
                if let Some(slot) = self.slots.pop_front() {
                    index.release_upto(slot, cut);
                }
            }
        }
        if self.records.is_empty() {
            // Give back memory after a burst.
            self.records.shrink_to(1024);
            self.slots.shrink_to(1 << 16);
        }
    }
}
