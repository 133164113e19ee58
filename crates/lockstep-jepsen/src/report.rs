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
                if r.spec.cache_sync {
                    format!("{} + cache_sync", r.spec.flush)
                } else {
                    r.spec.flush.to_string()
                },
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
        // What follows a problem's first line (a hung node's thread
        // stacks, a log's tail) as it was printed.
        for p in r.problems.iter().filter_map(|p| p.split_once('\n')) {
            let _ = writeln!(out, "\n```\n{}\n```", p.1.trim_end());
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

/// Copies the history of every run [`kept`] says into `dir`, compressed
/// (`gzip -9`: a run's history is a few MB of JSON lines; `zcat` reads it
/// back), under the name the report links.
pub fn keep_histories(results: &[RunResult], dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for r in results.iter().filter(|r| kept(r)) {
        let from = r.dir.join("history.jsonl");
        if !from.is_file() {
            continue;
        }
        let to = dir.join(format!("{}.jsonl", run_file(r)));
        std::fs::copy(&from, &to)?;
        let zipped = std::process::Command::new("gzip")
            .args(["-9", "-f"])
            .arg(&to)
            .status()?;
        if !zipped.success() {
            return Err(std::io::Error::other(format!("gzip {}", to.display())));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nemesis::Nemesis;
    use crate::run::RunSpec;
    use lockstep_history::{Anomaly, Report};
    use lockstep_testkit::Provider;

    fn result(dir: &Path, nemesis: Nemesis, si: bool, report: Report) -> RunResult {
        let mut spec = RunSpec::new(Provider::Galera, nemesis, 1);
        spec.snapshot_isolation = si;
        let run_dir = dir.join(spec.name());
        std::fs::create_dir_all(&run_dir).unwrap();
        std::fs::write(run_dir.join("history.jsonl"), "{}\n").unwrap();
        RunResult {
            spec,
            ok: 1,
            failed: 0,
            unknown: 0,
            report,
            recovered: true,
            final_reads: 3,
            problems: vec![],
            nemesis_log: vec![],
            dir: run_dir,
            seconds: 1.0,
        }
    }

    fn with(kind: AnomalyKind) -> Report {
        let mut r = Report::default();
        r.add(Anomaly {
            kind,
            txns: vec![1],
            explanation: vec!["x".into()],
        });
        r
    }

    #[test]
    fn the_kept_histories_are_the_linked_ones_and_gzipped() {
        let out =
            std::env::temp_dir().join(format!("lockstep-jepsen-report-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let results = vec![
            // Allowed under snapshot isolation: passes, not kept.
            result(&out, Nemesis::PauseLeader, true, with(AnomalyKind::G2Item)),
            // Forbidden: kept.
            result(&out, Nemesis::KillOne, true, with(AnomalyKind::LostWrite)),
            // Repeatable read: kept as evidence.
            result(&out, Nemesis::None, false, with(AnomalyKind::P4)),
        ];
        let docs = out.join("docs");
        keep_histories(&results, &docs.join("jepsen")).unwrap();
        let mut files: Vec<String> = std::fs::read_dir(docs.join("jepsen"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        assert_eq!(
            files,
            [
                "galera-kill-one-flush1-si.jsonl.gz",
                "galera-none-flush1-rr.jsonl.gz"
            ]
        );
        let md = markdown(&results, "# t", "jepsen");
        for f in &files {
            assert!(md.contains(&format!("(jepsen/{f})")), "{f} not linked");
        }
        assert!(
            !md.contains("galera-pause-leader-flush1-si.jsonl"),
            "a passing run is linked"
        );
        let _ = std::fs::remove_dir_all(&out);
    }

    #[test]
    fn a_problems_later_lines_are_in_the_report_as_printed() {
        let out =
            std::env::temp_dir().join(format!("lockstep-jepsen-lines-{}", std::process::id()));
        let mut r = result(&out, Nemesis::KillOne, true, Report::default());
        r.problems = vec!["stopping node 2: hung\nThread 1:\n  #0 wait ()".into()];
        let md = markdown(&[r], "# t", "jepsen");
        assert!(md.contains("- stopping node 2: hung\n"), "{md}");
        assert!(md.contains("```\nThread 1:\n  #0 wait ()\n```"), "{md}");
        let _ = std::fs::remove_dir_all(&out);
    }
}
