//! Each node's data directory on a power-loss file system
//! (`lockstep-lazyfs`): the cluster is built on the real disk (so
//! `mariadb-install-db`'s unsynced files are all there, as after the
//! kernel's writeback), then every datadir is mounted through the lazy
//! layer before the servers start. Everything a node keeps is under it:
//! InnoDB, grastate.dat, gvwstate.dat and the writeset cache (Lockstep)
//! or galera.cache (Galera).

use std::path::PathBuf;
use std::time::Duration;

use lockstep_lazyfs::{CutReport, Faults, Mount, Options};
use lockstep_testkit::Cluster;

/// Unsynced data older than this reaches the disk anyway, as with the
/// kernel's writeback: the kernel's own `vm.dirty_expire_centisecs` (30 s
/// by default), the age after which it writes back dirty pages, `write()`
/// and `mmap` alike (Galera maps `galera.cache`: its pages reach the
/// layer only by the kernel's writeback, so one age for both is fair).
pub fn writeback_age() -> Duration {
    std::fs::read_to_string("/proc/sys/vm/dirty_expire_centisecs")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map_or(Duration::from_secs(30), |cs| Duration::from_millis(cs * 10))
}

/// Bytes of a torn page at an every-node cut: one 512-byte sector of the
/// page written last.
pub const TEAR: usize = 512;

pub struct Disks {
    /// (backing directory, mount point), by node.
    dirs: Vec<(PathBuf, PathBuf)>,
    mounts: Vec<Option<Mount>>,
}

fn options() -> Options {
    Options {
        writeback_age: writeback_age(),
        ..Options::default()
    }
}

impl Disks {
    /// Mounts every node's datadir through the lazy layer; the nodes
    /// must not be running.
    pub fn mount(cluster: &Cluster) -> Result<Disks, String> {
        let mut disks = Disks {
            dirs: Vec::new(),
            mounts: Vec::new(),
        };
        for node in cluster.nodes() {
            let mnt = node.datadir().to_path_buf();
            let backing = mnt.with_extension("disk");
            std::fs::rename(&mnt, &backing)
                .map_err(|e| format!("moving {} aside: {e}", mnt.display()))?;
            std::fs::create_dir(&mnt).map_err(|e| format!("{}: {e}", mnt.display()))?;
            let m = Mount::new(&backing, &mnt, options())
                .map_err(|e| format!("mounting the lazy file system on {}: {e}", mnt.display()))?;
            disks.dirs.push((backing, mnt));
            disks.mounts.push(Some(m));
        }
        Ok(disks)
    }

    /// Node `i` loses power (kill it first): what it did not sync is
    /// gone. Its file system is mounted again, as at the next boot.
    pub fn power_cut(&mut self, i: usize, tear: Option<usize>) -> Result<CutReport, String> {
        // A killed server's files close when the kernel has torn it down,
        // and a helper it started (an SST script's rsync) may outlive it a
        // moment: unmounting before then fails with EBUSY, which a real
        // power cut never does. One CI run saw it.
        wait_unused(&self.dirs[i].1, Duration::from_secs(10));
        let m = self.mounts[i]
            .take()
            .ok_or(format!("node {} has no file system mounted", i + 1))?;
        let report = m
            .power_cut(tear)
            .map_err(|e| format!("cutting node {}: {e}", i + 1))?;
        let (backing, mnt) = &self.dirs[i];
        let m = Mount::new(backing, mnt, options())
            .map_err(|e| format!("mounting node {} again: {e}", i + 1))?;
        self.mounts[i] = Some(m);
        Ok(report)
    }

    /// Writes back everything unsynced on every node, as a machine that
    /// ran for a while would have: the starting state (the joiners'
    /// rsync SST, which does not fsync, and the schema) is on disk before
    /// the workload starts, so a cut tests the workload, not a fresh SST.
    pub fn settle(&self) -> Result<(), String> {
        for (i, m) in self.mounts.iter().enumerate() {
            if let Some(m) = m {
                m.write_back_older(Duration::ZERO)
                    .map_err(|e| format!("writing back node {}: {e}", i + 1))?;
            }
        }
        Ok(())
    }

    /// What node `i`'s file system has seen since its last mount.
    pub fn stats(&self, i: usize) -> Option<lockstep_lazyfs::Stats> {
        self.mounts[i].as_ref().map(Mount::stats)
    }

    pub fn set_faults(&self, i: usize, faults: Faults) -> Result<(), String> {
        match &self.mounts[i] {
            Some(m) => {
                m.set_faults(faults);
                Ok(())
            }
            None => Err(format!("node {} has no file system mounted", i + 1)),
        }
    }
}

/// Waits up to `limit` until no process has a file open, or its working
/// directory, under `dir` (read from /proc).
fn wait_unused(dir: &std::path::Path, limit: Duration) {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline && in_use(dir) {
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn in_use(dir: &std::path::Path) -> bool {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return false;
    };
    procs.flatten().any(|p| {
        let path = p.path();
        let under = |link: std::path::PathBuf| {
            std::fs::read_link(link).is_ok_and(|target| target.starts_with(dir))
        };
        under(path.join("cwd"))
            || std::fs::read_dir(path.join("fd"))
                .map(|fds| fds.flatten().any(|fd| under(fd.path())))
                .unwrap_or(false)
    })
}
