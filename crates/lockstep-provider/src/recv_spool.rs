//! Writesets queued for this node's appliers beyond a memory budget wait
//! on disk instead of in RAM.
//!
//! Flow control keeps a synced node's receive queue short, but three kinds
//! of node queue by design: a joiner waiting for a long SST (the server
//! applies nothing until the state has arrived), a donor, and a desynced
//! node (both exempt from flow control, as in Galera). Each of them queues
//! every writeset the group orders meanwhile. Galera keeps that queue in
//! gcache, whose page files spill to disk; here, once the writesets in the
//! queue hold [`MEMORY_BUDGET`] bytes (so memory holds at most that plus
//! the one writeset that crossed it), the next one is appended to
//! `lockstep_recv_spool.dat` in the data directory and the queue keeps a
//! small placeholder ([`Spilled`]) in its place. The applier whose turn it
//! is reads the writeset back (outside the provider's lock) and applies it
//! like any other.
//!
//! Records use the writeset cache's record format (length, CRC-32 of the
//! payload, payload; `docs/formats.md`), appended in queue order; a record
//! that fails its checksum or names another seqno is an inconsistency
//! (the node stops, it does not skip a writeset). The file is truncated
//! whenever no placeholder is left in the queue or being read back by an
//! applier, and created empty at
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
use std::sync::Arc;

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
    /// The spool it was written to: a placeholder left over from a queue
    /// that was cleared since is recognised and ignored.
    generation: u64,
    file: Arc<File>,
}

pub struct RecvSpool {
    path: PathBuf,
    file: Arc<File>,
    /// Where the next record goes.
    end: u64,
    /// Placeholders in the queue.
    queued: usize,
    /// Placeholders an applier took from the queue and has not read back
    /// yet: the file is not truncated under them.
    reading: usize,
    generation: u64,
}

impl RecvSpool {
    /// Creates (or empties) the spool file in `dir`.
    pub fn create(dir: &Path) -> io::Result<RecvSpool> {
        let path = dir.join(SPOOL_FILE);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        Ok(RecvSpool {
            path,
            file: Arc::new(file),
            end: 0,
            queued: 0,
            reading: 0,
            generation: 0,
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

    /// Appends `ws` and returns its placeholder.
    pub fn spill(&mut self, history: [u8; 16], ws: &RemoteWs) -> io::Result<Spilled> {
        let mut record = Vec::with_capacity(ws.size + 256);
        let event = CachedEvent {
            history,
            seqno: ws.seqno,
            kind: CachedKind::Writeset {
                ws: ws.ws.clone(),
                outcome: ws.outcome.clone(),
            },
        };
        encode_record(&event, &mut record);
        self.file.write_all_at(&record, self.end)?;
        let spilled = Spilled {
            seqno: ws.seqno,
            bytes: ws.size,
            offset: self.end,
            len: record.len(),
            generation: self.generation,
            file: self.file.clone(),
        };
        self.end += record.len() as u64;
        self.queued += 1;
        Ok(spilled)
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
        s.generation == self.generation
    }

    /// The queue was cleared or filtered: `still` placeholders remain in
    /// it (those being read are still counted apart).
    pub fn recount(&mut self, still: usize) {
        self.queued = still;
        self.truncate_if_unused();
    }

    fn truncate_if_unused(&mut self) {
        if self.end == 0 || self.queued > 0 || self.reading > 0 {
            return;
        }
        // Placeholders of the old contents (dropped from the queue) no
        // longer match.
        self.generation += 1;
        self.end = 0;
        if let Err(e) = self.file.set_len(0) {
            crate::log::warn!("cannot truncate {}: {e}", self.path.display());
        }
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

    #[test]
    fn writesets_come_back_as_spilled_and_the_file_starts_over_when_all_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = RecvSpool::create(dir.path()).unwrap();
        let a = spool.spill([3; 16], &remote(5, 1000)).unwrap();
        let b = spool.spill([3; 16], &remote(6, 10)).unwrap();
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
        let len = std::fs::metadata(dir.path().join(SPOOL_FILE))
            .unwrap()
            .len();
        assert_eq!(len, 0, "an empty queue leaves an empty spool");
    }

    #[test]
    fn a_damaged_record_is_an_error_not_a_writeset() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = RecvSpool::create(dir.path()).unwrap();
        let a = spool.spill([3; 16], &remote(5, 100)).unwrap();
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
        let old = spool.spill([3; 16], &remote(5, 100)).unwrap();
        spool.recount(0);
        assert!(!spool.is_current(&old));
        let new = spool.spill([3; 16], &remote(9, 100)).unwrap();
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
        let a = spool.spill([3; 16], &remote(5, 100)).unwrap();
        spool.spill([3; 16], &remote(6, 100)).unwrap();
        spool.taken(&a);
        spool.recount(0); // 6 dropped from the queue, 5 still being read
        assert_eq!(RecvSpool::read(&a, MAX).unwrap().seqno, 5);
        spool.consumed(&a);
        assert_eq!(spool.outstanding(), 0);
        let len = std::fs::metadata(dir.path().join(SPOOL_FILE))
            .unwrap()
            .len();
        assert_eq!(len, 0);
    }
}
