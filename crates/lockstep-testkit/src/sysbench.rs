//! Running sysbench (the Debian package's 1.0 with its OLTP Lua scripts)
//! against cluster nodes: prepare tables, run a timed workload in the
//! foreground or background, and parse its summary.
//!
//! ```no_run
//! use lockstep_testkit::{Cluster, Sysbench};
//! let c = Cluster::builder(3).start()?;
//! let bench = Sysbench::oltp_read_write().tables(4).table_size(1000).threads(6);
//! bench.prepare(c.node(0))?;
//! let report = bench.run(&c.nodes().iter().collect::<Vec<_>>())?;
//! println!("{:.1} tps", report.tps);
//! # Ok::<(), lockstep_testkit::Error>(())
//! ```
//!
//! sysbench connects over TCP to 127.0.0.1 as the testkit's account
//! ([`crate::TCP_USER`]). Given several nodes, it gets their ports as one
//! comma-separated `--mysql-port` list and opens its connections round-robin
//! over them, so `threads` should be a multiple of the number of nodes.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::cluster::{TCP_PASSWORD, TCP_USER};
use crate::error::{Error, Result};
use crate::node::Node;

/// A sysbench workload: script, data set and load. Chain the setters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sysbench {
    script: String,
    database: String,
    tables: u32,
    table_size: u32,
    threads: u32,
    time: Duration,
    ignore_errors: String,
    report_interval: Option<u32>,
    overrun: Duration,
    extra: Vec<String>,
}

impl Sysbench {
    /// `oltp_read_write` on 4 tables of 1000 rows in database `sbtest`,
    /// 4 threads for 60 s, ignoring (retrying) the errors multi-master
    /// conflicts produce: 1213 deadlock (certification failure or brute-force
    /// abort), 1205 lock wait timeout, 1020 record changed since last read.
    pub fn oltp_read_write() -> Sysbench {
        Sysbench::script("oltp_read_write")
    }

    /// Any script sysbench finds by name (`oltp_write_only`, ...) or path,
    /// with the same defaults as [`Sysbench::oltp_read_write`].
    pub fn script(name: &str) -> Sysbench {
        Sysbench {
            script: name.into(),
            database: "sbtest".into(),
            tables: 4,
            table_size: 1000,
            threads: 4,
            time: Duration::from_secs(60),
            ignore_errors: "1213,1205,1020".into(),
            report_interval: None,
            overrun: Duration::from_secs(120),
            extra: Vec::new(),
        }
    }
    pub fn database(mut self, name: &str) -> Self {
        self.database = name.into();
        self
    }
    pub fn tables(mut self, n: u32) -> Self {
        self.tables = n;
        self
    }
    pub fn table_size(mut self, rows: u32) -> Self {
        self.table_size = rows;
        self
    }
    pub fn threads(mut self, n: u32) -> Self {
        self.threads = n;
        self
    }
    /// How long `run` drives the load (whole seconds).
    pub fn time(mut self, t: Duration) -> Self {
        self.time = t;
        self
    }
    /// `--mysql-ignore-errors`: a comma-separated list of error numbers,
    /// or `all`; an empty string makes every error fatal.
    pub fn ignore_errors(mut self, list: &str) -> Self {
        self.ignore_errors = list.into();
        self
    }
    /// `--report-interval`: a progress line every `secs` seconds.
    pub fn report_interval(mut self, secs: u32) -> Self {
        self.report_interval = Some(secs);
        self
    }
    /// How long a run may last beyond `time` before it is killed (default
    /// 120 s): sysbench waits for queries in flight, which a blocked node
    /// never finishes.
    pub fn overrun(mut self, t: Duration) -> Self {
        self.overrun = t;
        self
    }
    /// `--histogram=on`: sysbench prints its latency histogram at the end,
    /// which [`SysbenchReport::histogram`] holds (for any percentile).
    pub fn histogram(self) -> Self {
        self.arg("--histogram=on")
    }
    /// Any other sysbench option, e.g. `--rand-type=uniform`.
    pub fn arg(mut self, arg: &str) -> Self {
        self.extra.push(arg.into());
        self
    }

