//! The Raft driver: tikv/raft-rs `RawNode` plus what turns it into the
//! wsrep total order. Sans-IO: the caller feeds time, peer messages and
//! local proposals in, and takes messages to send and deliveries out.
//!
//! - Local proposals are queued and proposed as one log entry per `poll`
//!   (batching); followers' entries are forwarded to the leader by Raft.
//! - A proposal is retried until its delivery is seen, but only when it
//!   may have been lost: Raft dropped it, the term or leader changed, or
//!   (a follower's, forwarded to the leader) it is overdue by a deadline
//!   that grows with its size and doubles per retry, up to 8x (a lost
//!   forward must not stall its client for long). A leader's own
//!   proposal in its log is never re-sent on a timer (a 300 MB writeset
//!   is not proposed again every second). The sequencer drops the
//!   duplicates, so a retry never orders anything twice.
//! - The Raft log lives in memory and is not fsynced (brief D5): a node
//!   that restarts comes back as a new member with a new Raft id.
//! - The log is compacted below what every member has reported applied;
//!   a joiner then starts from a snapshot of the sequencer (`LogStore`,
//!   `maybe_compact`), and a member never receives one. Compaction keeps
//!   the newest half of the budget, so the log is also a sliding
//!   writeset cache: a joiner whose saved position is inside it receives
//!   every event it lacks by replaying the log (IST, no data copy).
//! - The leader's duties: add joiners as learners, promote synced
//!   learners to voters, and evict members silent past the suspect timeout.

use super::action::{
    decode_batch_shared, encode_batch, Action, CertFingerprint, MemberInfo, Proposal, Writeset,
    BINDING_VERSION,
};
use super::beats::Beats;
use super::follower_commit::{FollowerCommit, FollowerView, MAX_VOTERS_COMMITTING_ON_STORE};
use super::fragments::EncodedBody;
use super::log_store::LogStore;
use super::member_state::MemberState;
use super::payload::Payload;
use super::read_fence::{lease_ms, ReadFences};
use super::read_grants::{LeaseMsg, ReadGrants, OBLIGATION_MS};
use super::sequencer::{Delivery, GroupView, Member, Membership, OrderedWriteset, Sequencer};
use super::{echo, relay};
use crate::clocks::ObligationClock;
use protobuf::Message as _;
use raft::eraftpb::{ConfChange, ConfChangeType, ConfState, Entry, EntryType, Message, Snapshot};
use raft::storage::MemStorage;
use raft::{Config, ProgressState, RawNode, ReadOnlyOption, SnapshotStatus, StateRole};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

/// A snapshot that would copy more than this (`Sequencer::snapshot_weight`)
/// waits until the log is twice its budget.
const SNAPSHOT_WEIGHT_DEFER: usize = 16 << 20;

/// A causal read's ReadIndex request unanswered after this many ticks is
/// asked again (the leader drops it until it has committed an entry of its
/// term, and raft-rs forgets it when the leader is unknown).
const READ_RETRY_TICKS: u64 = 4;

mod founding;
mod local_reads;
mod sender_checks;

pub use founding::{HoldsAll, MayLack};
pub use local_reads::LOCAL_READS_VERSION;
pub use sender_checks::Refusal;

/// Default `GroupConfig::fragment_bytes`: the part size of a big
/// writeset, also what the provider cuts on its replicating thread.
pub const FRAGMENT_BYTES: usize = 256 << 10;

/// A proposal handed to Raft and not yet seen delivered.
#[derive(Debug, Clone)]
struct Pending {
    proposal: Proposal,
    /// When it was (last) proposed.
    at: u64,
    /// Raft's term and leader then.
    term: u64,
    leader: u64,
    /// Raft took it (not dropped for want of a leader or during a
    /// leadership transfer).
    accepted: bool,
    /// Retries on the overdue deadline so far.
    retries: u32,
    bytes: usize,
}

/// What a forwarded proposal or a big append is given per byte before it
/// counts as lost (a slow link, a leader busy with a big entry): 50 MB/s.
const FORWARD_BYTES_PER_MS: usize = 50_000;

/// Appends of at least this many bytes are not repeated while a first
/// copy may still be in flight (`repeats_big_append`).
const BIG_APPEND: usize = 4 << 20;

/// The group's own proposals are numbered from here (bit 62): callers
/// number theirs from 1 or with bit 63 set.
const INTERNAL_IDS: u64 = 1 << 62;

/// Timing and size knobs (from `evs.*` / `gcs.*`-style options).
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// Milliseconds per Raft tick.
    pub tick_ms: u64,
    pub heartbeat_ticks: usize,
    pub election_ticks: usize,
    /// The longest a settled follower goes without a message from its
    /// leader: heartbeats in between are spared (`beats`). At most the
    /// heartbeat interval: every heartbeat goes, as raft-rs sends them.
    pub quiet_beat_ms: u64,
    /// How long a group idling in close contact, with no lease in use,
    /// sleeps (`Group::idle_wait_ms`): a follower's longest wait, and the
    /// leader's heartbeat pace then. Longer than the quiet beat and shorter
    /// than the election timeout: the driver sets it from
    /// `evs.keepalive_period`, Galera's idle pace, capped at half the
    /// election timeout (`GroupConfig::set_keepalive_ms`).
    pub idle_beat_ms: u64,
    /// Randomize election timeouts (production); off in simulations,
    /// which must not depend on raft-rs's unseeded random numbers.
    pub randomized_election: bool,
    /// A member unheard for this long is evicted by the leader.
    pub suspect_timeout_ms: u64,
    /// Re-propose a proposal not delivered after this long; also how long
    /// the leader waits for a peer to acknowledge a snapshot before it
    /// sends it again.
    pub retry_ms: u64,
    /// Ask to be added again after this long.
    pub join_retry_ms: u64,
    /// Upper bound of one batch entry, in bytes (one proposal may exceed it).
    pub max_batch_bytes: usize,
    /// The log's budget in entries: a snapshot is set aside at half of
    /// it, and the log compacted to that snapshot (once every member has
    /// applied that far) when it is full, so the newest half always
    /// stays (the IST window). `u64::MAX`: never.
    pub compact_after: u64,
    /// The same budget in bytes (`gcache.size`).
    pub compact_bytes: u64,
    /// A writeset larger than this is proposed as fragments of this size,
    /// one log entry each (`Action::Fragment`), so no Raft round copies
    /// more than about this much.
    pub fragment_bytes: usize,
    /// Fragments of this node's big writesets proposed and not yet
    /// delivered, in bytes, at most (the rest wait in `Group::fragments`).
    /// Proposing all of a 300 MB writeset at once put every later proposal
    /// of every node behind it in the log and filled the peers' send
    /// queues until messages were dropped and re-sent; a window keeps the
    /// pipe full while other proposals interleave. At least one fragment
    /// is always in flight.
    pub fragment_window: usize,
    /// Ticks replayed at most when `tick` is called late (the thread was
    /// busy, e.g. certifying a writeset of a million keys). Missed ticks
    /// beyond it are dropped: this node's own stall is no evidence that
    /// the leader is gone (the heartbeats that arrived meanwhile are
    /// stepped first), and replaying them all would start an election
    /// right after every long round. `u64::MAX` in simulations.
    pub max_catch_up_ticks: u64,
    /// This node is an arbitrator (`lockstep arbitrator`): it votes but
    /// should not lead, since it applies nothing and may sit at a third
    /// site. Its Raft election priority is below the data members', so
    /// they refuse it as long as their logs are as long as its, and if it
    /// wins anyway it hands leadership to a data member.
    pub arbitrator: bool,
    /// `gcs.stateless`: this node says so once the cluster runs at
    /// `STATELESS_VERSION` (`Action::Stateless`), and is never a donor.
    pub stateless: bool,
    /// The newest group protocol version this node speaks (told to the
    /// group with `Action::Supports`); `group::peer::PROTOCOL_VERSION`
    /// outside simulations of rolling upgrades.
    pub protocol_max: u32,
    /// The release gate of local causal reads (ADR 0022). Always on;
    /// off only in the simulation's control, which shows that follower
    /// reads are stale without it.
    pub release_gate: bool,
    /// A granter's obligations run on a clock that takes a leap forward
    /// as one step (`clocks::ObligationClock`, ADR 0036). Always on; off
    /// only in the simulation's control, which shows that reads are stale
    /// without it when a granter's clock leaps.
    pub steady_obligations: bool,
    /// Peers are authenticated (TLS, ids bound to certificates, ADR 0014):
    /// no relays, since a relayed message cannot show who first sent it
    /// (`sender_checks`). Off in plain TCP, where a sender proves nothing,
    /// and in half of the simulations' seeds.
    pub checked_senders: bool,
}

impl GroupConfig {
    /// Close contact's window (`Group::idle_wait_ms`): the idle beat, at
    /// least the quiet beat whatever the configuration says.
    pub fn close_window_ms(&self) -> u64 {
        self.idle_beat_ms.max(self.quiet_beat_ms)
    }

    /// Galera's `evs.keepalive_period` as the idle pace (`idle_beat_ms`),
    /// set after the timing it depends on. At most half the election
    /// timeout: a follower that does not sleep (one still applying a
    /// backlog, or a donor, counts every tick) must hear each heartbeat
    /// with time to spare before it campaigns. At most half the suspect
    /// timeout, so an idle leader never takes a quiet member for a
    /// silent one. At least the quiet beat.
    pub fn set_keepalive_ms(&mut self, keepalive_ms: u64) {
        let election = self.tick_ms * self.election_ticks as u64;
        let cap = (election / 2).min(self.suspect_timeout_ms / 2);
        self.idle_beat_ms = keepalive_ms.min(cap).max(self.quiet_beat_ms);
    }
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            tick_ms: 50,
            heartbeat_ticks: 2,
            election_ticks: 20,
            // A quarter of the election timeout (1 s).
            quiet_beat_ms: 250,
            // Galera's keepalive (1 s), capped at half the election
            // timeout (`set_keepalive_ms`).
            idle_beat_ms: 500,
            randomized_election: true,
            suspect_timeout_ms: 5000,
            retry_ms: 1000,
            join_retry_ms: 1000,
            max_batch_bytes: 1 << 20,
            // Entries are batches; a joiner replays them through the
            // sequencer, a few microseconds each.
            compact_after: 200_000,
            compact_bytes: 128 << 20,
            max_catch_up_ticks: 2,
            fragment_bytes: FRAGMENT_BYTES,
            fragment_window: 256 << 10,
            arbitrator: false,
            stateless: false,
            protocol_max: crate::group::peer::PROTOCOL_VERSION,
            release_gate: true,
            steady_obligations: true,
            checked_senders: false,
        }
    }
}

/// What the caller must do.
#[derive(Debug, Clone)]
pub enum Output {
    /// Send a Raft message to the peer with this Raft id.
    Send {
        to: u64,
        msg: Message,
    },
    /// Ask whichever peers are connected to add this node.
    Join(MemberInfo),
    Deliver(Delivery),
    /// This node started from a snapshot: the last view in it. Deliveries
    /// continue from the snapshot's position. A snapshot is normally from
    /// before this node joined, so the view that adds it follows as a
    /// delivery; if the snapshot contained it, this view stands for it.
    Restored(GroupView),
    /// Tell a member that its removal is applied. A removed node gets no
    /// more log entries, so without this a leaving node may never see the
    /// commit of its own removal (raft-rs stops replicating to it).
    Farewell {
        to: u64,
    },
    /// Leader: tell a node that speaks Raft to it without being in the
    /// configuration that it was removed (it was cut off while the
    /// majority evicted it, and would otherwise wait forever).
    NotMember {
        to: u64,
    },
    /// Causal reads (`Group::read_fence`) whose fence is known: every
    /// event committed cluster-wide before they were asked is ordered at
    /// or below `seqno` here.
    Fence {
        reads: Vec<u64>,
        seqno: i64,
    },
    /// The log cannot be processed: stop this node.
    Fatal(String),
    /// Leader: send these appends to `via` as one bundle (`relay`, ADR
    /// 0020); it steps its own and forwards the others in its segment.
    Relay {
        via: u64,
        msgs: Vec<Message>,
    },
    /// A relay passes on a leader's message to a member of its segment
    /// (`Group::step_relay`).
    Forward {
        to: u64,
        msg: Message,
    },
    /// Local causal reads (ADR 0022): a ping, a grant or a stored claim
    /// for member `to` (`Group::step_lease` there).
    Lease {
        to: u64,
        msg: LeaseMsg,
    },
}

