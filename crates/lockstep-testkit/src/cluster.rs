//! A cluster of mariadbd nodes on loopback: build, start, stop, detach, attach.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::config::{self, CnfParams, NodeConfig, Place};
use crate::error::{Error, Result};
use crate::node::{Node, Timeouts};
use crate::ports::{self, NodePorts};
use crate::process;
use crate::provider::Provider;
use crate::state::{state_path, ClusterState, NodeState};
use crate::user::{self, ServerUser};

/// The TCP account created on the first node (`'lockstep'@'%'`, all privileges).
pub const TCP_USER: &str = "lockstep";
/// Its password.
pub const TCP_PASSWORD: &str = "lockstep";

/// What cluster to build. Chain the setters, then [`ClusterSpec::start`].
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    nodes: usize,
    provider: Provider,
    cluster_name: String,
    base_dir: Option<PathBuf>,
    extra_mysqld: Vec<String>,
    provider_options: String,
    slave_threads: Option<u32>,
    sst_method: String,
    timeouts: Timeouts,
    detach_processes: bool,
    verbose: bool,
    keep: bool,
    tls: bool,
    /// Where each node runs (by number); nodes beyond it on loopback.
    places: Vec<Place>,
}

impl ClusterSpec {
    /// `nodes` nodes with our provider ([`Provider::lockstep_default`]),
    /// rsync SST, in a fresh directory under /tmp removed on drop.
    pub fn new(nodes: usize) -> ClusterSpec {
        ClusterSpec {
            nodes,
            provider: Provider::lockstep_default(),
            cluster_name: "lockstep".into(),
            base_dir: None,
            extra_mysqld: Vec::new(),
            provider_options: String::new(),
            slave_threads: None,
            sst_method: "rsync".into(),
            timeouts: Timeouts::default(),
            detach_processes: false,
            verbose: true,
            keep: false,
            tls: false,
            places: Vec::new(),
        }
    }