    /// The workload's tables as qualified names (`sbtest.sbtest1`, ...),
    /// e.g. for [`crate::Cluster::checksums`].
    pub fn table_names(&self) -> Vec<String> {
        (1..=self.tables)
            .map(|i| format!("{}.sbtest{i}", self.database))
            .collect()
    }

    /// Creates the database if needed and the tables with their rows, on
    /// `node` (replication takes them to the others).
    pub fn prepare(&self, node: &Node) -> Result<()> {
        node.sql(&format!(
            "CREATE DATABASE IF NOT EXISTS `{}`",
            self.database
        ))?;
        let mut cmd = self.command(&[node.port()], "prepare");
        // Parallel prepare: one table per thread at most.
        cmd.arg(format!("--threads={}", self.tables.clamp(1, 4)));
        let shown = shown(&cmd);
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .map_err(|e| spawn_error(&shown, e))?;
        let output = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if !out.status.success() {
            return Err(command_error(
                "sysbench prepare",
                shown,
                out.status.code(),
                output,
            ));
        }
        Ok(())
    }

    /// Runs the workload against `nodes` for `time` and waits for it.
    pub fn run(&self, nodes: &[&Node]) -> Result<SysbenchReport> {
        self.spawn(nodes)?.wait()
    }

    /// Starts the workload against `nodes` in the background.
    pub fn spawn(&self, nodes: &[&Node]) -> Result<SysbenchRun> {
        if nodes.is_empty() {
            return Err(Error::config(
                "sysbench needs at least one node to run against",
            ));
        }
        let ports: Vec<u16> = nodes.iter().map(|n| n.port()).collect();
        let mut cmd = self.command(&ports, "run");
        cmd.arg(format!("--threads={}", self.threads))
            .arg(format!("--time={}", self.time.as_secs().max(1)))
            .arg(format!("--mysql-ignore-errors={}", self.ignore_errors));
        if let Some(secs) = self.report_interval {
            cmd.arg(format!("--report-interval={secs}"));
        }
        cmd.args(&self.extra);
        let shown = shown(&cmd);
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| spawn_error(&shown, e))?;
        // Drained while it runs, so a full pipe never stalls sysbench.
        let stdout = Some(drain(child.stdout.take()));
        let stderr = Some(drain(child.stderr.take()));
        Ok(SysbenchRun {
            child,
            stdout,
            stderr,
            command: shown,
            deadline: Instant::now() + self.time + self.overrun,
        })
    }

    fn command(&self, ports: &[u16], action: &str) -> Command {
        let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
        let mut cmd = Command::new("sysbench");
        cmd.arg(&self.script)
            .arg("--db-driver=mysql")
            .arg("--mysql-host=127.0.0.1")
            .arg(format!("--mysql-port={}", ports.join(",")))
            .arg(format!("--mysql-user={TCP_USER}"))
            .arg(format!("--mysql-password={TCP_PASSWORD}"))
            .arg(format!("--mysql-db={}", self.database))
            .arg(format!("--tables={}", self.tables))
            .arg(format!("--table-size={}", self.table_size))
            .arg(action);
        cmd
    }
}

fn shown(cmd: &Command) -> String {
    format!("{cmd:?}").replace('"', "")
}

fn spawn_error(shown: &str, e: std::io::Error) -> Error {
    Error::io(
        format!("cannot run `{shown}`; install sysbench (scripts/setup.sh)"),
        e,
    )
}

fn command_error(what: &str, command: String, status: Option<i32>, output: String) -> Error {
    Error::Command {
        what: what.into(),
        command,
        status,
        output,
    }
}

fn drain(pipe: Option<impl Read + Send + 'static>) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut p) = pipe {
            let mut buf = Vec::new();
            let _ = p.read_to_end(&mut buf);
            text = String::from_utf8_lossy(&buf).into_owned();
        }
        text
    })
}

/// A sysbench run in the background. Dropping it kills sysbench.
#[derive(Debug)]
pub struct SysbenchRun {
    child: Child,
    stdout: Option<JoinHandle<String>>,
    stderr: Option<JoinHandle<String>>,
    command: String,
    deadline: Instant,
}

