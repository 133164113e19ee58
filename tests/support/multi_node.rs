//! Helpers for tests on clusters of several real nodes: failures that show
//! every node's error log, and causal reads.

#![allow(dead_code)] // each test file uses a different subset

use lockstep_testkit::{AckedLoad, Cluster, Error, Node, Provider, Result, WriterReport};
use std::time::Duration;

/// Error-log lines per node in a failure report.
pub const FAILURE_LOG_LINES: usize = 25;

/// `unwrap` for testkit results that, on failure, also prints the tail of
/// every node's error log: in a multi-node failure the node that explains
/// it is often not the one whose statement failed.
pub trait OrLogs<T> {
    fn or_logs(self, cluster: &Cluster, what: &str) -> T;
}

impl<T> OrLogs<T> for Result<T> {
    #[track_caller]
    fn or_logs(self, cluster: &Cluster, what: &str) -> T {
        self.unwrap_or_else(|e| fail(cluster, &format!("{what}: {e}")))
    }
}

/// Edits node `n`'s my.cnf before it starts: `f` rewrites the text.
pub fn edit_cnf(n: &Node, f: impl FnOnce(String) -> String) {
    let path = &n.config().defaults_file;
    let text = std::fs::read_to_string(path).unwrap();
    std::fs::write(path, f(text)).unwrap();
}

/// Moves node `n` (`number` is 1-based) onto 127.0.0.`number` for the
/// group channel: it listens there and connects from there, so an
/// allowlist can tell the nodes apart.
pub fn own_address(n: &Node, number: usize) {
    let port = n.base_port();
    edit_cnf(n, |text| {
        text.replace(
            &format!("wsrep_node_address=127.0.0.1:{port}"),
            &format!("wsrep_node_address=127.0.0.{number}:{port}"),
        )
        .replace(
            &format!("base_port={port};"),
            &format!("base_port={port}; gmcast.listen_addr=127.0.0.{number};"),
        )
    });
}

/// `nodes` nodes, node `i` on 127.0.0.`i` (see [`own_address`]), with
/// `wsrep_allowlist` naming exactly those addresses; started.
pub fn start_allowlisted(name: &str, nodes: usize) -> Cluster {
    let listed: Vec<String> = (1..=nodes).map(|i| format!("127.0.0.{i}")).collect();
    let mut cluster = Cluster::builder(nodes)
        .cluster_name(name)
        .extra_mysqld(&format!("wsrep_allowlist={}", listed.join(",")))
        .build()
        .unwrap_or_else(|e| panic!("building {name}: {e}"));
    for (i, n) in cluster.nodes().iter().enumerate() {
        own_address(n, i + 1);
    }
    cluster
        .start_all()
        .unwrap_or_else(|e| fail(&cluster, &format!("starting the allowed nodes: {e}")));
    cluster
}

/// Panics with `message` followed by every node's error-log tail.
#[track_caller]
pub fn fail(cluster: &Cluster, message: &str) -> ! {
    panic!("{message}\n{}", cluster.log_tails(FAILURE_LOG_LINES))
}

/// Asserts `cond`, failing with `message` and every node's log tail.
#[track_caller]
pub fn check(cluster: &Cluster, cond: bool, message: impl FnOnce() -> String) {
    if !cond {
        fail(cluster, &message());
    }
}

/// Runs `sql` after `SET SESSION wsrep_sync_wait=15` in the same
/// connection: the node first applies everything the cluster committed
/// before the statement, so the result cannot be stale.
pub fn causal_rows(node: &Node, sql: &str) -> Result<Vec<Vec<String>>> {
    node.query_rows(&format!("SET SESSION wsrep_sync_wait=15; {sql}"))
}

/// One status value; an error if the server does not report it.
pub fn status(node: &Node, name: &str) -> Result<String> {
    node.status(name)?.ok_or_else(|| Error::Config {
        message: format!("{}: status variable {name} is not reported", node.name()),
    })
}

/// One numeric status value (a counter).
pub fn status_u64(node: &Node, name: &str) -> Result<u64> {
    let value = status(node, name)?;
    value.parse().map_err(|_| Error::Config {
        message: format!("{}: {name} = {value:?} is not a number", node.name()),
    })
}

/// Three nodes with four appliers each, named `name`, with `extra`
/// [mysqld] lines. The provider is ours unless `LOCKSTEP_TEST_PROVIDER`
/// names another ([`Provider::from_env`]: `galera` runs the same test on
/// Galera 4, the reference).
pub fn start_three_with_appliers(name: &str, extra: &[&str]) -> Cluster {
    start_three_with_options(name, extra, "")
}

/// [`start_three_with_appliers`] with provider `options`.
pub fn start_three_with_options(name: &str, extra: &[&str], options: &str) -> Cluster {
    let provider = Provider::from_env();
    let label = provider.label();
    let mut spec = Cluster::builder(3)
        .provider(provider)
        .cluster_name(name)
        .provider_options(options)
        .slave_threads(4);
    for line in extra {
        spec = spec.extra_mysqld(line);
    }
    spec.start()
        .unwrap_or_else(|e| panic!("starting three {label} nodes: {e}"))
}

