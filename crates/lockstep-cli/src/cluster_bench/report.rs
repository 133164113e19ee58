//! The report as text (stdout) and Markdown (`report.md`): one table of
//! figures, the ratios, the percentiles, and what went wrong.

use std::fmt::Write as _;

use super::results::{
    BenchResults, Comparison, Outcome, ProviderResults, Slot, WorkloadResults, PERCENTILES,
};
use super::round_order;
use super::run::FLOOR;
use super::workload::{causal_read_cost, find, Workload};
use crate::table;

const FIGURES: [&str; 9] = [
    "WORKLOAD",
    "LOAD",
    "PROVIDER",
    "TPS",
    "P95 MS",
    "MAX MS",
    "ABORTS/S",
    "CPU MS/1K TRX",
    "CHECKSUMS",
];

/// One row per workload and provider, workloads in run order: medians
/// over the rounds, the highest max.
fn figure_rows(r: &BenchResults) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for name in &r.settings.workloads {
        for p in &r.providers {
            let Some(w) = p.workload(name) else {
                continue;
            };
            let s = w.summary.as_ref();
            let tps = s.map_or("failed".into(), |s| {
                if s.measured_rounds < w.rounds.len() {
                    format!(
                        "{:.1} ({}/{} rounds)",
                        s.tps,
                        s.measured_rounds,
                        w.rounds.len()
                    )
                } else {
                    format!("{:.1}", s.tps)
                }
            });
            rows.push(vec![
                name.clone(),
                load(name, r.settings.nodes),
                p.provider.clone(),
                tps,
                ms(s.and_then(|s| s.p95_ms)),
                ms(s.and_then(|s| s.max_ms)),
                s.map_or("-".into(), |s| format!("{:.1}", s.aborts_per_sec)),
                s.and_then(|s| s.cpu_ms_per_1000)
                    .map_or("-".into(), |v| format!("{v:.0}")),
                checksums(w).into(),
            ]);
        }
    }
    rows
}

const ROUNDS: [&str; 6] = ["ROUND", "PROVIDER", "WORKLOAD", "TPS", "P95 MS", "MAX MS"];

/// Every workload run, in the order they ran.
fn round_rows(r: &BenchResults) -> Vec<Vec<String>> {
    let mut runs: Vec<(Slot, usize, &str, &Outcome)> = Vec::new();
    for p in &r.providers {
        for w in &p.workloads {
            let order = r.settings.workloads.iter().position(|n| *n == w.workload);
            for x in &w.rounds {
                let order = order.unwrap_or(usize::MAX);
                runs.push((x.slot, order, &p.provider, &x.outcome));
            }
        }
    }
    runs.sort_by_key(|(slot, order, ..)| (slot.round, slot.position, *order));
    runs.iter()
        .map(|(slot, order, provider, o)| {
            let m = o.measured.as_ref();
            vec![
                slot.round.to_string(),
                provider.to_string(),
                r.settings
                    .workloads
                    .get(*order)
                    .cloned()
                    .unwrap_or_default(),
                m.map_or("failed".into(), |m| format!("{:.1}", m.tps)),
                ms(m.and_then(|m| m.latency_ms.p95)),
                ms(m.and_then(|m| m.latency_ms.max)),
            ]
        })
        .collect()
}

fn load(name: &str, nodes: usize) -> String {
    find(name).map_or(String::new(), |w: Workload| w.load_label(nodes))
}

/// `MISMATCH` if any round's nodes differed, `not checked` if any round
/// was not checked, else `equal`.
fn checksums(w: &WorkloadResults) -> &'static str {
    let checks = || w.rounds.iter().map(|x| x.outcome.consistency.as_ref());
    if checks().any(|c| c.is_some_and(|c| !c.equal)) {
        "MISMATCH"
    } else if checks().any(|c| c.is_none()) {
        "not checked"
    } else {
        "equal"
    }
}

fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2}"))
}

const RATIOS: [&str; 5] = ["WORKLOAD", "TPS", "P95", "MAX", "CPU"];

fn ratio_rows(c: &Comparison) -> Vec<Vec<String>> {
    c.workloads
        .iter()
        .map(|r| {
            vec![
                r.workload.clone(),
                ms(r.tps),
                ms(r.p95),
                ms(r.max),
                ms(r.cpu),
            ]
        })
        .collect()
}

