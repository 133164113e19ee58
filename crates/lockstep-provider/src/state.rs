//! The provider's mutable state, guarded by one mutex.
//!
//! One lock and one condition variable keep the ordering logic easy to
//! reason about: every wait re-checks its condition under the lock, and
//! every change that could release a waiter notifies all. Nothing holds
//! this lock while calling into the server (contract P27).

use crate::appliers::Appliers;
use crate::apply_queue::ApplyQueue;
use crate::cache_feed::CacheFeed;
use crate::causal_reads::CausalReads;
use crate::event::Event;
use crate::flow_control::FlowControl;
use crate::fork_check::ForkCheck;
use crate::local_trxs::LocalTrxs;
use crate::order_gates::OrderGates;
use crate::proposals::Proposals;
pub use crate::proposals::Resolution;
use crate::round_status::RoundStatus;
use crate::server::View;
use lockstep_core::gates::OrderError;
use lockstep_core::group::Action;
use lockstep_core::group::LocalState;
use lockstep_core::saved_state::SavedState;
use lockstep_core::writeset_cache::{membership_digest, CachedKind};
use std::sync::Arc;
use wsrep_abi::Gtid;
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

/// The cache record kind of a wsrep view (`membership_digest`), with its
/// members, so that IST from the cache can show it to a joiner.
pub fn view_kind(v: &View) -> CachedKind {
    use lockstep_core::writeset_cache::{CachedMember, CachedMembers};
    CachedKind::View {
        members: membership_digest(v.conf_id, v.members.iter().map(|m| *m.id.as_bytes())),
        who: Some(Arc::new(CachedMembers {
            conf_id: v.conf_id,
            members: v
                .members
                .iter()
                .map(|m| CachedMember {
                    uuid: *m.id.as_bytes(),
                    name: m.name.clone(),
                    incoming: m.incoming.clone(),
                })
                .collect(),
        })),
    }
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
    /// Causal reads that took their index from this node's own lease,
    /// with no message (leader: ADR 0016; follower: ADR 0022).
    pub causal_lease_reads: i64,
    /// Remote writesets applied, and their bytes.
    pub received: i64,
    pub received_bytes: i64,
}

pub struct Inner {
    pub conn: Conn,
    /// Flow control: the members' levels, this node's, the limits.
    pub flow: FlowControl,
    /// The history UUID; nil until the first view.
    pub history: Uuid,
    /// This node's member id for the current session.
    pub member_id: Uuid,
    pub local: LocalState,
    /// The current primary view, if any.
    pub view: Option<View>,
    /// Highest seqno handed out in the total order.
    pub last_ordered: i64,
    /// Causal reads: the leader's lease, the applied Raft index, the
    /// asks of a follower.
    pub reads: CausalReads,
    pub peers: Option<lockstep_net::transport::PeerSender>,
    /// The commit and apply gates: `last_committed` and commit order.
    pub gates: OrderGates,
    /// What the rounds publish for `SHOW STATUS` alone.
    pub status: RoundStatus,
    /// What the appliers run, in order, with its spool and statistics.
    pub queue: ApplyQueue,
    /// This node's proposals: ids, resolutions, the send queue.
    pub proposals: Proposals,
    /// The applier threads: in `recv()`, in `apply_cb`, isolation, the
    /// final view.
    pub appliers: Appliers,
    /// Local transactions and TOI statements, by trx and connection id.
    pub trxs: LocalTrxs,
    pub counters: Counters,
    /// Latency histograms of the replication stages (ADR 0019).
    pub stages: lockstep_core::metrics::StageHistograms,
    /// Round-trip times to peers (`PeerMsg::Ping`), by Raft id.
    pub peer_rtt: lockstep_core::metrics::PeerRtts,
    /// Each peer's clock rate against this node's (`PeerMsg::ClockPong`,
    /// ADR 0036): while one is off, no lease answers a causal read.
    pub clock_rates: lockstep_core::clocks::ClockRates,
    /// This node's `pc.weight` as the group recorded it, once the voters
    /// it asks for are in force on every member
    /// (`Group::weights_in_force`); `None` meanwhile. Published by the
    /// rounds only while a runtime `pc.weight` change waits for it
    /// (`weight_waiters`), so the rounds skip that work otherwise.
    pub weight_in_force: Option<u32>,
    /// Runtime `pc.weight` changes waiting (one per client thread).
    pub weight_waiters: u32,
    /// Multi-node session: the group's input, this node's Raft id.
    pub group: Option<GroupLink>,
    /// This node's own state transfer as a joiner: the reports, the IST
    /// buffer, the donors it asks for.
    pub joining: crate::joining::Joining,
    /// Announce "synced" to the group once the queue drains.
    pub want_sync: bool,
    /// Transfers this node is donating (`donations.rs`).
    pub donations: crate::donations::Donations,
    /// `pause()` is in effect: seqnos above this wait for `resume()`, and
    /// nothing new is ordered locally.
    pub paused_at: Option<i64>,
    /// This node's place in the group: in a view yet, non-primary, the
    /// members (`membership.rs`).
    pub membership: crate::membership::Membership,
    /// `init_args.proto_ver`, for the views we build.
    pub proto_ver: i32,
    /// The writeset cache and what feeds it.
    pub cache: CacheFeed,
    /// The history of the group's views (`history` is this node's own
    /// state's, which differs until a joiner has installed its state).
    pub group_history: [u8; 16],
    /// This node's own events the group's must match (a fork check).
    pub fork_check: ForkCheck,
    /// This node left the cluster inconsistent (a consistency vote it
    /// lost, an apply that failed here alone, a failed group thread): its
    /// data is not the group's state at any seqno. Until a full state
    /// transfer installs one, it joins as a node without a position and
    /// saves none (`join_position`), and its marker file says so across
    /// restarts (`diverged.rs`).
    pub diverged: crate::diverged::Diverged,
    /// Rejoining after a removal: the server is already connected.
    pub rejoining: bool,
    /// The runtime options change (`Applied::generation`) whose values
    /// the state holds (0: those `init` was given).
    pub settings_taken: u64,
    /// Local commits ahead of a large writeset (`bypass.rs`, ADR 0011).
    pub bypass: crate::bypass::Bypass,
    /// Consistency votes (`vote.rs`): this node's own outcomes, seqnos it
    /// was asked to report on, and the group's outcomes. Bounded there.
    pub votes: crate::votes::Votes,
}

