//! A client connection held open across calls, for tests that need session
//! state between statements: an open transaction, session variables, two
//! clients interleaving on different nodes.
//!
//! [`crate::Node::sql`] runs a fresh `mariadb` client per call, so a
//! transaction cannot span two calls. A [`Session`] keeps one `mariadb`
//! client process running with its stdin fed statement by statement. The
//! client runs with `--force` so that an error (a deadlock, say) leaves the
//! connection usable, with `--skip-reconnect` so that a lost connection is
//! reported instead of silently replaced by a new one without the
//! transaction, and with `--unbuffered` so results arrive as each statement
//! finishes. Its stdout and stderr share one socket, so error lines arrive
//! in order with result rows. After each call's SQL the session sends a
//! marker `SELECT`; everything read before the marker's row is that call's
//! output.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::sql;

/// One open connection to a node as root over its unix socket.
/// Dropping it closes the connection (an open transaction rolls back).
#[derive(Debug)]
pub struct Session {
    node: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// Input lines sent so far: the client reports errors by line number.
    lines_sent: usize,
    calls: u64,
    timeout: Duration,
    broken: Option<String>,
}

impl Session {
    /// Connects to the server behind `socket`; `node` names it in errors.
    pub fn open(node: &str, socket: &Path, timeout: Duration) -> Result<Session> {
        let (ours, theirs) = UnixStream::pair()
            .map_err(|e| Error::io(format!("{node}: creating a socket pair for a session"), e))?;
        let theirs_err = theirs
            .try_clone()
            .map_err(|e| Error::io(format!("{node}: duplicating the session socket"), e))?;
        let mut child = Command::new("mariadb")
            .arg("--no-defaults")
            .arg(format!("--socket={}", socket.display()))
            .args(["-uroot", "-N", "-B", "--connect-timeout=10"])
            .args(["--force", "--skip-reconnect", "--unbuffered"])
            .arg("--skip-print-query-on-error")
            .stdin(Stdio::piped())
            .stdout(Stdio::from(OwnedFd::from(theirs)))
            .stderr(Stdio::from(OwnedFd::from(theirs_err)))
            .spawn()
            .map_err(|e| {
                Error::io(
                    format!("{node}: cannot run the `mariadb` client; install mariadb-client"),
                    e,
                )
            })?;
        let stdin = child.stdin.take();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(ours).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut session = Session {
            node: node.to_string(),
            child,
            stdin,
            lines,
            lines_sent: 0,
            calls: 0,
            timeout,
            broken: None,
        };
        // Fails here, not at the first real statement, if we cannot connect.
        session.sql("SELECT 1")?;
        Ok(session)
    }

    /// The node this session is connected to.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// Whether every later call will fail (the client died, timed out, or
    /// lost its connection); open a new session then.
    pub fn is_broken(&self) -> bool {
        self.broken.is_some()
    }

    /// How long one call may take before the client is killed (default:
    /// the node's SQL timeout).
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// Runs statements in this session; returns their output like
    /// [`crate::Node::sql`] (tab-separated rows, no column names).
    ///
    /// If a statement fails, the call returns that [`Error::Sql`] (with its
    /// MariaDB error number) and the session stays usable, but any later
    /// statements of the same call still ran: pass one statement per call
    /// when that matters. A session whose client died or timed out fails
    /// every later call.
    pub fn sql(&mut self, sql: &str) -> Result<String> {
        self.call(sql, false)
    }

    /// Like [`Session::sql`] for statements that end a transaction
    /// (`COMMIT`): their outcome is theirs alone. If they succeeded and only
    /// the session's marker `SELECT` after them failed (with
    /// `wsrep_sync_wait` it waits, and can time out, on its own), the call
    /// succeeds and the session becomes unusable.
    pub fn sql_ending(&mut self, sql: &str) -> Result<String> {
        self.call(sql, true)
    }

