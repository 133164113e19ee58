//! Parallel apply on real nodes (issue 4): with several applier threads,
//! writesets whose `depends_on` allows it apply concurrently and still
//! commit in seqno order; writesets that depend on their predecessor apply
//! one at a time. (MariaDB 10.11 marks ordinary DML PA-safe, even on tables
//! without a primary key: Galera applies those in parallel too; the
//! `PA_UNSAFE` flag itself is covered by the certification unit tests.) Galera's status variables tell which
//! happened: `wsrep_apply_oooe`/`_window` (overlap in the apply gate),
//! `wsrep_commit_oooe` (must stay 0: commits are in order),
//! `wsrep_cert_deps_distance`, `wsrep_local_recv_queue_*`.
//!
//! The provider is ours unless `LOCKSTEP_TEST_PROVIDER=galera` selects
//! Galera 4, against which every expectation here was validated.

#[path = "support/multi_node.rs"]
mod multi_node;

use std::time::{Duration, Instant};

use lockstep_testkit::{Cluster, Node, Sysbench};
use multi_node::{check, one_row_table, start_three_with_appliers, status, status_u64, OrLogs};

const WAIT: Duration = Duration::from_secs(60);

/// A `Double` status variable.
fn status_f64(c: &Cluster, node: &Node, name: &str) -> f64 {
    let value = status(node, name).or_logs(c, name);
    value
        .parse()
        .unwrap_or_else(|_| panic!("{}: {name} = {value:?} is not a number", node.name()))
}

/// The apply/commit gate figures of a node, printed for the log.
struct Gates {
    apply_oooe: f64,
    apply_window: f64,
    commit_oooe: f64,
    commit_window: f64,
}

fn gates(c: &Cluster, node: &Node) -> Gates {
    let g = Gates {
        apply_oooe: status_f64(c, node, "wsrep_apply_oooe"),
        apply_window: status_f64(c, node, "wsrep_apply_window"),
        commit_oooe: status_f64(c, node, "wsrep_commit_oooe"),
        commit_window: status_f64(c, node, "wsrep_commit_window"),
    };
    eprintln!(
        "{}: apply oooe {:.3} oool {:.3} window {:.3}; commit oooe {:.3} oool {:.3} window {:.3}; \
         cert_deps_distance {:.3}; recv queue avg {:.3} max {}",
        node.name(),
        g.apply_oooe,
        status_f64(c, node, "wsrep_apply_oool"),
        g.apply_window,
        g.commit_oooe,
        status_f64(c, node, "wsrep_commit_oool"),
        g.commit_window,
        status_f64(c, node, "wsrep_cert_deps_distance"),
        status_f64(c, node, "wsrep_local_recv_queue_avg"),
        status_u64(node, "wsrep_local_recv_queue_max").or_logs(c, "queue max"),
    );
    g
}

fn assert_identical(c: &Cluster, tables: &[&str]) {
    let seqno = c
        .wait_for_equal_last_committed(WAIT)
        .or_logs(c, "every node applies the load");
    let sums = c.checksums(tables).or_logs(c, "CHECKSUM TABLE");
    check(c, sums.is_consistent(), || {
        format!("the nodes diverged (at wsrep_last_committed {seqno}):\n{sums}")
    });
}

