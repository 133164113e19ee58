//! `docs/jepsen.md`: one table per provider, anomalies by kind side by
//! side, and the explanation of every run that did not pass.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use lockstep_history::AnomalyKind;

use crate::run::RunResult;

/// The whole document. `histories` is where anomalous runs' history files
/// were copied, relative to the document.
pub fn markdown(results: &[RunResult], header: &str, histories: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{header}");
    let mut providers: Vec<String> = results.iter().map(|r| r.spec.provider_name()).collect();
    providers.dedup();
    providers.sort();
    providers.dedup();
    for p in &providers {
        let _ = writeln!(out, "\n## {p}\n");
        let _ = writeln!(
            out,
            "| nemesis | flush | isolation | ops | ok | unknown | failed | anomalies | allowed by the isolation | whole again | history |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|");
        for r in results.iter().filter(|r| &r.spec.provider_name() == p) {
            let iso = r.spec.isolation();
            let forbidden = r.report.summary_under(iso, false);
            let history = if !kept(r) {
                "-".to_string()
            } else {
                format!("[{0}]({histories}/{0}.jsonl.gz)", run_file(r))
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.spec.nemesis.name(),
                r.spec.flush,
                if r.spec.snapshot_isolation {
                    "snapshot"
                } else {
                    "RR"
                },
                r.ops(),
                r.ok,
                r.unknown,
                r.failed,
                if r.safe() {
                    "none".to_string()
                } else {
                    format!("**{forbidden}**")
                },
                r.report.summary_under(iso, true),
                if r.recovered {
                    "yes".to_string()
                } else {
                    "**no**".to_string()
                },
                history
            );
        }
    }
    let _ = writeln!(out, "\n## Anomalies by kind (all runs)\n");
    let _ = writeln!(out, "| kind | {} |", providers.join(" | "));
    let _ = writeln!(out, "|---|{}", "---|".repeat(providers.len()));
    for kind in AnomalyKind::ALL {
        let counts: Vec<String> = providers
            .iter()
            .map(|p| {
                let n: usize = results
                    .iter()
                    .filter(|r| &r.spec.provider_name() == p)
                    .map(|r| r.report.count(kind))
                    .sum();
                n.to_string()
            })
            .collect();
        let _ = writeln!(out, "| {kind} | {} |", counts.join(" | "));
    }
    let failing: Vec<&RunResult> = results.iter().filter(|r| !r.passed()).collect();
    if !failing.is_empty() {
        let _ = writeln!(out, "\n## Runs that did not pass\n");
    }
    for r in failing {
        let _ = writeln!(out, "### {}\n", r.spec.name());
        for p in &r.problems {
            let _ = writeln!(out, "- {}", p.lines().next().unwrap_or_default());
        }
        let _ = writeln!(out, "\nNemesis:\n\n```\n{}\n```", r.nemesis_log.join("\n"));
        let mut shown: BTreeMap<AnomalyKind, usize> = BTreeMap::new();
        let iso = r.spec.isolation();
        for a in r
            .report
            .anomalies
            .iter()
            .filter(|a| !a.kind.allowed_under(iso))
        {
            let n = shown.entry(a.kind).or_insert(0);
            *n += 1;
            if *n <= 2 {
                let _ = writeln!(out, "\n```\n{a}```");
            }
        }
        let _ = writeln!(out);
    }
    out
}

/// Whether a run's history is kept: it did not pass, or it ran with the
/// server's default isolation (the lost updates it shows are the evidence
/// for README's advice).
fn kept(r: &RunResult) -> bool {
    !r.passed() || !r.spec.snapshot_isolation
}

/// The file a run's history is kept under.
pub fn run_file(r: &RunResult) -> String {
    r.spec.name()
}

/// Copies the history of every run that did not pass into `dir`.
pub fn keep_histories(results: &[RunResult], dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for r in results
        .iter()
        .filter(|r| !r.report.is_clean() || !r.recovered)
    {
        let from = r.dir.join("history.jsonl");
        if from.is_file() {
            std::fs::copy(&from, dir.join(format!("{}.jsonl", run_file(r))))?;
        }
    }
    Ok(())
}
