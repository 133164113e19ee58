//! Plain restarts after a crash (issue 34 item 2). `grastate.dat` says
//! seqno -1 after an unclean stop, and a server started without
//! `--wsrep_start_position` (a container entrypoint, a hand start) gives
//! none either: the node cannot tell what its storage engine committed,
//! so it could neither rank itself in `pc.recovery` nor replay its
//! writeset cache. The systemd unit learns the position by running
//! `mariadbd --wsrep-recover` first (`galera_recovery`); the provider runs
//! that same step itself, with the server's own command line.
//!
//! Only where that is safe: inside `mariadbd`, with an SST method that
//! copies files (`rsync`, `mariabackup`, custom scripts), because then the
//! server connects the provider before it opens its storage engines, so
//! a second process may open and recover them; with `mysqldump` or `skip`
//! the engines are already open and the node keeps waiting with
//! instructions, as before.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use wsrep_abi::Gtid;

/// The line `mariadbd --wsrep-recover` logs (what `galera_recovery` reads).
const MARK: &str = "WSREP: Recovered position: ";

/// InnoDB's crash recovery of a large redo log can take minutes; past this
/// the child is killed and the node goes on without a position.
const DEADLINE: Duration = Duration::from_secs(600);

/// How often the child is polled.
const POLL: Duration = Duration::from_millis(100);

/// Whether the server opens its storage engines only after the provider
/// connects: true for the SST methods that copy files.
pub fn engines_opened_later(sst_method: Option<&str>) -> bool {
    matches!(sst_method, Some(m) if m != "mysqldump" && m != "skip")
}

/// The position in the output of `mariadbd --wsrep-recover` (its last
/// `Recovered position` line).
pub fn parse_recovered(log: &str) -> Option<Gtid> {
    log.lines().rev().find_map(|l| {
        let (_, rest) = l.split_once(MARK)?;
        // "uuid:seqno", possibly followed by MariaDB's own GTID
        // (",domain-server-seqno").
        let gtid = rest.trim().split([',', ' ']).next()?;
        gtid.parse().ok()
    })
}

/// Runs `mariadbd --wsrep-recover` with this process's own executable and
/// arguments, its log in `data_dir`, and returns the recovered position.
pub fn run_wsrep_recover(data_dir: &Path) -> Result<Gtid, String> {
    let exe = std::fs::read_link("/proc/self/exe").map_err(|e| format!("/proc/self/exe: {e}"))?;
    let cmdline =
        std::fs::read("/proc/self/cmdline").map_err(|e| format!("/proc/self/cmdline: {e}"))?;
    let mut args: Vec<OsString> = cmdline
        .split(|b| *b == 0)
        .skip(1)
        .filter(|a| !a.is_empty())
        .map(|a| OsString::from_vec(a.to_vec()))
        .collect();
    let log = data_dir.join(format!("lockstep-wsrep-recover.{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    args.push("--wsrep-recover".into());
    let mut log_arg = OsString::from("--log-error=");
    log_arg.push(log.as_os_str());
    args.push(log_arg);
    let mut child = Command::new(&exe)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting {}: {e}", exe.display()))?;
    let t0 = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if t0.elapsed() < DEADLINE => std::thread::sleep(POLL),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "mariadbd --wsrep-recover did not finish within {} s (its log: {})",
                    DEADLINE.as_secs(),
                    log.display()
                ));
            }
            Err(e) => return Err(format!("waiting for mariadbd --wsrep-recover: {e}")),
        }
    };
    let text = std::fs::read_to_string(&log)
        .map_err(|e| format!("reading {}: {e} (exit {status})", log.display()))?;
    match parse_recovered(&text) {
        Some(gtid) => {
            let _ = std::fs::remove_file(&log);
            Ok(gtid)
        }
        None => Err(format!(
            "mariadbd --wsrep-recover (exit {status}) logged no recovered position; see {}",
            log.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_recovered_position_is_read() {
        let log = "2026-11-27  6:01:02 0 [Note] InnoDB: Starting crash recovery\n\
                   2026-11-27  6:01:03 0 [Note] WSREP: Recovered position: \
                   5611c48c-9d03-4db4-933a-3c7676252ee4:6\n\
                   2026-11-27  6:01:03 0 [Note] WSREP: Recovered position: \
                   5611c48c-9d03-4db4-933a-3c7676252ee4:7,0-1-12\n";
        let g = parse_recovered(log).map(|g| g.to_string());
        assert_eq!(g.as_deref(), Some("5611c48c-9d03-4db4-933a-3c7676252ee4:7"));
        assert_eq!(parse_recovered("[Note] InnoDB: shutdown\n"), None);
        assert_eq!(
            parse_recovered("WSREP: Recovered position: garbage\n"),
            None
        );
    }

    #[test]
    fn only_file_copying_sst_methods_open_the_engines_later() {
        assert!(engines_opened_later(Some("rsync")));
        assert!(engines_opened_later(Some("mariabackup")));
        assert!(!engines_opened_later(Some("mysqldump")));
        assert!(!engines_opened_later(Some("skip")));
        assert!(!engines_opened_later(None));
    }
}
