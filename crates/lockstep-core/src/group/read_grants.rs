//! Causal reads answered on a follower without asking anyone (ADR 0022).
//!
//! A causal read must see every transaction acknowledged anywhere before
//! it began. A follower cannot know that from its own log alone: a commit
//! needs a majority, not this node. So it asks every other member for a
//! **grant**: a promise that, for a while, the member acknowledges none of
//! its own transactions before this node has stored the log entry that
//! orders it. With a grant from every member, everything acknowledged
//! before a read began is either at or below the highest index the
//! members had released when they granted (the `floor`), or stored here.
//! The read then waits until this node has applied that far: no message.
//!
//! Two halves, both on every node:
//! - **Holder** (a follower with causal reads): pings every other member
//!   each tick while reads come; its lease runs from the send time of the
//!   oldest ping that every member answered, for [`LEASE_MS`], judged on
//!   this node's monotonic clock. Grants count only when every member's
//!   configuration is this node's (a member added meanwhile must be asked
//!   too).
//! - **Granter**: answers a ping with the highest index it has released
//!   and owes the holder [`OBLIGATION_MS`] from then (twice the lease: the
//!   clock rates may differ, as ADR 0016 allows for the leader's lease).
//!   While it owes anyone, the driver releases an entry that holds a
//!   writeset (anyone's: once released, a client here may read it) only
//!   once every holder owed has stored it (`Group::release_held`). A
//!   holder too far behind gets no grant, so a slow or dead reader holds
//!   releases for at most an obligation.
//!
//! A node that starts (or starts over) does not know what its previous
//! incarnation promised, nor, when it is new, which leases were granted
//! before it was a member: for [`OBLIGATION_MS`] after it becomes a
//! member it owes every member (`Group` starts that blanket).
//!
//! This module is the bookkeeping; `node` feeds it the log and the clock.

use std::collections::{HashMap, VecDeque};

/// How long a lease lasts from the send time of its ping.
pub const LEASE_MS: u64 = 250;
/// How long a grant binds its granter, from when it sent it.
pub const OBLIGATION_MS: u64 = 2 * LEASE_MS;
/// A holder whose stored log is further behind the granter's commit
/// index than this gets no grant: its reads ask the leader instead, and
/// the granter does not wait for it.
pub const LAG_ENTRIES: u64 = 1024;
/// A holder pings while causal reads came within this long. Short: while
/// it holds a lease, the other nodes' own commits wait for it (a
/// follower's by a network hop), so a node that reads causally now and
/// then asks the leader for those reads rather than slow every writer.
pub const KEEP_MS: u64 = 1000;

/// The messages between holders and granters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseMsg {
    /// Holder to granter: please grant; `term`/`index`: the last entry
    /// the holder has stored (so the granter can judge its lag).
    Ping { n: u64, term: u64, index: u64 },
    /// Granter to holder: granted for ping `n`. `released`: the highest
    /// index the granter released; `conf`: the last configuration change
    /// it knows of (applied or stored).
    Grant { n: u64, released: u64, conf: u64 },
    /// Holder to granter, after each append it stored: its last entry.
    Stored { term: u64, index: u64 },
}

/// A grant as the holder keeps it.
#[derive(Debug, Clone, Copy)]
struct Held {
    /// Send time of the ping it answered.
    pinged_at: u64,
    released: u64,
    conf: u64,
}

/// Both halves of a node's local-read bookkeeping.
#[derive(Debug, Default)]
pub struct ReadGrants {
    // ---- holder
    last_read: Option<u64>,
    next_ping: u64,
    last_ping: Option<u64>,
    /// Pings sent within the last `LEASE_MS` (older ones cannot make a
    /// lease any more): at most `LEASE_MS / tick + 1`.
    pings: VecDeque<(u64, u64)>,
    /// The newest grant of each member (bounded by the members; former
    /// members are dropped at each configuration change, `keep_members`).
    grants: HashMap<u64, Held>,
    // ---- granter
    /// Until when this node owes each holder (one per member; expired
    /// ones are dropped when looked at).
    owed: HashMap<u64, u64>,
    /// The last entry each member claims to have stored, and the highest
    /// index of ours it is known to hold (a claim checked against our log).
    claims: HashMap<u64, (u64, u64)>,
    covered: HashMap<u64, u64>,
    /// Until when this node owes every member (see the module comment).
    blanket_until: u64,
}

