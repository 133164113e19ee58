//! The driver's side of local causal reads (ADR 0022, `read_grants`):
//! pinging as a holder, granting, the release gate on committed entries,
//! and the lease a follower's reader takes its index from.

use super::{Group, Output};
use crate::group::action::{decode_batch_shared, Action};
use crate::group::read_grants::{LeaseMsg, OBLIGATION_MS};
use raft::eraftpb::ConfState;
use raft::eraftpb::{Entry, EntryType};

/// The first group protocol version whose followers hold read leases
/// (the three `LeaseMsg` messages).
pub const LOCAL_READS_VERSION: u32 = 10;

/// A grant's configuration while its granter has a change in flight.
const CHANGING: u64 = u64::MAX;

impl Group {
    /// The holder's clock for its leases: the freshest this driver has
    /// (a leap forward only ends a lease early).
    fn lease_now(&self) -> u64 {
        self.now.max(self.lease_clock)
    }

    /// The granter's clock for what it owes: it never leaps forward
    /// (`clocks::ObligationClock`), so a clock that jumps cannot end an
    /// obligation while the holder's lease still runs (ADR 0036).
    fn obligation_now(&self) -> u64 {
        if !self.cfg.steady_obligations {
            return self.lease_now();
        }
        self.obligation_clock.now()
    }

    /// Whether causal reads use leases here now or lately: reads came in
    /// (as leader, its own or its followers'; as holder, its own), this
    /// node still tells the others what it stores, or it owes a holder.
    /// While they do, the loop ticks exactly (`Group::idle_wait_ms`): a
    /// grant's obligation runs on a clock that counts at most two ticks
    /// per reading.
    pub(super) fn leases_in_use(&self) -> bool {
        let now = self.lease_now();
        self.fences.reads_lately(now)
            || self.grants.reading(now)
            || self.grants.holding(now)
            || self.grants.owing(self.obligation_now())
    }

    /// The other members of the configuration this node applied (voters
    /// and learners, arbitrators included: every member that may have
    /// ordered a configuration change must grant).
    pub(super) fn other_members(&self) -> Vec<u64> {
        self.others_in(&self.conf_state())
    }

    fn conf_state(&self) -> ConfState {
        self.raw.raft.prs().conf().to_conf_state()
    }

    fn others_in(&self, cs: &ConfState) -> Vec<u64> {
        let me = self.me.raft_id;
        cs.voters
            .iter()
            .chain(cs.learners.iter())
            .copied()
            .filter(|id| *id != me)
            .collect()
    }

    /// The last entry stored here: (term, index).
    fn last_stored(&self) -> (u64, u64) {
        let log = &self.raw.raft.raft_log;
        let index = log.persisted.min(log.last_index());
        (log.term(index).unwrap_or(0), index)
    }

    /// The configuration this node knows, as one number its grants carry
    /// and a holder compares with its own: a digest of the members, or
    /// `CHANGING` while a configuration change is stored and not applied
    /// (a member may be on its way that the holder must ask too).
    fn conf_id(&self) -> u64 {
        self.conf_id_of(self.conf_state())
    }

    /// [`Group::conf_id`] of `cs`, this node's configuration.
    fn conf_id_of(&self, cs: ConfState) -> u64 {
        let applied = self.raw.raft.raft_log.applied;
        if self.follower_commit.pending_above(applied).is_some() {
            return CHANGING;
        }
        let (mut voters, mut learners) = (cs.voters, cs.learners);
        voters.sort_unstable();
        learners.sort_unstable();
        // FNV-1a over the ids, voters then learners.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for id in voters.iter().chain([&0]).chain(learners.iter()) {
            for b in id.to_le_bytes() {
                h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
        }
        h.min(CHANGING - 1)
    }

    fn local_reads_on(&self) -> bool {
        self.seq.cluster_version() >= LOCAL_READS_VERSION && self.is_member()
    }

    /// A lease message from member `from`.
    pub fn step_lease(&mut self, from: u64, msg: LeaseMsg) {
        if from == self.me.raft_id || self.raw.raft.prs().get(from).is_none() {
            return; // not a member of the configuration we know
        }
        match msg {
            LeaseMsg::Ping { n, term, index } => {
                self.grants.claim(from, term, index);
                self.check_claims();
                if self.in_other_segment(from) {
                    // Across a WAN link every commit here would wait a
                    // WAN round trip for the reader (undoing ADR 0020):
                    // a remote reader asks the leader instead.
                    return;
                }
                let log = &self.raw.raft.raft_log;
                let (committed, released) = (log.committed, self.released);
                let conf = self.conf_id();
                let now = self.obligation_now();
                if let Some(grant) = self.grants.ping(from, n, now, committed, released, conf) {
                    self.out.push(Output::Lease {
                        to: from,
                        msg: grant,
                    });
                }
            }
            LeaseMsg::Grant { n, released, conf } => {
                self.grants.granted(from, n, released, conf);
            }
            LeaseMsg::Stored { term, index } => {
                self.grants.claim(from, term, index);
                self.check_claims();
            }
        }
    }

    fn check_claims(&mut self) {
        let log = &self.raw.raft.raft_log;
        let last = log.last_index();
        self.grants
            .check_claims(|i| (i <= last).then(|| log.term(i).ok()).flatten());
    }

