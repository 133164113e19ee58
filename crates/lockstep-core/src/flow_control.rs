//! Flow control, as pure state (issue 12).
//!
//! A node whose appliers fall behind must slow the writers of the whole
//! cluster down instead of queueing without bound: "synchronous" must not
//! silently turn into unbounded lag. Galera does it with FC_STOP/FC_CONT
//! messages: a node whose receive queue exceeds `gcs.fc_limit` (times the
//! square root of the cluster size, unless `gcs.fc_single_primary`) asks
//! everyone to stop replicating until its queue is back at
//! `gcs.fc_limit × gcs.fc_factor`.
//!
//! Lockstep does the same, and throttles gradually before it: from half
//! of the limit a slow node announces a *level* (1 to [`MAX_SLOW_LEVEL`])
//! that grows with its queue, and every writer waits a little before it
//! replicates ([`throttle_delay`]), so the queue usually stops growing
//! before anybody is paused. Levels and stops travel through the total
//! order (`Action::FlowControl`), so every node sees the same cluster
//! state; a member that leaves the view takes its request with it.
//!
//! - [`Requester`]: this node's side, from its queue length to the level
//!   it must announce (with hysteresis, so a queue hovering at a boundary
//!   does not flood the log).
//! - [`Gate`]: the cluster's side, every member's announced level; pause
//!   time and counters for `wsrep_flow_control_*`.

use std::collections::BTreeMap;

/// Level of a member that asks everyone to stop (Galera's FC_STOP).
pub const STOP: u8 = u8::MAX;
/// Highest throttling level below a stop.
pub const MAX_SLOW_LEVEL: u8 = 4;
/// A writer's wait at the highest throttling level, in microseconds;
/// level *n* waits n/4 of it. About one commit on a busy cluster: the
/// 20 ms of issue 12 slowed each of 8 writers to a fifth of its pace as
/// soon as a follower's queue reached half of the limit, and left 13 % of
/// the CPU idle on 8-thread write-only load (2 100 transactions/s against
/// 2 450 with 2 ms).
pub const MAX_THROTTLE_US: u64 = 2_000;

/// `gcs.fc_*`, as Galera defines them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// `gcs.fc_limit`.
    pub limit: u64,
    /// `gcs.fc_factor`: resume when the queue is at `upper × factor`.
    pub factor: f64,
    /// `gcs.fc_single_primary`: the limit is not scaled by cluster size.
    pub single_primary: bool,
}

/// Galera's defaults, as the option table gives them: the table is their
/// one source.
impl Default for Limits {
    fn default() -> Self {
        Limits::from_options(&crate::options::Options::new("", ""))
    }
}

impl Limits {
    /// `gcs.fc_limit`, `gcs.fc_factor` and `gcs.fc_single_primary` (or its
    /// old name `gcs.fc_master_slave`) as `options` hold them. Every key
    /// has a value (the table's default until set) and values are checked
    /// when set, so the fallbacks here are never used: they are the
    /// strictest limit, no hysteresis and no single-primary scaling.
    pub fn from_options(options: &crate::options::Options) -> Limits {
        Limits {
            limit: options.int("gcs.fc_limit").map_or(0, |v| v.max(0) as u64),
            factor: options.float("gcs.fc_factor").unwrap_or(1.0),
            single_primary: options.bool("gcs.fc_single_primary").unwrap_or(false)
                || options.bool("gcs.fc_master_slave").unwrap_or(false),
        }
    }

    /// The queue length above which a node asks to stop, in a cluster of
    /// `members` (Galera 4 scales by √members when several nodes write).
    pub fn upper(&self, members: usize) -> u64 {
        if self.single_primary || members <= 1 {
            self.limit
        } else {
            ((self.limit as f64) * (members as f64).sqrt()).round() as u64
        }
    }

    /// The queue length at or below which a stopping node resumes.
    pub fn lower(&self, members: usize) -> u64 {
        let upper = self.upper(members);
        ((upper as f64) * self.factor.clamp(0.0, 1.0)).floor() as u64
    }

