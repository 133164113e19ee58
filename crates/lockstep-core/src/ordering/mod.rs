//! Ordering gates, as pure state.
//!
//! Galera serialises work through three gates (local, apply and commit
//! order, contract §6.6). Each gate is, at heart, a [`Watermark`]: the
//! largest seqno `L` such that every seqno `<= L` has passed. The provider
//! wraps these in a mutex and condition variable; the logic itself has no
//! threads and no clock, so it is tested here directly.

mod watermark;

pub use watermark::{OrderError, Watermark};
