//! Partitions without an operator (issue 11): a node cut off with
//! `gmcast.isolate` for longer than `evs.suspect_timeout` is removed by the
//! majority, refuses queries while cut off, and rejoins by itself (IST into
//! the running server) when the cut heals; a commit in flight on a node
//! that loses the majority returns an error instead of hanging. Under a
//! write load on every node; afterwards every acknowledged commit is on
//! every node and the nodes are identical. `LOCKSTEP_TEST_PROVIDER=galera`
//! runs the same tests on Galera (the reference behaviour).

#[path = "support/multi_node.rs"]
mod multi_node;

use std::time::{Duration, Instant};

use lockstep_testkit::{AckedLoad, Cluster, Node, Provider};
use multi_node::{check, log_count, status, OrLogs};

const WAIT: Duration = Duration::from_secs(60);
const PROGRESS: u64 = 150;
/// `evs.suspect_timeout` of these clusters.
const SUSPECT: Duration = Duration::from_secs(3);

fn start(name: &str) -> Cluster {
    start_tls(name, false)
}

fn start_tls(name: &str, tls: bool) -> Cluster {
    Cluster::builder(3)
        .provider(Provider::from_env())
        .tls(tls)
        .cluster_name(name)
        .provider_options("evs.suspect_timeout=PT3S")
        .start()
        .unwrap_or_else(|e| panic!("starting 3 Lockstep nodes: {e}"))
}

fn isolate(cluster: &Cluster, node: &Node, on: bool) {
    node.sql(&format!(
        "SET GLOBAL wsrep_provider_options='gmcast.isolate={}'",
        u8::from(on)
    ))
    .or_logs(cluster, "set gmcast.isolate");
}

#[test]
fn a_node_cut_off_longer_than_the_suspect_timeout_rejoins_by_itself() {
    cut_off_and_rejoin("partition_rejoin", false);
}

/// The same with peer TLS (issue 13): the majority removes the cut-off
/// node, and when the cut heals its new TLS connections take it back in.
#[test]
fn with_tls_a_node_cut_off_longer_than_the_suspect_timeout_rejoins_by_itself() {
    cut_off_and_rejoin("partition_rejoin_tls", true);
}

fn cut_off_and_rejoin(name: &str, tls: bool) {
    let cluster = start_tls(name, tls);
    cluster
        .node(0)
        .sql("CREATE DATABASE p")
        .or_logs(&cluster, "create database");
    let load = AckedLoad::start(&cluster, "p.acked").or_logs(&cluster, "start the load");
    load.wait_for_progress(PROGRESS, WAIT)
        .or_logs(&cluster, "load before the cut");
    let n3 = cluster.node(2);
    let ist_before = log_count(n3, "IST: applying ");

    isolate(&cluster, n3, true);
    cluster
        .node(0)
        .wait_for_status("wsrep_cluster_size", "2", WAIT)
        .or_logs(&cluster, "the majority removes node3");
    n3.wait_for_status("wsrep_cluster_status", "non-Primary", WAIT)
        .or_logs(&cluster, "node3 non-primary");
    let refused = n3.sql("SELECT COUNT(*) FROM p.acked");
    check(
        &cluster,
        refused.as_ref().err().and_then(|e| e.sql_code()) == Some(1047),
        || format!("a query on the cut-off node must fail with 1047, got {refused:?}"),
    );
    // Well past the removal: the majority goes on without node3.
    load.wait_for_progress(PROGRESS, WAIT)
        .or_logs(&cluster, "load while node3 is cut off");
    std::thread::sleep(SUSPECT * 2);

    let healed = Instant::now();
    isolate(&cluster, n3, false);
    n3.wait_synced(WAIT)
        .or_logs(&cluster, "node3 back to Synced");
    for node in cluster.nodes() {
        node.wait_for_status("wsrep_cluster_size", "3", WAIT)
            .or_logs(&cluster, "three members again");
    }
    let took = healed.elapsed();
    let st = status(n3, "wsrep_cluster_status").or_logs(&cluster, "status");
    check(&cluster, st == "Primary", || format!("node3 is {st}"));
    if cluster.provider_label() == "lockstep" {
        check(
            &cluster,
            log_count(n3, "IST: applying ") == ist_before + 1,
            || "node3 did not catch up by IST".into(),
        );
    }
    eprintln!(
        "node3 rejoined {:.1} s after the cut healed",
        took.as_secs_f64()
    );
    load.wait_for_progress(PROGRESS, WAIT)
        .or_logs(&cluster, "load after the rejoin");
    let (table, reports) = load.stop();
    let checked = cluster
        .verify_acked(&table, &reports)
        .or_logs(&cluster, "acknowledged rows on every node");
    eprintln!("{checked} acknowledged rows on every node; nodes identical");
    check(&cluster, checked > 3 * PROGRESS as usize, || {
        format!("only {checked} rows were acknowledged")
    });
}

