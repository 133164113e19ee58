//! Two MariaDB nodes and `lockstep arbitrator` (issue 15, ADR 0018): the
//! arbitrator is the third vote. Under a write load on both nodes, each
//! data node in turn is killed with `kill -9`: the other stays in the
//! primary component and goes on committing, with no operator; the killed
//! node restarts and rejoins. At the end every acknowledged commit is on
//! both nodes and they are identical. `lockstep status --arbitrator` and
//! `lockstep check --arbitrator` report the arbitrator, and report it gone
//! once it is stopped; the arbitrator's `/metrics` (through `lockstep
//! check --arbitrator`) shows it in the primary component with a round
//! trip to each node.

#[path = "support/multi_node.rs"]
mod multi_node;
#[path = "support/operator.rs"]
mod operator;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lockstep_testkit::{Cluster, Provider};
use multi_node::{acked_load, check, status, OrLogs};
use operator::{check_once, lockstep, lockstep_bin, CheckService};

const WAIT: Duration = Duration::from_secs(60);
const PROGRESS: u64 = 100;

/// The arbitrator process; killed on drop if the test fails midway.
struct Arbitrator(Child);

impl Drop for Arbitrator {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn start_arbitrator(cluster: &Cluster, workdir: &Path) -> Arbitrator {
    let address = format!("gcomm://127.0.0.1:{}", cluster.node(0).base_port());
    let options = format!(
        "gmcast.listen_addr=tcp://127.0.0.1:{};evs.suspect_timeout=PT3S",
        free_port()
    );
    let log = workdir.join("arbitrator.log");
    let child = Command::new(lockstep_bin())
        .args([
            "arbitrator",
            "--address",
            &address,
            "--group",
            cluster.name(),
        ])
        .args(["--name", "arb", "--options", &options])
        .arg("--workdir")
        .arg(workdir)
        .arg("--log")
        .arg(&log)
        .stdin(Stdio::null())
        .spawn()
        .expect("starting lockstep arbitrator");
    Arbitrator(child)
}

/// `lockstep status --arbitrator` rows: (name, state, cluster, size).
fn status_rows(cluster: &Cluster, workdir: &Path) -> (i32, Vec<Vec<String>>) {
    let dir = cluster.base_dir().to_string_lossy().to_string();
    let wd = workdir.to_string_lossy().to_string();
    let out = lockstep(&["status", "--dir", &dir, "--arbitrator", &wd]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let rows = text
        .lines()
        .skip(2)
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect();
    (out.status.code().unwrap_or(-1), rows)
}

#[test]
fn two_nodes_and_an_arbitrator_survive_the_loss_of_either_node() {
    let mut cluster = Cluster::builder(2)
        .provider(Provider::lockstep_default())
        .cluster_name("arbitrated")
        .provider_options("evs.suspect_timeout=PT3S")
        .start()
        .unwrap_or_else(|e| panic!("starting 2 Lockstep nodes: {e}"));
    cluster.write_state().or_logs(&cluster, "cluster.json");
    let work = tempfile::tempdir().expect("a working directory");
    let arb = start_arbitrator(&cluster, work.path());
    cluster
        .node(0)
        .wait_for_status("wsrep_cluster_size", "3", WAIT)
        .or_logs(&cluster, "the arbitrator joins");

    // Both tools see it, Synced in the primary component.
    let deadline = Instant::now() + WAIT;
    let (code, rows) = loop {
        let (code, rows) = status_rows(&cluster, work.path());
        if code == 0 || Instant::now() > deadline {
            break (code, rows);
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let arb_row = rows
        .iter()
        .find(|r| r.first().map(String::as_str) == Some("arb"));
    check(&cluster, code == 0, || {
        format!("status exit {code}: {rows:?}")
    });
    check(
        &cluster,
        arb_row.is_some_and(|r| r[3] == "Synced" && r[4] == "Primary" && r[5] == "3"),
        || format!("the arbitrator's row: {arb_row:?}"),
    );
    let wd = work.path().to_string_lossy().to_string();
    let (code, text) = check_once(&["--arbitrator", &wd]);
    check(&cluster, code == 0, || {
        format!("check --arbitrator: exit {code}: {text}")
    });
    // Its metrics, through the same service: in the primary component, with
    // a round trip to both nodes (probed every second).
    let service = CheckService::start(&["--arbitrator", &wd, "--cache-ms", "200"]);
    let deadline = Instant::now() + WAIT;
    let metrics = loop {
        let body = service.get("/metrics").body;
        let peers = body
            .lines()
            .filter(|l| l.starts_with("lockstep_peer_rtt_seconds_count{peer="))
            .count();
        if peers == 2 || Instant::now() > deadline {
            break body;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    for line in [
        "lockstep_wsrep_primary 1",
        "mysql_global_status_wsrep_cluster_size 3",
    ] {
        check(&cluster, metrics.lines().any(|l| l == line), || {
            format!("no `{line}` in the arbitrator's metrics:\n{metrics}")
        });
    }
    check(
        &cluster,
        metrics.contains("lockstep_peer_rtt_seconds_count{peer=\"node1\"}")
            && metrics.contains("lockstep_peer_rtt_seconds_count{peer=\"node2\"}"),
        || format!("round trips to both nodes:\n{metrics}"),
    );
    drop(service);

    let load = acked_load(&cluster, PROGRESS, WAIT);

    for victim in [1, 0] {
        let survivor = 1 - victim;
        let name = cluster.node(victim).name().to_string();
        cluster
            .node_mut(victim)
            .kill()
            .or_logs(&cluster, &format!("kill -9 {name}"));
        // Primary all along: two of three votes remain.
        let s = cluster.node(survivor);
        let cluster_status = status(s, "wsrep_cluster_status").or_logs(&cluster, "status");
        check(&cluster, cluster_status == "Primary", || {
            format!("{} after {name} died: {cluster_status}", s.name())
        });
        s.wait_for_status("wsrep_cluster_size", "2", WAIT)
            .or_logs(&cluster, &format!("{name} removed"));
        let t0 = Instant::now();
        load.wait_for_progress(PROGRESS, WAIT)
            .or_logs(&cluster, &format!("writes while {name} is down"));
        eprintln!(
            "{name} killed: {} kept committing ({PROGRESS} inserts in {:.1} s)",
            s.name(),
            t0.elapsed().as_secs_f64()
        );
        let r = cluster.node_mut(victim).start_recovered();
        r.or_logs(&cluster, &format!("restart {name}"));
        cluster
            .node(survivor)
            .wait_for_status("wsrep_cluster_size", "3", WAIT)
            .or_logs(&cluster, &format!("{name} back"));
        load.wait_for_progress(PROGRESS, WAIT)
            .or_logs(&cluster, &format!("writes after {name} rejoined"));
    }

    let (table, reports) = load.stop();
    let checked = cluster
        .verify_acked(&table, &reports)
        .or_logs(&cluster, "acknowledged rows on both nodes");
    eprintln!("{checked} acknowledged rows on both nodes; nodes identical");
    check(&cluster, checked > 4 * PROGRESS as usize, || {
        format!("only {checked} rows were acknowledged")
    });
    let log = std::fs::read_to_string(work.path().join("arbitrator.log")).unwrap_or_default();
    check(
        &cluster,
        log.contains("as an arbitrator: no state transfer"),
        || format!("the arbitrator's log: {log}"),
    );

    // Stopped (SIGTERM), it leaves gracefully and both tools report it gone.
    let pid = arb.0.id().to_string();
    let killed = Command::new("kill").args(["-TERM", &pid]).status();
    check(&cluster, killed.is_ok_and(|s| s.success()), || {
        "kill -TERM the arbitrator".into()
    });
    cluster
        .node(0)
        .wait_for_status("wsrep_cluster_size", "2", WAIT)
        .or_logs(&cluster, "the arbitrator leaves");
    let (code, _) = check_once(&["--arbitrator", &wd]);
    check(&cluster, code == 2, || {
        format!("check --arbitrator of a stopped arbitrator: exit {code}")
    });
    let (code, rows) = status_rows(&cluster, work.path());
    check(&cluster, code == 2, || {
        format!("status with the arbitrator stopped: exit {code}: {rows:?}")
    });
    drop(arb);
    cluster.stop_all().or_logs(&cluster, "stop");
    cluster
        .remove_state()
        .or_logs(&cluster, "remove cluster.json");
}
