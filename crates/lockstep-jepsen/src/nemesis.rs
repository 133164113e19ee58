//! Faults on a live cluster. Each [`Nemesis`] injects its fault, holds it
//! for a bounded time and heals it itself (restarting killed nodes,
//! resuming paused ones, lifting isolation) before [`Nemesis::inject`]
//! returns; whether the cluster then recovers is the run's to check.
//!
//! Two kinds of partition: `isolate-*` use `gmcast.isolate`, which both
//! providers honour (the isolated node drops every peer connection until
//! it is lifted); `cut-*` drop packets in the network between nodes placed
//! in network namespaces ([`Net`]), which the provider cannot see coming.

use std::time::{Duration, Instant};

use lockstep_testkit::Cluster;

use crate::disks::{Disks, TEAR};
use crate::net::Net;
use lockstep_lazyfs::Faults;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// How long a pause or an isolation lasts: longer than the suspect
/// timeout (5 s by default for both providers), so the others act on it.
pub const HOLD: Duration = Duration::from_secs(8);
/// Time between killing a node and starting it again.
const DOWN: Duration = Duration::from_secs(2);

/// How nodes are started after a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// `mariadbd --defaults-file=…`, as a container entrypoint does.
    Plain,
    /// `--wsrep-recover`, then `--wsrep_start_position`, as the systemd
    /// unit does.
    Systemd,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nemesis {
    /// No fault: the healthy cluster (P4, stale reads).
    None,
    /// kill -9 of the leader, then a plain restart.
    KillOne,
    /// kill -9 of every node at once, then restart.
    CrashAll(Restart),
    /// SIGSTOP of the Raft leader (node 1 for Galera) for [`HOLD`].
    PauseLeader,
    /// SIGSTOP of a follower for [`HOLD`].
    PauseFollower,
    /// The leader cut off from the others (a minority of one).
    IsolateLeader,
    /// A follower cut off from the others (minority/majority).
    IsolateFollower,
    /// The network cuts a follower off from the two others
    /// (minority/majority).
    CutMinority,
    /// The network cuts the leader off from both followers.
    CutLeader,
    /// A bridge: the leader and one follower cannot reach each other, the
    /// other follower reaches both.
    CutBridge,
    /// The leader isolated, then every node killed during the cut, then
    /// all restarted the systemd way.
    PartitionCrash,
    /// A follower paused, the other two killed meanwhile and restarted the
    /// systemd way, then the paused one resumed.
    PauseCrash,
    /// kill -9 of a follower (not the leader), then a plain restart.
    KillFollower,
    /// Every node killed in quick succession, a follower first and the
    /// leader last, [`SUCCESSION`] apart (Jepsen's first Galera finding),
    /// then all restarted.
    CrashSuccession(Restart),
    /// The leader loses power: killed, and what its disk had not synced
    /// is gone ([`Disks`]); it boots and starts the systemd way.
    PowerLossOne,
    /// Every node loses power at once, the page written last torn; all
    /// boot and start the systemd way.
    PowerLossAll,
    /// The leader's disk is full (`ENOSPC` on every write) for [`HOLD`].
    DiskFull,
    /// The leader's disk fails (`EIO` on every write and fsync) for
    /// [`HOLD`].
    DiskEio,
    /// Every fsync on the leader's disk takes [`SLOW_FSYNC`], for [`HOLD`].
    SlowFsync,
    /// A follower gets a fraction of the CPU for [`HOLD`]: stopped and
    /// continued in [`SLOW_CYCLE`] cycles (a tight CPU quota).
    SlowNode,
    /// A follower leaves cleanly and comes back with an empty datadir,
    /// joining by SST under load.
    LeaveJoin,
    /// Two faults at once: a follower isolated, and the leader killed
    /// during the isolation (no quorum left), then both healed.
    IsolateAndKill,
    /// A follower restarts with its clock running at twice real speed
    /// (libfaketime: wall clock, monotonic clock and sleeps alike), serves
    /// the load for [`CLOCK_HOLD`], then restarts with a true clock.
    ClockFast,
    /// The same at half speed.
    ClockSlow,
    /// The same with a clock that leaps forwards and backwards
    /// ([`CLOCK_LEAPS`], one every [`LEAP_EVERY`]).
    ClockJumps,
}

