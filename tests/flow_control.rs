//! Flow control on real nodes (issue 12): a node whose applier is held
//! back (`LOCK TABLE ... READ` blocks it) makes the cluster pause its
//! writers instead of queueing without bound, and releases them when it
//! catches up; Galera's status counters say so.
//!
//! Validated against Galera 4 as well:
//!
//! ```sh
//! LOCKSTEP_TEST_PROVIDER=galera cargo test --release -p lockstep-integration \
//!     --test flow_control -- --nocapture
//! ```

#[path = "support/multi_node.rs"]
mod multi_node;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lockstep_testkit::{Cluster, Provider};
use multi_node::{check, fail, status, status_u64, OrLogs};

const WAIT: Duration = Duration::from_secs(60);
/// `gcs.fc_limit` of the test: with two members the pause starts above
/// round(4 × √2) = 6 queued writesets (Galera 4's scaling).
const FC_LIMIT: u64 = 4;
const UPPER: u64 = 6;

/// Polls `cond` every 100 ms for up to `within`.
fn eventually(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < within {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// Two nodes with `gcs.fc_limit` = [`FC_LIMIT`] and one applier each, and
/// `fc.t (id INT AUTO_INCREMENT PRIMARY KEY, v <column>)` on both.
fn two_nodes_with_fc_t(name: &str, column: &str) -> Cluster {
    let cluster = Cluster::builder(2)
        .provider(Provider::from_env())
        .cluster_name(name)
        .slave_threads(1)
        .provider_options(&format!("gcs.fc_limit={FC_LIMIT}"))
        .start()
        .unwrap_or_else(|e| panic!("starting two nodes: {e}"));
    cluster
        .node(0)
        .sql(&format!(
            "CREATE DATABASE fc; \
             CREATE TABLE fc.t (id INT AUTO_INCREMENT PRIMARY KEY, v {column}) ENGINE=InnoDB"
        ))
        .or_logs(&cluster, "creating fc.t");
    cluster
        .wait_for_equal_last_committed(WAIT)
        .or_logs(&cluster, "fc.t on both nodes");
    cluster
}

/// A session on node 2 that runs `first`, then holds `LOCK TABLE fc.t
/// READ`: node 2's applier cannot write fc.t until it unlocks.
fn hold_fc_t(cluster: &Cluster, first: &[&str]) -> lockstep_testkit::Session {
    let mut holder = cluster
        .node(1)
        .session()
        .or_logs(cluster, "session on node2");
    for sql in first
        .iter()
        .chain(&["SET SESSION wsrep_sync_wait=0", "LOCK TABLE fc.t READ"])
    {
        holder.sql(sql).or_logs(cluster, sql);
    }
    holder
}

#[test]
fn a_held_back_applier_pauses_the_writers_and_releases_them() {
    let cluster = two_nodes_with_fc_t("flow_control", "INT");
    let (node1, node2) = (cluster.node(0), cluster.node(1));
    // Node 2's applier cannot write fc.t while this session holds it.
    let mut holder = hold_fc_t(&cluster, &[]);

    // One writer on node 1, as fast as it can.
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let mut writer = node1.session().or_logs(&cluster, "session on node1");
    writer.set_timeout(Duration::from_secs(300));
    let handle = {
        let (stop, written) = (stop.clone(), written.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                if let Err(e) = writer.sql("INSERT INTO fc.t (v) VALUES (1)") {
                    return Err(e.to_string());
                }
                written.fetch_add(1, Ordering::SeqCst);
            }
            Ok(())
        })
    };

    // The queue on node 2 crosses the limit: node 2 asks for a pause,
    // node 1 pauses.
    let engaged = eventually(WAIT, || {
        status(node1, "wsrep_flow_control_active").is_ok_and(|v| v == "true")
    });
    check(&cluster, engaged, || {
        format!(
            "flow control never engaged: node2 recv queue {:?}, sent {:?}; node1 recv {:?} \
             ({} rows written)",
            status(node2, "wsrep_local_recv_queue"),
            status(node2, "wsrep_flow_control_sent"),
            status(node1, "wsrep_flow_control_recv"),
            written.load(Ordering::SeqCst)
        )
    });
    let sent = status_u64(node2, "wsrep_flow_control_sent").or_logs(&cluster, "fc sent");
    check(&cluster, sent >= 1, || format!("node2 sent {sent} pauses"));
    let requested = status(node2, "wsrep_flow_control_requested").or_logs(&cluster, "requested");
    check(&cluster, requested == "true", || {
        format!("node2 wsrep_flow_control_requested = {requested}")
    });

    // While paused, the writer makes (almost) no progress and node 2's
    // queue stays bounded: it does not grow with time.
    let before = written.load(Ordering::SeqCst);
    let mut max_queue = 0;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(4) {
        let q = status_u64(node2, "wsrep_local_recv_queue").or_logs(&cluster, "recv queue");
        max_queue = max_queue.max(q);
        std::thread::sleep(Duration::from_millis(200));
    }
    let during = written.load(Ordering::SeqCst) - before;
    check(&cluster, during <= 2, || {
        format!("{during} rows committed on node1 in 4 s of flow control pause")
    });
    check(&cluster, max_queue <= 2 * UPPER, || {
        format!("node2's receive queue reached {max_queue} (limit {UPPER})")
    });

    // Released: node 2 catches up, the pause ends, the writer goes on.
    holder
        .sql("UNLOCK TABLES")
        .or_logs(&cluster, "UNLOCK TABLES");
    let resumed_from = written.load(Ordering::SeqCst);
    let resumed = eventually(WAIT, || written.load(Ordering::SeqCst) >= resumed_from + 50);
    check(&cluster, resumed, || {
        format!(
            "the writer did not resume after UNLOCK TABLES: {} rows, node1 active {:?}",
            written.load(Ordering::SeqCst),
            status(node1, "wsrep_flow_control_active")
        )
    });
    stop.store(true, Ordering::SeqCst);
    match handle.join() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => fail(&cluster, &format!("the writer failed: {e}")),
        Err(_) => fail(&cluster, "the writer panicked"),
    }
    cluster
        .wait_for_equal_last_committed(WAIT)
        .or_logs(&cluster, "both nodes catch up");
    let rows = |i: usize| {
        cluster
            .node(i)
            .sql("SELECT COUNT(*) FROM fc.t")
            .or_logs(&cluster, "count")
    };
    let (r1, r2) = (rows(0), rows(1));
    let total = written.load(Ordering::SeqCst).to_string();
    check(&cluster, r1 == total && r2 == total, || {
        format!("rows: node1 {r1}, node2 {r2}, acknowledged {total}")
    });
    let paused_ns = status_u64(node1, "wsrep_flow_control_paused_ns").or_logs(&cluster, "ns");
    check(&cluster, paused_ns >= 3_000_000_000, || {
        format!("node1 was paused for {paused_ns} ns, expected at least the 4 s held")
    });
    let recv = status_u64(node1, "wsrep_flow_control_recv").or_logs(&cluster, "fc recv");
    check(&cluster, recv >= 1, || {
        format!("node1 received {recv} pauses")
    });
    let ended = eventually(WAIT, || {
        status(node1, "wsrep_flow_control_active").is_ok_and(|v| v == "false")
            && status(node2, "wsrep_flow_control_requested").is_ok_and(|v| v == "false")
    });
    check(&cluster, ended, || {
        "flow control still active after catching up".into()
    });
}

