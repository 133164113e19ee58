//! sysbench through the balancer beside the recording application: the
//! load a DBA benchmarks with, rate-limited so that the two cores of a
//! small machine keep room for the nodes, and restarted when it exits
//! ([`Load`]). Its per-second report (tps, errors/s) is read as it comes
//! and kept with the run's clock, so each fault's window has its own
//! seconds.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

// The samples, exits and child slot change in whole pushes and swaps.
use lockstep_core::sync::unpoisoned as lock;
use serde::Serialize;

use super::app::Target;
use super::child::output_pipes;
use super::events::Events;

/// Per-second samples (and restarts) kept: a run lasts minutes; the bound
/// only guards a sysbench that never stops, or one that exits at once.
const MAX_SAMPLES: usize = 100_000;

/// One per-second report line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sample {
    /// When the line arrived, ms since the run began.
    pub at_ms: u64,
    pub tps: f64,
    pub errors_per_s: f64,
    pub reconnects_per_s: f64,
}

/// What sysbench saw in one fault's window.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LoadResult {
    pub seconds: u64,
    /// Seconds in which no transaction committed.
    pub zero_tps_seconds: u64,
    pub median_tps: f64,
    pub min_tps: f64,
    pub errors: f64,
    /// Times sysbench exited (a lost connection ends it) and was restarted.
    pub restarts: u64,
}

/// Parses `[ 5s ] thds: 2 tps: 99.97 qps: ... err/s: 0.00 reconn/s: 0.00`.
pub fn parse_line(line: &str) -> Option<(f64, f64, f64)> {
    if !line.trim_start().starts_with('[') {
        return None;
    }
    let after = |key: &str| -> Option<f64> {
        let rest = line.split(key).nth(1)?;
        rest.split_whitespace().next()?.parse().ok()
    };
    Some((after("tps:")?, after("err/s:")?, after("reconn/s:")?))
}

/// Judges the samples that arrived in `[from_ms, to_ms)`, and the exits.
pub fn judge(samples: &[Sample], exits: &[u64], from_ms: u64, to_ms: u64) -> LoadResult {
    let window: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.at_ms >= from_ms && s.at_ms < to_ms)
        .collect();
    let mut tps: Vec<f64> = window.iter().map(|s| s.tps).collect();
    tps.sort_by(f64::total_cmp);
    LoadResult {
        seconds: window.len() as u64,
        zero_tps_seconds: window.iter().filter(|s| s.tps == 0.0).count() as u64,
        median_tps: tps.get(tps.len() / 2).copied().unwrap_or(0.0),
        min_tps: tps.first().copied().unwrap_or(0.0),
        // `+ 0.0`: an empty sum of floats is -0.
        errors: window.iter().map(|s| s.errors_per_s).sum::<f64>() + 0.0,
        restarts: exits.iter().filter(|&&t| t >= from_ms && t < to_ms).count() as u64,
    }
}

fn base(target: &Target, tables: u32, rows: u32) -> Command {
    let mut c = Command::new("sysbench");
    c.arg("oltp_write_only")
        .arg("--db-driver=mysql")
        .arg(format!("--mysql-host={}", target.host))
        .arg(format!("--mysql-port={}", target.port))
        .arg(format!("--mysql-user={}", target.user))
        .arg(format!("--mysql-password={}", target.password))
        .arg("--mysql-db=sbtest")
        .arg(format!("--tables={tables}"))
        .arg(format!("--table-size={rows}"));
    c
}

/// The running sysbench, restarted whenever it exits: sysbench 1.0.20
/// cannot survive a lost connection (with `--mysql-ignore-errors` covering
/// 2013 it crashes reconnecting; without, it exits), so it runs as an
/// application under a supervisor would, and each exit is counted.
pub struct Load {
    shared: Arc<LoadShared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct LoadShared {
    stop: AtomicBool,
    child: Mutex<Option<Child>>,
    samples: Mutex<Vec<Sample>>,
    /// When each sysbench exited, ms since the run began.
    exits: Mutex<Vec<u64>>,
}

/// Errors sysbench retries by itself: conflicts, a node not ready, a
/// commit that failed; anything else (a lost connection) ends it.
const IGNORED: &str = "1213,1205,1020,1047,1180";
/// Pause before a new sysbench after one exited.
const RESTART_PAUSE: Duration = Duration::from_millis(100);

impl Load {
    /// Creates the tables through `target` (the `sbtest` database must
    /// exist), then keeps `threads` threads capped at `rate` tps running.
    pub fn start(target: &Target, threads: u32, rate: u32, events: Events) -> Result<Load, String> {
        let prepare = base(target, 2, 10_000)
            .arg("--threads=2")
            .arg("prepare")
            .output()
            .map_err(|e| format!("sysbench: {e} (apt-get install sysbench)"))?;
        let output = format!(
            "{}{}",
            String::from_utf8_lossy(&prepare.stdout),
            String::from_utf8_lossy(&prepare.stderr)
        );
        events.log("sysbench prepare", &output);
        // sysbench 1.0.20 exits 0 when prepare cannot connect: read its words.
        if !prepare.status.success() || output.contains("FATAL") {
            return Err(format!("sysbench prepare through the balancer: {output}"));
        }
        let shared = Arc::new(LoadShared {
            stop: AtomicBool::new(false),
            child: Mutex::new(None),
            samples: Mutex::new(Vec::new()),
            exits: Mutex::new(Vec::new()),
        });
        let (s, target) = (shared.clone(), target.clone());
        let thread = std::thread::spawn(move || supervise(&s, &target, threads, rate, &events));
        Ok(Load {
            shared,
            thread: Some(thread),
        })
    }