/// How long a node runs on a faulty clock.
pub const CLOCK_HOLD: Duration = Duration::from_secs(24);
/// The offsets from real time (s) that [`Nemesis::ClockJumps`] steps
/// through: leaps of 5 s forward, 8 s back, 5 s forward, 10 s forward,
/// 12 s back.
pub const CLOCK_LEAPS: [i64; 6] = [0, 5, -3, 2, 12, 0];
/// Time between two leaps.
pub const LEAP_EVERY: Duration = Duration::from_secs(4);
/// libfaketime, as Debian installs it (`scripts/setup.sh`).
pub const FAKETIME_LIB: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// [`Nemesis::SlowNode`]'s cycle: stopped for the first part, running for
/// the second (40 % of the CPU).
pub const SLOW_CYCLE: (Duration, Duration) = (Duration::from_millis(60), Duration::from_millis(40));

/// An fsync's stall under [`Nemesis::SlowFsync`]: a disk that is slow,
/// not stuck (under the cache writer's 30 s deadline).
pub const SLOW_FSYNC: Duration = Duration::from_millis(800);

/// Time between two kills of [`Nemesis::CrashSuccession`]: the survivors
/// are still settling the last view when the next one dies.
const SUCCESSION: Duration = Duration::from_millis(1500);

impl Nemesis {
    pub const ALL: [Nemesis; 27] = [
        Nemesis::None,
        Nemesis::KillOne,
        Nemesis::CrashAll(Restart::Plain),
        Nemesis::CrashAll(Restart::Systemd),
        Nemesis::PauseLeader,
        Nemesis::PauseFollower,
        Nemesis::IsolateLeader,
        Nemesis::IsolateFollower,
        Nemesis::CutMinority,
        Nemesis::CutLeader,
        Nemesis::CutBridge,
        Nemesis::PartitionCrash,
        Nemesis::PauseCrash,
        Nemesis::KillFollower,
        Nemesis::CrashSuccession(Restart::Plain),
        Nemesis::CrashSuccession(Restart::Systemd),
        Nemesis::PowerLossOne,
        Nemesis::PowerLossAll,
        Nemesis::DiskFull,
        Nemesis::DiskEio,
        Nemesis::SlowFsync,
        Nemesis::SlowNode,
        Nemesis::LeaveJoin,
        Nemesis::IsolateAndKill,
        Nemesis::ClockFast,
        Nemesis::ClockSlow,
        Nemesis::ClockJumps,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Nemesis::None => "none",
            Nemesis::KillOne => "kill-one",
            Nemesis::CrashAll(Restart::Plain) => "crash-all-plain",
            Nemesis::CrashAll(Restart::Systemd) => "crash-all-systemd",
            Nemesis::PauseLeader => "pause-leader",
            Nemesis::PauseFollower => "pause-follower",
            Nemesis::IsolateLeader => "isolate-leader",
            Nemesis::IsolateFollower => "isolate-follower",
            Nemesis::CutMinority => "cut-minority",
            Nemesis::CutLeader => "cut-leader",
            Nemesis::CutBridge => "cut-bridge",
            Nemesis::PartitionCrash => "partition-crash",
            Nemesis::PauseCrash => "pause-crash",
            Nemesis::KillFollower => "kill-follower",
            Nemesis::CrashSuccession(Restart::Plain) => "crash-succession-plain",
            Nemesis::CrashSuccession(Restart::Systemd) => "crash-succession-systemd",
            Nemesis::PowerLossOne => "power-loss-one",
            Nemesis::PowerLossAll => "power-loss-all",
            Nemesis::DiskFull => "disk-full",
            Nemesis::DiskEio => "disk-eio",
            Nemesis::SlowFsync => "slow-fsync",
            Nemesis::SlowNode => "slow-node",
            Nemesis::LeaveJoin => "leave-join-sst",
            Nemesis::IsolateAndKill => "isolate-and-kill",
            Nemesis::ClockFast => "clock-fast",
            Nemesis::ClockSlow => "clock-slow",
            Nemesis::ClockJumps => "clock-jumps",
        }
    }

    pub fn from_name(name: &str) -> Option<Nemesis> {
        Nemesis::ALL.into_iter().find(|n| n.name() == name)
    }

    /// Whether processes die: only then does the durability setting
    /// (`innodb_flush_log_at_trx_commit`) matter.
    pub fn crashes(self) -> bool {
        matches!(
            self,
            Nemesis::KillOne
                | Nemesis::CrashAll(_)
                | Nemesis::PartitionCrash
                | Nemesis::PauseCrash
                | Nemesis::KillFollower
                | Nemesis::CrashSuccession(_)
                | Nemesis::PowerLossOne
                | Nemesis::PowerLossAll
                | Nemesis::IsolateAndKill
        )
    }

    /// Whether power is cut: only then does `lockstep.cache_sync` matter.
    pub fn cuts_power(self) -> bool {
        matches!(self, Nemesis::PowerLossOne | Nemesis::PowerLossAll)
    }

    /// Whether the datadirs must sit on the power-loss file system
    /// ([`Disks`]).
    pub fn needs_lazyfs(self) -> bool {
        self.cuts_power()
            || matches!(
                self,
                Nemesis::DiskFull | Nemesis::DiskEio | Nemesis::SlowFsync
            )
    }

    /// Whether the nodes must sit in network namespaces ([`Net`]).
    pub fn needs_netns(self) -> bool {
        matches!(
            self,
            Nemesis::CutMinority | Nemesis::CutLeader | Nemesis::CutBridge
        )
    }

    /// Injects the fault and heals it; returns what it did, one line per
    /// step with its time. An error is a step that could not be done (a
    /// node that would not start): the run reports it.
    pub fn inject(
        self,
        cluster: &mut Cluster,
        net: Option<&mut Net>,
        disks: Option<&mut Disks>,
        log: &mut Vec<String>,
    ) -> Result<(), String> {
        let t0 = Instant::now();
        let mut note = |s: String| log.push(format!("{:6.1} s  {s}", t0.elapsed().as_secs_f64()));
        let leader = leader(cluster);
        let follower = (leader + 1) % cluster.len();
        match self {
            Nemesis::None => {
                std::thread::sleep(HOLD);
                note("no fault".into());
            }
            Nemesis::KillOne => {
                note(format!("kill -9 node {} (leader)", leader + 1));
                kill_nodes(cluster, &[leader])?;
                std::thread::sleep(DOWN);
                note(format!("start node {} plainly", leader + 1));
                restart(cluster, &[leader], Restart::Plain, &mut note)?;
            }
            Nemesis::KillFollower => {
                note(format!("kill -9 node {} (a follower)", follower + 1));
                kill_nodes(cluster, &[follower])?;
                std::thread::sleep(DOWN);
                restart(cluster, &[follower], Restart::Plain, &mut note)?;
            }
            Nemesis::CrashSuccession(how) => {
                let mut order: Vec<usize> = (0..cluster.len()).filter(|&i| i != leader).collect();
                order.push(leader);
                for (k, &i) in order.iter().enumerate() {
                    if k > 0 {
                        std::thread::sleep(SUCCESSION);
                    }
                    note(format!(
                        "kill -9 node {}{}",
                        i + 1,
                        if i == leader { " (leader)" } else { "" }
                    ));
                    kill_nodes(cluster, &[i])?;
                }
                std::thread::sleep(DOWN);
                restart(cluster, &order, how, &mut note)?;
            }
            Nemesis::CrashAll(how) => {
                note("kill -9 every node".into());
                let all: Vec<usize> = (0..cluster.len()).collect();
                kill_nodes(cluster, &all)?;
                std::thread::sleep(DOWN);
                restart(cluster, &all, how, &mut note)?;
            }
            Nemesis::PauseLeader | Nemesis::PauseFollower => {
                let i = if self == Nemesis::PauseLeader {
                    leader
                } else {
                    follower
                };
                note(format!("SIGSTOP node {}", i + 1));
                signal(cluster, i, Signal::SIGSTOP)?;
                std::thread::sleep(HOLD);
                note(format!("SIGCONT node {}", i + 1));
                signal(cluster, i, Signal::SIGCONT)?;
            }
            Nemesis::IsolateLeader | Nemesis::IsolateFollower => {
                let i = if self == Nemesis::IsolateLeader {
                    leader
                } else {
                    follower
                };
                note(format!("isolate node {}", i + 1));
                isolate(cluster, i, true)?;
                std::thread::sleep(HOLD);
                note(format!("heal node {}", i + 1));
                isolate(cluster, i, false)?;
            }
            Nemesis::CutMinority | Nemesis::CutLeader | Nemesis::CutBridge => {
                let net = net.ok_or("this nemesis needs the nodes in network namespaces")?;
                let other = (follower + 1) % cluster.len();
                match self {
                    Nemesis::CutMinority => {
                        note(format!("network: cut node {} off", follower + 1));
                        net.isolate(follower)?;
                    }
                    Nemesis::CutLeader => {
                        note(format!("network: cut node {} (leader) off", leader + 1));
                        net.isolate(leader)?;
                    }
                    _ => {
                        note(format!(
                            "network: cut node {} (leader) from node {}; node {} reaches both",
                            leader + 1,
                            other + 1,
                            follower + 1
                        ));
                        net.cut(leader, other)?;
                    }
                }
                std::thread::sleep(HOLD);
                note("network: heal".into());
                net.heal()?;
            }
            Nemesis::PartitionCrash => {
                note(format!("isolate node {} (leader)", leader + 1));
                isolate(cluster, leader, true)?;
                std::thread::sleep(Duration::from_secs(3));
                note("kill -9 every node during the cut".into());
                let all: Vec<usize> = (0..cluster.len()).collect();
                kill_nodes(cluster, &all)?;
                std::thread::sleep(DOWN);
                restart(cluster, &all, Restart::Systemd, &mut note)?;
            }
            Nemesis::PowerLossOne | Nemesis::PowerLossAll => {
                let disks = disks.ok_or("this nemesis needs the power-loss file system")?;
                let (nodes, tear): (Vec<usize>, _) = if self == Nemesis::PowerLossOne {
                    note(format!("power loss of node {} (leader)", leader + 1));
                    (vec![leader], None)
                } else {
                    note("power loss of every node, the last page torn".into());
                    ((0..cluster.len()).collect(), Some(TEAR))
                };
                kill_nodes(cluster, &nodes)?;
                for &i in &nodes {
                    if let Some(st) = disks.stats(i) {
                        note(format!(
                            "node {}: {} writes, {} fsyncs, {} directory fsyncs since its boot",
                            i + 1,
                            st.writes,
                            st.fsyncs,
                            st.dir_fsyncs
                        ));
                    }
                    let r = disks.power_cut(i, tear)?;
                    note(format!(
                        "node {}: {} unsynced bytes and {} name changes lost{}{}",
                        i + 1,
                        r.dropped_bytes,
                        r.undone_names,
                        r.torn
                            .map(|(f, at, n)| format!(
                                ", {n} bytes of {} at {at} torn",
                                f.display()
                            ))
                            .unwrap_or_default(),
                        if r.errors.is_empty() {
                            String::new()
                        } else {
                            format!("; undo errors: {:?}", r.errors)
                        }
                    ));
                }
                std::thread::sleep(DOWN);
                restart(cluster, &nodes, Restart::Systemd, &mut note)?;
            }
            Nemesis::DiskFull | Nemesis::DiskEio | Nemesis::SlowFsync => {
                let disks = disks.ok_or("this nemesis needs the power-loss file system")?;
                let faults = match self {
                    Nemesis::DiskFull => Faults::disk_full(),
                    Nemesis::DiskEio => Faults {
                        fsync: Some(nix::libc::EIO),
                        ..Faults::write_errors()
                    },
                    _ => Faults::slow_fsync(SLOW_FSYNC),
                };
                note(format!("node {} (leader): disk {faults:?}", leader + 1));
                disks.set_faults(leader, faults)?;
                std::thread::sleep(HOLD);
                note(format!("node {}: disk healed", leader + 1));
                disks.set_faults(leader, Faults::none())?;
                if !cluster.node_mut(leader).is_running() {
                    let tail = cluster.node(leader).log_tail(40);
                    let why = tail
                        .lines()
                        .rev()
                        .find(|l| l.contains("ERROR"))
                        .unwrap_or("no error line in its log");
                    note(format!("node {} had stopped: {why}", leader + 1));
                    restart(cluster, &[leader], Restart::Plain, &mut note)?;
                } else if cluster
                    .node(leader)
                    .status("wsrep_ready")
                    .ok()
                    .flatten()
                    .as_deref()
                    != Some("ON")
                {
                    // Out of the cluster (a failed cache write): an
                    // operator restarts it once the disk is fixed.
                    note(format!("node {} not ready: restarting it", leader + 1));
                    cluster
                        .node_mut(leader)
                        .restart()
                        .map_err(|e| format!("restarting node {}: {e}", leader + 1))?;
                }
            }
            Nemesis::SlowNode => {
                note(format!(
                    "node {} at 40 % CPU (SIGSTOP {:?}, SIGCONT {:?})",
                    follower + 1,
                    SLOW_CYCLE.0,
                    SLOW_CYCLE.1
                ));
                let t = Instant::now();
                let mut result = Ok(());
                while t.elapsed() < HOLD && result.is_ok() {
                    result = signal(cluster, follower, Signal::SIGSTOP);
                    std::thread::sleep(SLOW_CYCLE.0);
                    // Always continued, even after a failed stop.
                    let cont = signal(cluster, follower, Signal::SIGCONT);
                    result = result.and(cont);
                    std::thread::sleep(SLOW_CYCLE.1);
                }
                note(format!("node {} at full speed", follower + 1));
                result?;
            }
            Nemesis::LeaveJoin => {
                note(format!("node {} leaves (clean shutdown)", follower + 1));
                let node = cluster.node_mut(follower);
                node.stop()
                    .map_err(|e| format!("stopping node {}: {e}", follower + 1))?;
                let datadir = node.datadir().to_path_buf();
                let entries = std::fs::read_dir(&datadir)
                    .map_err(|e| format!("{}: {e}", datadir.display()))?;
                for e in entries.flatten() {
                    let p = e.path();
                    let removed = if p.is_dir() {
                        std::fs::remove_dir_all(&p)
                    } else {
                        std::fs::remove_file(&p)
                    };
                    removed.map_err(|e| format!("{}: {e}", p.display()))?;
                }
                std::thread::sleep(DOWN);
                note(format!(
                    "node {} joins again with an empty datadir (SST)",
                    follower + 1
                ));
                cluster
                    .node_mut(follower)
                    .spawn(&[])
                    .map_err(|e| format!("starting node {}: {e}", follower + 1))?;
            }
            Nemesis::IsolateAndKill => {
                note(format!("isolate node {}", follower + 1));
                isolate(cluster, follower, true)?;
                std::thread::sleep(Duration::from_secs(2));
                note(format!(
                    "kill -9 node {} (leader) during the isolation",
                    leader + 1
                ));
                kill_nodes(cluster, &[leader])?;
                std::thread::sleep(HOLD);
                note(format!("heal node {}", follower + 1));
                isolate(cluster, follower, false)?;
                restart(cluster, &[leader], Restart::Plain, &mut note)?;
            }
            Nemesis::ClockFast | Nemesis::ClockSlow | Nemesis::ClockJumps => {
                faulty_clock(self, cluster, follower, &mut note)?;
            }
            Nemesis::PauseCrash => {
                note(format!("SIGSTOP node {}", follower + 1));
                signal(cluster, follower, Signal::SIGSTOP)?;
                std::thread::sleep(Duration::from_secs(2));
                let others: Vec<usize> = (0..cluster.len()).filter(|&i| i != follower).collect();
                note("kill -9 the two others during the pause".into());
                let killed = kill_nodes(cluster, &others);
                std::thread::sleep(DOWN);
                let restarted =
                    killed.and_then(|()| restart(cluster, &others, Restart::Systemd, &mut note));
                note(format!("SIGCONT node {}", follower + 1));
                signal(cluster, follower, Signal::SIGCONT)?;
                restarted?;
            }
        }
        Ok(())
    }
}

