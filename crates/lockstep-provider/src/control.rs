//! Causal reads, pause/resume and desync/resync (contract §2.20-2.21,
//! §2.30-2.31, §4.10-4.11).

use crate::event::Event;
use crate::log::{info, warn};
use crate::provider::{Provider, Until, IN_ORDER};
use crate::read_asks::Join;
use crate::shared::StateGuard;
use crate::state::{Conn, Resolution};
use lockstep_core::group::peer::PeerMsg;
use lockstep_core::group::Action;
use std::time::{Duration, Instant};
use wsrep_abi::{status, Gtid, Status};

/// A follower's direct ask of the leader (`ask_leader`) unanswered this
/// long is given up (a lost message, a leader gone) for Raft's ReadIndex.
const ASK_WAIT: Duration = Duration::from_millis(100);

/// `tout` may be INT_MAX seconds (contract P25): cap instead of overflowing.
const MAX_WAIT: Duration = Duration::from_secs(365 * 24 * 3600);

impl Provider {
    pub fn last_committed_id(&self) -> Gtid {
        let g = self.lock();
        Gtid {
            uuid: g.history,
            seqno: g.last_committed(),
        }
    }

    /// `upto = None`: a causal read; otherwise wait for that GTID.
    pub fn sync_wait(&self, upto: Option<Gtid>, tout: i32) -> (Status, Gtid) {
        let timeout = if tout < 0 {
            self.tunables().causal_read_timeout
        } else {
            Duration::from_secs(tout as u64).min(MAX_WAIT)
        };
        let deadline = Instant::now() + timeout;
        let mut g = self.lock();
        let target = match upto {
            Some(gtid) => {
                if gtid.uuid != g.history {
                    return (status::TRX_MISSING, Gtid::UNDEFINED);
                }
                gtid.seqno
            }
            None => {
                if !g.accepts_writes() {
                    return (status::TRX_FAIL, Gtid::UNDEFINED);
                }
                match self.causal_fence(g, deadline) {
                    (ng, Some(seqno)) => {
                        g = ng;
                        seqno
                    }
                    (_, None) => return (status::TRX_FAIL, Gtid::UNDEFINED),
                }
            }
        };
        let (mut g, reached) = self.wait_until(g, Until::Deadline(deadline), |s| {
            s.last_committed() >= target || s.conn == Conn::Closed
        });
        if !reached || g.last_committed() < target {
            return (status::TRX_FAIL, Gtid::UNDEFINED);
        }
        if upto.is_none() {
            g.counters.causal_reads += 1;
        }
        let at = Gtid {
            uuid: g.history,
            seqno: g.last_committed(),
        };
        (status::OK, at)
    }

