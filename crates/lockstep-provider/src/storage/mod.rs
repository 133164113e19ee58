//! The provider's files go through [`Fs`], the file-system primitives they
//! need, so that tests can cut the real code at any step and drop what was
//! not yet durable, as a power loss does ([`power_loss::SimFs`]); a process
//! kill keeps the page cache and tells nothing about that.
//!
//! - The small state files (`grastate.dat`, `gvwstate.dat`, the
//!   commit-bypass marker) are replaced whole by [`replace_durably`] (a
//!   temporary file, fsync, rename, fsync of the directory), so after a
//!   crash at any point each holds its old content or its new one, never a
//!   mix, and once the call returned, the new one.
//! - The writeset cache (`writeset_cache`) appends to its files
//!   ([`Fs::open_append`]), reads them back ([`Fs::open_read`]), cuts a
//!   damaged tail ([`Fs::set_len`]) and rotates them by rename.

pub mod marker;
#[cfg(test)]
pub mod power_loss;

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// The primitives, as POSIX gives them: nothing is durable until synced.
pub trait Fs: Send + Sync {
    /// The file's bytes, at most `limit` + 1 of them (so an oversized file
    /// shows), `None` if it does not exist.
    fn read(&self, path: &Path, limit: usize) -> io::Result<Option<Vec<u8>>>;
    /// Creates or truncates the file and writes `bytes` (page cache only).
    fn write_file(&self, path: &Path, bytes: &[u8]) -> io::Result<()>;
    /// Makes the file's content durable (fsync).
    fn sync_file(&self, path: &Path) -> io::Result<()>;
    /// Renames atomically; the new name is durable once the directory is
    /// synced.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes the name; durable once the directory is synced. A missing
    /// file is not an error.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Makes the directory's names durable (fsync of the directory).
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// The names of the files in `dir` (empty if it does not exist).
    fn list(&self, dir: &Path) -> io::Result<Vec<std::ffi::OsString>>;
    /// The file's length, `None` if it does not exist.
    fn len(&self, path: &Path) -> io::Result<Option<u64>>;
    /// Cuts the file to `len` bytes (durable once the file is synced).
    fn set_len(&self, path: &Path, len: u64) -> io::Result<()>;
    /// Opens the file to append to it: created, or emptied, if `truncate`;
    /// otherwise it must exist. What is appended is in the page cache
    /// until [`AppendFile::sync`].
    fn open_append(&self, path: &Path, truncate: bool) -> io::Result<Box<dyn AppendFile>>;
    /// Opens the file to read it from byte `offset`.
    fn open_read(&self, path: &Path, offset: u64) -> io::Result<Box<dyn Read + Send>>;
}

