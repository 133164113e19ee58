//! The one error type of the testkit. Every variant says which node and what
//! to do; start and stop failures carry the tail of the node's error log.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Result with the testkit's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong while preparing, starting, querying or stopping a cluster.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A file-system operation failed.
    Io { what: String, source: io::Error },
    /// A helper program (mariadb-install-db, useradd, cp, ...) failed.
    Command {
        what: String,
        command: String,
        status: Option<i32>,
        output: String,
    },
    /// The wsrep provider library does not exist.
    ProviderMissing { tried: Vec<PathBuf> },
    /// The cluster was configured inconsistently or used wrongly.
    Config { message: String },
    /// The `mariadb` client reported an error for a statement.
    Sql {
        node: String,
        sql: String,
        /// MariaDB error number, e.g. 1213 for a deadlock, when the client printed one.
        code: Option<u32>,
        message: String,
    },
    /// mariadbd exited (or could not be spawned) while we waited for it.
    StartFailed {
        node: String,
        reason: String,
        log: Box<LogTail>,
    },
    /// A node did not reach the awaited condition in time.
    Timeout {
        node: String,
        waiting_for: String,
        waited: Duration,
        last_seen: String,
        log: Box<LogTail>,
    },
    /// A graceful stop did not finish in time; the node was killed with SIGKILL.
    StopHung {
        node: String,
        pid: u32,
        waited: Duration,
        log: Box<LogTail>,
        /// Every thread's stack just before the kill (gdb), if it worked.
        stacks: Option<crate::stacks::Stacks>,
    },
    /// The cluster state file is missing, unreadable or malformed.
    State { path: PathBuf, message: String },
    /// `up` was asked for a directory that already has live nodes.
    AlreadyRunning { dir: PathBuf, nodes: Vec<String> },
    /// The directory holds no cluster state file.
    NoCluster { dir: PathBuf },
}

impl Error {
    pub(crate) fn io(what: impl Into<String>, source: io::Error) -> Self {
        Error::Io {
            what: what.into(),
            source,
        }
    }

    pub(crate) fn config(message: impl Into<String>) -> Self {
        Error::Config {
            message: message.into(),
        }
    }

    /// The MariaDB error number of a failed statement, if any.
    pub fn sql_code(&self) -> Option<u32> {
        match self {
            Error::Sql { code, .. } => *code,
            _ => None,
        }
    }
}

/// The end of a node's error log, attached to start and stop failures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogTail {
    pub path: PathBuf,
    pub tail: String,
}

impl LogTail {
    /// The last `lines` lines of the log at `path`.
    pub fn read(path: &Path, lines: usize) -> Box<LogTail> {
        Box::new(LogTail {
            path: path.to_path_buf(),
            tail: crate::process::log_tail(path, lines),
        })
    }
}

impl fmt::Display for LogTail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.tail.trim().is_empty() {
            write!(f, "(error log {} is empty or missing)", self.path.display())
        } else {
            write!(
                f,
                "--- last lines of {} ---\n{}\n--- end of log ---",
                self.path.display(),
                self.tail.trim_end()
            )
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { what, source } => write!(f, "{what}: {source}"),
            Error::Command {
                what,
                command,
                status,
                output,
            } => {
                let status = status.map_or("a signal".to_string(), |c| format!("code {c}"));
                write!(
                    f,
                    "{what}: `{command}` exited with {status}; its output follows\n{}",
                    output.trim_end()
                )
            }
            Error::ProviderMissing { tried } => {
                let tried: Vec<String> = tried.iter().map(|p| p.display().to_string()).collect();
                write!(
                    f,
                    "wsrep provider library not found (tried {}); build it with \
                     `cargo build --release -p lockstep-provider`, or set LOCKSTEP_PROVIDER \
                     to its path, or use the Galera provider",
                    tried.join(", ")
                )
            }
            Error::Config { message } => write!(f, "{message}"),
            Error::Sql {
                node, sql, message, ..
            } => write!(
                f,
                "{node}: statement failed: {}\n  SQL: {sql}",
                message.trim()
            ),
            Error::StartFailed { node, reason, log } => {
                write!(f, "{node} failed to start: {reason}")?;
                write!(f, "\n{log}")
            }
            Error::Timeout {
                node,
                waiting_for,
                waited,
                last_seen,
                log,
            } => {
                write!(
                    f,
                    "{node}: gave up after {:.1} s waiting for {waiting_for}; last seen: {last_seen}",
                    waited.as_secs_f64()
                )?;
                write!(f, "\n{log}")
            }
            Error::StopHung {
                node,
                pid,
                waited,
                log,
                stacks,
            } => {
                write!(
                    f,
                    "{node} (pid {pid}) did not shut down within {:.0} s after SIGTERM and was \
                     killed with SIGKILL; shutdown hangs are bugs, see the log",
                    waited.as_secs_f64()
                )?;
                match stacks {
                    Some(s) => write!(
                        f,
                        " and the threads' stacks ({}):\n{}",
                        s.file.display(),
                        s.summary
                    )?,
                    None => write!(f, " (gdb took no stacks)")?,
                }
                write!(f, "\n{log}")
            }
            Error::State { path, message } => {
                write!(f, "cluster state file {}: {message}", path.display())
            }
            Error::AlreadyRunning { dir, nodes } => write!(
                f,
                "a cluster is already running in {} (live nodes: {}); stop it with \
                 `lockstep down --dir {}` or choose another directory",
                dir.display(),
                nodes.join(", "),
                dir.display()
            ),
            Error::NoCluster { dir } => write!(
                f,
                "no cluster in {} (no cluster.json); start one with `lockstep up --dir {}`",
                dir.display(),
                dir.display()
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
