//! A joiner's catch-up after its SST, under write load, Lockstep beside
//! Galera (issue 53 item 6). Galera's joiner receives the writes made
//! during the SST by IST from a member's gcache; Lockstep's replays them
//! from the group log. The IPv6/mariabackup difference of
//! docs/compat/suites.md is accepted on condition that this catch-up is no
//! slower than Galera's. A command, not a test: `make catch-up-bench
//! [CATCH_UP_ARGS="--size-mb 512 --threads 8 --pairs 2"]`.
//!
//! Each run starts a fresh cluster of two (node1, node2), loads sysbench's
//! tables on node1, and starts `oltp_write_only` on node2. Then node3
//! joins with an empty datadir, node1 its donor (rsync SST, which holds
//! node1 under FLUSH TABLES WITH READ LOCK while it copies: node2 goes on
//! writing). Every 100 ms the joiner is asked for `wsrep_last_committed`
//! and its state:
//! - **SST**: from the start of `mariadbd` to its first answer (the copy,
//!   the storage engine's start);
//! - **backlog**: node2's position minus the joiner's at that answer;
//! - **catch-up**: from that answer to `Synced`, and the writesets the
//!   joiner applied meanwhile (its rate).
//!
//! The runs alternate in pairs (Lockstep, Galera, Galera, Lockstep, ...)
//! so that a drift of the machine falls on both alike. After each run the
//! load stops and the three nodes must end identical.

use std::time::{Duration, Instant};

use lockstep_testkit::{Cluster, Node, Provider, Sysbench};

#[path = "../support/example_args.rs"]
mod example_args;
use example_args::arg;

const WAIT: Duration = Duration::from_secs(1800);
/// How often the joiner is asked where it is.
const PROBE_EVERY: Duration = Duration::from_millis(100);
/// Writes before the joiner starts, so the load is at its pace.
const WARM_UP: Duration = Duration::from_secs(5);

fn die(what: &str, e: impl std::fmt::Display) -> ! {
    example_args::die("catch-up-bench", what, e)
}

/// The joiner's position and state, or `None` while it does not answer.
fn probe(node: &Node) -> Option<(i64, String)> {
    let rows = node
        .query_rows(
            "SHOW GLOBAL STATUS WHERE Variable_name IN \
             ('wsrep_last_committed', 'wsrep_local_state_comment')",
        )
        .ok()?;
    let value = |name: &str| {
        rows.iter()
            .find(|r| r.first().is_some_and(|n| n.eq_ignore_ascii_case(name)))
            .and_then(|r| r.get(1).cloned())
    };
    let seqno = value("wsrep_last_committed")?.parse().ok()?;
    Some((seqno, value("wsrep_local_state_comment")?))
}

struct Run {
    provider: &'static str,
    sst: Duration,
    /// node2's position minus the joiner's at its first answer.
    backlog: i64,
    catch_up: Duration,
    /// Writesets the joiner committed between its first answer and Synced.
    applied: i64,
    /// The cluster's commits per second while the joiner joined.
    cluster_rate: f64,
}

impl Run {
    fn rate(&self) -> f64 {
        self.applied as f64 / self.catch_up.as_secs_f64().max(0.001)
    }
}

