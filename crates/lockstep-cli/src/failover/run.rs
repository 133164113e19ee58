//! One contender in one layout: a 3-node cluster, a check beside each node,
//! the balancer, the application through it, then every fault in turn on
//! the node that serves the writes (the writer), each followed by its recovery,
//! and the rows read back from every node.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use lockstep_testkit::net::Net;
use lockstep_testkit::{Cluster, Place, TCP_PASSWORD, TCP_USER};

use super::app::{self, App, Target};
use super::checks::{CheckService, NodeCheck};
use super::events::Events;
use super::haproxy::{self, Haproxy};
use super::keepalived::{self, Keepalived};
use super::measure::{self, Answer, Statement};
use super::sysbench_load::{self, Load};
use super::{Fault, FaultRun, Layout, LayoutRun, Plan};
use crate::cluster_bench::contender::Contender;

/// The port every node also listens on (`extra_port`), so that the
/// virtual IP reaches whichever node holds it at one address.
const VIP_PORT: u16 = 3306;
/// Where the check service listens in a node's namespace.
const CHECK_PORT: u16 = 9200;
/// Longest wait for a node to be Synced again after a fault.
const RECOVERY: Duration = Duration::from_secs(300);

/// Runs `layout` for `contender`; every fault's result, or why the run
/// stopped.
pub fn run(plan: &Plan, contender: &Contender, layout: Layout) -> LayoutRun {
    let raw = plan.out.join("raw").join(format!(
        "{}-{}",
        layout.name(),
        contender.label.replace('/', "_")
    ));
    let mut out = LayoutRun {
        layout,
        provider: contender.label.clone(),
        faults: Vec::new(),
        error: None,
        raw_dir: raw.clone(),
    };
    if let Err(e) = std::fs::create_dir_all(&raw) {
        out.error = Some(format!("creating {}: {e}", raw.display()));
        return out;
    }
    if let Err(e) = run_inner(plan, contender, layout, &raw, &mut out) {
        eprintln!("failover: {} {}: {e}", contender.label, layout.name());
        out.error = Some(e);
    }
    out
}

struct Rig {
    cluster: Cluster,
    net: Option<Net>,
    checks: Vec<NodeCheck>,
    _services: Vec<CheckService>,
    _haproxy: Option<Haproxy>,
    _keepalived: Vec<Keepalived>,
    events: Events,
    t0: Instant,
    vip_namespaces: Vec<(String, String)>,
    /// Where the application connects: the balancer's address or the VIP.
    entry: (String, u16),
}

