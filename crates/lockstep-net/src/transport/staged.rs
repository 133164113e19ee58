//! Messages a round has addressed but not yet written (ADR 0033). The
//! owner's round picks each message's connection (and dials a missing
//! one) while it holds its lock; the socket writes, which on loopback run
//! the receiving side's network stack on this thread and wake its reader,
//! come after the round has let go, so the next round need not wait for
//! them.

use super::queue::{Out, Queue};
use lockstep_core::wire::lanes::Lane;
use std::sync::Arc;

/// The messages of one round, in the order the round sent them. Bounded
/// by what one round produces (Raft's in-flight limits and the group's
/// own messages); each connection's lanes bound what waits there.
#[derive(Default)]
pub struct Staged {
    messages: Vec<(Arc<Queue>, Lane, Out)>,
}

impl Staged {
    pub(super) fn add(&mut self, to: Arc<Queue>, lane: Lane, msg: Out) {
        self.messages.push((to, lane, msg));
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Hands every message to its connection in the order staged: written
    /// by this thread when nothing waits before it (`Queue::push`), else
    /// queued for the event loop. A connection closed meanwhile drops its
    /// messages, as a send to it would have (Raft resends).
    pub fn send(self) {
        for (queue, lane, msg) in self.messages {
            queue.push(lane, msg);
        }
    }
}
