//! `lockstep bench --nodes 3,5,7`: the whole benchmark once per cluster
//! size, then how each provider's throughput and latency change with the
//! number of nodes (`scaling.md`, `scaling.json`, `scaling-*.png` in the
//! report folder; each size's own report in `nodes-N/`).
//!
//! Galera sends every writeset to every member and waits for all of them in
//! its total order; Lockstep's Raft leader waits for a majority. The
//! question this answers is whether Lockstep's lead (or lag) holds as the
//! group grows: the TPS ratio at 5 and 7 nodes against the ratio at 3.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use super::plot::{self, Series};
use super::report;
use super::results::BenchResults;
use crate::table;

/// One workload on one provider at one cluster size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Point {
    pub workload: String,
    pub provider: String,
    pub nodes: usize,
    /// Median over the rounds; `None` when no round measured it.
    pub tps: Option<f64>,
    pub p95_ms: Option<f64>,
    pub max_ms: Option<f64>,
}

/// The Lockstep/Galera ratios of one workload at one size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeRatio {
    pub workload: String,
    pub nodes: usize,
    pub tps: Option<f64>,
    pub p95: Option<f64>,
}

/// Everything `scaling.json` holds.
#[derive(Debug, Clone, Serialize)]
pub struct Scaling {
    pub sizes: Vec<usize>,
    /// `candidate/reference`, e.g. `lockstep/galera`, when two providers ran.
    pub ratio_of: Option<String>,
    pub points: Vec<Point>,
    pub ratios: Vec<SizeRatio>,
}

impl Scaling {
    /// From the results of each size, in the order the sizes ran.
    pub fn of(runs: &[(usize, &BenchResults)]) -> Scaling {
        let mut points = Vec::new();
        let mut ratios = Vec::new();
        let mut ratio_of = None;
        for (nodes, r) in runs {
            for p in &r.providers {
                for w in &p.workloads {
                    let s = w.summary.as_ref();
                    points.push(Point {
                        workload: w.workload.clone(),
                        provider: p.provider.clone(),
                        nodes: *nodes,
                        tps: s.map(|s| s.tps),
                        p95_ms: s.and_then(|s| s.p95_ms),
                        max_ms: s.and_then(|s| s.max_ms),
                    });
                }
            }
            if let Some(c) = &r.comparison {
                ratio_of = Some(format!("{}/{}", c.candidate, c.reference));
                ratios.extend(c.workloads.iter().map(|x| SizeRatio {
                    workload: x.workload.clone(),
                    nodes: *nodes,
                    tps: x.tps,
                    p95: x.p95,
                }));
            }
        }
        Scaling {
            sizes: runs.iter().map(|(n, _)| *n).collect(),
            ratio_of,
            points,
            ratios,
        }
    }

    /// Workloads in first-seen order.
    fn workloads(&self) -> Vec<&str> {
        first_seen(self.points.iter().map(|p| p.workload.as_str()))
    }

    /// Providers in first-seen order.
    fn providers(&self) -> Vec<&str> {
        first_seen(self.points.iter().map(|p| p.provider.as_str()))
    }

    fn point(&self, workload: &str, provider: &str, nodes: usize) -> Option<&Point> {
        self.points
            .iter()
            .find(|p| p.workload == workload && p.provider == provider && p.nodes == nodes)
    }

    fn ratio(&self, workload: &str, nodes: usize) -> Option<&SizeRatio> {
        self.ratios
            .iter()
            .find(|r| r.workload == workload && r.nodes == nodes)
    }

    /// One row per workload and size: each provider's TPS and p95, then
    /// the ratios.
    fn rows(&self) -> (Vec<String>, Vec<Vec<String>>) {
        let providers = self.providers();
        let mut header = vec!["WORKLOAD".to_string(), "NODES".to_string()];
        for p in &providers {
            header.push(format!("{p} TPS"));
            header.push(format!("{p} P95_MS"));
        }
        if let Some(of) = &self.ratio_of {
            header.push(format!("TPS {of}"));
            header.push(format!("P95 {of}"));
        }
        let mut rows = Vec::new();
        for w in self.workloads() {
            for &n in &self.sizes {
                let mut row = vec![w.to_string(), n.to_string()];
                for p in &providers {
                    let point = self.point(w, p, n);
                    row.push(fixed(point.and_then(|x| x.tps), 1));
                    row.push(fixed(point.and_then(|x| x.p95_ms), 2));
                }
                if self.ratio_of.is_some() {
                    let r = self.ratio(w, n);
                    row.push(fixed(r.and_then(|x| x.tps), 2));
                    row.push(fixed(r.and_then(|x| x.p95), 2));
                }
                rows.push(row);
            }
        }
        (header, rows)
    }

    pub fn to_text(&self) -> String {
        let (header, rows) = self.rows();
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        let mut out = format!(
            "lockstep bench: scaling over {} nodes (medians over the rounds; each size's \
             report in nodes-N/)\n",
            sizes_label(&self.sizes)
        );
        out.push_str(&table::render(&header, &rows));
        out
    }