fn run_inner(
    plan: &Plan,
    contender: &Contender,
    layout: Layout,
    raw: &Path,
    out: &mut LayoutRun,
) -> Result<(), String> {
    let mut rig = build(plan, contender, layout, raw)?;
    let target = Target {
        host: rig.entry.0.clone(),
        port: rig.entry.1,
        user: TCP_USER.into(),
        password: TCP_PASSWORD.into(),
    };
    let app = App::start(target.clone(), plan.clients, plan.pace, rig.t0);
    // The balancer admits a server after `rise` good checks: wait for the
    // application's first writes before sysbench prepares through it.
    wait_for_successes(&app, 50, Duration::from_secs(60))?;
    let load = if plan.sysbench_threads > 0 {
        rig.cluster
            .node(0)
            .sql("CREATE DATABASE IF NOT EXISTS sbtest")
            .map_err(|e| format!("creating sbtest: {e}"))?;
        Some(Load::start(
            &target,
            plan.sysbench_threads,
            plan.sysbench_rate,
            rig.events.clone(),
        )?)
    } else {
        None
    };
    std::thread::sleep(plan.settle);
    let mut windows: Vec<(Fault, usize, u64, u64, Option<String>)> = Vec::new();
    for &fault in &plan.faults {
        if !fault.applies(rig.net.is_some()) {
            continue;
        }
        let target = writer(&rig.cluster);
        let from = app.now_us();
        rig.events.push(
            "harness",
            &format!("{} {}", fault.name(), node_name(target)),
        );
        eprintln!(
            "failover: {} {}: {} {}",
            contender.label,
            layout.name(),
            fault.name(),
            node_name(target)
        );
        let res = inject_and_recover(plan, &mut rig, fault, target);
        if let Err(e) = &res {
            rig.events
                .push("harness", &format!("{} failed: {e}", fault.name()));
        } else {
            rig.events.push("harness", "recovered");
        }
        std::thread::sleep(plan.settle);
        windows.push((fault, target, from, app.now_us(), res.err()));
        if layout == Layout::Keepalived {
            if let Some(h) = keepalived::holder(&rig.vip_namespaces, &rig.entry.0) {
                rig.events.push("harness", &format!("VIP on {h}"));
            }
        }
    }
    let statements = app.stop()?;
    let samples = load.as_ref().map(|l| (l.samples(), l.exits()));
    drop(load);
    rig.cluster
        .wait_for_equal_last_committed(Duration::from_secs(120))
        .map_err(|e| format!("nodes did not converge after the faults: {e}"))?;
    let (answers, rows) = read_rows(&rig.cluster)?;
    write_statements(&raw.join("statements.csv"), &statements);
    write_answers(&raw.join("answers.csv"), &answers);
    for (fault, target, from, to, error) in windows {
        let result = measure::judge(&statements, from, to, &node_name(target), &answers, &rows);
        let events: Vec<super::events::Event> = rig
            .events
            .since(from / 1000)
            .into_iter()
            .filter(|e| e.at_ms * 1000 < to)
            .collect();
        let plot = raw.join(format!("{}.png", fault.name()));
        let window: Vec<Statement> = statements
            .iter()
            .filter(|s| s.start_us >= from && s.start_us < to)
            .cloned()
            .collect();
        let plot_ok = super::timeline::draw(
            &plot,
            &format!("{} · {} · {}", contender.label, layout.name(), fault.name()),
            &window,
            &answers,
            from,
            &events,
        );
        if let Err(e) = &plot_ok {
            eprintln!("failover: plot {}: {e}", plot.display());
        }
        let load = samples
            .as_ref()
            .map(|(samples, exits)| sysbench_load::judge(samples, exits, from / 1000, to / 1000));
        out.faults.push(FaultRun {
            fault,
            result,
            load,
            events,
            error,
            plot: plot_ok.ok().map(|_| plot),
        });
    }
    let _ = rig.cluster.stop_all();
    Ok(())
}

/// The node that serves the writes now: the node that ran the latest
/// acknowledged write. After a failover without failback (keepalived's
/// address stays where it went; with leastconn, the sessions stay where
/// they were moved) that is no longer node1, and a fault on node1 would
/// miss the application.
fn writer(cluster: &Cluster) -> usize {
    let latest = cluster
        .nodes()
        .iter()
        .filter(|n| n.is_running())
        .find_map(|n| {
            n.sql(&format!(
                "SELECT node FROM {} ORDER BY id DESC LIMIT 1",
                app::TABLE
            ))
            .ok()
        });
    latest
        .and_then(|name| name.trim().trim_start_matches("node").parse::<usize>().ok())
        .filter(|n| (1..=3).contains(n))
        .map_or(0, |n| n - 1)
}

fn node_name(i: usize) -> String {
    format!("node{}", i + 1)
}