/// Creates `db.t (id INT PRIMARY KEY, n INT)` holding the row (1, 0) on
/// the first node and waits until every node has it.
pub fn one_row_table(cluster: &Cluster, db: &str) {
    let sql = format!(
        "CREATE DATABASE {db}; \
         CREATE TABLE {db}.t (id INT PRIMARY KEY, n INT) ENGINE=InnoDB; \
         INSERT INTO {db}.t VALUES (1, 0)"
    );
    if let Err(e) = cluster.node(0).sql(&sql) {
        fail(cluster, &format!("creating {db}.t: {e}"));
    }
    if let Err(e) = cluster.wait_for_equal_last_committed(std::time::Duration::from_secs(60)) {
        fail(cluster, &format!("{db}.t on every node: {e}"));
    }
}

/// How many lines of the node's error log contain `what`. A log that
/// cannot be read fails the test: counting nothing there would pass any
/// check that a line is absent.
pub fn log_count(node: &Node, what: &str) -> usize {
    node.log_count(what).unwrap_or_else(|e| {
        let path = node.error_log_path();
        panic!("{}: cannot read {}: {e}", node.name(), path.display())
    })
}

/// Node `i`'s grastate.dat (the test fails if it cannot be read).
pub fn grastate(cluster: &Cluster, i: usize) -> String {
    let path = cluster.node(i).datadir().join("grastate.dat");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The seqno of a `uuid:seqno` position (`--wsrep-recover`), -1 if it has
/// none.
pub fn position_seqno(position: &str) -> i64 {
    position
        .rsplit(':')
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(-1)
}

/// `kill -9` node `i`, then waits until the first other running node sees
/// the `size` members left (the dead one removed).
pub fn kill_and_await_removal(cluster: &mut Cluster, i: usize, size: &str, wait: Duration) {
    let name = cluster.node(i).name().to_string();
    let r = cluster.node_mut(i).kill();
    r.or_logs(cluster, &format!("kill -9 {name}"));
    // Seen from the first node still running (node 1 unless it was killed).
    let Some(survivor) = (0..cluster.len()).find(|&j| j != i && cluster.node(j).is_running())
    else {
        fail(cluster, &format!("no node runs after {name} was killed"));
    };
    cluster
        .node(survivor)
        .wait_for_status("wsrep_cluster_size", size, wait)
        .or_logs(cluster, &format!("{name} removed"));
}

/// Restarts node `i` as systemd's unit does, with the position from
/// `--wsrep-recover` (so it catches up by IST, not a full SST), then waits
/// until every node sees `size` members.
pub fn restart_recovered(cluster: &mut Cluster, i: usize, size: &str, wait: Duration) {
    let name = cluster.node(i).name().to_string();
    let r = cluster.node_mut(i).start_recovered();
    r.or_logs(cluster, &format!("restart {name} the systemd way"));
    for node in cluster.nodes() {
        node.wait_for_status("wsrep_cluster_size", size, wait)
            .or_logs(
                cluster,
                &format!("{size} members again after {name} came back"),
            );
    }
}

/// Every insert the load's writers saw acknowledged is on every node, the
/// nodes are identical, and at least `at_least` were acknowledged.
pub fn verify_acked_rows(
    cluster: &Cluster,
    (table, reports): &(String, Vec<WriterReport>),
    at_least: usize,
    after: &str,
) {
    let checked = cluster
        .verify_acked(table, reports)
        .or_logs(cluster, &format!("acknowledged rows after {after}"));
    eprintln!("{checked} acknowledged rows on every node; nodes identical");
    check(cluster, checked >= at_least, || {
        format!("only {checked} rows were acknowledged")
    });
    // A broken lock rule (a server callback under the state lock, ADR
    // 0030) is logged, not fatal: a fault test is where it would show.
    let internal: usize = cluster
        .nodes()
        .iter()
        .map(|n| log_count(n, "lockstep internal error"))
        .sum();
    check(cluster, internal == 0, || {
        format!("{internal} 'lockstep internal error' line(s) in the server logs")
    });
}

/// A database `r` with the acknowledged-writes load (`r.acked`) running
/// on every node, once it has acknowledged `progress` inserts.
pub fn acked_load(cluster: &Cluster, progress: u64, wait: Duration) -> AckedLoad {
    cluster
        .node(0)
        .sql("CREATE DATABASE r")
        .or_logs(cluster, "create database");
    let load = AckedLoad::start(cluster, "r.acked").or_logs(cluster, "start the load");
    load.wait_for_progress(progress, wait)
        .or_logs(cluster, "load before the fault");
    load
}

/// Every node's position from `--wsrep-recover` (the systemd unit's step).
pub fn recover_positions(cluster: &mut Cluster) -> Vec<String> {
    let mut positions = Vec::new();
    for i in 0..cluster.nodes().len() {
        let r = cluster.node_mut(i).recover_position();
        positions.push(r.or_logs(cluster, "--wsrep-recover"));
    }
    eprintln!("recovered positions: {positions:?}");
    positions
}

/// Starts the first `positions.len()` nodes with `--wsrep_start_position`
/// and their normal configuration.
pub fn restart_at(cluster: &mut Cluster, positions: &[String]) {
    for (i, position) in positions.iter().enumerate() {
        let arg = format!("--wsrep_start_position={position}");
        let r = cluster.node_mut(i).spawn(&[&arg]);
        r.or_logs(cluster, "start after the crash");
    }
}

/// Every node Synced in a component of three, each within `wait`.
pub fn all_three_synced(cluster: &Cluster, wait: Duration, what: &str) {
    for node in cluster.nodes() {
        node.wait_synced(wait).or_logs(cluster, what);
        node.wait_for_status("wsrep_cluster_size", "3", wait)
            .or_logs(cluster, "three members");
    }
}
