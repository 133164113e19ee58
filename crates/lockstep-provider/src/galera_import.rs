//! A Galera `galera.cache` found where Lockstep keeps its writeset cache,
//! at the first start after a switch from Galera (issue 36): the run of
//! ordered events it holds up to this node's position is converted into
//! Lockstep's cache format (`lockstep_core::galera_cache`), and the file
//! replaced by the converted one. The node can then serve IST to nodes
//! that stopped behind it, as Galera would have from its own cache with
//! `gcache.recover=yes`, instead of a full SST.
//!
//! The conversion goes to a temporary file that is synced and renamed over
//! Galera's, so a crash leaves one or the other. Anything it cannot use
//! (another history, a run that does not reach the position, a bad
//! buffer) is logged, and the cache starts empty as before (joiners that
//! need events take a full SST). Galera's file is not kept: a switch back
//! to Galera finds Lockstep's format, which Galera resets (README
//! "Switching from Galera").

use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

use lockstep_core::galera_cache::{self, ReadAt};
use lockstep_core::writeset_cache::{encode_file_header, encode_record};
use wsrep_abi::{Gtid, Uuid};

use crate::log::{info, warn};

struct GaleraFile(File, u64);

impl ReadAt for GaleraFile {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), String> {
        self.0.read_exact_at(buf, offset).map_err(|e| e.to_string())
    }
    fn file_len(&self) -> u64 {
        self.1
    }
}

/// What an import did, for the log and for tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imported {
    pub first: i64,
    pub last: i64,
    pub writesets: usize,
    pub failed: usize,
    pub views: usize,
}

/// The conversion's temporary file beside `path` (a crash may leave it;
/// `galera_export::remove_leftovers` deletes it at the next start).
pub fn import_tmp(path: &Path) -> std::path::PathBuf {
    path.with_extension("cache.galera-import")
}

/// Whether `path` starts like Galera's ring buffer (its text preamble).
pub fn is_galera_cache(path: &Path) -> bool {
    let mut head = [0u8; 8];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok()
        && &head == b"Version:"
}

/// Converts Galera's cache at `path` in place, keeping the events up to
/// `position`. `max_payload` bounds one buffer. Returns what it kept, or
/// `None` when nothing was usable (the reason is logged; `path` is left to
/// the caller, which starts the cache over).
pub fn import(path: &Path, position: Gtid, max_payload: usize) -> io::Result<Option<Imported>> {
    let file = File::open(path)?;
    let len = file.metadata()?.len();
    let galera = GaleraFile(file, len);
    let scan = match galera_cache::scan_up_to(&galera, position.seqno) {
        Ok(s) => s,
        Err(e) => {
            warn!("{}: {e}; the writeset cache starts empty", path.display());
            return Ok(None);
        }
    };
    let history = Uuid::from_bytes(scan.preamble.gid);
    if history != position.uuid {
        info!(
            "{}: Galera's cache is of history {history}, this node's position is {position}: \
             not used, the writeset cache starts empty",
            path.display()
        );
        return Ok(None);
    }
    let run = &scan.run;
    if run.last().map(|b| b.seqno) != Some(position.seqno) {
        info!(
            "{}: Galera's cache holds seqnos {:?}..{:?}, which do not reach this node's \
             position {position}: not used, the writeset cache starts empty",
            path.display(),
            scan.run.first().map(|b| b.seqno),
            scan.run.last().map(|b| b.seqno),
        );
        return Ok(None);
    }
    let tmp = import_tmp(path);
    let mut out = BufWriter::new(File::create(&tmp)?);
    out.write_all(&encode_file_header())?;
    let mut done = Imported {
        first: run[0].seqno,
        last: position.seqno,
        writesets: 0,
        failed: 0,
        views: 0,
    };
    let mut payload = Vec::new();
    let mut record = Vec::new();
    // Written oldest first; a buffer that cannot be used restarts the
    // file after it, so what is kept stays one gap-free run up to the
    // position.
    for b in run {
        let converted = if b.payload_len as usize > max_payload {
            Err(format!(
                "{} bytes, above the bound of {max_payload}",
                b.payload_len
            ))
        } else {
            payload.resize(b.payload_len as usize, 0);
            galera.read_at(b.payload_at, &mut payload).and_then(|()| {
                galera_cache::to_cached(b, &payload, scan.preamble.gid).map_err(|e| e.to_string())
            })
        };
        match converted {
            Ok(ev) => {
                record.clear();
                encode_record(&ev, &mut record);
                out.write_all(&record)?;
                match &ev.kind {
                    lockstep_core::writeset_cache::CachedKind::View { .. } => done.views += 1,
                    lockstep_core::writeset_cache::CachedKind::Writeset { outcome, .. } => {
                        if outcome.is_pass() {
                            done.writesets += 1;
                        } else {
                            done.failed += 1;
                        }
                    }
                    lockstep_core::writeset_cache::CachedKind::End => {}
                }
            }
            Err(why) => {
                warn!(
                    "{}: Galera's buffer of seqno {} cannot be used ({why}); the imported \
                     cache starts after it",
                    path.display(),
                    b.seqno
                );
                // Start the file over on the same handle (a new writer
                // would let the old one flush its buffer at the old
                // offset when dropped).
                out.flush()?;
                out.get_ref().set_len(0)?;
                out.seek(SeekFrom::Start(0))?;
                out.write_all(&encode_file_header())?;
                done = Imported {
                    first: b.seqno + 1,
                    last: position.seqno,
                    writesets: 0,
                    failed: 0,
                    views: 0,
                };
            }
        }
    }
    let f = out.into_inner().map_err(|e| e.into_error())?;
    f.sync_all()?;
    drop(f);
    if done.first > done.last {
        let _ = fs::remove_file(&tmp);
        return Ok(None);
    }
    fs::rename(&tmp, path)?;
    crate::storage::sync_parent(path)?;
    info!(
        "{}: Galera's writeset cache (ring buffer version {}) converted to Lockstep's: seqnos \
         {}..{} of {history} ({} writesets, {} failed certification in Galera, {} views) now \
         serve IST; Galera's file is replaced",
        path.display(),
        scan.preamble.version,
        done.first,
        done.last,
        done.writesets,
        done.failed,
        done.views
    );
    Ok(Some(done))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_files_are_not_galera_caches() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("galera.cache");
        fs::write(&p, b"LSWC\x01\0\0\0").unwrap();
        assert!(!is_galera_cache(&p));
        fs::write(&p, b"Version: 2\nGID: x\n").unwrap();
        assert!(is_galera_cache(&p));
        assert!(!is_galera_cache(&dir.path().join("missing")));
        let pos = Gtid {
            uuid: Uuid::from_bytes([1; 16]),
            seqno: 5,
        };
        assert_eq!(import(&p, pos, 1 << 20).unwrap(), None, "too short to scan");
    }
}
