//! The file system mounted for real (root and /dev/fuse: `make test`
//! runs as root and installs fuse3): what was synced survives a cut,
//! what was not is gone, a name is durable only after its directory's
//! fsync, and the injected faults reach the caller.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use lockstep_lazyfs::{Faults, Mount, Options};

struct Rig {
    _dir: tempfile::TempDir,
    backing: PathBuf,
    mnt: PathBuf,
    mount: Option<Mount>,
    ext4: bool,
}

impl Rig {
    fn new() -> Rig {
        Rig::with(false)
    }

    /// With `ext4`, a file's fsync commits its directory's name changes.
    fn with(ext4: bool) -> Rig {
        let dir = tempfile::Builder::new()
            .prefix("lazyfs-")
            .tempdir_in("/tmp")
            .unwrap();
        let backing = dir.path().join("backing");
        let mnt = dir.path().join("mnt");
        fs::create_dir(&backing).unwrap();
        fs::create_dir(&mnt).unwrap();
        let mut rig = Rig {
            _dir: dir,
            backing,
            mnt,
            mount: None,
            ext4,
        };
        rig.boot();
        rig
    }

    fn boot(&mut self) {
        let opts = Options {
            // Long: only the tests' own syncs make anything durable.
            writeback_age: Duration::from_secs(3600),
            fsync_commits_names: self.ext4,
            ..Options::default()
        };
        self.mount = Some(Mount::new(&self.backing, &self.mnt, opts).expect("mount"));
    }

    fn m(&self) -> &Mount {
        self.mount.as_ref().unwrap()
    }

    fn p(&self, name: &str) -> PathBuf {
        self.mnt.join(name)
    }

    fn cut(&mut self, tear: Option<usize>) -> lockstep_lazyfs::CutReport {
        let r = self.mount.take().unwrap().power_cut(tear).expect("cut");
        self.boot();
        r
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        if let Some(m) = self.mount.take() {
            let _ = m.unmount();
        }
    }
}

fn sync_dir(dir: &Path) {
    File::open(dir).unwrap().sync_all().unwrap();
}

fn read(path: &Path) -> Option<Vec<u8>> {
    let mut v = Vec::new();
    File::open(path).ok()?.read_to_end(&mut v).ok()?;
    Some(v)
}

fn write_file(path: &Path, bytes: &[u8], sync: bool) {
    let mut f = File::create(path).unwrap();
    f.write_all(bytes).unwrap();
    if sync {
        f.sync_all().unwrap();
    }
}

#[test]
fn synced_data_survives_a_cut_and_unsynced_data_is_gone() {
    let mut rig = Rig::new();
    let f = rig.p("data");
    write_file(&f, &[b'a'; 10_000], true);
    sync_dir(&rig.mnt);
    let mut h = OpenOptions::new().write(true).open(&f).unwrap();
    h.write_all(&[b'b'; 100]).unwrap();
    let mut appended = OpenOptions::new().append(true).open(&f).unwrap();
    appended.write_all(&[b'c'; 5000]).unwrap();
    drop((h, appended));
    let now = read(&f).unwrap();
    assert_eq!(now.len(), 15_000, "readers see the unsynced writes");
    assert_eq!(&now[..100], &[b'b'; 100][..]);
    assert_eq!(
        fs::read(rig.backing.join("data")).unwrap(),
        vec![b'a'; 10_000],
        "nothing reached the disk before the sync"
    );
    let report = rig.cut(None);
    assert!(report.dropped_bytes > 0, "{report:?}");
    assert_eq!(read(&rig.p("data")).unwrap(), vec![b'a'; 10_000]);
}

