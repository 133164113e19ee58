//! Latency histograms of the replication stages (ADR 0019). The provider
//! keeps one per stage and publishes each as a status variable in the
//! text form below; `lockstep check` turns them into Prometheus
//! histograms. Pure: observations come in as durations.
//!
//! Text form (`Histogram::encode`): `v1:<sum µs>:<c0>,<c1>,...,<c18>`,
//! where `c<i>` counts the observations in bucket `i` (not cumulative):
//! at most [`BOUNDS_US`]`[i]` microseconds and more than the bound before;
//! the last bucket has no upper bound.

use std::fmt;

/// Bucket upper bounds in microseconds, from 25 µs (a loopback round trip)
/// to 10 s (a stalled cluster).
pub const BOUNDS_US: [u64; 18] = [
    25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];
/// Buckets, the unbounded one included.
pub const BUCKETS: usize = BOUNDS_US.len() + 1;
/// Longest text [`Histogram::decode`] reads: 21 digits per number.
pub const MAX_TEXT: usize = 4 + 21 + BUCKETS * 21;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Histogram {
    counts: [u64; BUCKETS],
    sum_us: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: [0; BUCKETS],
            sum_us: 0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub &'static str);

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed histogram: {}", self.0)
    }
}

impl Histogram {
    pub fn observe_us(&mut self, us: u64) {
        let i = BOUNDS_US.partition_point(|b| *b < us);
        self.counts[i] = self.counts[i].saturating_add(1);
        self.sum_us = self.sum_us.saturating_add(us);
    }

    pub fn observe(&mut self, d: std::time::Duration) {
        self.observe_us(u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().fold(0u64, |a, c| a.saturating_add(*c))
    }

    pub fn sum_us(&self) -> u64 {
        self.sum_us
    }

    /// Per-bucket counts (not cumulative), the unbounded bucket last.
    pub fn buckets(&self) -> &[u64; BUCKETS] {
        &self.counts
    }

    pub fn encode(&self) -> String {
        let counts: Vec<String> = self.counts.iter().map(u64::to_string).collect();
        format!("v1:{}:{}", self.sum_us, counts.join(","))
    }

    /// Reads [`Histogram::encode`]'s text; anything else is an error.
    pub fn decode(text: &str) -> Result<Histogram, DecodeError> {
        if text.len() > MAX_TEXT {
            return Err(DecodeError("too long"));
        }
        let rest = text
            .strip_prefix("v1:")
            .ok_or(DecodeError("not version 1"))?;
        let (sum, counts) = rest.split_once(':').ok_or(DecodeError("no counts"))?;
        let mut h = Histogram {
            sum_us: sum.parse().map_err(|_| DecodeError("bad sum"))?,
            ..Histogram::default()
        };
        let mut n = 0;
        for c in counts.split(',') {
            if n == BUCKETS {
                return Err(DecodeError("too many buckets"));
            }
            h.counts[n] = c.parse().map_err(|_| DecodeError("bad count"))?;
            n += 1;
        }
        if n != BUCKETS {
            return Err(DecodeError("too few buckets"));
        }
        Ok(h)
    }
}

/// The stages a writeset passes, each with its own histogram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// A local writeset: from `certify` until its place in the order and
    /// its certification outcome are known (the group round trip).
    Replicate,
    /// The rounds' time per ordered writeset: Raft's ready and the
    /// sequencer, certification included (per batch of deliveries; the
    /// hand-over to the appliers and committing threads is not in it).
    Certification,
    /// A remote writeset in the server's `apply_cb`.
    Apply,
    /// Waiting to enter commit order (local and remote).
    CommitOrderWait,
    /// One flow-control pause of the whole cluster, start to end (kept by
    /// `flow_control::Gate`, which sees pauses begin and end).
    FlowControlPause,
}

impl Stage {
    pub const ALL: [Stage; 5] = [
        Stage::Replicate,
        Stage::Certification,
        Stage::Apply,
        Stage::CommitOrderWait,
        Stage::FlowControlPause,
    ];

    /// The status variable's name (without `wsrep_`) and the metric's stem.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Replicate => "lockstep_replicate_latency",
            Stage::Certification => "lockstep_certification_latency",
            Stage::Apply => "lockstep_apply_latency",
            Stage::CommitOrderWait => "lockstep_commit_order_wait",
            Stage::FlowControlPause => "lockstep_flow_control_pause",
        }
    }
}

