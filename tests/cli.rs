//! The `lockstep` command's cluster tools against real servers:
//! - `up` starts a local cluster of Lockstep nodes that replicate, `status`
//!   reports every node Synced (exit 0) and a stopped node (exit 2), `down`
//!   stops them all, after which `status` finds no running node;
//! - `check-bench` drives a real `lockstep check` service and counts every
//!   answer;
//! - `bench` runs a workload on Lockstep and on Galera and writes its
//!   report, numbers and plots.

#[path = "support/operator.rs"]
mod operator;

use lockstep_testkit::Cluster;
use operator::{defaults_file, lockstep, scratch, CheckService};
use std::path::Path;

fn run(args: &[&str]) -> (i32, String) {
    let out = lockstep(args);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// `lockstep status` rows: (node, state, cluster status, size).
fn status_rows(text: &str) -> Vec<(String, String, String, String)> {
    text.lines()
        .filter(|l| l.starts_with("node"))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert!(f.len() >= 6, "short status line {l:?}");
            (f[0].into(), f[3].into(), f[4].into(), f[5].into())
        })
        .collect()
}

/// The cluster `lockstep up` started in `dir`, through the testkit (its
/// servers are left running when this value is dropped).
fn attach(dir: &str) -> Cluster {
    Cluster::attach(Path::new(dir))
        .unwrap_or_else(|e| panic!("the cluster.json that lockstep up wrote in {dir}: {e}"))
}

/// Stops the cluster even when an assertion fails midway.
struct Down<'a>(&'a str);

impl Drop for Down<'_> {
    fn drop(&mut self) {
        let _ = lockstep(&["down", "--dir", self.0, "--purge"]);
    }
}

