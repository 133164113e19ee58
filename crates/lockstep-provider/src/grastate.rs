//! `<data_dir>/grastate.dat` on disk, behind a trait so tests can inject
//! failures. The format lives in `lockstep_core::saved_state`. The file is
//! replaced whole through [`crate::storage`] (temporary file, fsync,
//! rename, directory fsync): a crash while it is written leaves the old
//! state or the new one, never a torn file.

use crate::storage::{self, Disk, Fs};
use lockstep_core::saved_state::{SavedState, SavedStateError, MAX_FILE_BYTES};
use std::fmt;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug)]
pub enum StoreError {
    Io { path: PathBuf, err: std::io::Error },
    Locked(PathBuf),
    Corrupt { path: PathBuf, err: SavedStateError },
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Io { path, err } => write!(f, "{}: {err}", path.display()),
            StoreError::Locked(path) => write!(
                f,
                "{} is locked by another process: is another server running on this data directory?",
                path.display()
            ),
            StoreError::Corrupt { path, err } => write!(f, "{}: {err}", path.display()),
        }
    }
}

impl std::error::Error for StoreError {}

/// Where the provider keeps its saved position.
pub trait StateStore: Send {
    /// The saved state; the default (no position) when there is none yet.
    fn load(&mut self) -> Result<SavedState, StoreError>;
    /// Persist durably before returning.
    fn store(&mut self, state: &SavedState) -> Result<(), StoreError>;
}

/// The real file. The data directory is locked (`flock` on the directory
/// itself, since the file is replaced by renames) for as long as the
/// provider lives.
pub struct GrastateFile {
    path: PathBuf,
    fs: Arc<dyn Fs>,
    _lock: Option<File>,
}

impl GrastateFile {
    pub const NAME: &'static str = "grastate.dat";

    pub fn open(data_dir: &Path) -> Result<GrastateFile, StoreError> {
        let path = data_dir.join(Self::NAME);
        let io = |err| StoreError::Io {
            path: data_dir.to_path_buf(),
            err,
        };
        let lock = File::open(data_dir).map_err(io)?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Err(StoreError::Locked(path)),
            Err(std::fs::TryLockError::Error(err)) => return Err(io(err)),
        }
        Ok(GrastateFile {
            path,
            fs: Arc::new(Disk),
            _lock: Some(lock),
        })
    }

    /// The file in `data_dir` of `fs`, unlocked (power-loss tests).
    #[cfg(test)]
    pub fn on(fs: Arc<dyn Fs>, data_dir: &Path) -> GrastateFile {
        GrastateFile {
            path: data_dir.join(Self::NAME),
            fs,
            _lock: None,
        }
    }
}

impl StateStore for GrastateFile {
    fn load(&mut self) -> Result<SavedState, StoreError> {
        let bytes = self
            .fs
            .read(&self.path, MAX_FILE_BYTES)
            .map_err(|err| StoreError::Io {
                path: self.path.clone(),
                err,
            })?
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        SavedState::parse(&text).map_err(|err| StoreError::Corrupt {
            path: self.path.clone(),
            err,
        })
    }

    fn store(&mut self, state: &SavedState) -> Result<(), StoreError> {
        storage::replace_durably(&*self.fs, &self.path, state.render().as_bytes()).map_err(|err| {
            StoreError::Io {
                path: self.path.clone(),
                err,
            }
        })
    }
}

/// An arbitrator's store: it holds no data, so it has no position to keep
/// (a restarted arbitrator simply joins again, as garbd does).
pub struct Stateless;

impl StateStore for Stateless {
    fn load(&mut self) -> Result<SavedState, StoreError> {
        Ok(SavedState::default())
    }
    fn store(&mut self, _: &SavedState) -> Result<(), StoreError> {
        Ok(())
    }
}

/// An in-memory store for tests, which can be told to fail. Clones share
/// the same state, so a test keeps one to inspect what the provider wrote.
#[cfg(test)]
#[derive(Clone, Default)]
pub struct MemoryStore(pub std::sync::Arc<std::sync::Mutex<MemoryState>>);

