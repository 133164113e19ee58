//! The large-transaction workload (issue 12): a 1M-row `UPDATE` on node 1
//! while node 2 runs 4-thread point updates on another table. What it
//! shows is Galera's best-known weakness, the cluster stall: while the big
//! writeset is replicated and applied, the other nodes stop committing.
//!
//! Per provider: a fresh 3-node cluster; `bench_large.big` loaded in
//! 50 000-row transactions; sysbench `oltp_update_index` on node 2 for
//! `time` seconds with a 1-second report; the `UPDATE` starts on node 1
//! after `delay`. Reported: node 2's worst second as a fraction of its
//! median second, its maximum latency, and how long the `UPDATE` took.
//! After the run every node must hold the same data (CHECKSUM TABLE).

use std::path::Path;
use std::time::{Duration, Instant};

use lockstep_testkit::{Cluster, Sysbench, SysbenchReport};

use super::contender::Contender;
use super::plot::{self, Series};
use super::progress;

/// How long the nodes may take to apply the big writeset after the run.
const CATCH_UP: Duration = Duration::from_secs(600);
/// Rows per loading transaction: well below any limit, so that loading
/// measures nothing.
const LOAD_CHUNK: u64 = 50_000;

/// What every provider runs.
#[derive(Debug, Clone)]
pub struct LargeTrxPlan {
    pub rows: u64,
    pub time: Duration,
    /// When the `UPDATE` starts, after the point updates.
    pub delay: Duration,
    pub slave_threads: u32,
    /// Extra provider options for Lockstep's cluster only.
    pub lockstep_options: String,
    /// Streaming replication for the `UPDATE` (both providers): a fragment
    /// every this many rows (`wsrep_trx_fragment_unit='rows'`); `None`
    /// replicates it as one writeset at commit.
    pub fragment_rows: Option<u64>,
}

impl Default for LargeTrxPlan {
    fn default() -> Self {
        LargeTrxPlan {
            rows: 1_000_000,
            time: Duration::from_secs(30),
            delay: Duration::from_secs(5),
            slave_threads: 4,
            lockstep_options: String::new(),
            fragment_rows: None,
        }
    }
}

/// One provider's result.
#[derive(Debug, Clone)]
pub struct LargeTrxRun {
    pub provider: String,
    /// Node 2's transactions per second, one value per second.
    pub per_second: Vec<f64>,
    pub median_tps: f64,
    pub worst_tps: f64,
    /// Node 2's slowest transaction, ms.
    pub max_latency_ms: Option<f64>,
    pub update_secs: f64,
    /// From the `UPDATE`'s return until every node has committed as much.
    pub catch_up_secs: f64,
    pub consistent: bool,
    pub error: Option<String>,
}

