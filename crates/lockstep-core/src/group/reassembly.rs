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
}

impl Partial {
    pub fn new(count: u32) -> Partial {
        Partial {
            count,
            joined: Vec::new(),
            lens: Vec::new(),
            ahead: BTreeMap::new(),
            bytes: 0,
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
        let rest = (self.count - index) as usize;
        let want = part.len().saturating_mul(rest).min(room);
        if self.joined.capacity() - self.joined.len() < want {
            self.joined.reserve_exact(want);
        }
        self.append(part);
        while let Some(part) = self.ahead.remove(&(self.lens.len() as u32)) {
            self.append(part);
        }
    }

    fn append(&mut self, part: Vec<u8>) {
        self.joined.extend_from_slice(&part);
        self.lens.push(part.len());
    }

    pub fn is_complete(&self) -> bool {
        self.lens.len() == self.count as usize
    }

    /// The whole action's bytes, once complete (`None` before).
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
