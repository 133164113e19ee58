//! Running statements through the `mariadb` command-line client.
//!
//! The client runs with `--no-defaults -N -B` over the node's unix socket as
//! root, so output is tab-separated rows without a header, with MariaDB's
//! batch escaping (`\t`, `\n`, `\\`, and `NULL` for SQL NULL).

use std::io;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// Why a statement did not produce output.
#[derive(Debug)]
pub(crate) enum ClientFailure {
    /// The client binary could not be run at all.
    Spawn(io::Error),
    /// The client ran and reported an error (connection or statement).
    Failed { code: Option<u32>, message: String },
    /// The client did not finish in time and was killed.
    TimedOut(Duration),
}

impl ClientFailure {
    pub(crate) fn describe(&self) -> (Option<u32>, String) {
        match self {
            ClientFailure::Spawn(e) => (
                None,
                format!("cannot run the `mariadb` client ({e}); install mariadb-client"),
            ),
            ClientFailure::Failed { code, message } => (*code, message.clone()),
            ClientFailure::TimedOut(t) => (
                None,
                format!(
                    "no answer within {:.0} s; the client was killed (is the node blocked, \
                     e.g. non-Primary or flow-controlled?)",
                    t.as_secs_f64()
                ),
            ),
        }
    }
}

/// Runs `sql` on the server behind `socket`; returns the client's stdout.
pub(crate) fn run(socket: &Path, sql: &str, timeout: Duration) -> Result<String, ClientFailure> {
    let child = Command::new("mariadb")
        .arg("--no-defaults")
        .arg(format!("--socket={}", socket.display()))
        .args(["-uroot", "-N", "-B", "--connect-timeout=10"])
        .args(["--skip-print-query-on-error", "-e", sql])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(ClientFailure::Spawn)?;
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out: Output = match rx.recv_timeout(timeout) {
        Ok(r) => r.map_err(ClientFailure::Spawn)?,
        Err(_) => {
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
            let _ = rx.recv();
            return Err(ClientFailure::TimedOut(timeout));
        }
    };
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let message = String::from_utf8_lossy(&out.stderr).trim().to_string();
    let message = if message.is_empty() {
        format!("mariadb client exited with {}", out.status)
    } else {
        message
    };
    Err(ClientFailure::Failed {
        code: error_code(&message),
        message,
    })
}

/// The number in `ERROR 1213 (40001) at line 1: Deadlock found ...`.
pub(crate) fn error_code(message: &str) -> Option<u32> {
    let rest = message
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("ERROR "))?;
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().ok()
}

/// Splits batch output into rows of columns.
pub(crate) fn rows(output: &str) -> Vec<Vec<String>> {
    output
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

/// Quotes a string as an SQL literal.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_error_codes() {
        assert_eq!(
            error_code("ERROR 1213 (40001) at line 1: Deadlock found"),
            Some(1213)
        );
        assert_eq!(
            error_code("ERROR 2002 (HY000): Can't connect to local server"),
            Some(2002)
        );
        assert_eq!(error_code("something else"), None);
    }

    #[test]
    fn splits_rows_and_columns() {
        assert_eq!(
            rows("a\t1\nb\tNULL\n"),
            vec![
                vec!["a".to_string(), "1".into()],
                vec!["b".into(), "NULL".into()]
            ]
        );
        assert!(rows("").is_empty());
    }

    #[test]
    fn quotes_literals() {
        assert_eq!(quote("it's"), "'it''s'");
        assert_eq!(quote("a\\b"), "'a\\\\b'");
    }
}