#[test]
fn a_commit_in_flight_when_the_node_loses_the_majority_fails_in_bounded_time() {
    let cluster = start("partition_inflight");
    let n1 = cluster.node(0);
    n1.sql("CREATE DATABASE q; CREATE TABLE q.t (id INT PRIMARY KEY, v INT)")
        .or_logs(&cluster, "create");
    n1.sql("INSERT INTO q.t VALUES (1, 0)")
        .or_logs(&cluster, "seed row");
    let n3 = cluster.node(2);
    let mut s = n3.session().or_logs(&cluster, "session on node3");
    s.set_timeout(Duration::from_secs(60));
    s.sql("BEGIN").or_logs(&cluster, "begin");
    s.sql("INSERT INTO q.t VALUES (2, 3)")
        .or_logs(&cluster, "insert in the transaction");
    s.sql("UPDATE q.t SET v = 3 WHERE id = 1")
        .or_logs(&cluster, "update in the transaction");

    isolate(&cluster, n3, true);
    let t0 = Instant::now();
    let commit = s.sql("COMMIT");
    let took = t0.elapsed();
    let code = commit.as_ref().err().and_then(|e| e.sql_code());
    eprintln!("COMMIT on the cut-off node returned {code:?} after {took:?}");
    // Galera 26.4 answers 1180 "... (provider status: Not connected to
    // Primary Component)" here (LOCKSTEP_TEST_PROVIDER=galera); a deadlock
    // or "not prepared" error would do as well.
    check(&cluster, matches!(code, Some(1180 | 1213 | 1047)), || {
        format!("COMMIT on a node that lost the majority must fail, got {commit:?}")
    });
    check(&cluster, took < SUSPECT + Duration::from_secs(5), || {
        format!("COMMIT took {took:?} to fail; evs.suspect_timeout is {SUSPECT:?}")
    });
    cluster
        .node(0)
        .sql("UPDATE q.t SET v = 1 WHERE id = 1")
        .or_logs(&cluster, "the majority writes the same row");
    drop(s);

    isolate(&cluster, n3, false);
    n3.wait_synced(WAIT).or_logs(&cluster, "node3 back");
    for node in cluster.nodes() {
        node.wait_for_status("wsrep_cluster_size", "3", WAIT)
            .or_logs(&cluster, "three members again");
    }
    // The failed transaction released its row locks on node3: the row
    // can be written there at once (a held lock would wait 50 s).
    let t1 = Instant::now();
    n3.sql("UPDATE q.t SET v = 5 WHERE id = 1")
        .or_logs(&cluster, "write the same row on node3");
    check(&cluster, t1.elapsed() < Duration::from_secs(10), || {
        format!("the update on node3 waited {:?} for a lock", t1.elapsed())
    });
    cluster
        .wait_for_equal_last_committed(WAIT)
        .or_logs(&cluster, "same position");
    let sums = cluster.checksums(&["q.t"]).or_logs(&cluster, "checksums");
    check(&cluster, sums.is_consistent(), || {
        format!("nodes differ:\n{sums}")
    });
    let rows = n3
        .query_rows("SELECT id, v FROM q.t ORDER BY id")
        .or_logs(&cluster, "read");
    check(
        &cluster,
        rows == vec![vec!["1".to_string(), "5".to_string()]],
        || format!("the failed transaction left {rows:?}"),
    );
}

