//! The file system's state and the model's rules: a passthrough to the
//! backing directory in which file data waits in [`Overlay`]s until fsync
//! or writeback, and name changes are done at once with their undo kept
//! in the [`Journal`] until the directory's fsync. One lock over it all
//! (`Shared`): this is a test rig, and one lock keeps a cut atomic
//! against every operation in flight.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{self, File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fuser::{Errno, FileAttr, FileType, INodeNo, Request};

use crate::faults::Faults;
use crate::journal::{Journal, Undo};
use crate::overlay::Overlay;
/// Where unlinked and replaced files wait as hard links until their
/// directory is synced; hidden from the mount.
pub const STASH: &str = ".lazyfs-stash";

pub(crate) const TTL: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
pub struct Options {
    /// Writeback makes changes older than this durable, as the kernel's
    /// `dirty_expire` does.
    pub writeback_age: Duration,
    /// Bound on unsynced file data held in memory; past it the oldest
    /// files are written back, as under memory pressure.
    pub max_unsynced: usize,
    /// A file's fsync also makes durable every name change up to the
    /// last one in its directory (its own creation included), as ext4's
    /// and XFS's journals do; POSIX promises only a directory's fsync.
    /// The servers rely on it (InnoDB does not fsync the directory of a
    /// new tablespace), so the runs keep it on; the strict model is for
    /// the crate's own tests.
    pub fsync_commits_names: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            writeback_age: Duration::from_secs(5),
            max_unsynced: 512 << 20,
            fsync_commits_names: true,
        }
    }
}

/// Counters, for tests and the run's log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub writes: u64,
    pub fsyncs: u64,
    pub dir_fsyncs: u64,
    pub unsynced_bytes: u64,
    pub pending_names: u64,
    pub injected_errors: u64,
}

/// What a cut threw away.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CutReport {
    pub dropped_bytes: u64,
    pub undone_names: u64,
    /// The file and offset of a torn page, and how many of its new bytes
    /// reached the disk.
    pub torn: Option<(PathBuf, u64, usize)>,
    /// Undo steps that failed (a name changed again since): logged, the
    /// cut goes on.
    pub errors: Vec<String>,
}

pub(crate) struct FileState {
    pub(crate) fd: File,
    pub(crate) overlay: Option<Overlay>,
    pub(crate) open: u32,
}

pub(crate) struct State {
    pub(crate) root: PathBuf,
    pub(crate) root_ino: u64,
    /// Backing inode number to its path relative to the root.
    pub(crate) paths: HashMap<u64, PathBuf>,
    pub(crate) files: HashMap<u64, FileState>,
    /// Open handle to (inode, opened with O_APPEND).
    pub(crate) handles: HashMap<u64, (u64, bool)>,
    pub(crate) next_fh: u64,
    pub(crate) journal: Journal,
    pub(crate) faults: Faults,
    /// After a cut every operation fails, until the mount is gone.
    pub(crate) dead: bool,
    pub(crate) unsynced: usize,
    pub(crate) last_written: Option<u64>,
    pub(crate) stash_seq: u64,
    pub(crate) stats: Stats,
}

pub(crate) struct Shared {
    state: Mutex<State>,
    pub(crate) opts: Options,
}

