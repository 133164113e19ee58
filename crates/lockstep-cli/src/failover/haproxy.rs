//! Debian's HAProxy in front of the cluster, with README's configuration:
//! a TCP proxy whose servers are checked by `option httpchk` against each
//! node's `lockstep check`, and whose sessions on a server marked down are
//! shut (`on-marked-down shutdown-sessions`). Two layouts: every node
//! active (`balance leastconn`), or one writer with the others `backup`.
//! HAProxy runs in the foreground (`-db`) and logs to its stdout, which
//! this module reads so that server state changes land on the timeline.

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use super::child::{follow, log_only, output_pipes, KillOnDrop, LineEvent};
use super::events::Events;

/// How a server's health is polled: README's `inter 1s fall 2 rise 2`
/// (docs/failover.md measured 2s against 1s: 1s took a second off every
/// outage and answered no write from a node that was not ready).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckTiming {
    pub inter_ms: u64,
    pub fall: u32,
    pub rise: u32,
}

impl CheckTiming {
    /// README's settings.
    pub const README: CheckTiming = CheckTiming {
        inter_ms: 1000,
        fall: 2,
        rise: 2,
    };
}

/// One backend server: where MariaDB listens and where its check listens.
#[derive(Debug, Clone)]
pub struct Server {
    pub name: String,
    pub addr: String,
    pub port: u16,
    pub check_port: u16,
}

/// The configuration file's text. `single_writer` marks every server
/// after the first `backup`.
pub fn config(
    listen: &str,
    servers: &[Server],
    single_writer: bool,
    timing: CheckTiming,
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Written by `lockstep failover-bench`: README's HAProxy section.\n\
         global\n    log stdout format raw local0 info\n    maxconn 1024\n\n\
         defaults\n    log global\n    mode tcp\n    timeout connect 2s\n    \
         timeout client 8h\n    timeout server 8h\n    timeout check 2s\n"
    );
    // README: the same section; a single writer only marks the others
    // `backup` (HAProxy then uses the first backup alone).
    let _ = writeln!(
        s,
        "listen galera\n    bind {listen}\n    mode tcp\n    balance leastconn\n    \
         option tcpka\n    option httpchk GET /\n    http-check expect status 200\n    \
         default-server check inter {}ms fall {} rise {} on-marked-down shutdown-sessions{}",
        timing.inter_ms,
        timing.fall,
        timing.rise,
        // A single writer stays single after a failback: when the writer is
        // up again, the sessions left on a backup are closed, not kept.
        if single_writer {
            " on-marked-up shutdown-backup-sessions"
        } else {
            ""
        }
    );
    for (i, srv) in servers.iter().enumerate() {
        let backup = if single_writer && i > 0 {
            " backup"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "    server {} {}:{} port {}{backup}",
            srv.name, srv.addr, srv.port, srv.check_port
        );
    }
    s
}

/// A server marked up or down, from HAProxy's log.
fn server_state_change(line: &str) -> Option<String> {
    (line.contains("is DOWN") || line.contains("is UP")).then(|| line.trim().to_string())
}

/// A running HAProxy.
pub struct Haproxy {
    _child: KillOnDrop,
}

impl Haproxy {
    /// Checks the configuration (`haproxy -c`), then starts it; state
    /// changes it logs go to `events`.
    pub fn start(cfg_path: &Path, text: &str, events: Events) -> Result<Haproxy, String> {
        std::fs::write(cfg_path, text)
            .map_err(|e| format!("writing {}: {e}", cfg_path.display()))?;
        let check = Command::new("haproxy")
            .arg("-c")
            .arg("-f")
            .arg(cfg_path)
            .output()
            .map_err(|e| format!("haproxy: {e} (apt-get install haproxy)"))?;
        if !check.status.success() {
            return Err(format!(
                "haproxy -c -f {}: {}{}",
                cfg_path.display(),
                String::from_utf8_lossy(&check.stdout),
                String::from_utf8_lossy(&check.stderr)
            ));
        }
        let mut child = Command::new("haproxy")
            .arg("-db")
            .arg("-f")
            .arg(cfg_path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("haproxy: {e}"))?;
        // The log goes to stdout; stderr repeats state changes as warnings,
        // which are kept in the log file but not put on the timeline twice.
        let [stdout, stderr] = output_pipes(&mut child);
        let pipes: [(_, LineEvent); 2] = [(stdout, server_state_change), (stderr, log_only)];
        for (pipe, event) in pipes {
            if let Some(pipe) = pipe {
                follow(pipe, events.clone(), "haproxy".into(), event);
            }
        }
        Ok(Haproxy {
            _child: KillOnDrop(child),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn servers() -> Vec<Server> {
        (1..=3)
            .map(|i| Server {
                name: format!("node{i}"),
                addr: format!("10.0.0.{i}"),
                port: 3306,
                check_port: 9200,
            })
            .collect()
    }

    #[test]
    fn the_configuration_is_readmes_with_every_server_checked() {
        let text = config("127.0.0.1:3306", &servers(), false, CheckTiming::README);
        assert!(text.contains("balance leastconn"));
        assert!(text.contains("inter 1000ms fall 2 rise 2"));
        assert!(text.contains("option httpchk GET /"));
        assert!(text.contains("http-check expect status 200"));
        assert!(text.contains(
            "default-server check inter 1000ms fall 2 rise 2 on-marked-down shutdown-sessions"
        ));
        assert!(text.contains("server node3 10.0.0.3:3306 port 9200\n"));
        assert!(!text.contains("backup"));
    }

    #[test]
    fn only_server_state_changes_reach_the_timeline() {
        let down = "Server galera/node1 is DOWN, reason: Layer7 wrong status, code: 503 ";
        assert_eq!(server_state_change(down).as_deref(), Some(down.trim()));
        assert!(server_state_change("Proxy galera started.").is_none());
    }

    #[test]
    fn a_single_writer_has_the_others_as_backups() {
        let text = config("127.0.0.1:3306", &servers(), true, CheckTiming::README);
        assert!(text.contains("server node1 10.0.0.1:3306 port 9200\n"));
        assert!(
            text.contains("on-marked-down shutdown-sessions on-marked-up shutdown-backup-sessions")
        );
        assert!(text.contains("server node2 10.0.0.2:3306 port 9200 backup\n"));
        assert!(text.contains("server node3 10.0.0.3:3306 port 9200 backup\n"));
    }
}
