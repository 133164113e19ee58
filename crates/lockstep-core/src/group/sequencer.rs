//! The sequencer: wsrep semantics as a deterministic function of the Raft
//! log (brief D3). Every node feeds it the same committed entries in the
//! same order and gets the same seqnos, views, member states, donor
//! choices and certification results; nothing here reads a clock or the
//! node's own identity, so a joiner replaying the log arrives at exactly
//! the state everyone else has.

use super::action::{
    Action, CacheIst, CertFingerprint, MemberInfo, Proposal, Writeset, BINDING_VERSION,
    STATELESS_VERSION,
};
use super::member_state::MemberState;
use super::vote::{VoteEvent, Votes};
use crate::certification::{CertError, CertOutcome, CertRequest, Certifier, Seqno};
use crate::group::peer::MIN_PROTOCOL_VERSION;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use wsrep_abi::flags;

/// Purge the certification index once the committed cut has moved this far.
const PURGE_STEP: Seqno = 128;
/// Proposal ids remembered per origin for de-duplicating retries.
const DEDUP_WINDOW: usize = 1 << 16;

/// A membership change taken from the Raft log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Membership {
    /// A new member enters as a Raft learner (a joiner).
    Add(MemberInfo),
    /// A synced learner becomes a voter: no wsrep view.
    Promote(u64),
    /// A voter becomes a learner again (weighted quorum): no wsrep view.
    Demote(u64),
    /// A member leaves (gracefully or evicted).
    Remove(u64),
}

/// A member of the primary component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub info: MemberInfo,
    pub state: MemberState,
    pub voter: bool,
    /// `pc.weight` (1 unless the member said otherwise).
    pub weight: u32,
    /// An arbitrator (`Action::Arbitrator`): it votes in Raft but holds no
    /// data, so it never donates and has no say in consistency votes.
    pub arbitrator: bool,
    /// It runs with `gcs.stateless` (`Action::Stateless`): never a donor.
    pub stateless: bool,
    /// The newest protocol version it speaks (`Action::Supports`); 0
    /// until it said.
    pub max_version: u32,
}

/// A primary view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupView {
    pub history: [u8; 16],
    /// The seqno this view consumed.
    pub seqno: Seqno,
    /// `wsrep_cluster_conf_id`.
    pub conf_id: i64,
    /// Members in join order, identical on every node.
    pub members: Vec<MemberInfo>,
}

/// A writeset (or TOI) the group ordered at `seqno`, and its
/// certification.
#[derive(Debug, Clone, PartialEq)]
pub struct OrderedWriteset {
    pub seqno: Seqno,
    /// The Raft id of the member that proposed it.
    pub origin: u64,
    /// Its proposal id at the origin.
    pub proposal: u64,
    pub ws: Arc<Writeset>,
    pub outcome: CertOutcome,
    /// What it depends on beyond its last-seen seqno
    /// (`Certifier::last_related`), for the commit bypass of its origin;
    /// `None`: unknown or everything before it.
    pub related: Option<Vec<Seqno>>,
}

