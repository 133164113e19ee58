//! Heartbeats an idle leader can spare (issue 53: an idle cluster costs
//! no more CPU than it must).
//!
//! raft-rs's leader sends every follower a heartbeat each heartbeat
//! interval, whatever else it sent them. Each one costs both ends a send,
//! a receive and a wake-up, and the answer the same again: on an idle
//! cluster, most of the provider's CPU (`perf` of an idle leader's event
//! loop: 41 % of its samples in `sendto`, 15 % in the scheduler).
//!
//! A plain heartbeat (no read context: those carry ReadIndex rounds and
//! always go) to a follower of the leader's segment whose log matches the
//! leader's and who said it knows the commit index, while every entry of
//! the leader's log is committed, tells that follower only that the
//! leader lives. It is dropped when the follower heard from the
//! leader (an append, a heartbeat or a snapshot, the messages that reset
//! its election timer) recently enough that it still will within
//! `quiet_beat_ms` if the leader's next chance to send comes at the
//! latest possible time: the next heartbeat interval, or the end of the
//! driver's sleep when the group idles in close contact
//! (`Group::idle_wait_ms`). So a ticking leader's follower hears from it
//! at least every `quiet_beat_ms`, four times per election timeout with
//! the default timing; a sleeping leader's, at least every quiet beat
//! plus one sleep. A follower behind, a snapshot, a pending read or an
//! uncommitted entry gets every heartbeat as before.

use raft::eraftpb::{Message, MessageType};
use std::collections::HashMap;

/// At most this many followers are remembered; past it, those whose last
/// message is older than the quiet beat (which decide nothing) are forgotten.
/// A group has at most a few dozen members.
const REMEMBERED: usize = 64;

/// When each follower last got a message that resets its election timer.
#[derive(Debug, Default)]
pub struct Beats {
    quiet_beat_ms: u64,
    idle_beat_ms: u64,
    last_sent: HashMap<u64, u64>,
}

impl Beats {
    /// `quiet_beat_ms`: the longest a settled follower of a ticking
    /// leader goes without a message from it; `idle_beat_ms`: the same
    /// when the leader sleeps in close contact (`Group::idle_wait_ms`).
    pub fn new(quiet_beat_ms: u64, idle_beat_ms: u64) -> Beats {
        Beats {
            quiet_beat_ms,
            idle_beat_ms,
            last_sent: HashMap::new(),
        }
    }

    /// Whether the leader may drop `msg`: a plain heartbeat to a follower
    /// that is `settled` (its log matches, every entry committed) and
    /// that, at the leader's next chance to send (`next_chance_ms` from
    /// `now`), will have heard from it less than `quiet_beat_ms` before.
    /// Nothing is spared when the next chance is not sooner than that.
    pub fn spare(&self, msg: &Message, now: u64, settled: bool, next_chance_ms: u64) -> bool {
        let spare_ms = self.quiet_beat_ms.saturating_sub(next_chance_ms);
        settled
            && msg.get_msg_type() == MessageType::MsgHeartbeat
            && msg.context.is_empty()
            && self
                .last_sent
                .get(&msg.to)
                .is_some_and(|t| now < t.saturating_add(spare_ms))
    }

    /// How long from `now` until follower `id` would have gone the idle
    /// beat without a message (0 when it already has); `None` when it
    /// was never sent one.
    pub fn time_left(&self, id: u64, now: u64) -> Option<u64> {
        let last = self.last_sent.get(&id)?;
        Some(last.saturating_add(self.idle_beat_ms).saturating_sub(now))
    }

