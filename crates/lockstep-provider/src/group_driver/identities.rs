//! Members bound to their certificates (ADR 0014, issue 34 item 5): the
//! driver's side. What each connection presented comes from the
//! transport (`Inbound::PeerUp`); the binding is ordered in the log
//! (`Action::Bind`, or the joiner's configuration change), so every
//! member holds the same table, and each hands it to its transport, which
//! refuses a hello whose Raft id is bound to another certificate.

use crate::log::info;
use lockstep_core::group::action::{CertFingerprint, BINDING_VERSION};
use lockstep_core::group::{Action, Group};
use lockstep_net::identity::short;
use lockstep_net::secure::PeerSecurity;
use lockstep_net::transport::Transport;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A member's own binding is proposed again after this long while the
/// group's table does not show it.
const BIND_RETRY: Duration = Duration::from_secs(1);

pub(super) struct Identities {
    security: Arc<PeerSecurity>,
    /// What each connected peer presented (TLS), by Raft id. Bounded by
    /// the connections: a peer's entry leaves with its last connection.
    presented: HashMap<u64, CertFingerprint>,
    /// The table last handed to the transport.
    pushed: BTreeMap<u64, CertFingerprint>,
    /// When this node last proposed its own binding.
    told: Option<Instant>,
}

impl Identities {
    pub(super) fn new(security: Arc<PeerSecurity>) -> Identities {
        Identities {
            security,
            presented: HashMap::new(),
            pushed: BTreeMap::new(),
            told: None,
        }
    }

    pub(super) fn peer_up(&mut self, raft_id: u64, cert: Option<CertFingerprint>) {
        match cert {
            Some(fp) => self.presented.insert(raft_id, fp),
            None => self.presented.remove(&raft_id),
        };
    }

    pub(super) fn peer_down(&mut self, raft_id: u64) {
        self.presented.remove(&raft_id);
    }

    /// The certificate a joiner's request came with, to bind it in its
    /// configuration change.
    pub(super) fn presented_by(&self, raft_id: u64) -> Option<CertFingerprint> {
        self.presented.get(&raft_id).copied()
    }

    /// Each round: binds this node to its own certificate where the
    /// group's table does not (it founded the cluster or joined before
    /// the cluster ran at the binding version, or `socket.ssl_reload`
    /// gave it another certificate), and hands a changed table to the
    /// transport. Returns the number of bound members when it changed.
    pub(super) fn round(&mut self, group: &mut Group, transport: &Transport) -> Option<usize> {
        let table = group.sequencer().bindings();
        let changed = (*table != self.pushed).then(|| {
            self.pushed = table.clone();
            transport.bind_identities(self.pushed.iter().map(|(k, v)| (*k, *v)).collect());
            self.pushed.len()
        });
        self.bind_self(group);
        changed
    }

    fn bind_self(&mut self, group: &mut Group) {
        let me = group.me().raft_id;
        let Some(own) = self.security.own_fingerprint() else {
            return;
        };
        let bound = self.pushed.get(&me) == Some(&own);
        let due = self.told.is_none_or(|t| t.elapsed() >= BIND_RETRY);
        if bound
            || !due
            || !group.is_member()
            || group.sequencer().cluster_version() < BINDING_VERSION
        {
            return;
        }
        self.told = Some(Instant::now());
        match self.pushed.get(&me) {
            Some(old) => info!(
                "binding this node to its new certificate {} (was {}): open connections keep \
                 the old one, new ones need the new one",
                short(&own),
                short(old)
            ),
            None => info!("binding this node to its certificate {}", short(&own)),
        }
        group.propose(Action::Bind {
            raft_id: me,
            fingerprint: own,
        });
    }
}
