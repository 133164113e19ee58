//! A mounted lazy file system and what a test does with it: set faults,
//! write back, cut the power.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use fuser::{BackgroundSession, Config, MountOption, SessionACL};

use crate::faults::Faults;
use crate::fs::LazyFs;
use crate::state::{CutReport, Options, Shared, Stats};

/// How often the writeback thread looks for old unsynced data.
const WRITEBACK_TICK: Duration = Duration::from_millis(500);

pub struct Mount {
    shared: Arc<Shared>,
    session: Option<BackgroundSession>,
    stop: Arc<AtomicBool>,
    writeback: Option<JoinHandle<()>>,
    mountpoint: PathBuf,
}

impl Mount {
    /// Mounts `backing` at `mountpoint` (root only, or a user allowed by
    /// `/etc/fuse.conf`). Anyone may use the mount; the kernel checks
    /// permissions against the owners, which are the creators'.
    pub fn new(backing: &Path, mountpoint: &Path, opts: Options) -> io::Result<Mount> {
        let shared = Arc::new(Shared::new(backing, opts)?);
        let mut config = Config::default();
        config.mount_options = vec![
            MountOption::FSName(format!("lazyfs:{}", backing.display())),
            MountOption::Subtype("lockstep-lazyfs".into()),
            MountOption::DefaultPermissions,
        ];
        // No auto_unmount: through fusermount3 it makes the unmount
        // asynchronous, and joining the session then hangs. As root the
        // mount is direct and the unmount synchronous; a test process
        // that dies leaves a dead mount, which `umount -l` clears.
        config.acl = SessionACL::All;
        config.n_threads = Some(2);
        let session = fuser::spawn_mount(
            LazyFs {
                shared: shared.clone(),
            },
            mountpoint,
            &config,
        )?;
        let stop = Arc::new(AtomicBool::new(false));
        let writeback = {
            let shared = shared.clone();
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("lazyfs-writeback".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(WRITEBACK_TICK);
                        let age = shared.opts.writeback_age;
                        let _ = shared.lock().write_back_older(age);
                    }
                })?
        };
        Ok(Mount {
            shared,
            session: Some(session),
            stop,
            writeback: Some(writeback),
            mountpoint: mountpoint.to_path_buf(),
        })
    }

    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    pub fn set_faults(&self, faults: Faults) {
        self.shared.lock().faults = faults;
    }

    /// Writes back what is older than `age`, as the kernel would have by
    /// then (zero: everything, names included).
    pub fn write_back_older(&self, age: Duration) -> io::Result<()> {
        self.shared.lock().write_back_older(age)
    }

    pub fn stats(&self) -> Stats {
        self.shared.lock().stats()
    }

    /// The power goes: what was not synced is dropped (with `tear`, the
    /// first `tear` bytes of the page written last reach the disk), and
    /// the mount goes away. Stop the processes that use it first; mount
    /// the backing directory again to "boot".
    pub fn power_cut(mut self, tear: Option<usize>) -> io::Result<CutReport> {
        self.stop_writeback();
        let report = self.shared.lock().cut(tear);
        self.unmount_now()?;
        Ok(report)
    }

    /// An orderly unmount: everything is written back first.
    pub fn unmount(mut self) -> io::Result<()> {
        self.stop_writeback();
        self.shared.lock().write_back_older(Duration::ZERO)?;
        self.unmount_now()
    }

    fn stop_writeback(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.writeback.take() {
            let _ = t.join();
        }
    }

    fn unmount_now(&mut self) -> io::Result<()> {
        match self.session.take() {
            Some(s) => s.umount_and_join(),
            None => Ok(()),
        }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if self.session.is_some() {
            self.stop_writeback();
            let _ = self.shared.lock().write_back_older(Duration::ZERO);
            let _ = self.unmount_now();
        }
    }
}
