//! Ordering gates, as pure state.
//!
//! Galera serialises work through three gates (local, apply and commit
//! order, contract §6.6). Each gate is, at heart, a [`Watermark`]: the
//! largest seqno `L` such that every seqno `<= L` has passed. The provider
//! wraps these in a mutex and condition variable; the logic itself has no
//! threads and no clock, so it is tested here directly. [`GateStats`] and [`QueueStats`] keep
//! the figures Galera reports about its gates and its receive queue.

mod gate_stats;
mod queue_stats;
mod watermark;

pub use gate_stats::GateStats;
pub use queue_stats::QueueStats;
pub use watermark::{OrderError, Watermark};
