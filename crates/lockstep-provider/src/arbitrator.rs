//! The arbitrator (`lockstep arbitrator`, Galera's `garbd`): a member
//! with no database. It joins through a running member, votes in the
//! group's Raft, so two data nodes and an arbitrator survive the loss of
//! either data node, and drops what it receives once it is ordered.
//!
//! It is the provider itself, run without a server (`Server::discarding`):
//! the same group channel, quorum rules, TLS and options as a data node.
//! What differs (`Provider::arbitrator`): it joins without a state
//! transfer and says what it is (`Action::Arbitrator`), so it is never
//! chosen as donor and has no say in consistency votes; it keeps no
//! writeset cache, no `grastate.dat` and no saved view; it never asks for
//! flow control; its Raft priority keeps it from leading (ADR 0018).

use crate::grastate::Stateless;
use crate::log::{info, Level};
use crate::provider::{parse_options, InitConfig, InitError, Provider};
use crate::server::{Server, ThreadCtx};
use crate::stats::StatValue;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use wsrep_abi::{status, Status};

/// Options an arbitrator starts with, before the user's: no saved view to
/// recover from (it has no state to recover), and no flow control asked
/// for (it applies nothing; garbd sets the same).
const ARBITRATOR_DEFAULTS: &str = "pc.recovery=no;gcs.fc_limit=9999999";

/// What `lockstep arbitrator` (or `garbd`'s flags) says.
#[derive(Debug, Clone)]
pub struct ArbitratorConfig {
    /// Shown as the member's name (`--name`).
    pub name: String,
    /// The cluster's name (`--group`, `wsrep_cluster_name`).
    pub cluster_name: String,
    /// `gcomm://host:port,...` of members to join through (`--address`).
    pub address: String,
    /// Provider options (`--options`): `gmcast.listen_addr`, `pc.weight`,
    /// `socket.ssl_*`, `evs.*`, ...
    pub options: String,
    /// Where the group channel listens and what peers dial, `host:port`
    /// (from `gmcast.listen_addr`; the host part is what peers see).
    pub node_address: String,
    /// Its working directory (`--workdir`): only the receive spool may go
    /// there, if writesets ever queue up.
    pub work_dir: PathBuf,
}

/// A running arbitrator.
pub struct Arbitrator {
    provider: Arc<Provider>,
    applier: Option<JoinHandle<Status>>,
}

impl Arbitrator {
    /// Joins the cluster; returns once connected (the first view may come
    /// later). Lines are logged to `sink`.
    pub fn start(cfg: ArbitratorConfig, sink: fn(Level, &str)) -> Result<Arbitrator, String> {
        crate::log::install_sink(sink);
        let init = InitConfig {
            node_name: cfg.name.clone(),
            node_address: cfg.node_address.clone(),
            node_incoming: String::new(),
            data_dir: cfg.work_dir.clone(),
            options: format!("{ARBITRATOR_DEFAULTS};{}", cfg.options),
            // What MariaDB 10.11 passes.
            proto_ver: 4,
            state_id: None,
            server: Server::discarding(),
            arbitrator: true,
        };
        let options = parse_options(&init).map_err(|e: InitError| e.to_string())?;
        let provider =
            Provider::with_store(init, options, Box::new(Stateless)).map_err(|e| e.to_string())?;
        let provider = Arc::new(provider);
        let rc = provider.connect(&cfg.cluster_name, &cfg.address, "", false);
        if rc != status::OK {
            provider.shutdown();
            return Err(format!(
                "cannot join cluster '{}' at '{}' (status {rc}); the lines above say why",
                cfg.cluster_name, cfg.address
            ));
        }
        info!(
            "arbitrator '{}' connecting to cluster '{}' at {}",
            cfg.name, cfg.cluster_name, cfg.address
        );
        let p = provider.clone();
        // One applier: it only passes events through their gates.
        let applier = std::thread::Builder::new()
            .name("lockstep-arbiter".into())
            .spawn(move || p.recv(ThreadCtx(std::ptr::null_mut())))
            .map_err(|e| format!("cannot start the applier thread: {e}"))?;
        Ok(Arbitrator {
            provider,
            applier: Some(applier),
        })
    }

    /// The `wsrep_%` figures (without the prefix) as a data node reports
    /// them: cluster status and size, state, last committed seqno, ...
    pub fn status(&self) -> Vec<(&'static str, String)> {
        self.provider
            .cluster_stats()
            .into_iter()
            .chain(self.provider.stats())
            .map(|(name, v)| {
                let text = match v {
                    StatValue::Int(i) => i.to_string(),
                    StatValue::Double(d) => format!("{d:.6}"),
                    StatValue::Str(s) => s,
                };
                (name, text)
            })
            .collect()
    }

    /// The session's end, if it ended (the applier returned: the node was
    /// found inconsistent, or the provider failed): its status.
    pub fn ended(&mut self) -> Option<Status> {
        if !self.applier.as_ref().is_some_and(JoinHandle::is_finished) {
            return None;
        }
        let handle = self.applier.take()?;
        Some(handle.join().unwrap_or(status::FATAL))
    }

    /// Leaves the cluster gracefully (bounded by the provider's leave
    /// timeout) and stops.
    pub fn stop(mut self) {
        self.provider.disconnect();
        if let Some(h) = self.applier.take() {
            let _ = h.join();
        }
        self.provider.shutdown();
    }
}
