//! Restarts without a full SST (issue 11, IST): a node killed with
//! `kill -9` and restarted the way the systemd unit does it
//! (`--wsrep-recover`, then `--wsrep_start_position`), and a graceful
//! rolling restart, both under a write load on every node, catch up by IST
//! from the group log: the joiner applies the writesets it lacks and the
//! donor's SST script runs in bypass mode (copies nothing). Afterwards
//! every acknowledged commit is on every node and the nodes are identical.

#[path = "support/multi_node.rs"]
mod multi_node;

use std::time::{Duration, Instant};

use lockstep_testkit::{AckedLoad, Cluster, Node, Provider};
use multi_node::{
    check, grastate, kill_and_await_removal, log_count, position_seqno, status, verify_acked_rows,
    OrLogs,
};

const WAIT: Duration = Duration::from_secs(60);
/// Inserts the load must acknowledge between two steps of a test.
const PROGRESS: u64 = 150;

fn start(name: &str) -> Cluster {
    start_with(name, "evs.suspect_timeout=PT3S")
}

fn start_with(name: &str, options: &str) -> Cluster {
    Cluster::builder(3)
        .provider(Provider::lockstep_default())
        .cluster_name(name)
        .provider_options(options)
        .start()
        .unwrap_or_else(|e| panic!("starting 3 Lockstep nodes: {e}"))
}

/// What a restart by IST leaves in the logs: one more "IST: applying" line
/// on the joiner and no new full SST; returns the writesets it applied.
struct LogMarks {
    ist: usize,
    sst: usize,
}

const IST_LINE: &str = "IST: applying ";
const SST_LINE: &str = "state transfer complete at";

fn marks(node: &Node) -> LogMarks {
    LogMarks {
        ist: log_count(node, IST_LINE),
        sst: log_count(node, SST_LINE),
    }
}

fn check_rejoined_by_ist(cluster: &Cluster, i: usize, before: &LogMarks) -> u64 {
    let node = cluster.node(i);
    let after = marks(node);
    check(cluster, after.ist == before.ist + 1, || {
        format!(
            "{}: expected one new '{IST_LINE}' line (IST), found {} new",
            node.name(),
            after.ist - before.ist
        )
    });
    check(cluster, after.sst == before.sst, || {
        format!("{}: the restart took a full SST", node.name())
    });
    let text = std::fs::read_to_string(node.error_log_path()).unwrap_or_default();
    let line = text.lines().rev().find(|l| l.contains(IST_LINE));
    let applied = line
        .and_then(|l| l.split(IST_LINE).nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| multi_node::fail(cluster, "no writeset count in the IST line"));
    applied
}

/// Three nodes with a database `r` and the acknowledged-writes load running.
fn start_loaded(name: &str) -> (Cluster, AckedLoad) {
    loaded(start(name))
}

fn loaded(cluster: Cluster) -> (Cluster, AckedLoad) {
    let load = multi_node::acked_load(&cluster, PROGRESS, WAIT);
    (cluster, load)
}

fn finish(cluster: &Cluster, load: AckedLoad) {
    let (table, reports) = load.stop();
    let checked = cluster
        .verify_acked(&table, &reports)
        .or_logs(cluster, "acknowledged rows on every node");
    for r in &reports {
        eprintln!(
            "{}: {} acknowledged, {} failed, slowest {:?} (first errors: {:?})",
            r.node,
            r.acked.len(),
            r.errors,
            r.slowest,
            r.first_errors
        );
    }
    eprintln!("{checked} acknowledged rows on every node; nodes identical");
    check(cluster, checked > 3 * PROGRESS as usize, || {
        format!("only {checked} rows were acknowledged")
    });
}