impl ReadGrants {
    pub fn new() -> ReadGrants {
        ReadGrants::default()
    }

    // ------------------------------------------------------------ holder

    /// A causal read on this node: keep pinging.
    pub fn saw_read(&mut self, now: u64) {
        self.last_read = Some(now);
    }

    /// Whether causal reads came lately (pings are due each tick).
    pub fn reading(&self, now: u64) -> bool {
        self.last_read.is_some_and(|t| now < t + KEEP_MS)
    }

    /// The pings due now, if any: one to each of `others` every
    /// `every_ms` while reads come. `(term, index)`: the last stored entry.
    pub fn pings_due(
        &mut self,
        now: u64,
        every_ms: u64,
        others: &[u64],
        stored: (u64, u64),
    ) -> Vec<(u64, LeaseMsg)> {
        if !self.reading(now) || others.is_empty() {
            return Vec::new();
        }
        if self.last_ping.is_some_and(|t| now < t + every_ms) {
            return Vec::new();
        }
        self.last_ping = Some(now);
        self.next_ping += 1;
        let n = self.next_ping;
        while self
            .pings
            .front()
            .is_some_and(|(_, at)| at + LEASE_MS <= now)
        {
            self.pings.pop_front();
        }
        self.pings.push_back((n, now));
        let (term, index) = stored;
        others
            .iter()
            .map(|&to| (to, LeaseMsg::Ping { n, term, index }))
            .collect()
    }

    /// Whether this node tells the others what it stores: while it pings,
    /// and for two obligations after its last ping, so that no member
    /// waits for word from it while it still owes it.
    pub fn holding(&self, now: u64) -> bool {
        self.last_ping.is_some_and(|t| now < t + 2 * OBLIGATION_MS)
    }

    /// A grant from `from` for ping `n`.
    pub fn granted(&mut self, from: u64, n: u64, released: u64, conf: u64) {
        let Some(&(_, pinged_at)) = self.pings.iter().find(|(p, _)| *p == n) else {
            return; // too old to matter, or not ours
        };
        let newer = self
            .grants
            .get(&from)
            .is_none_or(|g| g.pinged_at <= pinged_at);
        if newer {
            self.grants.insert(
                from,
                Held {
                    pinged_at,
                    released,
                    conf,
                },
            );
        }
    }

    /// The lease at `now`: until when, and the floor (the highest index
    /// any member had released when it granted). Only with a grant from
    /// each of `others`, all in configuration `conf`.
    pub fn lease(&self, now: u64, others: &[u64], conf: u64) -> Option<(u64, u64)> {
        if others.is_empty() {
            return None;
        }
        let mut until = u64::MAX;
        let mut floor = 0;
        for m in others {
            let g = self.grants.get(m)?;
            if g.conf != conf {
                return None;
            }
            until = until.min(g.pinged_at + LEASE_MS);
            floor = floor.max(g.released);
        }
        (now < until).then_some((until, floor))
    }

    // ----------------------------------------------------------- granter

    /// This node owes every member until `until` (it started, or became
    /// a member).
    pub fn owe_everyone_until(&mut self, until: u64) {
        self.blanket_until = self.blanket_until.max(until);
    }

    /// A member's claim of its last stored entry.
    pub fn claim(&mut self, from: u64, term: u64, index: u64) {
        self.claims.insert(from, (term, index));
    }

