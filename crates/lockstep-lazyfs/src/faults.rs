//! Disk faults the file system injects on request: what a failing or
//! full disk looks like to the server above it.

use std::time::Duration;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Faults {
    /// Every write, create, mkdir and growth fails with this errno
    /// (`ENOSPC` for a full disk, `EIO` for a failing one).
    pub write: Option<i32>,
    /// Every fsync fails with this errno, and the file's unsynced data is
    /// dropped, as Linux drops the pages whose writeback failed.
    pub fsync: Option<i32>,
    /// Every fsync waits this long first (a slow or stuck disk).
    pub fsync_stall: Duration,
}

impl Faults {
    pub fn none() -> Faults {
        Faults::default()
    }

    pub fn disk_full() -> Faults {
        Faults {
            write: Some(nix::libc::ENOSPC),
            ..Faults::default()
        }
    }

    pub fn write_errors() -> Faults {
        Faults {
            write: Some(nix::libc::EIO),
            ..Faults::default()
        }
    }

    pub fn fsync_errors() -> Faults {
        Faults {
            fsync: Some(nix::libc::EIO),
            ..Faults::default()
        }
    }

    pub fn slow_fsync(stall: Duration) -> Faults {
        Faults {
            fsync_stall: stall,
            ..Faults::default()
        }
    }
}