impl SysbenchRun {
    /// Whether sysbench is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits for the end of the run and parses its summary. Fails if
    /// sysbench fails (an error not in the ignore list, a lost server) or
    /// overruns its time by more than the allowed overrun.
    pub fn wait(mut self) -> Result<SysbenchReport> {
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() >= self.deadline => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break None;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(100)),
                Err(e) => return Err(Error::io(format!("waiting for `{}`", self.command), e)),
            }
        };
        let command = std::mem::take(&mut self.command);
        let stdout = join(self.stdout.take());
        let stderr = join(self.stderr.take());
        let output = format!("{stdout}{stderr}");
        match status {
            None => Err(command_error(
                "sysbench overran its --time and was killed (a query hung?)",
                command,
                None,
                output,
            )),
            Some(s) if !s.success() => {
                Err(command_error("sysbench run", command, s.code(), output))
            }
            Some(_) => SysbenchReport::parse(&stdout).ok_or_else(|| {
                command_error("parsing the sysbench summary", command, Some(0), output)
            }),
        }
    }
}

fn join(h: Option<JoinHandle<String>>) -> String {
    h.and_then(|h| h.join().ok()).unwrap_or_default()
}

impl Drop for SysbenchRun {
    fn drop(&mut self) {
        if self.is_running() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The summary sysbench prints at the end of a run, and what it printed
/// along the way when asked ([`Sysbench::report_interval`],
/// [`Sysbench::histogram`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SysbenchReport {
    /// Committed transactions.
    pub transactions: u64,
    /// Transactions per second.
    pub tps: f64,
    pub queries: u64,
    pub qps: f64,
    /// Errors from the ignore list, each followed by a retry of the event.
    pub ignored_errors: u64,
    pub reconnects: u64,
    /// `total time`, in seconds.
    pub seconds: f64,
    /// The `Latency (ms)` section; `None` if sysbench printed none.
    pub latency: Option<LatencySummary>,
    /// The progress lines of `--report-interval`, in order.
    pub intervals: Vec<IntervalSample>,
    /// The latency histogram of `--histogram=on`; empty without it.
    pub histogram: LatencyHistogram,
    /// sysbench's whole standard output.
    pub output: String,
}

/// `Latency (ms):` of the summary, over every event of the run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LatencySummary {
    pub min_ms: f64,
    pub avg_ms: f64,
    pub max_ms: f64,
    /// `--percentile` (95 by default) and its value; `None` with `--percentile=0`.
    pub percentile: Option<(f64, f64)>,
    /// Latency summed over all events.
    pub sum_ms: f64,
}

/// One progress line: `[ 5s ] thds: 8 tps: 512.93 qps: 10262.50
/// (r/w/o: 0.00/6841.07/3421.44) lat (ms,95%): 20.00 err/s: 0.00 reconn/s: 0.00`,
/// rates over the interval that ends at `second`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct IntervalSample {
    /// Seconds since the start of the run at the end of the interval.
    pub second: f64,
    pub threads: u32,
    pub tps: f64,
    pub qps: f64,
    /// The interval's latency at the `--percentile` rank (95 by default), ms.
    pub latency_ms: f64,
    pub errors_per_sec: f64,
    pub reconnects_per_sec: f64,
}

/// sysbench's latency histogram: its non-empty buckets as (bucket value in
/// ms, events), in ascending order. sysbench reports percentiles as the
/// value of a bucket, so [`LatencyHistogram::percentile`] gives the same
/// figure as its summary does.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct LatencyHistogram {
    pub buckets: Vec<(f64, u64)>,
}

impl LatencyHistogram {
    /// Events counted.
    pub fn total(&self) -> u64 {
        self.buckets.iter().map(|(_, n)| n).sum()
    }

    /// The latency (ms) at percentile `p` (0 < p <= 100) as sysbench
    /// computes it: the first bucket whose cumulative count reaches
    /// round(total × p / 100). `None` for an empty histogram.
    pub fn percentile(&self, p: f64) -> Option<f64> {
        let target = ((self.total() as f64 * p / 100.0).round() as u64).max(1);
        let mut seen = 0;
        self.buckets.iter().find_map(|&(value, n)| {
            seen += n;
            (seen >= target).then_some(value)
        })
    }