    /// A ping from `from`, whose claim is recorded already: grant it,
    /// and owe it from `now`, unless it lags more than [`LAG_ENTRIES`]
    /// behind `committed`.
    pub fn ping(
        &mut self,
        from: u64,
        n: u64,
        now: u64,
        committed: u64,
        released: u64,
        conf: u64,
    ) -> Option<LeaseMsg> {
        let covered = self.covered.get(&from).copied().unwrap_or(0);
        if covered.saturating_add(LAG_ENTRIES) < committed {
            return None;
        }
        let until = self.owed.entry(from).or_insert(0);
        *until = (*until).max(now + OBLIGATION_MS);
        Some(LeaseMsg::Grant { n, released, conf })
    }

    /// Checks each member's claim against this node's log (`term_at`:
    /// the term of our entry at an index, if we have it): an entry of
    /// ours at or below a claim of the same term at the same index is on
    /// that member too (Raft's log matching).
    pub fn check_claims(&mut self, term_at: impl Fn(u64) -> Option<u64>) {
        for (m, (term, index)) in &self.claims {
            if term_at(*index) == Some(*term) {
                let c = self.covered.entry(*m).or_insert(0);
                *c = (*c).max(*index);
            }
        }
    }

    /// Whether anything is owed at `now` (drops what has expired).
    pub fn owes(&mut self, now: u64) -> bool {
        self.owed.retain(|_, until| now < *until);
        self.owing(now)
    }

    /// Whether anything is owed at `now`, without dropping anything.
    pub fn owing(&self, now: u64) -> bool {
        now < self.blanket_until || self.owed.values().any(|until| now < *until)
    }

    /// Whether this node may release an entry at `index` holding a
    /// writeset: every member owed has stored it. `members`: the
    /// others in the configuration (owed during the blanket);
    /// `matched`: what the leader knows each stored (0 elsewhere).
    pub fn may_release(
        &mut self,
        now: u64,
        index: u64,
        members: &[u64],
        matched: impl Fn(u64) -> u64,
    ) -> bool {
        self.owed.retain(|_, until| now < *until);
        let blanket = now < self.blanket_until;
        let covered = |m: u64| self.covered.get(&m).copied().unwrap_or(0).max(matched(m));
        let owed_ok = self.owed.keys().all(|&m| covered(m) >= index);
        owed_ok && (!blanket || members.iter().all(|&m| covered(m) >= index))
    }

    /// Forgets former members (keeps the maps bounded by the members).
    pub fn keep_members(&mut self, members: &[u64]) {
        self.grants.retain(|m, _| members.contains(m));
        self.claims.retain(|m, _| members.contains(m));
        self.covered.retain(|m, _| members.contains(m));
        // What is owed stays until it expires: a removed holder's lease
        // may still run.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ping_n(msgs: &[(u64, LeaseMsg)]) -> u64 {
        match msgs[0].1 {
            LeaseMsg::Ping { n, .. } => n,
            _ => panic!("not a ping"),
        }
    }

    #[test]
    fn a_holder_pings_while_reads_come_and_leases_from_its_oldest_answered_ping() {
        let mut h = ReadGrants::new();
        assert!(h.pings_due(0, 50, &[1, 3], (2, 10)).is_empty(), "no reads");
        h.saw_read(0);
        let first = h.pings_due(0, 50, &[1, 3], (2, 10));
        assert_eq!(first.len(), 2);
        assert!(
            h.pings_due(49, 50, &[1, 3], (2, 10)).is_empty(),
            "one per tick"
        );
        let second = h.pings_due(50, 50, &[1, 3], (2, 10));
        let (a, b) = (ping_n(&first), ping_n(&second));
        h.granted(1, a, 7, 4);
        assert_eq!(h.lease(60, &[1, 3], 4), None, "member 3 has not answered");
        h.granted(3, b, 9, 4);
        assert_eq!(
            h.lease(60, &[1, 3], 4),
            Some((LEASE_MS, 9)),
            "from ping at 0"
        );
        h.granted(1, b, 8, 4);
        assert_eq!(h.lease(60, &[1, 3], 4), Some((50 + LEASE_MS, 9)));
        assert_eq!(h.lease(50 + LEASE_MS, &[1, 3], 4), None, "expired");
        assert_eq!(h.lease(60, &[1, 3], 5), None, "another configuration");
        assert_eq!(h.lease(60, &[1, 3, 4], 4), None, "a new member must grant");
        assert!(
            h.holding(50 + 2 * OBLIGATION_MS - 1),
            "still telling what it stores"
        );
        assert!(h.pings_due(KEEP_MS + 1, 50, &[1, 3], (2, 10)).is_empty());
        assert!(!h.holding(50 + 2 * OBLIGATION_MS));
    }

