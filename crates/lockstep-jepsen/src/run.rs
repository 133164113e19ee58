//! One run: a fresh three-node cluster, clients on every node, one
//! nemesis, recovery, final reads, the check, and the files that keep the
//! evidence.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lockstep_history::list_append::Options;
use lockstep_history::{History, Isolation, Mop, Outcome, Report, Txn};
use lockstep_testkit::{Cluster, Provider, Session};

use crate::client::{self, ClientSpec, Shared};
use crate::disks::Disks;
use crate::nemesis::Nemesis;
use crate::net::Net;
use crate::workload::{self, Workload, DB};

/// What to run.
#[derive(Debug, Clone)]
pub struct RunSpec {
    pub provider: Provider,
    pub nemesis: Nemesis,
    /// `innodb_flush_log_at_trx_commit`: 0, 1 or 2.
    pub flush: u8,
    /// `innodb_snapshot_isolation`.
    pub snapshot_isolation: bool,
    /// `lockstep.cache_sync=yes` (Lockstep only).
    pub cache_sync: bool,
    /// Workload before the fault, and after the cluster recovered.
    pub before: Duration,
    pub after: Duration,
    /// How long the cluster may take to be whole again after the fault.
    pub recovery: Duration,
    pub list_clients_per_node: usize,
    pub register_clients_per_node: usize,
    pub registers: u64,
    pub pace: Duration,
    pub seed: u64,
}

impl RunSpec {
    /// Defaults that fit a 2-core machine.
    pub fn new(provider: Provider, nemesis: Nemesis, flush: u8) -> RunSpec {
        RunSpec {
            provider,
            nemesis,
            flush,
            snapshot_isolation: true,
            cache_sync: false,
            before: Duration::from_secs(5),
            after: Duration::from_secs(4),
            recovery: Duration::from_secs(90),
            list_clients_per_node: 2,
            register_clients_per_node: 1,
            registers: 3,
            pace: Duration::from_millis(5),
            seed: 1,
        }
    }

    pub fn provider_name(&self) -> String {
        self.provider.label()
    }

    /// What the run claims: strong snapshot isolation with
    /// `innodb_snapshot_isolation`, InnoDB's repeatable read without.
    pub fn isolation(&self) -> Isolation {
        if self.snapshot_isolation {
            Isolation::Snapshot
        } else {
            Isolation::RepeatableRead
        }
    }

    /// `lockstep-crash-all-plain-flush1-si`: names the run's directory.
    pub fn name(&self) -> String {
        format!(
            "{}-{}-flush{}{}-{}",
            self.provider_name(),
            self.nemesis.name(),
            self.flush,
            if self.cache_sync { "-csync" } else { "" },
            if self.snapshot_isolation { "si" } else { "rr" }
        )
    }
}

/// What a run found.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub spec: RunSpec,
    pub ok: usize,
    pub failed: usize,
    pub unknown: usize,
    pub report: Report,
    /// Every node was Synced in a three-member Primary component and
    /// answered the final read before the deadline.
    pub recovered: bool,
    /// Nodes whose final read is in the history.
    pub final_reads: usize,
    /// What went wrong outside the history (a step that failed, a node
    /// that never came back), for the report.
    pub problems: Vec<String>,
    pub nemesis_log: Vec<String>,
    pub dir: PathBuf,
    pub seconds: f64,
}

impl RunResult {
    pub fn ops(&self) -> usize {
        self.ok + self.failed + self.unknown
    }

    /// No anomaly the claimed isolation forbids.
    pub fn safe(&self) -> bool {
        self.report.is_clean_under(self.spec.isolation())
    }

    /// Safe, and a whole cluster at the end.
    pub fn passed(&self) -> bool {
        self.safe() && self.recovered && self.problems.is_empty()
    }
}