    /// `msg` goes out at `now`.
    pub fn sent(&mut self, msg: &Message, now: u64) {
        if !matches!(
            msg.get_msg_type(),
            MessageType::MsgAppend | MessageType::MsgHeartbeat | MessageType::MsgSnapshot
        ) {
            return;
        }
        if self.last_sent.len() >= REMEMBERED && !self.last_sent.contains_key(&msg.to) {
            let quiet = self.quiet_beat_ms;
            self.last_sent.retain(|_, t| now < t.saturating_add(quiet));
        }
        self.last_sent.insert(msg.to, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(kind: MessageType, to: u64) -> Message {
        let mut m = Message::default();
        m.set_msg_type(kind);
        m.to = to;
        m
    }

    #[test]
    fn a_settled_follower_gets_a_heartbeat_once_per_quiet_beat() {
        // 250 ms quiet beat, heartbeats every 100 ms: sent at 0, 200, 400.
        let mut b = Beats::new(250, 500);
        let mut sent = Vec::new();
        for now in (0..=500).step_by(100) {
            let m = msg(MessageType::MsgHeartbeat, 2);
            if !b.spare(&m, now, true, 100) {
                b.sent(&m, now);
                sent.push(now);
            }
        }
        assert_eq!(sent, vec![0, 200, 400]);
    }

    #[test]
    fn only_plain_heartbeats_to_settled_followers_are_spared() {
        let mut b = Beats::new(250, 500);
        b.sent(&msg(MessageType::MsgAppend, 2), 0);
        let beat = msg(MessageType::MsgHeartbeat, 2);
        assert!(b.spare(&beat, 100, true, 100), "an append 100 ms ago");
        assert!(!b.spare(&beat, 100, false, 100), "a follower not settled");
        assert!(!b.spare(&beat, 150, true, 100), "150 ms: the spare is over");
        let mut read = beat.clone();
        read.context = vec![1].into();
        assert!(!b.spare(&read, 100, true, 100), "a ReadIndex round");
        let other = msg(MessageType::MsgHeartbeat, 3);
        assert!(!b.spare(&other, 100, true, 100), "a follower never sent to");
        // Messages that do not reset a follower's timer do not count.
        b.sent(&msg(MessageType::MsgTimeoutNow, 3), 100);
        assert!(!b.spare(&other, 110, true, 100));
    }

    #[test]
    fn no_heartbeat_is_spared_when_the_next_chance_is_not_sooner_than_the_quiet_beat() {
        let b = {
            let mut b = Beats::new(100, 200);
            b.sent(&msg(MessageType::MsgHeartbeat, 2), 0);
            b
        };
        let beat = msg(MessageType::MsgHeartbeat, 2);
        assert!(!b.spare(&beat, 1, true, 100));
    }

    #[test]
    fn a_leader_about_to_sleep_spares_only_what_outlasts_its_sleep() {
        // 250 ms quiet beat. Ticking every 100 ms, a follower sent to
        // 100 ms ago is spared; a leader about to sleep 200 ms spares only
        // one sent to less than 50 ms ago.
        let mut b = Beats::new(250, 500);
        b.sent(&msg(MessageType::MsgHeartbeat, 2), 0);
        let beat = msg(MessageType::MsgHeartbeat, 2);
        assert!(b.spare(&beat, 100, true, 100));
        assert!(
            !b.spare(&beat, 100, true, 200),
            "the follower would wait 300 ms"
        );
        assert!(b.spare(&beat, 40, true, 200));
    }

    #[test]
    fn followers_are_remembered_within_the_bound() {
        let mut b = Beats::new(250, 500);
        for to in 0..(REMEMBERED as u64 * 3) {
            b.sent(&msg(MessageType::MsgHeartbeat, to), to * 200);
        }
        assert!(b.last_sent.len() <= REMEMBERED);
    }

    #[test]
    fn the_time_left_counts_down_the_idle_beat_from_the_last_message() {
        let mut b = Beats::new(250, 500);
        assert_eq!(b.time_left(2, 0), None, "never sent one");
        b.sent(&msg(MessageType::MsgHeartbeat, 2), 100);
        assert_eq!(b.time_left(2, 300), Some(300));
        assert_eq!(b.time_left(2, 700), Some(0));
        b.sent(&msg(MessageType::MsgRequestVote, 2), 700);
        assert_eq!(
            b.time_left(2, 700),
            Some(0),
            "a vote does not reset its timer"
        );
    }
}