/// The first group protocol version whose leader relays appends and
/// moves to the segment with the most voters (ADR 0020).
pub const RELAY_VERSION: u32 = 9;

/// The most a granter's obligation clock advances at one reading, in
/// ticks (`clocks::ObligationClock`): a rounds' normal spacing is one.
const OBLIGATION_STEP_TICKS: u64 = 2;

/// How often the leader reviews each remote segment's relay.
const RELAY_REVIEW_MS: u64 = 1000;

/// What a member must have forwarded since the last review to take the
/// relay over (commit reports alone must not move it back and forth).
const RELAY_WRITER_BYTES: u64 = 16 << 10;

/// What crossed to other segments (`gmcast.segment`), for the WAN status
/// counters: the relay works when a remote segment of several members
/// gets each entry once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WanCounters {
    /// Log entries this node sent to members of other segments (a
    /// bundle's entries counted once).
    pub entries_sent: u64,
    /// Bundles this node sent as leader.
    pub bundles_sent: u64,
    /// Messages this node forwarded as a relay.
    pub forwarded: u64,
    /// Bytes of entries the leader sent their origin as stubs (`echo`).
    pub elided_bytes: u64,
    /// Appends this node dropped because it could not fill a stub.
    pub unfilled: u64,
    /// Relays this node (as leader) replaced because the transport lost
    /// every connection to them (`Group::peer_lost`).
    pub relays_lost: u64,
}

pub struct Group {
    me: MemberInfo,
    cfg: GroupConfig,
    raw: RawNode<LogStore>,
    seq: Sequencer,
    now: u64,
    next_tick: u64,
    next_id: u64,
    /// The next id of the group's own proposals (`propose_internal`).
    next_internal: u64,
    queued: Vec<Proposal>,
    /// Fragments waiting for room in `fragment_window`, in order. Bounded
    /// by the writesets queued (each at most `repl.max_ws_size`), which
    /// the client threads wait for.
    fragments: VecDeque<Proposal>,
    pending: BTreeMap<u64, Pending>,
    /// Retry counts of proposals queued again (as many as `pending`).
    retries: HashMap<u64, u32>,
    /// The last big append sent to each peer (to, previous index, last
    /// index) and until when it is not repeated; one per peer.
    big_appends: HashMap<u64, ((u64, u64, u64), u64)>,
    last_heard: HashMap<u64, u64>,
    wan: WanCounters,
    /// What this node forwarded to the leader, to fill its stubs, and the
    /// next sequence number of such an entry (`echo`).
    forwarded: echo::Forwarded,
    next_forward: u64,
    /// Leader: the stubs sent (`echo`), and each remote segment's relay
    /// (kept while it answers).
    stubs: echo::Stubs,
    /// Leader: when each follower last heard from it, to spare the
    /// heartbeats of an idle group (`beats`).
    beats: Beats,
    /// The wait the driver took last (`idle_wait_ms`; 0 before the
    /// first, or with a driver that never asks): the leader's likely next
    /// chance to send a heartbeat.
    planned_wait_ms: u64,
    relays: HashMap<u8, u64>,
    /// Members whose every connection the transport saw close, until a
    /// message from them comes again: no relay (a killed relay would
    /// otherwise hold its segment's appends for an election timeout). At
    /// most one per member: former members are dropped at each change.
    disconnected: HashSet<u64>,
    /// Leader: bytes each member forwarded since `relay_review` (a
    /// segment's relay is its main writer, whose echoes it fills itself).
    proposed: HashMap<u64, u64>,
    relay_review: u64,
    /// Term of this node's current (or last) leadership.
    lead_term: u64,
    /// The last leader this node knew (itself included), whatever its
    /// term: who holds every commit if this node may not (`founding`).
    last_leader: Option<u64>,
    /// Raft index of the last configuration change applied here: until
    /// every member reports applying it, some may count votes with an
    /// older configuration (`founding`).
    conf_applied_at: u64,
    last_join: Option<u64>,
    last_conf_change: Option<u64>,
    was_member: bool,
    leaving: bool,
    /// A leaving leader handed leadership over once already.
    handed_over: bool,
    /// This incarnation told the group its protocol versions.
    supports_told: bool,
    /// `Action::Stateless` was proposed (once per incarnation; retried
    /// like any proposal).
    stateless_told: bool,
    /// When this leader last proposed a cluster version.
    version_proposed: Option<u64>,
    left: bool,
    /// Started from a snapshot: (deliveries before it, last seqno in it).
    restored_at: Option<(u64, i64)>,
    /// Leader: when each non-member was last told so (bounded below).
    not_member_told: HashMap<u64, u64>,
    /// Snapshot waiting until the log is full and every member has
    /// applied its index, with the last seqno it contains.
    pending_snapshot: Option<(Snapshot, i64)>,
    /// Every event after this seqno is in the log (the IST window starts
    /// here); `None` before the first view.
    cached_after: Option<i64>,
    /// Leader: snapshot transfers not acknowledged yet, per peer.
    snapshot_sent: HashMap<u64, SnapshotSend>,
    failed: bool,
    /// This node applied its own removal while it led: raft-rs cannot go
    /// on with a leader that has no progress of its own (it unwraps it
    /// when persisting entries), so the Raft node is not touched again.
    /// The node has left.
    retired: bool,
    /// Raft messages dropped because their sender is not a member.
    strangers_ignored: u64,
    /// Messages refused because of their sender (`sender_checks`).
    refusals: sender_checks::Refusals,
    /// Causal reads waiting for their fence, and the leader's lease.
    fences: ReadFences,
    /// The latest time given to `set_clock`.
    lease_clock: u64,
    /// The granter's clock: a leap forward counts as one step
    /// (`clocks::ObligationClock`, ADR 0036).
    obligation_clock: ObligationClock,
    /// Every member's clock rate agrees with this node's
    /// (`clocks::ClockRates`, measured by the driver): leases may be used.
    clocks_agree: bool,
    /// Follower: commits what it stores when it and the leader are a quorum.
    follower_commit: FollowerCommit,
    /// Local causal reads: this node's leases and what it owes (ADR 0022).
    grants: ReadGrants,
    /// Committed entries the release gate holds, in order
    /// (`release_held`). Bounded: an entry waits only while a holder owed
    /// has not stored it, and a holder more than `LAG_ENTRIES` behind
    /// gets no grant, so at most the entries committed within an
    /// obligation (`OBLIGATION_MS`) after the last grant, plus that lag.
    held: VecDeque<Entry>,
    /// The last entry released (given to the sequencer); raft-rs's
    /// applied index catches up at the end of each poll.
    released: u64,
    out: Vec<Output>,
}

fn raft_config(id: u64, cfg: &GroupConfig) -> Config {
    let mut c = Config::new(id);
    c.heartbeat_tick = cfg.heartbeat_ticks;
    c.election_tick = cfg.election_ticks;
    c.min_election_tick = cfg.election_ticks;
    c.max_election_tick = if cfg.randomized_election {
        cfg.election_ticks * 2
    } else {
        cfg.election_ticks + 1
    };
    c.max_size_per_msg = 1 << 20;
    c.max_inflight_msgs = 256;
    c.check_quorum = true;
    c.pre_vote = true;
    // raft-rs: a voter refuses a candidate of lower priority whose log is
    // no longer than its own. Data members keep the default 0.
    if cfg.arbitrator {
        c.priority = -1;
    }
    c
}

fn discard_logger() -> slog::Logger {
    slog::Logger::root(slog::Discard, slog::o!())
}

impl Group {
    fn with_storage(
        me: MemberInfo,
        cfg: GroupConfig,
        storage: MemStorage,
        now: u64,
    ) -> Result<Group, String> {
        let raw = RawNode::new(
            &raft_config(me.raft_id, &cfg),
            LogStore::new(storage),
            &discard_logger(),
        )
        .map_err(|e| format!("cannot start the Raft node: {e}"))?;
        // A leap forward counts for two ticks, as Raft's ticks catch up
        // in the provider (`max_catch_up_ticks`).
        let obligation_step = OBLIGATION_STEP_TICKS.saturating_mul(cfg.tick_ms);
        Ok(Group {
            me,
            next_tick: now + cfg.tick_ms,
            raw,
            seq: Sequencer::new(),
            now,
            next_id: 1,
            next_internal: INTERNAL_IDS,
            queued: Vec::new(),
            fragments: VecDeque::new(),
            pending: BTreeMap::new(),
            retries: HashMap::new(),
            big_appends: HashMap::new(),
            wan: WanCounters::default(),
            forwarded: echo::Forwarded::default(),
            next_forward: 1,
            stubs: echo::Stubs::default(),
            beats: Beats::new(cfg.quiet_beat_ms, cfg.close_window_ms()),
            planned_wait_ms: 0,
            relays: HashMap::new(),
            proposed: HashMap::new(),
            relay_review: 0,
            disconnected: HashSet::new(),
            last_heard: HashMap::new(),
            lead_term: 0,
            last_join: None,
            last_conf_change: None,
            was_member: false,
            leaving: false,
            handed_over: false,
            supports_told: false,
            stateless_told: false,
            version_proposed: None,
            left: false,
            restored_at: None,
            pending_snapshot: None,
            not_member_told: HashMap::new(),
            cached_after: None,
            snapshot_sent: HashMap::new(),
            failed: false,
            retired: false,
            strangers_ignored: 0,
            refusals: Default::default(),
            fences: ReadFences::new(
                lease_ms(cfg.election_ticks, cfg.tick_ms),
                cfg.tick_ms * READ_RETRY_TICKS,
            ),
            cfg,
            lease_clock: now,
            obligation_clock: ObligationClock::new(now, obligation_step),
            clocks_agree: true,
            follower_commit: FollowerCommit::default(),
            grants: {
                let mut g = ReadGrants::new();
                // A restart forgets what the last incarnation promised.
                g.owe_everyone_until(now + OBLIGATION_MS);
                g
            },
            held: VecDeque::new(),
            last_leader: None,
            conf_applied_at: 0,
            released: 0,
            out: Vec::new(),
        })
    }

    /// Founds a cluster: a one-voter Raft group whose first entry is the
    /// genesis continuing `history` after `last_seqno`.
    pub fn bootstrap(
        me: MemberInfo,
        cfg: GroupConfig,
        history: [u8; 16],
        last_seqno: i64,
        now: u64,
    ) -> Result<Group, String> {
        let storage = MemStorage::new_with_conf_state((vec![me.raft_id], vec![]));
        let mut g = Group::with_storage(me.clone(), cfg, storage, now)?;
        g.raw
            .campaign()
            .map_err(|e| format!("cannot become leader: {e}"))?;
        g.propose(Action::Genesis {
            history,
            last_seqno,
            founder: me,
        });
        Ok(g)
    }

    /// Starts a node that joins an existing cluster: it has no log and
    /// keeps asking to be added until a view includes it.
    pub fn join(me: MemberInfo, cfg: GroupConfig, now: u64) -> Result<Group, String> {
        Group::with_storage(me, cfg, MemStorage::new(), now)
    }

    pub fn me(&self) -> &MemberInfo {
        &self.me
    }
    pub fn sequencer(&self) -> &Sequencer {
        &self.seq
    }
    pub fn sequencer_mut(&mut self) -> &mut Sequencer {
        &mut self.seq
    }
    pub fn is_leader(&self) -> bool {
        self.raw.raft.state == StateRole::Leader
    }
    pub fn leader(&self) -> u64 {
        self.raw.raft.leader_id
    }
    /// The Raft term this node is in.
    pub fn term(&self) -> u64 {
        self.raw.raft.term
    }
    /// `evs.suspect_timeout` changed at runtime: the leader evicts members
    /// silent for this long from now on.
    pub fn set_suspect_timeout(&mut self, ms: u64) {
        self.cfg.suspect_timeout_ms = ms;
    }