fn build(plan: &Plan, contender: &Contender, layout: Layout, raw: &Path) -> Result<Rig, String> {
    let net = if plan.netns {
        // Four namespaces: the fourth is the joiner of the donor fault.
        Some(Net::create(4)?)
    } else {
        None
    };
    let mut spec = contender.spec(3, "");
    if let Some(n) = &net {
        spec = spec
            .places(n.places().into_iter().take(3).collect())
            .extra_mysqld("bind-address=0.0.0.0")
            .extra_mysqld(&format!("extra_port={VIP_PORT}"))
            .extra_mysqld("extra_max_connections=100");
    }
    let cluster = spec
        .start()
        .map_err(|e| format!("starting the cluster: {e}"))?;
    cluster
        .node(0)
        .sql(&app::create_table_sql())
        .map_err(|e| format!("creating the table: {e}"))?;
    let donates = plan.faults.contains(&Fault::Donor) || plan.faults.contains(&Fault::SpareDonor);
    if donates && plan.sst_mb > 0 {
        fill(&cluster, plan.sst_mb)?;
    }
    let t0 = Instant::now();
    let events = Events::new(t0, &raw.join("events.log"));
    let lockstep = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let dir = cluster.base_dir().to_path_buf();
    let mut checks = Vec::new();
    // Where each node's check service listens (the HAProxy layouts).
    let mut check_at: Vec<(String, u16)> = Vec::new();
    let mut services = Vec::new();
    for (i, node) in cluster.nodes().iter().enumerate() {
        let host = node.config().place.host.clone();
        let c = NodeCheck::prepare(
            &dir,
            node.name(),
            &host,
            node.port(),
            TCP_USER,
            TCP_PASSWORD,
        )?;
        // keepalived runs `check --once` itself; HAProxy polls a service.
        if layout != Layout::Keepalived {
            let (addr, port, program) = match &net {
                Some(n) => (n.addr(i), CHECK_PORT, n.command(i, &lockstep)),
                None => ("127.0.0.1".into(), free_port()?, Command::new(&lockstep)),
            };
            let log = raw.join(format!("check-{}.log", node.name()));
            let listen = format!("{addr}:{port}");
            services.push(CheckService::start(
                program,
                &c,
                plan.check_cache_ms,
                &listen,
                &log,
            )?);
            check_at.push((addr, port));
        }
        checks.push(c);
    }
    let mut rig = Rig {
        cluster,
        net,
        checks,
        _services: services,
        _haproxy: None,
        _keepalived: Vec::new(),
        events,
        t0,
        vip_namespaces: Vec::new(),
        entry: (String::new(), 0),
    };
    match layout {
        Layout::HaproxyAll | Layout::HaproxyWriter => {
            let servers: Vec<haproxy::Server> = rig
                .cluster
                .nodes()
                .iter()
                .zip(&check_at)
                .map(|(node, (addr, check_port))| haproxy::Server {
                    name: node.name().to_string(),
                    addr: addr.clone(),
                    port: node.port(),
                    check_port: *check_port,
                })
                .collect();
            rig.entry = ("127.0.0.1".into(), free_port()?);
            let listen = format!("{}:{}", rig.entry.0, rig.entry.1);
            let text = haproxy::config(
                &listen,
                &servers,
                layout == Layout::HaproxyWriter,
                plan.haproxy_timing,
            );
            rig._haproxy = Some(Haproxy::start(
                &raw.join("haproxy.cfg"),
                &text,
                rig.events.clone(),
            )?);
        }
        Layout::Keepalived => {
            let net = rig
                .net
                .as_ref()
                .ok_or("keepalived needs network namespaces (root)")?;
            let router_id = (std::process::id() % 200) as u8 + 20;
            for i in 0..3 {
                let inst = keepalived::Instance {
                    name: node_name(i),
                    interface: net.interface(i),
                    priority: 150 - 50 * i as u32,
                    check: rig.checks[i].once_command(&lockstep),
                    vip: net.vip(),
                    router_id,
                };
                let text = keepalived::config(&inst, plan.keepalived_timing);
                std::fs::copy(
                    &rig.checks[i].defaults_file,
                    raw.join(format!("check-{}.cnf", inst.name)),
                )
                .ok();
                rig._keepalived.push(Keepalived::start(
                    net.command(i, "keepalived"),
                    raw,
                    &inst.name,
                    &text,
                    rig.events.clone(),
                )?);
                rig.vip_namespaces.push((inst.name.clone(), net.ns(i)));
            }
            rig.entry = (net.vip(), VIP_PORT);
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                if keepalived::holder(&rig.vip_namespaces, &net.vip()).as_deref() == Some("node1") {
                    break;
                }
                if Instant::now() > deadline {
                    return Err("the virtual IP did not come up on node1 within 60 s".into());
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
    Ok(rig)
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

fn wait_for_successes(app: &App, n: usize, within: Duration) -> Result<(), String> {
    let deadline = Instant::now() + within;
    while app.successes() < n {
        if Instant::now() > deadline {
            return Err(format!(
                "the application got fewer than {n} successful writes through the balancer in {} s",
                within.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// About `mb` MiB of rows in a table of their own, so that a full state
/// transfer takes long enough for the balancer to see the donor.
fn fill(cluster: &Cluster, mb: u64) -> Result<(), String> {
    let n = cluster.node(0);
    let sql = |q: &str| n.sql(q).map_err(|e| format!("filling: {e}"));
    sql(
        "CREATE TABLE failover.fill (id BIGINT AUTO_INCREMENT PRIMARY KEY, pad VARCHAR(1000)) \
         ENGINE=InnoDB",
    )?;
    sql("INSERT INTO failover.fill (pad) VALUES (REPEAT('x', 1000))")?;
    let rows_wanted = mb * 1024;
    let mut rows = 1u64;
    while rows < rows_wanted {
        let batch = rows.min(rows_wanted - rows).min(32_768);
        sql(&format!(
            "INSERT INTO failover.fill (pad) SELECT pad FROM failover.fill LIMIT {batch}"
        ))?;
        rows += batch;
    }
    Ok(())
}

fn inject_and_recover(
    plan: &Plan,
    rig: &mut Rig,
    fault: Fault,
    target: usize,
) -> Result<(), String> {
    let name = node_name(target);
    let e = |what: &str, err: lockstep_testkit::Error| format!("{what}: {err}");
    match fault {
        Fault::Kill => {
            rig.cluster
                .node_mut(target)
                .kill()
                .map_err(|x| e("kill -9", x))?;
            std::thread::sleep(plan.down);
            rig.events.push("harness", &format!("restart {name}"));
            rig.cluster
                .node_mut(target)
                .start_recovered()
                .map_err(|x| e("restart", x))?;
        }
        Fault::Cut => {
            let net = rig.net.as_mut().ok_or("a cut needs network namespaces")?;
            net.isolate(target)?;
            std::thread::sleep(plan.down);
            rig.events.push("harness", "heal");
            net.heal()?;
        }
        Fault::Isolate => {
            let n = rig.cluster.node(target);
            n.sql("SET GLOBAL wsrep_provider_options='gmcast.isolate=1'")
                .map_err(|x| e("gmcast.isolate=1", x))?;
            std::thread::sleep(plan.down);
            rig.events.push("harness", "gmcast.isolate=0");
            n.sql("SET GLOBAL wsrep_provider_options='gmcast.isolate=0'")
                .map_err(|x| e("gmcast.isolate=0", x))?;
        }
        Fault::Drain => {
            rig.checks[target].drain()?;
            // The balancer needs `fall` failed polls of a check that caches
            // for a second: wait that long, and as long again, before the
            // node goes down for its maintenance.
            std::thread::sleep(plan.drain_wait());
            rig.events
                .push("harness", &format!("graceful shutdown {name}"));
            rig.cluster
                .node_mut(target)
                .stop()
                .map_err(|x| e("stop", x))?;
            std::thread::sleep(plan.down / 2);
            rig.events.push("harness", &format!("start {name}"));
            let started = rig
                .cluster
                .node_mut(target)
                .start()
                .map_err(|x| e("start", x));
            rig.checks[target].undrain();
            started?;
        }
        Fault::Donor | Fault::SpareDonor => {
            // The writer itself, or the first other node.
            let donor = if fault == Fault::Donor {
                target
            } else {
                (0..3).find(|&d| d != target).unwrap_or(0)
            };
            let name = node_name(donor);
            let place = match &rig.net {
                // The joiner's namespace; a second joiner reuses it once
                // the first has left.
                Some(n) => n.places().into_iter().nth(3).unwrap_or_default(),
                None => Place::default(),
            };
            let i = rig
                .cluster
                .add_node_at(place)
                .map_err(|x| e("add node4", x))?;
            // The spec's lines (bind-address, extra_port) are node4's too.
            let joiner = node_name(i);
            rig.events
                .push("harness", &format!("{joiner} joins by SST from {name}"));
            rig.cluster
                .node_mut(i)
                .start_with_args(&[&format!("--wsrep_sst_donor={name}")])
                .map_err(|x| e("joining by SST", x))?;
            rig.events.push("harness", &format!("{joiner} Synced"));
            rig.cluster
                .node(donor)
                .wait_synced(RECOVERY)
                .map_err(|x| e("donor back", x))?;
            std::thread::sleep(plan.readmit_wait());
            rig.events.push("harness", &format!("{joiner} leaves"));
            rig.cluster
                .node_mut(i)
                .stop()
                .map_err(|x| e("stopping the joiner", x))?;
            return Ok(());
        }
    }
    rig.cluster
        .node(target)
        .wait_synced(RECOVERY)
        .map_err(|x| e("back to Synced", x))?;
    rig.events.push("harness", &format!("{name} Synced"));
    // The balancer needs `rise` good polls before it sends traffic again.
    std::thread::sleep(plan.readmit_wait());
    Ok(())
}

/// What every row says (from the first node, once all agree), and every node's ids.
#[allow(clippy::type_complexity)]
fn read_rows(
    cluster: &Cluster,
) -> Result<(HashMap<u64, Answer>, BTreeMap<String, BTreeSet<u64>>), String> {
    let mut answers = HashMap::new();
    let mut rows = BTreeMap::new();
    for (i, node) in cluster.nodes().iter().enumerate() {
        if !node.is_running() {
            continue;
        }
        let table = node
            .query_rows(&format!(
                "SELECT id, node, local_state, cluster_status FROM {}",
                app::TABLE
            ))
            .map_err(|e| format!("reading the rows on {}: {e}", node.name()))?;
        let mut ids = BTreeSet::new();
        for r in &table {
            let Some(id) = r.first().and_then(|v| v.parse::<u64>().ok()) else {
                continue;
            };
            ids.insert(id);
            if i == 0 && r.len() >= 4 {
                answers.insert(
                    id,
                    Answer {
                        node: r[1].clone(),
                        local_state: r[2].clone(),
                        cluster_status: r[3].clone(),
                    },
                );
            }
        }
        rows.insert(node.name().to_string(), ids);
    }
    Ok((answers, rows))
}

fn write_statements(path: &Path, statements: &[Statement]) {
    let mut text = String::from("client,id,start_us,end_us,outcome\n");
    for s in statements {
        text.push_str(&format!(
            "{},{},{},{},{}\n",
            s.client,
            s.id,
            s.start_us,
            s.end_us,
            s.outcome.code()
        ));
    }
    let _ = std::fs::write(path, text);
}

/// What each row says, so that a report can be judged again from raw files.
fn write_answers(path: &Path, answers: &HashMap<u64, Answer>) {
    let mut ids: Vec<&u64> = answers.keys().collect();
    ids.sort_unstable();
    let mut text = String::from("id,node,local_state,cluster_status\n");
    for id in ids {
        let a = &answers[id];
        text.push_str(&format!(
            "{id},{},{},{}\n",
            a.node, a.local_state, a.cluster_status
        ));
    }
    let _ = std::fs::write(path, text);
}
