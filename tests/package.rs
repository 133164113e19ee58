//! `make deb`'s package on this machine (issue 36): built by
//! scripts/deb.sh, installed with `apt-get install ./lockstep_*.deb`, a
//! 3-node cluster runs on the installed library, the installed units'
//! command lines run the arbitrator (configured with garb's variables in
//! /etc/default/lockstep-arbitrator) and the health check, and
//! `apt-get purge` leaves nothing behind. Needs root for apt-get and
//! /etc: the test's own user, or passwordless `sudo -n`.

#[path = "support/multi_node.rs"]
mod multi_node;
#[path = "support/operator.rs"]
mod operator;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use lockstep_testkit::{Cluster, Provider};
use multi_node::{causal_rows, OrLogs};
use operator::{defaults_file, get, scratch};

const WAIT: Duration = Duration::from_secs(60);
const LIBRARY: &str = "/usr/lib/lockstep/liblockstep.so";
const UNITS: &str = "/usr/lib/systemd/system";
/// Everything the package installs that must go with it.
const INSTALLED: &[&str] = &[
    LIBRARY,
    "/usr/bin/lockstep",
    "/usr/lib/systemd/system/lockstep-check.service",
    "/usr/lib/systemd/system/lockstep-arbitrator.service",
    "/etc/default/lockstep-arbitrator",
    "/etc/default/lockstep-check",
    "/usr/share/man/man1/lockstep-check-config.1.gz",
    "/usr/share/bash-completion/completions/lockstep",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives in the workspace")
        .to_path_buf()
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

/// How to run a command as root: directly when the test is root, else
/// through `sudo -n`; `None` when neither works.
fn root_prefix() -> Option<Vec<&'static str>> {
    let uid = run(Command::new("id").arg("-u"));
    if uid.trim() == "0" {
        return Some(Vec::new());
    }
    let sudo = Command::new("sudo").args(["-n", "true"]).status();
    sudo.is_ok_and(|s| s.success()).then(|| vec!["sudo", "-n"])
}

/// `cmd args` as root.
fn as_root(root: &[&str], cmd: &str, args: &[&str]) -> Command {
    let mut words: Vec<&str> = root.to_vec();
    words.push(cmd);
    words.extend_from_slice(args);
    let mut c = Command::new(words[0]);
    c.args(&words[1..]).env("DEBIAN_FRONTEND", "noninteractive");
    c
}

fn apt_get(root: &[&str], args: &[&str]) -> String {
    run(&mut as_root(root, "apt-get", args))
}

/// Writes a root-owned file (as an administrator edits /etc/default).
fn write_as_root(root: &[&str], path: &str, text: &str) {
    use std::io::Write;
    let mut child = as_root(root, "tee", &[path])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("tee {path}: {e}"));
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(text.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success(), "writing {path} as root");
}

fn installed() -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", "lockstep"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
}