    /// Nothing is under way that a round must push on before an input
    /// comes (issue 53, tickless when idle): a member with a leader, no
    /// proposal queued, in flight or in fragments, no read waiting, no
    /// snapshot to send, nothing held back or ready in Raft (a compaction
    /// waiting for the log to grow is no work: entries come with inputs),
    /// and as leader every member's log matched. Raft still needs its
    /// ticks then (heartbeats, election timeouts), but only at the
    /// heartbeat's pace: [`Group::heartbeat_ms`].
    pub fn is_quiet(&self) -> bool {
        self.busy_with().is_none()
    }

    /// What keeps the group from being quiet (the first thing found), for
    /// tests and logs; `None` when it is.
    pub fn busy_with(&self) -> Option<&'static str> {
        let last = self.raw.raft.raft_log.last_index();
        let checks = [
            (!self.is_member(), "not a member"),
            (!self.has_leader(), "no leader"),
            (
                self.leaving || self.failed || self.retired,
                "leaving or stopped",
            ),
            (!self.queued.is_empty(), "proposals queued"),
            (!self.fragments.is_empty(), "fragments to send"),
            (!self.pending.is_empty(), "proposals in flight"),
            (!self.big_appends.is_empty(), "big appends in flight"),
            (!self.held.is_empty(), "entries held back"),
            (!self.out.is_empty(), "outputs not taken"),
            (!self.snapshot_sent.is_empty(), "snapshots in flight"),
            (!self.fences.is_idle(), "reads waiting"),
            (self.raw.has_ready(), "Raft has a ready"),
            (
                self.is_leader() && self.raw.raft.prs().iter().any(|(_, p)| p.matched != last),
                "a member's log behind",
            ),
        ];
        checks.iter().find(|(busy, _)| *busy).map(|(_, what)| *what)
    }

    /// How often the leader sends heartbeats: how long an idle group
    /// may leave Raft without a tick.
    pub fn heartbeat_ms(&self) -> u64 {
        self.cfg.tick_ms * self.cfg.heartbeat_ticks as u64
    }

    /// How long the driver may leave the group without input or a tick
    /// now (issue 53, tickless when idle); `None` when the driver has work
    /// (`driver_idle` false) or the group is not quiet (ticks at Raft's
    /// pace).
    ///
    /// Quiet, it is one heartbeat interval, which `max_catch_up_ticks`
    /// replays whole. In close contact, with no lease in use
    /// (`leases_in_use`), it is longer: a follower that heard its leader
    /// within `idle_beat_ms` waits that long (the leader's next
    /// heartbeat usually wakes it first), and a leader that heard every
    /// other member within it waits one tick less. The ticks replayed at
    /// the end of such a wait reach raft-rs's heartbeat interval, so a
    /// heartbeat leaves at each of the leader's wakes (none is spared:
    /// the wait is longer than the quiet beat), and a follower hears from
    /// its leader about every 450 ms by default: Galera's idle pace of
    /// one keepalive a second, capped at half the election timeout. A
    /// follower that missed one falls out of close contact and ticks
    /// exactly from then: an election needs a whole election timeout
    /// more (at least 1 s) without a heartbeat. A follower that does not
    /// sleep (still applying) counts every tick, and hears each heartbeat
    /// with half an election timeout to spare.
    ///
    /// The ticks such a wait skips beyond `max_catch_up_ticks` are lost,
    /// which only makes Raft's clocks slower: an election or a
    /// check-quorum step-down comes later, and a follower refuses votes
    /// longer (the leases' side is the safe one). Close contact ends
    /// within one wait of a peer falling silent, and the waits shrink
    /// back to exact ticks, so an election is late by at most one wait.
    ///
    /// The driver calls this as it goes to sleep: the wait is kept as the
    /// leader's next chance to send a heartbeat (`beats`).
    pub fn idle_wait_ms(&mut self, driver_idle: bool) -> Option<u64> {
        let beat = self.heartbeat_ms();
        let wait = (driver_idle && self.is_quiet())
            .then(|| self.close_wait_ms().map_or(beat, |w| w.max(beat)));
        self.planned_wait_ms = wait.unwrap_or(0);
        wait
    }

    /// Whether the driver's last sleep was close contact's longer one
    /// (`idle_wait_ms`): the group idles, and no lease is in use.
    pub fn sleeps_in_close_contact(&self) -> bool {
        self.planned_wait_ms > self.heartbeat_ms()
    }

    /// The longer wait of close contact (`idle_wait_ms`), when this node
    /// is in it and no lease is in use.
    fn close_wait_ms(&self) -> Option<u64> {
        if self.leases_in_use() {
            return None;
        }
        let window = self.cfg.close_window_ms();
        if self.is_leader() {
            let me = self.me.raft_id;
            let close = self
                .raw
                .raft
                .prs()
                .iter()
                .all(|(id, _)| *id == me || self.heard_within(*id, window));
            // No follower may go longer than the window without a message:
            // the heartbeats this round spared counted on a shorter sleep.
            close.then(|| {
                let due = self
                    .raw
                    .raft
                    .prs()
                    .iter()
                    .filter(|(id, _)| **id != me)
                    .filter_map(|(id, _)| self.beats.time_left(*id, self.now))
                    .min()
                    .unwrap_or(u64::MAX);
                window.saturating_sub(self.cfg.tick_ms).min(due)
            })
        } else {
            self.heard_within(self.leader(), window).then_some(window)
        }
    }

    /// Whether this node knows a leader: false while it cannot reach a
    /// majority (pre-vote and check-quorum reset the leader then).
    /// Whether this node is in contact with a leader. A voter loses the
    /// leader when its election timeout fires; a learner (a joiner, or a
    /// member the weighted quorum does not let vote) never campaigns, so
    /// raft-rs keeps the last leader it knew: it counts as leaderless once
    /// it has not heard from that leader for an election timeout.
    pub fn has_leader(&self) -> bool {
        let leader = self.raw.raft.leader_id;
        if leader == raft::INVALID_ID {
            return false;
        }
        let me = self.me.raft_id;
        if leader == me || self.seq.member(me).is_none_or(|m| m.voter) {
            return true;
        }
        let fresh = self.election_timeout_ms();
        self.last_heard
            .get(&leader)
            .is_some_and(|t| self.now <= t + fresh)
    }

    /// Whether this node heard from `raft_id` within `window_ms` (itself:
    /// always).
    pub fn heard_within(&self, raft_id: u64, window_ms: u64) -> bool {
        raft_id == self.me.raft_id
            || self
                .last_heard
                .get(&raft_id)
                .is_some_and(|t| self.now <= t + window_ms)
    }

    /// A learner that lost its leader never campaigns, so no member would
    /// hear from it again: it pokes them (a heartbeat response, which Raft
    /// takes without effect from a peer in its configuration) so that a
    /// leader that removed it meanwhile answers `NotMember`.
    pub fn poke_members(&mut self) {
        let me = self.me.raft_id;
        if self.seq.member(me).is_none_or(|m| m.voter) {
            return;
        }
        let term = self.raw.raft.term;
        let peers: Vec<u64> = self
            .seq
            .members()
            .iter()
            .map(|m| m.info.raft_id)
            .filter(|id| *id != me)
            .collect();
        for to in peers {
            let mut msg = Message::default();
            msg.set_msg_type(raft::eraftpb::MessageType::MsgHeartbeatResponse);
            msg.to = to;
            msg.from = me;
            msg.term = term;
            self.out.push(Output::Send { to, msg });
        }
    }

    /// How long a peer may stay silent and still count as answering.
    fn election_timeout_ms(&self) -> u64 {
        self.cfg.election_ticks as u64 * self.cfg.tick_ms
    }

    /// Whether this node has been a member of the group at some point
    /// (it joined, even if it left or was removed since).
    pub fn was_member(&self) -> bool {
        self.was_member
    }

    pub fn is_member(&self) -> bool {
        self.seq.is_member(self.me.raft_id)
    }
    /// Takes the proposals not yet seen delivered, in proposal order (to
    /// carry them into a group this node founds instead).
    pub fn take_unordered(&mut self) -> Vec<Proposal> {
        let mut all: Vec<Proposal> = std::mem::take(&mut self.pending)
            .into_values()
            .map(|p| p.proposal)
            .collect();
        all.append(&mut self.queued);
        all.extend(std::mem::take(&mut self.fragments));
        all.sort_by_key(|p| p.id);
        all
    }

    /// How many members vote in this node's Raft configuration.
    pub fn voters(&self) -> usize {
        self.raw.raft.prs().conf().voters().ids().len()
    }

    /// Proposals not yet seen delivered.
    pub fn in_flight(&self) -> usize {
        self.queued.len() + self.fragments.len() + self.pending.len()
    }

    /// Queues an action of the group's own (`Supports`, `ClusterVersion`)
    /// under ids of a space of its own, so the caller's numbering (from
    /// 1, or with the top bit set) is not disturbed.
    fn propose_internal(&mut self, action: Action) {
        let id = self.next_internal;
        self.next_internal += 1;
        self.propose_with_id(id, action);
    }

    /// Queues an action for the total order; returns its proposal id.
    pub fn propose(&mut self, action: Action) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.propose_with_id(id, action);
        id
    }

    /// Queues an action under a caller-chosen proposal id. Ids must be
    /// unique per node; [`Group::propose`] counts up from 1, so callers
    /// that choose their own use ids with the top bit set.
    ///
    /// A writeset larger than `fragment_bytes` is queued as fragments
    /// (with ids of the group's own numbering); its delivery still comes
    /// under `id`.
    pub fn propose_with_id(&mut self, id: u64, action: Action) {
        let origin = self.me.raft_id;
        let big = matches!(&action, Action::Writeset(ws) if ws.size() > self.cfg.fragment_bytes);
        match action {
            Action::Writeset(ws) if big => {
                let body = EncodedBody::encode(&ws.keys, &ws.data, self.cfg.fragment_bytes);
                let head = Writeset {
                    keys: Vec::new(),
                    data: Payload::default(),
                    ..ws
                };
                self.propose_fragments(id, body.with_head(&head));
            }
            action => self.queued.push(Proposal { origin, id, action }),
        }
    }

    /// Queues an action already cut into fragment parts (by
    /// [`EncodedBody`] on the replicating thread, so this thread does no
    /// O(size) work for it); it is delivered under proposal `id`.
    pub fn propose_fragments(&mut self, id: u64, parts: Vec<bytes::Bytes>) {
        let origin = self.me.raft_id;
        let count = parts.len() as u32;
        for (index, bytes) in parts.into_iter().enumerate() {
            let fid = self.next_id;
            self.next_id += 1;
            self.fragments.push_back(Proposal {
                origin,
                id: fid,
                action: Action::Fragment {
                    of: id,
                    index: index as u32,
                    count,
                    bytes,
                },
            });
        }
    }

    /// A Raft message from a peer.
    pub fn step(&mut self, mut msg: Message) {
        if self.retired {
            // A member that campaigns may not know our removal committed.
            // Only campaigns are answered: an answer to an answer could
            // bounce for ever with a member in a later term.
            use raft::eraftpb::MessageType::{MsgRequestPreVote, MsgRequestVote};
            if matches!(msg.get_msg_type(), MsgRequestPreVote | MsgRequestVote) {
                self.tell_commit(Some(msg.from));
            }
            return;
        }
        if msg.get_msg_type() == raft::eraftpb::MessageType::MsgPropose && msg.entries.is_empty() {
            // raft-rs treats it as fatal ("stepped empty MsgProp"); no
            // member of ours sends one, so it is crafted or corrupt.
            return;
        }
        if msg.get_msg_type() == raft::eraftpb::MessageType::MsgHeartbeat
            && msg.commit > self.raw.raft.raft_log.last_index()
        {
            // raft-rs panics committing past its log ("to_commit is out
            // of range"); a leader sends at most what this node matched.
            return;
        }
        if self.is_leader() && self.raw.raft.prs().get(msg.from).is_none() {
            self.tell_not_member(msg.from);
            return;
        }
        if self.ignores_stranger(&msg) {
            return;
        }
        if msg.get_msg_type() == raft::eraftpb::MessageType::MsgPropose
            && self.is_leader()
            && !self.proposals_are_senders_own(&msg)
        {
            self.refuse(msg.from, &msg, "Raft", "a proposal acts for another member");
            return;
        }
        if msg.to != self.me.raft_id {
            // Meant for an earlier incarnation of this node (a peer sent it
            // to this node's address): never let it into this Raft.
            return;
        }
        self.last_heard.insert(msg.from, self.now);
        self.disconnected.remove(&msg.from);
        if !self.forwarded.fill(self.me.raft_id, &mut msg) {
            // A stub of an entry this node no longer holds: Raft's retry
            // brings the data (`echo`).
            self.wan.unfilled += 1;
            return;
        }
        match msg.get_msg_type() {
            // Counted only where `review_relays` clears it.
            raft::eraftpb::MessageType::MsgPropose
                if self.is_leader() && self.seq.cluster_version() >= RELAY_VERSION =>
            {
                let bytes: usize = msg.entries.iter().map(|e| e.data.len()).sum();
                *self.proposed.entry(msg.from).or_default() += bytes as u64;
            }
            raft::eraftpb::MessageType::MsgReadIndex if self.is_leader() => {
                self.fences.saw_read(self.now);
            }
            // raft-rs takes any answer; only the leader's can be right
            // (a wrong index would hold the reads until they time out).
            raft::eraftpb::MessageType::MsgReadIndexResp => {
                if msg.from == self.raw.raft.leader_id && msg.entries.len() == 1 {
                    // The leader's read index rides in `commit` (`send_all`).
                    let index = msg.index.max(msg.commit);
                    let term = self.raw.raft.term;
                    self.fences.answered(&msg.entries[0].data, index, term);
                    self.release_fences();
                }
                return;
            }
            raft::eraftpb::MessageType::MsgAppendResponse if self.is_leader() => {
                self.set_commit_broadcast();
            }
            _ => {}
        }
        self.set_read_mode();
        // Errors are messages for another term or from unknown peers;
        // Raft's own rules make dropping them safe.
        let _ = self.raw.step(msg);
    }

    /// A leader that applied its own removal goes silent (`retired`), but
    /// the others may not know the removal committed: raft-rs applies a
    /// configuration change only once committed, and a follower learns
    /// the commit from the leader's next message, which need not come
    /// (its progress may be paused). The last member then kept the leaver
    /// as a voter and could never elect itself. So the leaver tells them
    /// its commit index in a heartbeat, at retirement and again to any of
    /// them that campaigns while it is still there. (`only`: one peer.)
    fn tell_commit(&mut self, only: Option<u64>) {
        let raft = &self.raw.raft;
        let committed = raft.raft_log.committed;
        let peers: Vec<(u64, u64)> = raft
            .prs()
            .iter()
            .filter(|(id, _)| only.is_none_or(|o| o == **id))
            .map(|(id, pr)| (*id, pr.matched.min(committed)))
            .collect();
        for (to, commit) in peers {
            let mut msg = Message::default();
            msg.set_msg_type(raft::eraftpb::MessageType::MsgHeartbeat);
            msg.to = to;
            msg.from = self.me.raft_id;
            msg.term = raft.term;
            msg.commit = commit;
            self.out.push(Output::Send { to, msg });
        }
    }

    /// A causal read: `Output::Fence` names it once this node has ordered
    /// every event committed cluster-wide before now (`read_fence`).
    pub fn read_fence(&mut self, id: u64) {
        self.fences.read(id, self.now);
        self.saw_local_read();
    }

    /// While this node leads under a valid lease: until when (ms) it
    /// holds, and the read index ([`Group::read_index`]). A reader on this
    /// node may then take its fence from the local state without waiting
    /// for the driver's round (once everything up to that index is applied),
    /// provided this pair is published before any message that could carry
    /// a higher index leaves (ADR 0016).
    pub fn read_lease(&self) -> Option<(u64, u64)> {
        if !self.clocks_agree {
            return None;
        }
        if !self.is_leader() {
            return self.local_lease();
        }
        // A new leader's commit index covers every earlier commit only
        // once it has committed an entry of its own term.
        if self.raw.raft.lead_transferee.is_some() || !self.raw.raft.commit_to_current_term() {
            return None;
        }
        let now = self.now.max(self.lease_clock);
        let until = self.fences.lease_until(now, self.raw.raft.term)?;
        Some((until, self.read_index()))
    }

    /// What a causal read answered by this leader waits for: its last log
    /// index, not its commit index. A follower commits what it stores
    /// before the leader learns it (ADR 0017), so a transaction may be
    /// acknowledged there while only the leader's log covers it. Every
    /// entry any node stores came from this log; waiting for it to be
    /// applied costs at most the round that commits it.
    fn read_index(&self) -> u64 {
        self.raw.raft.raft_log.last_index()
    }

    /// A follower's causal read was answered from the lease outside this
    /// driver (the provider's connection threads): keep the lease renewed.
    pub fn saw_read(&mut self) {
        self.fences.saw_read(self.now);
        self.saw_local_read();
    }

    /// The time now, before the round's messages are stepped: a leader
    /// judges its lease when it steps a follower's read, and a message is
    /// heard (`last_heard`, which a learner judges its leader's contact
    /// on) at this time, where the last `tick` may be a whole busy round
    /// or idle sleep old. Raft's ticks still come only from `tick`.
    pub fn set_clock(&mut self, now: u64) {
        self.now = self.now.max(now);
        self.lease_clock = self.lease_clock.max(now);
        self.obligation_clock.advance(self.lease_clock);
    }

    /// Whether every member's clock rate agrees with this node's, as the
    /// driver measures it (`clocks::ClockRates`). While not, no lease
    /// answers a causal read, the leader's nor a follower's: reads ask
    /// through Raft's ReadIndex, which needs a quorum and no clock.
    pub fn set_clocks_agree(&mut self, agree: bool) {
        self.clocks_agree = agree;
    }

    /// Whether the leader tells the followers each advance of its commit
    /// index at once. raft-rs does, in an empty append to every follower
    /// (each of which answers), on every append answer that moves the
    /// index: two messages per follower per commit, most of a loaded
    /// leader's sending. Where every other member commits what it stores
    /// on arrival (at most three voters, no learner, no joint
    /// configuration: `follower_commit`, ADR 0017) that pair tells nobody
    /// anything, so the leader skips it. The index still rides on the
    /// next append and on heartbeats, and raft-rs sends it regardless
    /// while a configuration change is pending. With more voters, or a
    /// learner catching up, the followers wait for the leader's index,
    /// so it goes out at once as before. Decided from the configuration
    /// each time the answer may move the index, so a change of members
    /// takes effect at the next answer.
    fn set_commit_broadcast(&mut self) {
        let conf = self.raw.raft.prs().conf();
        let learners = !conf.learners().is_empty() || !conf.learners_next().is_empty();
        let skip = !learners && {
            let cs = conf.to_conf_state();
            cs.voters.len() <= MAX_VOTERS_COMMITTING_ON_STORE && cs.voters_outgoing.is_empty()
        };
        self.raw.skip_bcast_commit(skip);
    }

    /// How the leader answers a ReadIndex request right now: from its
    /// commit index while its lease holds (not while it hands leadership
    /// over: the new leader does not wait for the lease to end), after a
    /// heartbeat round otherwise.
    fn set_read_mode(&mut self) {
        let now = self.now.max(self.lease_clock);
        // raft-rs only counts heartbeat answers toward pending "safe" reads
        // while the mode is safe: switching with some still pending (the
        // lease round and a batch of reads fly together) would strand
        // them until their retry.
        let lease = self.is_leader()
            && self.clocks_agree
            && self.raw.raft.lead_transferee.is_none()
            && self.raw.raft.read_only.pending_read_index.is_empty()
            && self.fences.lease_valid(now, self.raw.raft.term);
        self.raw.raft.read_only.option = if lease {
            ReadOnlyOption::LeaseBased
        } else {
            ReadOnlyOption::Safe
        };
    }

    /// Sends the lease round when one is due, and one ReadIndex request
    /// for the causal reads asked since the last poll.
    fn flush_reads(&mut self) {
        if self.raw.raft.leader_id == raft::INVALID_ID {
            return; // raft-rs would drop them; asked once a leader is known
        }
        let (leader, term) = (self.is_leader(), self.raw.raft.term);
        if let Some(ctx) = self.fences.lease_round(self.now, leader, term) {
            self.raw.raft.read_only.option = ReadOnlyOption::Safe;
            self.raw.read_index(ctx);
        }
        if let Some(ctx) = self.fences.to_ask(self.now, term) {
            self.set_read_mode();
            self.raw.read_index(ctx);
        }
    }

    /// Fences for the reads whose index this node has applied.
    fn release_fences(&mut self) {
        let reads = self.fences.applied(self.raw.raft.raft_log.applied);
        if !reads.is_empty() {
            self.out.push(Output::Fence {
                reads,
                seqno: self.seq.last_seqno(),
            });
        }
    }

    /// Whether a follower should ignore `msg`: it comes from a peer outside
    /// the configuration this node knows, while this node is in it and
    /// hears from a leader it knows. Such a peer (admitted by TLS or the
    /// allowlist but removed or never added, or a crafted stream) could
    /// otherwise raise terms, start elections or pose as leader.
    ///
    /// A node's configuration can lag the leader's: one that joined by a
    /// snapshot knows the configuration of the snapshot's index, and the
    /// members added since (the current leader among them) only as it
    /// replays the log. So a stranger is heard when this node is not in
    /// its own configuration (a joiner before its first snapshot, a
    /// removed node) or has not heard from a known leader for an election
    /// timeout: the new leader it does not know yet then gets through.
    fn ignores_stranger(&mut self, msg: &Message) -> bool {
        let me = self.me.raft_id;
        let prs = self.raw.raft.prs();
        if prs.get(me).is_none() || prs.get(msg.from).is_some() {
            return false;
        }
        let leader = self.raw.raft.leader_id;
        let led = leader != raft::INVALID_ID
            && leader != me
            && prs.get(leader).is_some()
            && self
                .last_heard
                .get(&leader)
                .is_some_and(|t| self.now <= t + self.election_timeout_ms());
        if led {
            self.strangers_ignored += 1;
        }
        led
    }

    /// Raft messages ignored because their sender is not in the
    /// configuration (see `ignores_stranger`).
    pub fn strangers_ignored(&self) -> u64 {
        self.strangers_ignored
    }

    /// A removed node still talks Raft to the leader: tell it, at most
    /// once per `retry_ms` (a removed node retries its messages often).
    fn tell_not_member(&mut self, to: u64) {
        let due = self
            .not_member_told
            .get(&to)
            .is_none_or(|t| self.now >= t + self.cfg.retry_ms);
        if !due {
            return;
        }
        // Bound: one entry per removed node heard recently; a flood of
        // made-up ids only costs a reset of the rate limit.
        if self.not_member_told.len() >= 1024 {
            self.not_member_told.clear();
        }
        self.not_member_told.insert(to, self.now);
        self.out.push(Output::NotMember { to });
    }

    /// A peer asks to join: propose it as a learner (forwarded to the
    /// leader by Raft if this node is a follower).
    /// `cert`: the fingerprint of the certificate the request came with
    /// (TLS), bound to the joiner's Raft id in the same configuration
    /// change once the cluster runs at [`BINDING_VERSION`].
    pub fn handle_join(&mut self, info: MemberInfo, cert: Option<CertFingerprint>) {
        if self.retired {
            return;
        }
        if self.seq.history().is_none() || self.seq.is_member(info.raft_id) {
            return;
        }
        // The same node restarted (same group address, or the member id
        // it kept for pc.recovery) while its earlier incarnation is still
        // a member: that one is dead. Remove it first, so it does not
        // count as a voter next to its successor; the joiner asks again.
        let earlier = self
            .seq
            .members()
            .iter()
            .find(|m| m.info.peer_addr == info.peer_addr || m.info.uuid == info.uuid)
            .map(|m| m.info.raft_id);
        if let Some(old) = earlier {
            if self.conf_change_due() {
                self.propose_change(ConfChangeType::RemoveNode, old);
            }
            return;
        }
        self.last_heard.insert(info.raft_id, self.now);
        let mut cc = ConfChange::default();
        cc.set_change_type(ConfChangeType::AddLearnerNode);
        cc.node_id = info.raft_id;
        // Without a fingerprint the context is the plain description.
        let cert = cert.filter(|_| self.seq.cluster_version() >= BINDING_VERSION);
        cc.context = info.encode_admission(cert.as_ref()).into();
        let _ = self.raw.propose_conf_change(vec![], cc);
    }

    /// A peer says this node's removal is applied. Returns whether the
    /// graceful leave is complete: only a node that asked to leave takes
    /// the word of a member for it.
    pub fn handle_farewell(&mut self, from: u64) -> bool {
        let complete = self.leaving && self.seq.is_member(from) && from != self.me.raft_id;
        if complete {
            self.left = true;
        }
        complete
    }

    /// Whether a graceful leave completed: own removal seen or announced,
    /// or nobody else is left (the last member cannot be removed, and the
    /// others left while this node was leaving too).
    pub fn has_left(&self) -> bool {
        self.left
            || (self.leaving && self.was_member && !self.is_member())
            || (self.leaving && self.is_member() && self.seq.members().len() == 1)
    }

    /// Leave the cluster gracefully: hand leadership over, then propose
    /// this node's removal. Done when a view without this node arrives.
    pub fn leave(&mut self) {
        self.leaving = true;
        self.last_conf_change = None;
        self.leave_step();
    }

    fn leave_step(&mut self) {
        if self.retired || !self.is_member() || !self.conf_change_due() {
            return;
        }
        if self.is_leader() && !self.handed_over {
            // The voter heard from last: a dead one never takes over, and
            // Raft drops every proposal while a transfer is pending. Only
            // once: if leadership comes back (the other node is leaving
            // too), this node removes itself as leader; Raft then elects a
            // leader among the rest.
            let other = self.voter_heard_last(|_| true);
            if let Some(other) = other {
                self.handed_over = true;
                self.raw.transfer_leader(other);
                return;
            }
        }
        self.propose_change(ConfChangeType::RemoveNode, self.me.raft_id);
    }

    /// A leader whose segment has fewer data voters than another: the
    /// voter heard from last in the segment with the most (ties to the
    /// lower segment number), if one answers. Never while the cluster runs
    /// a version before `RELAY_VERSION`.
    fn voter_in_a_bigger_segment(&self, fresh: u64) -> Option<u64> {
        if self.seq.cluster_version() < RELAY_VERSION {
            return None;
        }
        let mut voters: BTreeMap<u8, usize> = BTreeMap::new();
        for m in self
            .seq
            .members()
            .iter()
            .filter(|m| m.voter && !m.arbitrator)
        {
            *voters.entry(m.info.segment).or_default() += 1;
        }
        let mine = voters.get(&self.me.segment).copied().unwrap_or(0);
        let (&best, &most) = voters.iter().rev().max_by_key(|(_, n)| **n)?;
        if most <= mine {
            return None;
        }
        let now = self.now;
        self.voter_heard_last(|m| {
            !m.arbitrator
                && m.info.segment == best
                && self
                    .last_heard
                    .get(&m.info.raft_id)
                    .is_some_and(|h| now <= h + fresh)
        })
    }

    /// The other voter this node heard from last among those `pick`
    /// accepts: the one with the newest log it knows of, and not a dead
    /// one (a leadership transfer to a dead voter only stalls).
    fn voter_heard_last(&self, pick: impl Fn(&Member) -> bool) -> Option<u64> {
        self.seq
            .members()
            .iter()
            .filter(|m| m.voter && m.info.raft_id != self.me.raft_id && pick(m))
            .map(|m| m.info.raft_id)
            .max_by_key(|id| self.last_heard.get(id).copied().unwrap_or(0))
    }

    fn conf_change_due(&mut self) -> bool {
        let due = self
            .last_conf_change
            .is_none_or(|t| self.now >= t + self.cfg.retry_ms);
        if due {
            self.last_conf_change = Some(self.now);
        }
        due
    }

    fn propose_change(&mut self, kind: ConfChangeType, id: u64) {
        if self.retired {
            return;
        }
        let mut cc = ConfChange::default();
        cc.set_change_type(kind);
        cc.node_id = id;
        let _ = self.raw.propose_conf_change(vec![], cc);
    }

    /// Advances time to `now` (milliseconds, monotonic).
    pub fn tick(&mut self, now: u64) {
        self.now = self.now.max(now);
        self.obligation_clock
            .advance(self.now.max(self.lease_clock));
        if self.retired {
            return;
        }
        let floor = self
            .now
            .saturating_sub(self.cfg.max_catch_up_ticks.saturating_mul(self.cfg.tick_ms));
        self.next_tick = self.next_tick.max(floor);
        while self.now >= self.next_tick {
            self.raw.tick();
            self.next_tick += self.cfg.tick_ms;
        }
        let stale: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| self.may_be_lost(p))
            .map(|(id, _)| *id)
            .collect();
        for id in stale {
            if let Some(p) = self.pending.remove(&id) {
                self.retries.insert(id, p.retries + 1);
                self.queued.push(p.proposal);
            }
        }
        if !self.is_member() && !self.was_member && !self.leaving {
            let due = self
                .last_join
                .is_none_or(|t| self.now >= t + self.cfg.join_retry_ms);
            if due {
                self.last_join = Some(self.now);
                self.out.push(Output::Join(self.me.clone()));
            }
        }
        self.snapshot_watchdog();
        self.ping_granters();
        self.declare_stateless();
        if self.leaving {
            self.leave_step();
        } else if self.is_leader() {
            self.leader_duties();
        }
    }

    /// raft-rs waits for a peer to acknowledge a snapshot before it sends
    /// that peer anything else, and never sends it again by itself: a lost
    /// snapshot, or a lost acknowledgement, would stall the peer for as
    /// long as this node leads. After `retry_ms` (doubling with each retry
    /// of the same snapshot, up to 64 times, so a slow link is not flooded
    /// with copies) the transfer is reported as failed, so Raft probes the
    /// peer again and, if the peer still needs one, sends the same snapshot
    /// again (the log is not compacted further while the receiver, a
    /// member, has not reported what it applied; a peer that has the
    /// snapshot already ignores it).
    /// `gcs.stateless`: tells the group once this node is a member of a
    /// cluster that knows the flag, so that no joiner picks it as donor.
    fn declare_stateless(&mut self) {
        if !self.cfg.stateless
            || self.stateless_told
            || !self.is_member()
            || self.seq.cluster_version() < super::action::STATELESS_VERSION
        {
            return;
        }
        self.stateless_told = true;
        let raft_id = self.me.raft_id;
        self.propose_internal(Action::Stateless { raft_id });
    }

    fn snapshot_watchdog(&mut self) {
        if !self.is_leader() {
            self.snapshot_sent.clear();
            return;
        }
        let now = self.now;
        let mut failed = Vec::new();
        let mut sends = std::mem::take(&mut self.snapshot_sent);
        for (&id, pr) in self.raw.raft.prs().iter() {
            match pr.state {
                ProgressState::Snapshot => {
                    let fresh = SnapshotSend {
                        index: pr.pending_snapshot,
                        since: now,
                        retries: 0,
                        waiting: true,
                    };
                    let send = sends.entry(id).or_insert(fresh);
                    if send.index != pr.pending_snapshot {
                        *send = fresh;
                    } else if !send.waiting {
                        // Sent again after a reported failure.
                        send.waiting = true;
                        send.since = now;
                    }
                    if now >= send.since + (self.cfg.retry_ms << send.retries.min(6)) {
                        send.retries += 1;
                        send.waiting = false;
                        failed.push(id);
                    }
                }
                // Between a reported failure and the next attempt.
                ProgressState::Probe => {}
                ProgressState::Replicate => {
                    sends.remove(&id);
                }
            }
        }
        sends.retain(|id, _| self.raw.raft.prs().get(*id).is_some());
        self.snapshot_sent = sends;
        for id in failed {
            self.raw.report_snapshot(id, SnapshotStatus::Failure);
        }
    }

    fn leader_duties(&mut self) {
        let me = self.me.raft_id;
        let now = self.now;
        if self.lead_term != self.raw.raft.term {
            // Newly elected: as a follower this node heard from the leader
            // alone (never from learners), so what it heard before says
            // nothing about the others. Give everyone a full timeout.
            self.lead_term = self.raw.raft.term;
            self.last_heard.clear();
        }
        let prs = self.raw.raft.prs();
        self.stubs
            .prune(|id| prs.get(id).map_or(u64::MAX, |p| p.matched));
        if let Some(version) = self.seq.upgradable_to() {
            // Every member speaks a newer version: switch, at one log
            // position for all (re-proposed if the entry is lost).
            if self
                .version_proposed
                .is_none_or(|t| now >= t + self.cfg.retry_ms)
            {
                self.version_proposed = Some(now);
                self.propose_internal(Action::ClusterVersion { version });
            }
        }
        let wanted = wanted_voters(self.seq.members());
        let mut promote = None;
        let mut demote = None;
        let mut evict = None;
        // A new voter raises the quorum: only while every voter answers,
        // or a dead one not evicted yet would count against it (a quick
        // restart then a second failure would leave no majority).
        let fresh = self.election_timeout_ms();
        let mut voters_answer = true;
        for m in self.seq.members() {
            let id = m.info.raft_id;
            if id == me {
                continue;
            }
            let heard = *self.last_heard.entry(id).or_insert(now);
            if m.voter && now > heard + fresh {
                voters_answer = false;
            }
            if now > heard + self.cfg.suspect_timeout_ms {
                evict = Some(id);
            } else if !m.voter && m.state == MemberState::Synced && wanted.contains(&id) {
                promote = Some(id);
            } else if m.voter && !wanted.contains(&id) {
                demote = Some(id);
            }
        }
        if let Some(id) = evict {
            if self.conf_change_due() {
                self.propose_change(ConfChangeType::RemoveNode, id);
            }
        } else if let (Some(id), true) = (promote, voters_answer) {
            if self.conf_change_due() {
                self.propose_change(ConfChangeType::AddNode, id);
            }
        } else if let Some(id) = demote {
            // After the promotions: the quorum never loses a wanted voter.
            if self.conf_change_due() {
                self.propose_change(ConfChangeType::AddLearnerNode, id);
            }
        } else if self.cfg.arbitrator {
            // An arbitrator won an election (its log was the longest):
            // hand over to the data voter heard from last, which has the
            // newest log among them.
            let to = self.voter_heard_last(|m| {
                !m.arbitrator
                    && self
                        .last_heard
                        .get(&m.info.raft_id)
                        .is_some_and(|h| now <= h + fresh)
            });
            if let Some(to) = to {
                if self.conf_change_due() {
                    self.raw.transfer_leader(to);
                }
            }
        } else if let Some(to) = self.voter_in_a_bigger_segment(fresh) {
            // Writes from the leader's site commit without a WAN round
            // trip, so the leader belongs where most voters are (ADR 0020).
            if self.conf_change_due() {
                self.raw.transfer_leader(to);
            }
        } else if !wanted.contains(&me) {
            // The leader itself should not vote: hand over to a wanted
            // voter, which then demotes this node.
            let successor = self
                .seq
                .members()
                .iter()
                .find(|m| m.voter && wanted.contains(&m.info.raft_id))
                .map(|m| m.info.raft_id);
            if let Some(to) = successor {
                if self.conf_change_due() {
                    self.raw.transfer_leader(to);
                }
            }
        }
    }

    /// Proposes what is queued, processes Raft's `Ready`, and returns what
    /// the caller must send and deliver.
    pub fn poll(&mut self) -> Vec<Output> {
        if !self.failed && !self.retired {
            self.flush_proposals();
            self.flush_reads();
            // The gate may have opened: acknowledgements came, or what
            // this node owed expired.
            self.release_held();
            self.sync_applied();
            while !self.failed && !self.retired && self.raw.has_ready() {
                self.handle_ready();
            }
            self.note_leader();
            if !self.failed {
                if let Err(e) = self.maybe_compact() {
                    self.fail(e);
                }
            }
        }
        std::mem::take(&mut self.out)
    }

    /// Moves fragments into `queued` while the window has room.
    fn release_fragments(&mut self) {
        if self.fragments.is_empty() {
            return;
        }
        let in_window = |p: &Proposal| match &p.action {
            Action::Fragment { bytes, .. } => bytes.len(),
            _ => 0,
        };
        let mut used: usize = self.pending.values().map(|p| in_window(&p.proposal)).sum();
        used += self.queued.iter().map(in_window).sum::<usize>();
        while let Some(next) = self.fragments.front() {
            let size = in_window(next);
            if used > 0 && used + size > self.cfg.fragment_window {
                break;
            }
            used += size;
            let next = self.fragments.pop_front().expect("front exists");
            self.queued.push(next);
        }
    }

    fn flush_proposals(&mut self) {
        if self.raw.raft.leader_id == raft::INVALID_ID {
            return;
        }
        self.release_fragments();
        if self.queued.is_empty() {
            return;
        }
        let queued = std::mem::take(&mut self.queued);
        let mut batch = Vec::new();
        let mut bytes = 0;
        for p in queued {
            let size = proposal_size(&p);
            if !batch.is_empty() && bytes + size > self.cfg.max_batch_bytes {
                self.propose_batch(std::mem::take(&mut batch));
                bytes = 0;
            }
            bytes += size;
            batch.push(p);
        }
        if !batch.is_empty() {
            self.propose_batch(batch);
        }
    }

    fn propose_batch(&mut self, batch: Vec<Proposal>) {
        // A dropped proposal stays pending and is retried.
        // A follower's batch goes to the leader and comes back in its
        // append: named, so the leader can leave the data out (`echo`).
        let context = if !self.is_leader() && self.seq.cluster_version() >= RELAY_VERSION {
            self.next_forward += 1;
            echo::context(self.me.raft_id, self.next_forward)
        } else {
            Vec::new()
        };
        let accepted = self.raw.propose(context, encode_batch(&batch)).is_ok();
        for p in batch {
            let pending = Pending {
                at: self.now,
                term: self.raw.raft.term,
                leader: self.raw.raft.leader_id,
                accepted,
                retries: self.retries.remove(&p.id).unwrap_or(0),
                bytes: proposal_size(&p),
                proposal: p,
            };
            self.pending.insert(pending.proposal.id, pending);
        }
    }

    /// Whether a pending proposal may never be ordered unless proposed
    /// again (see the module comment).
    fn may_be_lost(&self, p: &Pending) -> bool {
        if !p.accepted {
            return self.now >= p.at + self.cfg.retry_ms;
        }
        if p.term != self.raw.raft.term || p.leader != self.raw.raft.leader_id {
            return true;
        }
        if self.is_leader() {
            return false; // in our own log: it commits or the term changes
        }
        let deadline =
            (self.cfg.retry_ms << p.retries.min(3)) as usize + p.bytes / FORWARD_BYTES_PER_MS;
        self.now >= p.at + deadline as u64
    }

    fn send_all(&mut self, msgs: Vec<Message>) {
        let mut ready = Vec::with_capacity(msgs.len());
        let last = self.raw.raft.raft_log.last_index();
        let all_committed = self.raw.raft.raft_log.committed == last;
        // The leader's next chance to send a heartbeat: the next interval,
        // or after the driver's sleep, which is likely as long as the last
        // (a longer one to come is cut short for it: `close_wait_ms`).
        let next_chance = self.planned_wait_ms.max(self.heartbeat_ms());
        for mut msg in msgs {
            if self.repeats_big_append(&msg) {
                continue;
            }
            let settled = all_committed && self.is_leader() && self.settled(msg.to, last);
            if self.beats.spare(&msg, self.now, settled, next_chance) {
                continue;
            }
            self.beats.sent(&msg, self.now);
            if msg.get_msg_type() == raft::eraftpb::MessageType::MsgReadIndexResp {
                // A follower's causal read waits for the leader's log, not
                // its commit index (`read_index`). Not in `index`: raft-rs
                // followers commit up to it. `commit` is otherwise unused
                // in this message.
                msg.commit = self.read_index();
            }
            self.forwarded.remember(self.me.raft_id, &msg);
            ready.push(msg);
        }
        let (direct, bundles) = if self.is_leader() && self.seq.cluster_version() >= RELAY_VERSION {
            // Relays only where some member is in another segment: a
            // one-site cluster (the usual one) skips the planning.
            let fresh = self.election_timeout_ms();
            if self.now >= self.relay_review {
                self.review_relays(fresh);
            }
            // No relays where peers are authenticated: a relayed message
            // cannot show who first sent it (`sender_checks`).
            let sites = !self.cfg.checked_senders
                && self
                    .seq
                    .members()
                    .iter()
                    .any(|m| m.info.segment != self.me.segment);
            let (mut direct, mut bundles) = if sites {
                let segments: HashMap<u64, u8> = self
                    .seq
                    .members()
                    .iter()
                    .map(|m| (m.info.raft_id, m.info.segment))
                    .collect();
                relay::plan(
                    ready,
                    self.me.segment,
                    |id| segments.get(&id).copied(),
                    |segment| self.relay_of(segment, fresh),
                )
            } else {
                (ready, Vec::new())
            };
            for m in direct.iter_mut() {
                if m.get_msg_type() == raft::eraftpb::MessageType::MsgAppend {
                    let to = m.to;
                    let matched = self.matched(to);
                    let saved = self.stubs.elide(to, matched, std::slice::from_mut(m));
                    self.wan.elided_bytes += saved as u64;
                }
            }
            for (via, msgs) in bundles.iter_mut() {
                let matched = self.matched(*via);
                self.wan.elided_bytes += self.stubs.elide(*via, matched, msgs) as u64;
            }
            (direct, bundles)
        } else {
            (ready, Vec::new())
        };
        for msg in direct {
            if self.in_other_segment(msg.to) {
                self.wan.entries_sent += msg.entries.len() as u64;
            }
            self.out.push(Output::Send { to: msg.to, msg });
        }
        for (via, msgs) in bundles {
            self.wan.entries_sent += relay::distinct_entries(&msgs) as u64;
            self.wan.bundles_sent += 1;
            self.out.push(Output::Relay { via, msgs });
        }
    }

    /// The transport lost every connection to member `id` (a crash, a
    /// cut): it relays no more until it is heard from again, so that its
    /// segment's appends go another way at once.
    pub fn peer_lost(&mut self, id: u64) {
        // Former members leave the set here, so it holds members only.
        let seq = &self.seq;
        self.disconnected.retain(|m| seq.member(*m).is_some());
        if self.seq.member(id).is_some() {
            self.disconnected.insert(id);
        }
        let before = self.relays.len();
        self.relays.retain(|_, relay| *relay != id);
        self.wan.relays_lost += (before - self.relays.len()) as u64;
    }

    /// Members marked by `peer_lost` and not heard since (for tests of
    /// the bound).
    pub fn disconnected(&self) -> usize {
        self.disconnected.len()
    }

    /// The relay of a remote segment: the one chosen before while it
    /// answers (a follower's appends keep one path, so their order), else
    /// the member there that forwarded the most lately, else the one heard
    /// from last; only one heard within an election timeout (a dead relay
    /// would hold the others' appends until it is replaced).
    fn relay_of(&mut self, segment: u8, fresh: u64) -> Option<u64> {
        if let Some(&r) = self.relays.get(&segment) {
            if self.may_relay(r, segment, fresh) {
                return Some(r);
            }
        }
        let chosen = self.relay_candidates(segment, fresh).max_by_key(|id| {
            let wrote = self.proposed.get(id).copied().unwrap_or(0);
            (wrote, self.last_heard.get(id).copied().unwrap_or(0))
        });
        match chosen {
            Some(r) => self.relays.insert(segment, r),
            None => self.relays.remove(&segment),
        };
        chosen
    }

    /// The members of `segment` that may relay (`may_relay`).
    fn relay_candidates(&self, segment: u8, fresh: u64) -> impl Iterator<Item = u64> + '_ {
        self.seq
            .members()
            .iter()
            .map(|m| m.info.raft_id)
            .filter(move |id| self.may_relay(*id, segment, fresh))
    }

    fn may_relay(&self, id: u64, segment: u8, fresh: u64) -> bool {
        id != self.me.raft_id
            && self.segment_of(id) == Some(segment)
            && !self.disconnected.contains(&id)
            && self
                .last_heard
                .get(&id)
                .is_some_and(|at| self.now <= at + fresh)
    }

    /// Once a second: a segment whose main writer forwarded more than
    /// twice what its relay did (and at least `RELAY_WRITER_BYTES`) gets
    /// that writer as relay, which then fills
    /// the echoes of its writes itself, so they cross the WAN once. Rarely:
    /// a change may let one append overtake another (a retry).
    fn review_relays(&mut self, fresh: u64) {
        self.relay_review = self.now + RELAY_REVIEW_MS;
        let relays: Vec<(u8, u64)> = self.relays.iter().map(|(s, r)| (*s, *r)).collect();
        for (segment, relay) in relays {
            let wrote = |id: &u64| self.proposed.get(id).copied().unwrap_or(0);
            let best = self.relay_candidates(segment, fresh).max_by_key(wrote);
            if let Some(best) = best {
                // A writer, not a member's occasional commit report.
                if wrote(&best) >= RELAY_WRITER_BYTES && wrote(&best) > 2 * wrote(&relay) {
                    self.relays.insert(segment, best);
                }
            }
        }
        self.proposed.clear();
    }

    /// What the leader knows `id` stores (u64::MAX: not a peer).
    /// Whether follower `id` holds the leader's whole log (`last`) and
    /// said it knows the commit index, and is in this node's segment (a
    /// WAN link's follower gets every heartbeat): its heartbeats may be
    /// spared (`beats`).
    fn settled(&self, id: u64, last: u64) -> bool {
        let committed = self.raw.raft.raft_log.committed;
        !self.in_other_segment(id)
            && self
                .raw
                .raft
                .prs()
                .get(id)
                .is_some_and(|p| p.matched == last && p.committed_index >= committed)
    }

    fn matched(&self, id: u64) -> u64 {
        self.raw.raft.prs().get(id).map_or(u64::MAX, |p| p.matched)
    }

    /// A member's segment (`gmcast.segment`); None for a non-member.
    pub fn segment_of(&self, id: u64) -> Option<u8> {
        self.seq.member(id).map(|m| m.info.segment)
    }

    /// Whether `id` is a member of another segment than this node's.
    pub fn in_other_segment(&self, id: u64) -> bool {
        self.segment_of(id).is_some_and(|s| s != self.me.segment)
    }

    /// Messages from a leader's bundle (`relay`), received from `from`: a
    /// relay passes on only its sender's own messages, each to a member of
    /// this node's segment; its own it steps.
    pub fn step_relay(&mut self, from: u64, msgs: Vec<Message>) {
        for mut msg in msgs {
            if msg.from != from {
                continue;
            }
            // The leader left out what this node forwarded (`echo`): put
            // it back before passing the message on.
            if !self.forwarded.fill(self.me.raft_id, &mut msg) {
                self.wan.unfilled += 1;
                continue;
            }
            if msg.to == self.me.raft_id {
                self.step(msg);
            } else if self.segment_of(msg.to) == Some(self.me.segment) {
                self.wan.forwarded += 1;
                self.out.push(Output::Forward { to: msg.to, msg });
            }
        }
    }

    /// What crossed to other segments so far.
    pub fn wan_counters(&self) -> WanCounters {
        self.wan
    }

    /// Whether `msg` sends a peer the same big entries again while the
    /// first copy may still be on its way. raft-rs re-sends the entries
    /// after the peer's last acknowledged index on every heartbeat
    /// answer while it probes a peer; with a 300 MB entry that is a copy
    /// every 100 ms. The first copy gets the time its size needs on a
    /// 50 MB/s link (plus `retry_ms`) before an identical one goes.
    fn repeats_big_append(&mut self, msg: &Message) -> bool {
        if msg.get_msg_type() != raft::eraftpb::MessageType::MsgAppend {
            return false;
        }
        let bytes: usize = msg.entries.iter().map(|e| e.data.len()).sum();
        if bytes < BIG_APPEND {
            return false;
        }
        let last = msg.entries.last().map_or(0, |e| e.index);
        let key = (msg.to, msg.index, last);
        let now = self.now;
        if let Some((k, until)) = self.big_appends.get(&msg.to) {
            if *k == key && now < *until {
                return true;
            }
        }
        let until = now + self.cfg.retry_ms + (bytes / FORWARD_BYTES_PER_MS) as u64;
        self.big_appends.retain(|_, (_, u)| *u > now);
        self.big_appends.insert(msg.to, (key, until));
        false
    }

    fn handle_ready(&mut self) {
        let mut ready = self.raw.ready();
        self.send_all(ready.take_messages());
        let term = self.raw.raft.term;
        for rs in ready.take_read_states() {
            // raft-rs answers with the commit index; the leader's own reads
            // wait for its log (`read_index`). A follower's answers are
            // taken in `step`, so these are the leader's.
            let index = rs.index.max(self.read_index());
            self.fences.answered(&rs.request_ctx, index, term);
        }
        let store = self.raw.raft.raft_log.store.clone();
        if !ready.snapshot().is_empty() {
            let snap = ready.snapshot().clone();
            if let Err(e) = self.install_snapshot(&store, snap) {
                self.fail(e);
                return;
            }
        }
        self.apply(ready.take_committed_entries());
        if self.is_leader() && self.raw.raft.prs().get(self.me.raft_id).is_none() {
            // Our own removal, applied while leading (see `retired`).
            self.retired = true;
            self.left = true;
            self.tell_commit(None);
            return;
        }
        for e in ready.entries() {
            if e.get_entry_type() != EntryType::EntryNormal {
                self.follower_commit.stored_conf_change(e.index);
            }
        }
        if let Err(e) = store.append(ready.entries()) {
            self.fail(format!("cannot append to the Raft log: {e}"));
            return;
        }
        self.forwarded.stored(self.me.raft_id, ready.entries());
        if let Some(hs) = ready.hs() {
            store.set_hardstate(hs.clone());
        }
        self.send_all(ready.take_persisted_messages());
        let stored_new = !ready.entries().is_empty();
        // Not `advance`: it would mark every committed entry applied,
        // and the release gate may hold some (`held`).
        let mut light = self.raw.advance_append(ready);
        if let Some(commit) = light.commit_index() {
            store.set_commit(commit);
        }
        self.send_all(light.take_messages());
        self.apply(light.take_committed_entries());
        self.sync_applied();
        if stored_new {
            self.tell_stored();
        }
        self.release_fences();
        self.commit_as_follower();
    }

    /// A follower commits what it stores of the current term when it and
    /// the leader are a quorum (`follower_commit`, ADR 0017); the entries
    /// come out of the next `Ready`.
    fn commit_as_follower(&mut self) {
        let raft = &self.raw.raft;
        if raft.state != StateRole::Follower {
            return;
        }
        let log = &raft.raft_log;
        let stored = log.persisted.min(log.last_index());
        if stored <= log.committed {
            return; // nothing new (a heartbeat): spare the configuration copy
        }
        let Ok(stored_term) = log.term(stored) else {
            return;
        };
        let conf = raft.prs().conf().to_conf_state();
        let view = FollowerView {
            me: self.me.raft_id,
            leader: raft.leader_id,
            is_follower: raft.state == StateRole::Follower,
            voters: &conf.voters,
            joint: !conf.voters_outgoing.is_empty(),
            stored,
            stored_term,
            term: raft.term,
            applied: log.applied,
            committed: log.committed,
        };
        if let Some(upto) = self.follower_commit.commit_index(&view) {
            self.raw.raft.raft_log.commit_to(upto);
        }
    }

    /// A snapshot from the leader: only a node that has not been a member
    /// yet may start from one (what it skips is history from before it
    /// joined). A member would skip ordered events it must apply: stop it
    /// instead (compaction is designed so that this does not happen).
    fn install_snapshot(&mut self, store: &LogStore, snap: Snapshot) -> Result<(), String> {
        let index = snap.get_metadata().index;
        if self.was_member {
            return Err(format!(
                "the leader sent a snapshot at log index {index}: this member missed \
                 ordered events it can no longer receive; restart it to rejoin by state transfer"
            ));
        }
        let seq = Sequencer::restore(&snap.data)
            .map_err(|e| format!("snapshot at log index {index} does not decode: {e}"))?;
        let view = seq
            .view()
            .ok_or_else(|| format!("the snapshot at log index {index} predates the genesis"))?;
        // The leader adds a joiner that joined after the snapshot to its
        // configuration; what this node serves later is the real one.
        let mut current = snap.clone();
        current.mut_metadata().set_conf_state(conf_state(&seq));
        store
            .install(snap, current)
            .map_err(|e| format!("cannot install the snapshot at log index {index}: {e}"))?;
        self.seq = seq;
        self.held.retain(|e| e.index > index);
        self.released = self.released.max(index);
        self.restored_at = Some((self.seq.delivered(), self.seq.last_seqno()));
        self.cached_after = Some(self.seq.last_seqno());
        self.pending_snapshot = None;
        let restored = Delivery::View(view.clone());
        self.observe(&restored);
        self.out.push(Output::Restored(view));
        Ok(())
    }

    /// Compacts the log in two steps, so that no node's log ever starts
    /// beyond what a member has applied: first, when the log holds half
    /// its budget, a snapshot of the sequencer at the applied index A is
    /// kept aside; once the log is full and every member has reported
    /// (through the log) having applied A, the log is compacted to A and
    /// that snapshot serves joiners. A member added later has applied more
    /// than A by the time it counts as one, and a joiner starts at a
    /// compaction point. So a leader always holds the entries a member
    /// needs, and a member never receives a snapshot (which would make it
    /// skip ordered events: `install_snapshot` stops it). What remains
    /// after A, about half the budget, is the IST window.
    fn maybe_compact(&mut self) -> Result<(), String> {
        if self.seq.history().is_none() {
            return Ok(());
        }
        let applied = self.raw.raft.raft_log.applied;
        let entries = applied.saturating_sub(self.raw.raft.raft_log.first_index());
        let bytes = self.raw.raft.raft_log.store.bytes();
        let full = entries >= self.cfg.compact_after || bytes >= self.cfg.compact_bytes;
        let half = entries >= self.cfg.compact_after / 2 || bytes >= self.cfg.compact_bytes / 2;
        // A snapshot copies the fragments in flight and the keys of the
        // writesets not yet purged: while a big writeset is on its way or
        // being applied that is hundreds of MB, copied on this thread (one
        // such round per 64 MiB of fragments stalled every node). Wait for
        // it to pass, as long as the log stays within twice its budget
        // plus those bytes (which it holds anyway while they stream by).
        let weight = self.seq.snapshot_weight();
        let overdue = entries >= self.cfg.compact_after.saturating_mul(2)
            || bytes >= (self.cfg.compact_bytes.saturating_mul(2)).saturating_add(weight as u64);
        let cheap = weight <= SNAPSHOT_WEIGHT_DEFER;
        match &self.pending_snapshot {
            Some((snap, _)) => {
                let at = snap.get_metadata().index;
                if full && self.seq.compactable_index().min(applied) >= at {
                    let (snap, seqno) = self.pending_snapshot.take().expect("matched above");
                    self.raw
                        .raft
                        .raft_log
                        .store
                        .compact(snap)
                        .map_err(|e| format!("cannot compact the log to {at}: {e}"))?;
                    self.cached_after = Some(seqno);
                }
            }
            None if half && (cheap || overdue) => {
                let snap = self.snapshot_now(applied)?;
                self.pending_snapshot = Some((snap, self.seq.last_seqno()));
            }
            None => {}
        }
        Ok(())
    }

    /// Every event after this seqno can be replayed from this node's log
    /// (`wsrep_local_cached_downto` is the next one).
    pub fn cached_after(&self) -> Option<i64> {
        self.cached_after
    }

    /// The sequencer's state, which is the state after `applied`.
    fn snapshot_now(&self, applied: u64) -> Result<Snapshot, String> {
        let term = self
            .raw
            .raft
            .raft_log
            .term(applied)
            .map_err(|e| format!("no term for applied index {applied}: {e}"))?;
        let mut snap = Snapshot {
            data: self.seq.snapshot().into(),
            ..Default::default()
        };
        let meta = snap.mut_metadata();
        meta.index = applied;
        meta.term = term;
        meta.set_conf_state(conf_state(&self.seq));
        Ok(snap)
    }

    /// If this node started from a snapshot instead of the whole log: how
    /// many deliveries and which seqnos that snapshot covers.
    pub fn restored_at(&self) -> Option<(u64, i64)> {
        self.restored_at
    }

    /// The Raft index this node has applied.
    pub fn applied_index(&self) -> u64 {
        self.raw.raft.raft_log.applied
    }

    /// One line for diagnostics: the log's bounds and Raft's view of each
    /// peer's replication progress (meaningful on the leader).
    pub fn raft_status(&self) -> String {
        let log = &self.raw.raft.raft_log;
        let mut peers: Vec<String> = self
            .raw
            .raft
            .prs()
            .iter()
            .map(|(id, pr)| {
                format!(
                    "{id}: {:?} matched {} next {} snapshot {}",
                    pr.state, pr.matched, pr.next_idx, pr.pending_snapshot
                )
            })
            .collect();
        peers.sort();
        format!(
            "log {}..={} committed {} applied {}; peers [{}]",
            log.first_index(),
            log.last_index(),
            log.committed,
            log.applied,
            peers.join(", ")
        )
    }

    /// Entries in the in-memory log.
    pub fn log_len(&self) -> u64 {
        self.raw.raft.raft_log.store.entry_count()
    }

    fn fail(&mut self, why: String) {
        self.failed = true;
        self.out.push(Output::Fatal(why));
    }

    /// Committed entries from raft-rs: released in order through the
    /// gate (`release_held`).
    fn apply(&mut self, entries: Vec<Entry>) {
        self.held.extend(entries);
        self.release_held();
    }

    /// raft-rs's applied index follows what was released.
    fn sync_applied(&mut self) {
        if !self.failed && !self.retired && self.released > self.raw.raft.raft_log.applied {
            self.raw.advance_apply_to(self.released);
        }
    }

    /// One committed entry, to the sequencer; its deliveries go out.
    fn apply_entry(&mut self, entry: Entry) {
        let mut deliveries = Vec::new();
        let result = match entry.get_entry_type() {
            EntryType::EntryNormal if entry.data.is_empty() => Ok(()),
            EntryType::EntryNormal => match decode_batch_shared(&entry.data) {
                Ok(batch) => self
                    .seq
                    .entry(batch, &mut deliveries)
                    .map_err(|e| e.to_string())
                    .and_then(|()| self.adopt_founder()),
                Err(e) => Err(format!("log entry {} does not decode: {e}", entry.index)),
            },
            EntryType::EntryConfChange => self.apply_conf_change(&entry, &mut deliveries),
            EntryType::EntryConfChangeV2 => Err(format!(
                "unexpected joint configuration change at log entry {}",
                entry.index
            )),
        };
        if let Err(e) = result {
            self.fail(e);
            return;
        }
        for d in deliveries {
            if let (None, Delivery::View(v)) = (self.cached_after, &d) {
                // The genesis view: the log starts just before it.
                self.cached_after = Some(v.seqno - 1);
            }
            self.observe(&d);
            self.out.push(Output::Deliver(d));
        }
    }

    /// A joiner's Raft starts with an empty configuration: the founding
    /// voter is only in the genesis entry (the founder's storage was
    /// initialised with it). Take it from there, so every node's Raft
    /// configuration is the same function of the log.
    fn adopt_founder(&mut self) -> Result<(), String> {
        if !self.raw.raft.prs().conf().to_conf_state().voters.is_empty() {
            return Ok(());
        }
        let Some(founder) = self.seq.members().first().map(|m| m.info.raft_id) else {
            return Ok(());
        };
        let mut cc = ConfChange::default();
        cc.set_change_type(ConfChangeType::AddNode);
        cc.node_id = founder;
        let cs = self
            .raw
            .apply_conf_change(&cc)
            .map_err(|e| format!("cannot adopt the founding voter: {e}"))?;
        self.raw.raft.raft_log.store.set_conf_state(cs);
        Ok(())
    }

    fn apply_conf_change(&mut self, entry: &Entry, out: &mut Vec<Delivery>) -> Result<(), String> {
        let cc = ConfChange::parse_from_bytes(&entry.data).map_err(|e| {
            format!(
                "configuration change at log entry {} does not decode: {e}",
                entry.index
            )
        })?;
        let mut admitted_cert = None;
        let change = match cc.get_change_type() {
            // A learner added again, without a description: a voter
            // demoted by the weighted quorum.
            ConfChangeType::AddLearnerNode if cc.context.is_empty() => {
                Membership::Demote(cc.node_id)
            }
            ConfChangeType::AddLearnerNode => {
                let (info, cert) = MemberInfo::decode_admission(&cc.context)
                    .map_err(|e| format!("member description at log entry {}: {e}", entry.index))?;
                admitted_cert = cert;
                if info.raft_id != cc.node_id {
                    return Err(format!(
                        "member description at log entry {} names another node",
                        entry.index
                    ));
                }
                Membership::Add(info)
            }
            ConfChangeType::AddNode => Membership::Promote(cc.node_id),
            ConfChangeType::RemoveNode => Membership::Remove(cc.node_id),
        };
        let removed = match change {
            Membership::Remove(id) if id != self.me.raft_id => Some(id),
            _ => None,
        };
        if self
            .seq
            .membership(&change, out)
            .map_err(|e| e.to_string())?
        {
            let cs = self.raw.apply_conf_change(&cc).map_err(|e| {
                format!(
                    "Raft refused configuration change at log entry {}: {e}",
                    entry.index
                )
            })?;
            self.raw.raft.raft_log.store.set_conf_state(cs);
            self.conf_applied_at = entry.index;
            self.conf_applied();
            if let Some(to) = removed.filter(|_| self.is_leader()) {
                self.out.push(Output::Farewell { to });
            }
            if let Membership::Add(info) = &change {
                // A full suspect timeout from now: what `handle_join` noted
                // may be from a join request long before this addition.
                self.last_heard.insert(info.raft_id, self.now);
                if let Some(fp) = admitted_cert {
                    self.seq.bind(info.raft_id, fp);
                }
            }
        }
        Ok(())
    }

    /// Bookkeeping on our own deliveries: stop retrying, note membership.
    fn observe(&mut self, d: &Delivery) {
        let me = self.me.raft_id;
        match d {
            Delivery::Writeset(OrderedWriteset {
                origin, proposal, ..
            })
            | Delivery::Settled { origin, proposal }
                if *origin == me =>
            {
                self.pending.remove(proposal);
                self.retries.remove(proposal);
            }
            Delivery::Barrier { origin, id, .. } if *origin == me => {
                self.pending.remove(id);
                self.retries.remove(id);
            }
            Delivery::TooOld {
                raft_id,
                max_version,
                cluster_version,
            } if *raft_id == me => self.fail(format!(
                "this node speaks group protocol versions up to {max_version}, and the cluster \
                 already runs at {cluster_version}: upgrade this node to a release that \
                 speaks {cluster_version}"
            )),
            Delivery::View(v) => {
                if v.members.iter().any(|m| m.raft_id == me) {
                    if !self.was_member {
                        self.owe_everyone();
                    }
                    self.was_member = true;
                    if !self.supports_told {
                        // Once per incarnation; retried like any proposal.
                        self.supports_told = true;
                        self.propose_internal(Action::Supports {
                            raft_id: me,
                            max_version: self.cfg.protocol_max,
                        });
                    }
                }
                for m in &v.members {
                    self.last_heard.entry(m.raft_id).or_insert(self.now);
                }
            }
            _ => {}
        }
    }
}

