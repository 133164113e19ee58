//! Writesets queued for this node's appliers beyond a memory budget wait
//! on disk instead of in RAM.
//!
//! Flow control keeps a synced node's receive queue short, but three kinds
//! of node queue by design: a joiner waiting for a long SST (the server
//! applies nothing until the state has arrived), a donor, and a desynced
//! node (both exempt from flow control, as in Galera). Each of them queues
//! every writeset the group orders meanwhile. Galera keeps that queue in
//! gcache, whose page files spill to disk; here, once the writesets in the
//! queue hold [`MEMORY_BUDGET`] bytes, the next ones are appended to
//! `lockstep_recv_spool.dat` in the data directory and the queue keeps a
//! small placeholder ([`Spilled`]) in their place. The round that queued
//! them writes them after it lets go of the provider's lock (a
//! [`SpillJob`]) and then swaps the placeholders in: so memory holds at
//! most the budget plus what one round queued past it (or, until the next
//! round, what an applier thread queued). The applier whose turn it
//! is reads the writeset back (outside the provider's lock) and applies it
//! like any other.
//!
//! Records use the writeset cache's record format (length, CRC-32 of the
//! payload, payload; `docs/formats.md`), appended in queue order; a record
//! that fails its checksum or names another seqno is an inconsistency
//! (the node stops, it does not skip a writeset). The file is truncated
//! (by the next spill job) whenever no placeholder is left in the queue
//! or being read back by an applier, and created empty at
//! every connect, so it only holds what the queue holds. Its size is
//! bounded by `gcs.recv_q_hard_limit` where one is set (the limit counts
//! spilled writesets too), else by the disk, like Galera's page files.

use crate::remote_ws::RemoteWs;
use lockstep_core::writeset_cache::Decoded;
use lockstep_core::writeset_cache::{decode_record, encode_record, CachedEvent, CachedKind};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Bytes of writesets the receive queue keeps in memory; beyond it they
/// are spilled. 64 MiB is far above what a synced node under flow control
/// queues (`gcs.fc_limit` writesets of ordinary size) and small next to
/// the buffer pool of a database server.
pub const MEMORY_BUDGET: usize = 64 << 20;

/// The spool file's name in the data directory.
pub const SPOOL_FILE: &str = "lockstep_recv_spool.dat";

/// A writeset waiting in the spool, at its place in the queue.
#[derive(Debug, Clone)]
pub struct Spilled {
    pub seqno: i64,
    /// Its size as a writeset (what the queue counts), not its record's.
    pub bytes: usize,
    offset: u64,
    len: usize,
    /// The spool (its id) and generation it was written to: a placeholder
    /// left over from a queue that was cleared since, or from an earlier
    /// session, is recognised and ignored.
    spool: u64,
    generation: u64,
    file: Arc<File>,
}

/// The spool file and where its next record goes. Its lock is a leaf,
/// taken only by a spill job (`SpillJob::run`), never under the
/// provider's state lock; readers need none (`RecvSpool::read`).
struct SpoolFile {
    file: Arc<File>,
    end: Mutex<u64>,
}

/// The spool's bookkeeping, kept with the queue under the provider's
/// lock. The file is written only by a spill job, run after the lock is
/// let go of (issue 53: no disk write under a lock that client threads
/// take).
pub struct RecvSpool {
    path: PathBuf,
    file: Arc<SpoolFile>,
    /// This spool among those of the process (one per session): a job
    /// of another session's spool counts for nothing.
    id: u64,
    /// A spill job is out: the generation does not end meanwhile (its
    /// placeholders would be refused); `ApplyQueue::spilled` looks again.
    in_flight: bool,
    /// Placeholders in the queue.
    queued: usize,
    /// Placeholders an applier took from the queue and has not read back
    /// yet: the file is not truncated under them.
    reading: usize,
    generation: u64,
    /// Records were written in this generation: the file has something
    /// to truncate.
    written: bool,
    /// A generation ended with nothing outstanding: the next spill job
    /// truncates the file first.
    truncate_due: bool,
}

