//! Per-node file layout and the generated my.cnf.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::ports::NodePorts;

/// Longest unix socket path we accept (the kernel limit is 107 bytes).
pub const MAX_SOCKET_PATH: usize = 100;

/// Where one node keeps its files, and its ports. Stored in the state file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeConfig {
    /// `node1`, `node2`, ...: also `wsrep_node_name`.
    pub name: String,
    /// The node's directory: `<base>/<name>`.
    pub dir: PathBuf,
    pub datadir: PathBuf,
    pub socket: PathBuf,
    pub error_log: PathBuf,
    /// What mariadbd writes to stdout/stderr before its error log is open.
    pub console_log: PathBuf,
    pub pid_file: PathBuf,
    /// The generated my.cnf, passed as `--defaults-file`.
    pub defaults_file: PathBuf,
    pub ports: NodePorts,
    /// Where the node runs: loopback unless a test places it.
    #[serde(default)]
    pub place: Place,
}

/// Where a node runs on this machine: its own address, optionally in a
/// network namespace (the WAN benchmark's emulated sites), and its
/// `gmcast.segment`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Place {
    /// The node's address for its peers, SST and IST.
    pub host: String,
    /// Started with `ip netns exec <netns>` (as root).
    pub netns: Option<String>,
    pub segment: u8,
}

impl Default for Place {
    fn default() -> Place {
        Place {
            host: "127.0.0.1".into(),
            netns: None,
            segment: 0,
        }
    }
}

impl NodeConfig {
    /// The layout of node number `number` (1-based) under `base`.
    pub fn new(base: &Path, number: usize, ports: NodePorts) -> Result<NodeConfig> {
        let name = format!("node{number}");
        let dir = base.join(&name);
        let socket = dir.join("mysqld.sock");
        if socket.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(Error::config(format!(
                "socket path {} is longer than {MAX_SOCKET_PATH} bytes, which unix sockets do \
                 not allow; use a shorter cluster directory",
                socket.display()
            )));
        }
        Ok(NodeConfig {
            datadir: dir.join("data"),
            error_log: dir.join("error.log"),
            console_log: dir.join("console.log"),
            pid_file: dir.join("mysqld.pid"),
            defaults_file: dir.join("my.cnf"),
            socket,
            name,
            dir,
            ports,
            place: Place::default(),
        })
    }
}

/// Cluster-wide settings that go into every node's my.cnf.
#[derive(Debug, Clone)]
pub(crate) struct CnfParams<'a> {
    pub cluster_name: &'a str,
    pub provider: &'a Path,
    /// `gcomm://127.0.0.1:p1,127.0.0.1:p2,...`
    pub cluster_address: &'a str,
    /// `user=` line, only when the testkit runs as root.
    pub user: Option<&'a str>,
    pub provider_options: &'a str,
    /// The cluster's CA directory when peers use TLS.
    pub tls_ca: Option<&'a Path>,
    pub slave_threads: Option<u32>,
    pub sst_method: &'a str,
    pub extra_lines: &'a [String],
}

/// `gcomm://<host>:<base_port>,...` for the given nodes.
pub(crate) fn cluster_address(nodes: &[NodeConfig]) -> String {
    let peers: Vec<String> = nodes
        .iter()
        .map(|n| format!("{}:{}", n.place.host, n.ports.base))
        .collect();
    format!("gcomm://{}", peers.join(","))
}

