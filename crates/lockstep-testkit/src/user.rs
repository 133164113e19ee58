//! The unprivileged account servers run as.
//!
//! MariaDB's SST scripts misbehave when mariadbd runs as root, so when we are
//! root the servers run as the system user `lockstep` (created on first use):
//! `user=lockstep` in my.cnf makes mariadbd drop privileges right after start,
//! and the SST scripts it spawns inherit that user. When we are not root the
//! servers simply run as the current user.

use std::os::unix::fs::{lchown, MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

use nix::unistd::{Uid, User};

use crate::error::{Error, Result};

/// Name of the account servers run as when the testkit runs as root.
pub const SERVER_USER: &str = "lockstep";

/// The account mariadbd is told to switch to (only when we are root).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

static CREATE: Mutex<()> = Mutex::new(());

/// `None` when we are not root (servers run as us), else the `lockstep`
/// system user, created with useradd if it does not exist yet.
pub fn server_user() -> Result<Option<ServerUser>> {
    if !Uid::effective().is_root() {
        return Ok(None);
    }
    let _guard = CREATE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(u) = lookup(SERVER_USER)? {
        return Ok(Some(u));
    }
    let useradd = ["/usr/sbin/useradd", "/sbin/useradd"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("useradd");
    let out = Command::new(useradd)
        .args([
            "--system",
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
            SERVER_USER,
        ])
        .output()
        .map_err(|e| Error::io(format!("running {useradd}"), e))?;
    // Exit code 9: another process created it meanwhile; fine.
    if !out.status.success() && out.status.code() != Some(9) {
        return Err(Error::Command {
            what: format!("creating the unprivileged system user `{SERVER_USER}` for mariadbd"),
            command: format!(
                "{useradd} --system --no-create-home --shell /usr/sbin/nologin {SERVER_USER}"
            ),
            status: out.status.code(),
            output: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    lookup(SERVER_USER)?.map(Some).ok_or_else(|| {
        Error::config(format!(
            "useradd reported success but user `{SERVER_USER}` does not exist; create it by hand"
        ))
    })
}

fn lookup(name: &str) -> Result<Option<ServerUser>> {
    let user = User::from_name(name).map_err(|e| {
        Error::io(
            format!("looking up user `{name}`"),
            std::io::Error::from_raw_os_error(e as i32),
        )
    })?;
    Ok(user.map(|u| ServerUser {
        name: u.name,
        uid: u.uid.as_raw(),
        gid: u.gid.as_raw(),
    }))
}

/// Gives `path` and everything below it to `user` (symlinks are not followed).
pub(crate) fn chown_tree(path: &Path, user: &ServerUser) -> Result<()> {
    lchown(path, Some(user.uid), Some(user.gid))
        .map_err(|e| Error::io(format!("chown {} to {}", path.display(), user.name), e))?;
    let meta = std::fs::symlink_metadata(path)
        .map_err(|e| Error::io(format!("stat {}", path.display()), e))?;
    if meta.is_dir() {
        let entries = std::fs::read_dir(path)
            .map_err(|e| Error::io(format!("listing {}", path.display()), e))?;
        for entry in entries {
            let entry = entry.map_err(|e| Error::io(format!("listing {}", path.display()), e))?;
            chown_tree(&entry.path(), user)?;
        }
    }
    Ok(())
}

/// Whether `user` can read the file at `path` and traverse every directory
/// above it, judged from owner/group/other permission bits.
pub(crate) fn readable_by(path: &Path, user: &ServerUser) -> bool {
    let Ok(path) = path.canonicalize() else {
        return false;
    };
    if !has_permission(&path, user, 0o4) {
        return false;
    }
    path.ancestors()
        .skip(1)
        .all(|dir| has_permission(dir, user, 0o1))
}

/// Gives `path` itself (not its contents) to `user`.
pub(crate) fn chown_tree_shallow(path: &Path, user: &ServerUser) -> Result<()> {
    lchown(path, Some(user.uid), Some(user.gid))
        .map_err(|e| Error::io(format!("chown {} to {}", path.display(), user.name), e))
}

/// Whether `user` can traverse `dir` and every directory above it.
pub(crate) fn traversable_by(dir: &Path, user: &ServerUser) -> bool {
    let Ok(dir) = dir.canonicalize() else {
        return false;
    };
    dir.ancestors().all(|d| has_permission(d, user, 0o1))
}

fn has_permission(p: &Path, user: &ServerUser, bit_other: u32) -> bool {
    let Ok(m) = std::fs::metadata(p) else {
        return false;
    };
    let mode = m.permissions().mode();
    if m.uid() == user.uid {
        mode & (bit_other << 6) != 0
    } else if m.gid() == user.gid {
        mode & (bit_other << 3) != 0
    } else {
        mode & bit_other != 0
    }
}
