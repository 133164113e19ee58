//! `<datadir>/gvwstate.dat`: the last primary view, for `pc.recovery`
//! (format and parser: `lockstep_core::saved_view`). Written on every
//! primary view while `pc.recovery` is on, removed at a clean close (as
//! Galera does: after a graceful shutdown the usual bootstrap rules
//! apply). Write failures are logged, not fatal: the file only enables an
//! automatic recovery.

use crate::storage::{self, Disk, Fs};
use lockstep_core::saved_view::SavedView;
use std::path::{Path, PathBuf};

pub const FILE: &str = "gvwstate.dat";

fn path(dir: &Path) -> PathBuf {
    dir.join(FILE)
}

/// The saved view, `None` without a file; `Err` explains a bad file.
pub fn load(dir: &Path) -> Result<Option<SavedView>, String> {
    load_on(&Disk, dir)
}

fn load_on(fs: &dyn Fs, dir: &Path) -> Result<Option<SavedView>, String> {
    let p = path(dir);
    let text = match fs.read(&p, lockstep_core::saved_view::MAX_FILE_BYTES) {
        Ok(Some(bytes)) if bytes.len() > lockstep_core::saved_view::MAX_FILE_BYTES => {
            return Err(format!(
                "{}: {} bytes, not a saved view",
                p.display(),
                bytes.len()
            ))
        }
        Ok(Some(bytes)) => {
            String::from_utf8(bytes).map_err(|_| format!("{}: not text; delete it", p.display()))?
        }
        Ok(None) => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", p.display())),
    };
    SavedView::parse(&text)
        .map(Some)
        .map_err(|e| format!("{}: {e}", p.display()))
}

/// Writes the view durably: a temporary file, fsync, rename, and an fsync
/// of the directory.
pub fn save(dir: &Path, view: &SavedView) -> Result<(), String> {
    save_on(&Disk, dir, view)
}

fn save_on(fs: &dyn Fs, dir: &Path, view: &SavedView) -> Result<(), String> {
    let p = path(dir);
    storage::replace_durably(fs, &p, view.to_text().as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", p.display()))
}

/// Removes the file durably: a view that was cleared must not come back
/// after a power loss and re-form a component that ended cleanly.
pub fn remove(dir: &Path) {
    let _ = storage::remove_durably(&Disk, &path(dir));
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstep_core::saved_view::SavedMember;
    use wsrep_abi::Uuid;

    fn view(seqno: i64) -> SavedView {
        SavedView {
            me: Uuid::from_bytes([1; 16]),
            history: Uuid::from_bytes([2; 16]),
            seqno,
            members: vec![SavedMember {
                uuid: Uuid::from_bytes([1; 16]),
                addr: "127.0.0.1:4567".into(),
            }],
        }
    }

    #[test]
    fn a_power_loss_at_any_step_of_a_save_leaves_the_old_view_or_the_new_one() {
        use crate::storage::power_loss::SimFs;
        let dir = Path::new("/data");
        for cut in 0.. {
            let fs = SimFs::new();
            save_on(&fs, dir, &view(40)).unwrap();
            fs.cut_after(cut);
            let saved = save_on(&fs, dir, &view(41)).is_ok();
            fs.power_loss();
            let loaded = load_on(&fs, dir).unwrap();
            if saved {
                assert_eq!(loaded, Some(view(41)), "cut {cut}");
                break;
            }
            assert!(
                loaded == Some(view(40)) || loaded == Some(view(41)),
                "cut {cut}: {loaded:?}"
            );
        }
    }

    #[test]
    fn saves_loads_and_removes() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path()), Ok(None));
        let v = SavedView {
            me: Uuid::from_bytes([1; 16]),
            history: Uuid::from_bytes([2; 16]),
            seqno: 40,
            members: vec![SavedMember {
                uuid: Uuid::from_bytes([1; 16]),
                addr: "127.0.0.1:4567".into(),
            }],
        };
        save(dir.path(), &v).unwrap();
        assert_eq!(load(dir.path()), Ok(Some(v)));
        std::fs::write(dir.path().join(FILE), "my_uuid: nonsense\n").unwrap();
        let err = load(dir.path()).unwrap_err();
        assert!(err.contains("gvwstate.dat"), "{err}");
        remove(dir.path());
        assert_eq!(load(dir.path()), Ok(None));
    }
}
