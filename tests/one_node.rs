//! Lockstep inside a real MariaDB 10.11: a one-node cluster bootstraps,
//! reports Galera's status variables, commits DML and DDL with gap-free
//! seqnos, keeps its history across a restart, and refuses bad input with a
//! clear error instead of crashing or hanging.

use std::time::{Duration, Instant};

use lockstep_testkit::{Cluster, Node, Provider};

fn lockstep() -> Provider {
    Provider::lockstep_default()
}

fn one_node(name: &str) -> Cluster {
    Cluster::builder(1)
        .provider(lockstep())
        .cluster_name(name)
        .start()
        .unwrap_or_else(|e| panic!("starting one Lockstep node: {e}"))
}

fn status(node: &Node, name: &str) -> String {
    node.status(name)
        .unwrap_or_else(|e| panic!("SHOW STATUS LIKE '{name}': {e}"))
        .unwrap_or_else(|| panic!("{name} is not reported"))
}

fn last_committed(node: &Node) -> i64 {
    status(node, "wsrep_last_committed").parse().unwrap()
}

#[test]
fn bootstrap_reaches_primary_synced_with_galera_status_variables() {
    let cluster = one_node("one_node_status");
    let n = cluster.node(0);
    for (var, want) in [
        ("wsrep_ready", "ON"),
        ("wsrep_connected", "ON"),
        ("wsrep_cluster_status", "Primary"),
        ("wsrep_cluster_size", "1"),
        ("wsrep_local_state", "4"),
        ("wsrep_local_state_comment", "Synced"),
        ("wsrep_provider_name", "Lockstep"),
        ("wsrep_local_index", "0"),
        ("wsrep_desync_count", "0"),
    ] {
        assert_eq!(status(n, var), want, "{var}");
    }
    let local = status(n, "wsrep_local_state_uuid");
    assert_eq!(local.len(), 36, "wsrep_local_state_uuid = {local}");
    assert_ne!(local, "00000000-0000-0000-0000-000000000000");
    assert_eq!(status(n, "wsrep_cluster_state_uuid"), local);
    assert!(status(n, "wsrep_provider_version").starts_with("26.4."));
    assert!(last_committed(n) >= 1, "the bootstrap view has a seqno");
    assert!(
        !n.log_tail(400).contains("[ERROR]"),
        "errors in the log:\n{}",
        n.log_tail(60)
    );
}

#[test]
fn writes_advance_last_committed_one_seqno_each_and_a_restart_continues_the_history() {
    let mut cluster = one_node("one_node_history");
    let n = cluster.node_mut(0);
    n.sql("CREATE DATABASE h; CREATE TABLE h.t (id INT PRIMARY KEY AUTO_INCREMENT, v INT)")
        .unwrap();
    let before = last_committed(n);
    let inserts: Vec<String> = (0..100)
        .map(|i| format!("INSERT INTO h.t (v) VALUES ({i});"))
        .collect();
    n.sql(&inserts.join("")).unwrap();
    assert_eq!(last_committed(n), before + 100, "100 autocommit inserts");
    // A multi-statement transaction is one writeset; DDL is one TOI action.
    n.sql("BEGIN; UPDATE h.t SET v = v + 1; INSERT INTO h.t (v) VALUES (7); COMMIT")
        .unwrap();
    n.sql("ALTER TABLE h.t ADD COLUMN w INT").unwrap();
    assert_eq!(last_committed(n), before + 102);
    // A read-only transaction replicates nothing.
    n.sql("SELECT COUNT(*) FROM h.t").unwrap();
    assert_eq!(last_committed(n), before + 102);

    let history = status(n, "wsrep_local_state_uuid");
    let at_stop = last_committed(n);
    let t0 = Instant::now();
    n.stop().unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(30),
        "shutdown took {:?}",
        t0.elapsed()
    );
    let grastate = std::fs::read_to_string(n.datadir().join("grastate.dat")).unwrap();
    assert!(
        grastate.contains(&format!("uuid:    {history}")),
        "{grastate}"
    );
    assert!(
        grastate.contains(&format!("seqno:   {at_stop}")),
        "{grastate}"
    );
    assert!(grastate.contains("safe_to_bootstrap: 1"), "{grastate}");

    n.start_with_args(&["--wsrep-new-cluster"]).unwrap();
    assert_eq!(status(n, "wsrep_local_state_uuid"), history, "same history");
    // The new bootstrap view takes the next seqno, then writes continue.
    assert_eq!(last_committed(n), at_stop + 1);
    n.sql("INSERT INTO h.t (v) VALUES (1)").unwrap();
    assert_eq!(last_committed(n), at_stop + 2);
    let rows = n.sql("SELECT COUNT(*) FROM h.t").unwrap();
    assert_eq!(
        rows.trim(),
        "102",
        "no committed row lost across the restart"
    );
}

