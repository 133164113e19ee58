//! The Raft log: raft-rs's `MemStorage` plus the snapshot Lockstep makes
//! when it compacts (brief D5: the log lives in memory, not fsynced).
//!
//! `MemStorage` builds snapshots without application data and forgets the
//! term of a compacted index; this wrapper serves our own snapshot (the
//! sequencer's state at a log index) and remembers the term of the last
//! compacted entry, which Raft needs to append right after it.
//!
//! The only snapshot served is the one the log was compacted to, whose index
//! every member had applied when the compaction was decided (`Group`). So
//! every node's log, a restored one's included, starts at or below what any
//! node that has been a member has applied, and no leader ever needs to send
//! a snapshot to such a node (`Group` stops a member that receives one:
//! it would skip ordered events). A joiner added after the compaction gets
//! that older snapshot with itself added as a learner to its configuration
//! (raft-rs ignores a snapshot that does not name the receiver), then
//! replays the log from there, its own addition included, like a joiner
//! that replays the whole log.
//!
//! raft-rs may send a peer a snapshot again (`Group` reports a transfer as
//! failed when the peer does not acknowledge it in time, since a lost
//! message would otherwise stall the peer for good). It is the same one:
//! the log cannot be compacted further while a member has not reported
//! what it applied, and the receiver is a member. A peer that has it
//! already ignores it (raft-rs then only fast-forwards its commit index).

use raft::eraftpb::{ConfState, Entry, HardState, Snapshot};
use raft::storage::MemStorage;
use raft::{GetEntriesContext, RaftState, Storage};
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Default)]
struct Served {
    /// The state at the compaction point: the sequencer after its index,
    /// and the configuration there.
    current: Snapshot,
    /// Index and term of the last compacted entry (0, 0: none).
    compacted: (u64, u64),
}

#[derive(Clone, Default)]
pub struct LogStore {
    pub mem: MemStorage,
    served: Arc<Mutex<Served>>,
    /// Approximate bytes of the entries held (payload plus a fixed
    /// overhead each), for the `gcache.size` bound.
    bytes: Arc<std::sync::atomic::AtomicU64>,
}

/// Bookkeeping bytes counted per entry besides its payload.
const ENTRY_OVERHEAD: u64 = 32;

fn entries_bytes(entries: &[Entry]) -> u64 {
    entries
        .iter()
        .map(|e| e.data.len() as u64 + e.context.len() as u64 + ENTRY_OVERHEAD)
        .sum()
}

impl LogStore {
    pub fn new(mem: MemStorage) -> LogStore {
        LogStore {
            mem,
            served: Arc::default(),
            bytes: Arc::default(),
        }
    }

