//! `lockstep failover-bench`: what an application behind a load balancer
//! sees when the node serving its writes fails, Lockstep beside Galera.
//!
//! Real parts only: three `mariadbd` nodes (each in its own network
//! namespace when run as root), `lockstep check` beside each, Debian's
//! HAProxy or keepalived with README's configuration in front, and an
//! application ([`app`]) that writes through the balancer's address and
//! records every statement. Each fault ([`Fault`]) hits the writer (node1
//! at first; after a failover without failback, the node that took over),
//! and is followed by its recovery; [`measure`] then judges the window:
//! outage, failed statements by code, acknowledged rows lost, statements
//! answered by a node that was not Synced and Primary; sysbench runs
//! through the balancer beside it ([`sysbench_load`]). [`report`] writes
//! `docs/failover.md`; [`timeline`] draws each window.

pub mod app;
pub mod checks;
pub mod child;
pub mod events;
pub mod haproxy;
pub mod keepalived;
pub mod measure;
pub mod report;
pub mod run;
pub mod sysbench_load;
pub mod timeline;

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::cluster_bench::contender::Contender;

/// What sits between the application and the nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Layout {
    /// HAProxy, every node active, `balance leastconn`.
    HaproxyAll,
    /// HAProxy, node1 active, node2 and node3 `backup`.
    HaproxyWriter,
    /// keepalived's virtual IP on the healthy node with the highest priority.
    Keepalived,
}

impl Layout {
    pub const ALL: [Layout; 3] = [
        Layout::HaproxyAll,
        Layout::HaproxyWriter,
        Layout::Keepalived,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Layout::HaproxyAll => "haproxy-leastconn",
            Layout::HaproxyWriter => "haproxy-writer",
            Layout::Keepalived => "keepalived",
        }
    }

    pub fn parse(s: &str) -> Result<Layout, String> {
        Layout::ALL
            .into_iter()
            .find(|l| l.name() == s)
            .ok_or_else(|| {
                format!("unknown layout '{s}' (haproxy-leastconn, haproxy-writer, keepalived)")
            })
    }
}

/// What happens to the writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Fault {
    /// `kill -9`, restarted after `--down-secs` the systemd way.
    Kill,
    /// Its namespace cut from the other nodes (clients still reach it).
    Cut,
    /// `gmcast.isolate=1` for `--down-secs`.
    Isolate,
    /// Drained through `--maintenance-file`, then shut down and restarted.
    Drain,
    /// Donor of a full SST to a fourth node joining.
    Donor,
    /// Not a fault of the writer: a fourth node joins by full SST from a
    /// node that is not the writer (README's advice for donors).
    SpareDonor,
}

impl Fault {
    pub const ALL: [Fault; 6] = [
        Fault::Kill,
        Fault::Cut,
        Fault::Isolate,
        Fault::Drain,
        Fault::Donor,
        Fault::SpareDonor,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fault::Kill => "kill",
            Fault::Cut => "cut",
            Fault::Isolate => "isolate",
            Fault::Drain => "drain",
            Fault::Donor => "donor",
            Fault::SpareDonor => "spare-donor",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Fault::Kill => "`kill -9` of the writer, restarted the systemd way (`--wsrep-recover`)",
            Fault::Cut => "the writer's namespace cut from the other nodes (blackhole routes); clients still reach it",
            Fault::Isolate => "`SET GLOBAL wsrep_provider_options='gmcast.isolate=1'` on the writer, then `=0`",
            Fault::Drain => "`touch` of the writer's `--maintenance-file`, graceful shutdown and start, file removed",
            Fault::Donor => "the writer donor of a full rsync SST to a fourth node (`wsrep_sst_donor=<writer>`), which then leaves",
            Fault::SpareDonor => "a fourth node joins by full rsync SST from a node that is not the writer (`wsrep_sst_donor=<another node>`, README's advice), then leaves",
        }
    }

    pub fn parse(s: &str) -> Result<Fault, String> {
        Fault::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| {
                format!("unknown fault '{s}' (kill, cut, isolate, drain, donor, spare-donor)")
            })
    }

    /// Whether this fault runs on this machine.
    pub fn applies(self, netns: bool) -> bool {
        self != Fault::Cut || netns
    }
}

/// Everything a run needs.
#[derive(Debug, Clone)]
pub struct Plan {
    pub contenders: Vec<Contender>,
    pub layouts: Vec<Layout>,
    pub faults: Vec<Fault>,
    pub out: PathBuf,
    pub clients: u32,
    pub pace: Duration,
    /// Quiet time before each fault and after each recovery.
    pub settle: Duration,
    /// How long node1 stays down or cut.
    pub down: Duration,
    /// Run in network namespaces (needs root; keepalived and cuts need it).
    pub netns: bool,
    /// MiB of rows loaded before the donor fault.
    pub sst_mb: u64,
    pub haproxy_timing: haproxy::CheckTiming,
    pub keepalived_timing: keepalived::ScriptTiming,
    /// `lockstep check --cache-ms`.
    pub check_cache_ms: u64,
    /// sysbench threads through the balancer beside the application (0: none).
    pub sysbench_threads: u32,
    /// Their cap in transactions per second.
    pub sysbench_rate: u32,
}