/// A clock nemesis on node `i`: a clean restart under libfaketime, the
/// load for [`CLOCK_HOLD`] (leaping, for `ClockJumps`), what each node
/// says of the clocks (Lockstep), and a clean restart with a true clock.
fn faulty_clock(
    nemesis: Nemesis,
    cluster: &mut Cluster,
    i: usize,
    note: &mut impl FnMut(String),
) -> Result<(), String> {
    if !std::path::Path::new(FAKETIME_LIB).exists() {
        return Err(format!("{FAKETIME_LIB} is missing: run scripts/setup.sh"));
    }
    let stamp = cluster.base_dir().join(format!("faketime-node{}", i + 1));
    let write_offset = |s: i64| {
        std::fs::write(&stamp, format!("{s:+}\n")).map_err(|e| format!("{}: {e}", stamp.display()))
    };
    let stamp_path = stamp.display().to_string();
    let (what, env): (&str, Vec<(&str, &str)>) = match nemesis {
        Nemesis::ClockFast => ("at 2x", vec![("FAKETIME", "+0 x2")]),
        Nemesis::ClockSlow => ("at 0.5x", vec![("FAKETIME", "+0 x0.5")]),
        _ => {
            write_offset(0)?;
            (
                "leaping",
                vec![
                    ("FAKETIME_TIMESTAMP_FILE", stamp_path.as_str()),
                    ("FAKETIME_CACHE_DURATION", "1"),
                ],
            )
        }
    };
    let mut env = env;
    env.push(("LD_PRELOAD", FAKETIME_LIB));
    note(format!(
        "node {}: clean stop, start with its clock {what}",
        i + 1
    ));
    clean_restart(cluster, i, &env)?;
    cluster
        .node(i)
        .wait_synced(Duration::from_secs(120))
        .map_err(|e| format!("node {} on a faulty clock: {e}", i + 1))?;
    note(format!("node {}: Synced on its faulty clock", i + 1));
    if nemesis == Nemesis::ClockJumps {
        for s in CLOCK_LEAPS.iter().skip(1) {
            std::thread::sleep(LEAP_EVERY);
            write_offset(*s)?;
            note(format!("node {}: clock now {s:+} s off", i + 1));
        }
        let leaps = CLOCK_LEAPS.len() as u32 - 1;
        std::thread::sleep(CLOCK_HOLD.saturating_sub(LEAP_EVERY * leaps));
    } else {
        std::thread::sleep(CLOCK_HOLD);
    }
    for (k, n) in cluster.nodes().iter().enumerate() {
        let agree = n.status("wsrep_lockstep_clocks_agree").ok().flatten();
        let rates = n.status("wsrep_lockstep_clock_rates").ok().flatten();
        let steps = n.status("wsrep_lockstep_clock_steps_back").ok().flatten();
        if let (Some(agree), Some(rates), Some(steps)) = (agree, rates, steps) {
            note(format!(
                "node {}: leases trust the clocks: {agree}; peer clock rates: {rates}; \
                 steps back of its own clock: {steps}",
                k + 1
            ));
        }
    }
    note(format!(
        "node {}: clean stop, start with a true clock",
        i + 1
    ));
    clean_restart(cluster, i, &[])
}

