//! `lockstep check` against one real Lockstep node: every health rule a
//! single node can show (Synced, Donor/Desynced with and without
//! --available-when-donor, read-only with --disable-when-readonly,
//! wsrep_reject_queries, the maintenance file, a stopped server), both as
//! the HTTP service and as `--once` exit codes. One cluster serves all
//! assertions, in order, to keep the test short.
//! The minority (non-Primary) rule needs three nodes: `check_galera.rs`.

#[path = "support/operator.rs"]
mod operator;

use std::time::Duration;

use lockstep_testkit::{Cluster, Provider};
use operator::{check_once, defaults_file, scratch, CheckService};

/// Services refresh every 100 ms here, so a change shows within this.
const SETTLE: Duration = Duration::from_secs(10);

const SYNCED: &str = "Node is synced.";
const DONOR: &str = "Node is not synced: Donor/Desynced (wsrep_local_state=2).";

#[test]
fn every_single_node_health_rule_against_a_real_lockstep_node() {
    let tmp = scratch();
    let cnf = defaults_file(tmp.path());
    let cnf = cnf.to_str().unwrap();
    let maintenance = tmp.path().join("maintenance");
    let mut cluster = Cluster::builder(1)
        .provider(Provider::lockstep_default())
        .cluster_name("check_health")
        .start()
        .unwrap_or_else(|e| panic!("starting one Lockstep node: {e}"));
    let node = cluster.node(0);
    let port = node.port().to_string();
    let socket = node.socket().to_str().unwrap().to_string();
    let tcp: [&str; 4] = ["--defaults-file", cnf, "--port", &port];
    let fast = ["--cache-ms", "100", "--timeout-ms", "2000"];

    // Over the unix socket, with the maintenance file configured.
    let plain = CheckService::start(
        &[
            &["--defaults-file", cnf, "--socket", &socket][..],
            &["--maintenance-file", maintenance.to_str().unwrap()],
            &fast,
        ]
        .concat(),
    );
    let donor_ok = CheckService::start(&[&tcp[..], &fast, &["--available-when-donor"]].concat());
    let ro_off = CheckService::start(&[&tcp[..], &fast, &["--disable-when-readonly"]].concat());

    // Synced: 200 everywhere, exit 0.
    for s in [&plain, &donor_ok, &ro_off] {
        let r = s.wait_for_body("/", SYNCED, SETTLE);
        assert_eq!(r.status, 200, "{r:?}");
    }
    assert_eq!(check_once(&tcp), (0, SYNCED.to_string()));

    // The JSON form carries every input of the decision.
    let j = plain.get("/?format=json").json();
    assert_eq!(j["healthy"], true);
    assert_eq!(j["code"], "synced");
    assert_eq!(j["inputs"]["wsrep_cluster_status"], "Primary");
    assert_eq!(j["inputs"]["wsrep_ready"], "ON");
    assert_eq!(j["inputs"]["wsrep_local_state"], 4);
    assert_eq!(j["inputs"]["wsrep_local_recv_queue"], 0);
    assert_eq!(j["inputs"]["wsrep_reject_queries"], "NONE");
    assert_eq!(j["inputs"]["read_only"], false);
    assert_eq!(j["inputs"]["maintenance_file_present"], false);
    assert_eq!(j["server"], format!("unix:{socket}"));

    // Donor/Desynced: 503, unless --available-when-donor.
    node.sql("SET GLOBAL wsrep_desync=1").unwrap();
    let r = plain.wait_for_body("/", DONOR, SETTLE);
    assert_eq!(r.status, 503);
    let r = donor_ok.wait_for_body("/", "Node is Donor/Desynced", SETTLE);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(check_once(&tcp), (1, DONOR.to_string()));
    let (code, _) = check_once(&[&tcp[..], &["--available-when-donor"]].concat());
    assert_eq!(code, 0, "--once --available-when-donor on a donor");
    node.sql("SET GLOBAL wsrep_desync=0").unwrap();
    plain.wait_for_body("/", SYNCED, SETTLE);

    // read_only=ON: only --disable-when-readonly cares.
    node.sql("SET GLOBAL read_only=1").unwrap();
    let r = ro_off.wait_for_body("/", "Node is read-only: read_only=ON", SETTLE);
    assert_eq!(r.status, 503);
    assert_eq!(
        ro_off.get("/?format=json").json()["inputs"]["read_only"],
        true
    );
    // SET GLOBAL read_only=1 takes the global read lock, which on a wsrep
    // node desyncs and pauses the provider for a moment (as with Galera):
    // the node passes through Donor/Desynced and Joined before it is
    // Synced again, so the plain check settles rather than reads once.
    // The plain check publishes from its cache, refreshed on its own
    // interval: wait until a refresh has seen read_only=ON, then it must
    // still call the node healthy.
    let t0 = std::time::Instant::now();
    while plain.get("/?format=json").json()["inputs"]["read_only"] != true {
        assert!(
            t0.elapsed() < SETTLE,
            "the plain check never saw read_only=ON within {SETTLE:?}"
        );
        std::thread::sleep(Duration::from_millis(25));
    }
    let r = plain.wait_for_body("/", SYNCED, SETTLE);
    assert_eq!(
        r.status, 200,
        "read-only without the flag is healthy: {r:?}"
    );
    let (code, out) = check_once(&[&tcp[..], &["--disable-when-readonly"]].concat());
    assert_eq!(
        (code, out.as_str()),
        (
            1,
            "Node is read-only: read_only=ON (--disable-when-readonly)."
        )
    );
    node.sql("SET GLOBAL read_only=0").unwrap();
    ro_off.wait_for_body("/", SYNCED, SETTLE);

    // wsrep_reject_queries: the node refuses clients, so it is out.
    node.sql("SET GLOBAL wsrep_reject_queries=ALL").unwrap();
    let r = plain.wait_for_body(
        "/",
        "Node rejects queries: wsrep_reject_queries=ALL.",
        SETTLE,
    );
    assert_eq!(r.status, 503);
    node.sql("SET GLOBAL wsrep_reject_queries=NONE").unwrap();
    plain.wait_for_body("/", SYNCED, SETTLE);

    // --max-recv-queue: an idle node's queue (0) is within any limit.
    let (code, _) = check_once(&[&tcp[..], &["--max-recv-queue", "0"]].concat());
    assert_eq!(code, 0);

    // The maintenance file drains the node while it exists.
    std::fs::write(&maintenance, b"").unwrap();
    let want = format!("Node is in maintenance: {} exists.", maintenance.display());
    let r = plain.wait_for_body("/", &want, SETTLE);
    assert_eq!(r.status, 503);
    assert_eq!(
        plain.get("/?format=json").json()["inputs"]["maintenance_file_present"],
        true
    );
    let m = maintenance.to_str().unwrap();
    assert_eq!(
        check_once(&[&tcp[..], &["--maintenance-file", m]].concat()),
        (1, want.clone())
    );
    std::fs::remove_file(&maintenance).unwrap();
    plain.wait_for_body("/", SYNCED, SETTLE);

    // Server stopped: 503 with the reason; --once exits 2 (cannot connect).
    cluster.node_mut(0).stop().expect("the node stops");
    let r = plain.wait_for_body(
        "/",
        "Node is unavailable: cannot connect to MariaDB at unix:",
        SETTLE,
    );
    assert_eq!(r.status, 503);
    assert_eq!(plain.get("/?format=json").json()["code"], "unreachable");
    let r = donor_ok.wait_for_body("/", "Node is unavailable: cannot connect", SETTLE);
    assert!(r.body.contains("connection refused"), "{r:?}");
    let (code, out) = check_once(&tcp);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.starts_with("Node is unavailable: cannot connect to MariaDB at 127.0.0.1:"),
        "{out}"
    );

    // A graceful stop of the service itself.
    assert!(plain.stop().success());
}
