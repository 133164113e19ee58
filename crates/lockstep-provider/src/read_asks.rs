//! A follower's causal reads asking the leader for its read index
//! (ADR 0016), batched: one ask in flight at a time; reads that begin
//! while it flies go together in the next one, sent when its answer
//! arrives. A read may only use an ask sent after it began, so a read
//! never joins the ask in flight.
//!
//! Without batching, eight concurrent readers meant eight asks, eight
//! answers and eight wake-ups of every waiting thread, and a follower
//! read a third as fast as the leader. Each read's thread is woken alone
//! (`Thread::unpark`) when its answer comes: a broadcast also woke the
//! reads that wait for the next ask, for nothing.

use std::collections::HashMap;
use std::thread::Thread;
use std::time::{Duration, Instant};

/// The ask in flight.
#[derive(Debug)]
struct Flight {
    n: u64,
    leader: u64,
    sent: Instant,
    reads: Vec<u64>,
}

/// What a read must do after [`ReadAsks::join`].
#[derive(Debug, PartialEq, Eq)]
pub enum Join {
    /// Send ask `n` to the leader: this read starts a flight.
    Send { n: u64 },
    /// Wait: the read goes with the next ask.
    Wait,
}

/// The asks of this node. Bounded by the reads waiting (each is a server
/// session waiting for its answer, at most `ASK_WAIT` before it gives up).
#[derive(Debug, Default)]
pub struct ReadAsks {
    flight: Option<Flight>,
    next: Vec<u64>,
    /// The threads of the reads waiting for an answer. Bound: one per
    /// waiting read.
    waiters: HashMap<u64, Thread>,
}

impl ReadAsks {
    /// Read `id` of the current thread wants `leader`'s read index: it
    /// waits to be unparked by the answer ([`ReadAsks::answered`]). A
    /// flight that has not come back within `lost` (or went to another
    /// leader) is given up.
    pub fn join(&mut self, id: u64, leader: u64, now: Instant, lost: Duration) -> Join {
        self.waiters.insert(id, std::thread::current());
        let flying = self
            .flight
            .as_ref()
            .is_some_and(|f| f.leader == leader && now < f.sent + lost);
        if flying {
            self.next.push(id);
            return Join::Wait;
        }
        let mut reads = std::mem::take(&mut self.next);
        reads.push(id);
        self.flight = Some(Flight {
            n: id,
            leader,
            sent: now,
            reads,
        });
        Join::Send { n: id }
    }

    /// Read `id` stopped waiting (answered, or given up).
    pub fn leave(&mut self, id: u64) {
        self.waiters.remove(&id);
    }

    /// Leader `from` answered ask `n`: the reads it answers, each with
    /// the thread to wake, and the next ask to send (its number is
    /// `next_n`, which the caller reserved), if reads are waiting for one.
    pub fn answered(
        &mut self,
        n: u64,
        from: u64,
        next_n: u64,
        now: Instant,
    ) -> (Vec<(u64, Option<Thread>)>, Option<u64>) {
        match &self.flight {
            Some(f) if f.n == n && f.leader == from => {}
            _ => return (Vec::new(), None),
        }
        let done: Vec<(u64, Option<Thread>)> = self
            .flight
            .take()
            .map(|f| f.reads)
            .unwrap_or_default()
            .into_iter()
            .map(|id| (id, self.waiters.remove(&id)))
            .collect();
        if self.next.is_empty() {
            return (done, None);
        }
        self.flight = Some(Flight {
            n: next_n,
            leader: from,
            sent: now,
            reads: std::mem::take(&mut self.next),
        });
        (done, Some(next_n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOST: Duration = Duration::from_millis(100);

    /// The ids `answered` gives, and the next ask.
    fn answered(
        a: &mut ReadAsks,
        n: u64,
        from: u64,
        next_n: u64,
        t: Instant,
    ) -> (Vec<u64>, Option<u64>) {
        let (reads, next) = a.answered(n, from, next_n, t);
        (reads.into_iter().map(|(id, _)| id).collect(), next)
    }

    #[test]
    fn reads_during_a_flight_go_with_the_next_ask() {
        let t = Instant::now();
        let mut a = ReadAsks::default();
        assert_eq!(a.join(1, 9, t, LOST), Join::Send { n: 1 });
        assert_eq!(a.join(2, 9, t, LOST), Join::Wait);
        assert_eq!(a.join(3, 9, t, LOST), Join::Wait);
        let (done, next) = answered(&mut a, 1, 9, 50, t);
        assert_eq!(done, vec![1], "2 and 3 began after ask 1 left");
        assert_eq!(next, Some(50));
        assert_eq!(answered(&mut a, 50, 9, 51, t), (vec![2, 3], None));
        assert_eq!(a.join(4, 9, t, LOST), Join::Send { n: 4 });
    }

    #[test]
    fn only_the_asked_leader_answers_the_flight() {
        let t = Instant::now();
        let mut a = ReadAsks::default();
        let _ = a.join(1, 9, t, LOST);
        assert_eq!(
            answered(&mut a, 1, 8, 50, t),
            (vec![], None),
            "not the leader asked"
        );
        assert_eq!(
            answered(&mut a, 7, 9, 50, t),
            (vec![], None),
            "not the ask in flight"
        );
        assert_eq!(answered(&mut a, 1, 9, 50, t), (vec![1], None));
    }

    #[test]
    fn a_lost_flight_or_a_new_leader_starts_a_new_ask() {
        let t = Instant::now();
        let mut a = ReadAsks::default();
        let _ = a.join(1, 9, t, LOST);
        assert_eq!(a.join(2, 9, t + LOST, LOST), Join::Send { n: 2 });
        assert_eq!(a.join(3, 8, t + LOST, LOST), Join::Send { n: 3 });
        assert_eq!(answered(&mut a, 3, 8, 50, t), (vec![3], None));
    }

    #[test]
    fn an_answer_hands_back_the_threads_of_the_reads_it_answers() {
        let mut a = ReadAsks::default();
        let now = Instant::now();
        let wait = Duration::from_secs(1);
        assert_eq!(a.join(10, 2, now, wait), Join::Send { n: 10 });
        assert_eq!(a.join(11, 2, now, wait), Join::Wait);
        let (reads, next) = a.answered(10, 2, 12, now);
        let ids: Vec<u64> = reads.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, [10]);
        assert!(reads[0].1.is_some(), "the waiting thread is handed back");
        assert_eq!(next, Some(12), "read 11 goes with the next ask");
        a.leave(11);
        assert!(a.waiters.is_empty());
    }
}
