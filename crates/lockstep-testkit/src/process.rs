//! Spawning, probing and signalling mariadbd processes.

use std::fs::OpenOptions;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::config::NodeConfig;

/// The server binary: `mariadbd` from PATH, else Debian's /usr/sbin/mariadbd.
pub(crate) fn server_binary() -> PathBuf {
    let in_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("mariadbd"))
            .find(|p| p.is_file())
    });
    in_path.unwrap_or_else(|| PathBuf::from("/usr/sbin/mariadbd"))
}

/// Starts mariadbd with the node's my.cnf. With `detach`, the server gets a
/// session of its own (so it outlives the caller and its terminal); stdin is
/// closed and stdout/stderr go to the node's console log either way.
pub(crate) fn spawn(
    node: &NodeConfig,
    extra: &[&str],
    detach: bool,
    env: &[(String, String)],
) -> io::Result<Child> {
    let console = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&node.console_log)?;
    // A node placed in a network namespace (the WAN benchmark's sites)
    // starts through `ip netns exec`, which execs the server in place.
    let mut cmd = match &node.place.netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(server_binary());
            c
        }
        None => Command::new(server_binary()),
    };
    // Scripts the cluster provides (`<cluster dir>/bin`, e.g. a custom
    // `wsrep_sst_<method>` a test installs while the servers run) come
    // first in the server's PATH, which MariaDB searches for its SST
    // scripts. Prepended whether or not it exists yet.
    if let Some(bin) = node.dir.parent().map(|d| d.join("bin")) {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![bin];
        dirs.extend(std::env::split_paths(&path));
        if let Ok(joined) = std::env::join_paths(dirs) {
            cmd.env("PATH", joined);
        }
    }
    // What the test asked for (`Node::set_env`: `LD_PRELOAD` of
    // libfaketime for the clock nemeses).
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    // --defaults-file must come first.
    cmd.arg(format!("--defaults-file={}", node.defaults_file.display()))
        .args(extra)
        .current_dir(&node.dir)
        .stdin(Stdio::null())
        .stdout(console.try_clone()?)
        .stderr(console);
    if detach {
        // SAFETY: the closure runs in the forked child before exec and only
        // calls setsid(2), which is async-signal-safe and touches no memory
        // shared with the parent.
        unsafe {
            cmd.pre_exec(|| nix::unistd::setsid().map(|_| ()).map_err(io::Error::from));
        }
    }
    cmd.spawn()
}

/// True while `pid` exists and is not a zombie.
pub(crate) fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => match stat.rfind(')') {
            Some(i) => !matches!(stat[i + 1..].trim_start().chars().next(), Some('Z' | 'X')),
            None => false,
        },
        Err(_) => false,
    }
}

/// True when `pid` is a live mariadbd started with this node's my.cnf
/// (guards against signalling a recycled pid).
pub(crate) fn is_node_process(pid: u32, node: &NodeConfig) -> bool {
    if !alive(pid) {
        return false;
    }
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let want = format!("--defaults-file={}", node.defaults_file.display());
    cmdline.split(|b| *b == 0).any(|arg| arg == want.as_bytes())
}

/// The pid in the node's pid file, if it names the node's live server.
pub(crate) fn pid_from_file(node: &NodeConfig) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(&node.pid_file)
        .ok()?
        .trim()
        .parse()
        .ok()?;
    is_node_process(pid, node).then_some(pid)
}

/// Sends `sig`; a process that is already gone is not an error.
pub(crate) fn signal(pid: u32, sig: Signal) -> io::Result<()> {
    match kill(Pid::from_raw(pid as i32), sig) {
        Ok(()) | Err(nix::errno::Errno::ESRCH) => Ok(()),
        Err(e) => Err(io::Error::from(e)),
    }
}

/// The last `lines` lines of a log file (reads at most the last 64 KiB).
pub fn log_tail(path: &Path, lines: usize) -> String {
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(64 * 1024);
    if f.seek(SeekFrom::Start(start)).is_err() {
        return String::new();
    }
    let mut buf = Vec::new();
    if f.read_to_end(&mut buf).is_err() {
        return String::new();
    }
    let text = String::from_utf8_lossy(&buf);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_alive_and_bogus_pid_is_not() {
        assert!(alive(std::process::id()));
        assert!(!alive(u32::MAX - 1));
    }

    #[test]
    fn tail_returns_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log");
        let text: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&p, text).unwrap();
        let tail = log_tail(&p, 3);
        assert_eq!(tail, "line 98\nline 99\nline 100");
        assert_eq!(log_tail(&dir.path().join("missing"), 3), "");
    }
}
