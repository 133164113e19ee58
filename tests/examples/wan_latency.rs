//! Commit latency and WAN bytes across two emulated sites (issue 15,
//! ADR 0020), Lockstep next to Galera, both in one run on this machine. A
//! command, not a test: `make wan-bench [WAN_ARGS="--delay-ms 25 --commits 200"]`
//! (as root: it makes network namespaces); `--site-a 3 --site-b 2` for
//! other site sizes.
//!
//! The WAN is `scripts/wan-emulator.py`: two network namespaces joined
//! through TUN devices by a process that holds every packet between the
//! sites for `--delay-ms` each way (this kernel has no `tc netem`) and
//! counts the bytes that cross. Site A holds two nodes (segment 0), site B
//! one (segment 1): node 1, which founds the cluster, so each provider
//! starts with its first member in the small site.
//!
//! Per site, one client commits `--commits` single-row updates one after
//! the other on a node there; the report gives their latency and the WAN
//! bytes per commit, less what crosses while the cluster is idle.

use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use lockstep_testkit::{Cluster, Place, Provider};

#[path = "../support/example_args.rs"]
mod example_args;
use example_args::arg;

const WAIT: Duration = Duration::from_secs(300);
const STATS: &str = "/tmp/lockstep-wan-stats.json";
const READY: &str = "/tmp/lockstep-wan-ready";

/// The emulator's pid, so that `die` (which exits without unwinding)
/// stops it and its namespaces go too.
static EMULATOR_PID: AtomicU32 = AtomicU32::new(0);

fn die(what: &str, e: impl std::fmt::Display) -> ! {
    stop_emulator(EMULATOR_PID.swap(0, Ordering::SeqCst));
    example_args::die("wan-bench", what, e)
}

