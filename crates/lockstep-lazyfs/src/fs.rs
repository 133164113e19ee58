//! The FUSE side: each request of the kernel turned into a call on the
//! [`State`] under its lock, and its answer.

use std::ffi::OsStr;
use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::fs::{DirEntryExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::{Arc, MutexGuard};
use std::time::{Instant, SystemTime};

use fuser::{
    AccessFlags, Errno, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow,
    WriteFlags,
};

use crate::journal::Undo;
use crate::state::{err, errno, FileState, Shared, State, STASH, TTL};

pub(crate) struct LazyFs {
    pub(crate) shared: Arc<Shared>,
}

impl LazyFs {
    fn state(&self) -> MutexGuard<'_, State> {
        self.shared.lock()
    }
}

impl Filesystem for LazyFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        let _ = config.set_max_write(1 << 20);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let mut s = self.state();
        match s.child(parent, name).and_then(|rel| s.entry(rel)) {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let s = self.state();
        let r = s.alive().and_then(|()| s.metadata(s.backing_ino(ino)));
        match r {
            Ok(meta) => reply.attr(&TTL, &s.attr(&meta)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut s = self.state();
        let b = s.backing_ino(ino);
        let r = (|| {
            let rel = s.path(ino)?;
            if let Some(mode) = mode {
                fs::set_permissions(s.abs(&rel), fs::Permissions::from_mode(mode & 0o7777))?;
            }
            if uid.is_some() || gid.is_some() {
                std::os::unix::fs::lchown(s.abs(&rel), uid, gid)?;
            }
            if let Some(size) = size {
                s.truncate(b, size)?;
            }
            s.metadata(b)
        })();
        match r {
            Ok(meta) => reply.attr(&TTL, &s.attr(&meta)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let s = self.state();
        match s.path(ino).and_then(|rel| fs::read_link(s.abs(&rel))) {
            Ok(target) => reply.data(target.as_os_str().as_encoded_bytes()),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let mut s = self.state();
        let r = (|| {
            s.write_fault()?;
            let rel = s.child(parent, name)?;
            let abs = s.abs(&rel);
            fs::create_dir(&abs)?;
            fs::set_permissions(&abs, fs::Permissions::from_mode(mode & !umask & 0o7777))?;
            s.created(&rel, req, Undo::RemoveDir(rel.clone()))?;
            s.entry(rel)
        })();
        match r {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut s = self.state();
        let r = (|| {
            let rel = s.child(parent, name)?;
            let meta = fs::symlink_metadata(s.abs(&rel))?;
            let stash = s.stash(&rel)?;
            fs::remove_file(s.abs(&rel))?;
            s.journal.push(
                Instant::now(),
                vec![State::parent_of(&rel)],
                vec![Undo::Restore {
                    stash,
                    to: rel.clone(),
                }],
            );
            if s.paths.get(&meta.ino()) == Some(&rel) {
                s.paths.remove(&meta.ino());
            }
            Ok(())
        })();
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut s = self.state();
        let r = (|| {
            let rel = s.child(parent, name)?;
            fs::remove_dir(s.abs(&rel))?;
            s.journal.push(
                Instant::now(),
                vec![State::parent_of(&rel)],
                vec![Undo::MakeDir(rel)],
            );
            Ok(())
        })();
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let mut s = self.state();
        let r = (|| {
            s.write_fault()?;
            let rel = s.child(parent, link_name)?;
            std::os::unix::fs::symlink(target, s.abs(&rel))?;
            s.created(&rel, req, Undo::Remove(rel.clone()))?;
            s.entry(rel)
        })();
        match r {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let mut s = self.state();
        let r = (|| {
            if flags.contains(RenameFlags::RENAME_EXCHANGE) {
                return Err(err(nix::libc::EINVAL));
            }
            let from = s.child(parent, name)?;
            let to = s.child(newparent, newname)?;
            s.rename(&from, &to, flags.contains(RenameFlags::RENAME_NOREPLACE))
        })();
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let mut s = self.state();
        let r = (|| {
            s.write_fault()?;
            let from = s.path(ino)?;
            let rel = s.child(newparent, newname)?;
            fs::hard_link(s.abs(&from), s.abs(&rel))?;
            s.journal.push(
                Instant::now(),
                vec![State::parent_of(&rel)],
                vec![Undo::Remove(rel.clone())],
            );
            s.entry(rel)
        })();
        match r {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let mut s = self.state();
        let b = s.backing_ino(ino);
        let r = s.alive().and_then(|()| s.file(b).map(|f| f.open += 1));
        match r {
            Ok(()) => {
                let fh = s.next_fh;
                s.next_fh += 1;
                s.handles
                    .insert(fh, (b, flags.0 & nix::libc::O_APPEND != 0));
                reply.opened(FileHandle(fh), FopenFlags::empty());
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let mut s = self.state();
        let b = s.backing_ino(ino);
        match s.read(b, offset, size as usize) {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut s = self.state();
        let b = s.backing_ino(ino);
        let append = s.handles.get(&fh.0).is_some_and(|h| h.1);
        let max = self.shared.opts.max_unsynced;
        match s
            .write(b, offset, data, append)
            .and_then(|()| s.relieve(max))
        {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // close() makes nothing durable.
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let mut s = self.state();
        if let Some((ino, _)) = s.handles.remove(&fh.0) {
            if let Some(f) = s.files.get_mut(&ino) {
                f.open = f.open.saturating_sub(1);
                if f.open == 0 && f.overlay.is_none() {
                    s.files.remove(&ino);
                }
            }
        }
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let stall = self.state().faults.fsync_stall;
        if !stall.is_zero() {
            std::thread::sleep(stall);
        }
        let mut s = self.state();
        let b = s.backing_ino(ino);
        match s.fsync(b, self.shared.opts.fsync_commits_names) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.state().path(ino) {
            Ok(_) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let s = self.state();
        let r = (|| {
            let rel = s.path(ino)?;
            let mut names: Vec<(u64, FileType, std::ffi::OsString)> = vec![
                (s.backing_ino(ino), FileType::Directory, ".".into()),
                (s.backing_ino(ino), FileType::Directory, "..".into()),
            ];
            let mut rest = Vec::new();
            for e in fs::read_dir(s.abs(&rel))? {
                let e = e?;
                if rel.as_os_str().is_empty() && e.file_name() == STASH {
                    continue;
                }
                let kind = e
                    .file_type()
                    .ok()
                    .and_then(FileType::from_std)
                    .unwrap_or(FileType::RegularFile);
                rest.push((e.ino(), kind, e.file_name()));
            }
            rest.sort_by(|a, b| a.2.cmp(&b.2));
            names.extend(rest);
            Ok::<_, io::Error>(names)
        })();
        match r {
            Ok(names) => {
                for (i, (ino, kind, name)) in names.into_iter().enumerate().skip(offset as usize) {
                    if reply.add(s.fuse_ino(ino), i as u64 + 1, kind, name) {
                        break;
                    }
                }
                reply.ok();
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let mut s = self.state();
        s.stats.dir_fsyncs += 1;
        match s.path(ino) {
            Ok(rel) => {
                s.sync_names(&rel);
                reply.ok();
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let root = self.state().root.clone();
        match nix::sys::statvfs::statvfs(&root) {
            Ok(v) => reply.statfs(
                v.blocks(),
                v.blocks_free(),
                v.blocks_available(),
                v.files(),
                v.files_free(),
                v.block_size() as u32,
                v.name_max() as u32,
                v.fragment_size() as u32,
            ),
            Err(e) => reply.error(Errno::from_i32(e as i32)),
        }
    }

    fn access(&self, _req: &Request, ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        // The kernel checks permissions (default_permissions).
        match self.state().path(ino) {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let mut s = self.state();
        let r = (|| {
            s.write_fault()?;
            let rel = s.child(parent, name)?;
            let abs = s.abs(&rel);
            let existed = fs::symlink_metadata(&abs).is_ok();
            let fd = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .create_new(flags & nix::libc::O_EXCL != 0)
                .mode(mode & !umask & 0o7777)
                .open(&abs)?;
            if !existed {
                s.created(&rel, req, Undo::Remove(rel.clone()))?;
            }
            let meta = fd.metadata()?;
            let ino = meta.ino();
            s.files.entry(ino).or_insert(FileState {
                fd,
                overlay: None,
                open: 0,
            });
            let attr = s.entry(rel)?;
            if flags & nix::libc::O_TRUNC != 0 {
                s.truncate(ino, 0)?;
            }
            s.files.get_mut(&ino).expect("inserted above").open += 1;
            let fh = s.next_fh;
            s.next_fh += 1;
            s.handles
                .insert(fh, (ino, flags & nix::libc::O_APPEND != 0));
            Ok((attr, fh))
        })();
        match r {
            Ok((attr, fh)) => reply.created(
                &TTL,
                &attr,
                Generation(0),
                FileHandle(fh),
                FopenFlags::empty(),
            ),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        if mode != 0 {
            return reply.error(Errno::from_i32(nix::libc::EOPNOTSUPP));
        }
        let mut s = self.state();
        let b = s.backing_ino(ino);
        let r = (|| {
            let end = offset.saturating_add(length);
            if end > s.overlay(b)?.size() {
                s.truncate(b, end)?;
            }
            Ok::<_, io::Error>(())
        })();
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }
}