#[test]
fn a_killed_node_restarted_the_systemd_way_rejoins_by_ist() {
    let (mut cluster, load) = start_loaded("ist_kill");

    kill_and_await_removal(&mut cluster, 2, "2", WAIT);
    load.wait_for_progress(PROGRESS, WAIT)
        .or_logs(&cluster, "load while node3 is down");

    let before = marks(cluster.node(2));
    let donor_bypass =
        log_count(cluster.node(0), "IST to joiner") + log_count(cluster.node(1), "IST to joiner");
    let t0 = Instant::now();
    let r = cluster.node_mut(2).start_recovered();
    let position = r.or_logs(&cluster, "restart node3 with --wsrep-recover");
    let took = t0.elapsed();
    let seqno = position_seqno(&position);
    check(&cluster, seqno > 0, || {
        format!("--wsrep-recover found no usable position: {position}")
    });
    let applied = check_rejoined_by_ist(&cluster, 2, &before);
    check(&cluster, applied > 0, || {
        "the IST applied no writeset although the load ran while node3 was down".into()
    });
    let donors_after =
        log_count(cluster.node(0), "IST to joiner") + log_count(cluster.node(1), "IST to joiner");
    check(&cluster, donors_after == donor_bypass + 1, || {
        "no donor released the joiner's SST script in bypass mode".into()
    });
    eprintln!(
        "node3 recovered {position}, rejoined by IST ({applied} writesets) in {:.1} s",
        took.as_secs_f64()
    );
    load.wait_for_progress(PROGRESS, WAIT)
        .or_logs(&cluster, "load after the rejoin");
    finish(&cluster, load);
}

#[test]
fn a_graceful_rolling_restart_needs_no_sst() {
    let (mut cluster, load) = start_loaded("ist_rolling");
    for i in [1, 2] {
        let before = marks(cluster.node(i));
        let r = cluster.node_mut(i).stop();
        r.or_logs(&cluster, "graceful stop");
        load.wait_for_progress(PROGRESS, WAIT)
            .or_logs(&cluster, "load while a node is down");
        let t0 = Instant::now();
        let r = cluster.node_mut(i).start();
        r.or_logs(&cluster, "restart");
        let applied = check_rejoined_by_ist(&cluster, i, &before);
        eprintln!(
            "node{} rejoined by IST ({applied} writesets) in {:.1} s",
            i + 1,
            t0.elapsed().as_secs_f64()
        );
        load.wait_for_progress(PROGRESS, WAIT)
            .or_logs(&cluster, "load after the restart");
    }
    finish(&cluster, load);
}

/// Stops node `i` gracefully while writers commit on it, then checks
/// that grastate.dat's seqno is the one InnoDB committed last (as
/// `--wsrep-recover` reads it): a position behind the engine makes a
/// restart re-apply, or a switch to Galera re-number, an acknowledged
/// commit.
fn stop_and_compare_positions(cluster: &mut Cluster, i: usize) {
    let name = cluster.node(i).name().to_string();
    let r = cluster.node_mut(i).stop();
    r.or_logs(cluster, &format!("graceful stop of {name}"));
    let saved = grastate_seqno(cluster, i);
    let r = cluster.node_mut(i).recover_position();
    let engine = position_seqno(&r.or_logs(cluster, &format!("{name}: --wsrep-recover")));
    eprintln!("{name} stopped: grastate.dat seqno {saved}, InnoDB's {engine}");
    check(cluster, saved == engine, || {
        format!("{name}'s clean stop saved seqno {saved}, but InnoDB committed up to {engine}")
    });
}

#[test]
fn a_graceful_stop_saves_the_seqno_the_engine_committed() {
    let (mut cluster, load) = start_loaded("stop_position");
    // A second writer on every node: more commits in flight at the stop.
    let more = AckedLoad::start(&cluster, "r.acked_more").or_logs(&cluster, "second load");
    for _round in 0..2 {
        for i in 0..3 {
            stop_and_compare_positions(&mut cluster, i);
            let r = cluster.node_mut(i).start();
            r.or_logs(&cluster, "restart");
            load.wait_for_progress(PROGRESS, WAIT)
                .or_logs(&cluster, "load after the restart");
        }
    }
    // The whole cluster, the last node alone: it leaves at once, with its
    // own writers still committing.
    for i in [1, 2, 0] {
        stop_and_compare_positions(&mut cluster, i);
    }
    let r = cluster
        .node_mut(0)
        .start_with_args(&["--wsrep-new-cluster"]);
    r.or_logs(&cluster, "bootstrap from the last node");
    for i in [1, 2] {
        let r = cluster.node_mut(i).start();
        r.or_logs(&cluster, "rejoin after the full stop");
    }
    load.wait_for_progress(PROGRESS, WAIT)
        .or_logs(&cluster, "load after the full stop");
    // Both loads stop before either is checked: the check waits for every
    // node to reach the same seqno.
    let second = more.stop();
    finish(&cluster, load);
    verify_acked_rows(&cluster, &second, PROGRESS as usize, "the second load");
}

