//! A clean stop with `lockstep.leave_galera_cache=yes`, for a switch back
//! to Galera (ADR 0028): the writeset cache up to the saved position is
//! written in Galera 26.4's ring buffer format as `galera.cache`
//! (`lockstep_core::galera_cache::export`), so that Galera, started on
//! this data directory with `gcache.recover=yes` (its default), serves IST
//! from it to the nodes that stopped behind instead of a full SST.
//!
//! Lockstep's own files are kept beside it (`<name>.lockstep`, `.1`, and
//! the position they were left at in `<name>.lockstep.position`): if
//! Lockstep starts again at that same position, nothing ran in between and
//! they are put back (no conversion, nothing lost); at any other position
//! Galera ran, they are stale and removed, and Galera's file is read as
//! after any switch from Galera (`galera_import`).
//!
//! Order on disk: the Galera file is written to a temporary name and
//! synced, the position marker written, the native files renamed aside,
//! then the temporary file renamed into place and the directory synced; a
//! crash at any step leaves either the native files or the aside ones with
//! their marker.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use lockstep_core::galera_cache::export::{buffer_header, preamble, to_galera};
use lockstep_core::galera_cache::ring::{HEADER_LEN, RING_START};
use wsrep_abi::Gtid;

use crate::log::{info, warn};
use crate::storage::{replace_durably, sync_parent, Disk};
use crate::writeset_cache::WritesetCache;

/// Where the native files go while Galera's stands in their place.
pub struct Aside {
    pub current: PathBuf,
    pub previous: PathBuf,
    pub marker: PathBuf,
}

impl Aside {
    pub fn of(current: &Path) -> Aside {
        let name = current
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let dir = current.parent().unwrap_or(Path::new("."));
        Aside {
            current: dir.join(format!("{name}.lockstep")),
            previous: dir.join(format!("{name}.lockstep.1")),
            marker: dir.join(format!("{name}.lockstep.position")),
        }
    }
}

/// The export's temporary file beside `current`.
fn export_tmp(current: &Path) -> PathBuf {
    current.with_extension("cache.galera-export")
}

/// At start, before the cache opens: temporary files a crash left, and
/// the native files set aside by an export, which come back when the node
/// starts at the position they were left at (also when a crash cut their
/// return short) and go otherwise. A marker that cannot be read counts as
/// another position: the native files are then dropped, never trusted.
pub fn restore_aside(current: &Path, previous: &Path, position: Gtid) {
    let _ = fs::remove_file(export_tmp(current));
    let _ = fs::remove_file(crate::galera_import::import_tmp(current));
    let aside = Aside::of(current);
    if !aside.marker.exists() {
        // Files are set aside only once the marker is durable: without it
        // there is nothing to restore (a crash before it left the native
        // files in place).
        return;
    }
    let left_at = fs::read_to_string(&aside.marker).unwrap_or_default();
    let same = left_at.trim() == format!("{}:{}", position.uuid, position.seqno);
    if same && (aside.current.exists() || aside.previous.exists()) {
        let restored = (|| -> io::Result<()> {
            if aside.current.exists() {
                fs::rename(&aside.current, current)?;
            }
            if aside.previous.exists() {
                fs::rename(&aside.previous, previous)?;
            }
            sync_parent(current)
        })();
        match restored {
            Ok(()) => info!(
                "writeset cache: Lockstep's own files, set aside at {} for Galera, are back \
                 (nothing ran in between)",
                left_at.trim()
            ),
            Err(e) => {
                // The marker stays: the next start tries again.
                warn!("writeset cache: putting Lockstep's files back failed: {e}");
                return;
            }
        }
    } else if !same {
        info!(
            "writeset cache: the files Lockstep set aside at {} are stale (this node is at \
             {position}): removed; Galera's cache is read instead",
            left_at.trim()
        );
        let _ = fs::remove_file(&aside.current);
        let _ = fs::remove_file(&aside.previous);
    }
    let _ = fs::remove_file(&aside.marker);
    let _ = sync_parent(current);
}