/// Runs `spec`, keeping its files under `out/<name>/`.
pub fn run(spec: &RunSpec, out: &Path) -> RunResult {
    let t0 = Instant::now();
    let dir = out.join(spec.name());
    let _ = std::fs::create_dir_all(&dir);
    let mut problems = Vec::new();
    let mut nemesis_log = Vec::new();
    let mut history = Vec::new();
    let mut recovered = false;
    let mut final_reads = 0;
    // Declared before the cluster so that it outlives it.
    let mut net = None;
    let mut disks = None;
    if spec.nemesis.needs_netns() {
        match Net::create(3) {
            Ok(n) => net = Some(n),
            Err(e) => problems.push(e),
        }
    }
    let started = if problems.is_empty() {
        start(spec, net.as_ref(), &mut disks)
    } else {
        Err(lockstep_testkit::Error::Config {
            message: "no network for the nodes".into(),
        })
    };
    match started {
        Err(e) => problems.push(format!("cluster did not start: {e}")),
        Ok(mut cluster) => {
            let shared = Arc::new(Shared::new(spec.registers, spec.pace));
            let clients = start_clients(spec, &cluster, &shared);
            std::thread::sleep(spec.before);
            if let Err(e) =
                spec.nemesis
                    .inject(&mut cluster, net.as_mut(), disks.as_mut(), &mut nemesis_log)
            {
                problems.push(format!("nemesis: {e}"));
            }
            let healed = Instant::now();
            match wait_whole(&cluster, spec.recovery) {
                Ok(()) => {
                    nemesis_log.push(format!(
                        "cluster whole again {:.1} s after the nemesis ended",
                        healed.elapsed().as_secs_f64()
                    ));
                    std::thread::sleep(spec.after);
                }
                Err(e) => problems.push(format!("not recovered within {:?}: {e}", spec.recovery)),
            }
            shared.stop.store(true, Ordering::Relaxed);
            for c in clients {
                let _ = c.join();
            }
            let finals = final_reads_of(&cluster, &shared);
            final_reads = finals.len();
            recovered = problems.is_empty() && final_reads == cluster.len();
            if !recovered && final_reads < cluster.len() {
                problems.push(format!(
                    "final reads from {final_reads} of {} nodes",
                    cluster.len()
                ));
            }
            problems.extend(internal_errors(&cluster));
            history =
                std::mem::take(&mut *shared.history.lock().unwrap_or_else(|p| p.into_inner()));
            history.extend(finals);
            // Every run's, not only a failed one's: why a node stopped
            // under a fault (`disk-full`, `disk-eio`) is read here.
            let _ = std::fs::write(dir.join("logs.txt"), cluster.log_tails(300));
        }
    }
    history.sort_by_key(|t| (t.invoke_us, t.id));
    let history = History::new(history);
    let report = lockstep_history::check(&history, &Options { realtime: true });
    let _ = std::fs::write(dir.join("history.jsonl"), history.to_jsonl());
    let _ = std::fs::write(
        dir.join("report.txt"),
        format!(
            "{}\nnemesis:\n{}\nproblems: {:?}\n",
            report,
            nemesis_log.join("\n"),
            problems
        ),
    );
    RunResult {
        spec: spec.clone(),
        ok: history.count(Outcome::Ok),
        failed: history.count(Outcome::Fail),
        unknown: history.count(Outcome::Unknown),
        report,
        recovered,
        final_reads,
        problems,
        nemesis_log,
        dir,
        seconds: t0.elapsed().as_secs_f64(),
    }
}

/// The provider's own report of a broken lock rule (a server callback,
/// a disk write or a wait for the disk under its state lock: ADR 0030,
/// 0038), which it logs rather than fail the server's work: a run under
/// faults is where it would show. Galera never logs it.
const INTERNAL_ERROR: &str = "lockstep internal error";

fn internal_errors(cluster: &Cluster) -> Vec<String> {
    cluster
        .nodes()
        .iter()
        .filter_map(|n| match n.log_count(INTERNAL_ERROR) {
            Ok(0) => None,
            Ok(k) => Some(format!(
                "{}: {k} '{INTERNAL_ERROR}' line(s) in its log",
                n.name()
            )),
            Err(e) => Some(format!("{}: cannot read its log: {e}", n.name())),
        })
        .collect()
}

/// Builds and starts the cluster; with a disk nemesis, its datadirs are
/// mounted on the power-loss file system first (kept in `disks`, which
/// the caller drops after the cluster).
fn start(
    spec: &RunSpec,
    net: Option<&Net>,
    disks: &mut Option<Disks>,
) -> lockstep_testkit::Result<Cluster> {
    let mut builder = Cluster::builder(3);
    if let Some(net) = net {
        builder = builder.places(net.places());
    }
    if spec.nemesis.needs_lazyfs() {
        // On the power-loss file system an O_DIRECT write waits in
        // memory until fsync like any other, which is stricter than a
        // disk (there it reaches the device at once). Both providers run
        // with buffered I/O and fsync, the same way, so that the layer's
        // model is the disk's (ADR 0035, docs/jepsen-power.md).
        builder = builder.extra_mysqld("innodb_flush_method=fsync");
    }
    if spec.cache_sync && matches!(spec.provider, Provider::Lockstep(_)) {
        builder = builder.provider_options("lockstep.cache_sync=yes");
    }
    let mut cluster = builder
        .provider(spec.provider.clone())
        .cluster_name("jepsen")
        .slave_threads(4)
        .extra_mysqld(&format!("innodb_flush_log_at_trx_commit={}", spec.flush))
        .extra_mysqld(&format!(
            "innodb_snapshot_isolation={}",
            if spec.snapshot_isolation { "ON" } else { "OFF" }
        ))
        .build()?;
    if spec.nemesis.needs_lazyfs() {
        *disks = Some(
            Disks::mount(&cluster)
                .map_err(|message| lockstep_testkit::Error::Config { message })?,
        );
    }
    cluster.start_all()?;
    cluster.node(0).sql(&workload::schema(spec.registers))?;
    cluster.wait_for_equal_last_committed(Duration::from_secs(60))?;
    if let Some(d) = disks.as_ref() {
        d.settle()
            .map_err(|message| lockstep_testkit::Error::Config { message })?;
    }
    Ok(cluster)
}

