//! How long a node takes to come back, on a real data set (issue 11):
//! a killed node restarted the systemd way (IST), the same node restarted
//! with its state discarded (full SST), and a node cut off for 60 s
//! (`gmcast.isolate`) from the moment the cut heals to Synced. A command,
//! not a test: `make rejoin-bench [REJOIN_ARGS="--size-mb 1024"]`, and
//! `REJOIN_ARGS="--galera 1"` for the same steps on Galera.
//!
//! The data set is sysbench's `oltp` tables (about 230 bytes a row on
//! disk with its index), loaded on the first node before the two others
//! join by SST. A write load (one writer per node) runs throughout.

use std::time::{Duration, Instant};

use lockstep_testkit::{AckedLoad, Cluster, Provider, Sysbench};

const WAIT: Duration = Duration::from_secs(3600);

#[path = "../support/example_args.rs"]
mod example_args;
use example_args::arg;

fn die(what: &str, e: impl std::fmt::Display) -> ! {
    example_args::die("rejoin-bench", what, e)
}

fn datadir_mb(cluster: &Cluster, i: usize) -> u64 {
    fn walk(p: &std::path::Path) -> u64 {
        std::fs::read_dir(p).map_or(0, |d| {
            d.filter_map(Result::ok)
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => walk(&e.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                })
                .sum()
        })
    }
    walk(cluster.node(i).datadir()) >> 20
}

fn main() {
    let size_mb = arg("--size-mb", 1024);
    let cut_secs = arg("--cut-secs", 60);
    // ~230 bytes per row on disk; 8 tables.
    let rows = ((size_mb << 20) / 230 / 8).max(1000) as u32;
    // `--galera 1`: the same steps with Galera, the reference.
    let provider = if arg("--galera", 0) == 1 {
        Provider::Galera
    } else {
        Provider::lockstep_default()
    };
    let mut cluster = Cluster::builder(1)
        .provider(provider)
        .cluster_name("rejoin_bench")
        .provider_options("evs.suspect_timeout=PT5S; gcache.size=256M")
        .start_timeout(WAIT)
        .start()
        .unwrap_or_else(|e| die("start node1", e));
    let bench = Sysbench::oltp_read_write()
        .database("sbtest")
        .tables(8)
        .table_size(rows);
    let t0 = Instant::now();
    bench
        .prepare(cluster.node(0))
        .unwrap_or_else(|e| die("sysbench prepare", e));
    println!(
        "data set: 8 tables x {rows} rows, {} MB datadir, loaded in {:.0} s",
        datadir_mb(&cluster, 0),
        t0.elapsed().as_secs_f64()
    );
    for _ in 0..2 {
        let i = cluster.add_node().unwrap_or_else(|e| die("add a node", e));
        let t = Instant::now();
        cluster
            .node_mut(i)
            .start()
            .unwrap_or_else(|e| die("join by SST", e));
        println!(
            "node{} joined by SST in {:.1} s",
            i + 1,
            t.elapsed().as_secs_f64()
        );
    }
    cluster
        .node(0)
        .sql("CREATE DATABASE IF NOT EXISTS r")
        .unwrap_or_else(|e| die("create", e));
    let load = AckedLoad::start(&cluster, "r.acked").unwrap_or_else(|e| die("load", e));
    let progress = |cluster: &Cluster, n| {
        if let Err(e) = load.wait_for_progress(n, Duration::from_secs(120)) {
            eprintln!("{}", cluster.log_tails(60));
            die("load progress", e)
        }
    };
    progress(&cluster, 200);

    // 1. kill -9, writes meanwhile, restart the systemd way: IST.
    cluster
        .node_mut(2)
        .kill()
        .unwrap_or_else(|e| die("kill", e));
    progress(&cluster, 500);
    let t = Instant::now();
    cluster
        .node_mut(2)
        .start_recovered()
        .unwrap_or_else(|e| die("restart by IST", e));
    let ist = t.elapsed();
    println!("killed node back by IST in {:.1} s", ist.as_secs_f64());

    // 2. The same, with the node's state discarded: full SST.
    progress(&cluster, 200);
    cluster
        .node_mut(2)
        .kill()
        .unwrap_or_else(|e| die("kill", e));
    for f in ["grastate.dat", "gvwstate.dat"] {
        let _ = std::fs::remove_file(cluster.node(2).datadir().join(f));
    }
    progress(&cluster, 500);
    let t = Instant::now();
    cluster
        .node_mut(2)
        .start()
        .unwrap_or_else(|e| die("restart by SST", e));
    let sst = t.elapsed();
    println!("killed node back by SST in {:.1} s", sst.as_secs_f64());

    // 3. Cut off for a while, then healed: rejoin by itself.
    progress(&cluster, 200);
    let n3 = cluster.node(2);
    n3.sql("SET GLOBAL wsrep_provider_options='gmcast.isolate=1'")
        .unwrap_or_else(|e| die("isolate", e));
    std::thread::sleep(Duration::from_secs(cut_secs));
    let t = Instant::now();
    n3.sql("SET GLOBAL wsrep_provider_options='gmcast.isolate=0'")
        .unwrap_or_else(|e| die("heal", e));
    n3.wait_synced(WAIT).unwrap_or_else(|e| die("rejoin", e));
    let heal = t.elapsed();
    println!(
        "node cut off for {cut_secs} s: Synced {:.1} s after the cut healed",
        heal.as_secs_f64()
    );
    progress(&cluster, 200);
    let (table, reports) = load.stop();
    let checked = cluster
        .verify_acked(&table, &reports)
        .unwrap_or_else(|e| die("verify", e));
    println!("{checked} acknowledged rows on every node; nodes identical");
    println!(
        "summary: size {} MB, IST {:.1} s, SST {:.1} s ({:.0}x), heal after {cut_secs} s cut {:.1} s",
        datadir_mb(&cluster, 0),
        ist.as_secs_f64(),
        sst.as_secs_f64(),
        sst.as_secs_f64() / ist.as_secs_f64().max(0.001),
        heal.as_secs_f64()
    );
}
