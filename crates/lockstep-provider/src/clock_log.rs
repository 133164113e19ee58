//! What the log says when a peer's clock rate goes out of bounds or comes
//! back (ADR 0036, `lockstep_core::clocks::ClockRates`).

use crate::log::{info, warn};
use lockstep_core::clocks::{RateChange, RATE_BOUND};

pub fn rate_changed(peer: &str, change: RateChange) {
    match change {
        RateChange::Off { rate } => warn!(
            "the clock of {peer} runs at {rate:.3}x this node's (more than {:.0}% off): \
             causal reads stop using leases and ask through Raft, which needs a quorum and \
             no clock, until the clocks agree again; check the clock source of both hosts \
             (ADR 0036)",
            RATE_BOUND * 100.0
        ),
        RateChange::Back { rate } => info!(
            "the clock of {peer} runs at {rate:.3}x this node's again: causal reads use \
             leases again"
        ),
    }
}