    fn served(&self) -> MutexGuard<'_, Served> {
        self.served.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Drops the entries up to the index of `snap` (the state after
    /// applying that index) and serves `snap` from then on. The last entry
    /// always stays: `MemStorage` with no entries would forget where its
    /// log is.
    pub fn compact(&self, snap: Snapshot) -> raft::Result<()> {
        let last = self.mem.last_index()?;
        let to = snap.get_metadata().index.min(last.saturating_sub(1));
        let mut served = self.served();
        if to <= served.compacted.0 || to < self.mem.first_index()? {
            return Ok(());
        }
        let term = self.mem.term(to)?;
        self.mem.wl().compact(to + 1)?;
        served.compacted = (to, term);
        served.current = snap;
        drop(served);
        self.recount();
        Ok(())
    }

    /// Installs a snapshot received from the leader; `current` is the same
    /// state with the configuration at its index (without this node, if the
    /// leader added it for the transfer), served if this node leads later.
    pub fn install(&self, snap: Snapshot, current: Snapshot) -> raft::Result<()> {
        self.mem.wl().apply_snapshot(snap)?;
        let meta = current.get_metadata();
        let mut served = self.served();
        served.compacted = (meta.index, meta.term);
        served.current = current;
        Ok(())
    }

    pub fn append(&self, entries: &[Entry]) -> raft::Result<()> {
        self.mem.wl().append(entries)?;
        // Appends that replace a conflicting tail over-count until the
        // next compaction recounts: compaction may come early, never late.
        self.bytes
            .fetch_add(entries_bytes(entries), std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Approximate bytes of the entries held in memory.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn recount(&self) {
        let (Ok(first), Ok(last)) = (self.mem.first_index(), self.mem.last_index()) else {
            return;
        };
        let held = self
            .mem
            .entries(first, last + 1, None, GetEntriesContext::empty(false))
            .map(|e| entries_bytes(&e))
            .unwrap_or(0);
        self.bytes.store(held, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn set_hardstate(&self, hs: HardState) {
        self.mem.wl().set_hardstate(hs);
    }

    pub fn set_commit(&self, commit: u64) {
        self.mem.wl().mut_hard_state().set_commit(commit);
    }

    pub fn set_conf_state(&self, cs: ConfState) {
        self.mem.wl().set_conf_state(cs);
    }

    /// Entries held in memory.
    pub fn entry_count(&self) -> u64 {
        let first = self.mem.first_index().unwrap_or(1);
        let last = self.mem.last_index().unwrap_or(0);
        (last + 1).saturating_sub(first)
    }
}

fn includes(cs: &ConfState, id: u64) -> bool {
    cs.voters.contains(&id) || cs.learners.contains(&id)
}

impl Storage for LogStore {
    fn initial_state(&self) -> raft::Result<RaftState> {
        self.mem.initial_state()
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        self.mem.entries(low, high, max_size, context)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        let (index, term) = self.served().compacted;
        if index != 0 && idx == index {
            return Ok(term);
        }
        self.mem.term(idx)
    }

    fn first_index(&self) -> raft::Result<u64> {
        self.mem.first_index()
    }

    fn last_index(&self) -> raft::Result<u64> {
        self.mem.last_index()
    }

    /// The snapshot at the compaction point, with the peer added as a
    /// learner if it joined after that point.
    fn snapshot(&self, _request_index: u64, to: u64) -> raft::Result<Snapshot> {
        let served = self.served();
        let first = self.mem.first_index()?;
        let meta = served.current.get_metadata();
        if meta.index == 0 || meta.index + 1 < first {
            // Nothing compacted: Raft sends entries, not a snapshot.
            return Err(raft::Error::Store(
                raft::StorageError::SnapshotTemporarilyUnavailable,
            ));
        }
        let mut snap = served.current.clone();
        let cs = snap.mut_metadata().mut_conf_state();
        if !includes(cs, to) {
            cs.learners.push(to);
        }
        Ok(snap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u64, term: u64) -> Entry {
        Entry {
            index,
            term,
            ..Default::default()
        }
    }

    fn snapshot(index: u64, term: u64, voters: Vec<u64>, learners: Vec<u64>) -> Snapshot {
        let mut s = Snapshot {
            data: vec![index as u8].into(),
            ..Default::default()
        };
        let meta = s.mut_metadata();
        meta.index = index;
        meta.term = term;
        meta.mut_conf_state().voters = voters;
        meta.mut_conf_state().learners = learners;
        s
    }

    /// Entries 1..=10, terms 1 (1..=4) and 2 (5..=10).
    fn store() -> LogStore {
        let store = LogStore::new(MemStorage::new_with_conf_state((vec![1], vec![])));
        let entries: Vec<Entry> = (1..=10)
            .map(|i| entry(i, if i < 5 { 1 } else { 2 }))
            .collect();
        store.append(&entries).unwrap();
        store
    }

    #[test]
    fn nothing_to_serve_before_compaction() {
        let s = store();
        assert_eq!(
            s.snapshot(0, 2),
            Err(raft::Error::Store(
                raft::StorageError::SnapshotTemporarilyUnavailable
            ))
        );
    }

    #[test]
    fn compaction_keeps_the_term_of_the_compaction_point() {
        let s = store();
        s.compact(snapshot(6, 2, vec![1], vec![])).unwrap();
        assert_eq!(s.first_index(), Ok(7));
        assert_eq!(s.term(6), Ok(2));
        assert!(s.term(5).is_err());
        let ctx = GetEntriesContext::empty(false);
        assert_eq!(s.entries(7, 11, None, ctx).unwrap().len(), 4);
        // Never backwards.
        s.compact(snapshot(3, 1, vec![1], vec![])).unwrap();
        assert_eq!(s.first_index(), Ok(7));
        assert_eq!(s.snapshot(0, 1).unwrap().get_metadata().index, 6);
    }

    #[test]
    fn the_last_entry_stays() {
        let s = store();
        s.compact(snapshot(10, 2, vec![1], vec![])).unwrap();
        assert_eq!(s.last_index(), Ok(10));
        assert_eq!(s.first_index(), Ok(10));
        assert_eq!(s.term(9), Ok(2));
        assert_eq!(s.term(10), Ok(2));
    }

    #[test]
    fn a_later_joiner_is_added_as_a_learner() {
        let s = store();
        s.compact(snapshot(6, 2, vec![1, 2], vec![3])).unwrap();
        let member = s.snapshot(0, 3).unwrap();
        assert_eq!(member.get_metadata().get_conf_state().learners, vec![3]);
        let joiner = s.snapshot(0, 9).unwrap();
        let cs = joiner.get_metadata().get_conf_state();
        assert_eq!(
            (cs.voters.clone(), cs.learners.clone()),
            (vec![1, 2], vec![3, 9])
        );
        assert_eq!(joiner.data, member.data);
        // Others still get the real configuration.
        let other = s.snapshot(0, 8).unwrap();
        assert_eq!(other.get_metadata().get_conf_state().learners, vec![3, 8]);
    }

    #[test]
    fn a_peer_gets_the_same_snapshot_again() {
        let s = store();
        s.compact(snapshot(6, 2, vec![1], vec![])).unwrap();
        let first = s.snapshot(0, 5).unwrap();
        s.append(&(11..=20).map(|i| entry(i, 2)).collect::<Vec<_>>())
            .unwrap();
        assert_eq!(s.snapshot(0, 5).unwrap(), first);
    }

    #[test]
    fn installing_replaces_the_log() {
        let s = LogStore::new(MemStorage::new());
        let received = snapshot(40, 3, vec![1], vec![7]);
        let current = snapshot(40, 3, vec![1], vec![]);
        s.install(received, current.clone()).unwrap();
        assert_eq!(s.first_index(), Ok(41));
        assert_eq!(s.last_index(), Ok(40));
        assert_eq!(s.term(40), Ok(3));
        let state = s.initial_state().unwrap();
        assert_eq!(state.conf_state.learners, vec![7]);
        // What it serves is the configuration at the index, plus the peer.
        let served = s.snapshot(0, 8).unwrap();
        assert_eq!(served.get_metadata().get_conf_state().learners, vec![8]);
        s.append(&[entry(41, 3)]).unwrap();
        assert_eq!(s.entry_count(), 1);
    }
}
