//! Peer TLS for test and `lockstep up` clusters: one CA per cluster in
//! `<base>/tls-ca` (its key never leaves that directory, owned by whoever
//! built the cluster) and one certificate per node in `<node>/tls`, which
//! is handed to the server's user with the rest of the node directory.

use crate::config::NodeConfig;
use crate::error::{Error, Result};
use lockstep_net::pki::{Authority, NodeFiles};
use std::path::{Path, PathBuf};

pub fn ca_dir(base: &Path) -> PathBuf {
    base.join("tls-ca")
}

/// Makes the cluster's CA (kept if one is there from an earlier build in
/// the same directory).
pub(crate) fn make_ca(base: &Path, cluster: &str) -> Result<()> {
    let dir = ca_dir(base);
    if Authority::load(&dir).is_ok() {
        return Ok(());
    }
    Authority::generate(&format!("lockstep cluster {cluster} CA"))
        .and_then(|ca| ca.save(&dir))
        .map_err(|e| Error::config(format!("making the cluster CA: {e}")))
}

/// Where node `n`'s certificate, key and CA copy are.
pub fn node_files(n: &NodeConfig) -> NodeFiles {
    let dir = n.dir.join("tls");
    NodeFiles {
        cert: dir.join(format!("{}.pem", n.name)),
        key: dir.join(format!("{}-key.pem", n.name)),
        ca: dir.join(lockstep_net::pki::CA_CERT),
    }
}

/// Issues node `n`'s certificate (for 127.0.0.1 and localhost).
pub(crate) fn issue_for(ca: &Path, n: &NodeConfig) -> Result<NodeFiles> {
    let hosts = ["127.0.0.1".to_string(), "localhost".to_string()];
    Authority::load(ca)
        .and_then(|ca| ca.issue_into(&n.dir.join("tls"), &n.name, &hosts))
        .map_err(|e| Error::config(format!("issuing {}'s certificate: {e}", n.name)))
}