/// How the server's threads reach the group (its input).
pub struct GroupLink {
    pub raft_id: u64,
    pub tx: crate::group_input::InputTx,
    /// Proposals sent on this link (causal reads excluded): compared with
    /// what the rounds took (`Inner::proposals_taken`).
    pub sent: u64,
}

/// Monotonic nanoseconds (any origin): flow-control pause accounting,
/// round trips, and the clock the leases are judged on (ADR 0036): `CLOCK_MONOTONIC`
/// through `clocks::SteadyClock`, which goes on after the clock steps back
/// (a faulty clock source, `libfaketime`) instead of standing still until
/// it catches up. The raw reading counts from a day before the first call,
/// so a step back never clamps it at zero (`Instant::elapsed` saturates).
pub fn mono_ns() -> u64 {
    let base = CLOCK_BASE.get_or_init(|| {
        let now = std::time::Instant::now();
        now.checked_sub(std::time::Duration::from_secs(86_400))
            .unwrap_or(now)
    });
    let raw = base.elapsed().as_nanos() as u64;
    // A leaf lock held for a few instructions: readers on any thread.
    STEADY.lock().unwrap_or_else(|p| p.into_inner()).read(raw)
}

/// Steps back of the monotonic clock that [`mono_ns`] went on past.
pub fn clock_steps_back() -> u64 {
    STEADY
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .steps_back()
}

static CLOCK_BASE: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
static STEADY: std::sync::Mutex<lockstep_core::clocks::SteadyClock> =
    std::sync::Mutex::new(lockstep_core::clocks::SteadyClock::new());

impl crate::server::TakenByCallbacks for Inner {}

impl Inner {
    pub fn new(history: Uuid, last_committed: i64) -> Inner {
        Inner {
            conn: Conn::Closed,
            flow: FlowControl::default(),
            history,
            member_id: Uuid::NIL,
            local: LocalState::default(),
            view: None,
            last_ordered: last_committed,
            gates: OrderGates::new(last_committed),
            status: RoundStatus::default(),
            queue: ApplyQueue::default(),
            reads: CausalReads::default(),
            peers: None,
            appliers: Appliers::default(),
            trxs: LocalTrxs::default(),
            counters: Counters::default(),
            stages: Default::default(),
            peer_rtt: Default::default(),
            clock_rates: Default::default(),
            weight_in_force: None,
            weight_waiters: 0,
            group: None,
            proposals: Proposals::default(),
            want_sync: false,
            donations: Default::default(),
            paused_at: None,
            membership: Default::default(),
            proto_ver: 4,
            joining: crate::joining::Joining::new(Gtid {
                uuid: history,
                seqno: last_committed,
            }),
            cache: CacheFeed::default(),
            group_history: [0; 16],
            fork_check: ForkCheck::default(),
            diverged: Default::default(),
            rejoining: false,
            settings_taken: 0,
            bypass: crate::bypass::Bypass::default(),
            votes: Default::default(),
        }
    }