/// What the sequencer decided for one log position.
#[derive(Debug, Clone, PartialEq)]
pub enum Delivery {
    /// A writeset (or TOI).
    Writeset(OrderedWriteset),
    View(GroupView),
    /// `donor` must send its state to `joiner`; `seqno` is the last seqno
    /// ordered before the request. With `ist_after` the joiner already
    /// has every event (IST from the log it replayed): the donor only
    /// releases the server's SST script in bypass mode and stays Synced.
    Donate {
        donor: u64,
        joiner: u64,
        request: Vec<u8>,
        seqno: Seqno,
        ist_after: Option<Seqno>,
        /// With `ist_after`: send those events from the writeset cache
        /// (`Action::StateRequest`).
        from_cache: Option<CacheIst>,
    },
    /// No member can donate to `joiner` now; it should ask again.
    NoDonor {
        joiner: u64,
    },
    /// The donor reported the end of a transfer.
    Transferred {
        donor: u64,
        joiner: u64,
        seqno: Seqno,
        rcode: i32,
    },
    /// A member's group state changed.
    MemberState {
        raft_id: u64,
        state: MemberState,
    },
    /// A causal-read fence: everything up to `seqno` was ordered before it.
    Barrier {
        origin: u64,
        id: u64,
        seqno: Seqno,
    },
    /// A consistency vote was opened for `seqno` (some member failed to
    /// apply it): every member reports its own outcome.
    VoteRequest {
        seqno: Seqno,
    },
    /// The group's outcome for `seqno`: 0 applied, or an error digest.
    VoteResult {
        seqno: Seqno,
        digest: u64,
    },
    /// The cluster now runs at this protocol version.
    ClusterVersion {
        version: u32,
    },
    /// A member speaks only versions older than the cluster's: it must
    /// leave (and be upgraded).
    TooOld {
        raft_id: u64,
        max_version: u32,
        cluster_version: u32,
    },
    /// A member whose outcome for `seqno` differs from the group's: it is
    /// inconsistent and must leave.
    Inconsistent {
        raft_id: u64,
        seqno: Seqno,
    },
    /// A proposal that produced no delivery of its own (so its origin can
    /// stop retrying it): a duplicate, a state message, an ignored action.
    Settled {
        origin: u64,
        proposal: u64,
    },
    /// A member announced its flow-control level (no seqno: nothing is
    /// applied; every node updates its gate at the same log position).
    FlowControl {
        raft_id: u64,
        level: u8,
    },
}

/// The log is not what every node agrees on: stop the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SequencerError {
    Certification(CertError),
    /// A writeset arrived before any genesis.
    NoHistory,
}

impl std::fmt::Display for SequencerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SequencerError::Certification(e) => write!(f, "{e}"),
            SequencerError::NoHistory => write!(f, "ordered event before the cluster genesis"),
        }
    }
}

impl std::error::Error for SequencerError {}

impl From<CertError> for SequencerError {
    fn from(e: CertError) -> Self {
        SequencerError::Certification(e)
    }
}

/// The group state machine. Its complete state can be written to a
/// snapshot and restored (`snapshot.rs`), so the Raft log can be compacted.
pub struct Sequencer {
    pub(super) history: Option<[u8; 16]>,
    pub(super) last_seqno: Seqno,
    pub(super) conf_id: i64,
    pub(super) last_view_seqno: Seqno,
    pub(super) members: Vec<Member>,
    pub(super) certifier: Certifier,
    /// Latest `last_committed` reported per member.
    pub(super) committed: HashMap<u64, Seqno>,
    pub(super) purged_upto: Seqno,
    pub(super) seen: HashMap<u64, BTreeSet<u64>>,
    /// Writesets above the purge point, in seqno order: what a snapshot
    /// carries so a joiner can rebuild the same certification index.
    pub(super) window: VecDeque<(Seqno, Arc<Writeset>, bool)>,
    /// Keys of the writesets in `window` (asked every round while a
    /// snapshot waits, so counted as they come and go).
    pub(super) window_keys: usize,
    /// Purged writesets too big to free on this thread (`take_reaped`):
    /// freeing a million keys took a second of the driver's round under
    /// load, a stall for every node right after the big apply. Transient,
    /// not in snapshots; at most the big writesets of one purge.
    pub(super) reaped: Vec<Arc<Writeset>>,
    /// Latest Raft index each member reported as applied.
    pub(super) applied: HashMap<u64, u64>,
    /// Deliveries produced so far (a restored node continues counting).
    pub(super) delivered: u64,
    /// Consistency votes in progress and decided. Not in snapshots: a
    /// joiner restored from one was not an elector of older votes.
    pub(super) votes: Votes,
    /// Fragmented actions being received, per (origin, final proposal
    /// id); bounded per origin (`MAX_PARTIAL_PER_ORIGIN`, and
    /// `MAX_PARTIAL_BYTES` in all), dropped when the origin leaves.
    pub(super) partial: BTreeMap<(u64, u64), Partial>,
    /// The protocol version the cluster runs at (`Action::ClusterVersion`):
    /// behaviour that differs between versions follows this, so every
    /// node switches at the same log position.
    pub(super) cluster_version: u32,
    /// Each member's certificate (ADR 0014): its Raft id is refused on
    /// the wire with any other. Bounded by the members (a member's
    /// binding leaves with it).
    pub(super) bindings: BTreeMap<u64, CertFingerprint>,
}

