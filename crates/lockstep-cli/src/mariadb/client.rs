//! Opening MariaDB connections (mysql_async) with errors an operator can act on.

use std::fmt;
use std::io;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder};

use super::endpoint::{ConnectSpec, Endpoint};

/// MariaDB's "Access denied for user" error code.
const ER_ACCESS_DENIED: u16 = 1045;
/// "Unknown system variable": the server is not built with wsrep.
const ER_UNKNOWN_SYSTEM_VARIABLE: u16 = 1193;

/// Why talking to MariaDB failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbError {
    /// No session: no socket, refused, reset during the handshake, ...
    Connect { endpoint: String, reason: String },
    /// The server refused the login.
    AccessDenied { endpoint: String, message: String },
    /// A statement failed with a server error.
    Query {
        endpoint: String,
        sql: String,
        code: u16,
        message: String,
    },
    /// The session broke after it was open (server crash, kill, network).
    Lost { endpoint: String, reason: String },
    /// No answer in time.
    Timeout {
        endpoint: String,
        what: &'static str,
        after: Duration,
    },
}

impl DbError {
    /// True when no session could be established at all (what `check
    /// --once` reports with exit code 2).
    pub fn is_unreachable(&self) -> bool {
        matches!(
            self,
            DbError::Connect { .. }
                | DbError::AccessDenied { .. }
                | DbError::Timeout {
                    what: "connecting",
                    ..
                }
        )
    }
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DbError::Connect { endpoint, reason } => {
                write!(f, "cannot connect to MariaDB at {endpoint}: {reason}")
            }
            DbError::AccessDenied { endpoint, message } => write!(
                f,
                "MariaDB at {endpoint} refused the login ({message}); check user and \
                 password in the --defaults-file"
            ),
            DbError::Query {
                endpoint,
                sql,
                code,
                message,
            } => write!(
                f,
                "MariaDB at {endpoint} failed `{sql}`: error {code}: {message}"
            ),
            DbError::Lost { endpoint, reason } => {
                write!(f, "lost the connection to MariaDB at {endpoint}: {reason}")
            }
            DbError::Timeout {
                endpoint,
                what,
                after,
            } => write!(
                f,
                "MariaDB at {endpoint} did not answer within {} ms ({what})",
                after.as_millis()
            ),
        }
    }
}

impl std::error::Error for DbError {}

/// Connection options for `spec`. Everything mysql_async would otherwise
/// ask the server for at login is fixed here, because a node that is not
/// ready (non-Primary) may refuse those extra queries, and the health check
/// must still get in to read its state.
fn opts(spec: &ConnectSpec) -> OptsBuilder {
    let base = OptsBuilder::default()
        .user(Some(spec.credentials.user.clone()))
        .pass(spec.credentials.password.clone())
        .prefer_socket(false)
        .stmt_cache_size(16)
        .max_allowed_packet(Some(4 << 20))
        .wait_timeout(Some(28_800))
        .tcp_nodelay(true);
    match &spec.endpoint {
        Endpoint::Socket(p) => base.socket(Some(p.display().to_string())),
        Endpoint::Tcp { host, port } => base.ip_or_hostname(host.clone()).tcp_port(*port),
    }
}

/// Opens a session. With `sync_wait` given, sets the session's
/// `wsrep_sync_wait` (0 keeps the health check's own reads from waiting on
/// a causality check a non-Primary node cannot pass); a server without
/// wsrep ignores it.
pub async fn connect(spec: &ConnectSpec, sync_wait: Option<u32>) -> Result<Conn, DbError> {
    let endpoint = spec.endpoint.to_string();
    let mut conn = Conn::new(opts(spec))
        .await
        .map_err(|e| connect_error(&endpoint, e))?;
    if let Some(level) = sync_wait {
        let sql = format!("SET SESSION wsrep_sync_wait={level}");
        match conn.query_drop(&sql).await {
            Ok(()) => {}
            Err(mysql_async::Error::Server(e)) if e.code == ER_UNKNOWN_SYSTEM_VARIABLE => {}
            Err(e) => return Err(query_error(&endpoint, &sql, e)),
        }
    }
    Ok(conn)
}

/// Maps a failed login.
pub fn connect_error(endpoint: &str, e: mysql_async::Error) -> DbError {
    match e {
        mysql_async::Error::Server(se) if se.code == ER_ACCESS_DENIED => DbError::AccessDenied {
            endpoint: endpoint.to_string(),
            message: se.message,
        },
        other => DbError::Connect {
            endpoint: endpoint.to_string(),
            reason: describe(other),
        },
    }
}

/// Maps a failed statement on an open session.
pub fn query_error(endpoint: &str, sql: &str, e: mysql_async::Error) -> DbError {
    match e {
        mysql_async::Error::Server(se) => DbError::Query {
            endpoint: endpoint.to_string(),
            sql: sql.to_string(),
            code: se.code,
            message: se.message,
        },
        other => DbError::Lost {
            endpoint: endpoint.to_string(),
            reason: describe(other),
        },
    }
}

/// A one-line reason, with a hint for the common cases.
fn describe(e: mysql_async::Error) -> String {
    match e {
        mysql_async::Error::Io(mysql_async::IoError::Io(io)) => describe_io(&io),
        mysql_async::Error::Server(se) => format!("error {}: {}", se.code, se.message),
        mysql_async::Error::Driver(d) => d.to_string(),
        other => other.to_string(),
    }
}

fn describe_io(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => {
            "no such socket (is mariadbd running, and is this its `socket`?)".into()
        }
        io::ErrorKind::ConnectionRefused => {
            "connection refused (is mariadbd running and listening there?)".into()
        }
        io::ErrorKind::PermissionDenied => {
            "permission denied (can this user open the socket?)".into()
        }
        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset => {
            "the server closed the connection".into()
        }
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_login_failures_count_as_unreachable() {
        let e = |what| DbError::Timeout {
            endpoint: "h:1".into(),
            what,
            after: Duration::from_millis(5),
        };
        assert!(e("connecting").is_unreachable());
        assert!(!e("reading wsrep status").is_unreachable());
        let refused = DbError::Connect {
            endpoint: "h:1".into(),
            reason: "x".into(),
        };
        assert!(refused.is_unreachable());
        let lost = DbError::Lost {
            endpoint: "h:1".into(),
            reason: "x".into(),
        };
        assert!(!lost.is_unreachable());
        assert_eq!(
            e("connecting").to_string(),
            "MariaDB at h:1 did not answer within 5 ms (connecting)"
        );
    }

    #[test]
    fn io_errors_get_hints() {
        let s = describe_io(&io::Error::from(io::ErrorKind::NotFound));
        assert!(s.contains("is mariadbd running"), "{s}");
        let s = describe_io(&io::Error::from(io::ErrorKind::ConnectionRefused));
        assert!(s.contains("refused"), "{s}");
    }
}
