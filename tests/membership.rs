//! Group membership with real mariadbd nodes running Lockstep (issue 3):
//! a graceful shutdown shrinks the view (3 -> 2 -> 1 stays Primary) and the
//! nodes rejoin by SST; a killed node is removed after the suspect timeout;
//! a node of another cluster is refused at the handshake and gives up; a
//! minority node turns non-primary and re-merges; `wsrep_sst_donor` is
//! honoured; a joiner gets its state with mariabackup too.

#[path = "support/multi_node.rs"]
mod multi_node;

use std::time::{Duration, Instant};

use lockstep_testkit::{Cluster, Provider};
use multi_node::{causal_rows, check, grastate, status, OrLogs};

const WAIT: Duration = Duration::from_secs(60);

fn start(name: &str, n: usize, options: &str) -> Cluster {
    Cluster::builder(n)
        .provider(Provider::lockstep_default())
        .cluster_name(name)
        .provider_options(options)
        .start()
        .unwrap_or_else(|e| panic!("starting {n} Lockstep nodes: {e}"))
}

/// Waits until every running node reports `size` members, Primary.
fn wait_for_size(cluster: &Cluster, size: usize) {
    let want = size.to_string();
    for node in cluster.nodes().iter().filter(|n| n.is_running()) {
        node.wait_for_status("wsrep_cluster_size", &want, WAIT)
            .or_logs(cluster, "cluster size");
        let st = status(node, "wsrep_cluster_status").or_logs(cluster, "status");
        check(cluster, st == "Primary", || {
            format!("{}: wsrep_cluster_status = {st}", node.name())
        });
    }
}

#[test]
fn graceful_leave_shrinks_the_view_and_the_nodes_rejoin() {
    let mut cluster = start("leave", 3, "");
    let n1 = cluster.node(0);
    n1.sql("CREATE DATABASE d; CREATE TABLE d.t (id INT PRIMARY KEY, v INT)")
        .or_logs(&cluster, "create");
    n1.sql("INSERT INTO d.t VALUES (1, 1)")
        .or_logs(&cluster, "insert");

    let r = cluster.node_mut(2).stop();
    r.or_logs(&cluster, "stop node3");
    wait_for_size(&cluster, 2);
    cluster
        .node(1)
        .sql("INSERT INTO d.t VALUES (2, 2)")
        .or_logs(&cluster, "insert on node2");
    let r = cluster.node_mut(1).stop();
    r.or_logs(&cluster, "stop node2");
    wait_for_size(&cluster, 1);
    // The last node is a Primary component of one and keeps taking writes.
    cluster
        .node(0)
        .sql("INSERT INTO d.t VALUES (3, 3)")
        .or_logs(&cluster, "insert alone");
    // Nodes that left while others stayed must not bootstrap later.
    for i in [1, 2] {
        let g = grastate(&cluster, i);
        check(&cluster, g.contains("safe_to_bootstrap: 0"), || {
            format!(
                "node{} left a running cluster but its grastate.dat says:\n{g}",
                i + 1
            )
        });
    }

    for i in [1, 2] {
        let r = cluster.node_mut(i).start();
        r.or_logs(&cluster, "rejoin");
    }
    wait_for_size(&cluster, 3);
    let want: Vec<Vec<String>> = (1..=3)
        .map(|i| vec![i.to_string(), i.to_string()])
        .collect();
    for node in cluster.nodes() {
        let got = causal_rows(node, "SELECT id, v FROM d.t ORDER BY id").or_logs(&cluster, "read");
        check(&cluster, got == want, || {
            format!("{}: rows {got:?}, expected {want:?}", node.name())
        });
    }
    let r = cluster.stop_all();
    r.or_logs(&cluster, "stop");
    // After a clean full shutdown exactly one node (the last) may bootstrap.
    let safe = (0..3)
        .filter(|&i| grastate(&cluster, i).contains("safe_to_bootstrap: 1"))
        .count();
    check(&cluster, safe == 1, || {
        format!("{safe} nodes may bootstrap after a clean full shutdown, expected 1")
    });
}

