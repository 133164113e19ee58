//! Running the workloads: one cluster per provider and round, every
//! workload on fresh tables, then the consistency check.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use lockstep_testkit::{Cluster, Provider, Sysbench};

use super::contender::Contender;
use super::progress;
use super::results::{Consistency, Measured, Outcome, ProviderRun, Slot, WorkloadRun};
use super::workload::Workload;

/// The provider label of the floor's runs.
pub const FLOOR: &str = "floor";

/// How long the nodes may take to apply the last writesets of a workload.
const CATCH_UP: Duration = Duration::from_secs(120);

/// What to run, for every provider alike.
#[derive(Debug, Clone)]
pub struct Plan {
    pub nodes: usize,
    pub time: Duration,
    pub warmup: Duration,
    pub tables: u32,
    pub table_size: u32,
    pub slave_threads: u32,
    pub workloads: Vec<Workload>,
    /// Where sysbench's output and each node1 my.cnf are kept.
    pub raw_dir: PathBuf,
    /// Peer TLS in every cluster.
    pub tls: bool,
    /// Extra provider options for Lockstep's clusters only.
    pub lockstep_options: String,
}

impl Plan {
    fn sysbench(&self, w: &Workload) -> Sysbench {
        Sysbench::script(w.script)
            .tables(self.tables)
            .table_size(self.table_size)
            .threads(w.threads)
    }
}

/// `options` when `provider` is Lockstep, else nothing: the options are
/// Lockstep's own, and Galera's runs keep their defaults. A library given
/// by its path counts as a build of Lockstep (the way to compare two
/// builds) unless its file name says Galera (`libgalera…`).
pub fn lockstep_only<'a>(provider: &Provider, options: &'a str) -> &'a str {
    match provider {
        Provider::Lockstep(_) => options,
        Provider::Path(p) if !is_galera_library(p) => options,
        _ => "",
    }
}

fn is_galera_library(path: &std::path::Path) -> bool {
    // A link's target names the library (Debian's libgalera_smm.so may be
    // reached through one).
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("libgalera"))
}

/// Starts a cluster with `provider`, runs every workload on it, stops it:
/// the provider's part of a round. Failures are recorded, not returned:
/// the other runs go on. Raw files go to `<raw_dir>/<provider>/round-<r>/`.
pub fn run_provider(plan: &Plan, contender: &Contender, slot: Slot) -> ProviderRun {
    run_cluster(plan, contender, slot, false)
}

/// The floor (issue 14, item 2): one MariaDB with the same my.cnf and
/// wsrep off (`SET GLOBAL wsrep_on=OFF` on a one-node cluster of
/// `provider`, so that every line of the configuration is the same; the
/// provider is loaded but no session uses it). What replication costs is
/// the clusters' distance from it. Reported as the provider `floor`.
pub fn run_floor(plan: &Plan, contender: &Contender, slot: Slot) -> ProviderRun {
    run_cluster(plan, contender, slot, true)
}

/// A provider's folder under `raw/`: a library given by path
/// (`--providers lockstep,/tmp/lib.so`) is named by the path with its
/// separators replaced, so it stays inside `raw/`.
fn raw_dir_name(label: &str) -> String {
    label.trim_start_matches('/').replace('/', "_")
}