fn start_clients(
    spec: &RunSpec,
    cluster: &Cluster,
    shared: &Arc<Shared>,
) -> Vec<std::thread::JoinHandle<u64>> {
    let mut handles = Vec::new();
    let mut seed = spec.seed.wrapping_mul(1_000_003);
    for (i, node) in cluster.nodes().iter().enumerate() {
        let kinds = std::iter::repeat_n(Workload::ListAppend, spec.list_clients_per_node).chain(
            std::iter::repeat_n(Workload::Register, spec.register_clients_per_node),
        );
        for workload in kinds {
            seed = seed.wrapping_add(1);
            let c = ClientSpec {
                node: i as u32,
                node_name: node.name().to_string(),
                socket: node.socket().to_path_buf(),
                workload,
                seed,
            };
            let shared = shared.clone();
            handles.push(std::thread::spawn(move || client::run_client(c, shared)));
        }
    }
    handles
}

/// Every node running, Synced, Primary, with three members.
fn wait_whole(cluster: &Cluster, deadline: Duration) -> lockstep_testkit::Result<()> {
    let t0 = Instant::now();
    for node in cluster.nodes() {
        let left = deadline.saturating_sub(t0.elapsed());
        node.wait_synced(left)?;
        node.wait_for_status(
            "wsrep_cluster_status",
            "Primary",
            deadline.saturating_sub(t0.elapsed()),
        )?;
        node.wait_for_status(
            "wsrep_cluster_size",
            "3",
            deadline.saturating_sub(t0.elapsed()),
        )?;
    }
    Ok(())
}

/// A causal read of every list and register on every node that answers.
fn final_reads_of(cluster: &Cluster, shared: &Shared) -> Vec<Txn> {
    let max_key = shared.counters.max_key();
    let mut finals = Vec::new();
    for (i, node) in cluster.nodes().iter().enumerate() {
        if !node.is_running() {
            continue;
        }
        let invoke_us = shared.now_us();
        let Ok(mut s) = Session::open(node.name(), node.socket(), client::STATEMENT_TIMEOUT) else {
            continue;
        };
        let lists = s.sql(&format!(
            "SET SESSION wsrep_sync_wait = 15; SELECT k, v FROM {DB}.la"
        ));
        let regs = s.sql(&format!("SELECT k, v FROM {DB}.reg"));
        let (Ok(lists), Ok(regs)) = (lists, regs) else {
            continue;
        };
        let mut by_key = std::collections::BTreeMap::new();
        for line in lists.lines() {
            if let Some((k, v)) = line.split_once('\t') {
                by_key.insert(
                    k.parse::<u64>().unwrap_or(u64::MAX),
                    workload::parse_list(v),
                );
            }
        }
        let mut mops: Vec<Mop> = (0..=max_key)
            .map(|key| Mop::Read {
                key,
                values: Some(by_key.remove(&key).unwrap_or_default()),
            })
            .collect();
        // Rows for keys no client chose are phantoms: keep them visible.
        mops.extend(by_key.into_iter().map(|(key, v)| Mop::Read {
            key,
            values: Some(v),
        }));
        for line in regs.lines() {
            if let Some((k, v)) = line.split_once('\t') {
                mops.push(Mop::RegRead {
                    key: k.parse().unwrap_or(u64::MAX),
                    value: Some(v.trim().parse().unwrap_or(u64::MAX)),
                });
            }
        }
        finals.push(Txn {
            id: shared.new_id(),
            process: u32::MAX - i as u32,
            node: i as u32,
            invoke_us,
            complete_us: shared.now_us(),
            outcome: Outcome::Ok,
            mops,
            is_final: true,
            error: None,
        });
    }
    finals
}