pub use super::reassembly::Partial;

/// A purged writeset with this many keys is freed by the caller
/// (`Sequencer::take_reaped`), not in the driver's round.
const REAP_KEYS: usize = 1 << 16;

/// What one key in the window costs a snapshot, about (a row key of a
/// table with a short name).
const SNAPSHOT_KEY_BYTES: usize = 32;

/// Fragmented actions one member may have in flight at once (one per
/// client thread replicating a big writeset).
pub const MAX_PARTIAL_PER_ORIGIN: usize = 64;
/// Bytes of fragments one member may have in flight: a writeset up to
/// Galera's largest `repl.max_ws_size` (2 GiB), with its envelope.
pub const MAX_PARTIAL_BYTES: usize = (2 << 30) + (16 << 20);

impl Default for Sequencer {
    fn default() -> Self {
        Sequencer::new()
    }
}

impl Sequencer {
    pub fn new() -> Sequencer {
        Sequencer {
            history: None,
            last_seqno: -1,
            conf_id: 0,
            last_view_seqno: -1,
            members: Vec::new(),
            certifier: Certifier::new(-1),
            committed: HashMap::new(),
            purged_upto: -1,
            seen: HashMap::new(),
            window: VecDeque::new(),
            window_keys: 0,
            reaped: Vec::new(),
            applied: HashMap::new(),
            delivered: 0,
            votes: Votes::default(),
            partial: BTreeMap::new(),
            cluster_version: MIN_PROTOCOL_VERSION,
            bindings: BTreeMap::new(),
        }
    }

    /// Each member's certificate fingerprint, where one is bound.
    pub fn bindings(&self) -> &BTreeMap<u64, CertFingerprint> {
        &self.bindings
    }

    /// Binds member `raft_id` to a certificate (at one log position on
    /// every node); a node that is not a member binds nothing.
    pub(crate) fn bind(&mut self, raft_id: u64, fingerprint: CertFingerprint) {
        if self.cluster_version >= BINDING_VERSION && self.is_member(raft_id) {
            self.bindings.insert(raft_id, fingerprint);
        }
    }

    pub fn history(&self) -> Option<[u8; 16]> {
        self.history
    }
    /// Deliveries produced so far, counting from the genesis.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Last seqno handed out.
    pub fn last_seqno(&self) -> Seqno {
        self.last_seqno
    }
    /// The protocol version the cluster runs at.
    pub fn cluster_version(&self) -> u32 {
        self.cluster_version
    }

    /// The version every member speaks, once all have said, if it is
    /// newer than the cluster's: what the leader proposes.
    pub fn upgradable_to(&self) -> Option<u32> {
        let common = self.members.iter().map(|m| m.max_version).min()?;
        (common > self.cluster_version).then_some(common)
    }