    /// `       2.145 |****     2`: the bucket lines after the header.
    fn parse(output: &str) -> LatencyHistogram {
        let buckets = output
            .lines()
            .skip_while(|l| !l.starts_with("Latency histogram"))
            .skip(2) // the title and the `value ---- distribution ---- count` header
            .map_while(|l| {
                let (value, rest) = l.split_once('|')?;
                let count = rest.trim_start_matches('*').trim();
                Some((value.trim().parse().ok()?, count.parse().ok()?))
            })
            .collect();
        LatencyHistogram { buckets }
    }
}

impl SysbenchReport {
    /// Parses sysbench 1.0's output; `None` if a figure of the SQL or
    /// general statistics is missing. The latency section, progress lines
    /// and histogram are taken where present.
    pub fn parse(output: &str) -> Option<SysbenchReport> {
        let (transactions, tps) = counter(output, "transactions:")?;
        let (queries, qps) = counter(output, "queries:")?;
        let (ignored_errors, _) = counter(output, "ignored errors:")?;
        let (reconnects, _) = counter(output, "reconnects:")?;
        let seconds = field(output, "total time:")?
            .trim_end_matches('s')
            .parse()
            .ok()?;
        Some(SysbenchReport {
            transactions,
            tps,
            queries,
            qps,
            ignored_errors,
            reconnects,
            seconds,
            latency: LatencySummary::parse(output),
            intervals: output.lines().filter_map(IntervalSample::parse).collect(),
            histogram: LatencyHistogram::parse(output),
            output: output.to_string(),
        })
    }
}

impl LatencySummary {
    fn parse(output: &str) -> Option<LatencySummary> {
        let section = &output[output.find("\nLatency (ms):")?..];
        let number = |label: &str| field(section, label)?.parse().ok();
        let percentile = section.lines().find_map(|l| {
            let (rank, value) = l.trim().split_once("th percentile:")?;
            Some((rank.parse().ok()?, value.trim().parse().ok()?))
        });
        Some(LatencySummary {
            min_ms: number("min:")?,
            avg_ms: number("avg:")?,
            max_ms: number("max:")?,
            percentile,
            sum_ms: number("sum:")?,
        })
    }
}

impl IntervalSample {
    /// A progress line; `None` for any other line (also the
    /// `[ 1s ] queue length: 0, concurrency: 0` lines of `--rate`).
    fn parse(line: &str) -> Option<IntervalSample> {
        let rest = line.trim().strip_prefix('[')?;
        let (time, rest) = rest.split_once(']')?;
        let words: Vec<&str> = rest.split_whitespace().collect();
        // The number after the first word that starts with `key`.
        let after = |key: &str| -> Option<f64> {
            let i = words.iter().position(|w| w.starts_with(key))?;
            words.get(i + 1)?.parse().ok()
        };
        Some(IntervalSample {
            second: time.trim().trim_end_matches('s').parse().ok()?,
            threads: after("thds:")? as u32,
            tps: after("tps:")?,
            qps: after("qps:")?,
            latency_ms: after("(ms,")?,
            errors_per_sec: after("err/s:")?,
            reconnects_per_sec: after("reconn/s:")?,
        })
    }
}

/// The text after `label` on the first line that starts with it.
fn field<'a>(output: &'a str, label: &str) -> Option<&'a str> {
    output
        .lines()
        .find_map(|l| l.trim_start().strip_prefix(label))
        .map(str::trim)
}

