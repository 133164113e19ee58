//! The Raft driver: tikv/raft-rs `RawNode` plus what turns it into the
//! wsrep total order. Sans-IO: the caller feeds time, peer messages and
//! local proposals in, and takes messages to send and deliveries out.
//!
//! - Local proposals are queued and proposed as one log entry per `poll`
//!   (batching); followers' entries are forwarded to the leader by Raft.
//! - A proposal is retried until its delivery is seen; the sequencer drops
//!   the duplicates, so a retry never orders anything twice.
//! - The Raft log lives in memory and is not fsynced (brief D5): a node
//!   that restarts comes back as a new member with a new Raft id.
//! - The leader's duties: add joiners as learners, promote synced
//!   learners to voters, and evict members silent past the suspect timeout.

use super::action::{decode_batch, encode_batch, Action, MemberInfo, Proposal};
use super::member_state::MemberState;
use super::sequencer::{Delivery, Membership, Sequencer};
use protobuf::Message as _;
use raft::eraftpb::{ConfChange, ConfChangeType, Entry, EntryType, Message};
use raft::storage::MemStorage;
use raft::{Config, RawNode, StateRole};
use std::collections::{BTreeMap, HashMap};

/// Timing and size knobs (from `evs.*` / `gcs.*`-style options).
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// Milliseconds per Raft tick.
    pub tick_ms: u64,
    pub heartbeat_ticks: usize,
    pub election_ticks: usize,
    /// Randomize election timeouts (production); off in simulations,
    /// which must not depend on raft-rs's unseeded random numbers.
    pub randomized_election: bool,
    /// A member unheard for this long is evicted by the leader.
    pub suspect_timeout_ms: u64,
    /// Re-propose a proposal not delivered after this long.
    pub retry_ms: u64,
    /// Ask to be added again after this long.
    pub join_retry_ms: u64,
    /// Upper bound of one batch entry, in bytes (one proposal may exceed it).
    pub max_batch_bytes: usize,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            tick_ms: 50,
            heartbeat_ticks: 2,
            election_ticks: 20,
            randomized_election: true,
            suspect_timeout_ms: 5000,
            retry_ms: 1000,
            join_retry_ms: 1000,
            max_batch_bytes: 1 << 20,
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
    /// Tell a member that its removal is applied. A removed node gets no
    /// more log entries, so without this a leaving node may never see the
    /// commit of its own removal (raft-rs stops replicating to it).
    Farewell {
        to: u64,
    },
    /// The log cannot be processed: stop this node.
    Fatal(String),
}

