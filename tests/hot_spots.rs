//! Hot rows under multi-master load with parallel appliers: 12 sysbench
//! threads over three Lockstep nodes updating a 100-row table, with four
//! applier threads per node. Nothing may hang or crash, every failure a
//! client sees must be a deadlock error (1213: a certification failure or
//! a brute-force abort), and the nodes must end with identical tables.

#[path = "support/multi_node.rs"]
mod multi_node;

use std::time::Duration;

use lockstep_testkit::{Cluster, Node, Provider, Sysbench};
use multi_node::{check, status, status_u64, OrLogs};

const WAIT: Duration = Duration::from_secs(60);

fn hot_spot_run(seconds: u64) {
    let cluster = Cluster::builder(3)
        .provider(Provider::lockstep_default())
        .cluster_name("hot")
        .slave_threads(4)
        .start()
        .unwrap_or_else(|e| panic!("starting three Lockstep nodes: {e}"));
    let c = &cluster;
    // Only deadlocks are retried: sysbench stops at any other error, which
    // then fails the run below.
    let bench = Sysbench::script("oltp_update_index")
        .tables(1)
        .table_size(100)
        .threads(12)
        .time(Duration::from_secs(seconds))
        .ignore_errors("1213");
    bench.prepare(c.node(0)).or_logs(c, "sysbench prepare");
    let all: Vec<&Node> = c.nodes().iter().collect();
    let report = bench.run(&all).or_logs(c, "sysbench on a 100-row table");
    eprintln!(
        "hot spots: {} transactions in {:.1} s ({:.1} tps), {} deadlocks retried",
        report.transactions, report.seconds, report.tps, report.ignored_errors
    );
    check(c, report.transactions > 0, || {
        format!("no transaction committed:\n{}", report.output)
    });
    check(c, report.ignored_errors > 0, || {
        "12 writers on 100 rows over 3 nodes never conflicted: the test is not testing".into()
    });
    let seqno = c
        .wait_for_equal_last_committed(WAIT)
        .or_logs(c, "every node applies the load");
    let tables = bench.table_names();
    let tables: Vec<&str> = tables.iter().map(String::as_str).collect();
    let sums = c.checksums(&tables).or_logs(c, "CHECKSUM TABLE");
    check(c, sums.is_consistent(), || {
        format!("the nodes diverged (at wsrep_last_committed {seqno}):\n{sums}")
    });
    for node in c.nodes() {
        let state = status(node, "wsrep_local_state_comment").or_logs(c, "state");
        check(c, state == "Synced", || {
            format!("{}: {state} after the load", node.name())
        });
        let failures = status_u64(node, "wsrep_local_cert_failures").or_logs(c, "cert failures");
        let aborts = status_u64(node, "wsrep_local_bf_aborts").or_logs(c, "bf aborts");
        eprintln!(
            "{}: {failures} certification failures, {aborts} brute-force aborts",
            node.name()
        );
    }
}

#[test]
fn hot_rows_on_every_node_end_identical() {
    hot_spot_run(20);
}