/// A snapshot sent to a peer and not acknowledged yet.
#[derive(Debug, Clone, Copy)]
struct SnapshotSend {
    index: u64,
    /// When it was (last) sent.
    since: u64,
    /// Transfers of it reported as failed so far.
    retries: u32,
    /// Sent and not reported as failed since.
    waiting: bool,
}

/// The members that should vote, from their `pc.weight` (Galera's
/// weighted quorum: a component is primary when it holds more than half
/// of the total weight). Raft counts voters, not weights, so:
/// - a member with more than half of the total weight is the only voter:
///   any component with it is primary, any without it is not, exactly as
///   with Galera;
/// - otherwise every member with a weight above 0 votes (exact when the
///   non-zero weights are equal; other mixes are approximated by counting
///   members);
/// - a member with weight 0 never votes (it never counts towards quorum).
///
/// Only members that vote already or are synced can be wanted (a joiner
/// is promoted once synced). If no member would vote, the current voters
/// stay.
pub fn wanted_voters(members: &[super::sequencer::Member]) -> Vec<u64> {
    let dominant = weight_majority(members).filter(|m| m.voter || m.state == MemberState::Synced);
    let wanted: Vec<u64> = match dominant {
        Some(d) => vec![d.info.raft_id],
        None => members
            .iter()
            .filter(|m| m.weight > 0)
            .map(|m| m.info.raft_id)
            .collect(),
    };
    if wanted.is_empty() {
        members
            .iter()
            .filter(|m| m.voter)
            .map(|m| m.info.raft_id)
            .collect()
    } else {
        wanted
    }
}

