//! Switching a running Galera cluster to Lockstep and back (issue 36): a
//! 3-node Galera 26.4 cluster with data, under a write load, is stopped
//! node by node; every node's `wsrep_provider` is changed and the cluster
//! is started again the documented way (README "Switching from Galera"):
//! the node with `safe_to_bootstrap: 1` with `--wsrep-new-cluster`, then
//! the others. It keeps its cluster UUID and seqno, no node takes a full
//! SST (the nodes that stopped behind catch up by IST from Galera's cache,
//! which Lockstep converts), every acknowledged insert is on every node,
//! and writes go on. Then the same back to Galera, with
//! `lockstep.leave_galera_cache=yes` set before the stops: Lockstep leaves
//! its cache in Galera's format and Galera's nodes behind catch up by IST.
//! Both with the rsync SST method and with mariabackup (issue 54): a
//! node that needed a full SST would take it by that method.

#[path = "support/multi_node.rs"]
mod multi_node;

use std::time::{Duration, Instant};

use lockstep_testkit::{AckedLoad, Cluster, Provider};
use multi_node::{check, edit_cnf, grastate, log_count, OrLogs};

const WAIT: Duration = Duration::from_secs(90);
const PROGRESS: u64 = 100;

/// What MariaDB's SST scripts log on a joiner after a full SST by `method`
/// (after IST, with the script in bypass mode, they say "<method> IST
/// completed"): the same words whichever provider runs.
fn full_sst(method: &str) -> String {
    format!("{method} SST completed on joiner")
}

fn provider_line(p: &Provider) -> String {
    format!("wsrep_provider={}", p.path().display())
}

/// What one switch measured.
struct Switch {
    /// From the last node stopped to the first write acknowledged again.
    no_writes: Duration,
    /// From the first node stopped to every node Synced again.
    total: Duration,
    /// The nodes that took a full SST.
    full_ssts: Vec<String>,
    /// Nodes that stopped at a lower seqno than the one bootstrapped.
    behind: usize,
}

/// Stops the nodes one by one under the load, switches every node's my.cnf
/// from `from` to `to`, and starts the cluster again: the node whose
/// grastate.dat says `safe_to_bootstrap: 1` first, with
/// `--wsrep-new-cluster`, then the others. Checks what the issue asks.
fn switch(
    cluster: &mut Cluster,
    load: &AckedLoad,
    from: &Provider,
    to: &Provider,
    before_stop: Option<&str>,
    sst_method: &str,
) -> Switch {
    let full_sst = full_sst(sst_method);
    if let Some(sql) = before_stop {
        for n in cluster.nodes() {
            n.sql(sql).or_logs(cluster, sql);
        }
    }
    let uuid = multi_node::status(cluster.node(0), "wsrep_cluster_state_uuid")
        .or_logs(cluster, "cluster uuid");
    let t0 = Instant::now();
    for i in (0..cluster.len()).rev() {
        cluster
            .node_mut(i)
            .stop()
            .or_logs(cluster, &format!("stop node{}", i + 1));
    }
    let stopped = Instant::now();
    let mut seqnos = Vec::new();
    let mut founder = None;
    for i in 0..cluster.len() {
        let g = grastate(cluster, i);
        eprintln!("node{} grastate.dat:\n{g}", i + 1);
        check(cluster, g.contains(&format!("uuid:    {uuid}")), || {
            format!("node{}'s grastate.dat lacks uuid {uuid}:\n{g}", i + 1)
        });
        let seqno: i64 = field(&g, "seqno:").parse().unwrap_or(-1);
        check(cluster, seqno >= 0, || {
            format!("node{} stopped without a position:\n{g}", i + 1)
        });
        seqnos.push(seqno);
        if field(&g, "safe_to_bootstrap:") == "1" {
            founder = Some(i);
        }
    }
    let Some(founder) = founder else {
        multi_node::fail(cluster, "no node has safe_to_bootstrap: 1");
    };
    let (old, new) = (provider_line(from), provider_line(to));
    for n in cluster.nodes() {
        edit_cnf(n, |t| {
            assert!(t.contains(&old), "{} my.cnf lacks {old}", n.name());
            t.replace(&old, &new)
        });
    }
    let sst_before: Vec<usize> = cluster
        .nodes()
        .iter()
        .map(|n| log_count(n, &full_sst))
        .collect();
    let founding = Instant::now();
    cluster
        .node_mut(founder)
        .start_with_args(&["--wsrep-new-cluster"])
        .or_logs(cluster, "bootstrap the switched cluster");
    eprintln!(
        "node{} Synced {:.2} s after its start, {:.2} s after the last stop",
        founder + 1,
        founding.elapsed().as_secs_f64(),
        stopped.elapsed().as_secs_f64()
    );
    let acked = load.acked();
    let wait_write = Instant::now();
    while load.acked() == acked && wait_write.elapsed() < WAIT {
        std::thread::sleep(Duration::from_millis(20));
    }
    let no_writes = stopped.elapsed();
    for i in 0..cluster.len() {
        if i != founder {
            cluster
                .node_mut(i)
                .start()
                .or_logs(cluster, &format!("start node{} after the switch", i + 1));
        }
    }
    let total = t0.elapsed();
    let mut full_ssts = Vec::new();
    let max_seqno = *seqnos.iter().max().unwrap();
    for (i, n) in cluster.nodes().iter().enumerate() {
        let u = multi_node::status(n, "wsrep_cluster_state_uuid").or_logs(cluster, "uuid");
        check(cluster, u == uuid, || {
            format!("{}: cluster uuid {u}, was {uuid}", n.name())
        });
        let last: i64 = multi_node::status(n, "wsrep_last_committed")
            .or_logs(cluster, "last committed")
            .parse()
            .unwrap();
        check(cluster, last >= max_seqno, || {
            format!("{}: last committed {last}, below {max_seqno}", n.name())
        });
        let ssts = log_count(n, &full_sst) - sst_before[i];
        if ssts > 0 {
            full_ssts.push(format!("node{} (stopped at {})", i + 1, seqnos[i]));
        }
    }
    load.wait_for_progress(PROGRESS, WAIT)
        .or_logs(cluster, "writes after the switch");
    Switch {
        no_writes,
        total,
        full_ssts,
        behind: seqnos.iter().filter(|&&s| s < seqnos[founder]).count(),
    }
}

