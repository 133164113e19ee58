//! A file system in memory that models what a power loss keeps: file
//! contents as of their last fsync (a file written since is torn: the
//! first half of the new bytes over the old ones, the worst a partial
//! write-back leaves), directory entries as of their directory's last
//! fsync. It can also be told to lose power after a
//! number of operations, so a test runs the real code once per step and
//! checks what survives each cut.
//!
//! Files are inodes; a directory maps names to inodes, with a live map and
//! a durable one per directory. Renaming moves an inode between names, so
//! an fsync of the file before its rename makes its content durable under
//! either name.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::{AppendFile, Fs};

#[derive(Debug, Clone, Default)]
struct Inode {
    live: Vec<u8>,
    durable: Vec<u8>,
}

#[derive(Debug, Default)]
struct State {
    inodes: Vec<Inode>,
    live: BTreeMap<PathBuf, usize>,
    durable: BTreeMap<PathBuf, usize>,
    /// Operations left before the power goes; `None`: no cut planned.
    ops_left: Option<usize>,
    off: bool,
}

/// See the module documentation. Clones share one file system (an open
/// file keeps a handle on it).
#[derive(Debug, Default, Clone)]
pub struct SimFs(Arc<Mutex<State>>);

fn power_is_off() -> io::Error {
    io::Error::other("power loss (simulated)")
}

fn dir_of(path: &Path) -> PathBuf {
    path.parent().map(Path::to_path_buf).unwrap_or_default()
}

/// What a partial write-back of `new` over `old` leaves.
fn torn(old: &[u8], new: &[u8]) -> Vec<u8> {
    let half = new.len() / 2;
    let mut t = new[..half].to_vec();
    if old.len() > half {
        t.extend_from_slice(&old[half..]);
    }
    t
}

impl SimFs {
    pub fn new() -> SimFs {
        SimFs::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The power goes after `n` more operations: the next one fails, and
    /// every one after it until [`SimFs::power_loss`].
    pub fn cut_after(&self, n: usize) {
        self.state().ops_left = Some(n);
    }

    /// The power goes now and comes back: only what was durable is left.
    pub fn power_loss(&self) {
        let mut s = self.state();
        s.live = s.durable.clone();
        for inode in &mut s.inodes {
            if inode.live != inode.durable {
                inode.durable = torn(&inode.durable, &inode.live);
            }
            inode.live = inode.durable.clone();
        }
        s.off = false;
        s.ops_left = None;
    }

    /// Counts an operation; fails once the planned cut is reached.
    fn step(&self) -> io::Result<std::sync::MutexGuard<'_, State>> {
        let mut s = self.state();
        if s.off {
            return Err(power_is_off());
        }
        if let Some(left) = s.ops_left {
            if left == 0 {
                s.off = true;
                return Err(power_is_off());
            }
            s.ops_left = Some(left - 1);
        }
        Ok(s)
    }

    fn inode_of(s: &State, path: &Path) -> io::Result<usize> {
        s.live
            .get(path)
            .copied()
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }
}

/// An open file of a [`SimFs`]: its inode, whatever names it has since.
struct SimFile {
    fs: SimFs,
    inode: usize,
    /// Where the next append goes.
    position: usize,
}

impl AppendFile for SimFile {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        let mut s = self.fs.step()?;
        let live = &mut s.inodes[self.inode].live;
        let end = self.position + bytes.len();
        if live.len() < end {
            live.resize(end, 0);
        }
        live[self.position..end].copy_from_slice(bytes);
        self.position = end;
        Ok(())
    }

    fn reserve(&mut self, len: u64) -> io::Result<()> {
        let mut s = self.fs.step()?;
        let live = &mut s.inodes[self.inode].live;
        if (live.len() as u64) < len {
            live.resize(len as usize, 0);
        }
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        let mut s = self.fs.step()?;
        let inode = &mut s.inodes[self.inode];
        inode.durable = inode.live.clone();
        Ok(())
    }
}

impl Fs for SimFs {
    fn read(&self, path: &Path, limit: usize) -> io::Result<Option<Vec<u8>>> {
        let s = self.step()?;
        Ok(s.live.get(path).map(|&i| {
            let data = &s.inodes[i].live;
            data[..data.len().min(limit + 1)].to_vec()
        }))
    }

    fn write_file(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let mut s = self.step()?;
        match s.live.get(path).copied() {
            Some(i) => s.inodes[i].live = bytes.to_vec(),
            None => {
                s.inodes.push(Inode {
                    live: bytes.to_vec(),
                    durable: Vec::new(),
                });
                let i = s.inodes.len() - 1;
                s.live.insert(path.to_path_buf(), i);
            }
        }
        Ok(())
    }