#[cfg(test)]
#[derive(Default)]
pub struct MemoryState {
    pub state: SavedState,
    pub fail_writes: bool,
    pub writes: usize,
    /// Writes attempted while `fail_writes` was set.
    pub failed_writes: usize,
}

#[cfg(test)]
impl StateStore for MemoryStore {
    fn load(&mut self) -> Result<SavedState, StoreError> {
        Ok(self.0.lock().unwrap().state)
    }
    fn store(&mut self, state: &SavedState) -> Result<(), StoreError> {
        let mut m = self.0.lock().unwrap();
        if m.fail_writes {
            m.failed_writes += 1;
            return Err(StoreError::Io {
                path: PathBuf::from("memory"),
                err: std::io::Error::other("injected failure"),
            });
        }
        m.writes += 1;
        m.state = *state;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tempdir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "lockstep-grastate-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_new_file_has_no_position_and_writes_round_trip() {
        let dir = tempdir();
        let _ = std::fs::remove_file(dir.join(GrastateFile::NAME));
        let mut f = GrastateFile::open(&dir).unwrap();
        assert!(!f.load().unwrap().has_position());
        let s = SavedState {
            uuid: "6c5e3a2e-8d38-11ee-9a4f-0b3d4e5f6a7b".parse().unwrap(),
            seqno: 1234567,
            safe_to_bootstrap: true,
        };
        f.store(&s).unwrap();
        // A shorter record must not leave the tail of the longer one behind.
        let shorter = SavedState { seqno: -1, ..s };
        f.store(&shorter).unwrap();
        assert_eq!(f.load().unwrap(), shorter);
        let on_disk = std::fs::read_to_string(dir.join(GrastateFile::NAME)).unwrap();
        assert!(on_disk.ends_with("safe_to_bootstrap: 1\n"), "{on_disk}");
    }

    #[test]
    fn a_second_opener_is_refused_while_the_first_holds_the_lock() {
        let dir = tempdir().join("lock");
        std::fs::create_dir_all(&dir).unwrap();
        let _first = GrastateFile::open(&dir).unwrap();
        assert!(matches!(
            GrastateFile::open(&dir),
            Err(StoreError::Locked(_))
        ));
    }

    #[test]
    fn a_power_loss_at_any_step_of_a_store_leaves_the_old_state_or_the_new_one() {
        use crate::storage::power_loss::SimFs;
        let dir = Path::new("/data");
        let uuid = wsrep_abi::Uuid::from_bytes([7; 16]);
        let old = SavedState {
            uuid,
            seqno: 41,
            safe_to_bootstrap: true,
        };
        let new = SavedState {
            uuid,
            seqno: -1,
            safe_to_bootstrap: false,
        };
        let mut cuts = 0;
        for cut in 0.. {
            let fs = Arc::new(SimFs::new());
            GrastateFile::on(fs.clone(), dir).store(&old).unwrap();
            fs.cut_after(cut);
            let stored = GrastateFile::on(fs.clone(), dir).store(&new).is_ok();
            fs.power_loss();
            let loaded = GrastateFile::on(fs.clone(), dir).load().unwrap();
            if stored {
                assert_eq!(
                    loaded, new,
                    "cut {cut}: the store returned, so it must last"
                );
                break;
            }
            assert!(loaded == old || loaded == new, "cut {cut}: {loaded:?}");
            cuts += 1;
        }
        assert!(cuts >= 4, "a store has four steps, {cuts} were cut");
    }

    #[test]
    fn a_corrupt_file_is_a_clear_error() {
        let dir = tempdir().join("corrupt");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(GrastateFile::NAME), "seqno: banana\n").unwrap();
        let err = GrastateFile::open(&dir).unwrap().load().unwrap_err();
        assert!(err.to_string().contains("malformed"), "{err}");
    }
}
