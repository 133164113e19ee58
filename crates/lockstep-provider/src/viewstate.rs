//! `<datadir>/gvwstate.dat`: the last primary view, for `pc.recovery`
//! (format and parser: `lockstep_core::saved_view`). Written on every
//! primary view while `pc.recovery` is on, removed at a clean close (as
//! Galera does: after a graceful shutdown the usual bootstrap rules
//! apply). Write failures are logged, not fatal: the file only enables an
//! automatic recovery.

use lockstep_core::saved_view::SavedView;
use std::io::Write;
use std::path::{Path, PathBuf};

pub const FILE: &str = "gvwstate.dat";

fn path(dir: &Path) -> PathBuf {
    dir.join(FILE)
}

/// The saved view, `None` without a file; `Err` explains a bad file.
pub fn load(dir: &Path) -> Result<Option<SavedView>, String> {
    let p = path(dir);
    let text = match std::fs::read(&p) {
        Ok(bytes) if bytes.len() > lockstep_core::saved_view::MAX_FILE_BYTES => {
            return Err(format!(
                "{}: {} bytes, not a saved view",
                p.display(),
                bytes.len()
            ))
        }
        Ok(bytes) => {
            String::from_utf8(bytes).map_err(|_| format!("{}: not text; delete it", p.display()))?
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", p.display())),
    };
    SavedView::parse(&text)
        .map(Some)
        .map_err(|e| format!("{}: {e}", p.display()))
}

/// Writes the view durably: a temporary file, fsync, rename.
pub fn save(dir: &Path, view: &SavedView) -> Result<(), String> {
    let p = path(dir);
    let tmp = dir.join(format!("{FILE}.tmp"));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(view.to_text().as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &p)?;
        // The rename itself must survive a power loss.
        std::fs::File::open(dir)?.sync_all()
    };
    write().map_err(|e| format!("cannot write {}: {e}", p.display()))
}

pub fn remove(dir: &Path) {
    let _ = std::fs::remove_file(path(dir));
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstep_core::saved_view::SavedMember;
    use wsrep_abi::Uuid;

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