    /// The level a queue of `queue` calls for, without hysteresis: 0 below
    /// half of the upper limit, then 1..=4 in four equal steps up to the
    /// limit, [`STOP`] above it.
    pub fn level_for(&self, queue: u64, members: usize) -> u8 {
        let upper = self.upper(members);
        if queue > upper {
            return STOP;
        }
        let soft = upper / 2;
        if queue < soft.max(1) || upper == 0 {
            return 0;
        }
        let span = (upper - soft).max(1);
        let step = ((queue - soft) * u64::from(MAX_SLOW_LEVEL)) / span;
        (step as u8 + 1).min(MAX_SLOW_LEVEL)
    }
}

/// This node's side: what it announces to the group.
#[derive(Debug, Clone, Default)]
pub struct Requester {
    /// The level the group last heard from this node (0: none).
    announced: u8,
    /// FC_STOP requests sent (`wsrep_flow_control_sent`).
    pub stops_sent: u64,
}

impl Requester {
    pub fn announced(&self) -> u8 {
        self.announced
    }

    /// `wsrep_flow_control_requested`: this node asked to stop.
    pub fn requested(&self) -> bool {
        self.announced == STOP
    }

    /// Given the current queue, the level to announce now, if it
    /// changed. `exempt`: a desynced node or a donor, which never holds
    /// the cluster back (as in Galera); it withdraws what it announced.
    ///
    /// Hysteresis: a stop is withdrawn only when the queue is at the
    /// lower limit; a throttling level goes down only a whole step late.
    pub fn update(
        &mut self,
        queue: u64,
        members: usize,
        limits: &Limits,
        exempt: bool,
    ) -> Option<u8> {
        let raw = if exempt {
            0
        } else {
            limits.level_for(queue, members)
        };
        let next = match self.announced {
            _ if exempt => 0,
            STOP if raw == STOP || queue > limits.lower(members) => STOP,
            STOP => raw,
            cur if raw >= cur => raw,
            // Going down: only once the queue is a full step lower.
            cur => {
                let lower_level = limits.level_for(queue + queue / 4 + 1, members);
                if lower_level < cur {
                    raw
                } else {
                    cur
                }
            }
        };
        if next == self.announced {
            return None;
        }
        if next == STOP {
            self.stops_sent += 1;
        }
        self.announced = next;
        Some(next)
    }

    /// Whether a queue of `queue` would make [`Requester::update`] lower
    /// what this node announced: an applier that took an event asks, so
    /// that a stop or a throttle is withdrawn as soon as the queue allows,
    /// not at the next round.
    pub fn would_lower(&self, queue: u64, members: usize, limits: &Limits) -> bool {
        self.announced != 0
            && self
                .clone()
                .update(queue, members, limits, false)
                .is_some_and(|next| next < self.announced)
    }

    /// The group forgot this node's level (it left and rejoined).
    pub fn reset(&mut self) {
        self.announced = 0;
    }
}

/// The cluster's side: every member's announced level, in log order.
#[derive(Debug, Clone, Default)]
pub struct Gate {
    levels: BTreeMap<u64, u8>,
    /// FC_STOP requests received, own included (`wsrep_flow_control_recv`).
    pub stops_received: u64,
    /// Since when writers are paused (a stop in effect), monotonic ns.
    paused_since: Option<u64>,
    /// Nanoseconds paused before `paused_since` (since the last reset).
    paused_ns: u64,
    /// When the counters were last reset (`FLUSH STATUS`), monotonic ns.
    reset_at: u64,
    /// Every pause, start to end (a metrics histogram, ADR 0019).
    pauses: crate::metrics::Histogram,
}

impl Gate {
    /// A member announced `level` (delivered in log order) at `now_ns`.
    pub fn announce(&mut self, member: u64, level: u8, now_ns: u64) {
        if level == STOP && self.levels.get(&member) != Some(&STOP) {
            self.stops_received += 1;
        }
        if level == 0 {
            self.levels.remove(&member);
        } else {
            self.levels.insert(member, level);
        }
        self.update_pause(now_ns);
    }

    /// Only these members remain (a view): the others' levels go.
    pub fn retain(&mut self, members: &[u64], now_ns: u64) {
        self.levels.retain(|m, _| members.contains(m));
        self.update_pause(now_ns);
    }