fn start_two(name: &str, options: &str) -> Cluster {
    Cluster::builder(2)
        .provider(Provider::from_env())
        .cluster_name(name)
        .provider_options(options)
        .start()
        .unwrap_or_else(|e| panic!("starting 2 nodes: {e}"))
}

fn wait_primary_alone(cluster: &Cluster, node: &Node) {
    node.wait_for_status("wsrep_cluster_size", "1", WAIT)
        .or_logs(cluster, "a component of one");
    node.wait_for_status("wsrep_cluster_status", "Primary", WAIT)
        .or_logs(cluster, "Primary alone");
    // A new primary component is Joined, then Synced: clients are served
    // from then on (Galera too; its own tests wait for wsrep_ready).
    node.wait_for_status("wsrep_ready", "ON", WAIT)
        .or_logs(cluster, "ready alone");
}

fn assert_same_rows(cluster: &Cluster, want: &str) {
    cluster
        .wait_for_equal_last_committed(WAIT)
        .or_logs(cluster, "same position");
    for node in cluster.nodes() {
        let got = node
            .sql("SELECT GROUP_CONCAT(id ORDER BY id) FROM s.t")
            .or_logs(cluster, "read");
        check(cluster, got == want, || {
            format!("{}: rows {got}, expected {want}", node.name())
        });
    }
}

#[test]
fn pc_ignore_sb_keeps_a_node_of_two_primary_and_the_other_rejoins() {
    let cluster = start_two("ignore_sb", "evs.suspect_timeout=PT3S");
    let (n1, n2) = (cluster.node(0), cluster.node(1));
    n1.sql("CREATE DATABASE s; CREATE TABLE s.t (id INT PRIMARY KEY)")
        .or_logs(&cluster, "create");
    n1.sql("INSERT INTO s.t VALUES (1)")
        .or_logs(&cluster, "insert");
    n1.sql("SET GLOBAL wsrep_provider_options='pc.ignore_sb=true'")
        .or_logs(&cluster, "pc.ignore_sb");
    isolate(&cluster, n2, true);
    wait_primary_alone(&cluster, n1);
    n1.sql("INSERT INTO s.t VALUES (2)")
        .or_logs(&cluster, "write on the node that ignores the split");
    n2.wait_for_status("wsrep_cluster_status", "non-Primary", WAIT)
        .or_logs(&cluster, "the other node is non-primary");
    isolate(&cluster, n2, false);
    for node in cluster.nodes() {
        node.wait_for_status("wsrep_cluster_size", "2", WAIT)
            .or_logs(&cluster, "two members again");
    }
    n2.wait_synced(WAIT).or_logs(&cluster, "node2 synced");
    assert_same_rows(&cluster, "1,2");
}

/// `pc.ignore_sb` is Galera's split-brain override: a side with exactly
/// half of the weight stays primary, a minority does not. A node of three
/// cut off with it set turns non-Primary like any other, and the two
/// others stay Primary: no split brain.
#[test]
fn pc_ignore_sb_leaves_a_minority_of_three_non_primary() {
    let cluster = start_tls("ignore_sb_minority", false);
    let n3 = cluster.node(2);
    n3.sql("SET GLOBAL wsrep_provider_options='pc.ignore_sb=true'")
        .or_logs(&cluster, "pc.ignore_sb");
    isolate(&cluster, n3, true);
    n3.wait_for_status("wsrep_cluster_status", "non-Primary", WAIT)
        .or_logs(&cluster, "the cut-off node is non-primary");
    // Well past the suspect timeout (3 s): it did not re-form alone.
    std::thread::sleep(Duration::from_secs(6));
    let st = n3
        .status("wsrep_cluster_status")
        .or_logs(&cluster, "status");
    check(&cluster, st.as_deref() == Some("non-Primary"), || {
        format!("node3, a minority of one with pc.ignore_sb, is {st:?}")
    });
    check(
        &cluster,
        log_count(n3, "pc.ignore_sb (a split into exact halves)") == 0,
        || "node3 re-formed a primary component alone".into(),
    );
    for n in &cluster.nodes()[..2] {
        n.wait_for_status("wsrep_cluster_size", "2", WAIT)
            .or_logs(&cluster, "the majority stays Primary with two members");
    }
    isolate(&cluster, n3, false);
    n3.wait_synced(WAIT).or_logs(&cluster, "node3 back");
}