/// Writesets to write to the spool, and whether the file starts over
/// first: decided under the state lock (`RecvSpool::job`), run without it.
#[must_use = "a spill job does nothing until it is run"]
pub struct SpillJob {
    file: Arc<SpoolFile>,
    spool: u64,
    generation: u64,
    truncate: bool,
    /// Each writeset as its spool record's event, and its size. Bound:
    /// what one round queued past the memory budget.
    items: Vec<(CachedEvent, usize)>,
}

/// What a spill job did, for `ApplyQueue::spilled`.
pub struct SpillDone {
    spool: u64,
    generation: u64,
    /// A placeholder for each writeset written, in order.
    pub placed: Vec<Spilled>,
    /// Why the rest could not be written.
    pub failure: Option<io::Error>,
}

impl SpillJob {
    /// The result of this job if it cannot run to its end (a bug in it):
    /// nothing written, the spool failed, so the queue stays in memory
    /// from then on, as after a failed write.
    pub fn abandoned(&self) -> SpillDone {
        SpillDone {
            spool: self.spool,
            generation: self.generation,
            placed: Vec::new(),
            failure: Some(io::Error::other("the spill job failed (a Lockstep bug)")),
        }
    }

    /// Truncates the file if due, then appends each writeset's record.
    pub fn run(self) -> SpillDone {
        crate::state_lock::expect_unlocked("a receive spool write");
        let mut end = self.file.end.lock().unwrap_or_else(|p| p.into_inner());
        let mut done = SpillDone {
            spool: self.spool,
            generation: self.generation,
            placed: Vec::with_capacity(self.items.len()),
            failure: None,
        };
        if self.truncate {
            // Placeholders of the old contents no longer match (their
            // generation ended under the state lock).
            *end = 0;
            if let Err(e) = self.file.file.set_len(0) {
                crate::log::warn!("cannot truncate the receive spool: {e}");
            }
        }
        let mut record = Vec::new();
        for (event, bytes) in &self.items {
            record.clear();
            encode_record(event, &mut record);
            if let Err(e) = self.file.file.write_all_at(&record, *end) {
                done.failure = Some(e);
                break;
            }
            done.placed.push(Spilled {
                seqno: event.seqno,
                bytes: *bytes,
                offset: *end,
                len: record.len(),
                spool: self.spool,
                generation: self.generation,
                file: self.file.file.clone(),
            });
            *end += record.len() as u64;
        }
        done
    }
}

