//! Time the leases can trust (ADR 0016, 0022, and ADR 0036).
//!
//! Causal reads answered from a lease rest on two clock assumptions: a
//! node's clock never stands still while real time passes (a holder's lease
//! and a leader's lease end in time), and the clock rates of the nodes
//! agree within the leases' margin of 2 (a lease lasts half of what the
//! matching promise of the other nodes lasts). A faulty clock breaks
//! either: a virtual machine's clock source, an administrator's
//! `libfaketime`, a broken TSC. This module holds the three defences, all
//! without I/O:
//!
//! - [`SteadyClock`]: a reading of the monotonic clock that never stands
//!   still after the clock steps back (it goes on from where it was);
//! - [`ObligationClock`]: the granter's side, which must never run ahead:
//!   a step forward counts for at most a bounded amount;
//! - [`ClockRates`]: each peer's clock rate against this node's, measured
//!   from round-trip probes that carry the answerer's clock; leases are
//!   not used while any member's rate is off by more than [`RATE_BOUND`].

use std::collections::HashMap;

/// A step back smaller than this is two threads reading the clock in a
/// race, not a fault: the later reading is clamped to the earlier one.
pub const STEP_BACK_NOISE_NS: u64 = 1_000_000;

/// A monotonic clock that goes on after a step back.
///
/// `read(raw)` takes a raw monotonic reading (ns) and returns the steady
/// time: it advances by what the raw clock advanced, and after a step back
/// of at least [`STEP_BACK_NOISE_NS`] it continues from its last value
/// rather than waiting for the raw clock to catch up (which would freeze
/// every lease judged on it for as long as the step).
#[derive(Debug, Clone, Default)]
pub struct SteadyClock {
    last_raw: Option<u64>,
    now: u64,
    steps_back: u64,
}

impl SteadyClock {
    pub const fn new() -> SteadyClock {
        SteadyClock {
            last_raw: None,
            now: 0,
            steps_back: 0,
        }
    }

    pub fn read(&mut self, raw: u64) -> u64 {
        match self.last_raw {
            None => self.now = raw,
            Some(last) if raw >= last => self.now += raw - last,
            Some(last) if last - raw < STEP_BACK_NOISE_NS => return self.now,
            Some(_) => self.steps_back += 1,
        }
        self.last_raw = Some(raw);
        self.now
    }

    /// Steps back seen (a faulty clock).
    pub fn steps_back(&self) -> u64 {
        self.steps_back
    }
}

/// The granter's clock (milliseconds): a grant obliges its granter for a
/// while, and a clock that leaps forward would end the obligation early
/// while the holder still reads from its lease. Each reading advances this
/// clock by what the input advanced, but by at most `max_step`: a leap
/// counts as one step. A thread that really stalls makes it fall behind
/// real time, which only lengthens obligations (a later release of this
/// node's own commits while a holder is slow or gone).
#[derive(Debug, Clone)]
pub struct ObligationClock {
    last: u64,
    now: u64,
    max_step: u64,
}

impl ObligationClock {
    pub fn new(start: u64, max_step: u64) -> ObligationClock {
        ObligationClock {
            last: start,
            now: start,
            max_step,
        }
    }

    /// A reading of the node's clock (never smaller than the last one; a
    /// smaller one is ignored).
    pub fn advance(&mut self, input: u64) -> u64 {
        if input > self.last {
            self.now += (input - self.last).min(self.max_step);
            self.last = input;
        }
        self.now
    }

    pub fn now(&self) -> u64 {
        self.now
    }
}

/// How far a peer's clock rate may be from this node's (as a fraction:
/// 0.25 takes 0.8x to 1.25x) before leases stop. Well inside the leases'
/// margin of 2, so a rate is caught long before it matters; far outside
/// any real clock's drift (parts per million), so it never trips on one.
pub const RATE_BOUND: f64 = 0.25;
/// A rate is judged over at least this much of this node's time, so
/// that round-trip noise (the error is the two half round trips over the
/// window) stays small against [`RATE_BOUND`].
pub const WINDOW_NS: u64 = 2_000_000_000;
/// After a rate out of bounds, leases stay off this long, and until a
/// whole window in bounds has been measured since.
pub const HOLD_NS: u64 = 10_000_000_000;
/// Peers tracked at most (members come and go; stale ones are dropped by
/// `keep`, a flood of made-up ids resets the table).
const MAX_PEERS: usize = 1024;