    /// Places node `i` (0-based) at `places[i]`: its address, network
    /// namespace and segment (the WAN benchmark's sites).
    pub fn places(mut self, places: Vec<Place>) -> Self {
        self.places = places;
        self
    }
    pub fn nodes(mut self, n: usize) -> Self {
        self.nodes = n;
        self
    }
    pub fn provider(mut self, p: Provider) -> Self {
        self.provider = p;
        self
    }
    pub fn cluster_name(mut self, name: &str) -> Self {
        self.cluster_name = name.into();
        self
    }
    /// Use (and keep) this directory instead of a fresh temporary one.
    /// Node datadirs already in it are reused, not re-initialised.
    pub fn base_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.base_dir = Some(dir.into());
        self
    }
    /// A line appended to every node's `[mysqld]` section (wins over ours).
    pub fn extra_mysqld(mut self, line: &str) -> Self {
        self.extra_mysqld.push(line.into());
        self
    }
    /// Peer TLS: a CA made for this cluster (`<base>/tls-ca`), a
    /// certificate per node (`<node>/tls`) and the `socket.ssl*` options
    /// naming them (see [`crate::tls`]).
    pub fn tls(mut self, on: bool) -> Self {
        self.tls = on;
        self
    }

    /// Appended to `wsrep_provider_options`, e.g. `"gcs.fc_limit=64; pc.weight=2"`.
    pub fn provider_options(mut self, opts: &str) -> Self {
        self.provider_options = opts.into();
        self
    }
    pub fn slave_threads(mut self, n: u32) -> Self {
        self.slave_threads = Some(n);
        self
    }
    pub fn sst_method(mut self, method: &str) -> Self {
        self.sst_method = method.into();
        self
    }
    pub fn start_timeout(mut self, t: Duration) -> Self {
        self.timeouts.start = t;
        self
    }
    pub fn stop_timeout(mut self, t: Duration) -> Self {
        self.timeouts.stop = t;
        self
    }
    pub fn sql_timeout(mut self, t: Duration) -> Self {
        self.timeouts.sql = t;
        self
    }
    /// Start servers in their own session so they outlive this process
    /// (what `lockstep up` needs before [`Cluster::detach`]).
    pub fn detach_processes(mut self, yes: bool) -> Self {
        self.detach_processes = yes;
        self
    }
    /// Progress lines on stderr (default on; tests capture them).
    pub fn verbose(mut self, yes: bool) -> Self {
        self.verbose = yes;
        self
    }
    /// Keep the temporary directory after drop (also: `LOCKSTEP_KEEP=1`).
    pub fn keep(mut self, yes: bool) -> Self {
        self.keep = yes;
        self
    }

    /// Starts every node: node1 bootstraps, the others join one at a time by SST.
    pub fn start(self) -> Result<Cluster> {
        let mut cluster = self.build()?;
        cluster.start_all()?;
        Ok(cluster)
    }

    /// Prepares directories, ports, configs and datadirs; starts nothing.
    pub fn build(self) -> Result<Cluster> {
        if self.nodes == 0 {
            return Err(Error::config("a cluster needs at least one node"));
        }
        let t0 = Instant::now();
        let provider_src = self.provider.resolve()?;
        let run_as = user::server_user()?;
        let (base, temp) = match &self.base_dir {
            Some(dir) => (prepare_given_dir(dir)?, None),
            None => {
                let t = tempfile::Builder::new()
                    .prefix("lockstep-")
                    .tempdir_in("/tmp")
                    .map_err(|e| Error::io("creating a cluster directory under /tmp", e))?;
                (t.path().to_path_buf(), Some(t))
            }
        };
        if let Some(u) = &run_as {
            user::chown_tree_shallow(&base, u)?;
            if !user::traversable_by(&base, u) {
                return Err(Error::config(format!(
                    "user `{}` cannot reach {}: mariadbd runs as that user; choose a \
                     directory under /tmp",
                    u.name,
                    base.display()
                )));
            }
        }
        let provider_path = provider_for(&provider_src, &base, run_as.as_ref())?;
        if self.tls {
            crate::tls::make_ca(&base, &self.cluster_name)?;
        }
        let ports = ports::allocate(self.nodes)?;
        let configs = ports
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let mut cfg = NodeConfig::new(&base, i + 1, *p)?;
                if let Some(place) = self.places.get(i) {
                    cfg.place = place.clone();
                }
                Ok(cfg)
            })
            .collect::<Result<Vec<_>>>()?;
        let address = config::cluster_address(&configs);
        let template = NodeTemplate {
            provider_options: self.provider_options.clone(),
            tls_ca: self.tls.then(|| crate::tls::ca_dir(&base)),
            slave_threads: self.slave_threads,
            sst_method: self.sst_method.clone(),
            extra_mysqld: self.extra_mysqld.clone(),
            timeouts: self.timeouts,
            detach_processes: self.detach_processes,
        };
        let params = template.params(
            &self.cluster_name,
            &provider_path,
            &address,
            run_as.as_ref().map(|u| u.name.as_str()),
        );
        for cfg in &configs {
            write_node_files(cfg, &params, run_as.as_ref())?;
        }
        init_datadirs(&configs, run_as.as_ref())?;
        if let Some(u) = &run_as {
            for cfg in &configs {
                user::chown_tree(&cfg.dir, u)?;
            }
        }
        let verbose = self.verbose;
        let nodes = configs
            .into_iter()
            .map(|cfg| {
                let mut n = Node::new(cfg, true, self.detach_processes, self.timeouts);
                n.set_verbose(verbose);
                n
            })
            .collect();
        if verbose {
            eprintln!(
                "lockstep-testkit: prepared {} node(s) in {} in {:.1} s (provider {})",
                self.nodes,
                base.display(),
                t0.elapsed().as_secs_f64(),
                provider_path.display()
            );
        }
        Ok(Cluster {
            name: self.cluster_name,
            provider_label: self.provider.label(),
            provider_path,
            base,
            temp,
            keep: self.keep,
            owned: true,
            run_as: run_as.map(|u| u.name),
            nodes,
            ports,
            verbose,
            template: Some(template),
        })
    }
}

/// What a node added later ([`Cluster::add_node`]) needs from the spec the
/// cluster was built from, so that it gets the same settings as the others.
#[derive(Debug, Clone)]
struct NodeTemplate {
    provider_options: String,
    /// The cluster's CA, when peers use TLS.
    tls_ca: Option<PathBuf>,
    slave_threads: Option<u32>,
    sst_method: String,
    extra_mysqld: Vec<String>,
    timeouts: Timeouts,
    detach_processes: bool,
}