/// The member holding more than half of the members' total `pc.weight`,
/// if one does (at most one can): alone, it is a primary component.
/// Galera's split brain, the one case `pc.ignore_sb` lets a side stay
/// primary without a majority: the members `reachable` says this side
/// still has hold exactly half of the weight (a node of two, two of four).
/// A minority is not a split brain: it stays non-primary.
pub fn is_exact_half(
    members: &[super::sequencer::Member],
    reachable: impl Fn(u64) -> bool,
) -> bool {
    let total: u64 = members.iter().map(|m| u64::from(m.weight)).sum();
    let here: u64 = members
        .iter()
        .filter(|m| reachable(m.info.raft_id))
        .map(|m| u64::from(m.weight))
        .sum();
    total > 0 && here * 2 == total
}

pub fn weight_majority(members: &[super::sequencer::Member]) -> Option<&super::sequencer::Member> {
    let total: u64 = members.iter().map(|m| u64::from(m.weight)).sum();
    members.iter().find(|m| u64::from(m.weight) * 2 > total)
}

/// Raft's configuration as the sequencer has it: the members, voters or
/// learners (every configuration change goes through the sequencer, so the
/// two agree; a node that started from a snapshot may also have itself as
/// a learner in Raft's until the log adds it).
fn conf_state(seq: &Sequencer) -> ConfState {
    let mut cs = ConfState::default();
    for m in seq.members() {
        if m.voter {
            cs.voters.push(m.info.raft_id);
        } else {
            cs.learners.push(m.info.raft_id);
        }
    }
    cs
}