impl Plan {
    /// How long a balancer takes at most to see a failed check: `fall`
    /// polls, plus the check's cache.
    fn detect(&self) -> Duration {
        let haproxy = self.haproxy_timing.inter_ms * u64::from(self.haproxy_timing.fall);
        let keepalived =
            u64::from(self.keepalived_timing.interval_s * self.keepalived_timing.fall) * 1000;
        Duration::from_millis(haproxy.max(keepalived) + self.check_cache_ms)
    }

    /// After a drain, before the node goes down.
    pub fn drain_wait(&self) -> Duration {
        self.detect() * 2
    }

    /// After recovery, before the next fault: `rise` polls and a margin.
    pub fn readmit_wait(&self) -> Duration {
        let haproxy = self.haproxy_timing.inter_ms * u64::from(self.haproxy_timing.rise);
        let keepalived =
            u64::from(self.keepalived_timing.interval_s * self.keepalived_timing.rise) * 1000;
        Duration::from_millis(haproxy.max(keepalived) + self.check_cache_ms + 1000)
    }
}

/// One fault's measured window.
#[derive(Debug, Clone, Serialize)]
pub struct FaultRun {
    pub fault: Fault,
    pub result: measure::FaultResult,
    /// What sysbench saw, when it ran.
    pub load: Option<sysbench_load::LoadResult>,
    pub events: Vec<events::Event>,
    /// Set when injecting or recovering failed.
    pub error: Option<String>,
    pub plot: Option<PathBuf>,
}

/// One contender in one layout.
#[derive(Debug, Clone, Serialize)]
pub struct LayoutRun {
    pub layout: Layout,
    pub provider: String,
    pub faults: Vec<FaultRun>,
    /// Set when the run stopped early.
    pub error: Option<String>,
    pub raw_dir: PathBuf,
}

/// Runs the plan: per layout, each contender in turn.
pub fn run(plan: &Plan) -> Vec<LayoutRun> {
    let mut runs = Vec::new();
    for &layout in &plan.layouts {
        if layout == Layout::Keepalived && !plan.netns {
            eprintln!("failover: keepalived needs network namespaces (run as root); skipped");
            continue;
        }
        for c in &plan.contenders {
            runs.push(run::run(plan, c, layout));
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for l in Layout::ALL {
            assert_eq!(Layout::parse(l.name()), Ok(l));
        }
        for f in Fault::ALL {
            assert_eq!(Fault::parse(f.name()), Ok(f));
        }
        assert!(Fault::parse("reboot").is_err());
        assert!(!Fault::Cut.applies(false));
        assert!(Fault::Kill.applies(false));
    }
}

/// README's HAProxy and keepalived sections are the configurations this
/// benchmark runs: every line it writes (but the addresses, names and
/// paths of a run) is in README.
#[cfg(test)]
mod readme {
    use super::haproxy::{self, CheckTiming};
    use super::keepalived::{self, ScriptTiming};

    const README: &str = include_str!("../../../../README.md");

    /// Lines of a run's configuration that are the same in every setup.
    fn portable(text: &str, skip: &[&str]) -> Vec<String> {
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#') && l != &"}")
            .filter(|l| !skip.iter().any(|s| l.starts_with(s)))
            .map(str::to_string)
            .collect()
    }

    fn missing(lines: &[String]) -> Vec<String> {
        let readme: Vec<&str> = README.lines().map(str::trim).collect();
        lines
            .iter()
            .filter(|l| !readme.contains(&l.as_str()))
            .cloned()
            .collect()
    }

    #[test]
    fn readme_gives_the_haproxy_configurations_that_ran() {
        let servers: Vec<haproxy::Server> = (1..=3)
            .map(|i| haproxy::Server {
                name: format!("node{i}"),
                addr: format!("10.0.0.{i}"),
                port: 3306,
                check_port: 9200,
            })
            .collect();
        for single_writer in [false, true] {
            let text = haproxy::config("x", &servers, single_writer, CheckTiming::README);
            let lines = portable(&text, &["log ", "global", "maxconn", "bind "]);
            assert_eq!(missing(&lines), Vec::<String>::new(), "{text}");
        }
    }

    #[test]
    fn readme_gives_the_keepalived_configuration_that_ran() {
        let text = keepalived::config(
            &keepalived::Instance {
                name: "node1".into(),
                interface: "eth0".into(),
                priority: 150,
                check:
                    "/usr/local/bin/lockstep check --once --defaults-file /etc/lockstep/check.cnf \
                        --maintenance-file /etc/lockstep/maintenance"
                        .into(),
                vip: "10.0.0.100".into(),
                router_id: 51,
            },
            ScriptTiming::README,
        );
        let lines = portable(&text, &["router_id", "script_user", "global_defs"]);
        assert_eq!(missing(&lines), Vec::<String>::new(), "{text}");
    }
}
