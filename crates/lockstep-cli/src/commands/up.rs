//! `lockstep up`: start a local cluster that outlives the command.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use lockstep_testkit::{Cluster, ClusterSpec, Provider, TCP_PASSWORD, TCP_USER};

use super::DirArg;
use crate::error::CliError;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Number of nodes.
    #[arg(short = 'n', long = "nodes", default_value_t = 3)]
    nodes: usize,
    /// wsrep provider: `lockstep`, `galera`, or a path to a provider library.
    #[arg(long, default_value = "lockstep")]
    provider: String,
    #[command(flatten)]
    dir: DirArg,
    /// wsrep_cluster_name.
    #[arg(long, default_value = "lockstep")]
    name: String,
    /// Extra wsrep_provider_options, e.g. "gcs.fc_limit=64".
    #[arg(long, default_value = "")]
    provider_options: String,
    /// Extra [mysqld] line for every node (repeatable), e.g. wsrep_sync_wait=1.
    #[arg(long = "mysqld", value_name = "LINE")]
    mysqld: Vec<String>,
    /// wsrep_slave_threads.
    #[arg(long)]
    slave_threads: Option<u32>,
    /// wsrep_sst_method.
    #[arg(long, default_value = "rsync")]
    sst_method: String,
    /// Plain TCP between nodes. By default every cluster gets its own CA
    /// (`<dir>/tls-ca`) and its nodes talk mutual TLS.
    #[arg(long)]
    no_tls: bool,
    /// Seconds to wait for each node to reach Synced.
    #[arg(long, default_value_t = 120)]
    timeout: u64,
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    if args.nodes == 0 {
        return Err(CliError::Usage("-n must be at least 1".into()));
    }
    let t0 = Instant::now();
    let mut spec = ClusterSpec::new(args.nodes)
        .provider(Provider::from_name(&args.provider))
        .cluster_name(&args.name)
        .base_dir(&args.dir.dir)
        .provider_options(&args.provider_options)
        .sst_method(&args.sst_method)
        .start_timeout(Duration::from_secs(args.timeout))
        .tls(!args.no_tls)
        .detach_processes(true);
    // Snapshot isolation: without it InnoDB's repeatable read loses
    // updates (P4) under read-modify-write, on one node or across nodes,
    // with any provider (docs/jepsen.md). A `--mysqld` line comes later
    // in my.cnf and overrides it.
    spec = spec.extra_mysqld("innodb_snapshot_isolation=ON");
    for line in &args.mysqld {
        spec = spec.extra_mysqld(line);
    }
    if let Some(n) = args.slave_threads {
        spec = spec.slave_threads(n);
    }
    let mut cluster = spec.build()?;
    // Recorded before starting, so that `status` and `down` also find a
    // cluster whose start failed half-way (its logs stay for inspection).
    cluster.write_state()?;
    if let Err(e) = cluster.start_all() {
        drop(cluster); // stops whatever did start
        eprintln!(
            "lockstep: the cluster did not come up; logs stay in {}/node*/error.log, \
             `lockstep down{} --purge` removes the files",
            args.dir.dir.display(),
            args.dir.hint()
        );
        return Err(e.into());
    }
    print_summary(&cluster, &args.dir, t0.elapsed());
    if args.no_tls {
        println!("peers: plain TCP (--no-tls)");
    } else {
        println!(
            "peers: mutual TLS, CA in {}",
            lockstep_testkit::tls::ca_dir(&args.dir.dir).display()
        );
    }
    cluster.detach()?;
    Ok(ExitCode::SUCCESS)
}

fn print_summary(cluster: &Cluster, dir: &DirArg, took: Duration) {
    println!(
        "cluster `{}` is up: {} node(s), provider {} ({}), in {:.1} s",
        cluster.name(),
        cluster.len(),
        cluster.provider_label(),
        cluster.provider_path().display(),
        took.as_secs_f64()
    );
    if let Some(user) = cluster.run_as() {
        println!("servers run as user `{user}`");
    }
    for n in cluster.nodes() {
        println!(
            "  {}  pid {}  port {}  group port {}  log {}",
            n.name(),
            n.pid().map_or("-".into(), |p| p.to_string()),
            n.port(),
            n.base_port(),
            n.error_log_path().display()
        );
    }
    let first = cluster.node(0);
    println!("connect:");
    println!("  mariadb -S {} -uroot", first.socket().display());
    println!(
        "  mariadb -h127.0.0.1 -P{} -u{TCP_USER} -p{TCP_PASSWORD}",
        first.port()
    );
    println!(
        "then: lockstep status{h}   |   lockstep down{h}",
        h = dir.hint()
    );
}
