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

/// The summary sysbench prints at the end of a run.
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
    /// sysbench's whole standard output.
    pub output: String,
}

impl SysbenchReport {
    /// Parses sysbench 1.0's summary; `None` if a figure is missing.
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
            output: output.to_string(),
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
    }

    #[test]
    fn a_truncated_summary_is_not_a_report() {
        let cut = &SUMMARY[..SUMMARY.find("ignored").unwrap()];
        assert_eq!(SysbenchReport::parse(cut), None);
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
