//! The state file (`cluster.json`) that lets another process adopt a running
//! cluster: `lockstep up` writes it, `status` and `down` read it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::NodeConfig;
use crate::error::{Error, Result};
use crate::ports::NodePorts;

/// File name of the state file inside the cluster directory.
pub const STATE_FILE: &str = "cluster.json";

const FORMAT_VERSION: u32 = 1;

/// Everything needed to find and control a running cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterState {
    pub format_version: u32,
    pub cluster_name: String,
    /// `lockstep`, `galera` or the library path.
    pub provider_label: String,
    /// The library the servers actually load.
    pub provider_path: PathBuf,
    /// The account the servers run as, when started by root.
    pub run_as: Option<String>,
    pub nodes: Vec<NodeState>,
}

/// One node as recorded in the state file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeState {
    pub name: String,
    pub pid: Option<u32>,
    pub socket: PathBuf,
    pub port: u16,
    pub base_port: u16,
    pub ist_port: u16,
    pub sst_port: u16,
    pub dir: PathBuf,
    pub datadir: PathBuf,
    pub error_log: PathBuf,
    pub console_log: PathBuf,
    pub pid_file: PathBuf,
    pub defaults_file: PathBuf,
}

impl NodeState {
    pub(crate) fn from_config(cfg: &NodeConfig, pid: Option<u32>) -> NodeState {
        NodeState {
            name: cfg.name.clone(),
            pid,
            socket: cfg.socket.clone(),
            port: cfg.ports.client,
            base_port: cfg.ports.base,
            ist_port: cfg.ports.ist(),
            sst_port: cfg.ports.sst,
            dir: cfg.dir.clone(),
            datadir: cfg.datadir.clone(),
            error_log: cfg.error_log.clone(),
            console_log: cfg.console_log.clone(),
            pid_file: cfg.pid_file.clone(),
            defaults_file: cfg.defaults_file.clone(),
        }
    }

    pub(crate) fn to_config(&self) -> NodeConfig {
        NodeConfig {
            name: self.name.clone(),
            dir: self.dir.clone(),
            datadir: self.datadir.clone(),
            socket: self.socket.clone(),
            error_log: self.error_log.clone(),
            console_log: self.console_log.clone(),
            pid_file: self.pid_file.clone(),
            defaults_file: self.defaults_file.clone(),
            ports: NodePorts {
                client: self.port,
                base: self.base_port,
                sst: self.sst_port,
            },
            place: Default::default(),
        }
    }
}

/// Path of the state file in `dir`.
pub fn state_path(dir: &Path) -> PathBuf {
    dir.join(STATE_FILE)
}

impl ClusterState {
    pub(crate) fn new(
        cluster_name: String,
        provider_label: String,
        provider_path: PathBuf,
        run_as: Option<String>,
        nodes: Vec<NodeState>,
    ) -> ClusterState {
        ClusterState {
            format_version: FORMAT_VERSION,
            cluster_name,
            provider_label,
            provider_path,
            run_as,
            nodes,
        }
    }

    /// Reads `dir/cluster.json`; [`Error::NoCluster`] if it does not exist.
    pub fn load(dir: &Path) -> Result<ClusterState> {
        let path = state_path(dir);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::NoCluster {
                    dir: dir.to_path_buf(),
                })
            }
            Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
        };
        let state: ClusterState = serde_json::from_str(&text).map_err(|e| Error::State {
            path: path.clone(),
            message: format!("{e}; delete it if no servers of this cluster are running"),
        })?;
        if state.format_version != FORMAT_VERSION {
            return Err(Error::State {
                path,
                message: format!(
                    "format version {} is not the supported {FORMAT_VERSION}; it was written \
                     by another lockstep version",
                    state.format_version
                ),
            });
        }
        Ok(state)
    }

    /// Writes `dir/cluster.json` atomically (write to a temporary, rename).
    pub fn save(&self, dir: &Path) -> Result<PathBuf> {
        let path = state_path(dir);
        let tmp = dir.join(format!(".{STATE_FILE}.tmp"));
        let text = serde_json::to_string_pretty(self).map_err(|e| Error::State {
            path: path.clone(),
            message: format!("cannot encode: {e}"),
        })?;
        std::fs::write(&tmp, text + "\n")
            .map_err(|e| Error::io(format!("writing {}", tmp.display()), e))?;
        std::fs::rename(&tmp, &path)
            .map_err(|e| Error::io(format!("renaming {} into place", tmp.display()), e))?;
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips_through_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let ports = NodePorts {
            client: 20000,
            base: 20001,
            sst: 20003,
        };
        let cfg = NodeConfig::new(dir.path(), 1, ports).unwrap();
        let state = ClusterState::new(
            "c".into(),
            "galera".into(),
            "/usr/lib/galera/libgalera_smm.so".into(),
            Some("lockstep".into()),
            vec![NodeState::from_config(&cfg, Some(42))],
        );
        state.save(dir.path()).unwrap();
        let back = ClusterState::load(dir.path()).unwrap();
        assert_eq!(back, state);
        assert_eq!(back.nodes[0].to_config(), cfg);
        assert_eq!(back.nodes[0].ist_port, 20002);
    }

    #[test]
    fn missing_state_is_no_cluster() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            ClusterState::load(dir.path()),
            Err(Error::NoCluster { .. })
        ));
    }
}