/// Node `i` stops cleanly and starts again (without waiting) with `env`
/// in its environment; later starts get none.
fn clean_restart(cluster: &mut Cluster, i: usize, env: &[(&str, &str)]) -> Result<(), String> {
    let node = cluster.node_mut(i);
    node.stop()
        .map_err(|e| format!("stopping node {}: {e}", i + 1))?;
    node.set_env(env);
    let started = node.spawn(&[]);
    node.set_env(&[]);
    started.map_err(|e| format!("starting node {}: {e}", i + 1))
}

/// The Raft leader's index for Lockstep (`wsrep_lockstep_leader`); Galera
/// has no leader, so node 1.
fn leader(cluster: &Cluster) -> usize {
    cluster
        .nodes()
        .iter()
        .find_map(|n| n.status("wsrep_lockstep_leader").ok().flatten())
        .and_then(|name| cluster.nodes().iter().position(|n| n.name() == name))
        .unwrap_or(0)
}

fn signal(cluster: &Cluster, i: usize, sig: Signal) -> Result<(), String> {
    let pid = cluster
        .node(i)
        .pid()
        .ok_or(format!("node {} is not running", i + 1))?;
    kill(Pid::from_raw(pid as i32), sig).map_err(|e| format!("{sig} to node {}: {e}", i + 1))
}