pub struct Group {
    me: MemberInfo,
    cfg: GroupConfig,
    raw: RawNode<MemStorage>,
    seq: Sequencer,
    now: u64,
    next_tick: u64,
    next_id: u64,
    queued: Vec<Proposal>,
    pending: BTreeMap<u64, (Proposal, u64)>,
    last_heard: HashMap<u64, u64>,
    /// Term of this node's current (or last) leadership.
    lead_term: u64,
    last_join: Option<u64>,
    last_conf_change: Option<u64>,
    was_member: bool,
    leaving: bool,
    left: bool,
    failed: bool,
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
        let raw = RawNode::new(&raft_config(me.raft_id, &cfg), storage, &discard_logger())
            .map_err(|e| format!("cannot start the Raft node: {e}"))?;
        Ok(Group {
            me,
            next_tick: now + cfg.tick_ms,
            cfg,
            raw,
            seq: Sequencer::new(),
            now,
            next_id: 1,
            queued: Vec::new(),
            pending: BTreeMap::new(),
            last_heard: HashMap::new(),
            lead_term: 0,
            last_join: None,
            last_conf_change: None,
            was_member: false,
            leaving: false,
            left: false,
            failed: false,
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
    /// Whether this node knows a leader: false while it cannot reach a
    /// majority (pre-vote and check-quorum reset the leader then).
    pub fn has_leader(&self) -> bool {
        self.raw.raft.leader_id != raft::INVALID_ID
    }

    pub fn is_member(&self) -> bool {
        self.seq.is_member(self.me.raft_id)
    }
    /// Proposals not yet seen delivered.
    pub fn in_flight(&self) -> usize {
        self.queued.len() + self.pending.len()
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
    pub fn propose_with_id(&mut self, id: u64, action: Action) {
        self.queued.push(Proposal {
            origin: self.me.raft_id,
            id,
            action,
        });
    }

    /// A Raft message from a peer.
    pub fn step(&mut self, msg: Message) {
        self.last_heard.insert(msg.from, self.now);
        // Errors are messages for another term or from unknown peers;
        // Raft's own rules make dropping them safe.
        let _ = self.raw.step(msg);
    }

    /// A peer asks to join: propose it as a learner (forwarded to the
    /// leader by Raft if this node is a follower).
    pub fn handle_join(&mut self, info: MemberInfo) {
        if self.seq.history().is_none() || self.seq.is_member(info.raft_id) {
            return;
        }
        self.last_heard.insert(info.raft_id, self.now);
        let mut cc = ConfChange::default();
        cc.set_change_type(ConfChangeType::AddLearnerNode);
        cc.node_id = info.raft_id;
        cc.context = info.encode().into();
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

    /// Whether a graceful leave completed (own removal seen or announced).
    pub fn has_left(&self) -> bool {
        self.left || (self.leaving && self.was_member && !self.is_member())
    }

    /// Leave the cluster gracefully: hand leadership over, then propose
    /// this node's removal. Done when a view without this node arrives.
    pub fn leave(&mut self) {
        self.leaving = true;
        self.last_conf_change = None;
        self.leave_step();
    }

    fn leave_step(&mut self) {
        if !self.is_member() || !self.conf_change_due() {
            return;
        }
        if self.is_leader() {
            // The voter heard from last: a dead one never takes over, and
            // Raft drops every proposal while a transfer is pending.
            let other = self
                .seq
                .members()
                .iter()
                .filter(|m| m.voter && m.info.raft_id != self.me.raft_id)
                .map(|m| m.info.raft_id)
                .max_by_key(|id| self.last_heard.get(id).copied().unwrap_or(0));
            if let Some(other) = other {
                self.raw.transfer_leader(other);
                return;
            }
        }
        self.propose_change(ConfChangeType::RemoveNode, self.me.raft_id);
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
        let mut cc = ConfChange::default();
        cc.set_change_type(kind);
        cc.node_id = id;
        let _ = self.raw.propose_conf_change(vec![], cc);
    }

    /// Advances time to `now` (milliseconds, monotonic).
    pub fn tick(&mut self, now: u64) {
        self.now = self.now.max(now);
        while self.now >= self.next_tick {
            self.raw.tick();
            self.next_tick += self.cfg.tick_ms;
        }
        let stale: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, (_, at))| self.now >= at + self.cfg.retry_ms)
            .map(|(id, _)| *id)
            .collect();
        for id in stale {
            if let Some((p, _)) = self.pending.remove(&id) {
                self.queued.push(p);
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
        if self.leaving {
            self.leave_step();
        } else if self.is_leader() {
            self.leader_duties();
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
        let mut promote = None;
        let mut evict = None;
        for m in self.seq.members() {
            let id = m.info.raft_id;
            if id == me {
                continue;
            }
            let heard = *self.last_heard.entry(id).or_insert(now);
            if now > heard + self.cfg.suspect_timeout_ms {
                evict = Some(id);
            } else if !m.voter && m.state == MemberState::Synced {
                promote = Some(id);
            }
        }
        if let Some(id) = evict {
            if self.conf_change_due() {
                self.propose_change(ConfChangeType::RemoveNode, id);
            }
        } else if let Some(id) = promote {
            if self.conf_change_due() {
                self.propose_change(ConfChangeType::AddNode, id);
            }
        }
    }

    /// Proposes what is queued, processes Raft's `Ready`, and returns what
    /// the caller must send and deliver.
    pub fn poll(&mut self) -> Vec<Output> {
        if !self.failed {
            self.flush_proposals();
            while self.raw.has_ready() && !self.failed {
                self.handle_ready();
            }
        }
        std::mem::take(&mut self.out)
    }

    fn flush_proposals(&mut self) {
        if self.queued.is_empty() || self.raw.raft.leader_id == raft::INVALID_ID {
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
        let _ = self.raw.propose(vec![], encode_batch(&batch));
        for p in batch {
            self.pending.insert(p.id, (p, self.now));
        }
    }

    fn send_all(&mut self, msgs: Vec<Message>) {
        for msg in msgs {
            self.out.push(Output::Send { to: msg.to, msg });
        }
    }

    fn handle_ready(&mut self) {
        let mut ready = self.raw.ready();
        self.send_all(ready.take_messages());
        let store = self.raw.raft.raft_log.store.clone();
        if !ready.snapshot().is_empty() {
            // Lockstep never compacts its log into Raft snapshots.
            self.fail("received a Raft snapshot, which this version never sends".into());
            return;
        }
        self.apply(ready.take_committed_entries());
        if let Err(e) = store.wl().append(ready.entries()) {
            self.fail(format!("cannot append to the Raft log: {e}"));
            return;
        }
        if let Some(hs) = ready.hs() {
            store.wl().set_hardstate(hs.clone());
        }
        self.send_all(ready.take_persisted_messages());
        let mut light = self.raw.advance(ready);
        if let Some(commit) = light.commit_index() {
            store.wl().mut_hard_state().set_commit(commit);
        }
        self.send_all(light.take_messages());
        self.apply(light.take_committed_entries());
        self.raw.advance_apply();
    }

    fn fail(&mut self, why: String) {
        self.failed = true;
        self.out.push(Output::Fatal(why));
    }

    fn apply(&mut self, entries: Vec<Entry>) {
        for entry in entries {
            if self.failed {
                return;
            }
            let mut deliveries = Vec::new();
            let result = match entry.get_entry_type() {
                EntryType::EntryNormal if entry.data.is_empty() => Ok(()),
                EntryType::EntryNormal => match decode_batch(&entry.data) {
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
                self.observe(&d);
                self.out.push(Output::Deliver(d));
            }
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
        self.raw.raft.raft_log.store.wl().set_conf_state(cs);
        Ok(())
    }

    fn apply_conf_change(&mut self, entry: &Entry, out: &mut Vec<Delivery>) -> Result<(), String> {
        let cc = ConfChange::parse_from_bytes(&entry.data).map_err(|e| {
            format!(
                "configuration change at log entry {} does not decode: {e}",
                entry.index
            )
        })?;
        let change = match cc.get_change_type() {
            ConfChangeType::AddLearnerNode => {
                let info = MemberInfo::decode(&cc.context)
                    .map_err(|e| format!("member description at log entry {}: {e}", entry.index))?;
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
            self.raw.raft.raft_log.store.wl().set_conf_state(cs);
            if let Some(to) = removed.filter(|_| self.is_leader()) {
                self.out.push(Output::Farewell { to });
            }
        }
        Ok(())
    }

    /// Bookkeeping on our own deliveries: stop retrying, note membership.
    fn observe(&mut self, d: &Delivery) {
        let me = self.me.raft_id;
        match d {
            Delivery::Writeset {
                origin, proposal, ..
            }
            | Delivery::Settled { origin, proposal }
                if *origin == me =>
            {
                self.pending.remove(proposal);
            }
            Delivery::Barrier { origin, id, .. } if *origin == me => {
                self.pending.remove(id);
            }
            Delivery::View(v) => {
                if v.members.iter().any(|m| m.raft_id == me) {
                    self.was_member = true;
                }
                for m in &v.members {
                    self.last_heard.entry(m.raft_id).or_insert(self.now);
                }
            }
            _ => {}
        }
    }
}

fn proposal_size(p: &Proposal) -> usize {
    match &p.action {
        Action::Writeset(ws) => ws.size() + 64,
        Action::StateRequest { request, .. } => request.len() + 64,
        _ => 64,
    }
}