impl NodeTemplate {
    fn params<'a>(
        &'a self,
        cluster_name: &'a str,
        provider: &'a Path,
        cluster_address: &'a str,
        user: Option<&'a str>,
    ) -> CnfParams<'a> {
        CnfParams {
            cluster_name,
            provider,
            cluster_address,
            user,
            provider_options: &self.provider_options,
            tls_ca: self.tls_ca.as_deref(),
            slave_threads: self.slave_threads,
            sst_method: &self.sst_method,
            extra_lines: &self.extra_mysqld,
        }
    }
}

/// Creates the node's directory, its my.cnf and its private tmpdir (a
/// private one because concurrent servers sharing /tmp collide on temporary
/// table names, seen as "Unknown table 'mysql.tmp_user_sys'" from parallel
/// mariadb-install-db runs).
fn write_node_files(
    cfg: &NodeConfig,
    params: &CnfParams<'_>,
    run_as: Option<&ServerUser>,
) -> Result<()> {
    let tmp = cfg.dir.join("tmp");
    std::fs::create_dir_all(&tmp)
        .map_err(|e| Error::io(format!("creating {}", tmp.display()), e))?;
    if let Some(ca) = params.tls_ca {
        crate::tls::issue_for(ca, cfg)?;
    }
    let cnf = config::render(cfg, params);
    std::fs::write(&cfg.defaults_file, cnf)
        .map_err(|e| Error::io(format!("writing {}", cfg.defaults_file.display()), e))?;
    if let Some(u) = run_as {
        user::chown_tree(&tmp, u)?;
    }
    Ok(())
}

/// Creates `dir` if needed; refuses it if a cluster recorded there still runs.
fn prepare_given_dir(dir: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    let dir = dir
        .canonicalize()
        .map_err(|e| Error::io(format!("resolving {}", dir.display()), e))?;
    match Cluster::attach(&dir) {
        Ok(old) => {
            let live = old.running_nodes();
            if !live.is_empty() {
                return Err(Error::AlreadyRunning { dir, nodes: live });
            }
            old.remove_state()?;
        }
        Err(Error::NoCluster { .. }) => {}
        Err(e) => return Err(e),
    }
    Ok(dir)
}

/// The provider path the servers load: the original if the server user can
/// read it, else a copy in `<base>/provider/`.
fn provider_for(src: &Path, base: &Path, run_as: Option<&ServerUser>) -> Result<PathBuf> {
    let Some(u) = run_as else {
        return Ok(src.to_path_buf());
    };
    if user::readable_by(src, u) {
        return Ok(src.to_path_buf());
    }
    let dir = base.join("provider");
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    let dst = dir.join(src.file_name().unwrap_or_else(|| "provider.so".as_ref()));
    std::fs::copy(src, &dst)
        .map_err(|e| Error::io(format!("copying {} to {}", src.display(), dst.display()), e))?;
    user::chown_tree(&dir, u)?;
    Ok(dst)
}

/// Initialises every new datadir: mariadb-install-db runs once (it is
/// fsync-bound and takes seconds), the other nodes get a copy.
fn init_datadirs(configs: &[NodeConfig], run_as: Option<&ServerUser>) -> Result<()> {
    // Datadirs of an earlier cluster in this directory are reused as they are.
    let fresh: Vec<&NodeConfig> = configs
        .iter()
        .filter(|c| !c.datadir.join("mysql").is_dir())
        .collect();
    let Some((first, rest)) = fresh.split_first() else {
        return Ok(());
    };
    let mut cmd = Command::new("mariadb-install-db");
    cmd.arg("--no-defaults")
        .arg(format!("--datadir={}", first.datadir.display()))
        .arg(format!("--tmpdir={}", first.dir.join("tmp").display()))
        .args([
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--innodb-log-file-size=48M",
            "--innodb-flush-log-at-trx-commit=0",
        ]);
    if let Some(u) = run_as {
        cmd.arg(format!("--user={}", u.name));
    }
    run_helper(cmd, &format!("initialising the datadir of {}", first.name))?;
    for cfg in rest {
        if cfg.datadir.exists() {
            std::fs::remove_dir_all(&cfg.datadir).map_err(|e| {
                Error::io(format!("clearing half-made {}", cfg.datadir.display()), e)
            })?;
        }
        let mut cp = Command::new("cp");
        cp.arg("-a").arg(&first.datadir).arg(&cfg.datadir);
        run_helper(cp, &format!("copying the new datadir for {}", cfg.name))?;
    }
    Ok(())
}