    pub fn members(&self) -> &[Member] {
        &self.members
    }
    pub fn member(&self, raft_id: u64) -> Option<&Member> {
        self.members.iter().find(|m| m.info.raft_id == raft_id)
    }
    pub fn is_member(&self, raft_id: u64) -> bool {
        self.member(raft_id).is_some()
    }
    pub fn certifier(&self) -> &Certifier {
        &self.certifier
    }
    pub fn certifier_mut(&mut self) -> &mut Certifier {
        &mut self.certifier
    }
    /// The highest Raft index every current member has applied (as
    /// reported through the log): no member needs entries up to it again,
    /// so logs may be compacted there. 0 while any member has not reported.
    pub fn compactable_index(&self) -> u64 {
        self.members
            .iter()
            .map(|m| self.applied.get(&m.info.raft_id).copied().unwrap_or(0))
            .min()
            .unwrap_or(0)
    }

    /// Big writesets purged since the last call, for the caller to free
    /// on another thread (dropping them frees every key).
    pub fn take_reaped(&mut self) -> Vec<Arc<Writeset>> {
        std::mem::take(&mut self.reaped)
    }

    /// About how many bytes a snapshot taken now would copy for the
    /// fragments in flight and the keys of the writesets in the window:
    /// the parts of a snapshot that grow with one big writeset.
    pub fn snapshot_weight(&self) -> usize {
        let partial: usize = self.partial.values().map(Partial::bytes).sum();
        partial + self.window_keys * SNAPSHOT_KEY_BYTES
    }

    /// The current view (after the genesis).
    pub fn view(&self) -> Option<GroupView> {
        Some(GroupView {
            history: self.history?,
            seqno: self.last_view_seqno,
            conf_id: self.conf_id,
            members: self.members.iter().map(|m| m.info.clone()).collect(),
        })
    }

    /// Applies one membership change. Returns whether Raft must apply it
    /// too (invalid changes are ignored identically everywhere).
    pub fn membership(
        &mut self,
        change: &Membership,
        out: &mut Vec<Delivery>,
    ) -> Result<bool, SequencerError> {
        let before = out.len();
        let result = self.membership_inner(change, out);
        self.delivered += (out.len() - before) as u64;
        result
    }

    fn membership_inner(
        &mut self,
        change: &Membership,
        out: &mut Vec<Delivery>,
    ) -> Result<bool, SequencerError> {
        match change {
            Membership::Add(info) => {
                if self.history.is_none() || self.is_member(info.raft_id) {
                    return Ok(false);
                }
                self.members.push(Member {
                    info: info.clone(),
                    state: MemberState::Joiner,
                    voter: false,
                    weight: 1,
                    arbitrator: false,
                    stateless: false,
                    max_version: 0,
                });
                self.new_view(out)?;
                Ok(true)
            }
            Membership::Promote(id) => {
                match self.members.iter_mut().find(|m| m.info.raft_id == *id) {
                    Some(m) if !m.voter => {
                        m.voter = true;
                        Ok(true)
                    }
                    _ => Ok(false),
                }
            }
            Membership::Demote(id) => {
                let voters = self.members.iter().filter(|m| m.voter).count();
                match self.members.iter_mut().find(|m| m.info.raft_id == *id) {
                    Some(m) if m.voter && voters > 1 => {
                        m.voter = false;
                        Ok(true)
                    }
                    _ => Ok(false),
                }
            }
            Membership::Remove(id) => {
                let Some(pos) = self.members.iter().position(|m| m.info.raft_id == *id) else {
                    return Ok(false);
                };
                let voters = self.members.iter().filter(|m| m.voter).count();
                if self.members.len() == 1 || (self.members[pos].voter && voters == 1) {
                    // The last voter cannot leave through the log.
                    return Ok(false);
                }
                self.members.remove(pos);
                self.committed.remove(id);
                self.applied.remove(id);
                self.bindings.remove(id);
                self.new_view(out)?;
                Ok(true)
            }
        }
    }

    fn new_view(&mut self, out: &mut Vec<Delivery>) -> Result<(), SequencerError> {
        let history = self.history.ok_or(SequencerError::NoHistory)?;
        self.last_seqno += 1;
        self.certifier.note_non_writeset(self.last_seqno)?;
        self.conf_id += 1;
        self.last_view_seqno = self.last_seqno;
        out.push(Delivery::View(GroupView {
            history,
            seqno: self.last_seqno,
            conf_id: self.conf_id,
            members: self.members.iter().map(|m| m.info.clone()).collect(),
        }));
        self.forget_departed();
        Ok(())
    }