fn proposal_size(p: &Proposal) -> usize {
    match &p.action {
        Action::Writeset(ws) => ws.size() + 64,
        Action::StateRequest { request, .. } => request.len() + 64,
        Action::Fragment { bytes, .. } => bytes.len() + 64,
        _ => 64,
    }
}

#[cfg(test)]
mod weight_tests {
    use super::{is_exact_half, wanted_voters};
    use crate::group::action::tests::member;
    use crate::group::sequencer::Member;
    use crate::group::MemberState;
    use proptest::prelude::*;

    fn m(id: u64, weight: u32, voter: bool, state: MemberState) -> Member {
        Member {
            info: member(id),
            state,
            voter,
            weight,
            arbitrator: false,
            stateless: false,
            max_version: 0,
        }
    }

    fn synced(id: u64, weight: u32) -> Member {
        m(id, weight, true, MemberState::Synced)
    }

    #[test]
    fn ignore_sb_takes_an_exact_half_and_never_a_minority() {
        let reach = |ids: &'static [u64]| move |id: u64| ids.contains(&id);
        let two = [synced(1, 1), synced(2, 1)];
        assert!(is_exact_half(&two, reach(&[1])), "one node of two");
        let three = [synced(1, 1), synced(2, 1), synced(3, 1)];
        assert!(!is_exact_half(&three, reach(&[1])), "a minority of three");
        assert!(
            !is_exact_half(&three, reach(&[1, 2])),
            "a majority is no split brain"
        );
        let four = [synced(1, 1), synced(2, 1), synced(3, 1), synced(4, 1)];
        assert!(is_exact_half(&four, reach(&[1, 2])));
        assert!(!is_exact_half(&four, reach(&[1])));
        let weighted = [synced(1, 2), synced(2, 1), synced(3, 1)];
        assert!(is_exact_half(&weighted, reach(&[1])), "weight 2 of 4");
        assert!(!is_exact_half(&weighted, reach(&[2])));
        assert!(!is_exact_half(&[], reach(&[])), "no members, no half");
    }