fn run_cluster(plan: &Plan, contender: &Contender, slot: Slot, floor: bool) -> ProviderRun {
    let label = if floor {
        FLOOR.to_string()
    } else {
        contender.label.clone()
    };
    let mut run = ProviderRun {
        provider: label.clone(),
        slot,
        library: contender.provider.path(),
        provider_version: None,
        server_version: None,
        error: None,
        workloads: Vec::new(),
    };
    let raw = plan
        .raw_dir
        .join(raw_dir_name(&label))
        .join(format!("round-{}", slot.round));
    let label = format!("round {} {label}", slot.round);
    let nodes = if floor { 1 } else { plan.nodes };
    progress(&label, &format!("starting {nodes} node(s)"));
    let spec = contender
        .spec(nodes, &plan.lockstep_options)
        .cluster_name("lockstep-bench")
        .slave_threads(plan.slave_threads)
        .tls(plan.tls);
    let mut cluster = match spec.start() {
        Ok(c) => c,
        Err(e) => {
            run.error = Some(failed(&label, "starting the cluster", &e));
            run.workloads = plan.workloads.iter().map(not_run).collect();
            return run;
        }
    };
    if floor {
        if let Err(e) = cluster.node(0).sql("SET GLOBAL wsrep_on = OFF") {
            run.error = Some(failed(&label, "turning wsrep off", &e));
            run.workloads = plan.workloads.iter().map(not_run).collect();
            let _ = cluster.stop_all();
            return run;
        }
    }
    let first = cluster.node(0);
    run.library = cluster.provider_path().to_path_buf();
    run.server_version = first.var("version").ok().flatten();
    run.provider_version = first.status("wsrep_provider_version").ok().flatten();
    keep_file(&first.config().defaults_file, &raw.join("node1.my.cnf"));
    for w in &plan.workloads {
        run.workloads
            .push(run_workload(plan, &cluster, w, &label, &raw));
    }
    progress(&label, "stopping the cluster");
    if let Err(e) = cluster.stop_all() {
        run.error = Some(format!("stopping the cluster: {e}"));
    }
    run
}

fn not_run(w: &Workload) -> WorkloadRun {
    WorkloadRun {
        workload: w.name.into(),
        threads: w.threads,
        nodes: Vec::new(),
        outcome: Outcome {
            measured: None,
            consistency: None,
            error: Some("not run: the cluster did not start".into()),
        },
    }
}

fn run_workload(
    plan: &Plan,
    cluster: &Cluster,
    w: &Workload,
    label: &str,
    raw: &Path,
) -> WorkloadRun {
    let nodes = w.nodes(cluster);
    let mut run = WorkloadRun {
        workload: w.name.into(),
        threads: w.threads,
        nodes: nodes.iter().map(|n| n.name().to_string()).collect(),
        outcome: Outcome {
            measured: None,
            consistency: None,
            error: None,
        },
    };
    let out = &mut run.outcome;
    let tag = format!("{label} {}", w.name);
    let bench = plan.sysbench(w);
    // New sessions take the global value: sysbench's connections all open
    // after this.
    for n in cluster.nodes() {
        if let Err(e) = n.sql(&format!("SET GLOBAL wsrep_sync_wait = {}", w.sync_wait)) {
            out.error = Some(failed(&tag, "setting wsrep_sync_wait", &e));
            return run;
        }
    }
    if let Err(e) = fresh_tables(plan, cluster, &bench, &tag) {
        out.error = Some(failed(&tag, "preparing the tables", &e));
        return run;
    }
    if !plan.warmup.is_zero() {
        progress(&tag, &format!("warm-up {} s", plan.warmup.as_secs()));
        if let Err(e) = bench.clone().time(plan.warmup).run(&nodes) {
            out.error = Some(failed(&tag, "warm-up", &e));
            out.consistency = Some(check(cluster, &bench, &tag));
            return run;
        }
    }
    progress(
        &tag,
        &format!(
            "measuring {} s, {}",
            plan.time.as_secs(),
            w.load_label(cluster.len())
        ),
    );
    let cpu_before = super::cpu::sample(cluster);
    let measured = bench
        .clone()
        .time(plan.time)
        .report_interval(1)
        .histogram()
        .run(&nodes);
    match measured {
        Ok(report) => {
            keep_text(&raw.join(format!("{}.txt", w.name)), &report.output);
            let mut m = Measured::from_report(&report);
            m.cpu_ms_per_1000 =
                super::cpu::ms_per_1000(cpu_before, super::cpu::sample(cluster), m.transactions);
            progress(
                &tag,
                &format!(
                    "{:.1} tps, p95 {} ms, max {} ms, {:.1} aborts/s",
                    m.tps,
                    opt(m.latency_ms.p95),
                    opt(m.latency_ms.max),
                    m.aborts_per_sec
                ),
            );
            out.measured = Some(m);
        }
        Err(e) => {
            keep_text(&raw.join(format!("{}.error.txt", w.name)), &e.to_string());
            out.error = Some(failed(&tag, "sysbench", &e));
        }
    }
    out.consistency = Some(check(cluster, &bench, &tag));
    run
}

