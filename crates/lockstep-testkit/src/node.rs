//! One mariadbd server of a cluster: start, stop, kill, and SQL.

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::config::NodeConfig;
use crate::error::{Error, LogTail, Result};
use crate::process;
use crate::session::Session;
use crate::sql::{self, quote};

/// How many error-log lines an error report carries.
pub const LOG_TAIL_LINES: usize = 40;

/// Time limits of a node's operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Until a started node answers SQL and is Synced (default 120 s).
    pub start: Duration,
    /// Graceful shutdown before SIGKILL (default 60 s).
    pub stop: Duration,
    /// One `mariadb` client call (default 300 s).
    pub sql: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            start: Duration::from_secs(120),
            stop: Duration::from_secs(60),
            sql: Duration::from_secs(300),
        }
    }
}

/// A mariadbd server. Owned nodes (started by this process's [`crate::Cluster`])
/// are stopped when dropped; attached nodes (adopted from a state file) are not.
#[derive(Debug)]
pub struct Node {
    cfg: NodeConfig,
    owned: bool,
    detach: bool,
    child: Option<Child>,
    pid: Option<u32>,
    timeouts: Timeouts,
    verbose: bool,
    /// Extra environment for the server's next starts (`set_env`).
    env: Vec<(String, String)>,
}

impl Node {
    pub(crate) fn new(cfg: NodeConfig, owned: bool, detach: bool, timeouts: Timeouts) -> Node {
        Node {
            cfg,
            owned,
            detach,
            child: None,
            pid: None,
            timeouts,
            verbose: false,
            env: Vec::new(),
        }
    }

    pub(crate) fn adopt_pid(&mut self, pid: Option<u32>) {
        self.pid = pid;
    }

    pub(crate) fn disown(&mut self) {
        self.owned = false;
        self.child = None;
    }

    pub(crate) fn set_verbose(&mut self, verbose: bool) {
        self.verbose = verbose;
    }