#[test]
fn a_killed_node_is_removed_and_the_rest_keeps_working() {
    let mut cluster = start("kill", 3, "evs.suspect_timeout=PT3S");
    let r = cluster.node_mut(2).kill();
    r.or_logs(&cluster, "kill node3");
    let t0 = Instant::now();
    wait_for_size(&cluster, 2);
    // The leader removes a member unheard for evs.suspect_timeout (3 s):
    // not before (it was heard at most a heartbeat before the kill), and
    // not long after (the 200 ms status polling and one Raft round).
    let removed_after = t0.elapsed();
    eprintln!(
        "killed node removed after {:.1} s",
        removed_after.as_secs_f64()
    );
    check(
        &cluster,
        removed_after >= Duration::from_millis(2_500)
            && removed_after <= Duration::from_millis(5_000),
        || {
            format!(
                "the killed node was removed after {removed_after:?}; \
                 evs.suspect_timeout=PT3S says about 3 s"
            )
        },
    );
    let n2 = cluster.node(1);
    n2.sql("CREATE DATABASE k; CREATE TABLE k.t (id INT PRIMARY KEY)")
        .or_logs(&cluster, "ddl after the kill");
    n2.sql("INSERT INTO k.t VALUES (1)")
        .or_logs(&cluster, "write after the kill");
    let got = causal_rows(cluster.node(0), "SELECT id FROM k.t").or_logs(&cluster, "read");
    check(&cluster, got == vec![vec!["1".to_string()]], || {
        format!("node1 sees {got:?}")
    });
}

#[test]
fn a_node_of_another_cluster_is_refused_and_gives_up() {
    let mut cluster = start("home", 1, "pc.wait_prim_timeout=PT5S");
    let added = cluster.add_node();
    let i = added.or_logs(&cluster, "add node");
    let spawned = cluster
        .node_mut(i)
        .spawn(&["--wsrep-cluster-name=intruder"]);
    spawned.or_logs(&cluster, "spawn the intruder");
    let deadline = Instant::now() + WAIT;
    while cluster.node(i).is_running() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    check(&cluster, !cluster.node(i).is_running(), || {
        "a node with another wsrep_cluster_name kept running".to_string()
    });
    let home = std::fs::read_to_string(cluster.node(0).error_log_path()).unwrap_or_default();
    check(&cluster, home.contains("cluster name mismatch"), || {
        "the cluster's node did not log the refused handshake".to_string()
    });
    let intruder = std::fs::read_to_string(cluster.node(i).error_log_path()).unwrap_or_default();
    check(
        &cluster,
        intruder.contains("could not join a primary component"),
        || "the refused node did not say why it stopped".to_string(),
    );
    let size = status(cluster.node(0), "wsrep_cluster_size").or_logs(&cluster, "size");
    check(&cluster, size == "1", || {
        format!("cluster size {size} after a refused join")
    });
}

/// `ER_UNKNOWN_COM_ERROR`: what MariaDB answers when wsrep is not ready
/// (a non-primary node), as with Galera.
const ER_UNKNOWN_COM_ERROR: u32 = 1047;

/// `sql` fails at once with 1047, not with a timeout or another error
/// (a hung node, or one that accepted the statement, fails this).
fn assert_refused_as_non_primary(cluster: &Cluster, node: &lockstep_testkit::Node, sql: &str) {
    let t0 = Instant::now();
    let result = node.sql(sql);
    let took = t0.elapsed();
    match result {
        Ok(_) => multi_node::fail(
            cluster,
            &format!("{}: a non-primary node accepted `{sql}`", node.name()),
        ),
        Err(e) => check(
            cluster,
            e.sql_code() == Some(ER_UNKNOWN_COM_ERROR) && took < Duration::from_secs(5),
            || {
                format!(
                    "{}: `{sql}` on a non-primary node failed after {took:?} with {e}; \
                     expected error {ER_UNKNOWN_COM_ERROR} at once",
                    node.name()
                )
            },
        ),
    }
}

/// Freezes a node's process (SIGSTOP) or thaws it (SIGCONT): to its
/// peers a frozen node is a network partition that can heal.
fn signal(cluster: &Cluster, i: usize, sig: nix::sys::signal::Signal) {
    let pid = cluster.node(i).pid().expect("running node");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig)
        .unwrap_or_else(|e| panic!("signal {sig} to node{}: {e}", i + 1));
}