#[test]
fn a_truncate_is_durable_only_with_a_sync() {
    let mut rig = Rig::new();
    let f = rig.p("t");
    write_file(&f, &[7u8; 9000], true);
    sync_dir(&rig.mnt);
    let h = OpenOptions::new().write(true).open(&f).unwrap();
    h.set_len(10).unwrap();
    h.set_len(5000).unwrap();
    let seen = read(&f).unwrap();
    assert_eq!(seen.len(), 5000);
    assert!(
        seen[10..].iter().all(|&b| b == 0),
        "a shrunk file grows with zeros"
    );
    drop(h);
    rig.cut(None);
    assert_eq!(read(&rig.p("t")).unwrap(), vec![7u8; 9000]);
    let h = OpenOptions::new().write(true).open(rig.p("t")).unwrap();
    h.set_len(10).unwrap();
    h.sync_all().unwrap();
    drop(h);
    rig.cut(None);
    assert_eq!(read(&rig.p("t")).unwrap(), vec![7u8; 10]);
}

#[test]
fn a_new_file_needs_its_directory_synced() {
    let mut rig = Rig::new();
    fs::create_dir(rig.p("d")).unwrap();
    write_file(&rig.p("d/synced-file-only"), b"x", true);
    rig.cut(None);
    assert!(
        !rig.p("d").exists(),
        "the directory itself was never synced"
    );
    fs::create_dir(rig.p("d")).unwrap();
    sync_dir(&rig.mnt);
    write_file(&rig.p("d/f"), b"hello", true);
    sync_dir(&rig.p("d"));
    write_file(&rig.p("d/g"), b"lost", true);
    rig.cut(None);
    assert_eq!(read(&rig.p("d/f")).unwrap(), b"hello");
    assert!(read(&rig.p("d/g")).is_none());
}

#[test]
fn in_the_ext4_model_a_file_s_fsync_keeps_its_name_but_not_a_later_rename() {
    let mut rig = Rig::with(true);
    write_file(&rig.p("state"), b"old", true);
    write_file(&rig.p("state.tmp"), b"new", true);
    fs::rename(rig.p("state.tmp"), rig.p("state")).unwrap();
    let unsynced = rig.p("unsynced");
    write_file(&unsynced, b"x", false);
    rig.cut(None);
    assert_eq!(read(&rig.p("state")).unwrap(), b"old");
    assert_eq!(
        read(&rig.p("state.tmp")).unwrap(),
        b"new",
        "its fsync kept its name"
    );
    assert!(!unsynced.exists(), "never synced, gone");
}

#[test]
fn a_rename_is_durable_only_after_the_directory_s_fsync() {
    let mut rig = Rig::new();
    write_file(&rig.p("state"), b"old", true);
    sync_dir(&rig.mnt);
    // The grastate.dat way: temporary file, fsync, rename, no dir fsync.
    write_file(&rig.p("state.tmp"), b"new", true);
    fs::rename(rig.p("state.tmp"), rig.p("state")).unwrap();
    assert_eq!(read(&rig.p("state")).unwrap(), b"new");
    let report = rig.cut(None);
    assert!(report.errors.is_empty(), "{report:?}");
    assert_eq!(read(&rig.p("state")).unwrap(), b"old");
    assert!(
        !rig.p("state.tmp").exists(),
        "its create was not durable either"
    );
    // With the directory's fsync, the new content stays.
    write_file(&rig.p("state.tmp"), b"new", true);
    fs::rename(rig.p("state.tmp"), rig.p("state")).unwrap();
    sync_dir(&rig.mnt);
    rig.cut(None);
    assert_eq!(read(&rig.p("state")).unwrap(), b"new");
    assert!(!rig.p("state.tmp").exists());
    assert_eq!(
        fs::read_dir(rig.backing.join(lockstep_lazyfs::STASH))
            .unwrap()
            .count(),
        0,
        "a fresh mount starts with no stash"
    );
}

#[test]
fn an_unlink_comes_back_unless_synced() {
    let mut rig = Rig::new();
    write_file(&rig.p("keep"), b"k", true);
    write_file(&rig.p("gone"), b"g", true);
    sync_dir(&rig.mnt);
    fs::remove_file(rig.p("keep")).unwrap();
    fs::remove_file(rig.p("gone")).unwrap();
    let names: Vec<_> = fs::read_dir(&rig.mnt)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(names.is_empty(), "the stash is hidden: {names:?}");
    rig.cut(None);
    assert_eq!(read(&rig.p("keep")).unwrap(), b"k");
    fs::remove_file(rig.p("gone")).unwrap();
    sync_dir(&rig.mnt);
    rig.cut(None);
    assert!(!rig.p("gone").exists());
}