/// One probe: this node's send and receive times and the peer's clock
/// when it answered.
#[derive(Debug, Clone, Copy)]
struct Sample {
    /// Midpoint of send and receive on this node's clock.
    mid: u64,
    /// Half the round trip: the most the peer's reading can be off `mid`.
    half_rtt: u64,
    remote: u64,
}

#[derive(Debug, Clone, Default)]
struct PeerClock {
    /// The start of the window being measured.
    reference: Option<Sample>,
    /// The last rate measured over a whole window.
    rate: Option<f64>,
    /// When (this node's clock) a rate out of bounds was last measured.
    off_at: Option<u64>,
}

/// What a new measurement changed, for the log.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RateChange {
    /// The peer's rate went out of bounds (it was in, or unknown).
    Off { rate: f64 },
    /// The peer's rate is back in bounds for a whole window.
    Back { rate: f64 },
}

/// Each peer's clock rate against this node's (see the module comment).
#[derive(Debug, Clone, Default)]
pub struct ClockRates {
    peers: HashMap<u64, PeerClock>,
}

impl ClockRates {
    pub fn new() -> ClockRates {
        ClockRates::default()
    }

    /// A probe answered: sent at `sent` and answered at `received` (this
    /// node's steady clock, ns), carrying the peer's clock `remote` (its
    /// steady clock, ns, any origin). Returns what changed, if anything.
    pub fn sample(
        &mut self,
        peer: u64,
        sent: u64,
        received: u64,
        remote: u64,
    ) -> Option<RateChange> {
        if received < sent {
            return None;
        }
        if self.peers.len() >= MAX_PEERS && !self.peers.contains_key(&peer) {
            self.peers.clear();
        }
        let s = Sample {
            mid: sent + (received - sent) / 2,
            half_rtt: (received - sent).div_ceil(2),
            remote,
        };
        let p = self.peers.entry(peer).or_default();
        let Some(r) = p.reference else {
            p.reference = Some(s);
            return None;
        };
        let span = s.mid.saturating_sub(r.mid);
        if span < WINDOW_NS {
            return None;
        }
        p.reference = Some(s);
        let rate = (s.remote as f64 - r.remote as f64) / span as f64;
        // The readings can be off by the half round trips at both ends.
        let err = (r.half_rtt + s.half_rtt) as f64 / span as f64;
        let was_off = p.off_at.is_some();
        let off = (rate - 1.0).abs() > RATE_BOUND + err;
        let in_bounds = (rate - 1.0).abs() + err <= RATE_BOUND;
        p.rate = Some(rate);
        if off {
            p.off_at = Some(s.mid);
            return (!was_off).then_some(RateChange::Off { rate });
        }
        // Back only once a whole window since the last rate out of
        // bounds measured in bounds, and the hold passed.
        match p.off_at {
            Some(at) if in_bounds && s.mid >= at + HOLD_NS && r.mid >= at => {
                p.off_at = None;
                Some(RateChange::Back { rate })
            }
            _ => None,
        }
    }

    /// Whether every peer's clock agrees with this node's: leases may be
    /// used. A peer never measured (an older node that sends no clock, or
    /// one just met) counts as agreeing: the leases' margin covers a rate
    /// within 2 without any measurement.
    pub fn agree(&self) -> bool {
        self.peers.values().all(|p| p.off_at.is_none())
    }

    /// The rate last measured for `peer` over a whole window (status).
    pub fn rate(&self, peer: u64) -> Option<f64> {
        self.peers.get(&peer)?.rate
    }

