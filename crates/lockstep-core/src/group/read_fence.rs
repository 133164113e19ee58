//! Causal-read fences without a log entry (ADR 0016).
//!
//! A causal read (`wsrep_sync_wait`) must see every transaction committed
//! anywhere before it began. It used to order a `Barrier` action: a log
//! entry, a replication round and, on a follower, the forward to the
//! leader. Raft's ReadIndex needs none of that: the leader's commit index
//! at a moment after the read began covers every acknowledged commit, and
//! the read waits until this node has applied the log that far.
//!
//! The leader answers from a **lease** while it holds one, with no network
//! round: a ReadIndex round of heartbeats sent at `t` and acknowledged by a
//! quorum proves that a quorum heard from this leader at or after `t`.
//! With check-quorum on, raft-rs members refuse to vote (or pre-vote) for
//! anyone else for an election timeout after hearing from their leader,
//! counted in ticks, which never run ahead of real time here (late ticks
//! are dropped, `GroupConfig::max_catch_up_ticks`). So no other leader can
//! exist before `t` + the election timeout, and the lease ends well before
//! that ([`lease_ms`]). It is measured on this node's monotonic clock at
//! the moment a read is answered, so a stalled round cannot stretch it.
//! Without a lease (a new leader, a leadership transfer, no reads for a
//! while) the leader answers after a heartbeat round (raft-rs's "safe"
//! ReadIndex).
//!
//! This module is the bookkeeping; `node` drives raft-rs with it.

use std::collections::HashMap;

/// A read context: what raft-rs carries through a ReadIndex round and
/// gives back with the index. One byte of kind, eight of number.
const CTX_LEN: usize = 9;
const CTX_READS: u8 = 1;
const CTX_LEASE: u8 = 2;

/// The leader keeps its lease renewed while causal reads came in within
/// this long (its own or its followers'); an idle cluster sends no
/// extra heartbeats.
pub const LEASE_KEEP_MS: u64 = 10_000;

/// How long a lease lasts after the heartbeat round that proved it was
/// sent: half of what the members' vote refusal guarantees (the election
/// timeout less two ticks: the first tick after a heartbeat may come at
/// once, and one more for good measure), to absorb scheduling delays
/// between reading the clock and answering.
pub fn lease_ms(election_ticks: usize, tick_ms: u64) -> u64 {
    (election_ticks.saturating_sub(2) as u64).saturating_mul(tick_ms) / 2
}

/// Reads asked in one ReadIndex request.
#[derive(Debug)]
struct Asked {
    reads: Vec<u64>,
    at: u64,
    term: u64,
}

/// Reads answered with an index this node has not applied yet.
#[derive(Debug)]
struct Answered {
    index: u64,
    term: u64,
    reads: Vec<u64>,
}

/// Causal reads on their way to a fence, and the leader's lease.
#[derive(Debug)]
pub struct ReadFences {
    lease_ms: u64,
    retry_ms: u64,
    /// Reads not asked yet (no leader known, or asked at the next poll).
    /// Bounded by the server's sessions: each waits for its answer.
    queued: Vec<u64>,
    /// ReadIndex requests in flight, by context number. One per poll
    /// that had reads; a request unanswered after `retry_ms` or across a
    /// term change is replaced by a new one, so at most the polls of
    /// `retry_ms` are here.
    asked: HashMap<u64, Asked>,
    /// Answered reads waiting for this node to apply up to the index,
    /// with the term they were answered in. Bounded like `queued`.
    answered: Vec<Answered>,
    next_ctx: u64,
    /// The lease: valid until this time, in this term.
    lease_until: u64,
    lease_term: u64,
    /// The lease round in flight: context number, sent at, term.
    probe: Option<(u64, u64, u64)>,
    /// When the last causal read was seen.
    last_read: Option<u64>,
}

/// What a read context stands for.
#[derive(Debug, PartialEq, Eq)]
enum Ctx {
    Reads(u64),
    Lease(u64),
}

fn encode(kind: u8, n: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(CTX_LEN);
    v.push(kind);
    v.extend_from_slice(&n.to_be_bytes());
    v
}

fn decode(ctx: &[u8]) -> Option<Ctx> {
    if ctx.len() != CTX_LEN {
        return None;
    }
    let n = u64::from_be_bytes(ctx[1..].try_into().ok()?);
    match ctx[0] {
        CTX_READS => Some(Ctx::Reads(n)),
        CTX_LEASE => Some(Ctx::Lease(n)),
        _ => None,
    }
}

impl ReadFences {
    /// No read waits and no lease round flies: nothing here needs a
    /// round before an input comes (`Group::is_quiet`).
    pub fn is_idle(&self) -> bool {
        self.queued.is_empty()
            && self.asked.is_empty()
            && self.answered.is_empty()
            && self.probe.is_none()
    }