    /// Holder: the pings due (each tick while causal reads come).
    pub(super) fn ping_granters(&mut self) {
        if !self.grants.reading(self.lease_now()) || self.is_leader() || !self.local_reads_on() {
            return;
        }
        let others = self.other_members();
        if others.iter().any(|m| self.in_other_segment(*m)) {
            return; // no member of another segment grants (`step_lease`)
        }
        let stored = self.last_stored();
        let now = self.lease_now();
        for (to, msg) in self
            .grants
            .pings_due(now, self.cfg.tick_ms, &others, stored)
        {
            self.out.push(Output::Lease { to, msg });
        }
    }

    /// Holder: after an append, tell the members other than the leader
    /// (which counts its `matched`) what this node stored.
    pub(super) fn tell_stored(&mut self) {
        if self.is_leader() || !self.local_reads_on() || !self.grants.holding(self.lease_now()) {
            return;
        }
        let (term, index) = self.last_stored();
        let leader = self.raw.raft.leader_id;
        for to in self.other_members() {
            if to != leader {
                self.out.push(Output::Lease {
                    to,
                    msg: LeaseMsg::Stored { term, index },
                });
            }
        }
    }

    /// A follower's lease for local causal reads: until when (ms) and the
    /// index a read waits for (the last stored entry, or the members'
    /// floor if higher). The pair must be published before any message
    /// telling a member what this node stored leaves (as the leader's).
    pub(super) fn local_lease(&self) -> Option<(u64, u64)> {
        // Asked after every round of the driver (on followers only,
        // `read_lease`): the cheap checks first (no pings, no lease).
        if !self.grants.holding(self.lease_now()) {
            return None;
        }
        if !self.local_reads_on() || !self.has_leader() {
            return None;
        }
        let cs = self.conf_state();
        let others = self.others_in(&cs);
        let conf = self.conf_id_of(cs);
        if conf == CHANGING {
            return None;
        }
        let (until, floor) = self.grants.lease(self.lease_now(), &others, conf)?;
        Some((until, self.last_stored().1.max(floor)))
    }

    /// Committed entries the release gate holds, and whether this node
    /// owes a lease holder now. Entries wait only while it does, and an
    /// obligation ends `OBLIGATION_MS` after the last grant: that is the
    /// bound of `held` (the simulation checks it after every poll).
    pub fn gate_state(&self) -> (usize, bool) {
        (self.held.len(), self.grants.owing(self.obligation_now()))
    }

    /// A causal read seen here: keep the lease (leader or follower).
    pub(super) fn saw_local_read(&mut self) {
        let now = self.lease_now();
        self.grants.saw_read(now);
    }

    /// This node became a member: owe every member for an obligation
    /// (leases granted before it knew of them, or by its former self).
    pub(super) fn owe_everyone(&mut self) {
        let until = self.obligation_now() + OBLIGATION_MS;
        self.grants.owe_everyone_until(until);
    }

    /// A configuration change was applied.
    pub(super) fn conf_applied(&mut self) {
        let others = self.other_members();
        self.grants.keep_members(&others);
    }

    /// Releases committed entries in order, each once the gate lets it
    /// pass: an entry holding a writeset waits until every holder owed a
    /// grant has stored it (a client is told of a commit, or reads it
    /// here, only once every lease holder could read it too).
    pub(super) fn release_held(&mut self) {
        while !self.failed && !self.retired {
            let Some(entry) = self.held.pop_front() else {
                return;
            };
            if !self.may_release(&entry) {
                self.held.push_front(entry);
                return;
            }
            self.released = entry.index;
            self.apply_entry(entry);
        }
    }

    /// Releases every held entry whatever the gate says: the node founds
    /// a group of its own, and the leases of the old one end with it.
    pub(super) fn release_all_held(&mut self) {
        while !self.failed && !self.retired {
            let Some(entry) = self.held.pop_front() else {
                return;
            };
            self.released = entry.index;
            self.apply_entry(entry);
        }
    }

    /// Whether the gate lets `e` pass now.
    fn may_release(&mut self, e: &Entry) -> bool {
        let now = self.obligation_now();
        if !self.cfg.release_gate || !self.grants.owes(now) || !self.holds_writeset(e) {
            return true;
        }
        self.check_claims();
        let others = self.other_members();
        let leader = self.is_leader();
        let my_leader = self.raw.raft.leader_id;
        let prs = self.raw.raft.prs();
        // What a leader knows each member stored; and our own leader
        // holds every committed entry we hold (it reads from its own
        // lease meanwhile, over its whole log).
        let matched = |m: u64| match (leader, m == my_leader) {
            (true, _) => prs.get(m).map_or(0, |p| p.matched),
            (false, true) => u64::MAX,
            (false, false) => 0,
        };
        self.grants.may_release(now, e.index, &others, matched)
    }

    /// Whether entry `e` orders a writeset (or a part of one), whoever
    /// proposed it: once released here, a client of this node may read
    /// it, and a causal read that begins after that anywhere must see it
    /// (real time, not only what was acknowledged: jepsen's
    /// `G-single-realtime`, a read on one node of a write its origin had
    /// not acknowledged yet, then a causal read on a lease holder that
    /// missed it). The rest (state changes, barriers) shows nothing.
    fn holds_writeset(&self, e: &Entry) -> bool {
        if e.get_entry_type() != EntryType::EntryNormal || e.data.is_empty() {
            return false;
        }
        // An entry that does not decode fails the node when applied.
        decode_batch_shared(&e.data).is_ok_and(|b| {
            b.iter()
                .any(|p| matches!(p.action, Action::Writeset(_) | Action::Fragment { .. }))
        })
    }
}
