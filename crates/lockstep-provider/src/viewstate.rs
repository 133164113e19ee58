//! `<datadir>/gvwstate.dat`: the last primary view, for `pc.recovery`
//! (format and parser: `lockstep_core::saved_view`). Written on every
//! primary view while `pc.recovery` is on, removed at a clean close (as
//! Galera does: after a graceful shutdown the usual bootstrap rules
//! apply). Write failures are logged, not fatal: the file only enables an
//! automatic recovery.

use crate::storage::{self, Disk, Fs};
use lockstep_core::group::action::CertFingerprint;
use lockstep_core::saved_view::{SavedMember, SavedView};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use wsrep_abi::Uuid;

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

/// The saved view and the certificates it names (ADR 0014): a member's
/// `pc.recovery` vote after a crash of the whole cluster is taken only
/// from a peer presenting the certificate the member was bound to, so the
/// file must follow the group's binding table. Shared by the server thread
/// that saves each new primary view and the chores thread, to which the
/// rounds give new bindings (a founder binds itself after its first view; a certificate
/// reload binds anew); its own lock, a leaf taken with no other held,
/// keeps their writes of the file from interleaving.
pub struct ViewKeeper {
    dir: PathBuf,
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    /// The view last written, and each member's Raft id in it (the
    /// binding table's key; not in the file, since a restarted node has a
    /// new Raft id).
    saved: Option<(SavedView, Vec<u64>)>,
    /// The group's binding table as last heard; bounded by the members.
    bindings: BTreeMap<u64, CertFingerprint>,
}

/// A member of a primary view to save: its member id, Raft id and group
/// address.
pub struct ViewMember {
    pub uuid: Uuid,
    pub raft_id: u64,
    pub addr: String,
}

impl ViewKeeper {
    pub fn new(dir: &Path) -> ViewKeeper {
        ViewKeeper {
            dir: dir.to_path_buf(),
            kept: Mutex::new(Kept::default()),
        }
    }

    /// Saves a primary view, each member with the certificate the group
    /// bound it to.
    pub fn save(
        &self,
        me: Uuid,
        history: Uuid,
        seqno: i64,
        members: Vec<ViewMember>,
    ) -> Result<(), String> {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let ids = members.iter().map(|m| m.raft_id).collect();
        let view = SavedView {
            me,
            history,
            seqno,
            members: members
                .into_iter()
                .map(|m| SavedMember {
                    cert: kept.bindings.get(&m.raft_id).copied(),
                    uuid: m.uuid,
                    addr: m.addr,
                })
                .collect(),
        };
        let written = save(&self.dir, &view);
        kept.saved = Some((view, ids));
        written
    }

    /// The group's binding table changed: writes the saved view again if
    /// a certificate of one of its members changed. Returns whether it
    /// wrote. Rare (a founder's or a reloaded certificate's binding), so
    /// the caller's thread may take the small write.
    pub fn bindings_changed(&self, table: &BTreeMap<u64, CertFingerprint>) -> Result<bool, String> {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.bindings = table.clone();
        let Some((view, ids)) = kept.saved.as_mut() else {
            return Ok(false);
        };
        let mut moved = false;
        for (m, id) in view.members.iter_mut().zip(ids.iter()) {
            let cert = table.get(id).copied();
            // A binding is never dropped while its member stays: a cert
            // that vanished from the table (the member left) keeps the
            // one the view was saved with.
            if cert.is_some() && cert != m.cert {
                m.cert = cert;
                moved = true;
            }
        }
        if !moved {
            return Ok(false);
        }
        save(&self.dir, view).map(|()| true)
    }

    /// Forgets the saved view (with the file: `remove`).
    pub fn forget(&self) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.saved = None;
        remove(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(seqno: i64) -> SavedView {
        SavedView {
            me: Uuid::from_bytes([1; 16]),
            history: Uuid::from_bytes([2; 16]),
            seqno,
            members: vec![SavedMember {
                uuid: Uuid::from_bytes([1; 16]),
                addr: "127.0.0.1:4567".into(),
                cert: None,
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
                cert: None,
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

    #[test]
    fn the_keeper_follows_the_binding_table() {
        let dir = tempfile::tempdir().unwrap();
        let keeper = ViewKeeper::new(dir.path());
        let u = |b: u8| Uuid::from_bytes([b; 16]);
        let member = |b: u8| ViewMember {
            uuid: u(b),
            raft_id: b as u64 * 100,
            addr: format!("127.0.0.1:{}", 4500 + b as u16),
        };
        let mut table = BTreeMap::new();
        table.insert(200, [2; 32]);
        assert_eq!(keeper.bindings_changed(&table), Ok(false), "no view yet");
        keeper
            .save(u(1), u(9), 3, vec![member(1), member(2)])
            .unwrap();
        let certs = |dir: &Path| -> Vec<Option<[u8; 32]>> {
            load(dir)
                .unwrap()
                .unwrap()
                .members
                .iter()
                .map(|m| m.cert)
                .collect()
        };
        assert_eq!(certs(dir.path()), vec![None, Some([2; 32])]);
        // The founder binds itself after its first view.
        table.insert(100, [1; 32]);
        assert_eq!(keeper.bindings_changed(&table), Ok(true));
        assert_eq!(certs(dir.path()), vec![Some([1; 32]), Some([2; 32])]);
        assert_eq!(keeper.bindings_changed(&table), Ok(false), "unchanged");
        // A stranger's binding does not touch the file; a reload does.
        table.insert(300, [3; 32]);
        assert_eq!(keeper.bindings_changed(&table), Ok(false));
        table.insert(200, [4; 32]);
        assert_eq!(keeper.bindings_changed(&table), Ok(true));
        assert_eq!(certs(dir.path()), vec![Some([1; 32]), Some([4; 32])]);
        // A member that left keeps the certificate it was saved with.
        table.remove(&200);
        assert_eq!(keeper.bindings_changed(&table), Ok(false));
        assert_eq!(certs(dir.path()), vec![Some([1; 32]), Some([4; 32])]);
        keeper.forget();
        assert_eq!(load(dir.path()), Ok(None));
        assert_eq!(keeper.bindings_changed(&BTreeMap::new()), Ok(false));
    }
}