#[test]
fn a_cut_can_tear_the_page_written_last() {
    let mut rig = Rig::new();
    write_file(&rig.p("log"), &[b'a'; 8192], true);
    sync_dir(&rig.mnt);
    let h = OpenOptions::new().write(true).open(rig.p("log")).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&h, &[b'x'; 8192], 0).unwrap();
    drop(h);
    let report = rig.cut(Some(512));
    assert_eq!(report.torn, Some((PathBuf::from("log"), 4096, 512)));
    let after = read(&rig.p("log")).unwrap();
    assert_eq!(
        &after[..4096],
        &[b'a'; 4096][..],
        "the earlier page was not written"
    );
    assert_eq!(&after[4096..4608], &[b'x'; 512][..], "the torn prefix");
    assert_eq!(&after[4608..], &[b'a'; 3584][..]);
}

#[test]
fn writeback_by_age_makes_old_changes_durable() {
    let mut rig = Rig::new();
    write_file(&rig.p("aged"), b"written back", false);
    rig.m().write_back_older(Duration::ZERO).unwrap();
    write_file(&rig.p("young"), b"not yet", false);
    rig.cut(None);
    assert_eq!(read(&rig.p("aged")).unwrap(), b"written back");
    assert!(!rig.p("young").exists());
}

#[test]
fn injected_faults_reach_the_caller() {
    let rig = Rig::new();
    write_file(&rig.p("f"), b"0", true);
    rig.m().set_faults(Faults::disk_full());
    let e = OpenOptions::new()
        .write(true)
        .open(rig.p("f"))
        .unwrap()
        .write_all(b"more")
        .unwrap_err();
    assert_eq!(e.raw_os_error(), Some(nix::libc::ENOSPC), "{e}");
    assert_eq!(
        File::create(rig.p("new")).unwrap_err().raw_os_error(),
        Some(nix::libc::ENOSPC)
    );
    rig.m().set_faults(Faults::fsync_errors());
    let mut h = OpenOptions::new().write(true).open(rig.p("f")).unwrap();
    h.write_all(b"1").unwrap();
    assert_eq!(
        h.sync_all().unwrap_err().raw_os_error(),
        Some(nix::libc::EIO)
    );
    assert_eq!(
        read(&rig.p("f")).unwrap(),
        b"0",
        "the failed writeback lost the page"
    );
    rig.m()
        .set_faults(Faults::slow_fsync(Duration::from_millis(400)));
    let t = Instant::now();
    h.sync_all().unwrap();
    assert!(t.elapsed() >= Duration::from_millis(400));
    rig.m().set_faults(Faults::none());
    h.write_all(b"2").unwrap();
    h.sync_all().unwrap();
    assert!(rig.m().stats().injected_errors >= 3);
}

#[test]
fn files_belong_to_their_creator_who_may_use_owner_only_flags() {
    let rig = Rig::new();
    fs::create_dir(rig.p("shared")).unwrap();
    fs::set_permissions(
        rig.p("shared"),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let target = rig.p("shared/by-nobody");
    let status = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .args([
            "sh",
            "-c",
            "echo hi > \"$1\" && dd if=\"$1\" iflag=noatime of=/dev/null status=none",
            "sh",
        ])
        .arg(&target)
        .status()
        .expect("setpriv (util-linux)");
    assert!(
        status.success(),
        "an unprivileged creator could not use O_NOATIME on its file"
    );
    assert_eq!(fs::metadata(&target).unwrap().uid(), 65534);
    assert_eq!(
        fs::metadata(rig.backing.join("shared/by-nobody"))
            .unwrap()
            .uid(),
        65534
    );
    // O_DIRECT opens, as InnoDB's.
    OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_DIRECT)
        .open(&target)
        .expect("O_DIRECT open");
}
