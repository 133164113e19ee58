//! The events ordered for this node's appliers, in the order they run:
//! writesets to apply, views, state transfers, the final view.
//!
//! One owner for the queue, its memory count, its spool and its length
//! statistics, so that the three cannot drift apart: every change goes
//! through a method here, which keeps `memory` equal to what the events
//! hold and the spool's placeholder count equal to the queue's.
//!
//! Bound: a synced node's queue is held near `gcs.fc_limit` by flow
//! control; a joiner, a donor or a desynced node queues what the group
//! orders meanwhile, in memory up to [`MEMORY_BUDGET`] and in the spool
//! beyond it (`recv_spool`), up to `gcs.recv_q_hard_limit` where one is set
//! (the rounds then leave the group and drop the writesets,
//! [`ApplyQueue::over_hard_limit`]), else up to the disk, as Galera's
//! gcache pages are.

use crate::event::Event;
use crate::log::{info, warn};
use crate::recv_spool::{RecvSpool, SpillDone, SpillJob, Spilled, MEMORY_BUDGET};
use lockstep_core::gates::QueueStats;
use lockstep_core::writeset_cache::CachedEvent;
use std::collections::{HashMap, VecDeque};

#[derive(Default)]
pub struct ApplyQueue {
    events: VecDeque<Event>,
    /// Bytes the events hold in memory (a spilled writeset's placeholder
    /// holds none); past [`MEMORY_BUDGET`] the next writesets are spilled.
    memory: usize,
    /// Where writesets beyond the budget wait (`None`: none could be
    /// created, or none yet; the queue then stays in memory).
    spool: Option<RecvSpool>,
    /// `wsrep_local_recv_queue_*`: the length at each push.
    stats: QueueStats,
    /// `gcs.recv_q_hard_limit` in bytes, if one is set.
    hard_limit: Option<u64>,
    /// Writesets queued past the budget and still in memory, with their
    /// history: the chores thread writes them to the spool
    /// (`take_spills`), then swaps them for placeholders (`spilled`); no
    /// round runs meanwhile. Bound: the queue's writesets.
    unspilled: Vec<(i64, [u8; 16])>,
}

impl ApplyQueue {
    /// Queues an ordered event at the back; a writeset beyond the memory
    /// budget is to wait in the spool (`history` names the group's
    /// history in its record): the next round's spill job writes it
    /// there (`take_spills`), never this call, which runs under the lock.
    pub fn push(&mut self, event: Event, history: [u8; 16]) {
        if let Event::Apply(ws) = &event {
            // Only once the queue is over its budget: one big writeset at
            // the head of a short queue stays in memory (writing it out
            // and reading it back would only delay its apply).
            if self.memory >= MEMORY_BUDGET && self.spool.is_some() {
                self.unspilled.push((ws.seqno, history));
            }
        }
        self.memory += event.memory_bytes();
        self.events.push_back(event);
        self.stats.sample(self.events.len());
    }

    /// Puts an event before everything queued: what must run first (the
    /// events an IST replays, a removal that drops the rest).
    pub fn push_front(&mut self, event: Event) {
        if matches!(event, Event::Spilled(_)) {
            // Placeholders take the places of queued writesets alone
            // (`spilled`).
            warn!("a spilled writeset cannot be put at the head of the receive queue");
            return;
        }
        self.memory += event.memory_bytes();
        self.events.push_front(event);
    }

    /// The spill job for the writesets queued past the budget since the
    /// last one (and the file's truncation, if due), for the chores
    /// thread to run; `None` if there is nothing to do, or while the
    /// last job is still out.
    pub fn take_spills(&mut self) -> Option<SpillJob> {
        // One job out at a time (the chores thread runs it, ADR 0039):
        // what waits goes into the next, once this one is back.
        if self.spool.as_ref().is_some_and(|s| s.busy()) {
            return None;
        }
        let wanted = std::mem::take(&mut self.unspilled);
        let spool = self.spool.as_mut()?;
        // One pass from the back (they were queued last), not one per
        // writeset: a joiner's round may queue thousands.
        let mut left: HashMap<i64, [u8; 16]> = wanted.into_iter().collect();
        let mut items = Vec::with_capacity(left.len());
        for e in self.events.iter().rev() {
            if left.is_empty() {
                break;
            }
            let Event::Apply(ws) = e else { continue };
            // Not found: an applier took it meanwhile.
            if let Some(history) = left.remove(&ws.seqno) {
                let event = CachedEvent {
                    history,
                    seqno: ws.seqno,
                    kind: ws.cached_kind(),
                };
                items.push((event, ws.size));
            }
        }
        // The spool's records in queue order.
        items.reverse();
        spool.job(items)
    }

