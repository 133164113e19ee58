//! The arbitrator's status file, `<workdir>/lockstep-arbitrator.json`:
//! written every second (and replaced atomically), read by `lockstep
//! status --arbitrator` and `lockstep check --arbitrator`. A file not
//! rewritten for [`STALE_AFTER`] means the arbitrator is gone.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

pub const FILE_NAME: &str = "lockstep-arbitrator.json";
/// Five missed rewrites.
pub const STALE_AFTER: Duration = Duration::from_secs(5);
/// A status file is a few hundred bytes; anything much larger is not ours.
const MAX_BYTES: u64 = 1 << 20;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub name: String,
    pub pid: u32,
    /// The group channel's `host:port`.
    pub listen: String,
    /// Milliseconds since the Unix epoch of this write.
    pub updated_ms: u64,
    /// `wsrep_%` figures without the prefix (`cluster_status`,
    /// `cluster_size`, `local_state_comment`, `last_committed`, ...).
    pub wsrep: BTreeMap<String, String>,
}

impl Status {
    /// Age of the file's content at `now`.
    pub fn age(&self, now: SystemTime) -> Duration {
        let now_ms = now
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        Duration::from_millis(now_ms.saturating_sub(self.updated_ms))
    }

    /// The figures as `SHOW STATUS` rows (`wsrep_` prefixed), or why they
    /// cannot be trusted.
    pub fn rows(&self, now: SystemTime) -> Result<Vec<(String, String)>, String> {
        let age = self.age(now);
        if age > STALE_AFTER {
            return Err(format!(
                "the arbitrator's status is {:.0} s old: is it running (pid {})?",
                age.as_secs_f64(),
                self.pid
            ));
        }
        Ok(self
            .wsrep
            .iter()
            .map(|(k, v)| (format!("wsrep_{k}"), v.clone()))
            .collect())
    }
}

pub fn path_in(workdir: &Path) -> PathBuf {
    workdir.join(FILE_NAME)
}

/// Writes through a temporary file and a rename: readers never see half.
pub fn write(workdir: &Path, status: &Status) -> std::io::Result<()> {
    let path = path_in(workdir);
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_vec_pretty(status).map_err(std::io::Error::other)?;
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, &path)
}

pub fn read(workdir: &Path) -> Result<Status, String> {
    let path = path_in(workdir);
    let meta = std::fs::metadata(&path)
        .map_err(|e| format!("no arbitrator status at {}: {e}", path.display()))?;
    if meta.len() > MAX_BYTES {
        return Err(format!(
            "{} is too large to be a status file",
            path.display()
        ));
    }
    let text = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_slice(&text).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_status_reads_back_and_goes_stale() {
        let dir = tempfile::tempdir().unwrap();
        let now = SystemTime::now();
        let st = Status {
            name: "garb".into(),
            pid: 42,
            listen: "127.0.0.1:4567".into(),
            updated_ms: now.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64,
            wsrep: [("cluster_status", "Primary"), ("cluster_size", "3")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .into(),
        };
        write(dir.path(), &st).unwrap();
        let back = read(dir.path()).unwrap();
        assert_eq!(back, st);
        let rows = back.rows(now).unwrap();
        assert!(rows.contains(&("wsrep_cluster_status".into(), "Primary".into())));
        let later = now + STALE_AFTER + Duration::from_secs(1);
        assert!(back.rows(later).unwrap_err().contains("pid 42"));
        assert!(read(&dir.path().join("nowhere")).is_err());
    }
}