/// A file open for appending ([`Fs::open_append`]): records go at its
/// append position, which starts at the file's end and may fall behind it
/// once [`AppendFile::reserve`] has added zeros there.
pub trait AppendFile: Send {
    /// Writes `bytes` at the append position and moves it past them.
    fn append(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// Makes what was written durable (fdatasync).
    fn sync(&mut self) -> io::Result<()>;
    /// Extends the file with zeros up to `len` bytes (nothing if it is
    /// that long already), leaving the append position where it is. An
    /// append into written zeros changes no file size and no block map,
    /// so its fdatasync writes the data alone, not the file system's
    /// journal too (ADR 0026: the synced cache's cost).
    fn reserve(&mut self, len: u64) -> io::Result<()>;
}

/// The temporary name a file is written under before its rename.
pub fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Makes the names in `path`'s directory durable: after a rename or a
/// new file there (the writeset cache's files, the Galera cache's
/// conversions).
pub fn sync_parent(path: &Path) -> io::Result<()> {
    sync_parent_on(&Disk, path)
}

/// [`sync_parent`] on the file system `fs`.
pub fn sync_parent_on(fs: &dyn Fs, path: &Path) -> io::Result<()> {
    fs.sync_dir(parent(path))
}

/// Replaces `path` with `bytes` so that a crash at any step leaves the old
/// content or the new one, and a return means the new one is durable.
pub fn replace_durably(fs: &dyn Fs, path: &Path, bytes: &[u8]) -> io::Result<()> {
    crate::state_lock::expect_unlocked("a durable file write");
    let tmp = temp_path(path);
    fs.write_file(&tmp, bytes)?;
    fs.sync_file(&tmp)?;
    fs.rename(&tmp, path)?;
    fs.sync_dir(parent(path))
}

/// Removes `path` durably.
pub fn remove_durably(fs: &dyn Fs, path: &Path) -> io::Result<()> {
    crate::state_lock::expect_unlocked("a durable file removal");
    fs.remove(path)?;
    fs.sync_dir(parent(path))
}

/// Whether a marker file (one that sends the node to a full state
/// transfer: the commit bypass's, `diverged`'s) is at `path`. One that
/// cannot be read counts as there: the safe side.
pub fn marker_present(fs: &dyn Fs, path: &Path) -> bool {
    !matches!(fs.read(path, 0), Ok(None))
}

/// Removes a marker durably. A failure is logged, not returned: the
/// marker then stays, which errs on the safe side at the next start.
pub fn remove_marker(fs: &dyn Fs, path: &Path) {
    if let Err(e) = remove_durably(fs, path) {
        crate::log::warn!("cannot remove {}: {e}", path.display());
    }
}

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct Disk;

impl Fs for Disk {
    fn read(&self, path: &Path, limit: usize) -> io::Result<Option<Vec<u8>>> {
        match std::fs::File::open(path) {
            Ok(f) => {
                let mut bytes = Vec::new();
                f.take(limit as u64 + 1).read_to_end(&mut bytes)?;
                Ok(Some(bytes))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn write_file(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        std::fs::File::create(path)?.write_all(bytes)
    }

    fn sync_file(&self, path: &Path) -> io::Result<()> {
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)?
            .sync_all()
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        match std::fs::remove_file(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            r => r,
        }
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        std::fs::File::open(dir)?.sync_all()
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<std::ffi::OsString>> {
        match std::fs::read_dir(dir) {
            Ok(entries) => entries.map(|e| e.map(|e| e.file_name())).collect(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    fn len(&self, path: &Path) -> io::Result<Option<u64>> {
        match std::fs::metadata(path) {
            Ok(m) => Ok(Some(m.len())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn set_len(&self, path: &Path, len: u64) -> io::Result<()> {
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)?
            .set_len(len)
    }

    fn open_append(&self, path: &Path, truncate: bool) -> io::Result<Box<dyn AppendFile>> {
        let file = if truncate {
            std::fs::File::create(path)?
        } else {
            std::fs::OpenOptions::new().write(true).open(path)?
        };
        // Not O_APPEND: records overwrite the zeros `reserve` wrote.
        let position = file.metadata()?.len();
        Ok(Box::new(DiskFile { file, position }))
    }

    fn open_read(&self, path: &Path, offset: u64) -> io::Result<Box<dyn Read + Send>> {
        use std::io::Seek;
        let mut f = std::fs::File::open(path)?;
        f.seek(io::SeekFrom::Start(offset))?;
        Ok(Box::new(f))
    }
}

/// [`Disk`]'s [`AppendFile`].
struct DiskFile {
    file: std::fs::File,
    /// Where the next append goes.
    position: u64,
}

/// Zeros written per write(2) by [`AppendFile::reserve`].
const ZEROS: usize = 1 << 20;

impl AppendFile for DiskFile {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        self.file.write_all_at(bytes, self.position)?;
        self.position += bytes.len() as u64;
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn reserve(&mut self, len: u64) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        // Written zeros, not fallocate(2) nor a hole: blocks allocated as
        // unwritten (or not at all) change the block map again when the
        // records land in them, and each fdatasync would commit the
        // journal once more.
        let mut end = self.file.metadata()?.len();
        let zeros = vec![0u8; ZEROS.min(len.saturating_sub(end) as usize)];
        while end < len {
            let n = zeros.len().min((len - end) as usize);
            self.file.write_all_at(&zeros[..n], end)?;
            end += n as u64;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_disk_replaces_reads_and_removes_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("state.dat");
        assert_eq!(Disk.read(&p, 10).unwrap(), None);
        replace_durably(&Disk, &p, b"one").unwrap();
        replace_durably(&Disk, &p, b"two!").unwrap();
        assert_eq!(Disk.read(&p, 10).unwrap().as_deref(), Some(&b"two!"[..]));
        assert_eq!(
            Disk.read(&p, 2).unwrap().map(|b| b.len()),
            Some(3),
            "limit + 1"
        );
        assert!(!temp_path(&p).exists(), "the temporary file was renamed");
        remove_durably(&Disk, &p).unwrap();
        remove_durably(&Disk, &p).unwrap();
        assert_eq!(Disk.read(&p, 10).unwrap(), None);
    }
}
