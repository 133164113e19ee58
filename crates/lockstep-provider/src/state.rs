//! The provider's mutable state, guarded by one mutex.
//!
//! One lock and one condition variable keep the ordering logic easy to
//! reason about: every wait re-checks its condition under the lock, and
//! every change that could release a waiter notifies all. Nothing holds
//! this lock while calling into the server (contract P27).

use crate::server::View;
use crate::trx::TrxRecord;
use lockstep_core::certification::Certifier;
use lockstep_core::group::LocalState;
use lockstep_core::ordering::Watermark;
use lockstep_core::saved_state::SavedState;
use std::collections::{HashMap, VecDeque};
use wsrep_abi::Uuid;

/// Where the node is in its connection life cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conn {
    /// Not connected (before `connect`, after the final view).
    Closed,
    Open,
    /// `disconnect` was called; the final view is on its way.
    Closing,
}

/// Ordered work for the applier threads, processed inside `recv()`.
pub enum Event {
    Connected(View),
    /// A primary configuration with its seqno (`state_id.seqno`).
    PrimaryView(View),
    /// Time to tell the server it is synced.
    Synced,
    /// The last event of a session: the empty final view.
    Final,
}

/// Counters behind the `wsrep_%` status variables.
#[derive(Debug, Default, Clone)]
pub struct Counters {
    pub replicated: i64,
    pub replicated_bytes: i64,
    pub repl_keys: i64,
    pub repl_keys_bytes: i64,
    pub repl_data_bytes: i64,
    pub local_commits: i64,
    pub local_cert_failures: i64,
    pub local_replays: i64,
    pub causal_reads: i64,
}

pub struct Inner {
    pub conn: Conn,
    /// The history UUID; nil until the first view.
    pub history: Uuid,
    /// This node's member id for the current session.
    pub member_id: Uuid,
    pub local: LocalState,
    /// The current primary view, if any.
    pub view: Option<View>,
    /// Highest seqno handed out in the total order.
    pub last_ordered: i64,
    /// Seqnos fully finished: `last_committed` (contract §6.6).
    pub finished: Watermark,
    /// Seqnos that left commit order.
    pub commit: Watermark,
    pub certifier: Certifier,
    pub events: VecDeque<Event>,
    /// Threads currently inside `recv()`.
    pub appliers: usize,
    pub final_delivered: bool,
    pub paused: bool,
    /// Local transactions known to the provider, by trx id.
    pub trxs: HashMap<u64, TrxRecord>,
    /// Local TOI in progress, by connection id.
    pub toi: HashMap<u64, i64>,
    pub counters: Counters,
}

impl Inner {
    pub fn new(history: Uuid, last_committed: i64) -> Inner {
        Inner {
            conn: Conn::Closed,
            history,
            member_id: Uuid::NIL,
            local: LocalState::default(),
            view: None,
            last_ordered: last_committed,
            finished: Watermark::new(last_committed),
            commit: Watermark::new(last_committed),
            certifier: Certifier::new(last_committed),
            events: VecDeque::new(),
            appliers: 0,
            final_delivered: false,
            paused: false,
            trxs: HashMap::new(),
            toi: HashMap::new(),
            counters: Counters::default(),
        }
    }

    /// `last_committed` as defined by the contract: everything finished.
    pub fn last_committed(&self) -> i64 {
        self.finished.level()
    }

    /// The grastate.dat record for this history at `seqno`: safe to
    /// bootstrap only as the sole member (or with no view left).
    pub fn saved_state(&self, seqno: i64) -> SavedState {
        SavedState {
            uuid: self.history,
            seqno,
            safe_to_bootstrap: self.view.as_ref().is_none_or(|v| v.members.len() == 1),
        }
    }

    /// What grastate.dat says while the node runs: the seqno is unknown.
    pub fn running_state(&self) -> SavedState {
        self.saved_state(-1)
    }

    /// Whether local writes may be ordered now (primary, state received).
    pub fn accepts_writes(&self) -> bool {
        use lockstep_core::group::MemberState::*;
        self.conn == Conn::Open && matches!(self.local.state(), Joined | Synced | Donor)
    }
}