    fn call(&mut self, sql: &str, statements_only: bool) -> Result<String> {
        if let Some(why) = &self.broken {
            return Err(self.sql_error(sql, None, format!("session is unusable: {why}")));
        }
        self.calls += 1;
        let marker = format!("lockstep-session-{}-done", self.calls);
        let body = sql.trim().trim_end_matches(';');
        let input = format!("{body};\nSELECT '{marker}';\n");
        let sql_lines = body.lines().count().max(1);
        let marker_line = self.lines_sent + sql_lines + 1;
        self.send(&input).inspect_err(|_| {
            self.broken = Some("its client no longer reads input".into());
        })?;
        self.lines_sent += input.lines().count();
        self.collect(sql, &marker, marker_line, statements_only)
    }

    /// Like [`Session::sql`], split into rows of columns.
    pub fn query_rows(&mut self, sql: &str) -> Result<Vec<Vec<String>>> {
        Ok(sql::rows(&self.sql(sql)?))
    }

    fn send(&mut self, input: &str) -> Result<()> {
        let stdin = self
            .stdin
            .as_mut()
            .expect("stdin is open while the session lives");
        stdin
            .write_all(input.as_bytes())
            .and_then(|()| stdin.flush())
            .map_err(|e| Error::io(format!("{}: writing to the session's client", self.node), e))
    }

    /// Reads output until the marker row; the first error line is the result.
    fn collect(
        &mut self,
        sql: &str,
        marker: &str,
        marker_line: usize,
        statements_only: bool,
    ) -> Result<String> {
        let deadline = Instant::now() + self.timeout;
        let mut rows: Vec<String> = Vec::new();
        let mut first_error: Option<(Option<u32>, String)> = None;
        loop {
            let wait = deadline.saturating_duration_since(Instant::now());
            let line = match self.lines.recv_timeout(wait) {
                Ok(line) => line,
                Err(RecvTimeoutError::Timeout) => {
                    let _ = self.child.kill();
                    let why = format!(
                        "no answer within {:.0} s; the client was killed (is the node blocked, \
                         e.g. non-Primary or flow-controlled?)",
                        self.timeout.as_secs_f64()
                    );
                    self.broken = Some(why.clone());
                    return Err(self.sql_error(sql, None, why));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let why = format!(
                        "the client exited; its last output: {}",
                        rows.last().map_or("(none)", String::as_str)
                    );
                    self.broken = Some("its client exited".into());
                    let code = first_error.as_ref().and_then(|e| e.0);
                    return Err(self.sql_error(sql, code, why));
                }
            };
            if line == marker {
                break;
            }
            if let Some(code) = sql::error_code(&line) {
                if line.contains(&format!(" at line {marker_line}:")) {
                    // The marker failed. After a COMMIT that succeeded its
                    // error is not the statements' (a causal wait of the
                    // marker SELECT that timed out on a node that lost
                    // the Primary component): the caller chose to hear
                    // that as success. Otherwise the error concerns the
                    // open transaction (a brute-force abort is reported
                    // by the next statement) or the connection is gone.
                    if first_error.is_none() && statements_only {
                        self.broken = Some(format!("its marker failed: {line}"));
                        return Ok(rows.join("\n"));
                    }
                    self.broken = Some(format!("the connection failed: {line}"));
                    let (code, message) = first_error.unwrap_or((Some(code), line));
                    return Err(self.sql_error(sql, code, message));
                }
                first_error.get_or_insert((Some(code), line));
            } else {
                rows.push(line);
            }
        }
        match first_error {
            Some((code, message)) => Err(self.sql_error(sql, code, message)),
            None => Ok(rows.join("\n")),
        }
    }

    fn sql_error(&self, sql: &str, code: Option<u32>, message: String) -> Error {
        Error::Sql {
            node: self.node.clone(),
            sql: sql.to_string(),
            code,
            message,
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // EOF on stdin makes the client disconnect and exit by itself.
        self.stdin.take();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
