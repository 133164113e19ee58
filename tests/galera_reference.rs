//! The testkit against the reference provider: three Galera 4 nodes on
//! loopback form a cluster, replicate a row, and shrink cleanly on shutdown.

use std::time::{Duration, Instant};

use lockstep_testkit::{Cluster, Provider};

const WAIT: Duration = Duration::from_secs(60);

#[test]
fn three_galera_nodes_sync_replicate_and_shrink_on_shutdown() {
    if !lockstep_testkit::require_galera("three_galera_nodes_sync_replicate_and_shrink_on_shutdown")
    {
        return;
    }
    let t0 = Instant::now();
    let mut cluster = Cluster::builder(3)
        .provider(Provider::Galera)
        .cluster_name("galera_reference")
        .start()
        .unwrap_or_else(|e| panic!("starting 3 Galera nodes: {e}"));
    let started = t0.elapsed();

    for node in cluster.nodes() {
        let state = node.status("wsrep_local_state_comment").unwrap();
        assert_eq!(
            state.as_deref(),
            Some("Synced"),
            "{} is not Synced",
            node.name()
        );
        let size = node.status("wsrep_cluster_size").unwrap();
        assert_eq!(
            size.as_deref(),
            Some("3"),
            "{} sees a cluster of {size:?}",
            node.name()
        );
        let provider = node.status("wsrep_provider_name").unwrap();
        assert_eq!(provider.as_deref(), Some("Galera"), "{}", node.name());
    }

    let n1 = cluster.node(0);
    n1.sql(
        "CREATE DATABASE reference; CREATE TABLE reference.t (id INT PRIMARY KEY, v VARCHAR(20))",
    )
    .unwrap();
    n1.sql("INSERT INTO reference.t VALUES (1, 'from node1'), (2, 'tab\there')")
        .unwrap();
    // Galera applies asynchronously: wsrep_sync_wait=1 makes the read causal.
    let rows = cluster
        .node(2)
        .query_rows("SET SESSION wsrep_sync_wait=1; SELECT id, v FROM reference.t ORDER BY id")
        .unwrap();
    assert_eq!(
        rows,
        vec![
            vec!["1".to_string(), "from node1".to_string()],
            vec!["2".to_string(), "tab\\there".to_string()],
        ],
        "node3 does not see node1's rows"
    );

    // The TCP account exists on every node (replicated from node1).
    let users = cluster
        .node(1)
        .sql("SELECT COUNT(*) FROM mysql.user WHERE user='lockstep' AND host='%'")
        .unwrap();
    assert_eq!(users, "1", "'lockstep'@'%' did not replicate to node2");

    let err = n1.sql("SELECT * FROM reference.missing").unwrap_err();
    assert_eq!(err.sql_code(), Some(1146), "{err}");
    assert!(err.to_string().contains("reference.missing"), "{err}");

    cluster.node_mut(2).stop().expect("node3 stops gracefully");
    assert!(!cluster.node(2).is_running());
    cluster
        .wait_for_cluster_size(2, WAIT)
        .expect("node1 and node2 see the cluster shrink to 2");

    let t1 = Instant::now();
    cluster.stop_all().expect("all nodes stop gracefully");
    assert!(cluster.running_nodes().is_empty());
    eprintln!(
        "timings: 3-node start {:.1} s, stop of remaining nodes {:.1} s",
        started.as_secs_f64(),
        t1.elapsed().as_secs_f64()
    );
}