    /// A spill job ran: each writeset written and still queued gives its
    /// place to its placeholder; one an applier took meanwhile (or a
    /// cleared queue dropped) keeps none, and its record is an orphan
    /// until the file starts over. A job of an earlier session's spool
    /// counts for nothing; a failed write leaves the queue in memory from
    /// then on, as it was before the spool.
    pub fn spilled(&mut self, done: SpillDone) {
        let Some(spool) = self.spool.as_mut() else {
            return;
        };
        if !spool.accepts(&done) {
            return;
        }
        let first = spool.outstanding() == 0;
        let mut swapped = 0;
        let mut placed: HashMap<i64, Spilled> =
            done.placed.into_iter().map(|s| (s.seqno, s)).collect();
        for slot in self.events.iter_mut().rev() {
            if placed.is_empty() {
                break;
            }
            let Event::Apply(ws) = slot else { continue };
            if let Some(s) = placed.remove(&ws.seqno) {
                let held = slot.memory_bytes();
                *slot = Event::Spilled(s);
                self.memory = self.memory.saturating_sub(held);
                spool.queued_one();
                swapped += 1;
            }
        }
        // Those left were taken by an applier meanwhile: their records
        // are orphans, gone when the file starts over.
        spool.truncate_if_unused();
        if first && swapped > 0 {
            info!(
                "receive queue holds {} MiB of writesets: the next ones wait in {} until the \
                 appliers reach them",
                self.memory >> 20,
                spool.path().display()
            );
        }
        if let Some(e) = done.failure {
            warn!(
                "cannot write to {}: {e}; the receive queue stays in memory",
                spool.path().display()
            );
            self.spool = None;
            self.unspilled.clear();
        }
    }

    /// Takes the next event for an applier.
    pub fn pop(&mut self) -> Option<Event> {
        let event = self.events.pop_front()?;
        self.memory = self.memory.saturating_sub(event.memory_bytes());
        if let (Event::Spilled(s), Some(spool)) = (&event, self.spool.as_mut()) {
            spool.taken(s);
        }
        Some(event)
    }

    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Event> {
        self.events.iter()
    }

    /// Bytes the queued events hold in memory.
    #[cfg(test)]
    pub fn memory(&self) -> usize {
        self.memory
    }

    /// Keeps only the events `keep` accepts.
    pub fn retain(&mut self, keep: impl FnMut(&Event) -> bool) {
        self.events.retain(keep);
        self.recount();
    }

    pub fn clear(&mut self) {
        self.events.clear();
        self.unspilled.clear();
        self.recount();
    }

    /// Drops the writesets (applied or spilled), keeps the rest.
    pub fn drop_writesets(&mut self) {
        self.retain(|e| !matches!(e, Event::Apply(_) | Event::Spilled(_)));
    }

    fn recount(&mut self) {
        self.memory = self.events.iter().map(Event::memory_bytes).sum();
        // Those left are found again by `take_spills`; those gone are not.
        let spilled = self
            .events
            .iter()
            .filter(|e| matches!(e, Event::Spilled(_)))
            .count();
        if let Some(spool) = self.spool.as_mut() {
            spool.recount(spilled);
        }
    }

    /// The spool for a new session (`None`: it could not be created).
    pub fn set_spool(&mut self, spool: Option<RecvSpool>) {
        self.spool = spool;
    }

    /// The session ended: the spool file goes.
    pub fn remove_spool(&mut self) {
        if let Some(spool) = self.spool.take() {
            spool.remove();
        }
    }

