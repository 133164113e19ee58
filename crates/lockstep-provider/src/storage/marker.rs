//! A marker file whose presence the provider's state decides under its
//! lock and whose durable write or removal runs after the lock is let go
//! of (ADR 0038): the commit bypass's marker and the diverged marker.
//!
//! The state keeps a *wish* (present or absent) with a generation that
//! moves whenever the wish changes. A [`MarkerJob`] carries the wish it was
//! made for and makes the file match it under the file's own leaf lock,
//! unless a newer wish was made true already. So jobs may run late, twice
//! or in any order: the file ends as the newest wish run says, and a
//! thread that needs the file there (before it acts on it) runs its job
//! and waits on that lock for any write in progress.

use super::{remove_durably, replace_durably, Fs};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// A wish about the file: its generation, and whether the file is to be
/// there. Generation 0 is the state before any wish (the file may be
/// there or not).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Wish {
    generation: u64,
    present: bool,
}

impl Wish {
    pub fn present(&self) -> bool {
        self.present
    }
}

/// The file and the newest wish made true on disk.
#[derive(Default)]
struct MarkerFile {
    /// `None` in unit tests without a data directory: jobs succeed and
    /// write nothing.
    path: Option<PathBuf>,
    /// What the file says when written.
    text: &'static str,
    /// Held across the file operation, never under the state lock.
    applied: Mutex<Wish>,
}

/// The state's side: the file and the current wish. Kept under the
/// provider's lock.
#[derive(Default)]
pub struct Marker {
    file: Arc<MarkerFile>,
    wanted: Wish,
}

impl Marker {
    /// The marker at `path`, with `text` as its content.
    pub fn at(path: PathBuf, text: &'static str) -> Marker {
        Marker {
            file: Arc::new(MarkerFile {
                path: Some(path),
                text,
                applied: Mutex::default(),
            }),
            wanted: Wish::default(),
        }
    }

    /// Wishes the file there (`true`) or gone, a new generation if that
    /// changes the wish; the job makes it so, run after the state lock is
    /// let go of.
    pub fn want(&mut self, present: bool) -> MarkerJob {
        self.set(present);
        self.job()
    }

    /// [`Marker::want`] without its job, for a caller that cannot run one
    /// (another thread takes it later, [`Marker::job`]).
    pub fn set(&mut self, present: bool) {
        if self.wanted.present != present || self.wanted.generation == 0 {
            self.wanted = Wish {
                generation: self.wanted.generation + 1,
                present,
            };
        }
    }

    /// The job for the current wish.
    pub fn job(&self) -> MarkerJob {
        MarkerJob {
            file: self.file.clone(),
            wish: self.wanted,
        }
    }

    /// The current wish.
    pub fn wanted(&self) -> Wish {
        self.wanted
    }

    /// Whether `wish` (a job's) is still the current one.
    pub fn is_current(&self, wish: Wish) -> bool {
        self.wanted == wish
    }
}

/// A file operation on the marker, decided under the state lock and run
/// after it is let go of.
#[must_use = "a marker job does nothing until it is run"]
pub struct MarkerJob {
    file: Arc<MarkerFile>,
    wish: Wish,
}

impl MarkerJob {
    /// The wish this job makes true.
    pub fn wish(&self) -> Wish {
        self.wish
    }

    /// Makes the file match the wish (a durable write or removal), unless
    /// a newer wish was made true already, and returns whether the file
    /// is as this job wishes once it returns. A failure is logged by the
    /// caller, which knows what it means.
    pub fn run(self, fs: &dyn Fs) -> Result<bool, std::io::Error> {
        crate::state_lock::expect_unlocked("a marker file's write");
        let mut applied = self.file.applied.lock().unwrap_or_else(|p| p.into_inner());
        if applied.generation > self.wish.generation || *applied == self.wish {
            return Ok(applied.present == self.wish.present);
        }
        if let Some(path) = &self.file.path {
            let named = |e: std::io::Error| {
                std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
            };
            if self.wish.present {
                replace_durably(fs, path, self.file.text.as_bytes()).map_err(named)?;
            } else {
                match remove_durably(fs, path) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(named(e)),
                    _ => {}
                }
            }
        }
        *applied = self.wish;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{marker_present, Disk};

    /// Jobs run late and in any order: a late one never undoes a newer
    /// wish, and one that a newer wish overtook says it did not make the
    /// file as it wished.
    #[test]
    fn a_late_job_never_undoes_a_newer_wish() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m");
        let mut m = Marker::at(path.clone(), "x\n");
        let write = m.want(true);
        let removal = m.want(false);
        assert!(removal.run(&Disk).unwrap(), "nothing to remove is fine");
        let wish = write.wish();
        assert!(!write.run(&Disk).unwrap(), "overtaken by the removal");
        assert!(!m.is_current(wish));
        assert!(!marker_present(&Disk, &path));
        let old_removal = m.want(false);
        let write = m.want(true);
        assert!(write.run(&Disk).unwrap());
        assert!(!old_removal.run(&Disk).unwrap(), "overtaken by the write");
        assert!(marker_present(&Disk, &path));
        // The same wish twice: the second finds it made, with no I/O.
        let again = m.want(true);
        assert_eq!(again.wish(), m.wanted());
        assert!(again.run(&Disk).unwrap());
    }

    /// A file left from before (generation 0) is removed by the first
    /// wish for its absence.
    #[test]
    fn the_first_wish_acts_on_a_file_left_from_before() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m");
        std::fs::write(&path, "old").unwrap();
        let mut m = Marker::at(path.clone(), "x\n");
        assert!(m.want(false).run(&Disk).unwrap());
        assert!(!marker_present(&Disk, &path));
    }
}