    /// The samples so far.
    pub fn samples(&self) -> Vec<Sample> {
        lock(&self.shared.samples).clone()
    }

    /// When sysbench exited and was started again.
    pub fn exits(&self) -> Vec<u64> {
        lock(&self.shared.exits).clone()
    }
}

fn supervise(shared: &LoadShared, target: &Target, threads: u32, rate: u32, events: &Events) {
    while !shared.stop.load(Ordering::Relaxed) {
        let spawned = base(target, 2, 10_000)
            .arg(format!("--threads={threads}"))
            .arg(format!("--rate={rate}"))
            .arg("--time=0")
            .arg("--report-interval=1")
            .arg(format!("--mysql-ignore-errors={IGNORED}"))
            .arg("run")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                events.push("sysbench", &format!("cannot start: {e}"));
                return;
            }
        };
        let pipes = output_pipes(&mut child);
        {
            let mut slot = lock(&shared.child);
            // A stop between the spawn and here would miss this child.
            if shared.stop.load(Ordering::Relaxed) {
                let _ = child.kill();
            }
            *slot = Some(child);
        }
        std::thread::scope(|scope| {
            for pipe in pipes.into_iter().flatten() {
                scope.spawn(move || {
                    for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                        events.log("sysbench", &line);
                        let Some((tps, errors_per_s, reconnects_per_s)) = parse_line(&line) else {
                            continue;
                        };
                        let mut s = lock(&shared.samples);
                        if s.len() < MAX_SAMPLES {
                            s.push(Sample {
                                at_ms: events.now_ms(),
                                tps,
                                errors_per_s,
                                reconnects_per_s,
                            });
                        }
                    }
                });
            }
        });
        // Both pipes closed: sysbench is gone (or being stopped).
        if let Some(mut c) = lock(&shared.child).take() {
            let status = c.wait();
            if !shared.stop.load(Ordering::Relaxed) {
                let why = status.map(|s| s.to_string()).unwrap_or_default();
                events.push("sysbench", &format!("exited ({why}); started again"));
                let mut exits = lock(&shared.exits);
                if exits.len() < MAX_SAMPLES {
                    exits.push(events.now_ms());
                }
            }
        }
        std::thread::sleep(RESTART_PAUSE);
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(c) = lock(&self.shared.child).as_mut() {
            let _ = c.kill();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_lines_parse_and_windows_count_dead_seconds() {
        let line = "[ 5s ] thds: 2 tps: 99.97 qps: 599.83 (r/w/o: 0.00/399.89/199.94) \
                    lat (ms,95%): 5.18 err/s: 1.00 reconn/s: 2.00";
        assert_eq!(parse_line(line), Some((99.97, 1.0, 2.0)));
        assert_eq!(parse_line("Threads started!"), None);
        let samples: Vec<Sample> = [100.0, 0.0, 0.0, 50.0, 100.0]
            .iter()
            .enumerate()
            .map(|(i, &tps)| Sample {
                at_ms: 1000 * i as u64,
                tps,
                errors_per_s: if tps == 0.0 { 3.0 } else { 0.0 },
                reconnects_per_s: if tps == 0.0 { 1.0 } else { 0.0 },
            })
            .collect();
        let r = judge(&samples, &[500, 1500, 2500], 1000, 5000);
        assert_eq!(r.seconds, 4);
        assert_eq!(r.zero_tps_seconds, 2);
        assert_eq!(r.min_tps, 0.0);
        assert_eq!(r.median_tps, 50.0);
        assert_eq!(r.errors, 6.0);
        assert_eq!(r.restarts, 2);
    }
}
