//! The report as text (stdout) and Markdown (`report.md`): one table of
//! figures, the ratios, the percentiles, and what went wrong.

use std::fmt::Write as _;

use super::results::{BenchResults, Comparison, Measured, ProviderRun, WorkloadRun, PERCENTILES};
use super::workload::{Workload, WORKLOADS};
use crate::table;

const FIGURES: [&str; 8] = [
    "WORKLOAD",
    "LOAD",
    "PROVIDER",
    "TPS",
    "P95 MS",
    "MAX MS",
    "ABORTS/S",
    "CHECKSUMS",
];

/// One row per workload and provider, workloads in run order.
fn figure_rows(r: &BenchResults) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for name in &r.settings.workloads {
        for run in &r.runs {
            let Some(w) = run.workloads.iter().find(|w| &w.workload == name) else {
                continue;
            };
            let m = w.measured.as_ref();
            rows.push(vec![
                name.clone(),
                load(name, r.settings.nodes),
                run.provider.clone(),
                m.map_or("failed".into(), |m| format!("{:.1}", m.tps)),
                ms(m.and_then(|m| m.latency_ms.p95)),
                ms(m.and_then(|m| m.latency_ms.max)),
                m.map_or("-".into(), |m| format!("{:.1}", m.aborts_per_sec)),
                checksums(w).into(),
            ]);
        }
    }
    rows
}

fn load(name: &str, nodes: usize) -> String {
    WORKLOADS
        .iter()
        .find(|w| w.name == name)
        .map_or(String::new(), |w: &Workload| w.load_label(nodes))
}

fn checksums(w: &WorkloadRun) -> &'static str {
    match &w.consistency {
        None => "not checked",
        Some(c) if c.equal => "equal",
        Some(_) => "MISMATCH",
    }
}

fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2}"))
}

fn ratio(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2}"))
}

const RATIOS: [&str; 4] = ["WORKLOAD", "TPS", "P95", "MAX"];

fn ratio_rows(c: &Comparison) -> Vec<Vec<String>> {
    c.workloads
        .iter()
        .map(|r| vec![r.workload.clone(), ratio(r.tps), ratio(r.p95), ratio(r.max)])
        .collect()
}

fn settings_line(r: &BenchResults) -> String {
    let s = &r.settings;
    format!(
        "{} nodes, {} tables × {} rows, {} s measured after {} s warm-up per workload, \
         wsrep_slave_threads={}, {} CPUs",
        s.nodes,
        s.tables,
        s.table_size,
        s.time_secs,
        s.warmup_secs,
        s.slave_threads,
        r.environment.cpus
    )
}

/// Workload/provider pairs that failed or ended with different data.
fn problems(r: &BenchResults) -> Vec<String> {
    let mut out = Vec::new();
    for run in &r.runs {
        if let Some(e) = &run.error {
            out.push(format!("{}: {}", run.provider, first_line(e)));
        }
        for w in &run.workloads {
            let tag = format!("{} {}", run.provider, w.workload);
            if let Some(e) = &w.error {
                out.push(format!("{tag}: {}", first_line(e)));
            }
            if let Some(c) = w.consistency.as_ref().filter(|c| !c.equal) {
                let why = c.problem.as_deref().map(first_line).unwrap_or_default();
                out.push(format!(
                    "{tag}: CHECKSUM MISMATCH, the nodes differ after the workload {why}"
                ));
            }
        }
    }
    out
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or_default()
}

/// What `lockstep bench` prints on stdout (without the final line).
pub fn to_text(r: &BenchResults) -> String {
    let mut out = format!("lockstep bench: {}\n\n", settings_line(r));
    out.push_str(&table::render(&FIGURES, &figure_rows(r)));
    if let Some(c) = &r.comparison {
        let _ = writeln!(
            out,
            "\nratios {} (TPS: higher is better; latency: lower is better)",
            c.label()
        );
        out.push_str(&table::render(&RATIOS, &ratio_rows(c)));
    }
    let problems = problems(r);
    if !problems.is_empty() {
        out.push('\n');
        for p in &problems {
            let _ = writeln!(out, "!!! {p}");
        }
        for run in &r.runs {
            for w in &run.workloads {
                if let Some(c) = w
                    .consistency
                    .as_ref()
                    .filter(|c| !c.equal && !c.grid.is_empty())
                {
                    let _ = writeln!(out, "{} {}:\n{}", run.provider, w.workload, c.grid);
                }
            }
        }
    }
    out
}

/// `| a | b |` rows under a header.
fn md_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = format!("| {} |\n", header.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(header.len()));
    for row in rows {
        let _ = writeln!(out, "| {} |", row.join(" | "));
    }
    out
}

/// The PNG file names of a workload, relative to the report folder.
pub fn plot_names(workload: &str) -> (String, String) {
    (
        format!("throughput-{workload}.png"),
        format!("latency-{workload}.png"),
    )
}