    /// The seqno a causal read must wait for: everything committed
    /// cluster-wide before now is ordered at or below it (ADR 0016). The
    /// leader's read index tells (its last log index, ADR 0017); the
    /// cheapest way to learn it first:
    /// - on the leader under its lease, here and now;
    /// - on a follower, by asking the leader directly (one round trip
    ///   between the connection threads);
    /// - otherwise (or if the leader changes before this node has applied
    ///   the log up to it) through Raft's ReadIndex in a round;
    /// - but while a proposal of this node is not ordered yet, through the
    ///   log behind it (`barrier_fence`).
    fn causal_fence<'a>(
        &'a self,
        mut g: StateGuard<'a>,
        deadline: Instant,
    ) -> (StateGuard<'a>, Option<i64>) {
        // Keeps this node's lease renewed (the leader's, or a follower's
        // grants: ADR 0022) while causal reads come.
        g.reads.mark_asked();
        if !g.own_proposals_ordered() {
            return self.barrier_fence(g, deadline);
        }
        let leader = g.reads.leader();
        let (mut g, index) = match g.reads.lease_index(crate::state::mono_ns()) {
            Some(index) => {
                g.counters.causal_lease_reads += 1;
                (g, Some(index))
            }
            None => self.ask_leader(g, deadline),
        };
        if let Some(index) = index {
            // A new leader may cut the old one's unreplicated tail, and
            // the index might then not come for a long while.
            let (ng, reached) = self.wait_until(g, Until::Deadline(deadline), |s| {
                s.reads.applied_index() >= index
                    || s.conn == Conn::Closed
                    || s.reads.leader() != leader
            });
            g = ng;
            if reached && g.reads.applied_index() >= index {
                let seqno = g.last_ordered;
                return (g, Some(seqno));
            }
            if !reached || g.conn == Conn::Closed {
                return (g, None);
            }
        }
        let id = g.read_fence();
        self.await_fence(g, id, deadline)
    }

    /// The fence as an entry in the log (`Action::Barrier`): ordered after
    /// every proposal this node sent before it.
    fn barrier_fence<'a>(
        &'a self,
        mut g: StateGuard<'a>,
        deadline: Instant,
    ) -> (StateGuard<'a>, Option<i64>) {
        let (raft_id, next) = (g.raft_id(), g.proposals.peek_id());
        let id = g.propose(Action::Barrier { raft_id, id: next }, true);
        self.await_fence(g, id, deadline)
    }

    /// Waits for the fence of proposal (or read) `id`, if it was sent.
    fn await_fence<'a>(
        &'a self,
        g: StateGuard<'a>,
        id: Option<u64>,
        deadline: Instant,
    ) -> (StateGuard<'a>, Option<i64>) {
        let Some(id) = id else {
            return (g, None);
        };
        let (mut g, _) = self.wait_until(g, Until::Deadline(deadline), |s| {
            !s.proposals.is_pending(id)
        });
        match g.proposals.take(id) {
            Some(Resolution::Fence { seqno }) => (g, Some(seqno)),
            _ => (g, None),
        }
    }

    /// Asks the leader for its commit index (`PeerMsg::ReadAsk`), from a
    /// follower; `None` when there is no leader to ask, it holds no lease,
    /// or no answer came within `ASK_WAIT`.
    fn ask_leader<'a>(
        &'a self,
        mut g: StateGuard<'a>,
        deadline: Instant,
    ) -> (StateGuard<'a>, Option<u64>) {
        let leader = g.reads.leader();
        let peers = match &g.peers {
            Some(p) if leader != 0 && leader != g.raft_id() => p.clone(),
            _ => return (g, None),
        };
        let id = g.proposals.open(true);
        let now = Instant::now();
        if let Join::Send { n } = g.reads.asks().join(id, leader, now, ASK_WAIT) {
            drop(g);
            // Sent without the state lock: the connection's queue has its
            // own. Unsent, the reads of this ask give up after ASK_WAIT.
            let _ = PeerMsg::ReadAsk { n }
                .to_frame()
                .is_ok_and(|frame| peers.send_control(leader, frame));
            g = self.lock();
        }
        // Woken by the answer's connection thread alone (`CausalReads::answered`);
        // a close or a lost answer leaves it to the deadline.
        let wait = deadline.min(now + ASK_WAIT);
        while g.proposals.is_pending(id) {
            let now = Instant::now();
            if now >= wait {
                break;
            }
            drop(g);
            std::thread::park_timeout(wait - now);
            g = self.lock();
        }
        g.reads.asks().leave(id);
        match g.proposals.take(id) {
            Some(Resolution::ReadIndex { index }) => (g, Some(index)),
            _ => (g, None),
        }
    }

    /// Stops ordering, drains, and returns the position (or -1).
    pub fn pause(&self) -> i64 {
        let mut g = self.lock();
        if g.conn != Conn::Open {
            return -1;
        }
        if g.paused_at.is_some() {
            warn!("pause requested while already paused");
        }
        // Seqnos already ordered drain; later ones wait for resume().
        let upto = g.last_ordered;
        g.paused_at = Some(upto);
        let (g, _) = self.wait_until(g, Until::Progress(IN_ORDER), |s| {
            s.last_committed() >= upto || s.conn == Conn::Closed
        });
        let seqno = g.last_committed();
        let paused_at = g.saved_state(seqno);
        drop(g);
        self.save_state(paused_at);
        info!("provider paused at {}:{seqno}", paused_at.uuid);
        seqno
    }

    pub fn resume(&self) -> Status {
        let mut g = self.lock();
        if g.paused_at.is_none() {
            info!("resume requested while not paused; ignored");
            return status::OK;
        }
        g.paused_at = None;
        let running = g.running_state();
        drop(g);
        self.save_state(running);
        self.notify();
        info!("provider resumed");
        status::OK
    }

    pub fn desync(&self) -> Status {
        let mut g = self.lock();
        if g.conn != Conn::Open {
            return status::TRX_FAIL;
        }
        match g.local.desync() {
            Ok(()) => status::OK,
            Err(state) => {
                warn!("cannot desync in state {}", state.comment());
                status::TRX_FAIL
            }
        }
    }

    pub fn resync(&self) -> Status {
        let mut g = self.lock();
        match g.local.resync() {
            Ok(()) => {
                if g.local.state() == lockstep_core::group::MemberState::Joined {
                    // synced_cb must run on an applier thread.
                    g.enqueue(Event::Synced);
                    drop(g);
                    self.notify();
                }
                status::OK
            }
            Err(_) => {
                // Galera accepts it too: a rejoin (new membership) drops
                // the desyncs, and the server's wsrep_desync=0 follows.
                info!("resync without a matching desync: nothing to do");
                status::OK
            }
        }
    }
}