    #[test]
    fn equal_weights_make_everyone_a_voter() {
        let ms = [synced(1, 1), synced(2, 1), synced(3, 1)];
        assert_eq!(wanted_voters(&ms), vec![1, 2, 3]);
    }

    #[test]
    fn a_member_with_more_than_half_of_the_weight_votes_alone() {
        // galera_shutdown_nonprim: pc.weight=2 on node1 of two.
        let ms = [synced(1, 2), synced(2, 1)];
        assert_eq!(wanted_voters(&ms), vec![1]);
        // Exactly half is not more than half.
        let ms = [synced(1, 2), synced(2, 1), synced(3, 1)];
        assert_eq!(wanted_voters(&ms), vec![1, 2, 3]);
    }

    #[test]
    fn weight_zero_never_votes_and_a_joiner_cannot_dominate_yet() {
        let ms = [synced(1, 1), synced(2, 0), synced(3, 1)];
        assert_eq!(wanted_voters(&ms), vec![1, 3]);
        let ms = [synced(1, 1), m(2, 5, false, MemberState::Joiner)];
        assert_eq!(
            wanted_voters(&ms),
            vec![1, 2],
            "the joiner is promoted once synced"
        );
        // Nobody with weight: the current voters stay.
        let ms = [synced(1, 0), m(2, 0, false, MemberState::Synced)];
        assert_eq!(wanted_voters(&ms), vec![1]);
    }