#[test]
fn a_node_cut_off_from_the_majority_is_non_primary_and_re_merges() {
    use nix::sys::signal::Signal::{SIGCONT, SIGSTOP};
    let cluster = start("quorum", 2, "evs.suspect_timeout=PT3S");
    cluster
        .node(1)
        .sql("CREATE DATABASE q; CREATE TABLE q.t (id INT PRIMARY KEY)")
        .or_logs(&cluster, "create");
    // One of two: no majority. The survivor must refuse, not hang.
    signal(&cluster, 0, SIGSTOP);
    let survivor = cluster.node(1);
    let t0 = Instant::now();
    survivor
        .wait_for_status("wsrep_cluster_status", "non-Primary", WAIT)
        .or_logs(&cluster, "non-primary after losing the majority");
    eprintln!("non-primary after {:.1} s", t0.elapsed().as_secs_f64());
    let ready = status(survivor, "wsrep_ready").or_logs(&cluster, "ready");
    check(&cluster, ready == "OFF", || {
        format!("wsrep_ready = {ready} while non-primary")
    });
    assert_refused_as_non_primary(&cluster, survivor, "INSERT INTO q.t VALUES (1)");
    // The partition heals: both nodes are one primary component again,
    // with nothing lost and writes flowing.
    signal(&cluster, 0, SIGCONT);
    wait_for_size(&cluster, 2);
    survivor
        .wait_synced(WAIT)
        .or_logs(&cluster, "synced after re-merge");
    survivor
        .sql("INSERT INTO q.t VALUES (2)")
        .or_logs(&cluster, "write after re-merge");
    let got = causal_rows(cluster.node(0), "SELECT id FROM q.t").or_logs(&cluster, "read");
    check(&cluster, got == vec![vec!["2".to_string()]], || {
        format!("node1 sees {got:?}")
    });
}

#[test]
fn a_joiner_takes_its_state_from_the_donor_it_names() {
    let mut cluster = start("donor", 2, "");
    let count = |cluster: &Cluster, i: usize| {
        std::fs::read_to_string(cluster.node(i).error_log_path())
            .unwrap_or_default()
            .matches("donating state")
            .count()
    };
    // Without a preference the first synced member (node1) donated.
    let before = count(&cluster, 1);
    let added = cluster.add_node();
    let i = added.or_logs(&cluster, "add node");
    let started = cluster
        .node_mut(i)
        .start_with_args(&["--wsrep-sst-donor=node2"]);
    started.or_logs(&cluster, "join naming node2 as donor");
    check(&cluster, count(&cluster, 1) == before + 1, || {
        "node2 was named in wsrep_sst_donor but did not donate".to_string()
    });
    wait_for_size(&cluster, 3);
}

#[test]
fn a_joiner_gets_its_state_by_mariabackup() {
    let mut cluster = Cluster::builder(1)
        .provider(Provider::lockstep_default())
        .cluster_name("backup")
        .sst_method("mariabackup")
        .start()
        .unwrap_or_else(|e| panic!("starting a Lockstep node: {e}"));
    cluster
        .node(0)
        .sql("CREATE DATABASE b; CREATE TABLE b.t (id INT PRIMARY KEY); INSERT INTO b.t VALUES (1), (2)")
        .or_logs(&cluster, "data before the join");
    let added = cluster.add_node();
    let i = added.or_logs(&cluster, "add node");
    let started = cluster.node_mut(i).start();
    started.or_logs(&cluster, "join by mariabackup SST");
    wait_for_size(&cluster, 2);
    let log = std::fs::read_to_string(cluster.node(i).error_log_path()).unwrap_or_default();
    check(&cluster, log.contains("wsrep_sst_mariabackup"), || {
        "the joiner did not use the mariabackup SST script".to_string()
    });
    let got =
        causal_rows(cluster.node(i), "SELECT id FROM b.t ORDER BY id").or_logs(&cluster, "read");
    check(
        &cluster,
        got == vec![vec!["1".to_string()], vec!["2".to_string()]],
        || format!("the joiner has {got:?} after the transfer"),
    );
}