#[test]
fn independent_writesets_apply_in_parallel_and_commit_in_order() {
    let cluster = start_three_with_appliers("parallel", &[]);
    let c = &cluster;
    // Writes on one node only: the other two apply everything with their
    // four appliers, and nothing conflicts.
    let bench = Sysbench::script("oltp_write_only")
        .tables(4)
        .table_size(1000)
        .threads(8)
        .time(Duration::from_secs(15));
    bench.prepare(c.node(0)).or_logs(c, "sysbench prepare");
    let report = bench
        .run(&[c.node(0)])
        .or_logs(c, "sysbench oltp_write_only on node 1");
    eprintln!("{:.1} tps on node 1", report.tps);
    let tables = bench.table_names();
    let tables: Vec<&str> = tables.iter().map(String::as_str).collect();
    assert_identical(c, &tables);
    for node in &c.nodes()[1..] {
        let g = gates(c, node);
        check(c, g.apply_oooe > 0.0 && g.apply_window > 1.0, || {
            format!(
                "{}: no writeset applied alongside an earlier one (apply oooe {}, window {}) \
                 although 4 appliers had independent writesets",
                node.name(),
                g.apply_oooe,
                g.apply_window
            )
        });
        check(c, g.commit_oooe == 0.0, || {
            format!(
                "{}: a writeset entered commit order before an earlier one left it \
                 (commit oooe {})",
                node.name(),
                g.commit_oooe
            )
        });
        let distance = status_f64(c, node, "wsrep_cert_deps_distance");
        check(c, distance > 1.0, || {
            format!(
                "{}: wsrep_cert_deps_distance {distance}: writesets of disjoint rows \
                 should not depend on their predecessor",
                node.name()
            )
        });
        // The receive queue figures describe what the appliers saw: with
        // writesets arriving faster than one at a time, something waited
        // (max >= 1, avg > 0), and the average lies between min and max.
        let max_queue = status_u64(node, "wsrep_local_recv_queue_max").or_logs(c, "queue");
        let min_queue = status_u64(node, "wsrep_local_recv_queue_min").or_logs(c, "queue");
        let avg_queue = status_f64(c, node, "wsrep_local_recv_queue_avg");
        check(
            c,
            max_queue >= 1
                && avg_queue > 0.0
                && min_queue as f64 <= avg_queue
                && avg_queue <= max_queue as f64,
            || {
                format!(
                    "{}: wsrep_local_recv_queue min {min_queue} avg {avg_queue} max {max_queue}",
                    node.name()
                )
            },
        );
    }
}

#[test]
fn writesets_on_one_row_apply_one_at_a_time() {
    let cluster = start_three_with_appliers("serial", &[]);
    let c = &cluster;
    one_row_table(c, "serial");
    // FLUSH STATUS starts the averaged figures over (stats_reset).
    for node in &c.nodes()[1..] {
        node.sql("FLUSH STATUS").or_logs(c, "FLUSH STATUS");
        let g = gates(c, node);
        check(c, g.apply_window == 0.0 && g.apply_oooe == 0.0, || {
            format!(
                "{}: FLUSH STATUS left apply window {} oooe {}",
                node.name(),
                g.apply_window,
                g.apply_oooe
            )
        });
    }
    let received_before = status_u64(c.node(1), "wsrep_received").or_logs(c, "received");
    // Eight writers on node 1 take turns on one row (InnoDB's row lock
    // serializes them there); every writeset depends on the one before.
    let deadline = Instant::now() + Duration::from_secs(6);
    std::thread::scope(|s| {
        for _ in 0..8 {
            let node = c.node(0);
            s.spawn(move || {
                let mut session = node.session().or_logs(c, "session");
                while Instant::now() < deadline {
                    session
                        .sql("UPDATE serial.t SET n = n + 1 WHERE id = 1")
                        .or_logs(c, "update the hot row");
                }
            });
        }
    });
    assert_identical(c, &["serial.t"]);
    let received = status_u64(c.node(1), "wsrep_received").or_logs(c, "received") - received_before;
    check(c, received > 50, || {
        format!("only {received} writesets reached node 2: the test is not testing")
    });
    for node in &c.nodes()[1..] {
        let g = gates(c, node);
        // The window may exceed 1 (appliers waiting at the gate), but none
        // may enter before its predecessor has finished.
        check(c, g.apply_oooe == 0.0 && g.apply_window >= 1.0, || {
            format!(
                "{}: dependent writesets overlapped in the apply gate (oooe {}, window {})",
                node.name(),
                g.apply_oooe,
                g.apply_window
            )
        });
        check(c, g.commit_oooe == 0.0, || {
            format!("{}: commit oooe {}", node.name(), g.commit_oooe)
        });
        let distance = status_f64(c, node, "wsrep_cert_deps_distance");
        eprintln!("{}: cert_deps_distance {distance}", node.name());
    }
}