fn settings_line(r: &BenchResults) -> String {
    let s = &r.settings;
    format!(
        "{} nodes, {} tables × {} rows, {} s measured after {} s warm-up per workload, \
         wsrep_slave_threads={}, peers {}, {} CPUs",
        s.nodes,
        s.tables,
        s.table_size,
        s.time_secs,
        s.warmup_secs,
        s.slave_threads,
        if s.peer_tls {
            "mutual TLS"
        } else {
            "plain TCP"
        },
        r.environment.cpus
    )
}

/// How many rounds, in which order, and what the headline figures are.
fn rounds_line(r: &BenchResults) -> String {
    let s = &r.settings;
    if s.rounds == 1 {
        return "1 round: the figures are those of the single run.".into();
    }
    let orders: Vec<String> = (0..s.rounds.min(2))
        .map(|round| {
            let order: Vec<&str> = round_order(&s.providers, round)
                .into_iter()
                .map(String::as_str)
                .collect();
            format!("round {round}: {}", order.join(" then "))
        })
        .collect();
    let middle = match s.rounds {
        2 => " (with 2 rounds, the mean of the two)",
        n if n % 2 == 0 => " (with an even count, the mean of the middle two)",
        _ => "",
    };
    let more = if s.rounds > 2 { ", and so on" } else { "" };
    format!(
        "{} rounds, the provider order alternating ({}{more}). TPS, P95 and \
         ABORTS/S are medians over the rounds{middle}; MAX is the highest of any round.",
        s.rounds,
        orders.join("; ")
    )
}

/// A provider's median TPS of a workload, if any round measured it.
fn tps(p: &ProviderResults, workload: &str) -> Option<f64> {
    p.workload(workload)
        .and_then(|w| w.summary.as_ref())
        .map(|s| s.tps)
}

/// The thread sweep's curve in the report folder.
pub const SWEEP_PNG: &str = "sweep.png";

/// One line per workload the floor measured: each provider's share of the
/// floor's throughput (issue 14 aims at 0.6 and more).
fn floor_lines(r: &BenchResults) -> Vec<String> {
    let Some(floor) = r.providers.iter().find(|p| p.provider == FLOOR) else {
        return Vec::new();
    };
    r.settings
        .workloads
        .iter()
        .filter_map(|name| {
            let base = tps(floor, name).filter(|t| *t > 0.0)?;
            let shares: Vec<String> = r
                .providers
                .iter()
                .filter(|p| p.provider != FLOOR)
                .filter_map(|p| Some(format!("{} {:.2}", p.provider, tps(p, name)? / base)))
                .collect();
            Some(format!(
                "{name}: the floor {base:.0} tps; share of it: {}",
                shares.join(", ")
            ))
        })
        .collect()
}

/// Whether the thread sweep ran (at least two of its points).
fn swept(r: &BenchResults) -> bool {
    let points = super::workload::sweep();
    r.settings
        .workloads
        .iter()
        .filter(|name| points.iter().any(|w| w.name == name.as_str()))
        .count()
        >= 2
}

/// One line per provider that measured both read workloads: what causal
/// reads cost of the read rate (issue 14: at most 10 %).
fn causal_lines(r: &BenchResults) -> Vec<String> {
    r.providers
        .iter()
        // The floor has wsrep off: its "causal" reads are plain reads.
        .filter(|p| p.provider != FLOOR)
        .filter_map(|p| {
            let (plain, causal) = (tps(p, "point_select")?, tps(p, "causal_point_select")?);
            let cost = causal_read_cost(plain, causal)?;
            Some(format!(
                "causal reads with {}: {causal:.0} reads/s against {plain:.0} without, \
                 a cost of {:.0} %",
                p.provider,
                cost * 100.0
            ))
        })
        .collect()
}

