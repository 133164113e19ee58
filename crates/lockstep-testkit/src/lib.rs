//! Integration-test harness for Lockstep: builds datadirs, starts and stops
//! real mariadbd nodes on free loopback ports with a chosen wsrep provider
//! (ours or Galera), and runs SQL through the `mariadb` client: one call at
//! a time ([`Node::sql`]) or in a connection held open ([`Node::session`]).
//! Nodes can be added to a running cluster ([`Cluster::add_node`]); sysbench
//! drives load ([`Sysbench`]); checksums and replication positions tell
//! whether the nodes agree ([`Cluster::checksums`],
//! [`Cluster::wait_for_equal_last_committed`]).
//!
//! ```no_run
//! use lockstep_testkit::{Cluster, Provider};
//! let mut c = Cluster::builder(3).provider(Provider::Galera).start()?;
//! c.node(0).sql("CREATE TABLE test.t (id INT PRIMARY KEY)")?;
//! assert_eq!(c.node(2).status("wsrep_cluster_size")?.as_deref(), Some("3"));
//! c.stop_all()?;
//! # Ok::<(), lockstep_testkit::Error>(())
//! ```
//!
//! When run as root, servers run as the system user `lockstep` (see [`user`]).
//! Clusters are stopped and their temporary directory removed on drop
//! (`LOCKSTEP_KEEP=1` keeps the files). [`Cluster::detach`] and
//! [`Cluster::attach`] hand a running cluster from one process to another.

mod cluster;
mod config;
mod consistency;
mod error;
mod load;
pub mod net;
mod node;
pub mod ports;
mod process;
mod provider;
mod session;
mod sql;
mod stacks;
mod state;
mod sysbench;
pub mod tls;
pub mod user;

pub use cluster::{Cluster, ClusterSpec, TCP_PASSWORD, TCP_USER};
pub use config::{NodeConfig, Place};
pub use consistency::ChecksumReport;
pub use error::{Error, LogTail, Result};
pub use load::{AckedLoad, WriterReport};
pub use node::{Node, Timeouts, LOG_TAIL_LINES};
pub use ports::NodePorts;
pub use process::log_tail;
pub use provider::{require_galera, Provider, ALLOW_SKIP_ENV, GALERA_PATH, LOCKSTEP_LIB};
pub use session::Session;
pub use sql::quote;
pub use state::{state_path, ClusterState, NodeState, STATE_FILE};
pub use sysbench::{
    IntervalSample, LatencyHistogram, LatencySummary, Sysbench, SysbenchReport, SysbenchRun,
};