/// Purges the package when the test ends, passed or not.
struct Purge(Vec<&'static str>);

impl Drop for Purge {
    fn drop(&mut self) {
        if installed() {
            let _ = as_root(&self.0, "apt-get", &["purge", "-y", "-q", "lockstep"]).status();
        }
    }
}

/// A process started from a unit's command line; killed on drop.
struct Service(Child);

impl Service {
    /// Runs a unit's command line (as `ExecStart=` words).
    fn start(words: &[String]) -> Service {
        let child = Command::new(&words[0])
            .args(&words[1..])
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{words:?}: {e}"));
        Service(child)
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        // SIGTERM first, as systemd stops it: the arbitrator leaves
        // gracefully; SIGKILL if it has not gone within 10 s.
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        for _ in 0..100 {
            if matches!(self.0.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The unit's `ExecStart=` words, with `$VAR` taken from the
/// `EnvironmentFile` values in `env` (split on whitespace, as systemd
/// does for `$VAR`).
fn exec_start(unit: &str, env: &[(String, String)]) -> Vec<String> {
    let text = std::fs::read_to_string(Path::new(UNITS).join(unit)).unwrap();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .unwrap_or_else(|| panic!("{unit} has no ExecStart"));
    line.split_whitespace()
        .flat_map(|w| match w.strip_prefix('$') {
            Some(var) => env
                .iter()
                .find(|(k, _)| k == var)
                .map(|(_, v)| v.split_whitespace().map(String::from).collect())
                .unwrap_or_default(),
            None => vec![w.to_string()],
        })
        .collect()
}

/// `KEY="value"` lines of an environment file (comments skipped).
fn env_file(path: &str) -> Vec<(String, String)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().trim_matches('"').to_string()))
        .collect()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

#[test]
fn the_package_installs_runs_a_cluster_from_its_paths_and_purges_cleanly() {
    let Some(root) = root_prefix() else {
        if std::env::var(lockstep_testkit::ALLOW_SKIP_ENV).is_ok_and(|v| v == "1") {
            eprintln!("package test: SKIPPED (apt-get needs root or sudo -n)");
            return;
        }
        panic!("the package test installs with apt-get: run it as root or with passwordless sudo");
    };
    operator::lockstep_bin(); // target/release/lockstep, as make build leaves it
    let built = run(Command::new(workspace().join("scripts/deb.sh")).current_dir(workspace()));
    let deb = built
        .split_whitespace()
        .find(|w| w.ends_with(".deb") && w.contains("/lockstep_"))
        .unwrap_or_else(|| panic!("no .deb in scripts/deb.sh's output:\n{built}"))
        .to_string();
    let dbgsym = built
        .split_whitespace()
        .find(|w| w.ends_with(".ddeb"))
        .unwrap_or_else(|| panic!("no -dbgsym .ddeb:\n{built}"))
        .to_string();
    let debug_files = run(Command::new("dpkg-deb").args(["-c", &dbgsym]));
    assert!(
        debug_files.contains("/usr/lib/debug/.build-id/"),
        "the dbgsym package holds the debug symbols:\n{debug_files}"
    );

    let _purge = Purge(root.clone());
    if installed() {
        apt_get(&root, &["purge", "-y", "-q", "lockstep"]);
    }
    apt_get(
        &root,
        &["install", "-y", "-q", "--no-install-recommends", &deb],
    );
    assert!(installed(), "dpkg does not list lockstep as installed");
    for path in INSTALLED {
        assert!(Path::new(path).exists(), "{path} missing after install");
    }
    let sections = run(Command::new("readelf").args(["-S", LIBRARY]));
    assert!(
        !sections.contains(".debug_info"),
        "{LIBRARY} is not stripped"
    );

    // Three nodes on the installed library.
    let mut cluster = Cluster::builder(3)
        .provider(Provider::Path(LIBRARY.into()))
        .cluster_name("packaged")
        .provider_options("evs.suspect_timeout=PT3S")
        .start()
        .unwrap_or_else(|e| panic!("starting 3 nodes on {LIBRARY}: {e}"));
    let loaded = cluster.node(0).status("wsrep_provider_name").unwrap();
    assert_eq!(loaded.as_deref(), Some("Lockstep"));
    cluster
        .node(0)
        .sql("CREATE DATABASE p; CREATE TABLE p.t (id INT PRIMARY KEY); INSERT INTO p.t VALUES (7)")
        .or_logs(&cluster, "a write");
    let rows = causal_rows(cluster.node(2), "SELECT id FROM p.t").or_logs(&cluster, "a read");
    assert_eq!(rows, vec![vec!["7".to_string()]]);

    // The arbitrator from its unit, configured as garb is.
    let nodes: Vec<String> = cluster
        .nodes()
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.base_port()))
        .collect();
    write_as_root(
        &root,
        "/etc/default/lockstep-arbitrator",
        &format!(
            "GALERA_NODES=\"{}\"\nGALERA_GROUP=\"packaged\"\n\
             GALERA_OPTIONS=\"gmcast.listen_addr=tcp://127.0.0.1:{}; evs.suspect_timeout=PT3S\"\n",
            nodes.join(" "),
            free_port()
        ),
    );
    let words = exec_start("lockstep-arbitrator.service", &[]);
    let workdir = words
        .iter()
        .skip_while(|w| *w != "--workdir")
        .nth(1)
        .expect("the unit gives a --workdir")
        .clone();
    // systemd's StateDirectory=: the service's own directory.
    let me = run(Command::new("id").arg("-u"));
    run(&mut as_root(&root, "mkdir", &["-p", &workdir]));
    run(&mut as_root(&root, "chown", &[me.trim(), &workdir]));
    let arbitrator = Service::start(&words);
    cluster
        .node(0)
        .wait_for_status("wsrep_cluster_size", "4", WAIT)
        .or_logs(&cluster, "the packaged arbitrator joins");

    // The health check from its unit, pointed at node 1.
    let port = free_port();
    let creds = scratch();
    let opts = format!(
        "--listen 127.0.0.1:{port} --socket {} --defaults-file {} --cache-ms 200",
        cluster.node(0).socket().display(),
        defaults_file(creds.path()).display()
    );
    write_as_root(
        &root,
        "/etc/default/lockstep-check",
        &format!("LOCKSTEP_CHECK_OPTS=\"{opts}\"\n"),
    );
    let words = exec_start(
        "lockstep-check.service",
        &env_file("/etc/default/lockstep-check"),
    );
    let check = Service::start(&words);
    let addr = format!("127.0.0.1:{port}").parse().unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    let status = loop {
        let status = std::net::TcpStream::connect(addr)
            .ok()
            .map(|_| get(addr, "/").status);
        if status == Some(200) || std::time::Instant::now() > deadline {
            break status;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        status,
        Some(200),
        "the packaged health check of a Synced node"
    );
    drop(check);
    drop(arbitrator);
    cluster
        .node(0)
        .wait_for_status("wsrep_cluster_size", "3", WAIT)
        .or_logs(&cluster, "the arbitrator leaves");
    cluster.stop_all().or_logs(&cluster, "stop the cluster");

    apt_get(&root, &["purge", "-y", "-q", "lockstep"]);
    assert!(!installed(), "still installed after purge");
    for path in INSTALLED {
        assert!(!Path::new(path).exists(), "{path} left after purge");
    }
    let _ = as_root(&root, "rm", &["-rf", &workdir]).status();
}
