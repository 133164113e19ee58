//! The testkit's held-open sessions and node joining against real mariadbd
//! with Galera 4 (the provider these harness features must work with before
//! Lockstep's tests rely on them). Fails when Galera is not installed, unless
//! `LOCKSTEP_ALLOW_SKIP=1`.

use std::time::{Duration, Instant};

use lockstep_testkit::{require_galera, Cluster, Provider};

fn galera(name: &str, nodes: usize) -> Option<Cluster> {
    if !require_galera(name) {
        return None;
    }
    let cluster = Cluster::builder(nodes)
        .provider(Provider::Galera)
        .cluster_name(name)
        .start()
        .unwrap_or_else(|e| panic!("starting {nodes} Galera node(s): {e}"));
    Some(cluster)
}

#[test]
fn a_session_holds_a_transaction_across_calls_and_survives_errors() {
    let Some(cluster) = galera("testkit_session", 1) else {
        return;
    };
    let node = cluster.node(0);
    node.sql("CREATE DATABASE s; CREATE TABLE s.t (id INT PRIMARY KEY, v TEXT)")
        .unwrap();
    let mut s = node.session().unwrap();
    assert_eq!(s.node(), "node1");
    s.sql("BEGIN").unwrap();
    s.sql("INSERT INTO s.t VALUES (1, 'a\tb');\nINSERT INTO s.t VALUES (2, 'two');")
        .unwrap();
    // Uncommitted: invisible to other connections, visible in the session.
    assert_eq!(node.sql("SELECT COUNT(*) FROM s.t").unwrap(), "0");
    assert_eq!(
        s.query_rows("SELECT id, v FROM s.t ORDER BY id").unwrap(),
        [["1", "a\\tb"], ["2", "two"]]
    );
    // An error reports its code and leaves the connection and the
    // transaction usable.
    let err = s.sql("SELECT * FROM s.missing").unwrap_err();
    assert_eq!(err.sql_code(), Some(1146), "{err}");
    let err = s
        .sql("INSERT INTO s.t VALUES (1, 'duplicate')")
        .unwrap_err();
    assert_eq!(err.sql_code(), Some(1062), "{err}");
    s.sql("COMMIT").unwrap();
    assert_eq!(node.sql("SELECT COUNT(*) FROM s.t").unwrap(), "2");
    // Session variables persist between calls.
    s.sql("SET @x = 41").unwrap();
    assert_eq!(s.sql("SELECT @x + 1").unwrap(), "42");
    assert_eq!(s.sql("DO 1").unwrap(), "", "no rows, no output");
}

#[test]
fn a_session_to_a_killed_server_fails_instead_of_hanging() {
    let Some(mut cluster) = galera("testkit_session_kill", 1) else {
        return;
    };
    let mut s = cluster.node(0).session().unwrap();
    s.sql("SELECT 1").unwrap();
    cluster.node_mut(0).kill().unwrap();
    let t0 = Instant::now();
    let err = s.sql("SELECT 2").unwrap_err();
    eprintln!("after the kill: {err}");
    assert!(
        t0.elapsed() < Duration::from_secs(30),
        "took {:?}",
        t0.elapsed()
    );
    assert!(
        err.sql_code().is_some_and(|c| c >= 2000),
        "a client error: {err}"
    );
    // Never reconnects silently (that would lose an open transaction).
    let err = s.sql("SELECT 3").unwrap_err();
    assert!(err.to_string().contains("unusable"), "{err}");
}

#[test]
fn an_added_node_joins_a_running_cluster_by_sst_from_an_empty_datadir() {
    let Some(mut cluster) = galera("testkit_add_node", 1) else {
        return;
    };
    cluster
        .node(0)
        .sql("CREATE DATABASE j; CREATE TABLE j.t (id INT PRIMARY KEY); INSERT INTO j.t VALUES (7)")
        .unwrap();
    let i = cluster.add_node().unwrap();
    assert_eq!(i, 1);
    let joiner = cluster.node(i);
    assert_eq!(joiner.name(), "node2");
    assert_ne!(joiner.port(), cluster.node(0).port());
    let empty = std::fs::read_dir(joiner.datadir())
        .unwrap()
        .next()
        .is_none();
    assert!(empty, "the joiner starts from an empty datadir");
    let cnf = std::fs::read_to_string(&joiner.config().defaults_file).unwrap();
    let peer = format!("127.0.0.1:{}", cluster.node(0).base_port());
    assert!(
        cnf.contains(&peer),
        "the joiner's address lists node1:\n{cnf}"
    );
    assert!(cnf.contains("wsrep_sst_method=rsync"), "{cnf}");

    cluster.node_mut(i).start().unwrap();
    cluster
        .wait_for_cluster_size(2, Duration::from_secs(30))
        .unwrap();
    assert_eq!(cluster.node(i).sql("SELECT id FROM j.t").unwrap(), "7");
    let seqno = cluster
        .wait_for_equal_last_committed(Duration::from_secs(30))
        .unwrap();
    assert!(seqno > 0);
    let sums = cluster.checksums(&["j.t"]).unwrap();
    assert!(sums.is_consistent(), "{sums}");
    assert_eq!(sums.per_node.len(), 2);
}

/// A node that does not stop within the stop timeout is killed, and the
/// error carries every thread's stack (gdb) and where the whole dump is:
/// a shutdown hang under the clock nemesis once left nothing to go on.
#[test]
fn a_hung_stop_reports_the_threads_stacks_and_kills_the_node() {
    if !require_galera("testkit_hung_stop") {
        return;
    }
    let mut cluster = Cluster::builder(1)
        .provider(Provider::Galera)
        .cluster_name("testkit_hung_stop")
        .stop_timeout(Duration::from_secs(2))
        .start()
        .unwrap_or_else(|e| panic!("starting 1 Galera node: {e}"));
    let pid = cluster.node(0).pid().expect("the node runs");
    // Stopped by SIGSTOP, the server cannot act on SIGTERM: a hang.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGSTOP,
    )
    .unwrap();
    let err = cluster.node_mut(0).stop().unwrap_err().to_string();
    assert!(err.contains("did not shut down"), "{err}");
    assert!(err.contains("the threads' stacks ("), "{err}");
    assert!(err.contains("#0"), "no frame in the summary: {err}");
    assert!(!cluster.node(0).is_running(), "a hung node is killed");
    let file = err
        .split("the threads' stacks (")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .expect("the dump's path");
    let dump = std::fs::read_to_string(file).unwrap();
    assert!(dump.matches("\nThread ").count() > 3, "{dump}");
}