    proptest! {
        /// With a dominant member, "contains the voter" is exactly
        /// Galera's "holds more than half of the weight", for every
        /// component.
        #[test]
        fn a_dominant_member_decides_quorum_as_galera_does(
            weights in proptest::collection::vec(0u32..6, 1..6),
            component in proptest::collection::vec(any::<bool>(), 6),
        ) {
            let ms: Vec<Member> = weights
                .iter()
                .enumerate()
                .map(|(i, w)| synced(i as u64 + 1, *w))
                .collect();
            let total: u32 = weights.iter().sum();
            let wanted = wanted_voters(&ms);
            prop_assert!(!wanted.is_empty());
            if wanted.len() == 1 && weights[(wanted[0] - 1) as usize] * 2 > total {
                let inside: Vec<usize> = (0..ms.len()).filter(|i| component[*i]).collect();
                let weight: u32 = inside.iter().map(|i| weights[*i]).sum();
                let has_voter = inside.contains(&((wanted[0] - 1) as usize));
                prop_assert_eq!(has_voter, weight * 2 > total);
            }
            for id in &wanted {
                let w = weights[(*id - 1) as usize];
                prop_assert!(w > 0 || total == 0, "a zero-weight member votes");
            }
        }
    }
}

#[cfg(test)]
mod keepalive_tests {
    use super::GroupConfig;

    #[test]
    fn the_idle_pace_follows_the_keepalive_within_the_election_timeout() {
        let mut c = GroupConfig::default(); // election timeout 1 s
        c.set_keepalive_ms(1000);
        assert_eq!(c.idle_beat_ms, 500, "Galera's default, capped at 1/2");
        c.set_keepalive_ms(300);
        assert_eq!(c.idle_beat_ms, 300);
        c.set_keepalive_ms(10);
        assert_eq!(
            c.idle_beat_ms, c.quiet_beat_ms,
            "never below the quiet beat"
        );
        c.tick_ms = 200; // election timeout 4 s
        c.set_keepalive_ms(1000);
        assert_eq!(c.idle_beat_ms, 1000);
        c.suspect_timeout_ms = 1000;
        c.set_keepalive_ms(1000);
        assert_eq!(c.idle_beat_ms, 500, "half the suspect timeout");
    }
}