#[test]
fn pc_bootstrap_makes_the_survivor_of_two_primary_and_the_killed_node_rejoins() {
    let mut cluster = start_two("pc_bootstrap", "evs.suspect_timeout=PT3S");
    cluster
        .node(0)
        .sql("CREATE DATABASE s; CREATE TABLE s.t (id INT PRIMARY KEY)")
        .or_logs(&cluster, "create");
    cluster
        .node(0)
        .sql("INSERT INTO s.t VALUES (1)")
        .or_logs(&cluster, "insert");
    let r = cluster.node_mut(1).kill();
    r.or_logs(&cluster, "kill node2");
    let n1 = cluster.node(0);
    // One of two is not a majority: non-primary, as with Galera.
    n1.wait_for_status("wsrep_cluster_status", "non-Primary", WAIT)
        .or_logs(&cluster, "node1 non-primary");
    n1.sql("SET GLOBAL wsrep_provider_options='pc.bootstrap=YES'")
        .or_logs(&cluster, "pc.bootstrap");
    wait_primary_alone(&cluster, n1);
    n1.sql("INSERT INTO s.t VALUES (2)")
        .or_logs(&cluster, "write after pc.bootstrap");
    multi_node::restart_recovered(&mut cluster, 1, "2", WAIT);
    assert_same_rows(&cluster, "1,2");
}

#[test]
fn pc_ignore_sb_a_write_right_after_the_peer_dies_commits() {
    let mut cluster = start_two("ignore_sb_kill", "evs.suspect_timeout=PT3S");
    let n1 = cluster.node(0);
    n1.sql("CREATE DATABASE s; CREATE TABLE s.t (id INT PRIMARY KEY)")
        .or_logs(&cluster, "create");
    n1.sql("SET GLOBAL wsrep_provider_options='pc.ignore_sb=true'")
        .or_logs(&cluster, "pc.ignore_sb");
    let r = cluster.node_mut(1).kill();
    r.or_logs(&cluster, "kill node2");
    // Ordered while the peer is already dead: it waits for the suspect
    // timeout, then commits in the component node1 re-forms alone.
    let t0 = Instant::now();
    cluster
        .node(0)
        .sql("INSERT INTO s.t VALUES (1)")
        .or_logs(&cluster, "insert right after the kill");
    let took = t0.elapsed();
    check(&cluster, took < SUSPECT + Duration::from_secs(5), || {
        format!("the insert took {took:?}")
    });
    wait_primary_alone(&cluster, cluster.node(0));
    multi_node::restart_recovered(&mut cluster, 1, "2", WAIT);
    assert_same_rows(&cluster, "1");
}

/// The leader's index in `cluster`, from `wsrep_lockstep_leader`.
fn leader_index(cluster: &Cluster) -> usize {
    let name = status(cluster.node(0), "wsrep_lockstep_leader").or_logs(cluster, "leader");
    let Some(i) = cluster.nodes().iter().position(|n| n.name() == name) else {
        multi_node::fail(cluster, &format!("no node is the leader {name:?}"));
    };
    i
}