/// Rounds, providers and workloads that failed or ended with different data.
fn problems(r: &BenchResults) -> Vec<String> {
    let mut out = Vec::new();
    for p in &r.providers {
        for c in &p.clusters {
            if let Some(e) = &c.error {
                let tag = format!("round {} {}", c.slot.round, p.provider);
                out.push(format!("{tag}: {}", first_line(e)));
            }
        }
        for w in &p.workloads {
            for x in &w.rounds {
                let tag = format!("round {} {} {}", x.slot.round, p.provider, w.workload);
                if let Some(e) = &x.outcome.error {
                    out.push(format!("{tag}: {}", first_line(e)));
                }
                if let Some(c) = x.outcome.consistency.as_ref().filter(|c| !c.equal) {
                    let why = c.problem.as_deref().map(first_line).unwrap_or_default();
                    out.push(format!(
                        "{tag}: CHECKSUM MISMATCH, the nodes differ after the workload {why}"
                    ));
                }
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
    let mut out = format!(
        "lockstep bench: {}\n{}\n\n",
        settings_line(r),
        rounds_line(r)
    );
    if r.settings.rounds > 1 {
        out.push_str("every round, in run order:\n");
        out.push_str(&table::render(&ROUNDS, &round_rows(r)));
        let _ = writeln!(out, "\nover the {} rounds:", r.settings.rounds);
    }
    out.push_str(&table::render(&FIGURES, &figure_rows(r)));
    if let Some(c) = &r.comparison {
        let _ = writeln!(
            out,
            "\nratios {} (TPS: higher is better; latency: lower is better)",
            c.label()
        );
        out.push_str(&table::render(&RATIOS, &ratio_rows(c)));
    }
    let causal = causal_lines(r);
    if !causal.is_empty() {
        out.push('\n');
        for line in &causal {
            let _ = writeln!(out, "{line}");
        }
    }
    let floor = floor_lines(r);
    if !floor.is_empty() {
        out.push_str("\nthe floor: one MariaDB, same my.cnf, wsrep off\n");
        for line in &floor {
            let _ = writeln!(out, "{line}");
        }
    }
    let problems = problems(r);
    if !problems.is_empty() {
        out.push('\n');
        for p in &problems {
            let _ = writeln!(out, "!!! {p}");
        }
        for p in &r.providers {
            for w in &p.workloads {
                for x in &w.rounds {
                    if let Some(c) = x
                        .outcome
                        .consistency
                        .as_ref()
                        .filter(|c| !c.equal && !c.grid.is_empty())
                    {
                        let _ = writeln!(
                            out,
                            "round {} {} {}:\n{}",
                            x.slot.round, p.provider, w.workload, c.grid
                        );
                    }
                }
            }
        }
    }
    out
}

/// `| a | b |` rows under a header.
pub(super) fn md_table(header: &[&str], rows: &[Vec<String>]) -> String {
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
        "{} to {} (UTC). {}.\n\n{}\n",
        r.started_utc,
        r.finished_utc,
        settings_line(r),
        rounds_line(r)
    );
    out.push_str(&environment_md(r));
    out.push_str("\n## Results\n\n");
    out.push_str(&md_table(&FIGURES, &figure_rows(r)));
    out.push_str(
        "\nTPS: committed transactions per second. P95/MAX: transaction latency in ms. \
         ABORTS/S: transactions that failed with a deadlock/certification conflict \
         (1213, 1205, 1020) and were retried by sysbench. CPU MS/1K TRX: user and system \
         time of every node's mariadbd during the measured run, per 1000 transactions.\n",
    );
    if let Some(c) = &r.comparison {
        let _ = writeln!(
            out,
            "\n## Ratios {}\n\nOf the figures above. TPS ratio: higher is better. \
             Latency and CPU ratios: lower is better.\n",
            c.label()
        );
        out.push_str(&md_table(&RATIOS, &ratio_rows(c)));
    }
    let causal = causal_lines(r);
    if !causal.is_empty() {
        out.push_str("\n## Causal reads\n\n");
        for line in &causal {
            let _ = writeln!(out, "- {line}");
        }
    }
    let floor = floor_lines(r);
    if !floor.is_empty() {
        out.push_str(
            "\n## The floor\n\nOne MariaDB with the same my.cnf and wsrep off: each \
             provider's throughput as a share of it.\n\n",
        );
        for line in &floor {
            let _ = writeln!(out, "- {line}");
        }
    }
    if swept(r) {
        let _ = writeln!(
            out,
            "\n## Thread sweep\n\n`oltp_write_only` on node1 by client threads.\n\n![sweep]({SWEEP_PNG})"
        );
    }
    if r.settings.rounds > 1 {
        out.push_str("\n## Rounds\n\nEvery workload run, in run order.\n\n");
        out.push_str(&md_table(&ROUNDS, &round_rows(r)));
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
        "\n## Files\n\n- `results.json`: every number above, per round, with sysbench's \
         per-second samples and latency histograms;\n\
         - `raw/<provider>/round-<r>/<workload>.txt`: sysbench's output of each measured run;\n\
         - `raw/<provider>/round-<r>/node1.my.cnf`: the configuration (the same for every \
         provider but `wsrep_provider`).\n",
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
    for p in &r.providers {
        let _ = writeln!(
            out,
            "- {}: `{}`{}{}",
            p.provider,
            p.library.display(),
            p.provider_version
                .as_deref()
                .map_or(String::new(), |v| format!(", wsrep_provider_version {v}")),
            p.server_version
                .as_deref()
                .map_or(String::new(), |v| format!(", MariaDB {v}"))
        );
    }
    out
}

fn workload_md(r: &BenchResults, name: &str) -> String {
    let mut out = format!("\n## {name}\n\n");
    if let Some(w) = find(name) {
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
        r.providers
            .iter()
            .filter_map(|p| Some((p, p.workload(name)?.summary.as_ref()?)))
            .map(|(p, s)| {
                let l = &s.merged_latency_ms;
                let mut row = vec![p.provider.clone(), ms(l.min), ms(l.avg)];
                row.extend(PERCENTILES.iter().map(|(name, _)| {
                    ms(l.percentiles.iter().find(|p| p.name == *name).map(|p| p.ms))
                }));
                row.push(ms(l.max));
                row
            })
            .collect();
    if r.settings.rounds > 1 {
        out.push_str(
            "Latency (ms) of every round's histogram merged (so its p95 may differ \
             from the median P95 above). The throughput plot shows each provider's first \
             measured round (round 0 unless it failed, as its legend says):\n\n",
        );
    } else {
        out.push_str("Latency (ms):\n\n");
    }
    out.push_str(&md_table(&header, &rows));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster_bench::results::tests::measured;
    use crate::cluster_bench::results::{
        one_workload, Consistency, Environment, ProviderResults, ProviderRun, Settings,
    };

    fn results(consistency: Consistency, error: Option<&str>) -> BenchResults {
        let runs = vec![one_workload(
            "lockstep",
            (0, 0),
            None,
            Some(consistency),
            error,
        )];
        bench_results(runs, 1)
    }

    fn bench_results(runs: Vec<ProviderRun>, rounds: usize) -> BenchResults {
        let providers = ProviderResults::group(runs);
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
                providers: providers.iter().map(|p| p.provider.clone()).collect(),
                rounds,
                peer_tls: false,
            },
            environment: Environment {
                cpus: 2,
                sysbench: "sysbench 1.0.20".into(),
                load_average_before: None,
                load_average_after: None,
            },
            comparison: Comparison::of(&providers),
            providers,
        }
    }

    fn equal() -> Consistency {
        Consistency {
            equal: true,
            last_committed: Some(7),
            grid: String::new(),
            problem: None,
        }
    }

    /// Two rounds, ABBA: lockstep 100 then 300 TPS, galera 200 and 200.
    fn two_rounds() -> BenchResults {
        let run = |provider: &str, slot, tps, p95, max| {
            one_workload(
                provider,
                slot,
                Some(measured(tps, p95, max)),
                Some(equal()),
                None,
            )
        };
        bench_results(
            vec![
                run("lockstep", (0, 0), 100.0, 4.0, 10.0),
                run("galera", (0, 1), 200.0, 6.0, 50.0),
                run("galera", (1, 0), 200.0, 10.0, 20.0),
                run("lockstep", (1, 1), 300.0, 8.0, 40.0),
            ],
            2,
        )
    }

    #[test]
    fn the_floor_is_no_provider_to_compare_and_each_provider_gets_its_share() {
        let run = |provider: &str, position, tps| {
            one_workload(
                provider,
                (0, position),
                Some(measured(tps, 1.0, 2.0)),
                Some(equal()),
                None,
            )
        };
        let r = bench_results(
            vec![
                run("lockstep", 0, 1500.0),
                run("galera", 1, 1200.0),
                run(FLOOR, 2, 5000.0),
            ],
            1,
        );
        assert!(r.comparison.is_some(), "lockstep/galera still compared");
        let text = to_text(&r);
        assert!(
            text.contains(
                "oltp_write_only: the floor 5000 tps; share of it: lockstep 0.30, galera 0.24"
            ),
            "{text}"
        );
        assert!(to_markdown(&r).contains("## The floor"));
    }

    #[test]
    fn the_headline_is_the_median_of_the_rounds_and_each_round_is_listed() {
        let r = two_rounds();
        let text = to_text(&r);
        assert!(
            text.contains("2 rounds, the provider order alternating (round 0: lockstep then galera; round 1: galera then lockstep). TPS"),
            "{text}"
        );
        let lines: Vec<&str> = text.lines().collect();
        let row = |prefix: &str| -> Vec<&str> {
            lines
                .iter()
                .find(|l| l.starts_with(prefix))
                .unwrap_or_else(|| panic!("no `{prefix}` in\n{text}"))
                .split_whitespace()
                .collect()
        };
        // Medians (with 2 rounds, the mean) of TPS and p95; the highest max.
        assert_eq!(
            row("oltp_write_only  8 threads on node1  lockstep")[6..9],
            ["200.0", "6.00", "40.00"]
        );
        assert_eq!(
            row("oltp_write_only  8 threads on node1  galera")[6..9],
            ["200.0", "8.00", "50.00"]
        );
        assert_eq!(
            row("oltp_write_only  1.00")[1..],
            ["1.00", "0.75", "0.80", "-"]
        );
        // The rounds in run order: ABBA.
        let rounds: Vec<String> = lines
            .iter()
            .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()) && l.contains("oltp_"))
            .map(|l| l.split_whitespace().take(4).collect::<Vec<_>>().join(" "))
            .collect();
        assert_eq!(
            rounds,
            [
                "0 lockstep oltp_write_only 100.0",
                "0 galera oltp_write_only 200.0",
                "1 galera oltp_write_only 200.0",
                "1 lockstep oltp_write_only 300.0"
            ]
        );
        let md = to_markdown(&r);
        assert!(md.contains("## Rounds"), "{md}");
        assert!(
            md.contains("| 1 | lockstep | oltp_write_only | 300.0 | 8.00 | 40.00 |"),
            "{md}"
        );
        assert!(md.contains("every round's histogram merged"), "{md}");
        assert!(!md.contains("## Problems"), "{md}");
    }

    #[test]
    fn a_failed_round_is_named_and_the_others_make_the_figures() {
        let mut runs = vec![
            one_workload(
                "lockstep",
                (0, 0),
                Some(measured(100.0, 4.0, 9.0)),
                Some(equal()),
                None,
            ),
            one_workload(
                "lockstep",
                (1, 0),
                None,
                Some(equal()),
                Some("sysbench: died"),
            ),
        ];
        runs[1].error = Some("stopping the cluster: timeout".into());
        let r = bench_results(runs, 2);
        assert!(r.has_failures());
        let text = to_text(&r);
        assert!(text.contains("100.0 (1/2 rounds)"), "{text}");
        assert!(
            text.contains("!!! round 1 lockstep: stopping the cluster: timeout"),
            "{text}"
        );
        assert!(
            text.contains("!!! round 1 lockstep oltp_write_only: sysbench: died"),
            "{text}"
        );
        assert!(
            text.contains("1      lockstep  oltp_write_only  failed"),
            "{text}"
        );
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
            text.contains("!!! round 0 lockstep oltp_write_only: CHECKSUM MISMATCH"),
            "{text}"
        );
        assert!(text.contains("<-- differs"), "{text}");
        assert!(to_markdown(&r).contains("## Problems"));
    }

    #[test]
    fn a_clean_run_has_no_problem_section() {
        let r = results(equal(), None);
        assert!(!r.has_failures());
        assert!(!to_text(&r).contains("!!!"));
        assert!(!to_markdown(&r).contains("## Problems"));
        assert!(!to_text(&r).contains("every round"));
        let r = results(equal(), Some("sysbench: exited with code 1\nmore"));
        assert!(r.has_failures());
        assert!(to_text(&r)
            .contains("!!! round 0 lockstep oltp_write_only: sysbench: exited with code 1\n"));
    }
}
