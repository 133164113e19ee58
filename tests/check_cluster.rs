//! The operator tools on three Lockstep nodes and on the three-node
//! reference cluster (Galera 4), one cluster per provider for both tools:
//! - `lockstep probe` measures write-on-A/read-on-B staleness and reports
//!   it as a table, JSON and a PNG; with --sync-wait no read is stale;
//! - `lockstep check` reports a minority node (isolated with
//!   gmcast.isolate=1, non-Primary) as unavailable, while the majority
//!   stays available;
//! - `lockstep check`'s `/metrics` on a Lockstep node serves every metric
//!   the Grafana dashboard queries, with the probe's writes counted in
//!   the stage histograms and a round trip to each peer (ADR 0019).

#[path = "support/operator.rs"]
mod operator;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use lockstep_testkit::{Cluster, Provider};
use operator::{check_once, defaults_file, lockstep, scratch, CheckService};

#[test]
fn probe_and_minority_check_on_three_lockstep_nodes() {
    probe_and_minority_check(Provider::lockstep_default(), "check_lockstep");
}

#[test]
fn probe_and_minority_check_on_three_galera_nodes() {
    if !lockstep_testkit::require_galera("probe_and_minority_check_on_three_galera_nodes") {
        return;
    }
    probe_and_minority_check(Provider::Galera, "check_galera");
}

