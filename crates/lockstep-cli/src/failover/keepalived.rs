//! Debian's keepalived, one per node, each in its node's network namespace
//! on the shared bridge, with README's configuration: a VRRP instance whose
//! virtual IP sits on the highest-priority healthy node, health from
//! `lockstep check --once` as a `vrrp_script`. A node whose check fails
//! enters FAULT and gives the address up; the next one takes it with a
//! gratuitous ARP. `nopreempt`: a node that comes back does not take the
//! address back (that would be a second outage for nothing).

use std::path::Path;
use std::process::{Child, Command, Stdio};

use super::child::{follow, output_pipes};
use super::events::Events;

/// One node's part of the configuration.
#[derive(Debug, Clone)]
pub struct Instance {
    pub name: String,
    pub interface: String,
    pub priority: u32,
    /// The health script's command line.
    pub check: String,
    pub vip: String,
    pub router_id: u8,
}

/// The script's polling: README's `interval 1 timeout 3 fall 2 rise 2`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScriptTiming {
    pub interval_s: u32,
    pub fall: u32,
    pub rise: u32,
}

impl ScriptTiming {
    pub const README: ScriptTiming = ScriptTiming {
        interval_s: 1,
        fall: 2,
        rise: 2,
    };
}

/// The configuration file's text for one node.
pub fn config(i: &Instance, timing: ScriptTiming) -> String {
    format!(
        "# Written by `lockstep failover-bench`: README's keepalived section.\n\
         global_defs {{\n    router_id {name}\n    script_user root\n}}\n\n\
         vrrp_script chk_lockstep {{\n    script \"{check}\"\n    interval {interval}\n    \
         timeout 3\n    fall {fall}\n    rise {rise}\n}}\n\n\
         vrrp_instance galera_vip {{\n    state BACKUP\n    nopreempt\n    interface {iface}\n    \
         virtual_router_id {rid}\n    priority {prio}\n    advert_int 1\n    \
         virtual_ipaddress {{\n        {vip}/24\n    }}\n    \
         track_script {{\n        chk_lockstep\n    }}\n}}\n",
        name = i.name,
        check = i.check,
        interval = timing.interval_s,
        fall = timing.fall,
        rise = timing.rise,
        iface = i.interface,
        rid = i.router_id,
        prio = i.priority,
        vip = i.vip,
    )
}

/// The VRRP state entered (`MASTER STATE`, `FAULT STATE` ...), from
/// keepalived's log.
fn vrrp_state(line: &str) -> Option<String> {
    if !line.contains("STATE") {
        return None;
    }
    Some(line.split("Entering ").nth(1)?.trim().to_string())
}

/// keepalived running in one namespace.
pub struct Keepalived {
    child: Child,
    /// Its VRRP and checker children's pid files: a child can outlive a
    /// parent that did not stop in time.
    child_pids: Vec<std::path::PathBuf>,
}

impl Keepalived {
    /// Starts keepalived (`program`: `keepalived` inside a node's
    /// namespace) with the configuration `text`, written to
    /// `dir/keepalived-<name>.conf`; its state changes go to `events`.
    pub fn start(
        mut program: Command,
        dir: &Path,
        name: &str,
        text: &str,
        events: Events,
    ) -> Result<Keepalived, String> {
        let cfg = dir.join(format!("keepalived-{name}.conf"));
        std::fs::write(&cfg, text).map_err(|e| format!("writing {}: {e}", cfg.display()))?;
        let pid = |what: &str| dir.join(format!("keepalived-{name}{what}.pid"));
        let mut child = program
            .args(["--dont-fork", "--log-console", "--log-detail"])
            .arg("--use-file")
            .arg(&cfg)
            .arg("--pid")
            .arg(pid(""))
            .arg("--vrrp_pid")
            .arg(pid("-vrrp"))
            .arg("--checkers_pid")
            .arg(pid("-checkers"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("keepalived: {e} (apt-get install keepalived)"))?;
        for pipe in output_pipes(&mut child).into_iter().flatten() {
            follow(
                pipe,
                events.clone(),
                format!("keepalived {name}"),
                vrrp_state,
            );
        }
        Ok(Keepalived {
            child,
            child_pids: vec![pid("-vrrp"), pid("-checkers")],
        })
    }
}

impl Drop for Keepalived {
    fn drop(&mut self) {
        // SIGTERM lets it remove the address; the namespace goes anyway.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        // Read now: a parent that stops removes them.
        let children: Vec<i32> = self
            .child_pids
            .iter()
            .filter_map(|p| std::fs::read_to_string(p).ok()?.trim().parse().ok())
            .collect();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        for pid in children {
            // Only a process that is still keepalived: the pid may be reused.
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            if comm.trim() == "keepalived" {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

/// Which namespace holds `vip` now, by asking each (`ip -n NS addr`).
pub fn holder(namespaces: &[(String, String)], vip: &str) -> Option<String> {
    namespaces.iter().find_map(|(name, ns)| {
        let out = Command::new("ip")
            .args(["-n", ns, "-o", "addr", "show"])
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        text.contains(&format!(" {vip}/")).then(|| name.clone())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vrrp_states_are_read_from_the_log() {
        let line = "Sun Nov 29 16:25:01 2026: (galera_vip) Entering MASTER STATE";
        assert_eq!(vrrp_state(line).as_deref(), Some("MASTER STATE"));
        assert!(vrrp_state("(galera_vip) received lower priority advert").is_none());
    }

    #[test]
    fn the_configuration_tracks_the_check_and_does_not_preempt() {
        let text = config(
            &Instance {
                name: "node1".into(),
                interface: "eth0".into(),
                priority: 150,
                check: "/usr/bin/lockstep check --once --defaults-file /x.cnf".into(),
                vip: "10.0.0.100".into(),
                router_id: 51,
            },
            ScriptTiming::README,
        );
        assert!(text.contains("script \"/usr/bin/lockstep check --once --defaults-file /x.cnf\""));
        assert!(text.contains("interval 1\n    timeout 3\n    fall 2\n    rise 2"));
        assert!(text.contains("state BACKUP\n    nopreempt"));
        assert!(text.contains("priority 150"));
        assert!(text.contains("10.0.0.100/24"));
        assert!(text.contains("track_script {\n        chk_lockstep"));
    }
}