    /// Keeps an ordered event of the group's in the writeset cache.
    /// `bytes`: a writeset's size (`Writeset::size`, counted once by the
    /// caller), 0 for other events.
    pub fn cache_event(&mut self, seqno: i64, kind: CachedKind, bytes: usize) {
        self.cache.append(self.group_history, seqno, kind, bytes);
    }

    /// Before the storage engine commits `seqno` of the group's history
    /// (ADR 0032): whether its event is in the writeset cache file yet,
    /// and what to wait on if not.
    pub fn cached(&self, seqno: i64) -> crate::cache_writer::Written {
        self.cache.written(self.group_history, seqno)
    }

    /// This node's state is the group's (joined, or founded): from here
    /// on ordered events go to the writeset cache, starting with `view`
    /// (the join view, when the server got it directly) and what is queued
    /// for the appliers (IST events, the join view, events ordered since).
    /// Before that, nothing is cached: a joiner that refuses to join (a
    /// fork, a node ahead) must not take the group's events for its own.
    pub fn cache_catch_up(&mut self, view: Option<&View>) {
        self.cache.go_live();
        if let Some(v) = view {
            self.cache_event(v.state_id.seqno, view_kind(v), 0);
        }
        let queued: Vec<(i64, CachedKind, usize)> = self
            .queue
            .iter()
            .filter_map(|e| match e {
                Event::Apply(ws) => Some((ws.seqno, ws.cached_kind(), ws.size)),
                // Not read back here, under the lock, at the join: the
                // cache starts a new run after them (it never claims a
                // range with a gap), so IST from this node's cache starts
                // after the last spilled writeset.
                Event::Spilled(_) => None,
                Event::PastView(seqno, members, view) => Some((
                    *seqno,
                    view.as_deref().map_or(
                        CachedKind::View {
                            members: *members,
                            who: None,
                        },
                        view_kind,
                    ),
                    0,
                )),
                Event::PrimaryView(v) => Some((v.state_id.seqno, view_kind(v), 0)),
                _ => None,
            })
            .collect();
        for (seqno, kind, bytes) in queued {
            self.cache_event(seqno, kind, bytes);
        }
        // Called outside a round too (a joiner's applier, after its state
        // transfer): these are ended now, not at the next round.
        self.cache.end_batch();
    }

    /// Compares a replayed event with this node's own at the same seqno
    /// (`ForkCheck`), when both are of one history.
    pub fn check_fork(&mut self, seqno: i64, kind: &CachedKind) {
        if self.group_history == *self.history.as_bytes() {
            self.fork_check.check(self.group_history, seqno, kind);
        }
    }

    /// A state at seqno 0 linked to a group as Raft id 1, and what it
    /// sends the group.
    #[cfg(test)]
    pub(crate) fn linked() -> (Inner, std::sync::mpsc::Receiver<crate::group_input::Input>) {
        let (tx, rx) = std::sync::mpsc::channel();
        let mut g = Inner::new(wsrep_abi::Uuid::NIL, 0);
        g.group = Some(GroupLink {
            raft_id: 1,
            tx: crate::group_input::InputTx::new(tx),
            sent: 0,
        });
        (g, rx)
    }

    /// The option values the state acts on, at `init` and after each
    /// runtime change (`settings`).
    pub fn take_settings(
        &mut self,
        tunables: crate::settings::Tunables,
        limits: lockstep_core::flow_control::Limits,
    ) {
        self.flow.set_limits(limits);
        self.queue.set_hard_limit(tunables.recv_q_hard_limit);
        self.bypass.threshold = tunables.commit_bypass;
    }

    /// Queues an ordered event for the appliers.
    pub fn enqueue(&mut self, event: Event) {
        self.queue.push(event, self.group_history);
    }

    /// Takes the next event for an applier.
    pub fn pop_event(&mut self) -> Option<Event> {
        let event = self.queue.pop()?;
        self.check_flow_control();
        Some(event)
    }

    /// The levels the commit and apply gates passed since the last call
    /// (`OrderGates::turns_passed`).
    pub fn turns_passed(&mut self) -> [(i64, i64); 2] {
        self.gates.turns_passed()
    }