    pub fn to_markdown(&self) -> String {
        let (header, rows) = self.rows();
        let mut out = format!(
            "# Scaling with the number of nodes\n\nThe same benchmark on clusters of {} \
             nodes; each size's full report is in `nodes-N/report.md`. Figures are medians \
             over the rounds; ratios are {} (TPS: higher is better; latency: lower is \
             better).\n\n",
            sizes_label(&self.sizes),
            self.ratio_of
                .as_deref()
                .unwrap_or("not computed (one provider)")
        );
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        out.push_str(&report::md_table(&header, &rows));
        out.push('\n');
        for w in self.workloads() {
            let (tps, p95) = png_names(w);
            let _ = writeln!(
                out,
                "![{w}: TPS by nodes]({tps})\n![{w}: p95 by nodes]({p95})\n"
            );
        }
        out
    }

    /// `scaling-<workload>-tps.png` and `-p95.png`: one line per provider
    /// over the sizes. Returns the drawing problems.
    pub fn draw(&self, dir: &Path) -> Vec<String> {
        let mut problems = Vec::new();
        for w in self.workloads() {
            let (tps_png, p95_png) = png_names(w);
            let series = |f: fn(&Point) -> Option<f64>| -> Vec<Series> {
                self.providers()
                    .iter()
                    .map(|p| Series {
                        label: p.to_string(),
                        points: self
                            .sizes
                            .iter()
                            .filter_map(|&n| Some((n as f64, f(self.point(w, p, n)?)?)))
                            .collect(),
                    })
                    .filter(|s| !s.points.is_empty())
                    .collect()
            };
            let charts = [
                (tps_png, "transactions per second", series(|p| p.tps)),
                (p95_png, "p95 latency (ms)", series(|p| p.p95_ms)),
            ];
            for (name, what, s) in charts {
                if s.is_empty() {
                    continue;
                }
                let path = dir.join(&name);
                let title = format!("{w}: {what} by number of nodes");
                if let Err(e) = plot::by_nodes(&path, &title, what, &s) {
                    problems.push(format!("cannot draw {}: {e}", path.display()));
                }
            }
        }
        problems
    }
}

/// `names` without repeats, in the order they first come.
fn first_seen<'a>(names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for n in names {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

fn png_names(workload: &str) -> (String, String) {
    (
        format!("scaling-{workload}-tps.png"),
        format!("scaling-{workload}-p95.png"),
    )
}

/// `3, 5 and 7`.
fn sizes_label(sizes: &[usize]) -> String {
    let s: Vec<String> = sizes.iter().map(usize::to_string).collect();
    match s.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => s.join(""),
    }
}

fn fixed(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".to_string(), |v| format!("{v:.digits$}"))
}

/// Parses `--nodes`: comma-separated cluster sizes, each at least 1, no
/// repeats, in the order given.
pub fn parse_sizes(list: &str) -> Result<Vec<usize>, String> {
    let mut sizes = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let n: usize = item
            .parse()
            .map_err(|_| format!("--nodes: '{item}' is not a number of nodes"))?;
        if !(1..=MAX_NODES).contains(&n) {
            return Err(format!("--nodes: {n} is not between 1 and {MAX_NODES}"));
        }
        if !sizes.contains(&n) {
            sizes.push(n);
        }
    }
    if sizes.is_empty() {
        return Err("--nodes names no cluster size".into());
    }
    Ok(sizes)
}

/// The largest cluster the bench starts: nine `mariadbd` on one machine
/// is already far more than two cores serve.
pub const MAX_NODES: usize = 9;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_order_without_repeats() {
        assert_eq!(parse_sizes("3, 5,7,5").unwrap(), [3, 5, 7]);
        assert!(parse_sizes("0").is_err());
        assert!(parse_sizes("10").is_err());
        assert!(parse_sizes("three").is_err());
        assert!(parse_sizes(",").is_err());
        assert_eq!(sizes_label(&[3, 5, 7]), "3, 5 and 7");
        assert_eq!(sizes_label(&[3]), "3");
    }

    #[test]
    fn a_table_row_per_workload_and_size_with_the_ratios() {
        let s = Scaling {
            sizes: vec![3, 5],
            ratio_of: Some("lockstep/galera".into()),
            points: vec![
                point("oltp_write_only", "lockstep", 3, 1000.0, 9.0),
                point("oltp_write_only", "galera", 3, 800.0, 10.0),
                point("oltp_write_only", "lockstep", 5, 900.0, 11.0),
            ],
            ratios: vec![SizeRatio {
                workload: "oltp_write_only".into(),
                nodes: 3,
                tps: Some(1.25),
                p95: Some(0.9),
            }],
        };
        let text = s.to_text();
        let lines: Vec<&str> = text.lines().collect();
        let cells = |l: &str| l.split_whitespace().map(String::from).collect::<Vec<_>>();
        assert_eq!(
            cells(lines[1])[..4],
            ["WORKLOAD", "NODES", "lockstep", "TPS"],
            "{text}"
        );
        assert_eq!(
            cells(lines[2]),
            [
                "oltp_write_only",
                "3",
                "1000.0",
                "9.00",
                "800.0",
                "10.00",
                "1.25",
                "0.90"
            ]
        );
        // Galera did not measure 5 nodes: dashes, not zeros.
        assert_eq!(
            cells(lines[3]),
            ["oltp_write_only", "5", "900.0", "11.00", "-", "-", "-", "-"]
        );
        assert!(s.to_markdown().contains("scaling-oltp_write_only-tps.png"));
    }

    fn point(w: &str, p: &str, nodes: usize, tps: f64, p95: f64) -> Point {
        Point {
            workload: w.into(),
            provider: p.into(),
            nodes,
            tps: Some(tps),
            p95_ms: Some(p95),
            max_ms: None,
        }
    }
}
