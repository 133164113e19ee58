//! A node that left the cluster inconsistent (its data is not the group's
//! at any seqno) says so across restarts: a marker file in its data
//! directory, written durably when it diverges and removed only when a
//! full state transfer has replaced its data. Without it, a restart of
//! such a node with no position would run `--wsrep-recover`
//! (`position_recovery`), learn a seqno its storage engine reached with
//! the wrong data, and catch up by IST on top of it (MariaDB's
//! `galera-features#115` drops a schema on one node and expects a full
//! state transfer after the restart; Galera gets one because it never
//! recovers a position by itself).

use crate::log::warn;
use crate::storage::{self, Disk};
use std::path::Path;

const MARKER_FILE: &str = "lockstep-diverged";

/// Records that this node's data is not the group's.
pub fn mark(dir: &Path) {
    let text = "# Lockstep: this node left the cluster inconsistent.\n# It takes a full state \
                transfer at its next join; a successful one removes this file.\n";
    let path = dir.join(MARKER_FILE);
    if let Err(e) = storage::replace_durably(&Disk, &path, text.as_bytes()) {
        warn!(
            "cannot write {}: {e}; if this node restarts without a position it may recover \
             one from data that is not the cluster's",
            path.display()
        );
    }
}

/// Whether the marker is there (an unreadable one counts as there).
pub fn present(dir: &Path) -> bool {
    storage::marker_present(&Disk, &dir.join(MARKER_FILE))
}

/// A full state transfer replaced the data.
pub fn clear(dir: &Path) {
    storage::remove_marker(&Disk, &dir.join(MARKER_FILE));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_outlives_a_restart_and_a_state_transfer_clears_it() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!present(dir.path()));
        mark(dir.path());
        assert!(present(dir.path()), "what a restart reads");
        clear(dir.path());
        assert!(!present(dir.path()));
    }
}