    /// `node1`, `node2`, ... (also its `wsrep_node_name`).
    pub fn name(&self) -> &str {
        &self.cfg.name
    }
    /// Paths and ports of this node.
    pub fn config(&self) -> &NodeConfig {
        &self.cfg
    }
    pub fn error_log_path(&self) -> &Path {
        &self.cfg.error_log
    }
    pub fn datadir(&self) -> &Path {
        &self.cfg.datadir
    }
    pub fn socket(&self) -> &Path {
        &self.cfg.socket
    }
    /// MariaDB client port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.cfg.ports.client
    }
    /// Group communication port (`base_port`); IST listens on `base_port + 1`.
    pub fn base_port(&self) -> u16 {
        self.cfg.ports.base
    }
    pub fn ist_port(&self) -> u16 {
        self.cfg.ports.ist()
    }
    pub fn sst_port(&self) -> u16 {
        self.cfg.ports.sst
    }
    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }
    pub fn set_timeouts(&mut self, timeouts: Timeouts) {
        self.timeouts = timeouts;
    }

    /// The server's pid while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.pid.filter(|&p| process::alive(p))
    }

    /// Whether the server process is alive (it may not answer SQL yet).
    pub fn is_running(&self) -> bool {
        self.pid().is_some()
    }

    /// The last `lines` lines of the error log.
    pub fn log_tail(&self, lines: usize) -> String {
        process::log_tail(&self.cfg.error_log, lines)
    }

    /// How many lines of the error log contain `what`.
    pub fn log_count(&self, what: &str) -> std::io::Result<usize> {
        let text = std::fs::read(&self.cfg.error_log)?;
        Ok(String::from_utf8_lossy(&text)
            .lines()
            .filter(|l| l.contains(what))
            .count())
    }

    /// Environment variables for the server's next starts (replacing any
    /// set before; empty: none), e.g. `LD_PRELOAD` of libfaketime.
    pub fn set_env(&mut self, env: &[(&str, &str)]) {
        self.env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    }

    /// Starts mariadbd with `extra` arguments (e.g. `--wsrep-new-cluster`)
    /// and returns at once, without waiting for it to be ready.
    pub fn spawn(&mut self, extra: &[&str]) -> Result<()> {
        if let Some(pid) = self.pid() {
            return Err(Error::config(format!(
                "{} is already running (pid {pid}); stop it first",
                self.name()
            )));
        }
        self.reap();
        let child = process::spawn(&self.cfg, extra, self.detach, &self.env).map_err(|e| {
            Error::StartFailed {
                node: self.cfg.name.clone(),
                reason: format!("cannot run {}: {e}", process::server_binary().display()),
                log: Box::new(LogTail {
                    path: self.cfg.error_log.clone(),
                    tail: String::new(),
                }),
            }
        })?;
        self.pid = Some(child.id());
        self.child = Some(child);
        Ok(())
    }

    /// Starts the server (joining the cluster in its my.cnf) and waits
    /// until it is Synced.
    pub fn start(&mut self) -> Result<()> {
        self.start_with_args(&[])
    }

    /// Starts with extra mariadbd arguments and waits until Synced.
    pub fn start_with_args(&mut self, extra: &[&str]) -> Result<()> {
        let t0 = Instant::now();
        self.spawn(extra)?;
        self.wait_synced(self.timeouts.start)?;
        if self.verbose {
            eprintln!(
                "lockstep-testkit: {} synced in {:.1} s (pid {}, port {})",
                self.name(),
                t0.elapsed().as_secs_f64(),
                self.pid.unwrap_or(0),
                self.port()
            );
        }
        Ok(())
    }

    /// Graceful stop, then start again (joining the cluster).
    pub fn restart(&mut self) -> Result<()> {
        self.stop()?;
        self.start()
    }

    /// Waits until `wsrep_local_state_comment` is `Synced`.
    pub fn wait_synced(&self, timeout: Duration) -> Result<()> {
        self.wait_for_status("wsrep_local_state_comment", "Synced", timeout)
    }

    /// Polls `SHOW GLOBAL STATUS LIKE name` until it equals `expected`.
    /// Fails early, with the error log's tail, if the server exits.
    pub fn wait_for_status(&self, name: &str, expected: &str, timeout: Duration) -> Result<()> {
        self.wait_until(&format!("{name} = {expected}"), timeout, |n| {
            n.status(name).map(|v| {
                let v = v.unwrap_or_else(|| "(no such status variable)".into());
                (v == expected, v)
            })
        })
    }

    /// Polls until the server answers SQL at all.
    pub fn wait_for_sql(&self, timeout: Duration) -> Result<()> {
        self.wait_until("an answer to SELECT 1", timeout, |n| {
            n.sql("SELECT 1").map(|v| (true, v))
        })
    }

    /// Polls `probe` every 200 ms until it returns `(true, _)`; the string is
    /// what was seen, reported on timeout.
    pub fn wait_until(
        &self,
        what: &str,
        timeout: Duration,
        mut probe: impl FnMut(&Node) -> Result<(bool, String)>,
    ) -> Result<()> {
        let t0 = Instant::now();
        loop {
            if !self.is_running() {
                let reason = match self.pid {
                    Some(pid) => format!("mariadbd (pid {pid}) exited while waiting for {what}"),
                    None => format!("{} is not running", self.name()),
                };
                return Err(self.start_failed(reason));
            }
            let last_seen = match probe(self) {
                Ok((true, _)) => return Ok(()),
                Ok((false, seen)) => seen,
                Err(e) => first_line(&e.to_string()),
            };
            if t0.elapsed() >= timeout {
                return Err(Error::Timeout {
                    node: self.cfg.name.clone(),
                    waiting_for: what.to_string(),
                    waited: t0.elapsed(),
                    last_seen,
                    log: LogTail::read(&self.cfg.error_log, LOG_TAIL_LINES),
                });
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn start_failed(&self, reason: String) -> Error {
        Error::StartFailed {
            node: self.cfg.name.clone(),
            reason,
            log: LogTail::read(&self.cfg.error_log, LOG_TAIL_LINES),
        }
    }

    /// Sends SIGTERM without waiting (see [`Node::stop`]).
    pub fn terminate(&self) -> Result<()> {
        match self.pid() {
            Some(pid) => process::signal(pid, Signal::SIGTERM)
                .map_err(|e| Error::io(format!("SIGTERM to {} (pid {pid})", self.name()), e)),
            None => Ok(()),
        }
    }

    /// Graceful shutdown: SIGTERM, wait up to the stop timeout (60 s), then
    /// SIGKILL and report [`Error::StopHung`]. A stopped node is left alone.
    pub fn stop(&mut self) -> Result<()> {
        let Some(pid) = self.pid() else {
            self.reap();
            return Ok(());
        };
        let t0 = Instant::now();
        self.terminate()?;
        if self.wait_exit(self.timeouts.stop) {
            if self.verbose {
                eprintln!(
                    "lockstep-testkit: {} stopped in {:.1} s",
                    self.name(),
                    t0.elapsed().as_secs_f64()
                );
            }
            return Ok(());
        }
        let waited = t0.elapsed();
        let dir = self.cfg.error_log.parent().unwrap_or(Path::new("/tmp"));
        let stacks = crate::stacks::take(pid, dir);
        self.kill()?;
        Err(Error::StopHung {
            node: self.cfg.name.clone(),
            pid,
            waited,
            log: LogTail::read(&self.cfg.error_log, LOG_TAIL_LINES),
            stacks,
        })
    }

    /// SIGKILL, as in a crash; waits until the process is gone.
    pub fn kill(&mut self) -> Result<()> {
        if let Some(pid) = self.pid() {
            process::signal(pid, Signal::SIGKILL)
                .map_err(|e| Error::io(format!("SIGKILL to {} (pid {pid})", self.name()), e))?;
            if !self.wait_exit(Duration::from_secs(30)) {
                return Err(Error::config(format!(
                    "{} (pid {pid}) survived SIGKILL for 30 s; check `ps -p {pid}`",
                    self.name()
                )));
            }
        }
        self.reap();
        Ok(())
    }

    /// Waits for the process to exit; true if it did within `timeout`.
    pub(crate) fn wait_exit(&mut self, timeout: Duration) -> bool {
        let t0 = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut() {
                if matches!(child.try_wait(), Ok(Some(_))) {
                    self.child = None;
                    return true;
                }
            } else if !self.is_running() {
                return true;
            }
            if t0.elapsed() >= timeout {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn reap(&mut self) {
        if let Some(mut child) = self.child.take() {
            if !matches!(child.try_wait(), Ok(Some(_))) {
                self.child = Some(child);
            }
        }
    }

    /// Runs statements as root over the socket; returns the output without
    /// column names (tab-separated, one row per line, trailing newline removed).
    pub fn sql(&self, sql: &str) -> Result<String> {
        match sql::run(&self.cfg.socket, sql, self.timeouts.sql) {
            Ok(mut out) => {
                if out.ends_with('\n') {
                    out.pop();
                }
                Ok(out)
            }
            Err(failure) => {
                let (code, message) = failure.describe();
                Err(Error::Sql {
                    node: self.cfg.name.clone(),
                    sql: sql.to_string(),
                    code,
                    message,
                })
            }
        }
    }

    /// Runs a query and splits its result into rows of columns
    /// (batch-escaped text; SQL NULL is `NULL`).
    pub fn query_rows(&self, sql: &str) -> Result<Vec<Vec<String>>> {
        let out = self.sql(sql)?;
        Ok(sql::rows(&out))
    }

    /// Opens a connection that stays open across calls (as root over the
    /// socket), for transactions spanning several calls; see [`Session`].
    pub fn session(&self) -> Result<Session> {
        Session::open(&self.cfg.name, &self.cfg.socket, self.timeouts.sql)
    }

    /// One value of `SHOW GLOBAL STATUS`, `None` if there is no such variable.
    pub fn status(&self, name: &str) -> Result<Option<String>> {
        self.show("STATUS", name)
    }

    /// One value of `SHOW GLOBAL VARIABLES`, `None` if there is no such variable.
    pub fn var(&self, name: &str) -> Result<Option<String>> {
        self.show("VARIABLES", name)
    }

    fn show(&self, what: &str, name: &str) -> Result<Option<String>> {
        let rows = self.query_rows(&format!("SHOW GLOBAL {what} LIKE {}", quote(name)))?;
        Ok(rows
            .into_iter()
            .find(|r| r.first().is_some_and(|n| n.eq_ignore_ascii_case(name)))
            .map(|mut r| {
                if r.len() > 1 {
                    r.swap_remove(1)
                } else {
                    String::new()
                }
            }))
    }

    /// Where this node's files are (its directory under the cluster dir).
    pub fn dir(&self) -> PathBuf {
        self.cfg.dir.clone()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if !self.owned || self.pid().is_none() {
            return;
        }
        let _ = self.terminate();
        if !self.wait_exit(Duration::from_secs(30)) {
            let _ = self.kill();
        }
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_string()
}

impl Node {
    /// What the systemd unit does after a crash (`galera_recovery`): run
    /// `mariadbd --wsrep-recover`, which recovers InnoDB, logs the wsrep
    /// position it finds and exits; returns that `uuid:seqno`, for
    /// `--wsrep_start_position`.
    pub fn recover_position(&mut self) -> Result<String> {
        const MARK: &str = "WSREP: Recovered position: ";
        if let Some(pid) = self.pid() {
            return Err(Error::config(format!(
                "{}: --wsrep-recover needs a stopped server (pid {pid} runs)",
                self.name()
            )));
        }
        // Where the server user can write, like galera_recovery's mktemp.
        let log = self.cfg.datadir.join("wsrep-recovery.log");
        let _ = std::fs::remove_file(&log);
        let log_arg = format!("--log-error={}", log.display());
        let mut child = process::spawn(&self.cfg, &["--wsrep-recover", &log_arg], false, &self.env)
            .map_err(|e| Error::io(format!("{}: running --wsrep-recover", self.name()), e))?;
        let t0 = Instant::now();
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if t0.elapsed() < self.timeouts.start => {
                    std::thread::sleep(Duration::from_millis(100))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(Error::config(format!(
                        "{}: mariadbd --wsrep-recover did not finish within {:?}",
                        self.name(),
                        self.timeouts.start
                    )));
                }
            }
        }
        let text = std::fs::read_to_string(&log)
            .map_err(|e| Error::io(format!("{}: reading {}", self.name(), log.display()), e))?;
        text.lines()
            .rev()
            .find_map(|l| l.split_once(MARK).map(|(_, p)| p.trim().to_string()))
            .ok_or_else(|| {
                Error::config(format!(
                    "{}: --wsrep-recover logged no recovered position:\n{}",
                    self.name(),
                    text.lines().rev().take(20).collect::<Vec<_>>().join("\n")
                ))
            })
    }

    /// Restarts a crashed node the way the systemd unit does: recover the
    /// position, then start with `--wsrep_start_position`, and wait until
    /// it is Synced. Returns the recovered position.
    pub fn start_recovered(&mut self) -> Result<String> {
        let position = self.recover_position()?;
        self.start_with_args(&[&format!("--wsrep_start_position={position}")])?;
        Ok(position)
    }
}