    pub fn new(lease_ms: u64, retry_ms: u64) -> ReadFences {
        ReadFences {
            lease_ms,
            retry_ms: retry_ms.max(1),
            queued: Vec::new(),
            asked: HashMap::new(),
            answered: Vec::new(),
            next_ctx: 1,
            lease_until: 0,
            lease_term: 0,
            probe: None,
            last_read: None,
        }
    }

    /// A causal read on this node (`id`: what its fence is delivered as).
    pub fn read(&mut self, id: u64, now: u64) {
        self.queued.push(id);
        self.saw_read(now);
    }

    /// A causal read seen, here or (leader) a follower's request.
    pub fn saw_read(&mut self, now: u64) {
        self.last_read = Some(now);
    }

    /// Reads waiting for an answer or for the log, in all.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.queued.len()
            + self.asked.values().map(|a| a.reads.len()).sum::<usize>()
            + self.answered.iter().map(|a| a.reads.len()).sum::<usize>()
    }

    /// The context of a ReadIndex request for every read not asked yet
    /// and every request lost (unanswered for `retry_ms`, or asked in an
    /// earlier term: raft-rs forgets pending reads when the term
    /// changes), and every read answered in an earlier term and not
    /// applied yet: its index is a leader's last log index, whose tail a
    /// new leader may replace with a shorter log. `None`: nothing to ask.
    pub fn to_ask(&mut self, now: u64, term: u64) -> Option<Vec<u8>> {
        let (stale, current): (Vec<Answered>, Vec<Answered>) = std::mem::take(&mut self.answered)
            .into_iter()
            .partition(|a| a.term != term);
        self.answered = current;
        self.queued.extend(stale.into_iter().flat_map(|a| a.reads));
        let retry = self.retry_ms;
        let lost: Vec<u64> = self
            .asked
            .iter()
            .filter(|(_, a)| a.term != term || now >= a.at + retry)
            .map(|(c, _)| *c)
            .collect();
        for c in lost {
            if let Some(a) = self.asked.remove(&c) {
                self.queued.extend(a.reads);
            }
        }
        if self.queued.is_empty() {
            return None;
        }
        let n = self.next_ctx;
        self.next_ctx += 1;
        let reads = std::mem::take(&mut self.queued);
        self.asked.insert(
            n,
            Asked {
                reads,
                at: now,
                term,
            },
        );
        Some(encode(CTX_READS, n))
    }

    /// Whether causal reads came in within `LEASE_KEEP_MS` (the leader
    /// keeps its lease renewed meanwhile).
    pub fn reads_lately(&self, now: u64) -> bool {
        self.last_read.is_some_and(|t| now < t + LEASE_KEEP_MS)
    }

    /// The context of a lease round if one is due: this node leads, reads
    /// came in lately, and the lease is missing or past half of its life.
    pub fn lease_round(&mut self, now: u64, leader: bool, term: u64) -> Option<Vec<u8>> {
        if !leader || self.lease_ms == 0 {
            return None;
        }
        if !self.reads_lately(now) {
            return None;
        }
        if let Some((_, at, t)) = self.probe {
            if t == term && now < at + self.retry_ms {
                return None; // one round at a time
            }
        }
        if self.lease_term == term && now + self.lease_ms / 2 < self.lease_until {
            return None;
        }
        let n = self.next_ctx;
        self.next_ctx += 1;
        self.probe = Some((n, now, term));
        Some(encode(CTX_LEASE, n))
    }

    /// Whether the leader may answer a read from its commit index now,
    /// without a round.
    pub fn lease_valid(&self, now: u64, term: u64) -> bool {
        self.lease_term == term && now < self.lease_until
    }

    /// Until when the lease holds, if it does at `now` in `term`.
    pub fn lease_until(&self, now: u64, term: u64) -> Option<u64> {
        self.lease_valid(now, term).then_some(self.lease_until)
    }

    /// raft-rs answered a request: `index` is the leader's read index
    /// (its last log index when it answered). `term`: this node's term now.
    pub fn answered(&mut self, ctx: &[u8], index: u64, term: u64) {
        match decode(ctx) {
            Some(Ctx::Reads(n)) => {
                if let Some(a) = self.asked.remove(&n) {
                    self.answered.push(Answered {
                        index,
                        term,
                        reads: a.reads,
                    });
                }
            }
            Some(Ctx::Lease(n)) => {
                if let Some((p, at, t)) = self.probe {
                    // Only our own leadership's round proves a lease.
                    if p == n && t == term {
                        self.probe = None;
                        if self.lease_term != term {
                            // A lease of an earlier leadership says
                            // nothing about this one.
                            self.lease_until = 0;
                        }
                        self.lease_term = term;
                        self.lease_until = self.lease_until.max(at + self.lease_ms);
                    }
                }
            }
            None => {}
        }
    }

    /// The reads whose index this node has applied, ready for their fence.
    pub fn applied(&mut self, applied: u64) -> Vec<u64> {
        let mut done = Vec::new();
        self.answered.retain_mut(|a| {
            if a.index <= applied {
                done.append(&mut a.reads);
                false
            } else {
                true
            }
        });
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_of_one_poll_share_one_request_and_wait_for_the_log() {
        let mut f = ReadFences::new(450, 200);
        f.read(7, 0);
        f.read(8, 0);
        let ctx = f.to_ask(0, 3).expect("a request");
        assert_eq!(f.to_ask(1, 3), None, "nothing new to ask");
        f.answered(&ctx, 40, 3);
        assert!(f.applied(39).is_empty(), "index 40 not applied yet");
        assert_eq!(f.applied(40), vec![7, 8]);
        assert_eq!(f.waiting(), 0);
    }

    #[test]
    fn a_lost_request_is_asked_again() {
        let mut f = ReadFences::new(450, 200);
        f.read(1, 0);
        let first = f.to_ask(0, 3).expect("a request");
        assert_eq!(f.to_ask(199, 3), None);
        let again = f.to_ask(200, 3).expect("asked again after retry_ms");
        assert_ne!(first, again);
        f.answered(&first, 10, 3); // the late answer of the first is ignored
        assert!(f.applied(u64::MAX).is_empty());
        f.read(2, 201);
        let third = f.to_ask(201, 4).expect("a new term asks everything again");
        f.answered(&third, 12, 4);
        let mut done = f.applied(12);
        done.sort_unstable();
        assert_eq!(done, vec![1, 2]);
    }

    #[test]
    fn an_answer_of_an_earlier_term_not_applied_is_asked_again() {
        // Answered with a leader's last index, whose tail the next
        // leader may cut: the index might never be reached.
        let mut f = ReadFences::new(450, 200);
        f.read(1, 0);
        let first = f.to_ask(0, 3).expect("a request");
        f.answered(&first, 50, 3);
        assert_eq!(f.to_ask(1, 3), None, "same term: wait for index 50");
        let again = f.to_ask(2, 4).expect("asked again in term 4");
        f.answered(&again, 45, 4);
        assert_eq!(f.applied(45), vec![1]);
        assert_eq!(f.waiting(), 0);
    }

    #[test]
    fn the_lease_lasts_from_when_its_round_was_sent() {
        let mut f = ReadFences::new(450, 200);
        assert_eq!(f.lease_round(0, true, 5), None, "no reads, no lease rounds");
        f.saw_read(100);
        let probe = f.lease_round(100, true, 5).expect("a lease round");
        assert_eq!(f.lease_round(150, true, 5), None, "one round at a time");
        assert!(!f.lease_valid(150, 5));
        f.answered(&probe, 9, 5);
        assert!(f.lease_valid(549, 5), "sent at 100, lasts 450 ms");
        assert!(!f.lease_valid(550, 5));
        assert!(!f.lease_valid(300, 6), "not in another term");
        assert_eq!(f.lease_round(320, true, 5), None, "more than half left");
        assert!(f.lease_round(330, true, 5).is_some(), "renewed at half");
        assert_eq!(f.lease_round(330, false, 5), None, "followers hold none");
    }

    #[test]
    fn a_new_leadership_starts_its_lease_afresh() {
        let mut f = ReadFences::new(450, 200);
        f.saw_read(0);
        let first = f.lease_round(0, true, 5).expect("a lease round");
        f.answered(&first, 9, 5);
        assert!(f.lease_valid(400, 5));
        // Leadership lost and won again in term 7, a round sent at 10.
        let again = f.lease_round(10, true, 7).expect("a round in the new term");
        f.answered(&again, 12, 7);
        assert!(f.lease_valid(459, 7));
        assert!(!f.lease_valid(460, 7), "not stretched by term 5's lease");
    }

    #[test]
    fn a_lease_round_of_an_earlier_term_proves_nothing() {
        let mut f = ReadFences::new(450, 200);
        f.saw_read(0);
        let probe = f.lease_round(0, true, 5).expect("a lease round");
        f.answered(&probe, 9, 6);
        assert!(!f.lease_valid(1, 6));
        assert!(!f.lease_valid(1, 5));
    }

    #[test]
    fn the_lease_stops_being_renewed_when_reads_stop() {
        let mut f = ReadFences::new(450, 200);
        f.saw_read(0);
        assert!(f.lease_round(0, true, 1).is_some());
        assert!(f.lease_round(LEASE_KEEP_MS, true, 1).is_none());
    }

    #[test]
    fn foreign_contexts_are_ignored() {
        let mut f = ReadFences::new(450, 200);
        f.read(1, 0);
        let _ = f.to_ask(0, 1);
        f.answered(b"", 5, 1);
        f.answered(&[9; CTX_LEN], 5, 1);
        f.answered(&[CTX_READS, 0, 0], 5, 1);
        assert_eq!(f.waiting(), 1);
        assert_eq!(lease_ms(20, 50), 450);
        assert_eq!(lease_ms(1, 50), 0, "no lease with a tiny election timeout");
    }
}
