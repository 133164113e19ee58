//! `docs/failover.md`: per layout, a table of every fault with the
//! contenders side by side, the settings the run used, and each fault's
//! timeline; `results.json` beside it holds everything measured.

use std::fmt::Write as _;
use std::path::Path;

use super::{LayoutRun, Plan};

/// A fault's failures as `12 (2013: 10, connect: 2)`.
fn failures(r: &super::measure::FaultResult) -> String {
    if r.failed.is_empty() {
        return "0".into();
    }
    let parts: Vec<String> = r.failed.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    format!("{} ({})", r.failed_total(), parts.join(", "))
}

fn ms(v: Option<u64>) -> String {
    match v {
        Some(v) => format!("{:.1} s", v as f64 / 1000.0),
        None => "–".into(),
    }
}

fn bad(r: &super::measure::FaultResult) -> String {
    if r.bad_answers.is_empty() {
        return "0".into();
    }
    let parts: Vec<String> = r
        .bad_answers
        .iter()
        .map(|(k, v)| format!("{v} by {k}"))
        .collect();
    parts.join(", ")
}

/// sysbench's view of a window.
fn load(l: Option<&super::sysbench_load::LoadResult>) -> String {
    let Some(l) = l else {
        return "–".into();
    };
    format!(
        "{} s at 0 tps (median {:.0}); {:.0} errors, {} restarts",
        l.zero_tps_seconds, l.median_tps, l.errors, l.restarts
    )
}

/// The report's text. `img` turns a run's plot path into the link the
/// document uses.
pub fn markdown(
    plan: &Plan,
    runs: &[LayoutRun],
    header: &str,
    img: &dyn Fn(&Path) -> String,
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# What an application sees in a failover\n");
    let _ = writeln!(s, "{header}\n");
    let _ = writeln!(
        s,
        "Each run: three nodes{}, `lockstep check` beside each, the balancer in \
         front with README's configuration, and {} clients writing through it, one \
         autocommit `INSERT` each every {} ms. Every fault hits the node that serves \
         the writes (node1 at first, or the node that took over); it stays down or cut {} s, then comes back, and the next \
         fault waits until it is Synced and readmitted.\n",
        if plan.netns {
            " in network namespaces on one bridge"
        } else {
            " on loopback"
        },
        plan.clients,
        plan.pace.as_millis(),
        plan.down.as_secs()
    );
    let _ = writeln!(
        s,
        "Settings: HAProxy `inter {}ms fall {} rise {}`, keepalived `interval {} fall {} \
         rise {}`, `lockstep check --cache-ms {}` (README's; why these: \
         docs/adr/0037-failover-measured-through-real-balancers.md).\n",
        plan.haproxy_timing.inter_ms,
        plan.haproxy_timing.fall,
        plan.haproxy_timing.rise,
        plan.keepalived_timing.interval_s,
        plan.keepalived_timing.fall,
        plan.keepalived_timing.rise,
        plan.check_cache_ms
    );
    let _ = writeln!(
        s,
        "- **outage**: for each client that saw a failure, from the sending of its \
         first failed statement to the end of its first statement then acknowledged \
         by another node; the longest over the clients (– when none failed).\n\
         - **failed**: statements and connection attempts that failed, by MariaDB \
         error code (1047: node not ready, 1213: deadlock, 2013-like `lost \
         connection`: the session broke, its outcome unknown).\n\
         - **longest wait**: the longest time one client went without an \
         acknowledged write (a hang counts here though nothing failed).\n\
         - **lost**: acknowledged rows missing on a node after recovery; must be 0.\n\
         - **bad answers**: acknowledged writes whose row says the node that ran them \
         was not Synced and Primary (read inside the statement).\n\
         - **sysbench**: `oltp_write_only` through the same address ({} threads, at \
         most {} tps), restarted whenever it exits (1.0.20 ends on a lost \
         connection): its seconds without a commit, its median second, the \
         errors it retried (1213, 1205, 1020, 1047, 1180) and its restarts.\n",
        plan.sysbench_threads, plan.sysbench_rate
    );
    let mut layouts: Vec<super::Layout> = runs.iter().map(|r| r.layout).collect();
    layouts.dedup();
    for layout in layouts {
        let these: Vec<&LayoutRun> = runs.iter().filter(|r| r.layout == layout).collect();
        let _ = writeln!(s, "## {}\n", layout.name());
        let _ = writeln!(
            s,
            "| fault | provider | outage | failed | longest wait | lost | bad answers | acknowledged (by node) | sysbench |\n\
             |---|---|---|---|---|---|---|---|---|"
        );
        for &fault in &plan.faults {
            for r in &these {
                let Some(f) = r.faults.iter().find(|f| f.fault == fault) else {
                    continue;
                };
                let by_node: Vec<String> = f
                    .result
                    .answered_by
                    .iter()
                    .map(|(n, c)| format!("{n} {c}"))
                    .collect();
                let note = f
                    .error
                    .as_ref()
                    .map(|e| format!(" ⚠ {e}"))
                    .unwrap_or_default();
                let _ = writeln!(
                    s,
                    "| {}{note} | {} | {} | {} | {} | {} | {} | {} ({}) | {} |",
                    fault.name(),
                    r.provider,
                    ms(f.result.outage_ms),
                    failures(&f.result),
                    ms(Some(f.result.longest_wait_ms)),
                    f.result.lost_total(),
                    bad(&f.result),
                    f.result.succeeded,
                    by_node.join(", "),
                    load(f.load.as_ref())
                );
            }
        }
        for r in &these {
            if let Some(e) = &r.error {
                let _ = writeln!(s, "\n{} stopped early: {e}", r.provider);
            }
        }
        let _ = writeln!(s);
        for &fault in &plan.faults {
            for r in &these {
                if let Some(p) = r
                    .faults
                    .iter()
                    .find(|f| f.fault == fault)
                    .and_then(|f| f.plot.as_ref())
                {
                    let _ = writeln!(
                        s,
                        "![{} {} {}]({})",
                        layout.name(),
                        r.provider,
                        fault.name(),
                        img(p)
                    );
                }
            }
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(s, "## Faults\n");
    for f in &plan.faults {
        let _ = writeln!(s, "- **{}**: {}", f.name(), f.describe());
    }
    s
}

/// True when every run finished and nothing acknowledged was lost. Writes
/// answered by a node that was not Synced and Primary are reported, not
/// judged here: a forced donor answers until the balancer sees it, with
/// either provider (ADR 0037); tests/failover.rs requires none after a kill.
pub fn all_good(runs: &[LayoutRun]) -> bool {
    runs.iter().all(|r| {
        r.error.is_none()
            && r.faults
                .iter()
                .all(|f| f.error.is_none() && f.result.lost_total() == 0)
    })
}

#[cfg(test)]
mod tests {
    use super::super::measure::FaultResult;
    use super::*;

    #[test]
    fn failures_list_every_code() {
        let mut r = FaultResult::default();
        assert_eq!(failures(&r), "0");
        r.failed.insert("1047".into(), 3);
        r.failed.insert("connect".into(), 2);
        assert_eq!(failures(&r), "5 (1047: 3, connect: 2)");
        r.bad_answers.insert("node1 2/Primary".into(), 4);
        assert_eq!(bad(&r), "4 by node1 2/Primary");
        assert_eq!(ms(Some(1234)), "1.2 s");
        assert_eq!(ms(None), "–");
    }
}