/// A desynced node never pauses the cluster (as with Galera), so its
/// queue may grow: `gcs.recv_q_hard_limit` bounds it. Past the limit the
/// node leaves the cluster (Galera aborts it) and the others go on.
#[test]
fn a_desynced_node_past_the_hard_limit_leaves_instead_of_growing() {
    if Provider::from_env() == Provider::Galera {
        // Galera aborts mariadbd here; the rest of the test expects the
        // server to stay up.
        return;
    }
    let cluster = two_nodes_with_fc_t("fc_hard_limit", "LONGBLOB");
    let (node1, node2) = (cluster.node(0), cluster.node(1));
    node2
        .sql("SET GLOBAL wsrep_provider_options='gcs.recv_q_hard_limit=1048576'")
        .or_logs(&cluster, "gcs.recv_q_hard_limit=1M");
    let mut holder = hold_fc_t(&cluster, &["SET GLOBAL wsrep_desync=ON"]);
    // 40 writesets of 64 KiB: 2.5 MiB, above node 2's hard limit; a
    // desynced node asks for no pause, so node 1 is never held back.
    for _ in 0..40 {
        node1
            .sql("INSERT INTO fc.t (v) VALUES (REPEAT('x', 65536))")
            .or_logs(&cluster, "insert on node1");
    }
    let left = node1.wait_for_status("wsrep_cluster_size", "1", WAIT);
    left.or_logs(&cluster, "node2 leaves past its hard limit");
    let logged = multi_node::log_count(node2, "exceeds gcs.recv_q_hard_limit");
    check(&cluster, logged >= 1, || {
        "node2 did not say why it left".into()
    });
    let _ = holder.sql("UNLOCK TABLES");
    // Node 1 goes on alone.
    node1
        .sql("INSERT INTO fc.t (v) VALUES ('after')")
        .or_logs(&cluster, "node1 still writes");
}