    /// Forgets peers that are not members any more.
    pub fn keep(&mut self, members: &[u64]) {
        self.peers.retain(|id, _| members.contains(id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn a_steady_clock_goes_on_after_a_step_back_and_ignores_races() {
        let mut c = SteadyClock::new();
        assert_eq!(c.read(5 * S), 5 * S);
        assert_eq!(c.read(6 * S), 6 * S);
        // A race between two threads: clamped, not a step.
        assert_eq!(c.read(6 * S - 1000), 6 * S);
        assert_eq!(c.steps_back(), 0);
        // The clock steps back 5 s: the steady time stands still once,
        // then advances with the raw clock again.
        assert_eq!(c.read(S), 6 * S);
        assert_eq!(c.steps_back(), 1);
        assert_eq!(c.read(S + S / 2), 6 * S + S / 2);
        // A step forward is taken as it is (a lease then ends early).
        assert_eq!(c.read(100 * S), 6 * S + S / 2 + (100 * S - S - S / 2));
    }

    #[test]
    fn an_obligation_clock_takes_a_leap_as_one_step() {
        let mut c = ObligationClock::new(1000, 100);
        assert_eq!(c.advance(1050), 1050);
        assert_eq!(c.advance(1100), 1100);
        // 10 s forward at once: 100 ms.
        assert_eq!(c.advance(11_100), 1200);
        assert_eq!(c.advance(11_150), 1250);
        // Backwards is ignored.
        assert_eq!(c.advance(500), 1250);
        assert_eq!(c.now(), 1250);
    }

    /// Probes every second over `secs` seconds, the peer's clock running at
    /// `rate` (from `offset`), round trips of `rtt` ns.
    fn probe(rates: &mut ClockRates, from: u64, secs: u64, rate: f64, rtt: u64) -> Vec<RateChange> {
        let mut changes = Vec::new();
        for i in 0..secs {
            let sent = (from + i) * S;
            let mid = sent + rtt / 2;
            let remote = (7 * S) + (mid as f64 * rate) as u64;
            changes.extend(rates.sample(2, sent, sent + rtt, remote));
        }
        changes
    }

    #[test]
    fn rates_within_the_bound_agree_and_beyond_it_stop_the_leases() {
        for rate in [1.0, 1.000_05, 0.9, 1.2] {
            let mut r = ClockRates::new();
            assert!(probe(&mut r, 0, 30, rate, 200_000).is_empty(), "{rate}");
            assert!(r.agree(), "{rate}");
            let measured = r.rate(2).expect("measured");
            assert!(
                (measured - rate).abs() < 0.01,
                "{rate}: measured {measured}"
            );
        }
        for rate in [2.0, 0.5, 1.3, 0.7] {
            let mut r = ClockRates::new();
            let changes = probe(&mut r, 0, 5, rate, 200_000);
            assert!(
                matches!(changes[..], [RateChange::Off { .. }]),
                "{rate}: {changes:?}"
            );
            assert!(!r.agree(), "{rate}");
        }
    }

    #[test]
    fn a_leap_of_the_peer_s_clock_stops_the_leases_for_the_hold() {
        let mut r = ClockRates::new();
        assert!(probe(&mut r, 0, 10, 1.0, 100_000).is_empty());
        // The peer's clock leaps 5 s forward between two probes.
        let sent = 10 * S;
        let change = r.sample(2, sent, sent + 100_000, 7 * S + sent + 5 * S);
        assert!(matches!(change, Some(RateChange::Off { .. })), "{change:?}");
        assert!(!r.agree());
        // Steady again (from its new origin): back only after the hold.
        let mut back_at = None;
        for i in 11..40 {
            let sent = i * S;
            let remote = 7 * S + sent + 5 * S;
            if let Some(RateChange::Back { .. }) = r.sample(2, sent, sent + 100_000, remote) {
                back_at = Some(i);
                break;
            }
            assert!(!r.agree(), "agreed again after {i} s");
        }
        let back_at = back_at.expect("never agreed again");
        assert!(back_at >= 10 + HOLD_NS / S, "back at {back_at} s");
        assert!(r.agree());
    }

    #[test]
    fn slow_round_trips_widen_the_error_rather_than_trip() {
        // A round trip of a whole second (a paused peer): the rate cannot
        // be told within the bound, so nothing trips on it.
        let mut r = ClockRates::new();
        assert!(probe(&mut r, 0, 10, 1.3, S).is_empty());
        assert!(r.agree());
    }

    #[test]
    fn peers_are_bounded_and_former_members_forgotten() {
        let mut r = ClockRates::new();
        for id in 0..(MAX_PEERS as u64 + 10) {
            r.sample(id, 0, 1, 0);
        }
        assert!(r.peers.len() <= MAX_PEERS);
        r.keep(&[3]);
        assert!(r.peers.len() <= 1);
    }
}