    /// Whether `s` belongs to the current spool: a placeholder from a
    /// queue cleared since (the session ended) is not read back.
    pub fn is_current(&self, s: &Spilled) -> bool {
        self.spool.as_ref().is_none_or(|sp| sp.is_current(s))
    }

    /// An applier has read `s` back: the file may shrink.
    pub fn consumed(&mut self, s: &Spilled) {
        if let Some(sp) = self.spool.as_mut() {
            sp.consumed(s);
        }
    }

    /// Writesets waiting in the spool (`wsrep_local_recv_spooled`).
    pub fn spooled(&self) -> usize {
        self.spool.as_ref().map_or(0, RecvSpool::outstanding)
    }

    pub fn stats(&self) -> &QueueStats {
        &self.stats
    }

    /// `FLUSH STATUS`.
    pub fn reset_stats(&mut self) {
        self.stats.reset();
    }

    pub fn set_hard_limit(&mut self, limit: Option<u64>) {
        self.hard_limit = limit;
    }

    /// The queue's writeset bytes and `gcs.recv_q_hard_limit`, when they
    /// exceed it (spilled writesets count).
    pub fn over_hard_limit(&self) -> Option<(u64, u64)> {
        let limit = self.hard_limit?;
        let bytes: u64 = self.events.iter().map(|e| e.bytes() as u64).sum();
        (bytes > limit).then_some((bytes, limit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ist_replay::tests::ws as remote;
    use crate::recv_spool::SPOOL_FILE;

    const H: [u8; 16] = [3; 16];

    fn with_spool(dir: &std::path::Path) -> ApplyQueue {
        let mut q = ApplyQueue::default();
        q.set_spool(Some(RecvSpool::create(dir).unwrap()));
        q
    }

    /// What a round does after it lets go of the lock.
    fn round(q: &mut ApplyQueue) {
        if let Some(job) = q.take_spills() {
            let done = job.run();
            q.spilled(done);
        }
    }

    #[test]
    fn one_big_writeset_in_a_short_queue_stays_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let mut q = with_spool(dir.path());
        q.push(Event::Apply(remote(1, 1 << 20)), H);
        q.push(Event::Apply(remote(2, MEMORY_BUDGET * 2)), H);
        assert!(matches!(q.iter().last(), Some(Event::Apply(_))));
        q.push(Event::Apply(remote(3, 1)), H);
        assert!(
            matches!(q.iter().last(), Some(Event::Apply(_))),
            "written by the round, not under the lock"
        );
        round(&mut q);
        assert!(matches!(q.iter().last(), Some(Event::Spilled(_))));
    }

    #[test]
    fn the_queue_keeps_its_memory_budget_and_hands_out_writesets_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut q = with_spool(dir.path());
        let each = 6 << 20;
        for seqno in 1..=20 {
            q.push(Event::Apply(remote(seqno, each)), H);
            round(&mut q);
            assert!(
                q.memory() < MEMORY_BUDGET + each,
                "{} in memory",
                q.memory()
            );
        }
        q.push(Event::Synced, H);
        let spilled = q.spooled();
        assert_eq!(spilled, 20 - MEMORY_BUDGET.div_ceil(each));
        for seqno in 1..=20 {
            let ws = match q.pop() {
                Some(Event::Apply(ws)) => ws,
                Some(Event::Spilled(s)) => {
                    let ws = RecvSpool::read(&s, 16 << 20).unwrap();
                    q.consumed(&s);
                    ws
                }
                _ => panic!("writeset {seqno} missing"),
            };
            assert_eq!((ws.seqno, ws.ws.data.contiguous()[0]), (seqno, seqno as u8));
        }
        assert!(matches!(q.pop(), Some(Event::Synced)));
        assert_eq!(q.memory(), 0);
        round(&mut q); // the spool's truncation
        let len = std::fs::metadata(dir.path().join(SPOOL_FILE))
            .unwrap()
            .len();
        assert_eq!(len, 0);
    }

    #[test]
    fn a_cleared_queue_holds_no_memory_and_no_spilled_writeset() {
        let dir = tempfile::tempdir().unwrap();
        let mut q = with_spool(dir.path());
        for seqno in 1..=12 {
            q.push(Event::Apply(remote(seqno, 8 << 20)), H);
            round(&mut q);
        }
        q.push_front(Event::Synced);
        assert!(q.spooled() > 0);
        q.drop_writesets();
        assert_eq!((q.len(), q.spooled(), q.memory()), (1, 0, 0));
        q.clear();
        assert!(q.is_empty());
    }

    #[test]
    fn the_hard_limit_counts_spilled_writesets_too() {
        let dir = tempfile::tempdir().unwrap();
        let mut q = with_spool(dir.path());
        q.set_hard_limit(Some(100 << 20));
        for seqno in 1..=12 {
            q.push(Event::Apply(remote(seqno, 8 << 20)), H);
            round(&mut q);
        }
        assert_eq!(q.over_hard_limit(), None);
        q.push(Event::Apply(remote(13, 8 << 20)), H);
        round(&mut q);
        assert!(q.spooled() > 0 && q.memory() < 100 << 20);
        assert!(q.over_hard_limit().is_some());
    }

    /// The last placeholder read back while a job is out: the spool's
    /// generation does not end under the job, whose writesets still take
    /// their placeholders (they would otherwise stay in memory).
    #[test]
    fn a_job_out_while_the_last_placeholder_is_read_still_counts() {
        let dir = tempfile::tempdir().unwrap();
        let mut q = with_spool(dir.path());
        q.push(Event::Apply(remote(1, MEMORY_BUDGET)), H);
        q.push(Event::Apply(remote(2, 10)), H);
        round(&mut q);
        assert!(matches!(q.pop(), Some(Event::Apply(ws)) if ws.seqno == 1));
        let Some(Event::Spilled(two)) = q.pop() else {
            panic!("2 waits in the spool");
        };
        // Over the budget again while 2 is being read.
        q.push(Event::Apply(remote(3, MEMORY_BUDGET)), H);
        q.push(Event::Apply(remote(4, 10)), H);
        let job = q.take_spills().expect("4 is past the budget");
        assert_eq!(RecvSpool::read(&two, 1 << 20).unwrap().seqno, 2);
        q.consumed(&two); // nothing else outstanding: the file may go...
        q.spilled(job.run()); // ...but not under the job
        assert_eq!(q.spooled(), 1, "4 took its placeholder");
        assert!(matches!(q.pop(), Some(Event::Apply(ws)) if ws.seqno == 3));
        let Some(Event::Spilled(four)) = q.pop() else {
            panic!("4 waits in the spool");
        };
        assert_eq!(RecvSpool::read(&four, 1 << 20).unwrap().seqno, 4);
        q.consumed(&four);
        round(&mut q);
        let len = std::fs::metadata(dir.path().join(SPOOL_FILE))
            .unwrap()
            .len();
        assert_eq!(len, 0, "empty once nothing is outstanding");
    }

    /// A writeset an applier took before the round could spill it stays
    /// as it was; the others are swapped for placeholders, in order.
    #[test]
    fn a_writeset_taken_before_its_spill_is_applied_from_memory() {
        let dir = tempfile::tempdir().unwrap();
        let mut q = with_spool(dir.path());
        q.push(Event::Apply(remote(1, MEMORY_BUDGET)), H);
        q.push(Event::Apply(remote(2, 10)), H);
        q.push(Event::Apply(remote(3, 10)), H);
        let job = q.take_spills().expect("2 and 3 are past the budget");
        assert!(matches!(q.pop(), Some(Event::Apply(ws)) if ws.seqno == 1));
        assert!(matches!(q.pop(), Some(Event::Apply(ws)) if ws.seqno == 2));
        let done = job.run();
        q.spilled(done);
        assert_eq!(q.spooled(), 1, "only 3 is still queued");
        let Some(Event::Spilled(s)) = q.pop() else {
            panic!("3 waits in the spool");
        };
        assert_eq!(RecvSpool::read(&s, 1 << 20).unwrap().seqno, 3);
        q.consumed(&s);
        assert_eq!((q.spooled(), q.memory()), (0, 0));
    }
}