impl LargeTrxRun {
    /// The worst second as a fraction of the median second.
    pub fn worst_fraction(&self) -> f64 {
        if self.median_tps > 0.0 {
            self.worst_tps / self.median_tps
        } else {
            0.0
        }
    }
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Runs the workload on every provider in turn; writes `large_trx.png`
/// into `out`.
pub fn run(plan: &LargeTrxPlan, providers: &[Contender], out: &Path) -> Vec<LargeTrxRun> {
    let runs: Vec<LargeTrxRun> = providers.iter().map(|p| run_one(plan, p)).collect();
    let series: Vec<Series> = runs
        .iter()
        .map(|r| Series {
            label: r.provider.clone(),
            points: r
                .per_second
                .iter()
                .enumerate()
                .map(|(i, tps)| ((i + 1) as f64, *tps))
                .collect(),
        })
        .collect();
    let _ = std::fs::create_dir_all(out);
    let title = format!(
        "node 2 point updates while node 1 updates {} rows (UPDATE starts at {} s)",
        plan.rows,
        plan.delay.as_secs()
    );
    if let Err(e) = plot::throughput(&out.join("large_trx.png"), &title, &series) {
        eprintln!("lockstep bench: large_trx.png: {e}");
    }
    runs
}

fn run_one(plan: &LargeTrxPlan, contender: &Contender) -> LargeTrxRun {
    let label = contender.label.clone();
    let mut run = LargeTrxRun {
        provider: label.clone(),
        per_second: Vec::new(),
        median_tps: 0.0,
        worst_tps: 0.0,
        max_latency_ms: None,
        update_secs: 0.0,
        catch_up_secs: 0.0,
        consistent: false,
        error: None,
    };
    let tag = format!("large_trx {label}");
    progress(&tag, "starting 3 nodes");
    let mut cluster = match contender
        .spec(3, &plan.lockstep_options)
        .cluster_name("lockstep-bench-large")
        .slave_threads(plan.slave_threads)
        .sql_timeout(CATCH_UP)
        .start()
    {
        Ok(c) => c,
        Err(e) => {
            run.error = Some(format!("starting the cluster: {e}"));
            return run;
        }
    };
    if let Err(e) = measure(plan, &cluster, &tag, &mut run) {
        progress(&tag, &format!("failed: {e}"));
        run.error = Some(e);
    }
    progress(&tag, "stopping the cluster");
    let _ = cluster.stop_all();
    run
}

fn measure(
    plan: &LargeTrxPlan,
    cluster: &Cluster,
    tag: &str,
    run: &mut LargeTrxRun,
) -> Result<(), String> {
    let node1 = cluster.node(0);
    let e = |what: &str| {
        let what = what.to_string();
        move |e: lockstep_testkit::Error| format!("{what}: {e}")
    };
    progress(tag, &format!("loading {} rows", plan.rows));
    let t0 = Instant::now();
    node1
        .sql(
            "CREATE DATABASE IF NOT EXISTS bench_large; \
             CREATE TABLE bench_large.big (id INT PRIMARY KEY, k INT NOT NULL, \
             c CHAR(120) NOT NULL) ENGINE=InnoDB",
        )
        .map_err(e("creating the table"))?;
    let mut from = 1;
    while from <= plan.rows {
        let to = (from + LOAD_CHUNK - 1).min(plan.rows);
        node1
            .sql(&format!(
                "USE bench_large; INSERT INTO big SELECT seq, seq, REPEAT('x', 120) \
                 FROM seq_{from}_to_{to}"
            ))
            .map_err(e("loading rows"))?;
        from = to + 1;
    }
    let points = Sysbench::script("oltp_update_index")
        .tables(1)
        .table_size(10_000)
        .threads(4);
    points.prepare(node1).map_err(e("sysbench prepare"))?;
    cluster
        .wait_for_equal_last_committed(CATCH_UP)
        .map_err(e("waiting for the load to replicate"))?;
    progress(
        tag,
        &format!("loaded in {:.0} s", t0.elapsed().as_secs_f64()),
    );
    let node2 = cluster.node(1);
    let load = points
        .clone()
        .time(plan.time)
        .report_interval(1)
        .overrun(CATCH_UP)
        .spawn(&[node2])
        .map_err(e("starting sysbench on node 2"))?;
    std::thread::sleep(plan.delay);
    progress(tag, &format!("UPDATE of {} rows on node 1", plan.rows));
    let t = Instant::now();
    let updated = node1.sql(&update_statement(plan.fragment_rows));
    run.update_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    // Every node has committed as much as node 1 had once its UPDATE
    // returned. (Waiting for equal positions measured until node 2's
    // load ended: under load the nodes seldom agree at a poll.)
    let caught_up = node1
        .last_committed()
        .and_then(|seqno| cluster.wait_for_last_committed_at_least(seqno, CATCH_UP));
    run.catch_up_secs = t.elapsed().as_secs_f64();
    let report = load.wait().map_err(e("sysbench on node 2"))?;
    updated.map_err(e("the UPDATE"))?;
    caught_up.map_err(e("waiting for every node to apply the UPDATE"))?;
    summarize(&report, run);
    progress(
        tag,
        &format!(
            "UPDATE {:.1} s; node 2: median {:.0} tps, worst second {:.0} tps ({:.0} %), max latency {} ms",
            run.update_secs,
            run.median_tps,
            run.worst_tps,
            100.0 * run.worst_fraction(),
            run.max_latency_ms.map_or("-".into(), |v| format!("{v:.0}"))
        ),
    );
    let sums = cluster
        .checksums(&["bench_large.big", "sbtest.sbtest1"])
        .map_err(e("CHECKSUM TABLE"))?;
    run.consistent = sums.is_consistent();
    if !run.consistent {
        return Err("the nodes hold different data after the run".into());
    }
    Ok(())
}

/// The big `UPDATE`, streamed in fragments of `fragment_rows` if given.
fn update_statement(fragment_rows: Option<u64>) -> String {
    let update = "UPDATE bench_large.big SET k = k + 1";
    match fragment_rows {
        Some(rows) => format!(
            "SET SESSION wsrep_trx_fragment_unit = 'rows'; \
             SET SESSION wsrep_trx_fragment_size = {rows}; {update}"
        ),
        None => update.to_string(),
    }
}

fn summarize(report: &SysbenchReport, run: &mut LargeTrxRun) {
    run.per_second = report.intervals.iter().map(|s| s.tps).collect();
    run.median_tps = median(&run.per_second);
    run.worst_tps = run.per_second.iter().copied().fold(f64::INFINITY, f64::min);
    if !run.worst_tps.is_finite() {
        run.worst_tps = 0.0;
    }
    run.max_latency_ms = report.latency.as_ref().map(|l| l.max_ms);
}

/// The side-by-side text report.
pub fn to_text(plan: &LargeTrxPlan, runs: &[LargeTrxRun]) -> String {
    let streamed = plan.fragment_rows.map_or(String::new(), |rows| {
        format!(", streamed in {rows}-row fragments")
    });
    let mut s = format!(
        "\nlarge transaction: UPDATE of {} rows on node 1{streamed}, 4-thread point updates on node 2 for {} s\n",
        plan.rows,
        plan.time.as_secs()
    );
    s.push_str(&format!(
        "{:<12} {:>10} {:>12} {:>12} {:>8} {:>14} {:>12}  {}\n",
        "provider",
        "UPDATE s",
        "median tps",
        "worst tps",
        "worst %",
        "max lat ms",
        "catch-up s",
        "data"
    ));
    for r in runs {
        s.push_str(&format!(
            "{:<12} {:>10.1} {:>12.0} {:>12.0} {:>7.0}% {:>14} {:>12.1}  {}\n",
            r.provider,
            r.update_secs,
            r.median_tps,
            r.worst_tps,
            100.0 * r.worst_fraction(),
            r.max_latency_ms.map_or("-".into(), |v| format!("{v:.0}")),
            r.catch_up_secs,
            match (&r.error, r.consistent) {
                (Some(e), _) => format!("FAILED: {}", e.lines().next().unwrap_or_default()),
                (None, true) => "equal".into(),
                (None, false) => "DIFFERENT".into(),
            }
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_update_streams_only_when_asked() {
        assert_eq!(
            update_statement(None),
            "UPDATE bench_large.big SET k = k + 1"
        );
        let streamed = update_statement(Some(10_000));
        assert!(streamed.contains("wsrep_trx_fragment_unit = 'rows'"));
        assert!(streamed.contains("wsrep_trx_fragment_size = 10000;"));
        assert!(streamed.ends_with("UPDATE bench_large.big SET k = k + 1"));
    }

    #[test]
    fn the_worst_second_is_a_fraction_of_the_median() {
        let mut run = LargeTrxRun {
            provider: "x".into(),
            per_second: vec![100.0, 0.0, 90.0, 110.0, 50.0],
            median_tps: 0.0,
            worst_tps: 0.0,
            max_latency_ms: None,
            update_secs: 0.0,
            catch_up_secs: 0.0,
            consistent: true,
            error: None,
        };
        run.median_tps = median(&run.per_second);
        run.worst_tps = 0.0;
        assert_eq!(run.median_tps, 90.0);
        assert_eq!(run.worst_fraction(), 0.0);
        run.worst_tps = 45.0;
        assert_eq!(run.worst_fraction(), 0.5);
        assert_eq!(median(&[1.0, 3.0]), 2.0);
        assert_eq!(median(&[]), 0.0);
    }
}