/// `report.md`.
pub fn to_markdown(r: &BenchResults) -> String {
    let mut out = String::from("# Lockstep benchmark\n\n");
    let _ = writeln!(
        out,
        "{} to {} (UTC). {}.\n",
        r.started_utc,
        r.finished_utc,
        settings_line(r)
    );
    out.push_str(&environment_md(r));
    out.push_str("\n## Results\n\n");
    out.push_str(&md_table(&FIGURES, &figure_rows(r)));
    out.push_str(
        "\nTPS: committed transactions per second. P95/MAX: transaction latency in ms. \
         ABORTS/S: transactions that failed with a deadlock/certification conflict \
         (1213, 1205, 1020) and were retried by sysbench.\n",
    );
    if let Some(c) = &r.comparison {
        let _ = writeln!(
            out,
            "\n## Ratios {}\n\nTPS ratio: higher is better. Latency ratios: lower is better.\n",
            c.label()
        );
        out.push_str(&md_table(&RATIOS, &ratio_rows(c)));
    }
    let problems = problems(r);
    if !problems.is_empty() {
        out.push_str("\n## Problems\n\n");
        for p in &problems {
            let _ = writeln!(out, "- **{p}**");
        }
    }
    for name in &r.settings.workloads {
        out.push_str(&workload_md(r, name));
    }
    out.push_str(
        "\n## Files\n\n- `results.json`: every number above, and sysbench's per-second samples;\n\
         - `raw/<provider>/<workload>.txt`: sysbench's output of each measured run;\n\
         - `raw/<provider>/node1.my.cnf`: the configuration (the same for every provider but \
         `wsrep_provider`).\n",
    );
    out
}

fn environment_md(r: &BenchResults) -> String {
    let mut out = String::new();
    let env = &r.environment;
    let _ = writeln!(out, "- sysbench: {}", env.sysbench);
    let _ = writeln!(
        out,
        "- load average (1, 5, 15 min): {} before, {} after",
        env.load_average_before.as_deref().unwrap_or("-"),
        env.load_average_after.as_deref().unwrap_or("-")
    );
    for run in &r.runs {
        let _ = writeln!(
            out,
            "- {}: `{}`{}{}",
            run.provider,
            run.library.display(),
            run.provider_version
                .as_deref()
                .map_or(String::new(), |v| format!(", wsrep_provider_version {v}")),
            run.server_version
                .as_deref()
                .map_or(String::new(), |v| format!(", MariaDB {v}"))
        );
    }
    out
}

fn workload_md(r: &BenchResults, name: &str) -> String {
    let mut out = format!("\n## {name}\n\n");
    if let Some(w) = WORKLOADS.iter().find(|w| w.name == name) {
        let _ = writeln!(out, "{}: {}.\n", w.measures, w.load_label(r.settings.nodes));
    }
    let (throughput, latency) = plot_names(name);
    let _ = writeln!(
        out,
        "![throughput]({throughput})\n\n![latency]({latency})\n"
    );
    let mut header = vec!["PROVIDER", "MIN", "AVG"];
    header.extend(PERCENTILES.iter().map(|(p, _)| *p));
    header.push("MAX");
    let rows: Vec<Vec<String>> =
        r.runs
            .iter()
            .filter_map(|run| Some((run, measured(run, name)?)))
            .map(|(run, m)| {
                let l = &m.latency_ms;
                let mut row = vec![run.provider.clone(), ms(l.min), ms(l.avg)];
                row.extend(PERCENTILES.iter().map(|(name, _)| {
                    ms(l.percentiles.iter().find(|p| p.name == *name).map(|p| p.ms))
                }));
                row.push(ms(l.max));
                row
            })
            .collect();
    out.push_str("Latency (ms):\n\n");
    out.push_str(&md_table(&header, &rows));
    out
}

fn measured<'a>(run: &'a ProviderRun, workload: &str) -> Option<&'a Measured> {
    run.workloads
        .iter()
        .find(|w| w.workload == workload)?
        .measured
        .as_ref()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster_bench::results::{one_workload, Consistency, Environment, Settings};

    fn results(consistency: Consistency, error: Option<&str>) -> BenchResults {
        let runs = vec![one_workload("lockstep", None, Some(consistency), error)];
        BenchResults {
            started_utc: "t0".into(),
            finished_utc: "t1".into(),
            settings: Settings {
                nodes: 3,
                time_secs: 30,
                warmup_secs: 5,
                tables: 4,
                table_size: 10_000,
                slave_threads: 4,
                workloads: vec!["oltp_write_only".into()],
                providers: vec!["lockstep".into()],
            },
            environment: Environment {
                cpus: 2,
                sysbench: "sysbench 1.0.20".into(),
                load_average_before: None,
                load_average_after: None,
            },
            comparison: None,
            runs,
        }
    }

    #[test]
    fn a_checksum_mismatch_is_shown_loudly_with_the_grid() {
        let differ = Consistency {
            equal: false,
            last_committed: Some(7),
            grid: "table  node1  node2\nsbtest.sbtest1  1  2   <-- differs".into(),
            problem: None,
        };
        let r = results(differ, None);
        assert!(r.has_failures());
        let text = to_text(&r);
        let row = text
            .lines()
            .find(|l| l.starts_with("oltp_write_only"))
            .unwrap();
        assert!(
            row.contains("failed") && row.ends_with("MISMATCH"),
            "{text}"
        );
        assert!(
            text.contains("!!! lockstep oltp_write_only: CHECKSUM MISMATCH"),
            "{text}"
        );
        assert!(text.contains("<-- differs"), "{text}");
        assert!(to_markdown(&r).contains("## Problems"));
    }

    #[test]
    fn a_clean_run_has_no_problem_section() {
        let equal = Consistency {
            equal: true,
            last_committed: Some(7),
            grid: String::new(),
            problem: None,
        };
        let r = results(equal.clone(), None);
        assert!(!r.has_failures());
        assert!(!to_text(&r).contains("!!!"));
        assert!(!to_markdown(&r).contains("## Problems"));
        let r = results(equal, Some("sysbench: exited with code 1\nmore"));
        assert!(r.has_failures());
        assert!(
            to_text(&r).contains("!!! lockstep oltp_write_only: sysbench: exited with code 1\n")
        );
    }
}