#[test]
fn a_joiner_after_log_compaction_starts_from_a_snapshot() {
    // A small gcache.size bounds the in-memory log: it is compacted while
    // the load runs, so the joiner cannot replay it from the start.
    let mut cluster = start("compact", 2, "gcache.size=256K");
    let load = |secs| {
        lockstep_testkit::Sysbench::script("oltp_update_index")
            .tables(1)
            .table_size(1000)
            .threads(4)
            .time(Duration::from_secs(secs))
            .ignore_errors("1213")
    };
    let bench = load(10);
    bench.prepare(cluster.node(0)).or_logs(&cluster, "prepare");
    let both: Vec<&lockstep_testkit::Node> = cluster.nodes().iter().collect();
    let report = bench.run(&both).or_logs(&cluster, "load");
    eprintln!("{} transactions before the join", report.transactions);
    let added = cluster.add_node();
    let i = added.or_logs(&cluster, "add node");
    let started = cluster.node_mut(i).start();
    started.or_logs(&cluster, "join after compaction");
    wait_for_size(&cluster, 3);
    let log = std::fs::read_to_string(cluster.node(i).error_log_path()).unwrap_or_default();
    check(
        &cluster,
        log.contains("starting from a snapshot of the group state"),
        || "the joiner replayed the whole log: nothing was compacted".to_string(),
    );
    // It certifies and applies like the others from there on.
    let after = load(5);
    let all: Vec<&lockstep_testkit::Node> = cluster.nodes().iter().collect();
    after.run(&all).or_logs(&cluster, "load with the joiner");
    cluster
        .wait_for_equal_last_committed(WAIT)
        .or_logs(&cluster, "all nodes apply everything");
    let tables = bench.table_names();
    let tables: Vec<&str> = tables.iter().map(String::as_str).collect();
    let sums = cluster.checksums(&tables).or_logs(&cluster, "checksums");
    check(&cluster, sums.is_consistent(), || {
        format!("diverged:\n{sums}")
    });
}

#[test]
fn an_isolated_node_of_three_is_non_primary_while_the_two_others_stay_primary() {
    let cluster = start("quorum3", 3, "evs.suspect_timeout=PT3S");
    cluster
        .node(0)
        .sql("CREATE DATABASE q3; CREATE TABLE q3.t (id INT PRIMARY KEY)")
        .or_logs(&cluster, "create");
    cluster
        .wait_for_equal_last_committed(WAIT)
        .or_logs(&cluster, "table on every node");
    // Cut node3 off from both others, as a network partition would.
    let minority = cluster.node(2);
    minority
        .sql("SET GLOBAL wsrep_provider_options = 'gmcast.isolate=1'")
        .or_logs(&cluster, "isolate node3");
    minority
        .wait_for_status("wsrep_cluster_status", "non-Primary", WAIT)
        .or_logs(&cluster, "node3 non-primary");
    let ready = status(minority, "wsrep_ready").or_logs(&cluster, "ready");
    check(&cluster, ready == "OFF", || {
        format!("node3: wsrep_ready = {ready} while non-primary")
    });
    assert_refused_as_non_primary(&cluster, minority, "INSERT INTO q3.t VALUES (3)");
    assert_refused_as_non_primary(&cluster, minority, "SELECT * FROM q3.t");
    // The majority: Primary, two members, and writes go on.
    for i in [0, 1] {
        let node = cluster.node(i);
        node.wait_for_status("wsrep_cluster_size", "2", WAIT)
            .or_logs(&cluster, "majority shrinks to 2");
        let st = status(node, "wsrep_cluster_status").or_logs(&cluster, "status");
        check(&cluster, st == "Primary", || {
            format!(
                "{}: wsrep_cluster_status = {st} in the majority",
                node.name()
            )
        });
        node.sql(&format!("INSERT INTO q3.t VALUES ({})", i + 1))
            .or_logs(&cluster, "write in the majority");
    }
    let got = causal_rows(cluster.node(1), "SELECT id FROM q3.t ORDER BY id")
        .or_logs(&cluster, "read in the majority");
    check(
        &cluster,
        got == vec![vec!["1".to_string()], vec!["2".to_string()]],
        || format!("the majority has {got:?}"),
    );
}