fn stop_emulator(pid: u32) {
    if pid != 0 {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
}

/// The emulator process; stopped (namespaces removed) on drop.
struct Emulator(Child);

impl Emulator {
    fn start(delay_ms: u64, layout: Layout) -> Emulator {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/wan-emulator.py");
        let _ = std::fs::remove_file(READY);
        let child = Command::new("python3")
            .arg(&script)
            .args(["up", "--sites", "2", "--hosts"])
            .arg(format!("{},{}", layout.a, layout.b))
            .args(["--delay-ms", &delay_ms.to_string(), "--stats", STATS])
            .args(["--ready", READY])
            .spawn()
            .unwrap_or_else(|e| die("starting the WAN emulator", e));
        let t0 = Instant::now();
        while !std::path::Path::new(READY).exists() {
            if t0.elapsed() > Duration::from_secs(20) {
                die("the WAN emulator", "not ready after 20 s");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        EMULATOR_PID.store(child.id(), Ordering::SeqCst);
        Emulator(child)
    }

    /// Bytes that crossed between the sites so far, both directions.
    fn bytes(&self) -> u64 {
        // The file is rewritten every 0.5 s: wait for a fresh one.
        std::thread::sleep(Duration::from_millis(600));
        let text = std::fs::read_to_string(STATS).unwrap_or_else(|e| die("reading stats", e));
        let json: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| die("parsing stats", e));
        json["links"].as_object().map_or(0, |links| {
            links.values().filter_map(|l| l["bytes"].as_u64()).sum()
        })
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        stop_emulator(EMULATOR_PID.swap(0, Ordering::SeqCst));
        let _ = self.0.wait();
    }
}

struct Row {
    provider: String,
    site: &'static str,
    node: String,
    latencies_ms: Vec<f64>,
    wan_bytes: f64,
    leader: String,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Nodes per site: A (the emulator's site 0, segment 0) and B.
#[derive(Debug, Clone, Copy)]
struct Layout {
    a: u64,
    b: u64,
}

impl Layout {
    /// Node 1 is B's first host (it founds the cluster), then A's hosts,
    /// then B's others.
    fn places(self) -> Vec<Place> {
        let at = |site: u64, n: u64| Place {
            host: format!("10.77.{site}.{n}"),
            netns: Some(format!("lswan{site}")),
            segment: site as u8,
        };
        let mut v = vec![at(1, 1)];
        v.extend((1..=self.a).map(|n| at(0, n)));
        v.extend((2..=self.b).map(|n| at(1, n)));
        v
    }

    fn nodes(self) -> usize {
        (self.a + self.b) as usize
    }

    /// Whether node `name` (`nodeN`) is in site A.
    fn in_a(self, name: &str) -> bool {
        name.strip_prefix("node")
            .and_then(|n| n.parse::<u64>().ok())
            .is_some_and(|n| (2..=self.a + 1).contains(&n))
    }
}

fn leader(cluster: &Cluster) -> String {
    cluster
        .node(1)
        .status("wsrep_lockstep_leader")
        .ok()
        .flatten()
        .unwrap_or_else(|| "-".into())
}

fn measure(provider: Provider, emu: &Emulator, commits: u64, layout: Layout) -> Vec<Row> {
    let label = provider.label();
    eprintln!(
        "wan-bench: {label}: starting {} nodes ({} in site A, {} in site B, node1 in B)",
        layout.nodes(),
        layout.a,
        layout.b
    );
    // Galera in network namespaces now and then refuses a joiner with "a
    // node with the same UUID already exists": a new cluster then.
    let mut attempt = 0;
    let cluster = loop {
        attempt += 1;
        match Cluster::builder(layout.nodes())
            .provider(provider.clone())
            .cluster_name("wan")
            .places(layout.places())
            .provider_options("evs.suspect_timeout=PT10S")
            .start_timeout(WAIT)
            .start()
        {
            Ok(c) => break c,
            Err(e) if attempt < 3 => eprintln!("wan-bench: {label}: start failed ({e}); again"),
            Err(e) => die("starting the cluster", e),
        }
    };
    cluster
        .node(0)
        .sql(
            "CREATE DATABASE wan; CREATE TABLE wan.t (id INT PRIMARY KEY, v INT); \
             INSERT INTO wan.t VALUES (0, 0), (1, 0), (2, 0)",
        )
        .unwrap_or_else(|e| die("creating the table", e));
    cluster
        .wait_for_equal_last_committed(WAIT)
        .unwrap_or_else(|e| die("replicating the table", e));
    // Lockstep's leader leaves the one-voter site once the cluster runs
    // the protocol version that moves it (ADR 0020).
    let t0 = Instant::now();
    while label == "lockstep"
        && !layout.in_a(&leader(&cluster))
        && t0.elapsed() < Duration::from_secs(30)
    {
        std::thread::sleep(Duration::from_millis(200));
    }
    let idle_from = emu.bytes();
    let idle_t = Instant::now();
    std::thread::sleep(Duration::from_secs(5));
    let idle_rate = (emu.bytes() - idle_from) as f64 / idle_t.elapsed().as_secs_f64();
    let mut rows = Vec::new();
    for (site, i) in [("A", 1), ("B", 0)] {
        let node = cluster.node(i);
        let mut session = node.session().unwrap_or_else(|e| die("a session", e));
        let update = format!("UPDATE wan.t SET v = v + 1 WHERE id = {i}");
        for _ in 0..10 {
            session
                .sql(&update)
                .unwrap_or_else(|e| die("warming up", e));
        }
        // Lockstep's own WAN counters, summed over the nodes.
        let counters = |c: &Cluster| -> Vec<u64> {
            [
                "wan_bytes_sent",
                "wan_entries_sent",
                "wan_bundles_sent",
                "applied_index",
                "echo_elided_bytes",
                "echo_unfilled",
            ]
            .iter()
            .map(|k| {
                c.nodes()
                    .iter()
                    .filter_map(|n| n.status(&format!("wsrep_lockstep_{k}")).ok().flatten())
                    .filter_map(|v| v.parse::<u64>().ok())
                    .sum()
            })
            .collect()
        };
        let own_before = counters(&cluster);
        let before = emu.bytes();
        let t = Instant::now();
        let mut latencies_ms = Vec::new();
        for _ in 0..commits {
            let c = Instant::now();
            session
                .sql(&update)
                .unwrap_or_else(|e| die("committing", e));
            latencies_ms.push(c.elapsed().as_secs_f64() * 1e3);
        }
        let busy = t.elapsed().as_secs_f64();
        let crossed = emu.bytes() - before;
        let own: Vec<u64> = counters(&cluster)
            .iter()
            .zip(&own_before)
            .map(|(a, b)| a - b)
            .collect();
        eprintln!(
            "wan-bench: {label} site {site}: counters summed over the nodes (WAN bytes, WAN entries, bundles, applied \
             entries, bytes left out of echoes, stubs not filled) {own:?}"
        );
        let net = (crossed as f64 - idle_rate * (busy + 0.6)).max(0.0);
        latencies_ms.sort_by(f64::total_cmp);
        rows.push(Row {
            provider: label.to_string(),
            site,
            node: node.name().to_string(),
            latencies_ms,
            wan_bytes: net / commits as f64,
            leader: leader(&cluster),
        });
    }
    let sums = cluster
        .checksums(&["wan.t"])
        .unwrap_or_else(|e| die("checksums", e));
    if !sums.is_consistent() {
        die("consistency", format!("the nodes differ:\n{sums}"));
    }
    let mut cluster = cluster;
    cluster.stop_all().unwrap_or_else(|e| die("stopping", e));
    eprintln!("wan-bench: {label}: idle WAN traffic {idle_rate:.0} bytes/s");
    rows
}

fn main() {
    let delay_ms = arg("--delay-ms", 25);
    let commits = arg("--commits", 200);
    let layout = Layout {
        a: arg("--site-a", 2).max(1),
        b: arg("--site-b", 1).max(1),
    };
    let emu = Emulator::start(delay_ms, layout);
    let mut rows = measure(Provider::lockstep_default(), &emu, commits, layout);
    // `--galera 0`: Lockstep alone (no comparison).
    if arg("--galera", 1) == 1 {
        rows.extend(measure(Provider::Galera, &emu, commits, layout));
    }
    drop(emu);
    println!(
        "\nWAN: site A ({} nodes) and site B ({}), {} ms round trip; {commits} single-row \
         commits per site, one client\n",
        layout.a,
        layout.b,
        2 * delay_ms
    );
    println!(
        "| provider | client site | node | p50 ms | mean ms | p95 ms | max ms | WAN bytes/commit | leader |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        let l = &r.latencies_ms;
        let mean = l.iter().sum::<f64>() / l.len() as f64;
        println!(
            "| {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.0} | {} |",
            r.provider,
            r.site,
            r.node,
            percentile(l, 0.5),
            mean,
            percentile(l, 0.95),
            l[l.len() - 1],
            r.wan_bytes,
            if r.provider == "lockstep" {
                &r.leader
            } else {
                "-"
            }
        );
    }
    let (ours, theirs) = rows.split_at(2.min(rows.len()));
    println!();
    for (o, g) in ours.iter().zip(theirs) {
        println!(
            "site {}: Lockstep/Galera p50 latency {:.2}, WAN bytes {:.2}",
            o.site,
            percentile(&o.latencies_ms, 0.5) / percentile(&g.latencies_ms, 0.5),
            o.wan_bytes / g.wan_bytes.max(1.0)
        );
    }
}
