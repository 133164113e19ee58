//! `make jepsen`: every nemesis against Lockstep and Galera the same way,
//! then `docs/jepsen.md`.
//!
//! ```text
//! lockstep-jepsen [--providers lockstep,galera] [--nemeses all|a,b]
//!                 [--flush 0,1,2] [--cache-sync 0,1] [--repeat N] [--before S] [--after S]
//!                 [--out DIR] [--doc FILE] [--seed N]
//! ```
//! Crash nemeses run once per flush setting; the others with flush 1 only
//! (without a crash the setting does not matter); the power-loss ones
//! on Lockstep once per `lockstep.cache_sync` setting too. `none` also runs with
//! `innodb_snapshot_isolation=OFF`, the server's default, to show lost
//! updates.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use lockstep_jepsen::nemesis::Nemesis;
use lockstep_jepsen::report;
use lockstep_jepsen::run::{run, RunResult, RunSpec};
use lockstep_testkit::Provider;

struct Args {
    providers: Vec<String>,
    nemeses: Vec<Nemesis>,
    flush: Vec<u8>,
    /// `lockstep.cache_sync` settings for the power-loss nemeses.
    cache_sync: Vec<bool>,
    repeat: usize,
    before: u64,
    after: u64,
    out: PathBuf,
    doc: Option<PathBuf>,
    seed: u64,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        providers: vec!["lockstep".into(), "galera".into()],
        nemeses: Nemesis::ALL.to_vec(),
        flush: vec![0, 1, 2],
        cache_sync: vec![false, true],
        repeat: 1,
        before: 5,
        after: 4,
        out: PathBuf::from("jepsen-out"),
        doc: None,
        seed: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        let num = |v: String| v.parse::<u64>().map_err(|e| format!("{v}: {e}"));
        match flag.as_str() {
            "--providers" => a.providers = value()?.split(',').map(str::to_string).collect(),
            "--nemeses" => {
                let v = value()?;
                if v != "all" {
                    a.nemeses = v
                        .split(',')
                        .map(|n| Nemesis::from_name(n).ok_or(format!("unknown nemesis {n}")))
                        .collect::<Result<_, _>>()?;
                }
            }
            "--flush" => {
                a.flush = value()?
                    .split(',')
                    .map(|f| f.parse::<u8>().map_err(|e| format!("{f}: {e}")))
                    .collect::<Result<_, _>>()?;
            }
            "--cache-sync" => {
                a.cache_sync = value()?
                    .split(',')
                    .map(|f| match f {
                        "0" | "no" => Ok(false),
                        "1" | "yes" => Ok(true),
                        other => Err(format!("--cache-sync takes 0,1: {other}")),
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--repeat" => a.repeat = num(value()?)? as usize,
            "--before" => a.before = num(value()?)?,
            "--after" => a.after = num(value()?)?,
            "--seed" => a.seed = num(value()?)?,
            "--out" => a.out = PathBuf::from(value()?),
            "--doc" => a.doc = Some(PathBuf::from(value()?)),
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(a)
}

fn specs(a: &Args) -> Vec<RunSpec> {
    let mut specs = Vec::new();
    for round in 0..a.repeat {
        for p in &a.providers {
            for &n in &a.nemeses {
                let flushes: Vec<u8> = if n.crashes() {
                    a.flush.clone()
                } else {
                    vec![if a.flush.contains(&1) { 1 } else { a.flush[0] }]
                };
                // The synced cache is Lockstep's; it matters only when
                // power is cut.
                let syncs = if n.cuts_power() && p == "lockstep" {
                    a.cache_sync.clone()
                } else {
                    vec![false]
                };
                for f in flushes {
                    for &cache_sync in &syncs {
                        let mut s = RunSpec::new(Provider::from_name(p), n, f);
                        s.cache_sync = cache_sync;
                        s.before = Duration::from_secs(a.before);
                        s.after = Duration::from_secs(a.after);
                        s.seed = a.seed + round as u64;
                        specs.push(s.clone());
                        if n == Nemesis::None {
                            s.snapshot_isolation = false;
                            specs.push(s);
                        }
                    }
                }
            }
        }
    }
    specs
}

/// The first line a command printed; `None` if it could not run or
/// printed nothing.
fn first_line_of(cmd: &str, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new(cmd).args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    text.lines().next().map(str::to_string)
}

/// What ran: our commit, Galera's package, the server.
fn versions() -> String {
    let shown = |cmd: &str, args: &[&str]| first_line_of(cmd, args).unwrap_or_else(|| "?".into());
    // `git status --porcelain` prints a line per changed file.
    let dirty = first_line_of("git", &["status", "--porcelain", "--untracked-files=no"]).is_some();
    format!(
        "Lockstep at `{}`{}, Galera `{}`, `{}`",
        shown("git", &["rev-parse", "--short", "HEAD"]),
        if dirty { " (with local changes)" } else { "" },
        shown("dpkg-query", &["-W", "-f", "${Version}", "galera-4"]),
        shown("mariadbd", &["--version"])
    )
}

fn main() {
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}\nusage: lockstep-jepsen [--providers lockstep,galera] [--nemeses all|a,b] [--flush 0,1,2] [--cache-sync 0,1] [--repeat N] [--before S] [--after S] [--out DIR] [--doc FILE] [--seed N]");
            eprintln!("nemeses: {}", Nemesis::ALL.map(|n| n.name()).join(", "));
            std::process::exit(2);
        }
    };
    let t0 = Instant::now();
    // Taken now: the tree may change while the runs go on.
    let versions = versions();
    let specs = specs(&a);
    let mut results: Vec<RunResult> = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        eprintln!("[{}/{}] {} ...", i + 1, specs.len(), spec.name());
        let r = run(spec, &a.out);
        eprintln!(
            "[{}/{}] {}: {} ops ({} ok, {} unknown), anomalies: {} (allowed: {}), whole again: {}{} ({:.0} s)",
            i + 1,
            specs.len(),
            spec.name(),
            r.ops(),
            r.ok,
            r.unknown,
            r.report.summary_under(spec.isolation(), false),
            r.report.summary_under(spec.isolation(), true),
            if r.recovered { "yes" } else { "NO" },
            if r.problems.is_empty() { String::new() } else { format!("; {}", r.problems.join("; ")) },
            r.seconds
        );
        results.push(r);
    }
    let header = format!(
        "# Jepsen-style runs\n\nGenerated by `make jepsen` ({}; {} runs in {:.0} min; {}). \
         Each run: a fresh 3-node cluster on loopback, 2 list-append clients and 1 register \
         client per node, every session with `wsrep_sync_wait=1`, the nemesis after {} s, \
         {} s of workload once the cluster is whole again, then a causal final read on every \
         node. How to read it: README's Guarantees and `docs/adr/0024-history-checker-and-fault-suite.md`. \
         *anomalies* are the kinds the run's isolation forbids; the kinds it allows are counted \
         apart (and in the table by kind). The histories of the runs that did not pass, and of \
         the repeatable-read runs, are kept gzipped in `docs/jepsen/` (`lockstep-history` reads \
         them after `zcat`).",
        std::env::args().skip(1).collect::<Vec<_>>().join(" "),
        results.len(),
        t0.elapsed().as_secs_f64() / 60.0,
        versions,
        a.before,
        a.after
    );
    let doc_dir = a.doc.as_ref().and_then(|d| d.parent()).map(PathBuf::from);
    let histories = "jepsen";
    if let Some(d) = &doc_dir {
        if let Err(e) = report::keep_histories(&results, &d.join(histories)) {
            eprintln!("keeping histories: {e}");
        }
    }
    let text = report::markdown(&results, &header, histories);
    match &a.doc {
        Some(doc) => {
            std::fs::write(doc, &text).unwrap_or_else(|e| eprintln!("{}: {e}", doc.display()))
        }
        None => println!("{text}"),
    }
    let _ = std::fs::write(a.out.join("report.md"), &text);
    let failed = results.iter().filter(|r| !r.passed()).count();
    eprintln!(
        "{failed} of {} runs did not pass; report in {}",
        results.len(),
        a.out.join("report.md").display()
    );
}
