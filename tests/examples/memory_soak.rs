//! Memory under a long mixed load with one node slowed (issue 12): a
//! command, not a test. `make soak [SOAK_ARGS="--minutes 10"]`, and
//! `SOAK_ARGS="--galera 1"` for the same run on Galera.
//!
//! Three nodes; sysbench `oltp_read_write` with 8 threads on nodes 1 and
//! 3; node 2 is held to about 15 % of the time (SIGSTOP for 85 ms, SIGCONT
//! for 15 ms, over and over), so its appliers fall behind. Every 10 s the
//! resident memory of each mariadbd, node 2's receive queue and the share
//! of time flow control paused the writers are printed; at the end, the
//! growth of each node's memory over the second half of the run (flat
//! means bounded), the throughput, and CHECKSUM TABLE on every node.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lockstep_testkit::{Cluster, Provider, Sysbench};

const WAIT: Duration = Duration::from_secs(600);

#[path = "../support/example_args.rs"]
mod example_args;
use example_args::arg;

fn die(what: &str, e: impl std::fmt::Display) -> ! {
    example_args::die("soak", what, e)
}

/// Resident memory of a process, in MiB (`VmRSS` of /proc).
fn rss_mib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024)
}

fn signal(pid: u32, sig: &str) {
    let _ = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status();
}

fn main() {
    let minutes = arg("--minutes", 10).max(1);
    let provider = if arg("--galera", 0) == 1 {
        Provider::Galera
    } else {
        Provider::lockstep_default()
    };
    let cluster = Cluster::builder(3)
        .provider(provider)
        .cluster_name("soak")
        .slave_threads(4)
        .start_timeout(WAIT)
        .start()
        .unwrap_or_else(|e| die("start", e));
    let load = Sysbench::oltp_read_write()
        .database("sbtest")
        .tables(4)
        .table_size(10_000)
        .threads(8)
        .ignore_errors("1213,1205,1020,1180")
        .time(Duration::from_secs(minutes * 60));
    load.prepare(cluster.node(0))
        .unwrap_or_else(|e| die("sysbench prepare", e));
    cluster
        .wait_for_equal_last_committed(WAIT)
        .unwrap_or_else(|e| die("prepare replicated", e));
    let pids: Vec<u32> = cluster
        .nodes()
        .iter()
        .map(|n| {
            n.pid()
                .unwrap_or_else(|| die("pid", "a node has no process"))
        })
        .collect();

    // Node 2 runs about 15 % of the time.
    let stop = Arc::new(AtomicBool::new(false));
    let slow = {
        let (stop, pid) = (stop.clone(), pids[1]);
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                signal(pid, "-STOP");
                std::thread::sleep(Duration::from_millis(85));
                signal(pid, "-CONT");
                std::thread::sleep(Duration::from_millis(15));
            }
            signal(pid, "-CONT");
        })
    };
    let run = load
        .spawn(&[cluster.node(0), cluster.node(2)])
        .unwrap_or_else(|e| die("sysbench", e));
    println!("second  rss1 MiB  rss2 MiB  rss3 MiB  node2 recv queue  fc paused (node1)");
    let t0 = Instant::now();
    let mut samples: Vec<(u64, [u64; 3])> = Vec::new();
    while t0.elapsed() < Duration::from_secs(minutes * 60) {
        std::thread::sleep(Duration::from_secs(10));
        let rss = [0, 1, 2].map(|i| rss_mib(pids[i]).unwrap_or(0));
        // A status value, or `?` when the node does not answer (node 2
        // answers only while it runs, so a query may take a while).
        let status = |i: usize, name: &str| {
            cluster
                .node(i)
                .status(name)
                .ok()
                .flatten()
                .unwrap_or_else(|| "?".into())
        };
        let queue = status(1, "wsrep_local_recv_queue");
        let paused = status(0, "wsrep_flow_control_paused");
        let s = t0.elapsed().as_secs();
        println!(
            "{s:>6}  {:>8}  {:>8}  {:>8}  {queue:>16}  {paused:>17}",
            rss[0], rss[1], rss[2]
        );
        samples.push((s, rss));
    }
    stop.store(true, Ordering::SeqCst);
    let _ = slow.join();
    let report = run.wait().unwrap_or_else(|e| die("sysbench run", e));
    cluster
        .wait_for_equal_last_committed(WAIT)
        .unwrap_or_else(|e| die("catch up", e));
    let tables = load.table_names();
    let tables: Vec<&str> = tables.iter().map(String::as_str).collect();
    let sums = cluster
        .checksums(&tables)
        .unwrap_or_else(|e| die("checksums", e));
    let half = samples.len() / 2;
    for i in 0..3 {
        let (a, b) = (samples[half].1[i], samples[samples.len() - 1].1[i]);
        println!(
            "node{}: {a} MiB at {} s, {b} MiB at {} s: {:+} MiB over the second half",
            i + 1,
            samples[half].0,
            samples[samples.len() - 1].0,
            b as i64 - a as i64
        );
    }
    println!(
        "{:.0} tps over {minutes} min; nodes {}",
        report.tps,
        if sums.is_consistent() {
            "identical"
        } else {
            "DIFFERENT"
        }
    );
    if !sums.is_consistent() {
        std::process::exit(1);
    }
}