    /// A member that left takes its dedup window and its partly received
    /// fragmented actions with it (their proposals are dropped anyway:
    /// only members act). Keeps both bounded under membership churn.
    fn forget_departed(&mut self) {
        let members: Vec<u64> = self.members.iter().map(|m| m.info.raft_id).collect();
        self.seen.retain(|origin, _| members.contains(origin));
        self.partial
            .retain(|(origin, _), _| members.contains(origin));
    }

    /// One part of a fragmented action (`Action::Fragment`). When the
    /// last part is ordered, the whole action is processed as proposal
    /// `of`, at this log position. Malformed or over-bound fragments drop
    /// the action (every node alike), settling `of` so its origin stops
    /// waiting.
    fn fragment(
        &mut self,
        origin: u64,
        (of, index, count): (u64, u32, u32),
        bytes: Bytes,
        out: &mut Vec<Delivery>,
    ) -> Result<(), SequencerError> {
        let drop_it = |s: &mut Sequencer, out: &mut Vec<Delivery>| {
            s.partial.remove(&(origin, of));
            out.push(Delivery::Settled {
                origin,
                proposal: of,
            });
        };
        let in_flight = self.partial.range((origin, 0)..=(origin, u64::MAX));
        let (n, total) = in_flight.fold((0, 0), |(n, b), (_, p)| (n + 1, b + p.bytes()));
        let known = self.partial.contains_key(&(origin, of));
        if count == 0
            || index >= count
            || total + bytes.len() > MAX_PARTIAL_BYTES
            || (!known && n >= MAX_PARTIAL_PER_ORIGIN)
        {
            drop_it(self, out);
            return Ok(());
        }
        let entry = self
            .partial
            .entry((origin, of))
            .or_insert_with(|| Partial::new(count));
        if entry.count() != count {
            drop_it(self, out);
            return Ok(());
        }
        entry.insert(index, bytes);
        if !entry.is_complete() {
            return Ok(());
        }
        let whole = self.partial.remove(&(origin, of)).expect("present above");
        match whole.into_action().expect("complete above") {
            Ok(action @ Action::Writeset(_)) => self.proposal(
                Proposal {
                    origin,
                    id: of,
                    action,
                },
                out,
            ),
            _ => {
                drop_it(self, out);
                Ok(())
            }
        }
    }

    /// Processes the proposals of one log entry, in order.
    pub fn entry(
        &mut self,
        batch: Vec<Proposal>,
        out: &mut Vec<Delivery>,
    ) -> Result<(), SequencerError> {
        let before = out.len();
        let mut result = Ok(());
        for p in batch {
            result = self.proposal(p, out);
            if result.is_err() {
                break;
            }
        }
        self.delivered += (out.len() - before) as u64;
        result
    }

    fn duplicate(&mut self, origin: u64, id: u64) -> bool {
        let seen = self.seen.entry(origin).or_default();
        if !seen.insert(id) {
            return true;
        }
        if seen.len() > DEDUP_WINDOW {
            seen.pop_first();
        }
        false
    }