impl Shared {
    pub(crate) fn new(root: &Path, opts: Options) -> io::Result<Shared> {
        let root = root.canonicalize()?;
        let stash = root.join(STASH);
        if stash.exists() {
            fs::remove_dir_all(&stash)?;
        }
        fs::create_dir(&stash)?;
        let root_ino = fs::metadata(&root)?.ino();
        let mut paths = HashMap::new();
        paths.insert(root_ino, PathBuf::new());
        Ok(Shared {
            state: Mutex::new(State {
                root,
                root_ino,
                paths,
                files: HashMap::new(),
                handles: HashMap::new(),
                next_fh: 1,
                journal: Journal::default(),
                faults: Faults::none(),
                dead: false,
                unsynced: 0,
                last_written: None,
                stash_seq: 0,
                stats: Stats::default(),
            }),
            opts,
        })
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

pub(crate) fn errno(e: io::Error) -> Errno {
    Errno::from(e)
}

pub(crate) fn err(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

fn kind(meta: &Metadata) -> FileType {
    FileType::from_std(meta.file_type()).unwrap_or(FileType::RegularFile)
}

fn time(secs: i64, nanos: i64) -> SystemTime {
    if secs >= 0 {
        UNIX_EPOCH + Duration::new(secs as u64, nanos.clamp(0, 999_999_999) as u32)
    } else {
        UNIX_EPOCH
    }
}

impl State {
    pub(crate) fn abs(&self, rel: &Path) -> PathBuf {
        self.root.join(rel)
    }

    pub(crate) fn fuse_ino(&self, ino: u64) -> INodeNo {
        if ino == self.root_ino {
            INodeNo::ROOT
        } else {
            INodeNo(ino)
        }
    }

    pub(crate) fn backing_ino(&self, ino: INodeNo) -> u64 {
        if ino == INodeNo::ROOT {
            self.root_ino
        } else {
            ino.0
        }
    }

    pub(crate) fn alive(&self) -> io::Result<()> {
        if self.dead {
            Err(err(nix::libc::EIO))
        } else {
            Ok(())
        }
    }

    pub(crate) fn path(&self, ino: INodeNo) -> io::Result<PathBuf> {
        self.alive()?;
        self.paths
            .get(&self.backing_ino(ino))
            .cloned()
            .ok_or_else(|| err(nix::libc::ENOENT))
    }

    pub(crate) fn child(&self, parent: INodeNo, name: &OsStr) -> io::Result<PathBuf> {
        let dir = self.path(parent)?;
        if dir.as_os_str().is_empty() && name == STASH {
            return Err(err(nix::libc::ENOENT));
        }
        Ok(dir.join(name))
    }

    pub(crate) fn attr(&self, meta: &Metadata) -> FileAttr {
        let ino = meta.ino();
        let size = self
            .files
            .get(&ino)
            .and_then(|f| f.overlay.as_ref())
            .map_or(meta.len(), Overlay::size);
        FileAttr {
            ino: self.fuse_ino(ino),
            size,
            blocks: size.div_ceil(512),
            atime: time(meta.atime(), meta.atime_nsec()),
            mtime: time(meta.mtime(), meta.mtime_nsec()),
            ctime: time(meta.ctime(), meta.ctime_nsec()),
            crtime: UNIX_EPOCH,
            kind: kind(meta),
            perm: (meta.mode() & 0o7777) as u16,
            nlink: meta.nlink() as u32,
            uid: meta.uid(),
            gid: meta.gid(),
            rdev: meta.rdev() as u32,
            blksize: 4096,
            flags: 0,
        }
    }

    /// The entry at `rel`, remembered under its inode number.
    pub(crate) fn entry(&mut self, rel: PathBuf) -> io::Result<FileAttr> {
        let meta = fs::symlink_metadata(self.abs(&rel))?;
        self.paths.insert(meta.ino(), rel);
        Ok(self.attr(&meta))
    }

    pub(crate) fn metadata(&self, ino: u64) -> io::Result<Metadata> {
        if let Some(rel) = self.paths.get(&ino) {
            if let Ok(m) = fs::symlink_metadata(self.abs(rel)) {
                if m.ino() == ino {
                    return Ok(m);
                }
            }
        }
        match self.files.get(&ino) {
            Some(f) => f.fd.metadata(),
            None => Err(err(nix::libc::ENOENT)),
        }
    }

    pub(crate) fn file(&mut self, ino: u64) -> io::Result<&mut FileState> {
        if !self.files.contains_key(&ino) {
            let rel = self.paths.get(&ino).ok_or_else(|| err(nix::libc::ENOENT))?;
            let abs = self.abs(rel);
            let fd = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&abs)
                .or_else(|_| File::open(&abs))?;
            self.files.insert(
                ino,
                FileState {
                    fd,
                    overlay: None,
                    open: 0,
                },
            );
        }
        Ok(self.files.get_mut(&ino).expect("inserted above"))
    }

    pub(crate) fn write_fault(&mut self) -> io::Result<()> {
        if let Some(code) = self.faults.write {
            self.stats.injected_errors += 1;
            return Err(err(code));
        }
        Ok(())
    }

    pub(crate) fn overlay(&mut self, ino: u64) -> io::Result<&mut Overlay> {
        let f = self.file(ino)?;
        if f.overlay.is_none() {
            f.overlay = Some(Overlay::new(f.fd.metadata()?.len(), Instant::now()));
        }
        Ok(f.overlay.as_mut().expect("set above"))
    }

    pub(crate) fn write(
        &mut self,
        ino: u64,
        offset: u64,
        data: &[u8],
        append: bool,
    ) -> io::Result<()> {
        self.alive()?;
        self.write_fault()?;
        self.overlay(ino)?;
        let f = self.files.get_mut(&ino).expect("overlay() opened it");
        let FileState { fd, overlay, .. } = f;
        let ov = overlay.as_mut().expect("overlay() made it");
        let before = ov.bytes();
        let at = if append { ov.size() } else { offset };
        ov.write(at, data, &mut |off, buf| read_full(fd, off, buf))?;
        self.unsynced = self.unsynced + ov.bytes() - before;
        self.last_written = Some(ino);
        self.stats.writes += 1;
        Ok(())
    }

    pub(crate) fn read(&mut self, ino: u64, offset: u64, size: usize) -> io::Result<Vec<u8>> {
        self.alive()?;
        let f = self.file(ino)?;
        match &f.overlay {
            Some(ov) => ov.read(offset, size, &mut |off, buf| read_full(&f.fd, off, buf)),
            None => {
                let len = f.fd.metadata()?.len();
                let end = len.min(offset.saturating_add(size as u64));
                let mut buf = vec![0u8; end.saturating_sub(offset) as usize];
                read_full(&f.fd, offset, &mut buf)?;
                Ok(buf)
            }
        }
    }

    pub(crate) fn truncate(&mut self, ino: u64, size: u64) -> io::Result<()> {
        self.alive()?;
        let ov = self.overlay(ino)?;
        let grows = size > ov.size();
        if grows {
            self.write_fault()?;
        }
        let ov = self.overlay(ino)?;
        let before = ov.bytes();
        ov.truncate(size);
        let after = ov.bytes();
        self.unsynced = self.unsynced + after - before;
        Ok(())
    }

    /// Puts a file's unsynced data in the backing file; with `sync`, an
    /// fsync of it too (the backing disk is never cut, so that only
    /// matters to the host).
    pub(crate) fn write_back(&mut self, ino: u64) -> io::Result<()> {
        let Some(f) = self.files.get_mut(&ino) else {
            return Ok(());
        };
        let Some(ov) = f.overlay.take() else {
            return Ok(());
        };
        self.unsynced -= ov.bytes();
        let fd = &f.fd;
        ov.write_back(&mut |off, data| fd.write_all_at(data, off), &mut |n| {
            fd.set_len(n)
        })?;
        if f.open == 0 {
            self.files.remove(&ino);
        }
        Ok(())
    }

    /// An fsync of a file: its data is durable, or, under an injected
    /// error, dropped (as Linux drops pages whose writeback failed); with
    /// `commit_names` its directory's name changes too (the ext4 model).
    pub(crate) fn fsync(&mut self, ino: u64, commit_names: bool) -> io::Result<()> {
        self.stats.fsyncs += 1;
        self.alive()?;
        if let Some(code) = self.faults.fsync {
            self.stats.injected_errors += 1;
            self.drop_unsynced(ino);
            return Err(err(code));
        }
        self.write_back(ino)?;
        if commit_names {
            if let Some(rel) = self.paths.get(&ino).cloned() {
                self.sync_names(&State::parent_of(&rel));
            }
        }
        Ok(())
    }

    /// Makes the name changes of `dir` durable (and every earlier one,
    /// `Journal::sync_dir`), freeing the stashes they no longer need.
    pub(crate) fn sync_names(&mut self, dir: &Path) {
        let stashes = self.journal.sync_dir(dir);
        self.remove_stashes(stashes);
    }

    fn drop_unsynced(&mut self, ino: u64) {
        if let Some(f) = self.files.get_mut(&ino) {
            if let Some(ov) = f.overlay.take() {
                self.unsynced -= ov.bytes();
            }
        }
    }

    /// Writeback of what is older than `age` (all of it for zero).
    pub(crate) fn write_back_older(&mut self, age: Duration) -> io::Result<()> {
        if self.dead {
            return Ok(());
        }
        let now = Instant::now();
        let old: Vec<u64> = self
            .files
            .iter()
            .filter(|(_, f)| {
                f.overlay
                    .as_ref()
                    .is_some_and(|o| now.duration_since(o.dirtied_at) >= age)
            })
            .map(|(&i, _)| i)
            .collect();
        for ino in old {
            self.write_back(ino)?;
        }
        let stashes = if age.is_zero() {
            self.journal.commit_all()
        } else {
            self.journal.age_out(now, age)
        };
        self.remove_stashes(stashes);
        Ok(())
    }

    /// Memory pressure: the oldest files go to the backing file until the
    /// unsynced data fits its bound again.
    pub(crate) fn relieve(&mut self, max: usize) -> io::Result<()> {
        while self.unsynced > max {
            let oldest = self
                .files
                .iter()
                .filter_map(|(&i, f)| f.overlay.as_ref().map(|o| (o.dirtied_at, i)))
                .min();
            match oldest {
                Some((_, ino)) => self.write_back(ino)?,
                None => break,
            }
        }
        Ok(())
    }

    pub(crate) fn remove_stashes(&mut self, stashes: Vec<PathBuf>) {
        for s in stashes {
            let _ = fs::remove_file(self.abs(&s));
        }
    }

    pub(crate) fn stash(&mut self, rel: &Path) -> io::Result<PathBuf> {
        self.stash_seq += 1;
        let stash = Path::new(STASH).join(self.stash_seq.to_string());
        fs::hard_link(self.abs(rel), self.abs(&stash))?;
        Ok(stash)
    }

    pub(crate) fn parent_of(rel: &Path) -> PathBuf {
        rel.parent().map(Path::to_path_buf).unwrap_or_default()
    }

    /// A new name: its owner is the caller, as on a real file system
    /// (the servers open their files with owner-only flags).
    pub(crate) fn created(&mut self, rel: &Path, req: &Request, undo: Undo) -> io::Result<()> {
        std::os::unix::fs::lchown(self.abs(rel), Some(req.uid()), Some(req.gid()))?;
        self.journal
            .push(Instant::now(), vec![State::parent_of(rel)], vec![undo]);
        Ok(())
    }

    pub(crate) fn rename(&mut self, from: &Path, to: &Path, noreplace: bool) -> io::Result<()> {
        let moved = fs::symlink_metadata(self.abs(from))?;
        let mut undo = vec![Undo::Move {
            now: to.to_path_buf(),
            was: from.to_path_buf(),
        }];
        if let Ok(target) = fs::symlink_metadata(self.abs(to)) {
            if noreplace {
                return Err(err(nix::libc::EEXIST));
            }
            if target.ino() == moved.ino() {
                return Ok(());
            }
            if target.is_dir() {
                undo.push(Undo::MakeDir(to.to_path_buf()));
            } else {
                let stash = self.stash(to)?;
                undo.push(Undo::Restore {
                    stash,
                    to: to.to_path_buf(),
                });
            }
        }
        fs::rename(self.abs(from), self.abs(to))?;
        self.journal.push(
            Instant::now(),
            vec![State::parent_of(from), State::parent_of(to)],
            undo,
        );
        for p in self.paths.values_mut() {
            if let Ok(rest) = p.strip_prefix(from) {
                *p = to.join(rest);
            }
        }
        self.paths.insert(moved.ino(), to.to_path_buf());
        Ok(())
    }

    /// The power goes: unsynced data is dropped (the last page torn if
    /// asked), names go back to their durable state, and every later
    /// operation fails.
    pub(crate) fn cut(&mut self, tear: Option<usize>) -> CutReport {
        let mut report = CutReport {
            dropped_bytes: self.unsynced as u64,
            ..CutReport::default()
        };
        if let (Some(n), Some(ino)) = (tear, self.last_written) {
            if let Some(f) = self.files.get(&ino) {
                if let Some((start, page)) = f.overlay.as_ref().and_then(Overlay::last_page) {
                    let n = n.min(page.len());
                    if f.fd.write_all_at(&page[..n], start).is_ok() {
                        let name = self.paths.get(&ino).cloned().unwrap_or_default();
                        report.torn = Some((name, start, n));
                    }
                }
            }
        }
        self.dead = true;
        self.files.clear();
        self.handles.clear();
        self.unsynced = 0;
        for step in self.journal.take_undo() {
            report.undone_names += 1;
            if let Err(e) = self.undo(&step) {
                report.errors.push(format!("{step:?}: {e}"));
            }
        }
        report
    }

    pub(crate) fn undo(&self, step: &Undo) -> io::Result<()> {
        match step {
            Undo::Remove(p) => fs::remove_file(self.abs(p)),
            Undo::RemoveDir(p) => fs::remove_dir_all(self.abs(p)),
            Undo::MakeDir(p) => fs::create_dir(self.abs(p)),
            Undo::Move { now, was } => fs::rename(self.abs(now), self.abs(was)),
            Undo::Restore { stash, to } => fs::rename(self.abs(stash), self.abs(to)),
        }
    }

    pub(crate) fn stats(&self) -> Stats {
        Stats {
            unsynced_bytes: self.unsynced as u64,
            pending_names: self.journal.len() as u64,
            ..self.stats
        }
    }
}

/// Reads `buf.len()` bytes at `offset`, zeros past the end of the file.
fn read_full(fd: &File, offset: u64, buf: &mut [u8]) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match fd.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf[done..].fill(0);
    Ok(())
}
