//! Combines command-line addresses with an option file into a [`ConnectSpec`].
//!
//! Precedence, highest first: `--socket` / `--host --port` on the command
//! line; the option file's `[clustercheck]` then `[client]` group; the
//! defaults (Debian's socket, the OS user, no password). As with the
//! `mariadb` client, host `localhost` means the unix socket.

use std::path::{Path, PathBuf};

use super::endpoint::{ConnectSpec, Credentials, Endpoint, DEFAULT_PORT, DEFAULT_SOCKET};
use super::option_file::{OptionFile, OptionFileError};

/// Option-file groups read by `check` and `probe`, lowest precedence first.
pub const GROUPS: [&str; 2] = ["client", "clustercheck"];

/// What the command line says about the server, before the option file.
#[derive(Debug, Clone, Default)]
pub struct CliTarget {
    pub socket: Option<PathBuf>,
    pub host: Option<String>,
    pub port: Option<u16>,
}

/// Reads the option file (if any) and resolves the address and login.
pub fn resolve(
    cli: &CliTarget,
    defaults_file: Option<&Path>,
) -> Result<ConnectSpec, OptionFileError> {
    Ok(resolve_with(cli, &load(defaults_file)?))
}

/// The option file, or an empty one when none is given.
pub fn load(defaults_file: Option<&Path>) -> Result<OptionFile, OptionFileError> {
    match defaults_file {
        Some(p) => OptionFile::load(p),
        None => Ok(OptionFile::default()),
    }
}

/// The login from the option file (user defaults to the OS user).
pub fn credentials(file: &OptionFile) -> Credentials {
    let user = file
        .get(&GROUPS, "user")
        .filter(|v| !v.is_empty())
        .unwrap_or_else(os_user);
    // A bare `password` line means an empty password, not "unset".
    let password = file.get(&GROUPS, "password");
    Credentials { user, password }
}

/// [`resolve`] with an already parsed file: a pure function, unit-tested.
pub fn resolve_with(cli: &CliTarget, file: &OptionFile) -> ConnectSpec {
    let get = |k: &str| file.get(&GROUPS, k).filter(|v| !v.is_empty());
    ConnectSpec {
        endpoint: endpoint(cli, get("socket"), get("host"), get("port")),
        credentials: credentials(file),
    }
}

/// The login address: see the module comment for the precedence.
pub fn endpoint(
    cli: &CliTarget,
    file_socket: Option<String>,
    file_host: Option<String>,
    file_port: Option<String>,
) -> Endpoint {
    let file_port = file_port.and_then(|p| p.parse::<u16>().ok());
    if let Some(s) = &cli.socket {
        return Endpoint::Socket(s.clone());
    }
    let socket = || {
        Endpoint::Socket(
            file_socket
                .clone()
                .map_or_else(|| PathBuf::from(DEFAULT_SOCKET), PathBuf::from),
        )
    };
    let tcp = |host: String| Endpoint::Tcp {
        host,
        port: cli.port.or(file_port).unwrap_or(DEFAULT_PORT),
    };
    match (&cli.host, &file_host) {
        (Some(h), _) if h != "localhost" => tcp(h.clone()),
        (Some(_), _) => socket(),
        // A port alone on the command line means TCP on loopback.
        (None, _) if cli.port.is_some() => tcp("127.0.0.1".into()),
        (None, Some(h)) if h != "localhost" => tcp(h.clone()),
        _ => socket(),
    }
}

/// The OS user name, as the `mariadb` client defaults to it.
fn os_user() -> String {
    nix::unistd::User::from_uid(nix::unistd::geteuid())
        .ok()
        .flatten()
        .map_or_else(|| "root".to_string(), |u| u.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> OptionFile {
        OptionFile::parse(Path::new("/t.cnf"), text).unwrap()
    }

    #[test]
    fn the_command_line_beats_the_file_and_clustercheck_beats_client() {
        let f = file(
            "[client]\nuser=app\npassword=a\nhost=10.0.0.9\nport=3307\n\
             [clustercheck]\nuser=cc\npassword=b\n",
        );
        let spec = resolve_with(&CliTarget::default(), &f);
        assert_eq!(
            spec.endpoint,
            Endpoint::Tcp {
                host: "10.0.0.9".into(),
                port: 3307
            }
        );
        assert_eq!(spec.credentials.user, "cc");
        assert_eq!(spec.credentials.password.as_deref(), Some("b"));

        let cli = CliTarget {
            socket: Some("/tmp/s.sock".into()),
            ..CliTarget::default()
        };
        assert_eq!(
            resolve_with(&cli, &f).endpoint,
            Endpoint::Socket("/tmp/s.sock".into())
        );
        let cli = CliTarget {
            host: Some("127.0.0.1".into()),
            port: Some(4000),
            ..CliTarget::default()
        };
        assert_eq!(
            resolve_with(&cli, &f).endpoint,
            Endpoint::Tcp {
                host: "127.0.0.1".into(),
                port: 4000
            }
        );
    }

    #[test]
    fn localhost_and_no_address_mean_the_socket() {
        let f = file("[client]\nhost=localhost\nsocket=/x.sock\n");
        assert_eq!(
            resolve_with(&CliTarget::default(), &f).endpoint,
            Endpoint::Socket("/x.sock".into())
        );
        let spec = resolve_with(&CliTarget::default(), &OptionFile::default());
        assert_eq!(spec.endpoint, Endpoint::Socket(DEFAULT_SOCKET.into()));
        assert_eq!(spec.credentials.password, None);
        assert!(!spec.credentials.user.is_empty());
    }

    #[test]
    fn a_bare_port_means_tcp_on_loopback() {
        let cli = CliTarget {
            port: Some(3310),
            ..CliTarget::default()
        };
        assert_eq!(
            resolve_with(&cli, &OptionFile::default()).endpoint,
            Endpoint::Tcp {
                host: "127.0.0.1".into(),
                port: 3310
            }
        );
    }

    #[test]
    fn a_bare_password_line_is_an_empty_password() {
        let spec = resolve_with(&CliTarget::default(), &file("[client]\npassword\n"));
        assert_eq!(spec.credentials.password.as_deref(), Some(""));
    }
}