    fn proposal(&mut self, p: Proposal, out: &mut Vec<Delivery>) -> Result<(), SequencerError> {
        let settled = Delivery::Settled {
            origin: p.origin,
            proposal: p.id,
        };
        if self.duplicate(p.origin, p.id) {
            out.push(settled);
            return Ok(());
        }
        if let Action::Genesis {
            history,
            last_seqno,
            founder,
        } = p.action
        {
            if self.history.is_none() {
                self.genesis(history, last_seqno, founder, out)?;
            }
            out.push(settled);
            return Ok(());
        }
        // Only members act; a removed node's late proposals are dropped
        // the same way on every node.
        if self.history.is_none() || !self.is_member(p.origin) {
            out.push(settled);
            return Ok(());
        }
        match p.action {
            Action::Genesis { .. } => unreachable!("handled above"),
            Action::Writeset(ws) => self.writeset(p.origin, p.id, ws, out)?,
            Action::Committed {
                raft_id,
                seqno,
                applied,
            } => {
                let slot = self.applied.entry(raft_id).or_insert(applied);
                *slot = (*slot).max(applied);
                self.committed_report(raft_id, seqno);
                out.push(settled);
            }
            Action::StateRequest {
                joiner,
                donors,
                request,
                ist_after,
                from_cache,
            } => {
                self.state_request(joiner, &donors, request, (ist_after, from_cache), out);
                out.push(settled);
            }
            Action::StateTransferred {
                donor,
                joiner,
                seqno,
                rcode,
            } => {
                if self.member(donor).map(|m| m.state) == Some(MemberState::Donor) {
                    self.set_state(donor, MemberState::Joined, out);
                }
                out.push(Delivery::Transferred {
                    donor,
                    joiner,
                    seqno,
                    rcode,
                });
                out.push(settled);
            }
            Action::Joined { raft_id, .. } => {
                if self.member(raft_id).map(|m| m.state) == Some(MemberState::Joiner) {
                    self.set_state(raft_id, MemberState::Joined, out);
                }
                out.push(settled);
            }
            Action::Synced { raft_id } => {
                if self.member(raft_id).map(|m| m.state) == Some(MemberState::Joined) {
                    self.set_state(raft_id, MemberState::Synced, out);
                }
                out.push(settled);
            }
            Action::Arbitrator { raft_id } => {
                // Only a joiner says it about itself: a member that holds
                // data never becomes an arbitrator.
                if raft_id == p.origin {
                    if let Some(m) = self
                        .members
                        .iter_mut()
                        .find(|m| m.info.raft_id == raft_id && m.state == MemberState::Joiner)
                    {
                        m.arbitrator = true;
                    }
                }
                out.push(settled);
            }
            Action::Stateless { raft_id } => {
                // Only a member says it about itself, and only once the
                // whole cluster knows the flag (snapshots carry it).
                if raft_id == p.origin && self.cluster_version >= STATELESS_VERSION {
                    if let Some(m) = self.members.iter_mut().find(|m| m.info.raft_id == raft_id) {
                        m.stateless = true;
                    }
                }
                out.push(settled);
            }
            Action::Supports {
                raft_id,
                max_version,
            } => {
                if raft_id == p.origin {
                    if let Some(m) = self.members.iter_mut().find(|m| m.info.raft_id == raft_id) {
                        m.max_version = max_version;
                        if max_version < self.cluster_version {
                            out.push(Delivery::TooOld {
                                raft_id,
                                max_version,
                                cluster_version: self.cluster_version,
                            });
                        }
                    }
                }
                out.push(settled);
            }
            Action::ClusterVersion { version } => {
                if version > self.cluster_version
                    && self.members.iter().all(|m| m.max_version >= version)
                {
                    self.cluster_version = version;
                    out.push(Delivery::ClusterVersion { version });
                }
                out.push(settled);
            }
            Action::Remerge { raft_id } => {
                if raft_id == p.origin && self.is_member(raft_id) {
                    self.new_view(out)?;
                }
                out.push(settled);
            }
            Action::Vote {
                raft_id,
                seqno,
                digest,
            } => {
                if raft_id == p.origin {
                    self.vote(raft_id, seqno, digest, out);
                }
                out.push(settled);
            }
            Action::Bind {
                raft_id,
                fingerprint,
            } => {
                // A member binds itself only: its first binding, or its
                // new certificate after `socket.ssl_reload`.
                if raft_id == p.origin {
                    self.bind(raft_id, fingerprint);
                }
                out.push(settled);
            }
            Action::Weight { raft_id, weight } => {
                if raft_id == p.origin {
                    if let Some(m) = self.members.iter_mut().find(|m| m.info.raft_id == raft_id) {
                        m.weight = weight;
                    }
                }
                out.push(settled);
            }
            Action::Fragment {
                of,
                index,
                count,
                bytes,
            } => {
                out.push(settled);
                self.fragment(p.origin, (of, index, count), bytes, out)?;
            }
            Action::FlowControl { raft_id, level } => {
                if raft_id == p.origin && self.is_member(raft_id) {
                    out.push(Delivery::FlowControl { raft_id, level });
                }
                out.push(settled);
            }
            Action::Barrier { raft_id, id } => out.push(Delivery::Barrier {
                origin: raft_id,
                id,
                seqno: self.last_seqno,
            }),
        }
        Ok(())
    }