/// `    transactions:   1234   (20.55 per sec.)` -> (1234, 20.55).
fn counter(output: &str, label: &str) -> Option<(u64, f64)> {
    let rest = field(output, label)?;
    let mut words = rest.split_whitespace();
    let count = words.next()?.parse().ok()?;
    let rate = words.next()?.trim_start_matches('(').parse().ok()?;
    Some((count, rate))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUMMARY: &str = "\
SQL statistics:
    queries performed:
        read:                            30016
        write:                           8576
        other:                           4288
        total:                           42880
    transactions:                        2144   (35.69 per sec.)
    queries:                             42880  (713.77 per sec.)
    ignored errors:                      17     (0.28 per sec.)
    reconnects:                          0      (0.00 per sec.)

General statistics:
    total time:                          60.0725s
    total number of events:              2144
";

    /// Real output of sysbench 1.0.20 (Debian 12): `oltp_update_non_index
    /// --threads=1 --time=3 --rate=8 --report-interval=1 --histogram=on`
    /// against a 3-node Galera cluster.
    const RATE_LIMITED_WITH_HISTOGRAM: &str = "\
sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)

Running the test with following options:
Number of threads: 1
Target transaction rate: 8/sec
Report intermediate results every 1 second(s)
Initializing random number generator from current time


Initializing worker threads...

Threads started!

[ 1s ] thds: 1 tps: 7.99 qps: 7.99 (r/w/o: 0.00/6.99/1.00) lat (ms,95%): 5.09 err/s: 0.00 reconn/s: 0.00
[ 1s ] queue length: 0, concurrency: 0
[ 2s ] thds: 1 tps: 8.00 qps: 8.00 (r/w/o: 0.00/8.00/0.00) lat (ms,95%): 4.91 err/s: 0.00 reconn/s: 0.00
[ 2s ] queue length: 0, concurrency: 0
[ 3s ] thds: 1 tps: 8.00 qps: 8.00 (r/w/o: 0.00/7.00/1.00) lat (ms,95%): 5.09 err/s: 0.00 reconn/s: 0.00
[ 3s ] queue length: 0, concurrency: 0
Latency histogram (values are in milliseconds)
       value  ------------- distribution ------------- count
       0.388 |********************                     1
       0.440 |********************                     1
       1.667 |********************                     1
       1.759 |********************                     1
       1.791 |********************                     1
       1.857 |**************************************** 2
       1.996 |********************                     1
       2.106 |********************                     1
       2.145 |**************************************** 2
       2.184 |**************************************** 2
       2.223 |**************************************** 2
       2.264 |********************                     1
       2.433 |********************                     1
       2.760 |********************                     1
       2.810 |********************                     1
       2.966 |********************                     1
       3.816 |********************                     1
       4.910 |********************                     1
       5.090 |**************************************** 2
 
SQL statistics:
    queries performed:
        read:                            0
        write:                           22
        other:                           2
        total:                           24
    transactions:                        24     (7.89 per sec.)
    queries:                             24     (7.89 per sec.)
    ignored errors:                      0      (0.00 per sec.)
    reconnects:                          0      (0.00 per sec.)

General statistics:
    total time:                          3.0397s
    total number of events:              24

Latency (ms):
         min:                                    0.39
         avg:                                    2.47
         max:                                    5.13
         95th percentile:                        5.09
         sum:                                   59.18

Threads fairness:
    events (avg/stddev):           24.0000/0.00
    execution time (avg/stddev):   0.0592/0.00

";

    /// Real output: `oltp_read_write --threads=12 --time=3 --report-interval=1`
    /// over three nodes (the histogram section removed, as without --histogram).
    const THREE_NODES: &str = "\
sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)

Running the test with following options:
Number of threads: 12
Report intermediate results every 1 second(s)
Initializing random number generator from current time


Initializing worker threads...

Threads started!

[ 1s ] thds: 12 tps: 212.59 qps: 7716.92 (r/w/o: 5617.81/1427.55/671.55) lat (ms,95%): 114.72 err/s: 176.83 reconn/s: 0.00
[ 2s ] thds: 12 tps: 261.08 qps: 8934.66 (r/w/o: 6470.93/1679.50/784.23) lat (ms,95%): 127.81 err/s: 201.06 reconn/s: 0.00
[ 3s ] thds: 12 tps: 246.99 qps: 8708.63 (r/w/o: 6326.73/1634.93/746.97) lat (ms,95%): 102.97 err/s: 206.99 reconn/s: 0.00
SQL statistics:
    queries performed:
        read:                            18634
        write:                           4806
        other:                           2234
        total:                           25674
    transactions:                        732    (238.02 per sec.)
    queries:                             25674  (8348.27 per sec.)
    ignored errors:                      599    (194.77 per sec.)
    reconnects:                          0      (0.00 per sec.)

General statistics:
    total time:                          3.0750s
    total number of events:              732

Latency (ms):
         min:                                    2.90
         avg:                                   49.62
         max:                                 1579.23
         95th percentile:                      127.81
         sum:                                36322.97

Threads fairness:
    events (avg/stddev):           61.0000/43.78
    execution time (avg/stddev):   3.0269/0.03

";

    #[test]
    fn parses_the_summary() {
        let r = SysbenchReport::parse(SUMMARY).unwrap();
        assert_eq!(r.transactions, 2144);
        assert_eq!(r.tps, 35.69);
        assert_eq!(r.queries, 42880);
        assert_eq!(r.qps, 713.77);
        assert_eq!(r.ignored_errors, 17);
        assert_eq!(r.reconnects, 0);
        assert_eq!(r.seconds, 60.0725);
        assert_eq!(r.latency, None, "this summary has no latency section");
        assert!(r.intervals.is_empty());
        assert_eq!(r.histogram.total(), 0);
    }

    #[test]
    fn a_truncated_summary_is_not_a_report() {
        let cut = &SUMMARY[..SUMMARY.find("ignored").unwrap()];
        assert_eq!(SysbenchReport::parse(cut), None);
    }

    #[test]
    fn parses_latency_progress_lines_and_histogram_of_real_output() {
        let r = SysbenchReport::parse(RATE_LIMITED_WITH_HISTOGRAM).unwrap();
        assert_eq!((r.transactions, r.tps), (24, 7.89));
        assert_eq!(
            r.latency,
            Some(LatencySummary {
                min_ms: 0.39,
                avg_ms: 2.47,
                max_ms: 5.13,
                percentile: Some((95.0, 5.09)),
                sum_ms: 59.18,
            })
        );
        let seconds: Vec<f64> = r.intervals.iter().map(|s| s.second).collect();
        assert_eq!(seconds, [1.0, 2.0, 3.0], "queue-length lines are skipped");
        assert_eq!(
            r.intervals[0],
            IntervalSample {
                second: 1.0,
                threads: 1,
                tps: 7.99,
                qps: 7.99,
                latency_ms: 5.09,
                errors_per_sec: 0.0,
                reconnects_per_sec: 0.0,
            }
        );
        assert_eq!(r.histogram.buckets.len(), 19);
        assert_eq!(r.histogram.buckets[0], (0.388, 1));
        assert_eq!(r.histogram.buckets[18], (5.090, 2));
        assert_eq!(
            r.histogram.total(),
            r.transactions,
            "every event is in the histogram"
        );
    }

    #[test]
    fn histogram_percentiles_match_sysbench_own() {
        let r = SysbenchReport::parse(RATE_LIMITED_WITH_HISTOGRAM).unwrap();
        let h = &r.histogram;
        assert_eq!(h.percentile(95.0), Some(5.090), "the summary says 5.09");
        assert_eq!(h.percentile(50.0), Some(2.184), "12th of 24 events");
        assert_eq!(h.percentile(100.0), Some(5.090));
        assert_eq!(h.percentile(0.1), Some(0.388), "at least one event");
        assert_eq!(LatencyHistogram::default().percentile(50.0), None);
    }

    #[test]
    fn output_without_histogram_still_has_progress_and_latency() {
        let r = SysbenchReport::parse(THREE_NODES).unwrap();
        assert_eq!((r.transactions, r.ignored_errors), (732, 599));
        let lat = r.latency.unwrap();
        assert_eq!(
            (lat.max_ms, lat.percentile),
            (1579.23, Some((95.0, 127.81)))
        );
        assert_eq!(r.intervals.len(), 3);
        assert_eq!(r.intervals[2].threads, 12);
        assert_eq!(r.intervals[2].tps, 246.99);
        assert_eq!(r.intervals[2].latency_ms, 102.97);
        assert_eq!(r.intervals[2].errors_per_sec, 206.99);
        assert!(r.histogram.buckets.is_empty());
    }

    #[test]
    fn command_lists_every_node_port_and_the_account() {
        let b = Sysbench::oltp_read_write().tables(2).table_size(50);
        assert_eq!(b.table_names(), ["sbtest.sbtest1", "sbtest.sbtest2"]);
        let cmd = b.command(&[20000, 20004, 20008], "run");
        let args: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        for want in [
            "oltp_read_write",
            "--mysql-port=20000,20004,20008",
            "--mysql-user=lockstep",
            "--mysql-db=sbtest",
            "--tables=2",
            "--table-size=50",
        ] {
            assert!(args.iter().any(|a| a == want), "missing {want} in {args:?}");
        }
        assert_eq!(args.last().map(String::as_str), Some("run"));
    }
}
