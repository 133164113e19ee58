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
use crate::storage::marker::{Marker, MarkerJob};
use crate::storage::{self, Disk};
use std::path::Path;

const MARKER_FILE: &str = "lockstep-diverged";

const MARKER_TEXT: &str =
    "# Lockstep: this node left the cluster inconsistent.\n# It takes a full state \
                           transfer at its next join; a successful one removes this file.\n";

/// Whether this node's data is the group's at some seqno, and its marker
/// file: decided under the state lock, written or removed after it
/// (`storage::marker`, ADR 0038).
#[derive(Default)]
pub struct Diverged {
    diverged: bool,
    marker: Marker,
}

impl Diverged {
    /// As found at start in `dir` (the marker there or not).
    pub fn at_start(dir: &Path, diverged: bool) -> Diverged {
        Diverged {
            diverged,
            marker: Marker::at(dir.join(MARKER_FILE), MARKER_TEXT),
        }
    }

    /// This node's data is not the group's at any seqno.
    pub fn is(&self) -> bool {
        self.diverged
    }

    /// The node diverged (again): the job writes the marker, run by every
    /// caller after it lets go of the lock (a second caller waits there
    /// for a write in progress), with [`write`].
    #[must_use = "the marker is written by the job"]
    pub fn set(&mut self) -> MarkerJob {
        self.diverged = true;
        self.marker.want(true)
    }

    /// A full state transfer replaced the data: the job removes the marker
    /// (run with [`remove`]); `None` if the node had not diverged.
    pub fn clear(&mut self) -> Option<MarkerJob> {
        std::mem::replace(&mut self.diverged, false).then(|| self.marker.want(false))
    }
}

/// Writes the marker (a job of [`Diverged::set`]), under no lock.
pub fn write(job: MarkerJob) {
    if let Err(e) = job.run(&Disk) {
        warn!(
            "cannot write the diverged marker ({e}); if this node restarts without a position it may \
             recover one from data that is not the cluster's"
        );
    }
}

/// Removes the marker (a job of [`Diverged::clear`]), under no lock.
pub fn remove(job: MarkerJob) {
    if let Err(e) = job.run(&Disk) {
        warn!("cannot remove the diverged marker ({e})");
    }
}

/// Whether the marker is there (an unreadable one counts as there).
pub fn present(dir: &Path) -> bool {
    storage::marker_present(&Disk, &dir.join(MARKER_FILE))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state transfer's removal that runs late, after the node diverged
    /// again, leaves the new divergence's marker; a second thread finding
    /// the node diverged gets the same write (done once).
    #[test]
    fn a_late_removal_leaves_a_new_divergences_marker() {
        let dir = tempfile::tempdir().unwrap();
        let mut d = Diverged::at_start(dir.path(), false);
        write(d.set());
        assert!(present(dir.path()));
        let removal = d.clear().expect("it had diverged");
        let again = d.set();
        let second = d.set();
        assert_eq!(again.wish(), second.wish());
        write(again);
        remove(removal);
        assert!(present(dir.path()), "the late removal took the new marker");
        write(second);
        assert!(present(dir.path()));
        assert!(d.is());
        // A marker found at start goes with the first full transfer.
        let mut d = Diverged::at_start(dir.path(), true);
        remove(d.clear().expect("diverged at start"));
        assert!(!present(dir.path()));
    }
}
