//! A crash of the whole cluster (issue 11): every `mariadbd` killed at
//! once under a write load, then all started again the way the systemd
//! unit does (`--wsrep-recover`, then `--wsrep_start_position`), with their
//! normal configuration and no operator. With `pc.recovery` (the default)
//! the nodes re-form their last primary component by themselves, led by
//! the most advanced one; every acknowledged commit is on every node and
//! the nodes are identical. `LOCKSTEP_TEST_PROVIDER=galera` runs the same
//! test on Galera.

#[path = "support/multi_node.rs"]
mod multi_node;

use std::time::{Duration, Instant};

use lockstep_testkit::{AckedLoad, Cluster, Provider};
use multi_node::{check, status, OrLogs};

const WAIT: Duration = Duration::from_secs(120);

#[test]
fn the_whole_cluster_killed_at_once_comes_back_primary_by_itself() {
    let mut cluster = Cluster::builder(3)
        .provider(Provider::from_env())
        .cluster_name("crash_all")
        .start()
        .unwrap_or_else(|e| panic!("starting 3 nodes: {e}"));
    cluster
        .node(0)
        .sql("CREATE DATABASE c")
        .or_logs(&cluster, "create database");
    let load = AckedLoad::start(&cluster, "c.acked").or_logs(&cluster, "start the load");
    load.wait_for_progress(300, WAIT)
        .or_logs(&cluster, "load before the crash");

    // Power loss: SIGKILL to all three before any can notice the others.
    let pids: Vec<u32> = cluster.nodes().iter().filter_map(|n| n.pid()).collect();
    check(&cluster, pids.len() == 3, || {
        format!("running pids: {pids:?}")
    });
    for pid in &pids {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    for i in 0..3 {
        let r = cluster.node_mut(i).kill();
        r.or_logs(&cluster, "reap the killed node");
    }
    let (table, reports) = load.stop();

    // The systemd way, with each node's normal configuration.
    let mut positions = Vec::new();
    for i in 0..3 {
        let r = cluster.node_mut(i).recover_position();
        positions.push(r.or_logs(&cluster, "--wsrep-recover"));
    }
    eprintln!("recovered positions: {positions:?}");
    let t0 = Instant::now();
    for (i, position) in positions.iter().enumerate() {
        let arg = format!("--wsrep_start_position={position}");
        let r = cluster.node_mut(i).spawn(&[&arg]);
        r.or_logs(&cluster, "start after the crash");
    }
    for node in cluster.nodes() {
        node.wait_synced(WAIT)
            .or_logs(&cluster, "Synced again after the crash");
    }
    for node in cluster.nodes() {
        node.wait_for_status("wsrep_cluster_size", "3", WAIT)
            .or_logs(&cluster, "three members");
        let st = status(node, "wsrep_cluster_status").or_logs(&cluster, "status");
        check(&cluster, st == "Primary", || {
            format!("{}: {st}", node.name())
        });
    }
    eprintln!(
        "the cluster re-formed its primary component {:.1} s after the restart",
        t0.elapsed().as_secs_f64()
    );
    let checked = cluster
        .verify_acked(&table, &reports)
        .or_logs(&cluster, "acknowledged rows after the crash");
    eprintln!("{checked} acknowledged rows on every node; nodes identical");
    check(&cluster, checked >= 300, || {
        format!("only {checked} rows were acknowledged")
    });
    // And it takes writes again.
    cluster
        .node(1)
        .sql("INSERT INTO c.acked VALUES (1, 'after', 'x')")
        .or_logs(&cluster, "write after the recovery");
    let rows = multi_node::causal_rows(cluster.node(2), "SELECT node FROM c.acked WHERE id = 1")
        .or_logs(&cluster, "read after the recovery");
    check(&cluster, rows == vec![vec!["after".to_string()]], || {
        format!("node3 sees {rows:?}")
    });
}

#[test]
fn two_nodes_one_killed_come_back_primary_when_it_restarts() {
    let mut cluster = Cluster::builder(2)
        .provider(Provider::from_env())
        .cluster_name("crash_two")
        .provider_options("evs.suspect_timeout=PT3S")
        .start()
        .unwrap_or_else(|e| panic!("starting 2 nodes: {e}"));
    cluster
        .node(0)
        .sql("CREATE DATABASE c; CREATE TABLE c.t (id INT PRIMARY KEY); INSERT INTO c.t VALUES (1)")
        .or_logs(&cluster, "create");
    let r = cluster.node_mut(1).kill();
    r.or_logs(&cluster, "kill node2");
    // One of two is no majority: node1 stops serving, as with Galera.
    cluster
        .node(0)
        .wait_for_status("wsrep_cluster_status", "non-Primary", WAIT)
        .or_logs(&cluster, "node1 non-primary");
    // node2 comes back the systemd way; with node1 still up (non-primary),
    // every member of the last primary component is there again.
    let r = cluster.node_mut(1).start_recovered();
    r.or_logs(&cluster, "restart node2");
    for node in cluster.nodes() {
        node.wait_for_status("wsrep_cluster_size", "2", WAIT)
            .or_logs(&cluster, "two members");
        node.wait_for_status("wsrep_cluster_status", "Primary", WAIT)
            .or_logs(&cluster, "Primary again");
    }
    cluster
        .node(1)
        .sql("INSERT INTO c.t VALUES (2)")
        .or_logs(&cluster, "write after the recovery");
    let rows = multi_node::causal_rows(cluster.node(0), "SELECT COUNT(*) FROM c.t")
        .or_logs(&cluster, "read");
    check(&cluster, rows == vec![vec!["2".to_string()]], || {
        format!("node1 sees {rows:?}")
    });
}