    #[test]
    fn a_grant_for_an_unknown_or_forgotten_ping_is_ignored() {
        let mut h = ReadGrants::new();
        h.saw_read(0);
        let first = h.pings_due(0, 50, &[1], (1, 1));
        h.granted(1, 99, 5, 0);
        assert_eq!(h.lease(1, &[1], 0), None);
        let _ = h.pings_due(LEASE_MS, 50, &[1], (1, 1)); // the first is forgotten
        h.granted(1, ping_n(&first), 5, 0);
        assert_eq!(h.lease(LEASE_MS, &[1], 0), None);
    }

    #[test]
    fn a_granter_owes_its_holder_until_it_has_stored_our_entries() {
        let mut g = ReadGrants::new();
        assert!(!g.owes(0));
        g.claim(2, 3, 10);
        g.check_claims(|i| (i <= 12).then_some(3));
        let grant = g.ping(2, 1, 100, 11, 9, 4);
        assert_eq!(
            grant,
            Some(LeaseMsg::Grant {
                n: 1,
                released: 9,
                conf: 4
            })
        );
        assert!(g.owes(100));
        assert!(g.may_release(100, 10, &[2, 3], |_| 0), "stored by 2");
        assert!(!g.may_release(100, 11, &[2, 3], |_| 0), "not yet");
        assert!(g.may_release(100, 11, &[2, 3], |m| if m == 2 { 11 } else { 0 }));
        assert!(
            g.may_release(100 + OBLIGATION_MS, 11, &[2, 3], |_| 0),
            "lapsed"
        );
        assert!(!g.owes(100 + OBLIGATION_MS));
    }

    #[test]
    fn a_claim_of_another_history_covers_nothing() {
        let mut g = ReadGrants::new();
        g.claim(2, 2, 10); // our entry 10 is of term 3
        g.check_claims(|_| Some(3));
        assert!(g.ping(2, 1, 0, 5, 5, 0).is_some());
        assert!(!g.may_release(0, 1, &[2], |_| 0));
    }

    #[test]
    fn a_lagging_holder_gets_no_grant() {
        let mut g = ReadGrants::new();
        g.claim(2, 1, 5);
        g.check_claims(|_| Some(1));
        assert_eq!(g.ping(2, 1, 0, 5 + LAG_ENTRIES + 1, 5, 0), None);
        assert!(!g.owes(0));
        assert!(g.ping(2, 2, 0, 5 + LAG_ENTRIES, 5, 0).is_some());
    }

    #[test]
    fn a_starting_node_owes_every_member_for_an_obligation() {
        let mut g = ReadGrants::new();
        g.owe_everyone_until(OBLIGATION_MS);
        assert!(g.owes(0));
        assert!(!g.may_release(0, 3, &[2, 3], |m| if m == 2 { 3 } else { 2 }));
        assert!(g.may_release(0, 3, &[2, 3], |_| 3));
        assert!(g.may_release(OBLIGATION_MS, 3, &[2, 3], |_| 0));
        g.keep_members(&[3]);
        assert!(g.claims.is_empty() && g.covered.is_empty());
    }
}