#[test]
fn causal_reads_flush_tables_and_desync_work() {
    let cluster = one_node("one_node_control");
    let n = cluster.node(0);
    n.sql("CREATE DATABASE c; CREATE TABLE c.t (id INT PRIMARY KEY)")
        .unwrap();
    let out = n
        .sql("SET SESSION wsrep_sync_wait=15; INSERT INTO c.t VALUES (1); SELECT COUNT(*) FROM c.t")
        .unwrap();
    assert_eq!(out.trim(), "1");
    assert!(status(n, "wsrep_causal_reads").parse::<i64>().unwrap() >= 1);
    // SET GLOBAL wsrep_desync desyncs the node; setting it back resyncs.
    n.sql("SET GLOBAL wsrep_desync=1").unwrap();
    assert_eq!(status(n, "wsrep_local_state_comment"), "Donor/Desynced");
    assert_eq!(status(n, "wsrep_desync_count"), "1");
    n.sql("SET GLOBAL wsrep_desync=0").unwrap();
    n.wait_synced(Duration::from_secs(10)).unwrap();
    // FTWRL pauses the provider; the node is writable again after UNLOCK.
    let out = n
        .sql("FLUSH TABLES WITH READ LOCK; SHOW STATUS LIKE 'wsrep_local_state_comment'; UNLOCK TABLES")
        .unwrap();
    assert!(out.contains("Donor/Desynced"), "{out}");
    n.wait_synced(Duration::from_secs(10)).unwrap();
    n.sql("INSERT INTO c.t VALUES (2)").unwrap();
}

#[test]
fn provider_options_round_trip_and_unknown_options_fail_the_statement() {
    let cluster = Cluster::builder(1)
        .provider(lockstep())
        .cluster_name("one_node_options")
        .provider_options("evs.install_timeout=PT15S; gcs.max_throttle=0.25")
        .start()
        .unwrap_or_else(|e| panic!("starting one Lockstep node: {e}"));
    let n = cluster.node(0);
    let log = || std::fs::read_to_string(n.error_log_path()).unwrap();
    let no_effect = |name: &str| {
        format!(
            "provider option '{name}' is accepted for compatibility with Galera but has no effect"
        )
    };
    // At start: one note for the no-effect option set to a non-default
    // value, none for one set to its default.
    assert_eq!(log().matches(&no_effect("evs.install_timeout")).count(), 1);
    assert!(log().contains(&format!(
        "[Note] WSREP: {}",
        no_effect("evs.install_timeout")
    )));
    assert_eq!(log().matches(&no_effect("gcs.max_throttle")).count(), 0);
    // At runtime: a no-effect option warns instead of claiming "set"; an
    // honoured one says it is set.
    n.sql("SET GLOBAL wsrep_provider_options = 'gcs.max_throttle=0.5'")
        .unwrap();
    assert_eq!(log().matches(&no_effect("gcs.max_throttle")).count(), 1);
    assert!(!log().contains("provider option gcs.max_throttle set to"));
    n.sql("SET GLOBAL wsrep_provider_options = 'repl.causal_read_timeout=PT7S'")
        .unwrap();
    assert!(log().contains("provider option repl.causal_read_timeout set to PT7S"));
    let opts = n.var("wsrep_provider_options").unwrap().unwrap();
    assert!(opts.contains("gcache.size = "), "{opts}");
    assert!(opts.ends_with("; ") || opts.ends_with(';'), "{opts}");
    // Feeding the whole string back is accepted (mtr tests rely on it).
    n.sql(&format!(
        "SET GLOBAL wsrep_provider_options = '{}'",
        opts.replace('\\', "\\\\").replace('\'', "\\'")
    ))
    .unwrap();
    n.sql("SET GLOBAL wsrep_provider_options = 'repl.causal_read_timeout=PT5S'")
        .unwrap();
    let err = n
        .sql("SET GLOBAL wsrep_provider_options = 'no.such.option=1'")
        .unwrap_err();
    assert_eq!(err.sql_code(), Some(1210), "{err}");
    // repl.max_ws_size takes effect: a large insert is refused.
    n.sql("CREATE DATABASE o; CREATE TABLE o.t (id INT PRIMARY KEY, b LONGTEXT)")
        .unwrap();
    n.sql("SET GLOBAL wsrep_max_ws_size = 1024").unwrap();
    let err = n
        .sql("INSERT INTO o.t VALUES (1, REPEAT('x', 4096))")
        .unwrap_err();
    // The server's answer to the provider's SIZE_EXCEEDED: error 1105
    // "Maximum writeset size exceeded" (wsrep-lib's wording).
    assert_eq!(err.sql_code(), Some(ER_UNKNOWN_ERROR), "{err}");
    assert!(
        err.to_string().contains("Maximum writeset size exceeded"),
        "{err}"
    );
    assert_eq!(
        n.sql("SELECT COUNT(*) FROM o.t").unwrap(),
        "0",
        "the refused row was committed"
    );
    n.sql("SET GLOBAL wsrep_max_ws_size = 2147483647").unwrap();
    n.sql("INSERT INTO o.t VALUES (2, REPEAT('x', 4096))")
        .unwrap();
}

