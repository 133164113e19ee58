//! The log of messages refused because of their sender (ADR 0014,
//! `lockstep_core::group::node::sender_checks`, and the driver's own
//! checks): one warning per sender and reason every `QUIET`, with the
//! number refused meanwhile, so a peer that floods forged messages cannot
//! flood the server's log too.

use crate::log::{info, warn};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// At most one warning per sender and reason this often.
const QUIET: Duration = Duration::from_secs(10);
/// Senders remembered at most (a flood of made-up ids resets the table).
const MAX_SENDERS: usize = 1024;

#[derive(Default)]
pub(super) struct RefusalLog {
    /// (sender, reason) -> (last warning, refused since).
    last: HashMap<(u64, &'static str), (Instant, u64)>,
    /// Refused by the driver itself, since the start (the group counts
    /// its own; `wsrep_lockstep_refused_messages` is the sum).
    total: u64,
}

impl RefusalLog {
    /// A message from `from` refused here: `what` it was, `why`.
    pub(super) fn refused(&mut self, from: u64, what: &str, why: &'static str) {
        self.total += 1;
        self.warn(from, what, why);
    }

    /// A message from `from` dropped here that a peer in good standing
    /// may send (an answer that arrives after its sender left): counted
    /// as refused, logged as a note, not a warning.
    pub(super) fn noted(&mut self, from: u64, what: &str, why: &'static str) {
        self.total += 1;
        if let Some(since) = self.due(from, why) {
            info!(
                "dropped {what} from peer {from:#x}: {why} ({since} such message(s) from it since \
                 the last note)"
            );
        }
    }

    /// The warning for a refusal counted elsewhere (by the group).
    pub(super) fn warn(&mut self, from: u64, what: &str, why: &'static str) {
        if let Some(since) = self.due(from, why) {
            warn!(
                "refused {what} from peer {from:#x}: {why} ({since} such message(s) from it since \
                 the last warning; see ADR 0014)"
            );
        }
    }

    /// Counts one more from `from` for `why`; the count since the last
    /// line when one is due (one per `QUIET`).
    fn due(&mut self, from: u64, why: &'static str) -> Option<u64> {
        if self.last.len() >= MAX_SENDERS {
            self.last.clear();
        }
        let now = Instant::now();
        let entry = self.last.entry((from, why)).or_insert((now - QUIET, 0));
        entry.1 += 1;
        if now.duration_since(entry.0) < QUIET {
            return None;
        }
        let since = entry.1;
        *entry = (now, 0);
        Some(since)
    }

    pub(super) fn total(&self) -> u64 {
        self.total
    }
}
