//! Streaming replication on three real nodes (issue 12): a transaction with
//! `wsrep_trx_fragment_size` set replicates in fragments while it runs;
//! the other nodes keep them in `mysql.wsrep_streaming_log` and hold its
//! row locks; commit and rollback end it on every node; a conflicting
//! write aborts it everywhere; when its node is killed the others roll it
//! back, and the node comes back without it.
//!
//! Validated against Galera 4 as well:
//!
//! ```sh
//! LOCKSTEP_TEST_PROVIDER=galera cargo test --release -p lockstep-integration \
//!     --test streaming -- --nocapture
//! ```

#[path = "support/multi_node.rs"]
mod multi_node;

use std::time::{Duration, Instant};

use lockstep_testkit::{Cluster, Node, Session};
use multi_node::{
    causal_rows, check, fail, kill_and_await_removal, start_three_with_appliers, OrLogs,
};

const WAIT: Duration = Duration::from_secs(120);
const DEADLOCK: u32 = 1213;

/// Rows of `mysql.wsrep_streaming_log` on `node`.
fn fragments_on(cluster: &Cluster, node: &Node) -> u64 {
    let out = node
        .sql("SELECT COUNT(*) FROM mysql.wsrep_streaming_log")
        .or_logs(cluster, &format!("streaming log of {}", node.name()));
    out.trim().parse().unwrap_or_else(|_| {
        fail(
            cluster,
            &format!("{}: streaming log count {out:?}", node.name()),
        )
    })
}