    fn genesis(
        &mut self,
        history: [u8; 16],
        last_seqno: Seqno,
        founder: MemberInfo,
        out: &mut Vec<Delivery>,
    ) -> Result<(), SequencerError> {
        self.history = Some(history);
        self.last_seqno = last_seqno;
        self.certifier.reset(last_seqno);
        self.members = vec![Member {
            info: founder,
            state: MemberState::Synced,
            voter: true,
            weight: 1,
            arbitrator: false,
            stateless: false,
            max_version: 0,
        }];
        self.new_view(out)
    }

    fn writeset(
        &mut self,
        origin: u64,
        proposal: u64,
        ws: Writeset,
        out: &mut Vec<Delivery>,
    ) -> Result<(), SequencerError> {
        let seqno = self.last_seqno + 1;
        let req = CertRequest {
            seqno,
            last_seen: ws.last_seen,
            source: ws.source,
            is_toi: ws.flags & flags::ISOLATION != 0,
            pa_unsafe: ws.flags & flags::PA_UNSAFE != 0,
            implicit_deps: ws.flags & flags::IMPLICIT_DEPS != 0,
            keys: &ws.keys,
        };
        let outcome = self.certifier.certify(&req)?;
        let related = match outcome {
            CertOutcome::Pass { .. } => self.certifier.take_related(),
            CertOutcome::Fail { .. } => None,
        };
        self.last_seqno = seqno;
        let ws = Arc::new(ws);
        self.window_keys += ws.keys.len();
        self.window
            .push_back((seqno, ws.clone(), outcome.is_pass()));
        out.push(Delivery::Writeset(OrderedWriteset {
            seqno,
            origin,
            proposal,
            ws,
            outcome,
            related,
        }));
        Ok(())
    }

    /// Purges the index below the lowest `last_committed` any member has
    /// reported. A member that has not reported counts as its join view:
    /// it cannot have seen less than that.
    fn committed_report(&mut self, raft_id: u64, seqno: Seqno) {
        let slot = self.committed.entry(raft_id).or_insert(seqno);
        *slot = (*slot).max(seqno).min(self.last_seqno);
        // A joiner waiting for its state transfer commits nothing until
        // it has it, however long that takes; counting it would keep every
        // writeset of the SST in every node's index (Galera leaves joiners
        // out of its commit cut too). Its first writesets may then find
        // their last-seen seqno purged: they fail as too old, alike on
        // every node, and are retried by the client.
        let cut = self
            .members
            .iter()
            .filter(|m| m.state != MemberState::Joiner)
            .map(|m| self.committed.get(&m.info.raft_id).copied().unwrap_or(-1))
            .min()
            .unwrap_or(-1);
        if cut >= self.purged_upto + PURGE_STEP {
            self.certifier.purge_upto(cut);
            self.purged_upto = cut;
            while self.window.front().is_some_and(|(s, _, _)| *s <= cut) {
                if let Some((_, ws, _)) = self.window.pop_front() {
                    self.window_keys -= ws.keys.len();
                    if ws.keys.len() >= REAP_KEYS {
                        self.reaped.push(ws);
                    }
                }
            }
        }
    }