#[test]
fn up_starts_a_replicating_cluster_status_reports_it_and_down_stops_it() {
    let tmp = scratch();
    let dir = tmp.path().join("cluster");
    let dir = dir.to_str().unwrap();
    let (code, text) = run(&["up", "-n", "3", "--dir", dir, "--name", "cli_up"]);
    let _down = Down(dir);
    assert_eq!(code, 0, "lockstep up failed:\n{text}");
    assert!(
        text.contains("cluster `cli_up` is up: 3 node(s), provider lockstep"),
        "{text}"
    );

    let (code, text) = run(&["status", "--dir", dir]);
    assert_eq!(code, 0, "status of a healthy cluster:\n{text}");
    // IST_FROM: where each node's writeset caches start (a seqno).
    for line in text.lines().filter(|l| l.starts_with("node")) {
        let f: Vec<&str> = line.split_whitespace().collect();
        assert!(
            f.len() >= 10 && f[8].parse::<i64>().is_ok_and(|s| s >= 1),
            "no IST_FROM seqno in {line:?}:\n{text}"
        );
    }
    // LEADER: exactly one node is the Raft leader.
    let leaders = text
        .lines()
        .filter(|l| l.starts_with("node") && l.split_whitespace().last() == Some("yes"))
        .count();
    assert_eq!(leaders, 1, "one LEADER row expected:\n{text}");
    let rows = status_rows(&text);
    let names: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(names, ["node1", "node2", "node3"], "{text}");
    for (node, state, cluster, size) in &rows {
        assert_eq!(
            (state.as_str(), cluster.as_str(), size.as_str()),
            ("Synced", "Primary", "3"),
            "{node}:\n{text}"
        );
    }

    // The nodes it started replicate: a row written on node1 is read on node3.
    let cluster = attach(dir);
    cluster
        .node(0)
        .sql("CREATE DATABASE cli; CREATE TABLE cli.t (id INT PRIMARY KEY); INSERT INTO cli.t VALUES (7)")
        .expect("writing on node1");
    assert_eq!(
        cluster
            .node(2)
            .sql("SET SESSION wsrep_sync_wait=15; SELECT id FROM cli.t")
            .expect("a causal read on node3"),
        "7"
    );

    // A stopped node: status says so and exits 2.
    cluster
        .node(2)
        .sql("SHUTDOWN")
        .expect("shutting node3 down");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let (code, text) = loop {
        let (code, text) = run(&["status", "--dir", dir]);
        if code != 0 || std::time::Instant::now() > deadline {
            break (code, text);
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    };
    assert_eq!(code, 2, "status with node3 stopped:\n{text}");

    let (code, text) = run(&["down", "--dir", dir]);
    assert_eq!(code, 0, "lockstep down failed:\n{text}");
    for n in [1, 2] {
        assert!(text.contains(&format!("node{n}: stopped")), "{text}");
    }
    let (code, text) = run(&["status", "--dir", dir]);
    assert_ne!(code, 0, "status after down:\n{text}");
    let rows = status_rows(&text);
    assert!(
        rows.iter().all(|r| r.1 != "Synced"),
        "a node still runs after down:\n{text}"
    );
}

#[test]
fn check_bench_counts_every_answer_of_a_real_health_service() {
    let tmp = scratch();
    let cnf = defaults_file(tmp.path());
    let dir = tmp.path().join("cluster");
    let dir = dir.to_str().unwrap();
    let (code, text) = run(&["up", "-n", "1", "--dir", dir, "--name", "cli_cb"]);
    let _down = Down(dir);
    assert_eq!(code, 0, "lockstep up failed:\n{text}");
    let port = attach(dir).node(0).port().to_string();
    let service = CheckService::start(&[
        "--defaults-file",
        cnf.to_str().unwrap(),
        "--host",
        "127.0.0.1",
        "--port",
        &port,
        "--cache-ms",
        "100",
    ]);
    service.wait_for_body("/", "Node is synced.", std::time::Duration::from_secs(20));
    let json = tmp.path().join("cb.json");
    let (code, text) = run(&[
        "check-bench",
        "--target",
        &service.addr().to_string(),
        "--clients",
        "20",
        "--duration",
        "2",
        "--connections",
        "300",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "check-bench failed:\n{text}");
    let phases: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("the JSON was written")).unwrap();
    let phases = phases.as_array().expect("one entry per phase");
    assert_eq!(phases.len(), 2, "{phases:?}");
    // Phase 1: 20 clients, one request each per 100 ms for 2 s, all 200.
    let keep_alive = &phases[0];
    assert_eq!(keep_alive["connections"], 20);
    let requests = keep_alive["requests"].as_u64().unwrap();
    assert!((300..=440).contains(&requests), "{keep_alive}");
    assert_eq!(keep_alive["status_200"].as_u64(), Some(requests));
    assert_eq!(keep_alive["errors"], 0);
    // Phase 2: 300 connections, one request each, all answered 200.
    let churn = &phases[1];
    assert_eq!(churn["connections"], 300);
    assert_eq!(churn["requests"], 300);
    assert_eq!(churn["status_200"], 300);
    assert_eq!(churn["errors"], 0);
}

#[test]
fn bench_measures_lockstep_and_galera_and_writes_the_report() {
    if !lockstep_testkit::require_galera("bench_measures_lockstep_and_galera_and_writes_the_report")
    {
        return;
    }
    let tmp = scratch();
    let out = tmp.path().join("bench");
    let (code, text) = run(&[
        "bench",
        "--time",
        "3",
        "--warmup",
        "1",
        "--rounds",
        "1",
        "--workloads",
        "oltp_update_non_index",
        "--tables",
        "1",
        "--table-size",
        "1000",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "lockstep bench failed:\n{text}");
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("results.json")).expect("results.json"))
            .unwrap();
    let providers = results["providers"].as_array().expect("providers");
    let names: Vec<&str> = providers
        .iter()
        .map(|p| p["provider"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["lockstep", "galera"], "{results}");
    for p in providers {
        let w = &p["workloads"][0];
        assert_eq!(w["workload"], "oltp_update_non_index");
        let tps = w["summary"]["tps"].as_f64().unwrap_or(0.0);
        assert!(tps > 0.0, "{}: no throughput measured: {w}", p["provider"]);
    }
    let ratio = results["comparison"]["workloads"][0]["tps"]
        .as_f64()
        .expect("a Lockstep/Galera TPS ratio");
    assert!(ratio > 0.0, "{ratio}");
    for file in [
        "report.md",
        "throughput-oltp_update_non_index.png",
        "latency-oltp_update_non_index.png",
    ] {
        let bytes = std::fs::read(out.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(bytes.len() > 100, "{file} is nearly empty");
        if file.ends_with(".png") {
            assert!(
                bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
                "{file} is not a PNG"
            );
        }
    }
}

/// `lockstep check-config` on MariaDB's own Galera option file (the mtr
/// suite's `galera_2nodes.cnf`, read as mtr's server 1 and 2 read it) and
/// on a crafted bad one: the real file has no error, the findings it has
/// are the ones a DBA should know, and the bad one exits 1.
#[test]
fn check_config_reads_mtr_s_galera_file_and_flags_a_bad_one() {
    let mtr = Path::new("/usr/share/mysql/mysql-test");
    let dir = scratch();
    std::fs::create_dir(dir.path().join("include")).unwrap();
    // mtr resolves the file's `!include include/default_mysqld.cnf` in its
    // own directory; beside the copy it resolves as the server would.
    std::fs::copy(
        mtr.join("include/default_mysqld.cnf"),
        dir.path().join("include/default_mysqld.cnf"),
    )
    .expect("mariadb-test's include/default_mysqld.cnf (scripts/setup.sh installs it)");
    let cnf = dir.path().join("galera_2nodes.cnf");
    std::fs::copy(mtr.join("suite/galera/galera_2nodes.cnf"), &cnf).unwrap();
    let cnf = cnf.to_str().unwrap();

    let (code, out) = run(&["check-config", "--defaults-group-suffix", ".1", cnf]);
    assert_eq!(code, 0, "no errors in MariaDB's own Galera file:\n{out}");
    for (level, key) in [
        ("warning", "wsrep_cluster_address: gcomm:// (empty)"),
        ("warning", "evs.install_timeout: PT15S"),
        ("warning", "socket.ssl: no TLS"),
        ("note", "innodb_snapshot_isolation"),
    ] {
        assert!(
            out.lines().any(|l| l.starts_with(level) && l.contains(key)),
            "no {level} about {key}:\n{out}"
        );
    }
    assert!(
        out.contains("0 errors, 3 warnings, 1 notes"),
        "wsrep-sync-wait=15 there, so no stale-read note:\n{out}"
    );
    let (code, out) = run(&["check-config", "--defaults-group-suffix", ".2", cnf]);
    assert_eq!(code, 0, "{out}");
    assert!(
        !out.contains("gcomm:// (empty)"),
        "server 2 joins server 1:\n{out}"
    );

    let bad = dir.path().join("bad.cnf");
    std::fs::write(
        &bad,
        "[mysqld]\nbinlog_format=MIXED\ninnodb_flush_log_at_trx_commit=2\n[galera]\n\
         wsrep_on=1\nwsrep_provider=/usr/lib/galera/libgalera_smm.so\n\
         wsrep_cluster_address=gcomm://a,b,c\n\
         wsrep_provider_options=\"pc.ignore_sb=yes; gcs.fc_limt=9; gcache.recover=no\"\n",
    )
    .unwrap();
    let (code, out) = run(&["check-config", bad.to_str().unwrap()]);
    assert_eq!(code, 1, "errors exit 1:\n{out}");
    for want in [
        "error   ",
        "bad.cnf:2: binlog_format: MIXED",
        "innodb_autoinc_lock_mode: not set",
        "gcs.fc_limt: unknown provider option",
        "pc.ignore_sb: true",
        "innodb_flush_log_at_trx_commit: 2",
        "wsrep_provider: /usr/lib/galera/libgalera_smm.so is Galera",
        "wsrep_sync_wait",
    ] {
        assert!(out.contains(want), "'{want}' missing:\n{out}");
    }
    let (code, out) = run(&["check-config", "/nonexistent/my.cnf"]);
    assert_eq!(code, 2, "no file read exits 2:\n{out}");
}

/// The man pages and completions come from the same clap definitions as
/// the command line, so they name every command.
#[test]
fn man_pages_and_completions_name_every_command() {
    let dir = scratch();
    let (code, out) = run(&["man", "--out", dir.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    for page in [
        "lockstep.1",
        "lockstep-check-config.1",
        "lockstep-arbitrator.1",
    ] {
        let text = std::fs::read_to_string(dir.path().join(page))
            .unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(text.contains(".TH"), "{page} is not a man page");
    }
    let main = std::fs::read_to_string(dir.path().join("lockstep.1")).unwrap();
    assert!(
        main.contains("check\\-config"),
        "lockstep.1 lists check-config"
    );
    assert!(
        !dir.path().join("lockstep-man.1").exists(),
        "the hidden command has no page"
    );
    for shell in ["bash", "zsh", "fish"] {
        let (code, out) = run(&["completions", shell]);
        assert_eq!(code, 0, "{out}");
        assert!(
            out.contains("check-config"),
            "{shell} completion lacks check-config"
        );
    }
}