/// Issue 34 item 4 (ADR 0027): `pc.bootstrap` on a survivor never drops
/// an acknowledged commit silently. Three nodes under a write load on
/// each; the leader and one follower are killed at once. The surviving
/// follower may lack commits the two others made without it (Raft
/// commits on a majority), so it refuses `pc.bootstrap`, stays
/// non-Primary and names the leader in its log; with
/// `lockstep.force_bootstrap` the operator accepts the loss and it
/// founds.
#[test]
fn pc_bootstrap_on_a_follower_of_three_refuses_and_names_the_leader() {
    if matches!(Provider::from_env(), Provider::Galera) {
        return; // Galera bootstraps any survivor (the behaviour this changes)
    }
    let mut cluster = start("bootstrap_follower");
    let load = multi_node::acked_load(&cluster, PROGRESS, WAIT);
    let leader = leader_index(&cluster);
    let leader_name = cluster.node(leader).name().to_string();
    let survivor = (leader + 1) % 3;
    let other = (leader + 2) % 3;
    let r = cluster.kill_at_once(&[leader, other]);
    r.or_logs(&cluster, "kill the leader and a follower");
    drop(load.stop());
    let f = cluster.node(survivor);
    f.wait_for_status("wsrep_cluster_status", "non-Primary", WAIT)
        .or_logs(&cluster, "the survivor is non-primary");
    f.sql("SET GLOBAL wsrep_provider_options='pc.bootstrap=YES'")
        .or_logs(&cluster, "pc.bootstrap");
    let deadline = Instant::now() + WAIT;
    while log_count(f, "pc.bootstrap=YES refused") == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let refusal = format!("node {leader_name} (");
    check(&cluster, log_count(f, &refusal) >= 1, || {
        format!("the refusal does not name the leader {leader_name}")
    });
    // Well after the refusal: still not primary.
    std::thread::sleep(Duration::from_secs(2));
    let st = f.status("wsrep_cluster_status").or_logs(&cluster, "status");
    check(&cluster, st.as_deref() == Some("non-Primary"), || {
        format!("the refused survivor is {st:?}")
    });
    f.sql("SET GLOBAL wsrep_provider_options='lockstep.force_bootstrap=YES; pc.bootstrap=YES'")
        .or_logs(&cluster, "forced pc.bootstrap");
    wait_primary_alone(&cluster, f);
    check(
        &cluster,
        log_count(f, "with lockstep.force_bootstrap") == 1,
        || "the forced bootstrap was not logged as such".into(),
    );
}

/// The other side of the rule: a survivor that led the group holds every
/// commit (Raft's leader completeness), so `pc.bootstrap` founds at once
/// and every insert acknowledged on any node before the crash is there;
/// the killed nodes rejoin it and end identical.
#[test]
fn pc_bootstrap_on_the_leader_keeps_every_acknowledged_commit() {
    let mut cluster = start("bootstrap_leader");
    let load = multi_node::acked_load(&cluster, PROGRESS, WAIT);
    let leader = if matches!(Provider::from_env(), Provider::Galera) {
        0
    } else {
        leader_index(&cluster)
    };
    let others: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let r = cluster.kill_at_once(&others);
    r.or_logs(&cluster, "kill both followers");
    let acked = load.stop();
    let l = cluster.node(leader);
    l.wait_for_status("wsrep_cluster_status", "non-Primary", WAIT)
        .or_logs(&cluster, "the leader alone is non-primary");
    l.sql("SET GLOBAL wsrep_provider_options='pc.bootstrap=YES'")
        .or_logs(&cluster, "pc.bootstrap");
    wait_primary_alone(&cluster, l);
    for &i in &others {
        let r = cluster.node_mut(i).start_recovered();
        r.or_logs(&cluster, "restart a follower the systemd way");
    }
    for node in cluster.nodes() {
        node.wait_for_status("wsrep_cluster_size", "3", WAIT)
            .or_logs(&cluster, "three members again");
    }
    multi_node::verify_acked_rows(
        &cluster,
        &acked,
        PROGRESS as usize,
        "pc.bootstrap on the leader",
    );
}
