//! Where a MariaDB server listens, and who we log in as.

use std::fmt;
use std::path::PathBuf;

/// The MariaDB client port when none is given.
pub const DEFAULT_PORT: u16 = 3306;

/// Debian's server socket, the default when nothing else is configured.
pub const DEFAULT_SOCKET: &str = "/run/mysqld/mysqld.sock";

/// A server address: a unix socket or TCP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Socket(PathBuf),
    Tcp { host: String, port: u16 },
}

impl Endpoint {
    /// Parses `/path/to/socket`, `host`, `host:port`, `[v6addr]:port` or
    /// `[v6addr]`.
    pub fn parse(s: &str) -> Result<Endpoint, String> {
        let s = s.trim();
        if s.is_empty() {
            return Err("empty server address".into());
        }
        if s.starts_with('/') || s.starts_with("./") {
            return Ok(Endpoint::Socket(PathBuf::from(s)));
        }
        let bad_port = |p: &str| format!("bad port `{p}` in `{s}` (want 1-65535)");
        let parse_port = |p: &str| match p.parse::<u16>() {
            Ok(0) | Err(_) => Err(bad_port(p)),
            Ok(n) => Ok(n),
        };
        if let Some(rest) = s.strip_prefix('[') {
            let (host, after) = rest
                .split_once(']')
                .ok_or_else(|| format!("missing `]` in `{s}`"))?;
            let port = match after.strip_prefix(':') {
                Some(p) => parse_port(p)?,
                None if after.is_empty() => DEFAULT_PORT,
                None => return Err(format!("unexpected `{after}` after `]` in `{s}`")),
            };
            return Ok(Endpoint::Tcp {
                host: host.to_string(),
                port,
            });
        }
        match s.rsplit_once(':') {
            // More than one colon without brackets: a bare IPv6 address.
            Some((host, _)) if host.contains(':') => Ok(Endpoint::Tcp {
                host: s.to_string(),
                port: DEFAULT_PORT,
            }),
            Some((host, port)) => Ok(Endpoint::Tcp {
                host: host.to_string(),
                port: parse_port(port)?,
            }),
            None => Ok(Endpoint::Tcp {
                host: s.to_string(),
                port: DEFAULT_PORT,
            }),
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Socket(p) => write!(f, "unix:{}", p.display()),
            Endpoint::Tcp { host, port } if host.contains(':') => write!(f, "[{host}]:{port}"),
            Endpoint::Tcp { host, port } => write!(f, "{host}:{port}"),
        }
    }
}

/// A login. The password never appears in `Debug` output or logs.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub user: String,
    pub password: Option<String>,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// Everything needed to open a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectSpec {
    pub endpoint: Endpoint,
    pub credentials: Credentials,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(host: &str, port: u16) -> Endpoint {
        Endpoint::Tcp {
            host: host.into(),
            port,
        }
    }

    #[test]
    fn addresses_parse_like_operators_write_them() {
        for (s, want) in [
            (
                "/run/mysqld/mysqld.sock",
                Endpoint::Socket("/run/mysqld/mysqld.sock".into()),
            ),
            ("127.0.0.1:3307", tcp("127.0.0.1", 3307)),
            ("db1", tcp("db1", 3306)),
            ("[::1]:3310", tcp("::1", 3310)),
            ("[::1]", tcp("::1", 3306)),
            ("::1", tcp("::1", 3306)),
        ] {
            assert_eq!(Endpoint::parse(s).unwrap(), want, "{s}");
        }
        for bad in ["", "h:0", "h:99999", "h:x", "[::1", "[::1]x"] {
            assert!(Endpoint::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn display_round_trips_and_passwords_stay_secret() {
        assert_eq!(tcp("::1", 5).to_string(), "[::1]:5");
        assert_eq!(tcp("h", 5).to_string(), "h:5");
        assert_eq!(Endpoint::Socket("/s".into()).to_string(), "unix:/s");
        let c = Credentials {
            user: "u".into(),
            password: Some("hunter2".into()),
        };
        assert!(!format!("{c:?}").contains("hunter2"));
    }
}
