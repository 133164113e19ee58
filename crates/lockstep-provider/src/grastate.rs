//! `<data_dir>/grastate.dat` on disk, behind a trait so tests can inject
//! failures. The format lives in `lockstep_core::saved_state`.

use lockstep_core::saved_state::{SavedState, SavedStateError, MAX_FILE_BYTES};
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

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

/// The real file, locked for as long as the provider lives.
pub struct GrastateFile {
    path: PathBuf,
    file: File,
}

impl GrastateFile {
    pub const NAME: &'static str = "grastate.dat";

    pub fn open(data_dir: &Path) -> Result<GrastateFile, StoreError> {
        let path = data_dir.join(Self::NAME);
        let io = |err| StoreError::Io {
            path: path.clone(),
            err,
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Err(StoreError::Locked(path)),
            Err(std::fs::TryLockError::Error(err)) => return Err(io(err)),
        }
        Ok(GrastateFile { path, file })
    }
}

impl StateStore for GrastateFile {
    fn load(&mut self) -> Result<SavedState, StoreError> {
        let io = |err| StoreError::Io {
            path: self.path.clone(),
            err,
        };
        self.file.seek(SeekFrom::Start(0)).map_err(io)?;
        let mut bytes = Vec::new();
        // Read one byte past the cap so an oversized file is detected
        // without reading all of it.
        (&self.file)
            .take(MAX_FILE_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(io)?;
        let text = String::from_utf8_lossy(&bytes);
        SavedState::parse(&text).map_err(|err| StoreError::Corrupt {
            path: self.path.clone(),
            err,
        })
    }

    fn store(&mut self, state: &SavedState) -> Result<(), StoreError> {
        let io = |err| StoreError::Io {
            path: self.path.clone(),
            err,
        };
        let text = state.render();
        self.file.seek(SeekFrom::Start(0)).map_err(io)?;
        self.file.write_all(text.as_bytes()).map_err(io)?;
        self.file.set_len(text.len() as u64).map_err(io)?;
        self.file.sync_data().map_err(io)
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
    fn a_corrupt_file_is_a_clear_error() {
        let dir = tempdir().join("corrupt");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(GrastateFile::NAME), "seqno: banana\n").unwrap();
        let err = GrastateFile::open(&dir).unwrap().load().unwrap_err();
        assert!(err.to_string().contains("malformed"), "{err}");
    }
}
