//! The operator tools on three Lockstep nodes and on the three-node
//! reference cluster (Galera 4), one cluster per provider for both tools:
//! - `lockstep probe` measures write-on-A/read-on-B staleness and reports
//!   it as a table, JSON and a PNG; with --sync-wait no read is stale;
//! - `lockstep check` reports a minority node (isolated with
//!   gmcast.isolate=1, non-Primary) as unavailable, while the majority
//!   stays available.

#[path = "support/operator.rs"]
mod operator;

use std::time::Duration;

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
