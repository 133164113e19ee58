//! `lockstep check` beside every node, as README sets it up: credentials in
//! an option file, a maintenance file that drains the node, and either the
//! HTTP service HAProxy polls or the `--once` command line keepalived runs.
//! The check reads only `wsrep_%` status, so the same one judges Galera.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::child::KillOnDrop;

/// Where one node's check finds MariaDB and its files.
#[derive(Debug, Clone)]
pub struct NodeCheck {
    /// MariaDB's address as the check reaches it.
    pub db_host: String,
    pub db_port: u16,
    /// The option file with user= and password=.
    pub defaults_file: PathBuf,
    /// Exists while the node is drained.
    pub maintenance_file: PathBuf,
}

impl NodeCheck {
    /// Writes the option file (mode 600) for `user`/`password`.
    pub fn prepare(
        dir: &Path,
        name: &str,
        db_host: &str,
        db_port: u16,
        user: &str,
        password: &str,
    ) -> Result<NodeCheck, String> {
        use std::os::unix::fs::PermissionsExt;
        let defaults_file = dir.join(format!("check-{name}.cnf"));
        std::fs::write(
            &defaults_file,
            format!("[clustercheck]\nuser={user}\npassword={password}\n"),
        )
        .map_err(|e| format!("writing {}: {e}", defaults_file.display()))?;
        std::fs::set_permissions(&defaults_file, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("chmod {}: {e}", defaults_file.display()))?;
        Ok(NodeCheck {
            db_host: db_host.to_string(),
            db_port,
            defaults_file,
            maintenance_file: dir.join(format!("maintenance-{name}")),
        })
    }

    /// The arguments after `lockstep check`, shared by both modes.
    fn args(&self) -> Vec<String> {
        vec![
            "--defaults-file".into(),
            self.defaults_file.display().to_string(),
            "--host".into(),
            self.db_host.clone(),
            "--port".into(),
            self.db_port.to_string(),
            "--maintenance-file".into(),
            self.maintenance_file.display().to_string(),
        ]
    }

    /// keepalived's `script` line.
    pub fn once_command(&self, lockstep: &Path) -> String {
        let mut parts = vec![
            lockstep.display().to_string(),
            "check".into(),
            "--once".into(),
        ];
        parts.extend(self.args());
        parts.join(" ")
    }

    /// Drains the node (the check answers 503 from its next poll).
    pub fn drain(&self) -> Result<(), String> {
        std::fs::write(&self.maintenance_file, b"drained by failover-bench\n")
            .map_err(|e| format!("writing {}: {e}", self.maintenance_file.display()))
    }

    /// Ends the drain.
    pub fn undrain(&self) {
        let _ = std::fs::remove_file(&self.maintenance_file);
    }
}

/// A `lockstep check` HTTP service.
pub struct CheckService {
    _child: KillOnDrop,
}

impl CheckService {
    /// Serves `check` on `listen` with `lockstep` (the binary, or the
    /// binary inside a node's namespace), polling MariaDB every `cache_ms`.
    pub fn start(
        mut lockstep: Command,
        check: &NodeCheck,
        cache_ms: u64,
        listen: &str,
        log: &Path,
    ) -> Result<CheckService, String> {
        let log = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let log2 = log.try_clone().map_err(|e| e.to_string())?;
        let child = lockstep
            .arg("check")
            .args(check.args())
            .args(["--listen", listen])
            .arg(format!("--cache-ms={cache_ms}"))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .map_err(|e| format!("{:?}: {e}", lockstep.get_program()))?;
        Ok(CheckService {
            _child: KillOnDrop(child),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keepalived_runs_the_same_check_once() {
        let dir = tempfile::tempdir().unwrap();
        let c = NodeCheck::prepare(dir.path(), "node2", "10.0.0.2", 3306, "u", "p").unwrap();
        let line = c.once_command(Path::new("/usr/bin/lockstep"));
        assert!(line.starts_with("/usr/bin/lockstep check --once --defaults-file "));
        assert!(line.contains("--host 10.0.0.2 --port 3306 --maintenance-file "));
        let text = std::fs::read_to_string(&c.defaults_file).unwrap();
        assert_eq!(text, "[clustercheck]\nuser=u\npassword=p\n");
        c.drain().unwrap();
        assert!(c.maintenance_file.exists());
        c.undrain();
        assert!(!c.maintenance_file.exists());
    }
}