    /// Wakes the rounds' loop when the receive queue fell below what this
    /// node announced. Without it a stop lasted until the next round: up
    /// to its 10 ms deadline while no writeset arrives, which
    /// a stop ensures (10-25 ms pauses, 7 % of the time paused, on 8-thread
    /// write-only load). The queue counted here is the whole one, never
    /// less than what flow control counts (`Bypass::counted`), so it never
    /// wakes the loop for a change that no round then makes.
    fn check_flow_control(&mut self) {
        if !self
            .flow
            .wants_check(self.queue.len() as u64, self.membership.members().len())
        {
            return;
        }
        if let Some(link) = &self.group {
            let sent = link.tx.send(crate::group_input::Input::FlowCheck).is_ok();
            self.flow.check_sent(sent);
        }
    }

    /// The node's state is `gtid` (a state transfer, or an arbitrator's
    /// join): the gates stand there and queued events it covers go.
    pub fn start_at(&mut self, gtid: Gtid) {
        self.history = gtid.uuid;
        self.gates.reset(gtid.seqno);
        self.last_ordered = self.last_ordered.max(gtid.seqno);
        self.queue
            .retain(|e| e.seqno().is_none_or(|s| s > gtid.seqno));
    }

    /// `seqno` leaves commit order: the bypass behind a large writeset
    /// forgets what the level passed.
    pub fn leave_commit(&mut self, seqno: i64) -> Result<(), OrderError> {
        let level = self.gates.leave_commit(seqno)?;
        self.bypass.large.remove(&seqno);
        self.bypass.forget_upto(level);
        Ok(())
    }

    /// `seqno` is finished (applied or rolled back, and committed).
    pub fn leave_apply(&mut self, seqno: i64) -> Result<(), OrderError> {
        let level = self.gates.leave_apply(seqno)?;
        self.bypass.settle(level);
        Ok(())
    }

    /// `last_committed` as defined by the contract: everything finished.
    pub fn last_committed(&self) -> i64 {
        self.gates.last_committed()
    }

    /// The grastate.dat record for this history at `seqno`: safe to
    /// bootstrap only if this node was the last member of its cluster.
    pub fn saved_state(&self, seqno: i64) -> SavedState {
        SavedState {
            uuid: self.history,
            seqno,
            safe_to_bootstrap: self.membership.was_last_to_leave(),
        }
    }

    /// What grastate.dat says while the node runs: the seqno is unknown.
    pub fn running_state(&self) -> SavedState {
        self.saved_state(-1)
    }

    /// A new group channel starts (connect or rejoin): no state transfer
    /// in progress, and an empty IST buffer from this node's position.
    /// The position this node joins from: its last committed one, or none
    /// once it diverged (then only a full SST will do).
    pub fn join_position(&self) -> Gtid {
        if self.diverged.is() {
            return Gtid::UNDEFINED;
        }
        Gtid {
            uuid: self.history,
            seqno: self.last_committed(),
        }
    }

    pub fn start_joining(&mut self, ist_limit: usize, donors: &str) {
        let have = self.join_position();
        self.joining.start(have, ist_limit, donors);
        // Set again by the first view this session replays or delivers.
        self.group_history = [0; 16];
        self.cache.wait_for_state();
        self.fork_check = self
            .cache
            .with_cache(|c| ForkCheck::from_cache(Some(c), have))
            .unwrap_or_else(|| ForkCheck::from_cache(None, have));
    }

    /// Fails every local operation still waiting for its place in the
    /// total order (the node lost the primary component: Galera returns
    /// an error to those clients rather than let them hang). Returns how
    /// many there were.
    pub fn abandon_pending(&mut self) -> usize {
        self.proposals.abandon_pending()
    }

    /// Proposes an action to the group; returns its proposal id (with a
    /// waiter registered when `wait` is set), or `None` outside a group.
    pub fn propose(&mut self, action: Action, wait: bool) -> Option<u64> {
        self.send_proposal(wait, true, |id| crate::group_input::Input::Propose {
            id,
            action,
        })
    }

    /// [`Inner::propose`] with a waiter, without waking the rounds' loop:
    /// the caller wakes it once it has let go of the lock
    /// (`InputTx::wake_after`), so that the round does not find the lock
    /// held by the thread that woke it.
    pub fn propose_unwoken(&mut self, action: Action) -> Option<u64> {
        self.send_proposal(true, false, |id| crate::group_input::Input::Propose {
            id,
            action,
        })
    }

