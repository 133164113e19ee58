//! The HTTP side of `lockstep check`, with MariaDB replaced by an address
//! that refuses connections or by a server that accepts and never answers:
//! 503 before the first check, a hung server reported within the timeout
//! while answers stay prompt, keep-alive, pipelining, HEAD, OPTIONS, JSON,
//! exact Content-Length, size limits, slow and idle clients, dual stack.

#[path = "support/operator.rs"]
mod operator;

use std::io::Write;
use std::time::{Duration, Instant};

use operator::{
    check_once, closed_within, connect, dead_port, get, read_response, CheckService, HungServer,
};

/// A service whose MariaDB refuses connections: every answer is a 503.
fn refused_service(extra: &[&str]) -> CheckService {
    let port = dead_port().to_string();
    let mut args = vec!["--host", "127.0.0.1", "--port", &port, "--cache-ms", "200"];
    args.extend_from_slice(extra);
    let s = CheckService::start(&args);
    s.wait_for_body(
        "/",
        "Node is unavailable: cannot connect",
        Duration::from_secs(10),
    );
    s
}

#[test]
fn a_hung_mariadb_is_reported_within_the_timeout_and_answers_stay_prompt() {
    let hung = HungServer::start();
    let port = hung.port.to_string();
    let s = CheckService::start(&[
        "--host",
        "127.0.0.1",
        "--port",
        &port,
        "--timeout-ms",
        "800",
        "--cache-ms",
        "200",
    ]);
    // The first check started just before the service said it listens.
    let t0 = Instant::now();
    // Before the first check completes: 503 and say so.
    let r = s.get("/");
    assert_eq!(r.status, 503);
    assert_eq!(r.body, "No health check has completed yet.\n");
    assert_eq!(s.get("/?format=json").json()["code"], "pending");

    let mut slowest = Duration::ZERO;
    let want =
        format!("Node is unavailable: MariaDB at 127.0.0.1:{port} did not answer within 800 ms");
    let reported = loop {
        let sent = Instant::now();
        let r = s.get("/");
        slowest = slowest.max(sent.elapsed());
        assert_eq!(r.status, 503, "{r:?}");
        if r.body.starts_with(&want) {
            break t0.elapsed();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "never reported: {r:?}\nlog:\n{}",
            s.log()
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(
        reported >= Duration::from_millis(700) && reported < Duration::from_secs(4),
        "the hung server was reported after {reported:?} (timeout 800 ms)"
    );
    // The refresh blocks on MariaDB, answering never does.
    assert!(
        slowest < Duration::from_millis(250),
        "slowest answer {slowest:?}"
    );
    let j = s.get("/?format=json").json();
    assert_eq!(j["healthy"], false);
    assert!(j["inputs"]["error"]
        .as_str()
        .unwrap()
        .contains("did not answer within 800 ms"));

    // --once gives up after the timeout too: exit 2, cannot connect.
    let t1 = Instant::now();
    let (code, out) = check_once(&[
        "--host",
        "127.0.0.1",
        "--port",
        &port,
        "--timeout-ms",
        "500",
    ]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("did not answer within 500 ms"), "{out}");
    assert!(t1.elapsed() < Duration::from_secs(5));
}

#[test]
fn keep_alive_pipelining_head_options_json_and_exact_lengths() {
    let s = refused_service(&[]);
    let mut c = connect(s.addr());
    let mut buf = Vec::new();

    // Two requests on one HTTP/1.1 connection.
    c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let first = read_response(&mut c, &mut buf, false);
    assert_eq!(first.status, 503);
    assert_eq!(first.header("connection"), Some("keep-alive"));
    assert_eq!(
        first.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(
        first.header("content-length").unwrap(),
        first.body.len().to_string()
    );
    assert!(first
        .body
        .starts_with("Node is unavailable: cannot connect to MariaDB at 127.0.0.1:"));
    assert!(
        first.body.ends_with(".\n") && first.body.lines().count() == 1,
        "{:?}",
        first.body
    );
    assert!(first.header("date").is_some_and(|d| d.ends_with(" GMT")));

    // HEAD: same headers, no body (the next response must follow at once).
    c.write_all(b"HEAD / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let head = read_response(&mut c, &mut buf, true);
    assert_eq!(head.status, 503);
    assert_eq!(
        head.header("content-length").unwrap(),
        first.body.len().to_string()
    );

    // Pipelined: JSON by Accept, JSON by query, then OPTIONS closing the connection.
    c.write_all(
        b"GET / HTTP/1.1\r\nAccept: application/json\r\n\r\n\
          GET /status?format=json HTTP/1.1\r\n\r\n\
          OPTIONS / HTTP/1.1\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    for _ in 0..2 {
        let r = read_response(&mut c, &mut buf, false);
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(
            r.header("content-length").unwrap(),
            r.body.len().to_string()
        );
        let j = r.json();
        assert_eq!(j["status"], 503);
        assert_eq!(j["code"], "unreachable");
        for key in [
            "wsrep_cluster_status",
            "wsrep_ready",
            "wsrep_local_state",
            "wsrep_local_recv_queue",
            "wsrep_reject_queries",
            "read_only",
            "maintenance_file",
            "maintenance_file_present",
            "error",
        ] {
            assert!(j["inputs"].get(key).is_some(), "inputs.{key} missing: {j}");
        }
        assert_eq!(j["policy"]["available_when_donor"], false);
    }
    let opt = read_response(&mut c, &mut buf, false);
    assert_eq!(opt.status, 503);
    assert_eq!(opt.header("connection"), Some("close"));
    assert_eq!(opt.header("allow"), Some("GET, HEAD, OPTIONS"));
    assert!(buf.is_empty(), "stray bytes: {buf:?}");
    assert!(
        closed_within(&mut c, Duration::from_secs(2)),
        "not closed after Connection: close"
    );

    // HAProxy's default check: OPTIONS over HTTP/1.0, then close.
    let mut c = connect(s.addr());
    c.write_all(b"OPTIONS / HTTP/1.0\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    let r = read_response(&mut c, &mut buf, false);
    assert_eq!((r.status, r.header("connection")), (503, Some("close")));
    assert!(closed_within(&mut c, Duration::from_secs(2)));

    // Other methods: 405, and the connection stays usable.
    let mut c = connect(s.addr());
    c.write_all(b"POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello")
        .unwrap();
    let r = read_response(&mut c, &mut buf, false);
    assert_eq!(
        (r.status, r.header("allow")),
        (405, Some("GET, HEAD, OPTIONS"))
    );
    c.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    assert_eq!(read_response(&mut c, &mut buf, false).status, 503);
}

#[test]
fn oversized_malformed_slow_and_idle_clients_are_cut_off() {
    let s = refused_service(&["--request-timeout-ms", "300", "--idle-timeout-ms", "400"]);
    let mut buf = Vec::new();

    // A 10 KiB header: 431 and close, without waiting for the rest.
    let mut c = connect(s.addr());
    let big = format!("GET / HTTP/1.1\r\nX-Big: {}\r\n\r\n", "a".repeat(10 * 1024));
    c.write_all(big.as_bytes()).unwrap();
    let r = read_response(&mut c, &mut buf, false);
    assert_eq!(r.status, 431);
    assert_eq!(r.header("connection"), Some("close"));
    assert!(closed_within(&mut c, Duration::from_secs(2)));

    // Not HTTP at all: 400.
    let mut c = connect(s.addr());
    c.write_all(b"\x16\x03\x01\x00\xa5garbage\r\n\r\n").unwrap();
    buf.clear();
    assert_eq!(read_response(&mut c, &mut buf, false).status, 400);

    // A request head that never completes: 408 after the request timeout.
    let mut c = connect(s.addr());
    let t0 = Instant::now();
    c.write_all(b"GET / HTTP/1.1\r\nHost:").unwrap();
    buf.clear();
    let r = read_response(&mut c, &mut buf, false);
    assert_eq!(r.status, 408);
    assert!(
        t0.elapsed() >= Duration::from_millis(250),
        "{:?}",
        t0.elapsed()
    );
    assert!(closed_within(&mut c, Duration::from_secs(2)));

    // An idle keep-alive connection is closed after the idle timeout.
    let mut c = connect(s.addr());
    c.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    buf.clear();
    read_response(&mut c, &mut buf, false);
    let t0 = Instant::now();
    assert!(
        closed_within(&mut c, Duration::from_secs(3)),
        "idle connection kept open"
    );
    assert!(
        t0.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t0.elapsed()
    );

    // Through all this the service kept answering.
    assert_eq!(s.get("/").status, 503);
}

#[test]
fn listens_on_ipv4_and_ipv6_and_stops_cleanly_on_sigterm() {
    let port = dead_port().to_string();
    let s = CheckService::start_listening(
        &["127.0.0.1:0", "[::1]:0"],
        &["--port", &port, "--cache-ms", "200"],
    );
    assert_eq!(s.addrs.len(), 2);
    assert!(
        s.addrs[0].is_ipv4() && s.addrs[1].is_ipv6(),
        "{:?}",
        s.addrs
    );
    for a in &s.addrs {
        let r = get(*a, "/");
        assert_eq!(r.status, 503, "{a}");
    }
    let log = s.log();
    assert!(log.contains("checking MariaDB at 127.0.0.1:"), "{log}");
    // The log after the stop says why, if it did not exit cleanly (one CI
    // run saw a failure that 40 local SIGTERMs did not reproduce).
    let (status, log) = s.stop_and_log();
    assert!(
        status.success(),
        "exit status after SIGTERM: {status:?}; its log:\n{log}"
    );
}

#[test]
fn once_reports_an_unusable_option_file_with_exit_3() {
    let tmp = operator::scratch();
    let missing = tmp.path().join("missing.cnf");
    let (code, out) = check_once(&["--defaults-file", missing.to_str().unwrap()]);
    assert_eq!(code, 3, "{out}");
    assert!(
        out.starts_with("Cannot check: cannot read option file"),
        "{out}"
    );

    // Anyone could have changed the credentials: refused, as MariaDB does.
    let open = tmp.path().join("open.cnf");
    std::fs::write(&open, "[client]\nuser=x\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (code, out) = check_once(&["--defaults-file", open.to_str().unwrap()]);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("world-writable"), "{out}");
}
