//! Peer admission by the server's allowlist (issue 13): `wsrep_allowlist`
//! on the bootstrap node fills `mysql.wsrep_allowlist`, and every node
//! asks the server about each peer address that connects, before anything
//! else is said on the connection.
//!
//! Nodes listen on their own loopback addresses (127.0.0.1, .2, .3) and
//! connect from them, so each has an address of its own to allow.

#[path = "support/multi_node.rs"]
mod multi_node;

use multi_node::{check, fail, log_count, own_address, start_allowlisted, status_u64, OrLogs};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(60);

#[test]
fn only_allowed_addresses_get_in() {
    let mut cluster = start_allowlisted("allowlist", 2);
    let n1 = cluster.node(0);
    let listed = n1
        .query_rows("SELECT COUNT(*) FROM mysql.wsrep_allowlist")
        .or_logs(&cluster, "the allowlist table");
    check(&cluster, listed[0][0] == "2", || {
        format!("mysql.wsrep_allowlist holds {listed:?}")
    });

    // A third node at 127.0.0.3, which the list does not name.
    let third = cluster.add_node().or_logs(&cluster, "add node3");
    own_address(cluster.node(third), 3);
    cluster
        .node_mut(third)
        .spawn(&[])
        .or_logs(&cluster, "spawning node3");
    let t0 = Instant::now();
    while !(0..2).any(|m| log_count(cluster.node(m), "Connection not allowed") > 0) {
        if t0.elapsed() > WAIT {
            fail(&cluster, "no member refused 127.0.0.3");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    for m in 0..2 {
        let n = cluster.node(m);
        check(
            &cluster,
            status_u64(n, "wsrep_cluster_size").unwrap() == 2,
            || format!("{} let the refused node in", n.name()),
        );
    }
    let _ = cluster.node_mut(third).kill();

    // Listed (the table replicates), it gets in.
    cluster
        .node(0)
        .sql("INSERT INTO mysql.wsrep_allowlist(ip) VALUES ('127.0.0.3')")
        .or_logs(&cluster, "allowing 127.0.0.3");
    cluster
        .node_mut(third)
        .start()
        .or_logs(&cluster, "node3 once allowed");
    cluster
        .wait_for_cluster_size(3, WAIT)
        .or_logs(&cluster, "three members");
}