    /// A causal read's fence, resolved like a proposal (`Resolution::Fence`)
    /// but without a log entry (ADR 0016).
    /// Not a proposal: not counted in `GroupLink::sent`.
    pub fn read_fence(&mut self) -> Option<u64> {
        self.send_input(true, true, |id| crate::group_input::Input::ReadFence { id })
    }

    /// Whether every proposal of this node has been ordered: a causal read
    /// may then take its fence from the leader's read index. Otherwise it
    /// goes through the log behind them (`Action::Barrier`), as with
    /// Galera a causal read sees what its own node sent before it (a
    /// streaming transaction's rollback fragment, say), acknowledged or
    /// not.
    pub fn own_proposals_ordered(&self) -> bool {
        self.group
            .as_ref()
            .is_some_and(|l| self.proposals.all_ordered(l.sent))
    }

    /// [`Inner::propose_unwoken`] of an action already cut into fragment
    /// parts.
    pub fn propose_fragments_unwoken(&mut self, parts: Vec<bytes::Bytes>) -> Option<u64> {
        self.send_proposal(true, false, |id| {
            crate::group_input::Input::ProposeFragments { id, parts }
        })
    }

    fn send_proposal(
        &mut self,
        wait: bool,
        wake: bool,
        input: impl FnOnce(u64) -> crate::group_input::Input,
    ) -> Option<u64> {
        self.group.as_mut()?.sent += 1;
        self.send_input(wait, wake, input)
    }

    /// Sends `input` to the group under a new id (with a waiter registered
    /// when `wait` is set), waking the rounds' loop when `wake` is set;
    /// `None` outside a group.
    fn send_input(
        &mut self,
        wait: bool,
        wake: bool,
        input: impl FnOnce(u64) -> crate::group_input::Input,
    ) -> Option<u64> {
        let link = self.group.as_ref()?;
        let id = self.proposals.open(wait);
        let sent = if wake {
            link.tx.send(input(id))
        } else {
            link.tx.queue(input(id))
        };
        if sent.is_err() {
            self.proposals.resolve(id, Resolution::Dropped);
        }
        Some(id)
    }

    /// What this node may report as committed for index purging: its
    /// `last_committed`, but never above the last seen seqno of one of its
    /// writesets still waiting to be ordered.
    pub fn purgeable_upto(&self) -> i64 {
        let inflight = self.proposals.min_last_seen();
        inflight.map_or(self.last_committed(), |ls| ls.min(self.last_committed()))
    }

    /// This node's Raft id in the group, 0 outside one.
    pub fn raft_id(&self) -> u64 {
        self.group.as_ref().map_or(0, |l| l.raft_id)
    }

    /// Whether a seqno may commit now (not held back by `pause`).
    pub fn may_commit(&self, seqno: i64) -> bool {
        self.paused_at.is_none_or(|p| seqno <= p)
    }

    /// Whether local writes may be ordered now (primary, state received).
    pub fn accepts_writes(&self) -> bool {
        use lockstep_core::group::MemberState::*;
        self.conn == Conn::Open && matches!(self.local.state(), Joined | Synced | Donor)
    }
}

#[cfg(test)]
mod tests {
    use super::Inner;
    use crate::event::Event;
    use crate::group_input::Input;

    fn flow_checks(rx: &std::sync::mpsc::Receiver<Input>) -> usize {
        rx.try_iter()
            .filter(|i| matches!(i, Input::FlowCheck))
            .count()
    }

    #[test]
    fn an_applier_wakes_the_group_thread_once_the_queue_allows_a_resume() {
        let (mut g, rx) = Inner::linked();
        // One member: the limit is gcs.fc_limit itself (16), resume at 16.
        for _ in 0..18 {
            g.enqueue(Event::Synced);
        }
        let stop = g.flow.update(18, 0, false).map(|(level, _)| level);
        assert_eq!(stop, Some(lockstep_core::flow_control::STOP));
        g.pop_event();
        assert_eq!(flow_checks(&rx), 0, "17 queued: still above the limit");
        g.pop_event();
        assert_eq!(flow_checks(&rx), 1, "16 queued: the stop can go");
        g.pop_event();
        assert_eq!(flow_checks(&rx), 0, "one wake-up in flight at most");
        // A round looked (`flow_control` clears the flag) but
        // had not withdrawn the stop yet: the next take asks again.
        g.flow.round_looked();
        g.pop_event();
        assert_eq!(flow_checks(&rx), 1);
    }
}