/// The donor's SST script of a joiner that uses method `slowrsync`: it
/// waits `DELAY` seconds, then runs MariaDB's rsync script.
const SLOW_SST_DELAY: u64 = 25;

/// Adds a node that takes its SST from node2 by `slowrsync`
/// (`install_slow_sst_method`), and waits until node2 donates; returns its
/// index.
fn add_joiner_in_a_slow_sst(cluster: &mut Cluster) -> usize {
    let i = cluster.add_node().or_logs(cluster, "add node");
    cluster
        .node_mut(i)
        .spawn(&["--wsrep-sst-method=slowrsync", "--wsrep-sst-donor=node2"])
        .or_logs(cluster, "start the joiner");
    cluster
        .node(1)
        .wait_for_status("wsrep_local_state_comment", "Donor/Desynced", WAIT)
        .or_logs(cluster, "node2 donates");
    i
}

fn install_slow_sst_method(cluster: &Cluster) {
    use std::os::unix::fs::PermissionsExt;
    let bin = cluster.base_dir().join("bin");
    let script = bin.join("wsrep_sst_slowrsync");
    let body = format!(
        "#!/bin/sh\n\
         # The donor side waits, so the joiner waits for its state.\n\
         case \"$*\" in *'--role donor'*) sleep {SLOW_SST_DELAY};; esac\n\
         exec wsrep_sst_rsync \"$@\"\n"
    );
    let mode = std::fs::Permissions::from_mode(0o755);
    let made = std::fs::create_dir_all(&bin)
        .and_then(|()| std::fs::write(&script, body))
        .and_then(|()| std::fs::set_permissions(&bin, mode.clone()))
        .and_then(|()| std::fs::set_permissions(&script, mode));
    if let Err(e) = made {
        multi_node::fail(cluster, &format!("installing {}: {e}", script.display()));
    }
}

/// While a joiner waits for a long SST, the others write about 100 MB.
/// Nothing grows with the length of the wait: the joiner's receive queue
/// keeps 64 MiB in memory and the rest waits on disk, every node's
/// certification index is purged (the joiner is left out of the commit
/// cut) and their group logs are compacted (the joiner reports what it
/// has applied). Then the joiner catches up with every row.
/// A joiner killed (SIGKILL) while its receive queue waits on disk for
/// its SST comes back like any crashed joiner: the spool it left is
/// truncated when it connects again, it takes a new state transfer, and
/// ends with every row the cluster wrote before and after the crash.
#[test]
fn a_joiner_killed_with_its_queue_on_disk_rejoins_with_every_row() {
    let mut cluster = start("spoolkill", 2, "gcache.size=32M");
    install_slow_sst_method(&cluster);
    cluster
        .node(0)
        .sql("CREATE DATABASE sk; CREATE TABLE sk.t (id INT PRIMARY KEY, b LONGBLOB) ENGINE=InnoDB")
        .or_logs(&cluster, "create sk.t");
    let i = add_joiner_in_a_slow_sst(&mut cluster);
    let write = |cluster: &Cluster, from: usize, to: usize| {
        for k in from..to {
            let sql = format!("INSERT INTO sk.t VALUES ({k}, REPEAT(CHAR(65 + {k} % 26), 262144))");
            cluster.node(0).sql(&sql).or_logs(cluster, "write");
        }
    };
    write(&cluster, 0, 400);
    let spool = cluster.node(i).datadir().join("lockstep_recv_spool.dat");
    let spilled = std::fs::metadata(&spool).map_or(0, |m| m.len());
    check(&cluster, spilled > 16 << 20, || {
        format!("the joiner spilled {spilled} bytes: nothing on disk to crash with")
    });
    cluster
        .node_mut(i)
        .kill()
        .or_logs(&cluster, "kill -9 the joiner");
    write(&cluster, 400, 420);
    cluster
        .node_mut(i)
        .spawn(&[])
        .or_logs(&cluster, "restart the joiner");
    cluster
        .node(i)
        .wait_synced(Duration::from_secs(180))
        .or_logs(&cluster, "the joiner rejoins");
    write(&cluster, 420, 430);
    let sql = "SELECT COUNT(*), SUM(LENGTH(b)), SUM(CRC32(b)) FROM sk.t";
    let want = causal_rows(cluster.node(0), sql).or_logs(&cluster, "node1 rows");
    check(&cluster, want[0][0] == "430", || {
        format!("{want:?}: rows are missing on node1")
    });
    for n in 1..cluster.len() {
        let got = causal_rows(cluster.node(n), sql).or_logs(&cluster, "rows");
        check(&cluster, got == want, || {
            format!("node{} has {got:?}, node1 {want:?}", n + 1)
        });
    }
    let left = std::fs::metadata(&spool).map_or(0, |m| m.len());
    check(&cluster, left < spilled, || {
        format!("the spool still holds {left} bytes after the rejoin ({spilled} before the crash)")
    });
}