    /// Forget everything (this node left the group).
    pub fn clear(&mut self, now_ns: u64) {
        self.levels.clear();
        self.update_pause(now_ns);
    }

    fn update_pause(&mut self, now_ns: u64) {
        match (self.stopped(), self.paused_since) {
            (true, None) => self.paused_since = Some(now_ns),
            (false, Some(since)) => {
                let ns = now_ns.saturating_sub(since);
                self.paused_ns += ns;
                self.pauses.observe_us(ns / 1000);
                self.paused_since = None;
            }
            _ => {}
        }
    }

    /// Some member asked to stop: writers wait (`wsrep_flow_control_active`).
    pub fn stopped(&self) -> bool {
        self.levels.values().any(|l| *l == STOP)
    }

    /// The highest throttling level announced (0: none, [`STOP`]: stop).
    pub fn level(&self) -> u8 {
        self.levels.values().copied().max().unwrap_or(0)
    }

    /// Members holding the cluster back, with their levels.
    pub fn holders(&self) -> impl Iterator<Item = (u64, u8)> + '_ {
        self.levels.iter().map(|(m, l)| (*m, *l))
    }

    /// The pauses that ended, by length (not reset by `FLUSH STATUS`:
    /// Prometheus counts only grow).
    pub fn pauses(&self) -> &crate::metrics::Histogram {
        &self.pauses
    }

    /// Total time paused since the last reset, ns (`_paused_ns`).
    pub fn paused_ns(&self, now_ns: u64) -> u64 {
        self.paused_ns
            + self
                .paused_since
                .map_or(0, |since| now_ns.saturating_sub(since))
    }

    /// The fraction of time paused since the last reset (`_paused`).
    pub fn paused_fraction(&self, now_ns: u64) -> f64 {
        let span = now_ns.saturating_sub(self.reset_at);
        if span == 0 {
            return 0.0;
        }
        (self.paused_ns(now_ns) as f64 / span as f64).min(1.0)
    }

    /// `FLUSH STATUS`: pause time and counters start over.
    pub fn reset_stats(&mut self, now_ns: u64) {
        self.paused_ns = 0;
        if self.paused_since.is_some() {
            self.paused_since = Some(now_ns);
        }
        self.reset_at = now_ns;
        self.stops_received = 0;
    }
}