impl RecvSpool {
    /// Creates the spool file in `dir`, a new one: a file left by an
    /// earlier session is unlinked first, so nothing of that session's
    /// (a reader, a late writer) can touch this one.
    pub fn create(dir: &Path) -> io::Result<RecvSpool> {
        let path = dir.join(SPOOL_FILE);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        static SPOOLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        Ok(RecvSpool {
            id: SPOOLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            in_flight: false,
            path,
            file: Arc::new(SpoolFile {
                file: Arc::new(file),
                end: Mutex::new(0),
            }),
            queued: 0,
            reading: 0,
            generation: 0,
            written: false,
            truncate_due: false,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Spilled writesets not read back yet (in the queue, or taken by an
    /// applier).
    pub fn outstanding(&self) -> usize {
        self.queued + self.reading
    }

    /// A job is out: the next waits until it is back (`accepts`).
    pub fn busy(&self) -> bool {
        self.in_flight
    }

    /// The job that writes `items` (writesets as spool records, with
    /// their sizes), truncating the file first if due; `None` when there
    /// is nothing to do.
    pub fn job(&mut self, items: Vec<(CachedEvent, usize)>) -> Option<SpillJob> {
        if items.is_empty() && !self.truncate_due {
            return None;
        }
        // One job out at a time (`busy`).
        debug_assert!(!self.in_flight, "a spill job is already out");
        self.in_flight = true;
        Some(SpillJob {
            file: self.file.clone(),
            spool: self.id,
            generation: self.generation,
            truncate: std::mem::take(&mut self.truncate_due),
            items,
        })
    }

    /// Whether a job's placeholders belong to this spool's current
    /// generation (which does not end while a job is out); if so, its
    /// records count as written. The caller then looks whether the file
    /// may start over (`truncate_if_unused`).
    pub fn accepts(&mut self, done: &SpillDone) -> bool {
        if done.spool != self.id {
            return false;
        }
        self.in_flight = false;
        let current = done.generation == self.generation;
        if current && !done.placed.is_empty() {
            self.written = true;
        }
        current
    }

    /// A placeholder was put in the queue in its writeset's place.
    pub fn queued_one(&mut self) {
        self.queued += 1;
    }

    /// Reads a placeholder's writeset back. Needs no lock: records are
    /// written before their placeholder is queued and not truncated while
    /// one is outstanding.
    pub fn read(s: &Spilled, max_payload: usize) -> Result<RemoteWs, String> {
        let mut buf = vec![0; s.len];
        s.file
            .read_exact_at(&mut buf, s.offset)
            .map_err(|e| format!("cannot read writeset {} back from the spool: {e}", s.seqno))?;
        let event = match decode_record(&buf, max_payload) {
            Ok(Decoded::Record(event, used)) if used == s.len => event,
            Ok(_) => return Err(format!("spooled writeset {} is truncated", s.seqno)),
            Err(e) => return Err(format!("spooled writeset {}: {e}", s.seqno)),
        };
        match event.kind {
            CachedKind::Writeset { ws, outcome } if event.seqno == s.seqno => {
                Ok(RemoteWs::new(s.seqno, ws, outcome))
            }
            _ => Err(format!(
                "the spool holds seqno {} where writeset {} should be",
                event.seqno, s.seqno
            )),
        }
    }

    /// An applier took a placeholder from the queue (`Inner::pop_event`).
    pub fn taken(&mut self, s: &Spilled) {
        if self.is_current(s) {
            self.queued = self.queued.saturating_sub(1);
            self.reading += 1;
        }
    }

    /// A taken placeholder was read back: with none left in the queue or
    /// being read, the file starts over.
    pub fn consumed(&mut self, s: &Spilled) {
        if self.is_current(s) {
            self.reading = self.reading.saturating_sub(1);
            self.truncate_if_unused();
        }
    }

    /// Whether a placeholder still belongs to the current queue.
    pub fn is_current(&self, s: &Spilled) -> bool {
        s.spool == self.id && s.generation == self.generation
    }

    /// The queue was cleared or filtered: `still` placeholders remain in
    /// it (those being read are still counted apart).
    pub fn recount(&mut self, still: usize) {
        self.queued = still;
        self.truncate_if_unused();
    }

    /// With nothing outstanding, the generation ends here (its
    /// placeholders no longer match) and the next spill job truncates
    /// the file, under no lock. Also after a job whose writesets had all
    /// been taken meanwhile: its records are of no use.
    pub fn truncate_if_unused(&mut self) {
        if self.in_flight || !self.written || self.queued > 0 || self.reading > 0 {
            return;
        }
        self.generation += 1;
        self.written = false;
        self.truncate_due = true;
    }

    /// Removes the file (clean close).
    pub fn remove(self) {
        drop(self.file);
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ist_replay::tests::ws as remote;

    const MAX: usize = 1 << 20;

    /// A writeset as a spill job's item.
    fn item(ws: &RemoteWs) -> (CachedEvent, usize) {
        let event = CachedEvent {
            history: [3; 16],
            seqno: ws.seqno,
            kind: ws.cached_kind(),
        };
        (event, ws.size)
    }

    /// What a round and the queue do for one writeset queued past the
    /// budget: the job, run, and the placeholder queued.
    fn spill(spool: &mut RecvSpool, ws: RemoteWs) -> Spilled {
        let job = spool.job(vec![item(&ws)]).expect("a job");
        let mut done = job.run();
        assert!(done.failure.is_none());
        if spool.accepts(&done) {
            spool.queued_one();
        }
        done.placed.pop().expect("written")
    }

    /// A round with nothing to spill: runs a truncation if one is due.
    fn idle_round(spool: &mut RecvSpool) {
        if let Some(job) = spool.job(Vec::new()) {
            let done = job.run();
            spool.accepts(&done);
        }
    }

    fn spool_len(dir: &Path) -> u64 {
        std::fs::metadata(dir.join(SPOOL_FILE)).unwrap().len()
    }

    #[test]
    fn writesets_come_back_as_spilled_and_the_file_starts_over_when_all_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = RecvSpool::create(dir.path()).unwrap();
        let a = spill(&mut spool, remote(5, 1000));
        let b = spill(&mut spool, remote(6, 10));
        assert_eq!(spool.outstanding(), 2);
        spool.taken(&b);
        let back = RecvSpool::read(&b, MAX).unwrap();
        assert_eq!((back.seqno, back.ws.data.len()), (6, 10));
        spool.consumed(&b);
        spool.taken(&a);
        let back = RecvSpool::read(&a, MAX).unwrap();
        assert_eq!(back.ws, remote(5, 1000).ws);
        assert_eq!(back.outcome, remote(5, 1000).outcome);
        spool.consumed(&a);
        assert_eq!(spool.outstanding(), 0);
        assert!(spool_len(dir.path()) > 0, "truncated by a round, not here");
        idle_round(&mut spool);
        assert_eq!(
            spool_len(dir.path()),
            0,
            "an empty queue leaves an empty spool"
        );
    }

    #[test]
    fn a_damaged_record_is_an_error_not_a_writeset() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = RecvSpool::create(dir.path()).unwrap();
        let a = spill(&mut spool, remote(5, 100));
        let f = OpenOptions::new()
            .write(true)
            .open(dir.path().join(SPOOL_FILE))
            .unwrap();
        f.write_all_at(&[0xff; 4], 40).unwrap();
        let Err(e) = RecvSpool::read(&a, MAX) else {
            panic!("a damaged record was read back as a writeset");
        };
        assert!(e.contains("checksum"), "{e}");
    }

    #[test]
    fn placeholders_of_a_cleared_queue_are_recognised() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = RecvSpool::create(dir.path()).unwrap();
        let old = spill(&mut spool, remote(5, 100));
        spool.recount(0);
        assert!(!spool.is_current(&old));
        let new = spill(&mut spool, remote(9, 100));
        spool.consumed(&old);
        assert_eq!(
            spool.outstanding(),
            1,
            "a stale placeholder counts for nothing"
        );
        assert_eq!(RecvSpool::read(&new, MAX).unwrap().seqno, 9);
    }

    #[test]
    fn a_writeset_being_read_survives_a_cleared_queue() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = RecvSpool::create(dir.path()).unwrap();
        let a = spill(&mut spool, remote(5, 100));
        spill(&mut spool, remote(6, 100));
        spool.taken(&a);
        spool.recount(0); // 6 dropped from the queue, 5 still being read
        assert_eq!(RecvSpool::read(&a, MAX).unwrap().seqno, 5);
        spool.consumed(&a);
        assert_eq!(spool.outstanding(), 0);
        idle_round(&mut spool);
        assert_eq!(spool_len(dir.path()), 0);
    }

    /// A job out while the queue is cleared: the generation ends after
    /// it, not under it, and the file then starts over.
    #[test]
    fn a_cleared_queue_starts_the_file_over_once_the_job_is_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = RecvSpool::create(dir.path()).unwrap();
        let old = spill(&mut spool, remote(5, 100));
        let job = spool.job(vec![item(&remote(6, 100))]).unwrap();
        spool.recount(0); // the queue was cleared meanwhile
        assert!(spool.is_current(&old), "no new generation under the job");
        let done = job.run();
        assert!(spool.accepts(&done));
        spool.truncate_if_unused();
        assert!(!spool.is_current(&old));
        idle_round(&mut spool);
        assert_eq!(spool_len(dir.path()), 0);
    }

    /// A new session's spool (generation 0 again) refuses what an earlier
    /// session's spool wrote at generation 0: a late job's placeholders
    /// and a placeholder an applier still holds.
    #[test]
    fn an_earlier_sessions_spool_counts_for_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut first = RecvSpool::create(dir.path()).unwrap();
        let held = spill(&mut first, remote(5, 100));
        first.taken(&held);
        let late = first.job(vec![item(&remote(6, 100))]).unwrap();
        let mut next = RecvSpool::create(dir.path()).unwrap();
        assert!(!next.accepts(&late.run()));
        assert!(!next.is_current(&held));
        next.consumed(&held);
        assert_eq!(next.outstanding(), 0);
        let mine = spill(&mut next, remote(7, 100));
        assert_eq!(RecvSpool::read(&mine, MAX).unwrap().seqno, 7);
        assert_eq!(
            RecvSpool::read(&held, MAX).unwrap().seqno,
            5,
            "its own file"
        );
    }
}