/// One histogram per stage the provider times itself (all but
/// [`Stage::FlowControlPause`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StageHistograms {
    replicate: Histogram,
    certification: Histogram,
    apply: Histogram,
    commit_order_wait: Histogram,
}

impl StageHistograms {
    /// `None` for the stage kept elsewhere.
    pub fn get(&self, s: Stage) -> Option<&Histogram> {
        match s {
            Stage::Replicate => Some(&self.replicate),
            Stage::Certification => Some(&self.certification),
            Stage::Apply => Some(&self.apply),
            Stage::CommitOrderWait => Some(&self.commit_order_wait),
            Stage::FlowControlPause => None,
        }
    }

    pub fn observe(&mut self, s: Stage, d: std::time::Duration) {
        let h = match s {
            Stage::Replicate => &mut self.replicate,
            Stage::Certification => &mut self.certification,
            Stage::Apply => &mut self.apply,
            Stage::CommitOrderWait => &mut self.commit_order_wait,
            Stage::FlowControlPause => return,
        };
        h.observe(d);
    }
}

/// Round-trip times to each peer (`PeerMsg::Ping`), by Raft id, and when
/// each last answered (the caller's monotonic clock, in ns: this crate
/// has none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerRtts {
    peers: std::collections::BTreeMap<u64, (Histogram, u64)>,
}

/// Bound on [`PeerRtts`]: peers beyond it replace the lowest id (a
/// departed member's, usually: ids are random, but a member that left is
/// never pinged again, so its entry stops mattering).
pub const MAX_PEERS: usize = 64;

impl PeerRtts {
    /// A `Pong` from `peer` that took `rtt_ns`, received at `now_ns`.
    pub fn observe(&mut self, peer: u64, rtt_ns: u64, now_ns: u64) {
        if !self.peers.contains_key(&peer) && self.peers.len() >= MAX_PEERS {
            self.peers.pop_first();
        }
        let (h, last) = self.peers.entry(peer).or_default();
        h.observe_us(rtt_ns / 1000);
        *last = now_ns;
    }

    pub fn get(&self, peer: u64) -> Option<&Histogram> {
        self.peers.get(&peer).map(|(h, _)| h)
    }

    /// When `peer` last answered a ping (`observe`'s `now_ns`).
    pub fn answered_at(&self, peer: u64) -> Option<u64> {
        self.peers.get(&peer).map(|(_, at)| *at)
    }

    pub fn len(&self) -> usize {
        self.peers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn observations_land_in_their_buckets() {
        let mut h = Histogram::default();
        h.observe_us(0);
        h.observe_us(25);
        h.observe_us(26);
        h.observe_us(20_000_000);
        let b = h.buckets();
        assert_eq!((b[0], b[1], b[BUCKETS - 1]), (2, 1, 1));
        assert_eq!(h.count(), 4);
        assert_eq!(h.sum_us(), 20_000_051);
    }

    #[test]
    fn the_text_form_round_trips_and_rejects_other_text() {
        let mut h = Histogram::default();
        for us in [10, 300, 7_000, 2_000_000] {
            h.observe_us(us);
        }
        let text = h.encode();
        assert!(text.starts_with("v1:2007310:1,0,0,0,1,"), "{text}");
        assert_eq!(Histogram::decode(&text), Ok(h));
        for bad in [
            "",
            "v2:0:0",
            "v1:x:0",
            "v1:0:1,2",
            &format!("{text},1"),
            "v1:0",
        ] {
            assert!(Histogram::decode(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn peer_round_trips_stay_bounded() {
        let mut p = PeerRtts::default();
        for peer in 0..(MAX_PEERS as u64 + 10) {
            p.observe(peer, 150_000, peer);
        }
        p.observe(MAX_PEERS as u64 + 9, 90_000, 1_000);
        assert_eq!(p.len(), MAX_PEERS);
        assert!(p.get(0).is_none(), "the lowest ids made room");
        assert!(p.answered_at(0).is_none());
        let last = p.get(MAX_PEERS as u64 + 9).expect("kept");
        assert_eq!((last.count(), last.sum_us()), (2, 240));
        assert_eq!(
            p.answered_at(MAX_PEERS as u64 + 9),
            Some(1_000),
            "the last answer"
        );
    }

    proptest! {
        #[test]
        fn decoding_any_text_never_panics(text in ".{0,600}") {
            let _ = Histogram::decode(&text);
        }
    }
}