fn grastate_seqno(cluster: &Cluster, i: usize) -> i64 {
    grastate(cluster, i)
        .lines()
        .find_map(|l| l.strip_prefix("seqno:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| multi_node::fail(cluster, "grastate.dat has no seqno"))
}

fn count_rows(cluster: &Cluster, i: usize) -> String {
    cluster
        .node(i)
        .sql("SELECT COUNT(*) FROM r.t")
        .or_logs(cluster, "count rows")
}

/// Node `i`, started normally, refuses to join (its log says `why`),
/// stops by itself, and keeps its position in grastate.dat.
fn expect_refusal(cluster: &mut Cluster, i: usize, why: &str) {
    let before = grastate_seqno(cluster, i);
    let r = cluster.node_mut(i).spawn(&[]);
    r.or_logs(cluster, "start the node that must refuse");
    let name = cluster.node(i).name().to_string();
    let t0 = Instant::now();
    while cluster.node(i).is_running() && t0.elapsed() < WAIT {
        std::thread::sleep(Duration::from_millis(200));
    }
    check(cluster, !cluster.node(i).is_running(), || {
        format!("{name} joined a cluster it must refuse ({why})")
    });
    check(cluster, log_count(cluster.node(i), why) == 1, || {
        format!("{name}'s log does not say '{why}'")
    });
    let after = grastate_seqno(cluster, i);
    check(cluster, after == before, || {
        format!("{name}'s grastate.dat says {after} after the refusal, {before} before")
    });
}

#[test]
fn a_stale_bootstrap_does_not_lose_the_advanced_nodes_commits() {
    let mut cluster = start("stale_bootstrap");
    let n1 = cluster.node(0);
    n1.sql("CREATE DATABASE r; CREATE TABLE r.t (id INT PRIMARY KEY)")
        .or_logs(&cluster, "create");
    n1.sql("INSERT INTO r.t SELECT seq FROM test.seq_1_to_10")
        .or_logs(&cluster, "first rows");
    let r = cluster.node_mut(2).stop();
    r.or_logs(&cluster, "stop node3: it misses what follows");
    cluster
        .node(0)
        .sql("INSERT INTO r.t SELECT seq FROM test.seq_11_to_20")
        .or_logs(&cluster, "rows node3 misses");
    for i in [1, 0] {
        let r = cluster.node_mut(i).stop();
        r.or_logs(&cluster, "stop");
    }
    let advanced = grastate_seqno(&cluster, 0);
    let stale = grastate_seqno(&cluster, 2);
    check(&cluster, advanced > stale, || {
        format!("node1 at {advanced} should be ahead of node3 at {stale}")
    });

    // The operator's mistake: bootstrap the stale node anyway.
    let path = cluster.node(2).datadir().join("grastate.dat");
    let forced = grastate(&cluster, 2).replace("safe_to_bootstrap: 0", "safe_to_bootstrap: 1");
    std::fs::write(&path, forced).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let r = cluster
        .node_mut(2)
        .start_with_args(&["--wsrep-new-cluster"]);
    r.or_logs(&cluster, "bootstrap the stale node");

    // The advanced node refuses to join it and stops, its data untouched.
    expect_refusal(&mut cluster, 0, "is ahead of the cluster it joins");

    // The right way round: bootstrap the advanced node.
    let r = cluster.node_mut(2).stop();
    r.or_logs(&cluster, "stop the stale bootstrap");
    let r = cluster
        .node_mut(0)
        .start_with_args(&["--wsrep-new-cluster"]);
    r.or_logs(&cluster, "bootstrap the advanced node");
    check(&cluster, count_rows(&cluster, 0) == "20", || {
        "the advanced node lost rows".into()
    });
    // The stale node's own bootstrap forked the history: its view at the
    // seqno after `stale` is not the cluster's event there, though the
    // UUID is the same and its seqno below the cluster's. It must not get
    // IST on top of that (it would skip the cluster's writeset at that
    // seqno): it refuses to join, naming the fork, its data untouched.
    expect_refusal(&mut cluster, 2, "history has forked from the cluster's");
    // Re-provisioned as the message says (grastate.dat deleted: a full
    // SST), it gets everything.
    let _ = std::fs::remove_file(cluster.node(2).datadir().join("grastate.dat"));
    let r = cluster.node_mut(2).start();
    r.or_logs(&cluster, "the stale node joins");
    check(&cluster, count_rows(&cluster, 2) == "20", || {
        "the stale node did not get every row".into()
    });
}

#[test]
fn a_node_restarted_before_its_eviction_and_killed_again_leaves_a_majority() {
    // A long suspect timeout: the dead incarnation is still a member when
    // its successor joins and syncs.
    let (mut cluster, load) = loaded(start_with("quick_restart", "evs.suspect_timeout=PT20S"));
    let r = cluster.node_mut(2).kill();
    r.or_logs(&cluster, "kill -9 node3");
    let r = cluster.node_mut(2).start_recovered();
    r.or_logs(&cluster, "restart node3 at once");
    load.wait_for_progress(PROGRESS, WAIT)
        .or_logs(&cluster, "load after the quick restart");
    // A second failure at once: the cluster must have replaced the dead
    // incarnation, not counted both as voters (then two of four would be
    // left, no majority).
    let r = cluster.node_mut(2).kill();
    r.or_logs(&cluster, "kill -9 node3 again");
    load.wait_for_progress(PROGRESS, WAIT)
        .or_logs(&cluster, "the two others keep committing");
    for node in &cluster.nodes()[..2] {
        let st = multi_node::status(node, "wsrep_cluster_status").or_logs(&cluster, "status");
        check(&cluster, st == "Primary", || {
            format!("{}: {st}", node.name())
        });
    }
    finish(&cluster, load);
}

/// A node cut off while it ignores quorum (`pc.ignore_quorum`, as in
/// `galera_3nodes.galera_allowlist`) goes on alone as a primary component
/// of one: its views take seqnos the rest of the cluster gives to other
/// events. Restarted, its history differs from the cluster's only in those
/// views: it committed nothing of its own there, so it rejoins by itself
/// with a full SST, and has every row. (With a commit of its own it
/// refuses instead: `a_stale_bootstrap_does_not_lose_the_advanced_nodes_commits`.)
#[test]
fn a_node_that_was_primary_alone_without_writes_rejoins_by_full_sst() {
    let mut cluster = start("alone");
    let n1 = cluster.node(0);
    n1.sql("CREATE DATABASE r; CREATE TABLE r.t (id INT PRIMARY KEY)")
        .or_logs(&cluster, "create");
    n1.sql("INSERT INTO r.t SELECT seq FROM test.seq_1_to_10")
        .or_logs(&cluster, "first rows");
    cluster
        .wait_for_equal_last_committed(WAIT)
        .or_logs(&cluster, "node3 has the first rows");
    let n3 = cluster.node(2);
    n3.sql(
        "SET GLOBAL wsrep_provider_options='pc.ignore_quorum=true'; \
         SET GLOBAL wsrep_provider_options='gmcast.isolate=1'",
    )
    .or_logs(&cluster, "cut node3 off, ignoring quorum");
    cluster
        .node(0)
        .wait_for_status("wsrep_cluster_size", "2", WAIT)
        .or_logs(&cluster, "node1 and node2 without node3");
    let n3 = cluster.node(2);
    n3.wait_for_status("wsrep_cluster_size", "1", WAIT)
        .or_logs(&cluster, "node3 alone");
    let st = status(n3, "wsrep_cluster_status").or_logs(&cluster, "status");
    check(&cluster, st == "Primary", || {
        format!("node3 ignores quorum but is {st} alone")
    });
    cluster
        .node(0)
        .sql("INSERT INTO r.t SELECT seq FROM test.seq_11_to_20")
        .or_logs(&cluster, "rows node3 misses");
    let r = cluster.node_mut(2).stop();
    r.or_logs(&cluster, "stop node3");
    let sst_before = log_count(cluster.node(2), SST_LINE);
    let r = cluster.node_mut(2).start();
    r.or_logs(&cluster, "node3 rejoins");
    check(
        &cluster,
        log_count(cluster.node(2), "only in views of its own") == 1,
        || "node3 did not say its history differs only in views".into(),
    );
    check(
        &cluster,
        log_count(cluster.node(2), SST_LINE) == sst_before + 1,
        || "node3 took no full SST".into(),
    );
    check(&cluster, count_rows(&cluster, 2) == "20", || {
        "node3 did not get every row".into()
    });
    cluster
        .wait_for_equal_last_committed(WAIT)
        .or_logs(&cluster, "every node at the same seqno");
    let sums = cluster
        .checksums(&["r.t"])
        .or_logs(&cluster, "CHECKSUM TABLE");
    check(&cluster, sums.is_consistent(), || {
        format!("the nodes differ:\n{sums}")
    });
}
