//! Flow control on this node, one owned part: the levels the members
//! announced (`Gate`: whether writers here pause), what this node
//! announced (`Requester`), the limits (`gcs.fc_*`), and whether an
//! applier's wake-up of the rounds is in flight. The rules themselves
//! are `lockstep_core::flow_control`'s; this part keeps their state
//! together so that only these methods change it.

use lockstep_core::flow_control::{Gate, Limits, Requester};

#[derive(Debug, Default)]
pub struct FlowControl {
    gate: Gate,
    requester: Requester,
    limits: Limits,
    /// An applier told the rounds that the queue fell below what this
    /// node announced (`Input::FlowCheck`); cleared when a round looks, so
    /// one wake-up is in flight at most.
    check_sent: bool,
}

impl FlowControl {
    /// Every member's announced level, pause time and counters.
    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// What this node announced, and its counters.
    pub fn requester(&self) -> &Requester {
        &self.requester
    }

    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// Member `raft_id` announced `level` (a delivery).
    pub fn announce(&mut self, raft_id: u64, level: u8, now_ns: u64) {
        self.gate.announce(raft_id, level, now_ns);
    }

    /// Only these members' levels count (a view).
    pub fn retain(&mut self, members: &[u64], now_ns: u64) {
        self.gate.retain(members, now_ns);
    }

    /// A new group channel is a new member: nothing announced yet, and
    /// the old group's levels do not apply.
    pub fn new_channel(&mut self, now_ns: u64) {
        self.requester.reset();
        self.gate.clear(now_ns);
    }

    /// `FLUSH STATUS`.
    pub fn reset_stats(&mut self, now_ns: u64) {
        self.gate.reset_stats(now_ns);
    }

    /// A round looks at the queue: an applier may ask again after this.
    pub fn round_looked(&mut self) {
        self.check_sent = false;
    }

    /// The level to announce for a receive queue of `queue` among
    /// `members`, if it changed (`exempt`: a node that never holds the
    /// group back), with the limits it was taken against.
    pub fn update(&mut self, queue: u64, members: usize, exempt: bool) -> Option<(u8, Limits)> {
        let level = self
            .requester
            .update(queue, members, &self.limits, exempt)?;
        Some((level, self.limits))
    }

    /// Whether an applier that left `queue` events should wake the rounds
    /// to lower what this node announced; at most one wake-up is in
    /// flight (`sent` records whether it went).
    pub fn wants_check(&self, queue: u64, members: usize) -> bool {
        !self.check_sent && self.requester.would_lower(queue, members, &self.limits)
    }

    pub fn check_sent(&mut self, sent: bool) {
        self.check_sent = sent;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstep_core::flow_control::STOP;

    #[test]
    fn one_wake_up_is_in_flight_until_a_round_looks() {
        let mut fc = FlowControl::default();
        fc.set_limits(Limits {
            limit: 10,
            factor: 0.5,
            single_primary: true,
        });
        let (level, limits) = fc.update(12, 3, false).expect("a stop");
        assert_eq!((level, limits.limit), (STOP, 10));
        assert!(!fc.wants_check(11, 3), "still above the resume level");
        assert!(fc.wants_check(4, 3));
        fc.check_sent(true);
        assert!(!fc.wants_check(4, 3), "one in flight");
        fc.round_looked();
        assert!(fc.wants_check(4, 3));
        assert_ne!(fc.update(4, 3, false).map(|(l, _)| l), Some(STOP));
        assert!(!fc.wants_check(4, 3), "nothing left to lower");
        fc.new_channel(0);
        assert!(!fc.requester().requested() && !fc.gate().stopped());
    }
}
