//! Causal reads (`wsrep_sync_wait`) on three real mariadbd nodes (issue 14,
//! ADR 0016, 0022). A leader answers them from its lease, a follower from
//! the lease its members granted (asking the leader until it holds one);
//! whichever node writes and whichever reads, a causal read sees every
//! commit acknowledged before it began.
//!
//! The provider is ours unless `LOCKSTEP_TEST_PROVIDER=galera` selects
//! Galera 4, against which this test was also run.

#[path = "support/multi_node.rs"]
mod multi_node;

use lockstep_testkit::{Cluster, Provider};
use multi_node::{check, status, status_u64, OrLogs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(120);

/// Rounds per (writer, reader) pair.
const ROUNDS: usize = 40;
/// Causal reads a node answered from its own lease (Lockstep only).
const LEASE_READS: &str = "wsrep_lockstep_causal_lease_reads";

#[test]
fn a_causal_read_on_any_node_sees_every_commit_acknowledged_before_it() {
    let p = Provider::from_env();
    let ours = matches!(p, Provider::Lockstep(_));
    let label = p.label();
    let c = Cluster::builder(3)
        .provider(p)
        .cluster_name("causal_reads")
        .start()
        .unwrap_or_else(|e| panic!("starting 3 nodes with {label}: {e}"));
    c.node(0)
        .sql(
            "CREATE DATABASE cr; CREATE TABLE cr.t (id INT PRIMARY KEY, v INT); \
             INSERT INTO cr.t VALUES (1, -1)",
        )
        .or_logs(&c, "creating the table");
    let mut writers: Vec<_> = c
        .nodes()
        .iter()
        .map(|n| n.session().or_logs(&c, "a writer's session"))
        .collect();
    let mut readers: Vec<_> = c
        .nodes()
        .iter()
        .map(|n| {
            let mut s = n.session().or_logs(&c, "a reader's session");
            s.sql("SET SESSION wsrep_sync_wait = 1")
                .or_logs(&c, "wsrep_sync_wait");
            s
        })
        .collect();
    let before: Vec<u64> = c
        .nodes()
        .iter()
        .map(|n| status_u64(n, "wsrep_causal_reads").or_logs(&c, "wsrep_causal_reads"))
        .collect();
    let lease_reads = |n| status_u64(n, LEASE_READS).or_logs(&c, LEASE_READS);
    let leased_before: Vec<u64> = match ours {
        true => c.nodes().iter().map(lease_reads).collect(),
        false => Vec::new(),
    };

    let mut value = 0;
    for (a, writer) in writers.iter_mut().enumerate() {
        for b in (0..3).filter(|b| *b != a) {
            for _ in 0..ROUNDS {
                value += 1;
                writer
                    .sql(&format!("UPDATE cr.t SET v = {value} WHERE id = 1"))
                    .or_logs(&c, "the write");
                // The UPDATE returned: it is acknowledged. The very next
                // causal read, on another node, must see it.
                let seen = readers[b]
                    .sql("SELECT v FROM cr.t WHERE id = 1")
                    .or_logs(&c, "the causal read");
                check(&c, seen == value.to_string(), || {
                    format!(
                        "stale causal read: node{} wrote {value}, node{} then read {seen}",
                        a + 1,
                        b + 1
                    )
                });
            }
        }
    }
    // Each reader's reads went through the provider's causal-read path.
    for (i, n) in c.nodes().iter().enumerate() {
        let after = status_u64(n, "wsrep_causal_reads").or_logs(&c, "wsrep_causal_reads");
        check(&c, after >= before[i] + 2 * ROUNDS as u64, || {
            format!(
                "{}: wsrep_causal_reads went from {} to {after}, expected {} more",
                n.name(),
                before[i],
                2 * ROUNDS
            )
        });
    }
    // Every node, followers included, answered most of them from its own
    // lease, without a message (the first reads of a follower ask the
    // leader while its grants come).
    for (i, n) in c.nodes().iter().enumerate().filter(|_| ours) {
        let leased = lease_reads(n) - leased_before[i];
        eprintln!("{}: {leased} causal reads from its lease", n.name());
        check(&c, leased >= ROUNDS as u64 / 2, || {
            format!(
                "{}: {leased} of {} causal reads answered from its lease",
                n.name(),
                2 * ROUNDS
            )
        });
    }
    eprintln!("{label}: {} causal reads, none stale", 6 * ROUNDS);
}

/// A follower reading causally holds the others' commits until it has
/// stored them (ADR 0022). Killed, it must hold them for at most an
/// obligation (half a second), although it stays a member until
/// `evs.suspect_timeout` (10 s here) has passed; and no acknowledged
/// write is lost. (Lockstep only: the gate is ours.)
#[test]
fn a_causal_reader_killed_under_load_holds_the_others_writes_for_at_most_an_obligation() {
    let p = Provider::from_env();
    if !matches!(p, Provider::Lockstep(_)) {
        return;
    }
    let mut c = Cluster::builder(3)
        .provider(p)
        .cluster_name("causal_kill")
        .provider_options("evs.suspect_timeout=PT10S;")
        .start()
        .unwrap_or_else(|e| panic!("starting 3 nodes: {e}"));
    let load = multi_node::acked_load(&c, 100, WAIT);
    let leader = status(c.node(0), "wsrep_lockstep_leader").or_logs(&c, "leader");
    let Some(r) = (0..3).find(|&i| c.node(i).name() != leader) else {
        multi_node::fail(&c, &format!("every node is the leader {leader:?}"));
    };
    let reader_name = c.node(r).name().to_string();
    let mut session = c.node(r).session().or_logs(&c, "the reader's session");
    session
        .sql("SET SESSION wsrep_sync_wait = 1")
        .or_logs(&c, "wsrep_sync_wait");
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            // Ends with an error once the node is killed.
            while !stop.load(Ordering::Relaxed) {
                if session.sql("SELECT COUNT(*) FROM r.acked").is_err() {
                    break;
                }
            }
        })
    };
    // The reader holds its lease: the others owe it.
    let t0 = Instant::now();
    while status_u64(c.node(r), LEASE_READS).or_logs(&c, LEASE_READS) < 100 {
        check(&c, t0.elapsed() < WAIT, || {
            format!("{reader_name} answered no causal read from its lease")
        });
        std::thread::sleep(Duration::from_millis(50));
    }
    load.wait_for_progress(100, WAIT)
        .or_logs(&c, "writes while the follower reads");
    let r_kill = c.node_mut(r).kill();
    r_kill.or_logs(&c, &format!("kill -9 {reader_name}"));
    let killed = Instant::now();
    load.wait_for_progress(200, WAIT)
        .or_logs(&c, "writes after the reader was killed");
    let resumed = killed.elapsed();
    stop.store(true, Ordering::Relaxed);
    let _ = reader.join();
    let stopped = load.stop();
    // The slowest insert acknowledged by a node that kept running.
    let slowest = stopped
        .1
        .iter()
        .filter(|w| w.node != reader_name)
        .map(|w| w.slowest)
        .max()
        .unwrap_or_default();
    eprintln!(
        "{reader_name} (a causal reader) killed: 200 more inserts in {:.2} s, slowest \
         acknowledged insert on the others {:.2} s",
        resumed.as_secs_f64(),
        slowest.as_secs_f64()
    );
    check(&c, slowest < Duration::from_secs(3), || {
        format!(
            "an insert took {:.1} s after the causal reader died: the others waited for it",
            slowest.as_secs_f64()
        )
    });
    multi_node::restart_recovered(&mut c, r, "3", WAIT);
    c.wait_for_equal_last_committed(WAIT)
        .or_logs(&c, "caught up");
    multi_node::verify_acked_rows(&c, &stopped, 200, "the reader's kill");
    c.stop_all().or_logs(&c, "stop");
}