/// The `[mysqld]` section for one node. Extra lines come last so they win.
pub(crate) fn render(node: &NodeConfig, p: &CnfParams<'_>) -> String {
    let ports = &node.ports;
    let host = &node.place.host;
    let mut s = String::new();
    let mut line = |l: String| {
        s.push_str(&l);
        s.push('\n');
    };
    line(format!(
        "{} for {}; edits are lost on the next `up`.",
        crate::cluster::CNF_MARK,
        node.name
    ));
    line("[mysqld]".into());
    if let Some(user) = p.user {
        line(format!("user={user}"));
    }
    line(format!("datadir={}", node.datadir.display()));
    line(format!("socket={}", node.socket.display()));
    line(format!("tmpdir={}", node.dir.join("tmp").display()));
    line(format!("pid-file={}", node.pid_file.display()));
    line(format!("log-error={}", node.error_log.display()));
    line(format!("port={}", ports.client));
    line(format!("bind-address={host}"));
    line("skip-name-resolve".into());
    line("performance_schema=OFF".into());
    line("innodb_buffer_pool_size=64M".into());
    line("innodb_log_file_size=48M".into());
    line("binlog_format=ROW".into());
    line("default_storage_engine=InnoDB".into());
    line("innodb_autoinc_lock_mode=2".into());
    line("wsrep_on=ON".into());
    line(format!("wsrep_provider={}", p.provider.display()));
    line(format!("wsrep_cluster_name={}", p.cluster_name));
    line(format!("wsrep_cluster_address={}", p.cluster_address));
    line(format!("wsrep_node_name={}", node.name));
    line(format!("wsrep_node_address={host}:{}", ports.base));
    line(format!(
        "wsrep_node_incoming_address={host}:{}",
        ports.client
    ));
    let mut opts = format!(
        "base_port={}; ist.recv_addr={host}:{}; gcache.size=64M",
        ports.base,
        ports.ist()
    );
    if node.place.segment != 0 {
        let _ = write!(opts, "; gmcast.segment={}", node.place.segment);
    }
    if p.tls_ca.is_some() {
        let _ = write!(
            opts,
            "; {}",
            crate::tls::node_files(node).provider_options()
        );
    }
    let extra = p.provider_options.trim().trim_matches(';').trim();
    if !extra.is_empty() {
        let _ = write!(opts, "; {extra}");
    }
    line(format!("wsrep_provider_options=\"{opts}\""));
    line(format!("wsrep_sst_receive_address={host}:{}", ports.sst));
    line(format!("wsrep_sst_method={}", p.sst_method));
    // mariabackup connects to the donor as this user (rsync ignores it).
    line("wsrep_sst_auth=lockstep:lockstep".into());
    if let Some(n) = p.slave_threads {
        line(format!("wsrep_slave_threads={n}"));
    }
    for extra in p.extra_lines {
        line(extra.trim().to_string());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(n: usize, base: u16) -> NodeConfig {
        let ports = NodePorts {
            client: base - 1,
            base,
            sst: base + 2,
        };
        NodeConfig::new(Path::new("/tmp/c"), n, ports).unwrap()
    }

    #[test]
    fn cnf_has_galera_compatible_settings() {
        let nodes = [node(1, 20001), node(2, 20005)];
        let addr = cluster_address(&nodes);
        assert_eq!(addr, "gcomm://127.0.0.1:20001,127.0.0.1:20005");
        let extra = vec!["wsrep_sync_wait=1".to_string()];
        let cnf = render(
            &nodes[1],
            &CnfParams {
                cluster_name: "t",
                provider: Path::new("/p.so"),
                cluster_address: &addr,
                user: Some("lockstep"),
                provider_options: "gcs.fc_limit=64;",
                tls_ca: None,
                slave_threads: Some(4),
                sst_method: "rsync",
                extra_lines: &extra,
            },
        );
        for want in [
            "user=lockstep",
            "wsrep_node_address=127.0.0.1:20005",
            "wsrep_node_name=node2",
            "wsrep_provider_options=\"base_port=20005; ist.recv_addr=127.0.0.1:20006; \
             gcache.size=64M; gcs.fc_limit=64\"",
            "wsrep_sst_receive_address=127.0.0.1:20007",
            "wsrep_slave_threads=4",
            "socket=/tmp/c/node2/mysqld.sock",
        ] {
            assert!(cnf.lines().any(|l| l == want), "missing {want:?} in\n{cnf}");
        }
        assert_eq!(cnf.lines().last(), Some("wsrep_sync_wait=1"));
    }

    #[test]
    fn long_socket_paths_are_refused() {
        let long = PathBuf::from(format!("/tmp/{}", "x".repeat(100)));
        let err = NodeConfig::new(&long, 1, node(1, 20001).ports).unwrap_err();
        assert!(err.to_string().contains("shorter"), "{err}");
    }
}