fn run_helper(mut cmd: Command, what: &str) -> Result<()> {
    let shown = format!("{cmd:?}").replace('"', "");
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::io(format!("{what}: cannot run `{shown}`"), e))?;
    if out.status.success() {
        return Ok(());
    }
    Err(Error::Command {
        what: what.to_string(),
        command: shown,
        status: out.status.code(),
        output: format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    })
}

/// Running (or runnable) nodes, owned by this process or adopted.
#[derive(Debug)]
pub struct Cluster {
    name: String,
    provider_label: String,
    provider_path: PathBuf,
    base: PathBuf,
    temp: Option<TempDir>,
    keep: bool,
    owned: bool,
    run_as: Option<String>,
    nodes: Vec<Node>,
    ports: Vec<NodePorts>,
    verbose: bool,
    /// Settings for [`Cluster::add_node`]; `None` for an attached cluster.
    template: Option<NodeTemplate>,
}

impl Cluster {
    /// Shorthand for [`ClusterSpec::new`].
    pub fn builder(nodes: usize) -> ClusterSpec {
        ClusterSpec::new(nodes)
    }

    /// Starts the nodes that are not running: node1 with
    /// `--wsrep-new-cluster` (unless it already runs), then the TCP user,
    /// then the others one at a time, each waited for until Synced.
    pub fn start_all(&mut self) -> Result<()> {
        let t0 = Instant::now();
        if !self.nodes[0].is_running() {
            self.nodes[0].start_with_args(&["--wsrep-new-cluster"])?;
            self.nodes[0].sql(&format!(
                "CREATE USER IF NOT EXISTS '{TCP_USER}'@'%' IDENTIFIED BY '{TCP_PASSWORD}'; \
                 GRANT ALL PRIVILEGES ON *.* TO '{TCP_USER}'@'%' WITH GRANT OPTION"
            ))?;
        }
        for node in self.nodes.iter_mut().skip(1) {
            if !node.is_running() {
                node.start()?;
            }
        }
        if self.verbose {
            eprintln!(
                "lockstep-testkit: cluster `{}` of {} node(s) up in {:.1} s",
                self.name,
                self.nodes.len(),
                t0.elapsed().as_secs_f64()
            );
        }
        Ok(())
    }

    /// Prepares one more node that joins the running cluster by state
    /// transfer (SST with the cluster's method, rsync by default): fresh
    /// ports, a my.cnf with the same settings as the others whose
    /// `gcomm://` address lists every node, and an *empty* datadir that the
    /// donor's SST fills. Starts nothing: returns the new node's index, for
    /// `cluster.node_mut(i).start()` (waits until Synced) or `.spawn(&[])`.
    /// The existing nodes' my.cnf files are left as they are: a joiner
    /// only needs to reach one member. Not available on an attached cluster.
    pub fn add_node(&mut self) -> Result<usize> {
        self.add_node_at(Place::default())
    }

    /// [`Cluster::add_node`] at `place` (a network namespace of its own,
    /// as the cluster's other nodes have).
    pub fn add_node_at(&mut self, place: Place) -> Result<usize> {
        let Some(template) = &self.template else {
            return Err(Error::config(
                "cannot add a node to an attached cluster (its settings are not recorded); \
                 add nodes from the process that built it",
            ));
        };
        let number = self.nodes.len() + 1;
        let ports = ports::allocate(1)?;
        let mut cfg = NodeConfig::new(&self.base, number, ports[0])?;
        cfg.place = place;
        self.ports.extend_from_slice(&ports);
        if cfg.dir.exists() {
            return Err(Error::config(format!(
                "{} already exists; a joining node must start from an empty datadir",
                cfg.dir.display()
            )));
        }
        let mut all: Vec<NodeConfig> = self.nodes.iter().map(|n| n.config().clone()).collect();
        all.push(cfg.clone());
        let address = config::cluster_address(&all);
        let run_as = user::server_user()?;
        let params = template.params(
            &self.name,
            &self.provider_path,
            &address,
            run_as.as_ref().map(|u| u.name.as_str()),
        );
        write_node_files(&cfg, &params, run_as.as_ref())?;
        std::fs::create_dir_all(&cfg.datadir)
            .map_err(|e| Error::io(format!("creating {}", cfg.datadir.display()), e))?;
        if let Some(u) = &run_as {
            user::chown_tree(&cfg.dir, u)?;
        }
        let mut node = Node::new(cfg, true, template.detach_processes, template.timeouts);
        node.set_verbose(self.verbose);
        if self.verbose {
            eprintln!(
                "lockstep-testkit: prepared {} (port {}) to join `{}` by {} SST",
                node.name(),
                node.port(),
                self.name,
                template.sst_method
            );
        }
        self.nodes.push(node);
        Ok(self.nodes.len() - 1)
    }