/// Says on stderr that `what` failed; the full message, for the results.
fn failed(tag: &str, what: &str, e: &lockstep_testkit::Error) -> String {
    let message = e.to_string();
    let first = message.lines().next().unwrap_or_default();
    progress(tag, &format!("{what} failed: {first}"));
    format!("{what}: {message}")
}

/// Drops and recreates the sbtest database, so that every workload starts
/// from the same data, and waits until every node has it.
fn fresh_tables(
    plan: &Plan,
    cluster: &Cluster,
    bench: &Sysbench,
    tag: &str,
) -> lockstep_testkit::Result<()> {
    progress(
        tag,
        &format!(
            "preparing {} tables × {} rows",
            plan.tables, plan.table_size
        ),
    );
    let t0 = Instant::now();
    cluster.node(0).sql("DROP DATABASE IF EXISTS sbtest")?;
    bench.prepare(cluster.node(0))?;
    // One node (the floor, wsrep off: no wsrep status at all) has nobody
    // to wait for.
    if cluster.len() > 1 {
        cluster.wait_for_equal_last_committed(CATCH_UP)?;
    }
    progress(
        tag,
        &format!("tables ready in {:.1} s", t0.elapsed().as_secs_f64()),
    );
    Ok(())
}

/// Waits for every node to commit the same last seqno, then compares
/// CHECKSUM TABLE everywhere.
/// Says loudly on stderr when they differ.
fn check(cluster: &Cluster, bench: &Sysbench, tag: &str) -> Consistency {
    let tables = bench.table_names();
    let tables: Vec<&str> = tables.iter().map(String::as_str).collect();
    let caught_up = if cluster.len() > 1 {
        cluster.wait_for_equal_last_committed(CATCH_UP)
    } else {
        Ok(-1) // the floor: one node, wsrep off
    };
    let result = caught_up.and_then(|seqno| Ok((seqno, cluster.checksums(&tables)?)));
    let consistency = match result {
        Ok((seqno, report)) => Consistency::checked(seqno, &report),
        Err(e) => Consistency::failed(format!("the check did not complete: {e}")),
    };
    if consistency.equal {
        progress(tag, "checksums equal on every node");
    } else {
        eprintln!(
            "lockstep bench: [{tag}] CHECKSUM MISMATCH: the nodes differ after the workload\n{}{}",
            consistency.grid,
            consistency.problem.as_deref().unwrap_or_default()
        );
    }
    consistency
}

fn opt(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2}"))
}

/// Best effort: raw files help reading a report but are not the report.
fn keep_text(path: &Path, text: &str) {
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Err(e) = std::fs::write(path, text) {
        eprintln!("lockstep bench: cannot write {}: {e}", path.display());
    }
}

fn keep_file(from: &Path, to: &Path) {
    match std::fs::read_to_string(from) {
        Ok(text) => keep_text(to, &text),
        Err(e) => eprintln!("lockstep bench: cannot read {}: {e}", from.display()),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_library_path_names_a_folder_inside_raw() {
        assert_eq!(super::raw_dir_name("lockstep"), "lockstep");
        assert_eq!(super::raw_dir_name("/tmp/w/lib.so"), "tmp_w_lib.so");
        let raw = std::path::Path::new("out/raw");
        assert!(raw
            .join(super::raw_dir_name("/tmp/lib.so"))
            .starts_with(raw));
    }

    /// `--lockstep-options` reach Lockstep by name and builds of it given
    /// by path (the way to compare two builds), never Galera's library.
    #[test]
    fn lockstep_options_go_to_every_lockstep_library_and_never_to_galera() {
        use lockstep_testkit::Provider;
        use std::path::PathBuf;
        let opts = "repl.commit_order=2";
        let ours = Provider::Lockstep(PathBuf::from("target/release/liblockstep.so"));
        let build = Provider::Path(PathBuf::from("/tmp/liblockstep-old.so"));
        let galera_path = Provider::Path(PathBuf::from("/usr/lib/galera/libgalera_smm.so"));
        assert_eq!(super::lockstep_only(&ours, opts), opts);
        assert_eq!(super::lockstep_only(&build, opts), opts);
        assert_eq!(super::lockstep_only(&galera_path, opts), "");
        assert_eq!(super::lockstep_only(&Provider::Galera, opts), "");
    }
}