fn probe_and_minority_check(provider: Provider, name: &str) {
    let label = provider.label();
    let tmp = scratch();
    let cnf = defaults_file(tmp.path());
    let cnf = cnf.to_str().unwrap();
    // A shorter suspect timeout makes the isolated node give up on the
    // group in ~2 s instead of 5.
    let cluster = Cluster::builder(3)
        .provider(provider)
        .cluster_name(name)
        .provider_options(
            "evs.keepalive_period=PT0.5S; evs.suspect_timeout=PT2S; evs.inactive_timeout=PT4S",
        )
        .start()
        .unwrap_or_else(|e| panic!("starting 3 {label} nodes: {e}"));
    let addr = |i: usize| format!("127.0.0.1:{}", cluster.node(i).port());
    let (a, b) = (addr(0), addr(1));

    // --- probe, without and with causal reads ---
    // 60 rounds over 50 rows from node1 to node2, plus `extra` arguments.
    let probe = |extra: &[&str]| {
        let mut args = vec![
            "probe",
            "--a",
            &a,
            "--b",
            &b,
            "--defaults-file",
            cnf,
            "--rounds",
            "60",
            "--rows",
            "50",
        ];
        args.extend_from_slice(extra);
        lockstep(&args)
    };
    let png = tmp.path().join("probe.png");
    let out = probe(&["--load-threads", "1", "--png", png.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "probe failed: {}{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        "probe: 60 rounds, write on 127.0.0.1:",
        "wsrep_sync_wait=0, 1 load thread(s)",
        "stale reads: ",
        "background load: ",
        "METRIC",
        "delay until visible (stale rounds)",
        "commit on A -> read on B (all rounds)",
        "commit latency on A",
        "P99_MS",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    let png_bytes = std::fs::read(&png).expect("the PNG was written");
    assert!(png_bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");

    let out = probe(&["--sync-wait", "--json", "-"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "probe --json - is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert_eq!(j["rounds"], 60);
    assert_eq!(j["sync_wait"], 1);
    assert_eq!(
        j["stale_rounds"], 0,
        "causal reads must never be stale: {j}"
    );
    assert_eq!(j["stale_percent"], 0.0);
    assert_eq!(j["never_visible"], 0);
    assert!(
        j["stale_delay"].is_null(),
        "no stale rounds, no delay distribution"
    );
    for key in ["min_ms", "avg_ms", "p50_ms", "p99_ms", "max_ms"] {
        assert!(
            j["visible"][key].as_f64().is_some_and(|v| v >= 0.0),
            "visible.{key}: {j}"
        );
        assert!(
            j["write"][key].as_f64().is_some_and(|v| v > 0.0),
            "write.{key}: {j}"
        );
    }
    assert_eq!(j["visible"]["n"], 60);

    // --- a minority node is not Primary ---
    let check = |i: usize| {
        CheckService::start(&[
            "--defaults-file",
            cnf,
            "--host",
            "127.0.0.1",
            "--port",
            &cluster.node(i).port().to_string(),
            "--cache-ms",
            "100",
        ])
    };
    let majority = check(0);
    if label == "lockstep" {
        dashboard_metrics_are_served(&majority);
    }
    let minority = check(2);
    minority.wait_for_body("/", "Node is synced.", Duration::from_secs(10));
    cluster
        .node(2)
        .sql("SET GLOBAL wsrep_provider_options='gmcast.isolate=1'")
        .unwrap();
    cluster
        .node(2)
        .wait_for_status(
            "wsrep_cluster_status",
            "non-Primary",
            Duration::from_secs(60),
        )
        .expect("the isolated node leaves the Primary component");
    let want = "Node is not in the Primary component: wsrep_cluster_status=non-Primary.";
    let r = minority.wait_for_body("/", want, Duration::from_secs(10));
    assert_eq!(r.status, 503);
    let j = minority.get("/?format=json").json();
    assert_eq!(j["code"], "not_primary");
    assert_eq!(j["inputs"]["wsrep_ready"], "OFF");
    let (code, out) = check_once(&[
        "--defaults-file",
        cnf,
        "--socket",
        cluster.node(2).socket().to_str().unwrap(),
    ]);
    assert_eq!((code, out.as_str()), (1, want));
    // The two others keep quorum and stay in the pool.
    cluster
        .node(0)
        .wait_for_status("wsrep_cluster_size", "2", Duration::from_secs(30))
        .expect("node1 and node2 form the new Primary component");
    let r = majority.get("/");
    assert_eq!((r.status, r.body.as_str()), (200, "Node is synced.\n"));
    assert_eq!(
        check_once(&[
            "--defaults-file",
            cnf,
            "--port",
            &cluster.node(1).port().to_string()
        ])
        .0,
        0
    );
}

/// The Grafana dashboard in the repository.
const DASHBOARD: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../docs/grafana/lockstep-cluster.json"
);

/// Every metric name in a PromQL expression (ours and mysqld_exporter's).
fn metric_names(expr: &str) -> impl Iterator<Item = String> + '_ {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|t| t.starts_with("lockstep_") || t.starts_with("mysql_global_status_"))
        .map(String::from)
}

/// The value of an unlabelled sample (or the first with these labels).
fn sample(body: &str, prefix: &str) -> Option<f64> {
    body.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// `GET /metrics` on node 1's check service, after the probe wrote 2x60
/// rows there: every metric the dashboard queries is served, the node's
/// replicate histogram counted the writes, and it knows the round trip to
/// both peers.
fn dashboard_metrics_are_served(service: &CheckService) {
    let text = std::fs::read_to_string(DASHBOARD).expect("the dashboard JSON");
    let dash: serde_json::Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let wanted: BTreeSet<String> = dash["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t["expr"].as_str().map(str::to_string))
        .flat_map(|e| metric_names(&e).collect::<Vec<_>>())
        .collect();
    assert!(wanted.len() >= 15, "the dashboard queries only {wanted:?}");
    // The check refreshes every 100 ms; the peers are probed every second.
    let deadline = Instant::now() + Duration::from_secs(10);
    let r = loop {
        let r = service.get("/metrics");
        let peers = r
            .body
            .lines()
            .filter(|l| l.starts_with("lockstep_peer_rtt_seconds_count{peer="))
            .count();
        if peers == 2 || Instant::now() > deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let served: BTreeSet<&str> = r
        .body
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect();
    let missing: Vec<&String> = wanted
        .iter()
        .filter(|n| !served.contains(n.as_str()))
        .collect();
    assert!(missing.is_empty(), "not served: {missing:?}\n{}", r.body);
    let replicated = sample(&r.body, "lockstep_replicate_latency_seconds_count ");
    assert!(
        replicated.is_some_and(|n| n >= 60.0),
        "replicate histogram count {replicated:?}"
    );
    let peers = r
        .body
        .lines()
        .filter(|l| l.starts_with("lockstep_peer_rtt_seconds_count{peer="))
        .count();
    assert_eq!(peers, 2, "round trips to both peers:\n{}", r.body);
    assert_eq!(sample(&r.body, "lockstep_wsrep_primary "), Some(1.0));
}