/// How long a writer waits before it replicates at throttling `level`
/// (0 for none, and for [`STOP`], where it waits for the stop to end).
pub fn throttle_delay(level: u8) -> std::time::Duration {
    if level == 0 || level == STOP {
        return std::time::Duration::ZERO;
    }
    let level = u64::from(level.min(MAX_SLOW_LEVEL));
    std::time::Duration::from_micros(MAX_THROTTLE_US * level / u64::from(MAX_SLOW_LEVEL))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn limits_scale_like_galera() {
        let l = Limits::default();
        assert_eq!(l.upper(1), 16);
        assert_eq!(l.upper(4), 32);
        assert_eq!(l.upper(3), 28);
        assert_eq!(l.lower(4), 32);
        let single = Limits {
            single_primary: true,
            factor: 0.5,
            ..l
        };
        assert_eq!(single.upper(4), 16);
        assert_eq!(single.lower(4), 8);
    }

    #[test]
    fn levels_rise_with_the_queue() {
        let l = Limits::default();
        assert_eq!(l.level_for(0, 1), 0);
        assert_eq!(l.level_for(7, 1), 0);
        assert_eq!(l.level_for(8, 1), 1);
        assert_eq!(l.level_for(12, 1), 3);
        assert_eq!(l.level_for(16, 1), MAX_SLOW_LEVEL);
        assert_eq!(l.level_for(17, 1), STOP);
    }

    #[test]
    fn a_stop_is_withdrawn_at_the_lower_limit() {
        let l = Limits {
            factor: 0.5,
            ..Limits::default()
        };
        let mut r = Requester::default();
        assert_eq!(r.update(20, 1, &l, false), Some(STOP));
        assert!(r.requested());
        assert_eq!(r.stops_sent, 1);
        // Below the upper limit but above the lower one: still stopped.
        assert_eq!(r.update(12, 1, &l, false), None);
        assert_eq!(r.update(8, 1, &l, false), Some(1));
        assert_eq!(r.update(0, 1, &l, false), Some(0));
        assert_eq!(r.stops_sent, 1);
    }

    #[test]
    fn an_exempt_node_withdraws_and_never_stops() {
        let l = Limits::default();
        let mut r = Requester::default();
        assert_eq!(r.update(100, 1, &l, false), Some(STOP));
        assert_eq!(r.update(100, 1, &l, true), Some(0));
        assert_eq!(r.update(1000, 1, &l, true), None);
    }

    #[test]
    fn the_gate_pauses_while_any_member_stops_and_counts_the_time() {
        let mut g = Gate::default();
        g.announce(1, 2, 0);
        assert!(!g.stopped());
        assert_eq!(g.level(), 2);
        g.announce(1, STOP, 100);
        g.announce(2, STOP, 150);
        assert!(g.stopped());
        assert_eq!(g.stops_received, 2);
        g.announce(1, 0, 200);
        assert!(g.stopped(), "member 2 still stops");
        assert_eq!(g.paused_ns(250), 150);
        // Member 2 leaves: its stop goes with it.
        g.retain(&[1], 300);
        assert!(!g.stopped());
        assert_eq!(g.paused_ns(1000), 200);
        assert!((g.paused_fraction(1000) - 0.2).abs() < 1e-9);
        g.reset_stats(1000);
        assert_eq!(g.paused_ns(2000), 0);
        assert_eq!(g.stops_received, 0);
    }

    #[test]
    fn only_a_queue_that_lowers_the_announced_level_asks_for_a_round() {
        let l = Limits::default();
        let mut r = Requester::default();
        assert!(!r.would_lower(0, 3, &l), "nothing announced");
        assert_eq!(r.update(29, 3, &l, false), Some(STOP));
        assert!(!r.would_lower(29, 3, &l), "still above the limit");
        assert!(!r.would_lower(30, 3, &l), "a rise is the round's");
        assert!(r.would_lower(28, 3, &l), "at the lower limit");
        assert_eq!(r.announced(), STOP, "asking changes nothing");
        assert_eq!(r.update(28, 3, &l, false), Some(4));
        // Hysteresis: a throttle level goes down only a whole step late.
        assert!(!r.would_lower(27, 3, &l));
        assert!(r.would_lower(10, 3, &l));
    }

    #[test]
    fn throttling_grows_with_the_level() {
        assert_eq!(throttle_delay(0), std::time::Duration::ZERO);
        assert!(throttle_delay(1) < throttle_delay(4));
        assert_eq!(throttle_delay(4).as_micros() as u64, MAX_THROTTLE_US);
        assert_eq!(throttle_delay(STOP), std::time::Duration::ZERO);
    }

    proptest! {
        /// Whatever the queue does: a node is stopped exactly while its
        /// queue went above the upper limit and has not yet come down to
        /// the lower one; it never stops at or below the lower limit; an
        /// announcement only goes out when the level changes.
        #[test]
        fn the_requester_follows_the_queue(
            queues in proptest::collection::vec(0u64..80, 1..200),
            factor in 0.0f64..=1.0,
            members in 1usize..6,
        ) {
            let l = Limits { factor, ..Limits::default() };
            let mut r = Requester::default();
            let mut stopped = false;
            for q in queues {
                let before = r.announced();
                let said = r.update(q, members, &l, false);
                if q > l.upper(members) { stopped = true; }
                else if q <= l.lower(members) { stopped = false; }
                prop_assert_eq!(r.requested(), stopped, "queue {}", q);
                prop_assert_eq!(said.is_some(), r.announced() != before);
                if q <= l.lower(members) && q <= l.upper(members) {
                    prop_assert!(!r.requested());
                }
            }
        }
    }

    #[test]
    fn the_defaults_are_the_option_tables() {
        let l = Limits::default();
        assert_eq!((l.limit, l.factor, l.single_primary), (16, 1.0, false));
        let mut o = crate::options::Options::new("", "");
        o.set("gcs.fc_limit", "40").unwrap();
        o.set("gcs.fc_master_slave", "yes").unwrap();
        let l = Limits::from_options(&o);
        assert_eq!((l.limit, l.single_primary), (40, true));
    }
}