    /// Node `i`, 0-based: `node(0)` is `node1`, the bootstrap node.
    /// Panics if `i` is out of range.
    pub fn node(&self, i: usize) -> &Node {
        &self.nodes[i]
    }
    pub fn node_mut(&mut self, i: usize) -> &mut Node {
        &mut self.nodes[i]
    }
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }
    pub fn nodes_mut(&mut self) -> &mut [Node] {
        &mut self.nodes
    }
    pub fn len(&self) -> usize {
        self.nodes.len()
    }
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn base_dir(&self) -> &Path {
        &self.base
    }
    /// The library the servers load (may be a copy in `<base>/provider/`).
    pub fn provider_path(&self) -> &Path {
        &self.provider_path
    }
    pub fn provider_label(&self) -> &str {
        &self.provider_label
    }
    /// The account servers run as, `None` when they run as the caller.
    pub fn run_as(&self) -> Option<&str> {
        self.run_as.as_deref()
    }

    /// Names of nodes whose process is alive.
    pub fn running_nodes(&self) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|n| n.is_running())
            .map(|n| n.name().to_string())
            .collect()
    }

    /// Waits until every running node reports `wsrep_cluster_size = size`.
    pub fn wait_for_cluster_size(&self, size: usize, timeout: Duration) -> Result<()> {
        let want = size.to_string();
        for n in self.nodes.iter().filter(|n| n.is_running()) {
            n.wait_for_status("wsrep_cluster_size", &want, timeout)?;
        }
        Ok(())
    }

    /// Graceful stop of every node, last node first. Tries all nodes and
    /// returns the first error.
    pub fn stop_all(&mut self) -> Result<()> {
        let mut first = None;
        for node in self.nodes.iter_mut().rev() {
            if let Err(e) = node.stop() {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// SIGKILL to every node.
    pub fn kill_all(&mut self) -> Result<()> {
        let mut first = None;
        for node in &mut self.nodes {
            if let Err(e) = node.kill() {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// A crash of `nodes` together: SIGKILL to each of them first, then
    /// reaps them, so that none of them notices another going before it
    /// dies itself ([`Cluster::kill_all`] kills one after the other). A
    /// node that is not running is an error.
    pub fn kill_at_once(&mut self, nodes: &[usize]) -> Result<()> {
        for &i in nodes {
            let node = &self.nodes[i];
            let pid = node
                .pid()
                .ok_or_else(|| Error::config(format!("{} is not running", node.name())))?;
            process::signal(pid, nix::sys::signal::Signal::SIGKILL)
                .map_err(|e| Error::io(format!("SIGKILL to {} (pid {pid})", node.name()), e))?;
        }
        for &i in nodes {
            self.nodes[i].kill()?;
        }
        Ok(())
    }

    /// Keeps the cluster directory after drop (servers are still stopped).
    pub fn keep(&mut self) -> &Path {
        self.keep = true;
        &self.base
    }

    /// A snapshot for the state file.
    pub fn state(&self) -> ClusterState {
        ClusterState::new(
            self.name.clone(),
            self.provider_label.clone(),
            self.provider_path.clone(),
            self.run_as.clone(),
            self.nodes
                .iter()
                .map(|n| NodeState::from_config(n.config(), n.pid()))
                .collect(),
        )
    }

    /// Writes `<base>/cluster.json`.
    pub fn write_state(&self) -> Result<PathBuf> {
        self.state().save(&self.base)
    }

    /// Removes `<base>/cluster.json` (absent is fine).
    pub fn remove_state(&self) -> Result<()> {
        let path = state_path(&self.base);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io(format!("removing {}", path.display()), e)),
        }
    }

    /// Leaves the servers running and the directory in place after this
    /// value is dropped; writes the state file and returns its path.
    /// Build with [`ClusterSpec::detach_processes`] so that the servers
    /// also survive this process's terminal session.
    pub fn detach(mut self) -> Result<PathBuf> {
        let path = self.write_state()?;
        self.owned = false;
        self.keep = true;
        for n in &mut self.nodes {
            n.disown();
        }
        Ok(path)
    }

    /// Adopts the cluster recorded in `dir/cluster.json`. Its servers are
    /// not stopped on drop; use [`Cluster::stop_all`] for that.
    pub fn attach(dir: &Path) -> Result<Cluster> {
        let state = ClusterState::load(dir)?;
        let nodes = state
            .nodes
            .iter()
            .map(|ns| {
                let cfg = ns.to_config();
                let pid = ns
                    .pid
                    .filter(|&p| process::is_node_process(p, &cfg))
                    .or_else(|| process::pid_from_file(&cfg));
                let mut node = Node::new(cfg, false, true, Timeouts::default());
                node.adopt_pid(pid);
                node
            })
            .collect();
        Ok(Cluster {
            name: state.cluster_name,
            provider_label: state.provider_label,
            provider_path: state.provider_path,
            base: dir.to_path_buf(),
            temp: None,
            keep: true,
            owned: false,
            run_as: state.run_as,
            nodes,
            ports: Vec::new(),
            verbose: false,
            template: None,
        })
    }

    /// Deletes what the testkit created in the directory (node dirs, the
    /// provider copy, the state file), and the directory if then empty.
    /// Refuses while any node runs.
    pub fn purge(&self) -> Result<()> {
        let live = self.running_nodes();
        if !live.is_empty() {
            return Err(Error::AlreadyRunning {
                dir: self.base.clone(),
                nodes: live,
            });
        }
        let mut paths: Vec<PathBuf> = self.nodes.iter().map(|n| n.dir()).collect();
        paths.push(self.base.join("provider"));
        paths.push(crate::tls::ca_dir(&self.base));
        for p in paths.iter().filter(|p| p.exists()) {
            std::fs::remove_dir_all(p)
                .map_err(|e| Error::io(format!("removing {}", p.display()), e))?;
        }
        self.remove_state()?;
        let _ = std::fs::remove_dir(&self.base); // only if empty
        Ok(())
    }
}

/// Header line of every my.cnf the testkit writes; marks its node dirs.
pub(crate) const CNF_MARK: &str = "# Generated by lockstep-testkit";

impl Cluster {
    /// Deletes node directories the testkit made in `dir` when no state
    /// file is left (after `lockstep down` without `--purge`, or a failed
    /// start). Refuses if a pid file names a live server. Returns what was
    /// removed.
    pub fn purge_leftovers(dir: &Path) -> Result<Vec<PathBuf>> {
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io(format!("listing {}", dir.display()), e)),
        };
        let mut doomed = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let cnf = std::fs::read_to_string(path.join("my.cnf")).unwrap_or_default();
            if cnf.starts_with(CNF_MARK) {
                let pid = std::fs::read_to_string(path.join("mysqld.pid")).unwrap_or_default();
                if let Ok(pid) = pid.trim().parse::<u32>() {
                    if process::alive(pid) {
                        return Err(Error::AlreadyRunning {
                            dir: dir.to_path_buf(),
                            nodes: vec![format!("{} (pid {pid})", path.display())],
                        });
                    }
                }
                doomed.push(path);
            } else if path.file_name().is_some_and(|n| n == "provider") {
                doomed.push(path);
            }
        }
        for p in &doomed {
            std::fs::remove_dir_all(p)
                .map_err(|e| Error::io(format!("removing {}", p.display()), e))?;
        }
        let _ = std::fs::remove_dir(dir); // only if empty
        Ok(doomed)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.owned {
            // Signal all first so the nodes shut down in parallel; each
            // Node's own drop then waits (and kills after 30 s).
            for n in &self.nodes {
                let _ = n.terminate();
            }
            for n in &mut self.nodes {
                if !n.wait_exit(Duration::from_secs(30)) {
                    let _ = n.kill();
                }
            }
            ports::release(&self.ports);
        }
        let keep = self.keep || std::env::var_os("LOCKSTEP_KEEP").is_some_and(|v| v != "0");
        if let Some(temp) = self.temp.take() {
            if keep {
                let path = temp.keep();
                eprintln!("lockstep-testkit: kept cluster files in {}", path.display());
            } else if std::thread::panicking() {
                eprintln!(
                    "lockstep-testkit: removing {} (set LOCKSTEP_KEEP=1 to keep logs and datadirs)",
                    self.base.display()
                );
            }
        }
    }
}