fn one_run(provider: Provider, label: &'static str, rows: u32, threads: u32) -> Run {
    let mut cluster = Cluster::builder(2)
        .provider(provider)
        .cluster_name("catch_up_bench")
        .extra_mysqld("wsrep_sst_donor=node1")
        .provider_options("gcache.size=1G")
        .start_timeout(WAIT)
        .start()
        .unwrap_or_else(|e| die("start node1 and node2", e));
    let tables = Sysbench::script("oltp_write_only")
        .database("sbtest")
        .tables(4)
        .table_size(rows);
    tables
        .prepare(cluster.node(0))
        .unwrap_or_else(|e| die("sysbench prepare", e));
    cluster
        .wait_for_equal_last_committed(WAIT)
        .unwrap_or_else(|e| die("node2 catches up with the load", e));
    let load = tables
        .clone()
        .threads(threads)
        .time(WAIT)
        .ignore_errors("1213,1205,1180,2013")
        .spawn(&[cluster.node(1)])
        .unwrap_or_else(|e| die("start the write load", e));
    std::thread::sleep(WARM_UP);
    let i = cluster.add_node().unwrap_or_else(|e| die("add node3", e));
    let at_start = cluster.node(1).last_committed().unwrap_or(0);
    let t0 = Instant::now();
    cluster
        .node_mut(i)
        .spawn(&[])
        .unwrap_or_else(|e| die("start node3", e));
    let mut first: Option<(Instant, i64, i64)> = None;
    let (synced_at, synced_seqno) = loop {
        let joiner = cluster.node(i);
        if !joiner.is_running() {
            eprintln!("{}", cluster.log_tails(40));
            die("node3", "mariadbd exited while joining");
        }
        if t0.elapsed() > WAIT {
            eprintln!("{}", cluster.log_tails(40));
            die("node3", "not Synced in time");
        }
        if let Some((seqno, state)) = probe(joiner) {
            let now = Instant::now();
            if first.is_none() {
                let writer = cluster.node(1).last_committed().unwrap_or(seqno);
                first = Some((now, seqno, writer));
            }
            if state == "Synced" {
                break (now, seqno);
            }
        }
        std::thread::sleep(PROBE_EVERY);
    };
    let at_end = cluster.node(1).last_committed().unwrap_or(at_start);
    drop(load); // kills sysbench
    let (answered, first_seqno, writer_seqno) = first.expect("answered at Synced at the latest");
    let run = Run {
        provider: label,
        sst: answered - t0,
        backlog: writer_seqno - first_seqno,
        catch_up: synced_at - answered,
        applied: synced_seqno - first_seqno,
        cluster_rate: (at_end - at_start) as f64 / (synced_at - t0).as_secs_f64().max(0.001),
    };
    cluster
        .wait_for_equal_last_committed(WAIT)
        .unwrap_or_else(|e| die("equal positions after the load", e));
    let names = tables.table_names();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let sums = cluster
        .checksums(&names)
        .unwrap_or_else(|e| die("checksums", e));
    if !sums.is_consistent() {
        die("the nodes differ after the join", sums);
    }
    run
}

fn main() {
    let size_mb = arg("--size-mb", 512);
    let threads = arg("--threads", 8) as u32;
    let pairs = arg("--pairs", 2);
    // ~230 bytes per row on disk; 4 tables.
    let rows = ((size_mb << 20) / 230 / 4).max(1000) as u32;
    println!(
        "catch-up-bench: 4 tables x {rows} rows (~{size_mb} MB), oltp_write_only x {threads} \
         on node2 while node3 joins by rsync SST from node1; {pairs} pair(s)"
    );
    println!(
        "{:<9} {:>7} {:>9} {:>11} {:>9} {:>12} {:>14}",
        "provider", "SST s", "backlog", "catch-up s", "applied", "applied/s", "cluster trx/s"
    );
    let mut runs = Vec::new();
    for pair in 0..pairs {
        let order = if pair % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for lockstep in order {
            let run = if lockstep {
                one_run(Provider::lockstep_default(), "lockstep", rows, threads)
            } else {
                one_run(Provider::Galera, "galera", rows, threads)
            };
            println!(
                "{:<9} {:>7.1} {:>9} {:>11.2} {:>9} {:>12.0} {:>14.0}",
                run.provider,
                run.sst.as_secs_f64(),
                run.backlog,
                run.catch_up.as_secs_f64(),
                run.applied,
                run.rate(),
                run.cluster_rate
            );
            runs.push(run);
        }
    }
    let median = |who: &str, f: &dyn Fn(&Run) -> f64| {
        let mut v: Vec<f64> = runs.iter().filter(|r| r.provider == who).map(f).collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    for (what, f) in [
        (
            "catch-up s",
            &(|r: &Run| r.catch_up.as_secs_f64()) as &dyn Fn(&Run) -> f64,
        ),
        ("applied/s", &|r: &Run| r.rate()),
        ("SST s", &|r: &Run| r.sst.as_secs_f64()),
    ] {
        let (l, g) = (median("lockstep", f), median("galera", f));
        println!(
            "summary: median {what}: lockstep {l:.2}, galera {g:.2} (ratio {:.2})",
            l / g
        );
    }
}