/// Waits until `node` holds at least `n` fragments (they are applied
/// asynchronously, like any writeset).
fn await_fragments(cluster: &Cluster, node: &Node, n: u64) {
    let t0 = Instant::now();
    while fragments_on(cluster, node) < n {
        check(cluster, t0.elapsed() < WAIT, || {
            format!("{} never received {n} fragments", node.name())
        });
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until no running node holds a fragment any more.
fn await_no_fragments(cluster: &Cluster) {
    let t0 = Instant::now();
    for node in cluster.nodes().iter().filter(|n| n.is_running()) {
        while fragments_on(cluster, node) > 0 {
            check(cluster, t0.elapsed() < WAIT, || {
                format!("{} still holds streaming fragments", node.name())
            });
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// `SELECT COUNT(*)` with a causal read on `node`.
fn count(cluster: &Cluster, node: &Node, sql: &str) -> u64 {
    let rows = causal_rows(node, sql).or_logs(cluster, sql);
    rows.first()
        .and_then(|r| r.first())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| fail(cluster, &format!("{}: {sql} gave {rows:?}", node.name())))
}

/// Every running node has the same `tables`.
fn assert_identical(cluster: &Cluster, tables: &[&str]) {
    cluster
        .wait_for_equal_last_committed(WAIT)
        .or_logs(cluster, "nodes catch up");
    let report = cluster.checksums(tables).or_logs(cluster, "checksums");
    check(cluster, report.is_consistent(), || {
        format!("nodes differ:\n{report}")
    });
}

/// A session on `node` that streams every `size` `unit`.
fn streaming_session(cluster: &Cluster, node: &Node, size: u32, unit: &str) -> Session {
    let mut s = node.session().or_logs(cluster, "session");
    s.set_timeout(WAIT);
    s.sql(&format!(
        "SET SESSION wsrep_trx_fragment_unit='{unit}'; \
         SET SESSION wsrep_trx_fragment_size={size}"
    ))
    .or_logs(cluster, "streaming settings");
    s
}

fn setup(name: &str) -> Cluster {
    // Short lock waits: a lock left behind by a lost rollback shows as a
    // test failure, not as a hang.
    let cluster = start_three_with_appliers(name, &["innodb_lock_wait_timeout=20"]);
    cluster
        .node(0)
        .sql(
            "CREATE DATABASE sr; \
             CREATE TABLE sr.t (id INT PRIMARY KEY, v INT, pad VARCHAR(200)) ENGINE=InnoDB; \
             USE sr; INSERT INTO sr.t SELECT seq, 0, '' FROM seq_1_to_10",
        )
        .or_logs(&cluster, "creating sr.t");
    cluster
        .wait_for_equal_last_committed(WAIT)
        .or_logs(&cluster, "sr.t on every node");
    cluster
}

#[test]
fn a_streaming_transaction_commits_and_rolls_back_on_every_node() {
    let cluster = setup("sr_commit");
    let (node1, node2, node3) = (cluster.node(0), cluster.node(1), cluster.node(2));

    // Commit: fragments reach the others while the transaction runs; they
    // do not see its rows until it commits.
    let mut s = streaming_session(&cluster, node1, 1, "rows");
    s.sql("BEGIN").or_logs(&cluster, "BEGIN");
    for id in 101..=103 {
        s.sql(&format!("INSERT INTO sr.t VALUES ({id}, 1, 'streamed')"))
            .or_logs(&cluster, "insert in a streaming transaction");
    }
    await_fragments(&cluster, node2, 3);
    await_fragments(&cluster, node3, 3);
    check(
        &cluster,
        count(&cluster, node2, "SELECT COUNT(*) FROM sr.t WHERE id > 100") == 0,
        || "node2 sees rows of an uncommitted streaming transaction".into(),
    );
    s.sql("COMMIT").or_logs(&cluster, "COMMIT");
    for node in cluster.nodes() {
        let n = count(&cluster, node, "SELECT COUNT(*) FROM sr.t WHERE id > 100");
        check(&cluster, n == 3, || {
            format!("{}: {n} of 3 streamed rows after COMMIT", node.name())
        });
    }
    await_no_fragments(&cluster);

    // Rollback: the fragments go, and so do their rows.
    s.sql("BEGIN; UPDATE sr.t SET v = 9 WHERE id <= 5")
        .or_logs(&cluster, "update in a streaming transaction");
    await_fragments(&cluster, node3, 1);
    s.sql("ROLLBACK").or_logs(&cluster, "ROLLBACK");
    await_no_fragments(&cluster);
    for node in cluster.nodes() {
        let n = count(&cluster, node, "SELECT COUNT(*) FROM sr.t WHERE v = 9");
        check(&cluster, n == 0, || {
            format!(
                "{}: {n} rows of a rolled-back streaming transaction",
                node.name()
            )
        });
    }

    // Bytes as the unit, fragments inside one big statement.
    let mut big = streaming_session(&cluster, node2, 16384, "bytes");
    big.sql(
        "USE sr; INSERT INTO sr.t SELECT 1000 + seq, 2, REPEAT('b', 150) FROM seq_1_to_2000; \
         UPDATE sr.t SET v = 3 WHERE id BETWEEN 1001 AND 1500",
    )
    .or_logs(
        &cluster,
        "a 2000-row autocommit insert streamed in 16 KiB fragments",
    );
    await_no_fragments(&cluster);
    let n = count(&cluster, node3, "SELECT COUNT(*) FROM sr.t WHERE id > 1000");
    check(&cluster, n == 2000, || {
        format!("node3 has {n} of 2000 rows")
    });
    assert_identical(&cluster, &["sr.t", "mysql.wsrep_streaming_log"]);
}

#[test]
fn a_conflict_aborts_the_streaming_transaction_on_every_node() {
    let cluster = setup("sr_conflict");
    let (node1, node2) = (cluster.node(0), cluster.node(1));

    // A streaming transaction on node1 has replicated a fragment (row 1)
    // and holds row 2 locally, not yet replicated. Node2 commits row 2
    // first: its writeset aborts the streaming transaction on node1, and
    // every node rolls back the replicated fragment.
    let mut s = streaming_session(&cluster, node1, 1000, "bytes");
    s.sql("BEGIN; UPDATE sr.t SET v = 7, pad = REPEAT('x', 180) WHERE id <= 10")
        .or_logs(&cluster, "first fragment");
    await_fragments(&cluster, node2, 1);
    // Row 11 is new, small: below the fragment size, it stays local.
    s.sql("INSERT INTO sr.t VALUES (11, 7, '')")
        .or_logs(&cluster, "a local change after the fragment");
    node2
        .sql("INSERT INTO sr.t VALUES (11, 8, 'node2')")
        .or_logs(&cluster, "node2 commits the conflicting row");
    let err = s.sql("COMMIT").err();
    check(
        &cluster,
        err.as_ref().and_then(|e| e.sql_code()) == Some(DEADLOCK),
        || format!("the streaming transaction should get a deadlock error, got {err:?}"),
    );
    await_no_fragments(&cluster);
    for node in cluster.nodes() {
        let n = count(&cluster, node, "SELECT COUNT(*) FROM sr.t WHERE v = 7");
        check(&cluster, n == 0, || {
            format!(
                "{}: {n} rows of the aborted streaming transaction",
                node.name()
            )
        });
    }

    // The other way round: node2's open transaction holds row 3, and a
    // fragment of node1's streaming transaction needs it. The fragment is
    // ordered first, so node2's transaction is the one aborted.
    let mut local = node2.session().or_logs(&cluster, "session on node2");
    local
        .sql("BEGIN; UPDATE sr.t SET v = 5 WHERE id = 3")
        .or_logs(&cluster, "node2 holds row 3");
    let mut s = streaming_session(&cluster, node1, 1, "rows");
    s.sql("BEGIN; UPDATE sr.t SET v = 6 WHERE id = 3")
        .or_logs(&cluster, "fragment on row 3");
    await_fragments(&cluster, node2, 1);
    let err = local.sql("COMMIT").err();
    check(
        &cluster,
        err.as_ref().and_then(|e| e.sql_code()) == Some(DEADLOCK),
        || format!("node2's transaction should get a deadlock error, got {err:?}"),
    );
    s.sql("COMMIT")
        .or_logs(&cluster, "the streaming transaction commits");
    for node in cluster.nodes() {
        let v = causal_rows(node, "SELECT v FROM sr.t WHERE id = 3").or_logs(&cluster, "row 3");
        check(&cluster, v == [["6"]], || {
            format!("{}: row 3 = {v:?}, want 6", node.name())
        });
    }
    await_no_fragments(&cluster);
    assert_identical(&cluster, &["sr.t", "mysql.wsrep_streaming_log"]);
}

#[test]
fn the_streaming_transaction_of_a_killed_node_is_rolled_back() {
    let mut cluster = setup("sr_kill");
    // The streaming transaction runs on node3, which is then killed.
    let mut s = streaming_session(&cluster, cluster.node(2), 1, "rows");
    s.sql("BEGIN; UPDATE sr.t SET v = 4 WHERE id <= 4")
        .or_logs(&cluster, "fragments of node3");
    s.sql("INSERT INTO sr.t VALUES (20, 4, 'orphan')")
        .or_logs(&cluster, "one more fragment");
    await_fragments(&cluster, cluster.node(0), 5);
    await_fragments(&cluster, cluster.node(1), 5);
    kill_and_await_removal(&mut cluster, 2, "2", WAIT);
    drop(s);

    // The survivors roll it back: no fragment, no row, no lock left (the
    // writes below would wait for the locks and time out).
    await_no_fragments(&cluster);
    for i in 0..2 {
        let node = cluster.node(i);
        let n = count(&cluster, node, "SELECT COUNT(*) FROM sr.t WHERE v = 4");
        check(&cluster, n == 0, || {
            format!("{}: {n} rows of the dead node's transaction", node.name())
        });
    }
    cluster
        .node(0)
        .sql("UPDATE sr.t SET v = 10 + id WHERE id <= 4")
        .or_logs(&cluster, "the rows are free on node1");
    cluster
        .node(1)
        .sql("INSERT INTO sr.t VALUES (20, 30, 'node2')")
        .or_logs(&cluster, "the key is free on node2");

    // The killed node comes back (IST) without its old transaction: its
    // own copy of the fragments is rolled back too.
    cluster
        .node_mut(2)
        .start_recovered()
        .or_logs(&cluster, "restarting node3");
    cluster
        .node(2)
        .wait_synced(WAIT)
        .or_logs(&cluster, "node3 synced");
    await_no_fragments(&cluster);
    cluster
        .node(2)
        .sql("UPDATE sr.t SET v = 40 WHERE id <= 4")
        .or_logs(&cluster, "the rows are free on node3");
    assert_identical(&cluster, &["sr.t", "mysql.wsrep_streaming_log"]);
}
