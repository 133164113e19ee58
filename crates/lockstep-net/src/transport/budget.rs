//! How much of what peers sent may wait for the owner's round.

use lockstep_core::group::peer::PeerMsg;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// Bytes of peer messages handed to the owner and not handled yet, at
/// most (one message may always go, whatever its size): a reader waits
/// above it, and TCP then holds the peer back, so rounds slowed by a big
/// writeset do not make the readers queue without bound.
pub const INPUT_BUDGET: usize = 256 << 20;

/// The bytes counted against [`INPUT_BUDGET`], shared by the readers and
/// the owner's rounds.
#[derive(Clone, Default)]
pub struct InputBudget(Arc<AtomicUsize>);

impl InputBudget {
    /// Waits until `bytes` fit (they always do when nothing is in flight);
    /// `false` if `stop` was set meanwhile.
    pub(super) fn take(&self, bytes: usize, stop: &AtomicBool) -> bool {
        loop {
            let used = self.0.load(Ordering::SeqCst);
            if used == 0 || used + bytes <= INPUT_BUDGET {
                let next = used + bytes;
                if self
                    .0
                    .compare_exchange(used, next, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
                {
                    return true;
                }
                continue;
            }
            if stop.load(Ordering::SeqCst) {
                return false;
            }
            thread::sleep(Duration::from_millis(1));
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