/// Writes the cache's events up to `position` as Galera's ring buffer
/// (at most `size` bytes of buffers, the newest) in place of the native
/// files, which go aside. Returns the seqnos written, or `None` when
/// there was nothing Galera could use. Two passes over the cache: the
/// first sizes each buffer, so memory holds one event at a time.
pub fn export(
    cache: &mut WritesetCache,
    position: Gtid,
    size: u64,
) -> io::Result<Option<(i64, i64)>> {
    let Some(first) = cache.first() else {
        return Ok(None);
    };
    // Pass 1: where the run Galera can take starts. A record it cannot
    // take restarts the run after it; the oldest buffers go while the
    // rest exceeds `size`.
    let mut sizes: std::collections::VecDeque<(i64, u64)> = Default::default();
    let mut bytes = 0u64;
    for ev in cache
        .reader(position.uuid, first - 1, position.seqno)
        .map_err(io::Error::other)?
    {
        let ev = ev.map_err(io::Error::other)?;
        match to_galera(&ev) {
            Some((_, _, payload)) => {
                let len = (HEADER_LEN + payload.len() as u64).next_multiple_of(8);
                bytes += len;
                sizes.push_back((ev.seqno, len));
                while bytes + HEADER_LEN > size {
                    let Some((_, old)) = sizes.pop_front() else {
                        break;
                    };
                    bytes -= old;
                }
            }
            None => {
                sizes.clear();
                bytes = 0;
            }
        }
    }
    let (Some(&(lo, _)), Some(&(hi, _))) = (sizes.front(), sizes.back()) else {
        return Ok(None);
    };
    if hi != position.seqno {
        return Ok(None);
    }
    let current = cache.current_path().to_path_buf();
    let previous = cache.previous_path().to_path_buf();
    let tmp = export_tmp(&current);
    {
        let f = File::create(&tmp)?;
        let mut w = BufWriter::new(&f);
        w.write_all(&preamble(position.uuid.as_bytes(), lo, hi))?;
        // Pass 2: the buffers from `lo`.
        for ev in cache
            .reader(position.uuid, lo - 1, position.seqno)
            .map_err(io::Error::other)?
        {
            let ev = ev.map_err(io::Error::other)?;
            let (kind, flags, payload) = to_galera(&ev).ok_or_else(|| {
                io::Error::other(format!("seqno {} changed between two reads", ev.seqno))
            })?;
            w.write_all(&buffer_header(ev.seqno, kind, flags, payload.len()))?;
            w.write_all(&payload)?;
            let pad = (HEADER_LEN as usize + payload.len()).next_multiple_of(8)
                - (HEADER_LEN as usize + payload.len());
            w.write_all(&[0u8; 8][..pad])?;
        }
        w.write_all(&[0u8; HEADER_LEN as usize])?;
        w.flush()?;
        drop(w);
        // Galera sizes the file to gcache.size itself; a sparse tail here
        // saves writing zeros. Pass 2 wrote what pass 1 sized, which fits.
        let written = f.metadata()?.len();
        let wanted = size.saturating_add(RING_START + HEADER_LEN);
        if written > wanted {
            return Err(io::Error::other(format!(
                "the Galera file grew to {written} bytes, above {wanted}"
            )));
        }
        f.set_len(wanted)?;
        f.sync_all()?;
    }
    // The marker is durable before anything moves: a restart finds either
    // the native files untouched, or the marker that brings them back.
    let aside = Aside::of(&current);
    replace_durably(
        &Disk,
        &aside.marker,
        format!("{}:{}\n", position.uuid, position.seqno).as_bytes(),
    )?;
    fs::rename(&current, &aside.current)?;
    if previous.exists() {
        fs::rename(&previous, &aside.previous)?;
    }
    fs::rename(&tmp, &current)?;
    sync_parent(&current)?;
    info!(
        "writeset cache written in Galera's format for a switch back to Galera: seqnos \
         {lo}..{hi} of {} in {} (Lockstep's own files set aside)",
        position.uuid,
        current.display()
    );
    Ok(Some((lo, hi)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstep_core::writeset_cache::CachedEvent;
    use wsrep_abi::Uuid;

    const H: [u8; 16] = [4; 16];
    const MAX: usize = 1 << 20;

    fn at(seqno: i64) -> Gtid {
        Gtid {
            uuid: Uuid::from_bytes(H),
            seqno,
        }
    }

    fn ev(seqno: i64) -> CachedEvent {
        CachedEvent {
            history: H,
            seqno,
            kind: crate::ist_replay::tests::ws_kind(seqno, 3000),
        }
    }

    /// As the provider opens it: set-aside files first.
    fn open(dir: &Path, position: Gtid) -> WritesetCache {
        restore_aside(
            &dir.join("galera.cache"),
            &dir.join("galera.cache.1"),
            position,
        );
        WritesetCache::open(dir, "galera.cache", 1 << 20, MAX, true, position).expect("open")
    }

    /// A new cache in `dir` holding seqnos 1..=20.
    fn twenty(dir: &Path) -> WritesetCache {
        let mut c = open(dir, at(0));
        for s in 1..=20 {
            c.append(&ev(s)).unwrap();
        }
        c
    }

    fn seqnos(c: &mut WritesetCache, last: i64) -> Vec<i64> {
        let first = c.first().expect("not empty");
        c.reader(Uuid::from_bytes(H), first - 1, last)
            .expect("covered")
            .map(|e| e.expect("readable").seqno)
            .collect()
    }

    #[test]
    fn left_for_galera_then_back_to_lockstep_at_the_same_position() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = twenty(dir.path());
        c.flush().unwrap();
        let native = std::fs::read(dir.path().join("galera.cache")).unwrap();
        assert!(native.len() > 20 * 3000, "{} bytes", native.len());
        // 1 MiB of gcache.size holds about 300 of these: all 20 go over.
        assert_eq!(export(&mut c, at(20), 1 << 20).unwrap(), Some((1, 20)));
        drop(c);
        assert!(crate::galera_import::is_galera_cache(
            &dir.path().join("galera.cache")
        ));
        let aside = std::fs::read(dir.path().join("galera.cache.lockstep")).unwrap();
        assert!(
            aside == native,
            "Lockstep's own file is set aside as it was"
        );
        // Lockstep again, nothing in between: its own file comes back.
        let mut c = open(dir.path(), at(20));
        assert_eq!(seqnos(&mut c, 20), (1..=20).collect::<Vec<_>>());
        drop(c);
        let back = std::fs::read(dir.path().join("galera.cache")).unwrap();
        assert!(back == native, "the same file is back");
        assert!(!dir.path().join("galera.cache.lockstep.position").exists());
    }

    #[test]
    fn a_crash_in_the_middle_of_setting_aside_loses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = twenty(dir.path());
        c.flush().unwrap();
        drop(c);
        // As export leaves it when the power goes after the marker and the
        // first rename: no galera.cache at all, a half-written export.
        let current = dir.path().join("galera.cache");
        let aside = Aside::of(&current);
        std::fs::write(&aside.marker, format!("{}:20\n", Uuid::from_bytes(H))).unwrap();
        std::fs::rename(&current, &aside.current).unwrap();
        std::fs::write(export_tmp(&current), b"Version: 2\n").unwrap();
        let mut c = open(dir.path(), at(20));
        assert_eq!(seqnos(&mut c, 20), (1..=20).collect::<Vec<_>>());
        assert!(
            !export_tmp(&current).exists(),
            "the half-written export is gone"
        );
        assert!(!aside.marker.exists());
    }

    #[test]
    fn after_galera_ran_its_cache_is_read_and_the_old_files_go() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = twenty(dir.path());
        // Only the newest fit: gcache.size of 32 KiB holds about ten.
        let (lo, hi) = export(&mut c, at(20), 32 << 10).unwrap().unwrap();
        assert_eq!(hi, 20);
        assert!(lo > 1 && lo < 20, "the oldest were left out: {lo}");
        drop(c);
        // Galera ran and stopped at 20 again (a stand-in: its file is the
        // one exported, and the node's position moved off the marker's).
        std::fs::write(dir.path().join("galera.cache.lockstep.position"), "x:1\n").unwrap();
        let mut c = open(dir.path(), at(20));
        assert_eq!(seqnos(&mut c, 20), (lo..=20).collect::<Vec<_>>());
        assert!(!dir.path().join("galera.cache.lockstep").exists());
        assert!(!dir.path().join("galera.cache.lockstep.position").exists());
    }
}