fn field<'a>(grastate: &'a str, key: &str) -> &'a str {
    grastate
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .map(str::trim)
        .unwrap_or("")
}

#[test]
fn galera_to_lockstep_and_back_without_sst() {
    round_trip("galera_to_lockstep_and_back_without_sst", "rsync");
}

#[test]
fn galera_to_lockstep_and_back_without_sst_with_mariabackup_configured() {
    round_trip(
        "galera_to_lockstep_and_back_without_sst_with_mariabackup_configured",
        "mariabackup",
    );
}

fn round_trip(test: &str, sst_method: &str) {
    if !lockstep_testkit::require_galera(test) {
        return;
    }
    let galera = Provider::Galera;
    let lockstep = Provider::lockstep_default();
    let mut cluster = Cluster::builder(3)
        .provider(galera.clone())
        .cluster_name("switch")
        .sst_method(sst_method)
        .start()
        .unwrap_or_else(|e| panic!("starting 3 Galera nodes: {e}"));
    let load = multi_node::acked_load(&cluster, PROGRESS, WAIT);
    let there = switch(&mut cluster, &load, &galera, &lockstep, None, sst_method);
    eprintln!(
        "Galera -> Lockstep: no writes for {:.1} s, all Synced after {:.1} s, full SSTs: {:?}",
        there.no_writes.as_secs_f64(),
        there.total.as_secs_f64(),
        there.full_ssts
    );
    check(&cluster, there.full_ssts.is_empty(), || {
        format!(
            "after the switch to Lockstep, {:?} took a full SST: the nodes that stopped \
             behind must catch up by IST from Galera's cache",
            there.full_ssts
        )
    });
    // README "Switching back": the cache left in Galera's format.
    let back = switch(
        &mut cluster,
        &load,
        &lockstep,
        &galera,
        Some("SET GLOBAL wsrep_provider_options='lockstep.leave_galera_cache=yes'"),
        sst_method,
    );
    eprintln!(
        "Lockstep -> Galera: no writes for {:.1} s, all Synced after {:.1} s, full SSTs: {:?}",
        back.no_writes.as_secs_f64(),
        back.total.as_secs_f64(),
        back.full_ssts
    );
    check(
        &cluster,
        back.behind > 0 && back.full_ssts.is_empty(),
        || {
            format!(
                "back on Galera, {:?} took a full SST ({} nodes stopped behind): they must \
             catch up by IST from the cache Lockstep left in Galera's format",
                back.full_ssts, back.behind
            )
        },
    );
    let report = load.stop();
    multi_node::verify_acked_rows(&cluster, &report, 3 * PROGRESS as usize, "two switches");
}