#[test]
fn a_long_state_transfer_keeps_every_queue_bounded() {
    let mut cluster = start("longsst", 2, "gcache.size=32M");
    install_slow_sst_method(&cluster);
    cluster
        .node(0)
        .sql("CREATE DATABASE ls; CREATE TABLE ls.t (id INT PRIMARY KEY, b LONGBLOB) ENGINE=InnoDB")
        .or_logs(&cluster, "create ls.t");
    let log_from = |cluster: &Cluster| {
        multi_node::status_u64(cluster.node(0), "wsrep_lockstep_group_log_from").unwrap_or(0)
    };
    let compacted_before = log_from(&cluster);
    let i = add_joiner_in_a_slow_sst(&mut cluster);
    let t0 = Instant::now();
    let rows = 400;
    for k in 0..rows {
        let sql = format!("INSERT INTO ls.t VALUES ({k}, REPEAT(CHAR(65 + {k} % 26), 262144))");
        cluster
            .node(0)
            .sql(&sql)
            .or_logs(&cluster, "write during the SST");
    }
    // Still inside the transfer, or the test proves nothing.
    let joiner = cluster.node(i);
    let state = status(joiner, "wsrep_local_state_comment").unwrap_or_default();
    check(
        &cluster,
        t0.elapsed() < Duration::from_secs(SLOW_SST_DELAY - 5) && state != "Synced",
        || {
            format!(
                "the writes outlasted the SST ({:?}, joiner {state})",
                t0.elapsed()
            )
        },
    );
    // A joiner's server answers no queries before its SST: look at the
    // spool itself.
    let spool = joiner.datadir().join("lockstep_recv_spool.dat");
    let spilled = std::fs::metadata(&spool).map_or(0, |m| m.len());
    check(&cluster, spilled > 16 << 20, || {
        format!("the joiner queued 100 MB during its SST and spilled {spilled} bytes of it")
    });
    for n in [0, 1] {
        let index = multi_node::status_u64(cluster.node(n), "wsrep_cert_index_size")
            .or_logs(&cluster, "cert index size");
        check(&cluster, index < rows, || {
            format!(
                "node{}: {index} keys in the certification index after {rows} writes: the \
                 joiner held the purge back",
                n + 1
            )
        });
    }
    let compacted = log_from(&cluster);
    eprintln!("node1's group log starts at seqno {compacted_before}, then {compacted}");
    check(&cluster, compacted > compacted_before, || {
        format!(
            "node1's group log still starts at seqno {compacted} (before: \
             {compacted_before}): the joiner held its compaction back"
        )
    });
    cluster
        .node(i)
        .wait_synced(Duration::from_secs(180))
        .or_logs(&cluster, "the joiner catches up");
    let sql = "SELECT COUNT(*), SUM(LENGTH(b)), SUM(CRC32(b)) FROM ls.t";
    let want = causal_rows(cluster.node(0), sql).or_logs(&cluster, "node1 rows");
    for n in 1..cluster.len() {
        let got = causal_rows(cluster.node(n), sql).or_logs(&cluster, "rows");
        check(&cluster, got == want, || {
            format!("node{} has {got:?}, node1 {want:?}", n + 1)
        });
    }
    check(&cluster, want[0][0] == rows.to_string(), || {
        format!("{want:?}: rows are missing")
    });
    let log = std::fs::read_to_string(cluster.node(i).error_log_path()).unwrap_or_default();
    check(&cluster, log.contains("the next ones wait in"), || {
        "the joiner never said that its queue spilled to disk".to_string()
    });
}