/// MariaDB's generic error code, which wsrep-lib uses for a refused writeset.
const ER_UNKNOWN_ERROR: u32 = 1105;

/// A node whose start must fail: returns its error log.
fn failed_start(name: &str, spec: lockstep_testkit::ClusterSpec) -> String {
    let t0 = Instant::now();
    let err = match spec.cluster_name(name).start() {
        Ok(_) => panic!("{name}: the server started despite the bad input"),
        Err(e) => e.to_string(),
    };
    assert!(
        t0.elapsed() < Duration::from_secs(90),
        "{name}: failing took {:?} (a hang?)",
        t0.elapsed()
    );
    assert!(
        !err.contains("got signal"),
        "{name}: mariadbd crashed instead of failing cleanly:\n{err}"
    );
    err
}

#[test]
fn an_unknown_provider_option_stops_the_server_with_galeras_message() {
    let log = failed_start(
        "bad_option",
        Cluster::builder(1)
            .provider(lockstep())
            .provider_options("gcache.size=64M; no.such.option=1"),
    );
    assert!(
        log.contains("Unrecognized parameter 'no.such.option'"),
        "{log}"
    );
}

#[test]
fn a_malformed_cluster_address_stops_the_server_with_an_explanation() {
    let log = failed_start(
        "bad_address",
        Cluster::builder(1)
            .provider(lockstep())
            .extra_mysqld("wsrep_cluster_address=gcomm://127.0.0.1:notaport"),
    );
    assert!(log.contains("invalid wsrep_cluster_address"), "{log}");
}

#[test]
fn a_missing_data_directory_stops_the_server_with_an_explanation() {
    let log = failed_start(
        "bad_datadir",
        Cluster::builder(1)
            .provider(lockstep())
            .extra_mysqld("wsrep_data_home_dir=/nonexistent/lockstep"),
    );
    assert!(log.contains("does not exist"), "{log}");
}

/// Lines of `node`'s error log that contain `what`.
fn log_lines(node: &Node, what: &str) -> usize {
    std::fs::read_to_string(node.error_log_path())
        .map(|t| t.lines().filter(|l| l.contains(what)).count())
        .unwrap_or(0)
}

/// `lockstep.commit_bypass` (ADR 0011) needs `repl.commit_order` below 3
/// (strict order, Galera's default and ours); with it, the bypass is on by
/// default only where the server writes no binary log, which the provider
/// reads from the server itself: a binlog must follow the commit order.
#[test]
fn the_commit_bypass_is_on_only_below_strict_commit_order_and_without_a_binlog() {
    let on = "commit bypass on for writesets of 64 MiB or more";
    let off = "commit bypass off: this server writes a binary log";
    let strict = "commit bypass off: repl.commit_order=3";
    let start = |name: &str, options: &str, extra: Option<&str>| {
        let mut spec = Cluster::builder(1)
            .provider(lockstep())
            .cluster_name(name)
            .provider_options(options);
        if let Some(line) = extra {
            spec = spec.extra_mysqld(line);
        }
        spec.start()
            .unwrap_or_else(|e| panic!("starting one Lockstep node ({name}): {e}"))
    };
    let counts = |c: &Cluster| {
        let n = c.node(0);
        (log_lines(n, on), log_lines(n, off), log_lines(n, strict))
    };

    let cases = [
        ("bypass_no_binlog", "repl.commit_order=2", None, (1, 0, 0)),
        (
            "bypass_binlog",
            "repl.commit_order=2",
            Some("log_bin=binlog"),
            (0, 1, 0),
        ),
        (
            "bypass_strict",
            "lockstep.commit_bypass=8M",
            None,
            (0, 0, 1),
        ),
    ];
    for (name, options, extra, want) in cases {
        let mut c = start(name, options, extra);
        if extra.is_some() {
            assert_eq!(c.node(0).var("log_bin").unwrap().as_deref(), Some("ON"));
        }
        assert_eq!(counts(&c), want, "{name}: {options} {extra:?}");
        c.stop_all().unwrap();
    }
}
