//! Helpers for the tests of `lockstep check` and `lockstep probe`: the real
//! `lockstep` binary, a running health service, a raw HTTP client that
//! shows exactly what went over the wire.

#![allow(dead_code)] // each test file uses a different subset

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use lockstep_testkit::{TCP_PASSWORD, TCP_USER};

/// The `lockstep` binary of this workspace, built (or found fresh) once per
/// test process: `cargo build` is a no-op when it is up to date.
pub fn lockstep_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("tests/ lives in the workspace")
            .to_path_buf();
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        // The whole workspace's feature set, as `make build` uses it, so
        // this build and the outer one share their artifacts.
        let status = Command::new(cargo)
            .args(["build", "--release", "--bin", "lockstep"])
            .current_dir(&workspace)
            .status()
            .expect("running cargo to build the lockstep binary");
        assert!(status.success(), "cargo build --bin lockstep failed");
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace.join("target"));
        let bin = target.join("release").join("lockstep");
        assert!(bin.is_file(), "{} missing after cargo build", bin.display());
        bin
    })
    .clone()
}

/// A private directory for option and maintenance files.
pub fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("lockstep-check-test-")
        .tempdir_in("/tmp")
        .expect("creating a scratch directory")
}

/// An option file with the testkit's TCP account (mode 0600).
pub fn defaults_file(dir: &Path) -> PathBuf {
    let path = dir.join("check.cnf");
    std::fs::write(
        &path,
        format!("[client]\nuser={TCP_USER}\n[clustercheck]\npassword={TCP_PASSWORD}\n"),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// Runs `lockstep <args>` to completion.
pub fn lockstep(args: &[&str]) -> Output {
    Command::new(lockstep_bin())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("running lockstep")
}

/// `lockstep check --once`: (exit code, stdout).
pub fn check_once(args: &[&str]) -> (i32, String) {
    let mut all = vec!["check", "--once"];
    all.extend_from_slice(args);
    let out = lockstep(&all);
    let code = out.status.code().unwrap_or(-1);
    (
        code,
        String::from_utf8_lossy(&out.stdout).trim_end().to_string(),
    )
}

/// A `lockstep check` service running in the background; killed on drop.
pub struct CheckService {
    child: Child,
    /// Every address it reported listening on.
    pub addrs: Vec<SocketAddr>,
    log: Arc<Mutex<Vec<String>>>,
}

impl CheckService {
    /// Starts `lockstep check --listen 127.0.0.1:0 <args>` and waits until it listens.
    pub fn start(args: &[&str]) -> CheckService {
        Self::start_listening(&["127.0.0.1:0"], args)
    }

    pub fn start_listening(listen: &[&str], args: &[&str]) -> CheckService {
        let mut cmd = Command::new(lockstep_bin());
        cmd.arg("check");
        for l in listen {
            cmd.args(["--listen", l]);
        }
        let mut child = cmd
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting lockstep check");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let log2 = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(a) = line.strip_prefix("lockstep check: listening on ") {
                    let _ = tx.send(a.parse::<SocketAddr>().ok());
                }
                log2.lock().unwrap().push(line);
            }
            let _ = tx.send(None);
        });
        let mut addrs = Vec::new();
        while addrs.len() < listen.len() {
            match rx.recv_timeout(Duration::from_secs(20)) {
                Ok(Some(a)) => addrs.push(a),
                other => {
                    let _ = child.kill();
                    panic!(
                        "lockstep check did not start ({other:?}); its log:\n{}",
                        log.lock().unwrap().join("\n")
                    );
                }
            }
        }
        CheckService { child, addrs, log }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addrs[0]
    }

    /// What the service logged so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// GET `path` on a fresh connection.
    pub fn get(&self, path: &str) -> Response {
        get(self.addr(), path)
    }

    /// Polls until a GET's body starts with `prefix`; returns that response.
    pub fn wait_for_body(&self, path: &str, prefix: &str, timeout: Duration) -> Response {
        let t0 = Instant::now();
        loop {
            let r = self.get(path);
            if r.body.starts_with(prefix) {
                return r;
            }
            assert!(
                t0.elapsed() < timeout,
                "waited {timeout:?} for a body starting with {prefix:?}; last: {} {:?}\nlog:\n{}",
                r.status,
                r.body,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// [`CheckService::stop`], with everything it logged up to its exit.
    pub fn stop_and_log(self) -> (ExitStatus, String) {
        let log = Arc::clone(&self.log);
        let status = self.stop();
        // The reader thread may still be on the last lines.
        std::thread::sleep(Duration::from_millis(50));
        let text = log.lock().unwrap().join("\n");
        (status, text)
    }

    /// Sends SIGTERM and waits for a clean exit.
    pub fn stop(mut self) -> ExitStatus {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let t0 = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "no exit after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for CheckService {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A parsed HTTP response.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    /// Header names lower-cased, in order.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }
}

/// One GET with `Connection: close` on a fresh connection.
pub fn get(addr: SocketAddr, path: &str) -> Response {
    let mut s = connect(addr);
    let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let (r, used) = parse_response(&raw, false).expect("a complete response");
    assert_eq!(used, raw.len(), "bytes after the response: {raw:?}");
    r
}

pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Parses one response at the start of `raw`; `None` if incomplete.
/// Returns the bytes it used. The body length is Content-Length, checked
/// to be present (the service always sends it).
pub fn parse_response(raw: &[u8], head_only: bool) -> Option<(Response, usize)> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = std::str::from_utf8(&raw[..end]).expect("ASCII head");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    assert!(status_line.starts_with("HTTP/1.1 "), "{status_line:?}");
    let status: u16 = status_line[9..12].parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (n, v) = l.split_once(':').expect("header line");
            (n.trim().to_ascii_lowercase(), v.trim().to_string())
        })
        .collect();
    let len: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .expect("Content-Length header")
        .1
        .parse()
        .unwrap();
    let body_len = if head_only { 0 } else { len };
    if raw.len() < end + body_len {
        return None;
    }
    let body = String::from_utf8(raw[end..end + body_len].to_vec()).unwrap();
    Some((
        Response {
            status,
            headers,
            body,
        },
        end + body_len,
    ))
}

/// Reads from `s` until one full response is in `buf`; removes and returns it.
pub fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>, head_only: bool) -> Response {
    loop {
        if let Some((r, used)) = parse_response(buf, head_only) {
            buf.drain(..used);
            return r;
        }
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).expect("reading a response");
        assert!(n > 0, "connection closed mid-response; got {buf:?}");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// True if the peer closed the connection (EOF) within `within`.
pub fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut b = [0u8; 64];
    match s.read(&mut b) {
        Ok(0) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        Ok(_) => false,
    }
}

/// A TCP port with nothing listening (bound, then released).
pub fn dead_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// A "MariaDB" that accepts connections and never says a word, like a
/// server stuck before its handshake. Stops when dropped.
pub struct HungServer {
    pub port: u16,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl HungServer {
    pub fn start() -> HungServer {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        l.set_nonblocking(true).unwrap();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut held = Vec::new();
            while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
                match l.accept() {
                    Ok((s, _)) => held.push(s),
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        HungServer { port, stop }
    }
}

impl Drop for HungServer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}