    /// Donor choice (Galera's `wsrep_sst_donor` rules): the named members
    /// in list order among those that are synced; a trailing comma (or an
    /// empty list) allows any synced member, first in member order.
    fn state_request(
        &mut self,
        joiner: u64,
        donors: &str,
        request: Vec<u8>,
        (ist_after, from_cache): (Option<Seqno>, Option<CacheIst>),
        out: &mut Vec<Delivery>,
    ) {
        if self.member(joiner).map(|m| m.state) != Some(MemberState::Joiner) {
            return;
        }
        let candidate = |m: &&Member| {
            m.info.raft_id != joiner
                && m.state == MemberState::Synced
                && !m.arbitrator
                && !m.stateless
        };
        let names: Vec<&str> = donors
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .collect();
        let any = names.is_empty() || donors.trim_end().ends_with(',');
        let named = names.iter().find_map(|n| {
            self.members
                .iter()
                .filter(candidate)
                .find(|m| m.info.name == *n)
        });
        // Any donor: one in the joiner's own segment (`gmcast.segment`)
        // first, so a state transfer does not cross a WAN link when a
        // local member can serve it (Galera does the same).
        let segment = self.member(joiner).map_or(0, |m| m.info.segment);
        let chosen = named
            .or_else(|| {
                if any {
                    self.members
                        .iter()
                        .filter(candidate)
                        .find(|m| m.info.segment == segment)
                        .or_else(|| self.members.iter().find(candidate))
                } else {
                    None
                }
            })
            .map(|m| m.info.raft_id);
        match chosen {
            Some(donor) => {
                // A bypass donation copies nothing: the donor keeps
                // serving (Galera desyncs it for the IST sender; here the
                // events already reached the joiner through the log).
                // Sending from the cache, or falling back to a full SST
                // when the cache lacks events, makes it a donor.
                if ist_after.is_none() || from_cache.is_some() {
                    self.set_state(donor, MemberState::Donor, out);
                }
                out.push(Delivery::Donate {
                    donor,
                    joiner,
                    request,
                    seqno: self.last_seqno,
                    ist_after,
                    from_cache,
                });
            }
            None => out.push(Delivery::NoDonor { joiner }),
        }
    }

    /// One member's outcome in a consistency vote (`vote.rs`). Electors
    /// are the members that hold state (joined, synced, donor), which an
    /// arbitrator never does.
    fn vote(&mut self, raft_id: u64, seqno: Seqno, digest: u64, out: &mut Vec<Delivery>) {
        let electorate: Vec<u64> = self
            .members
            .iter()
            .filter(|m| {
                !m.arbitrator
                    && matches!(
                        m.state,
                        MemberState::Joined | MemberState::Synced | MemberState::Donor
                    )
            })
            .map(|m| m.info.raft_id)
            .collect();
        let mut events = Vec::new();
        self.votes
            .vote(raft_id, seqno, digest, &electorate, &mut events);
        out.extend(events.into_iter().map(|e| match e {
            VoteEvent::Requested(seqno) => Delivery::VoteRequest { seqno },
            VoteEvent::Decided { seqno, digest } => Delivery::VoteResult { seqno, digest },
            VoteEvent::Inconsistent { raft_id, seqno } => Delivery::Inconsistent { raft_id, seqno },
        }));
    }

    fn set_state(&mut self, raft_id: u64, state: MemberState, out: &mut Vec<Delivery>) {
        if let Some(m) = self.members.iter_mut().find(|m| m.info.raft_id == raft_id) {
            m.state = state;
            out.push(Delivery::MemberState { raft_id, state });
        }
    }
}

#[cfg(test)]
#[path = "sequencer_tests.rs"]
mod tests;
