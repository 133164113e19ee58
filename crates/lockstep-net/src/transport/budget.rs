//! How much of what peers sent may wait for the owner's round.

use lockstep_core::group::peer::PeerMsg;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Bytes of peer messages handed to the owner and not handled yet, at
/// most (one message may always go, whatever its size): above it the event
/// loop stops reading the connection, and TCP then holds the peer back,
/// so rounds slowed by a big writeset do not make the input queue grow
/// without bound.
pub const INPUT_BUDGET: usize = 256 << 20;

/// The bytes counted against [`INPUT_BUDGET`], shared by the event loop and
/// the owner's rounds.
#[derive(Clone, Default)]
pub struct InputBudget(Arc<AtomicUsize>);

impl InputBudget {
    /// Counts `bytes` in if they fit (they always do when nothing is in
    /// flight); `false` otherwise, and the event loop then stops reading
    /// that connection and tries again shortly.
    pub(super) fn try_take(&self, bytes: usize) -> bool {
        let mut used = self.0.load(Ordering::SeqCst);
        loop {
            if used != 0 && used + bytes > INPUT_BUDGET {
                return false;
            }
            match self
                .0
                .compare_exchange(used, used + bytes, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return true,
                Err(now) => used = now,
            }
        }
    }

    /// The owner's round handled a message of `bytes`.
    pub fn give_back(&self, bytes: usize) {
        self.0.fetch_sub(bytes, Ordering::SeqCst);
    }

    #[cfg(test)]
    pub(super) fn in_flight(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// What a peer message counts against [`INPUT_BUDGET`].
pub fn input_bytes(msg: &PeerMsg) -> usize {
    match msg {
        PeerMsg::Raft(bytes) | PeerMsg::Relay(bytes) | PeerMsg::Relayed(bytes) => bytes.len(),
        _ => 64,
    }
}