    fn sync_file(&self, path: &Path) -> io::Result<()> {
        let mut s = self.step()?;
        let i = *s
            .live
            .get(path)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        s.inodes[i].durable = s.inodes[i].live.clone();
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.step()?;
        let i = s
            .live
            .remove(from)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        s.live.insert(to.to_path_buf(), i);
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut s = self.step()?;
        s.live.remove(path);
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.step()?;
        let in_dir = |p: &PathBuf| dir_of(p) == dir;
        let live: Vec<(PathBuf, usize)> = s
            .live
            .iter()
            .filter(|(p, _)| in_dir(p))
            .map(|(p, &i)| (p.clone(), i))
            .collect();
        s.durable.retain(|p, _| !in_dir(p));
        s.durable.extend(live);
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<std::ffi::OsString>> {
        let s = self.step()?;
        Ok(s.live
            .keys()
            .filter(|p| dir_of(p) == dir)
            .filter_map(|p| p.file_name().map(|n| n.to_os_string()))
            .collect())
    }

    fn len(&self, path: &Path) -> io::Result<Option<u64>> {
        let s = self.step()?;
        Ok(s.live.get(path).map(|&i| s.inodes[i].live.len() as u64))
    }

    fn set_len(&self, path: &Path, len: u64) -> io::Result<()> {
        let mut s = self.step()?;
        let i = SimFs::inode_of(&s, path)?;
        s.inodes[i].live.resize(len as usize, 0);
        Ok(())
    }

    fn open_append(&self, path: &Path, truncate: bool) -> io::Result<Box<dyn AppendFile>> {
        let mut s = self.step()?;
        let inode = match (s.live.get(path).copied(), truncate) {
            (Some(i), true) => {
                s.inodes[i].live.clear();
                i
            }
            (Some(i), false) => i,
            (None, true) => {
                s.inodes.push(Inode::default());
                let i = s.inodes.len() - 1;
                s.live.insert(path.to_path_buf(), i);
                i
            }
            (None, false) => return Err(io::Error::from(io::ErrorKind::NotFound)),
        };
        let position = s.inodes[inode].live.len();
        Ok(Box::new(SimFile {
            fs: self.clone(),
            inode,
            position,
        }))
    }

    fn open_read(&self, path: &Path, offset: u64) -> io::Result<Box<dyn io::Read + Send>> {
        let s = self.step()?;
        let i = SimFs::inode_of(&s, path)?;
        let data = s.inodes[i]
            .live
            .get(offset as usize..)
            .unwrap_or(&[])
            .to_vec();
        Ok(Box::new(io::Cursor::new(data)))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{remove_durably, replace_durably};
    use super::*;

    fn read(fs: &SimFs, p: &Path) -> Option<Vec<u8>> {
        fs.read(p, 100).unwrap()
    }

    #[test]
    fn what_was_not_synced_is_lost_or_torn() {
        let fs = SimFs::new();
        let p = Path::new("/d/f");
        fs.write_file(p, b"data").unwrap();
        fs.sync_file(p).unwrap();
        fs.power_loss();
        assert_eq!(read(&fs, p), None, "the name was never synced");
        fs.write_file(p, b"data").unwrap();
        fs.sync_dir(Path::new("/d")).unwrap();
        fs.power_loss();
        assert_eq!(
            read(&fs, p).as_deref(),
            Some(&b"da"[..]),
            "half written back"
        );
        fs.write_file(p, b"data").unwrap();
        fs.sync_file(p).unwrap();
        fs.write_file(p, b"newer").unwrap();
        fs.power_loss();
        assert_eq!(
            read(&fs, p).as_deref(),
            Some(&b"neta"[..]),
            "neither version"
        );
    }

    #[test]
    fn a_durable_replace_survives_a_cut_at_every_step_whole() {
        let p = Path::new("/d/state");
        for cut in 0.. {
            let fs = SimFs::new();
            replace_durably(&fs, p, b"old").unwrap();
            fs.cut_after(cut);
            let done = replace_durably(&fs, p, b"new").is_ok();
            fs.power_loss();
            let got = read(&fs, p);
            if done {
                assert_eq!(got.as_deref(), Some(&b"new"[..]), "cut {cut}");
                break;
            }
            assert!(
                got.as_deref() == Some(&b"old"[..]) || got.as_deref() == Some(&b"new"[..]),
                "cut {cut}: {got:?}"
            );
        }
    }

    #[test]
    fn writing_in_place_is_what_a_cut_tears() {
        // The control for the test above: without the temporary file and
        // the rename, a cut before the fsync leaves neither version.
        let fs = SimFs::new();
        let p = Path::new("/d/state");
        replace_durably(&fs, p, b"old state").unwrap();
        fs.write_file(p, b"NEW STATE").unwrap();
        fs.power_loss();
        assert_eq!(read(&fs, p).as_deref(), Some(&b"NEW state"[..]), "torn");
    }

    #[test]
    fn a_durable_remove_stays_removed() {
        let fs = SimFs::new();
        let p = Path::new("/d/marker");
        replace_durably(&fs, p, b"x").unwrap();
        fs.remove(p).unwrap();
        fs.power_loss();
        assert!(read(&fs, p).is_some(), "an unsynced remove comes back");
        remove_durably(&fs, p).unwrap();
        fs.power_loss();
        assert_eq!(read(&fs, p), None);
    }
}