/// kill -9 of `nodes` together ([`Cluster::kill_at_once`]).
fn kill_nodes(cluster: &mut Cluster, nodes: &[usize]) -> Result<(), String> {
    cluster
        .kill_at_once(nodes)
        .map_err(|e| format!("kill -9 of nodes {nodes:?}: {e}"))
}

/// Starts `nodes` again without waiting for them (the run waits for the
/// whole cluster, with its deadline).
fn restart(
    cluster: &mut Cluster,
    nodes: &[usize],
    how: Restart,
    note: &mut impl FnMut(String),
) -> Result<(), String> {
    for &i in nodes {
        let node = cluster.node_mut(i);
        match how {
            Restart::Plain => {
                note(format!("start node {} plainly", i + 1));
                node.spawn(&[])
                    .map_err(|e| format!("starting node {}: {e}", i + 1))?;
            }
            Restart::Systemd => {
                let position = node
                    .recover_position()
                    .map_err(|e| format!("--wsrep-recover on node {}: {e}", i + 1))?;
                note(format!("start node {} at {position} (systemd way)", i + 1));
                node.spawn(&[&format!("--wsrep_start_position={position}")])
                    .map_err(|e| format!("starting node {}: {e}", i + 1))?;
            }
        }
    }
    Ok(())
}

fn isolate(cluster: &Cluster, i: usize, on: bool) -> Result<(), String> {
    cluster
        .node(i)
        .sql(&format!(
            "SET GLOBAL wsrep_provider_options='gmcast.isolate={}'",
            u8::from(on)
        ))
        .map(|_| ())
        .map_err(|e| format!("gmcast.isolate on node {}: {e}", i + 1))
}
