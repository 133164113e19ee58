//! Names not yet durable. A create, unlink, rename or mkdir is done on
//! the backing directory at once, and the way to undo it is kept here
//! until its directory is fsynced (or writeback ages it out); a cut runs
//! the undos newest first. Pure bookkeeping: the file system runs the
//! steps.

use std::path::PathBuf;
use std::time::{Duration, Instant};

/// One step back, paths relative to the backing root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Undo {
    /// A new file, symlink or hard link: remove the name.
    Remove(PathBuf),
    /// A new directory: remove it and what is under it.
    RemoveDir(PathBuf),
    /// A removed directory: make it again.
    MakeDir(PathBuf),
    /// A renamed entry: move it from `now` back to `was`.
    Move { now: PathBuf, was: PathBuf },
    /// A name whose file was removed or replaced: its stashed hard link
    /// goes back under the name.
    Restore { stash: PathBuf, to: PathBuf },
}

#[derive(Debug)]
struct Entry {
    at: Instant,
    /// Directories whose fsync makes this change durable.
    dirs: Vec<PathBuf>,
    /// Steps, in the order they run at a cut.
    undo: Vec<Undo>,
}

/// Bound: none needed beyond time; writeback ages entries out after its
/// age, so the journal holds at most that many seconds of name changes.
#[derive(Debug, Default)]
pub struct Journal {
    entries: Vec<Entry>,
}

impl Journal {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn push(&mut self, at: Instant, dirs: Vec<PathBuf>, undo: Vec<Undo>) {
        self.entries.push(Entry { at, dirs, undo });
    }

    /// An fsync of `dir`: every change up to the last one in `dir`
    /// becomes durable. Earlier changes elsewhere go with it, which is
    /// more than POSIX promises and never less; it keeps the undo of what
    /// is left consistent. Returns the stashes no longer needed.
    pub fn sync_dir(&mut self, dir: &std::path::Path) -> Vec<PathBuf> {
        match self
            .entries
            .iter()
            .rposition(|e| e.dirs.iter().any(|d| d == dir))
        {
            Some(last) => self.commit(last + 1),
            None => Vec::new(),
        }
    }

    /// Writeback: changes older than `age` are durable.
    pub fn age_out(&mut self, now: Instant, age: Duration) -> Vec<PathBuf> {
        let n = self
            .entries
            .iter()
            .take_while(|e| now.duration_since(e.at) >= age)
            .count();
        self.commit(n)
    }

    /// Everything is durable (an orderly unmount).
    pub fn commit_all(&mut self) -> Vec<PathBuf> {
        self.commit(self.entries.len())
    }

    fn commit(&mut self, n: usize) -> Vec<PathBuf> {
        self.entries
            .drain(..n)
            .flat_map(|e| e.undo)
            .filter_map(|u| match u {
                Undo::Restore { stash, .. } => Some(stash),
                _ => None,
            })
            .collect()
    }

    /// A cut: the steps that take the names back to their durable state,
    /// newest change first.
    pub fn take_undo(&mut self) -> Vec<Undo> {
        self.entries.drain(..).rev().flat_map(|e| e.undo).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    #[test]
    fn a_dir_sync_commits_up_to_its_last_change_and_frees_stashes() {
        let t = Instant::now();
        let mut j = Journal::default();
        j.push(t, vec![p("a")], vec![Undo::Remove(p("a/x"))]);
        j.push(
            t,
            vec![p("b")],
            vec![Undo::Restore {
                stash: p(".s/1"),
                to: p("b/y"),
            }],
        );
        j.push(t, vec![p("a")], vec![Undo::Remove(p("a/z"))]);
        j.push(t, vec![p("c")], vec![Undo::Remove(p("c/w"))]);
        assert_eq!(j.sync_dir(&p("a")), vec![p(".s/1")]);
        assert_eq!(j.len(), 1);
        assert_eq!(j.sync_dir(&p("a")), Vec::<PathBuf>::new());
        assert_eq!(j.take_undo(), vec![Undo::Remove(p("c/w"))]);
    }

    #[test]
    fn a_cut_undoes_newest_first_and_age_commits_the_old() {
        let t = Instant::now();
        let mut j = Journal::default();
        j.push(t, vec![p("")], vec![Undo::Remove(p("f.tmp"))]);
        j.push(
            t + Duration::from_secs(10),
            vec![p("")],
            vec![
                Undo::Move {
                    now: p("f"),
                    was: p("f.tmp"),
                },
                Undo::Restore {
                    stash: p(".s/2"),
                    to: p("f"),
                },
            ],
        );
        assert!(j
            .age_out(t + Duration::from_secs(12), Duration::from_secs(5))
            .is_empty());
        assert_eq!(
            j.take_undo(),
            vec![
                Undo::Move {
                    now: p("f"),
                    was: p("f.tmp")
                },
                Undo::Restore {
                    stash: p(".s/2"),
                    to: p("f")
                },
            ]
        );
        assert!(j.is_empty());
    }
}
