//! Lockstep's protocol core: wsrep semantics as pure state machines.
//!
//! Nothing in this crate does I/O, spawns threads or reads a clock. Every
//! module takes events (and time, where it matters) as inputs and returns
//! decisions, so that simulations can drive many nodes deterministically.
//! The provider crate wraps these types in locks, threads and sockets.

#![forbid(unsafe_code)]

pub mod address;
pub mod certification;
pub mod clocks;
pub mod flow_control;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod galera_cache;
pub mod gates;
pub mod group;
pub mod metrics;
pub mod options;
pub mod rng;
pub mod saved_state;
pub mod saved_view;
pub mod sync;
pub mod wire;
pub mod writeset_cache;

/// What a caught panic said, for the log (the provider's and the
/// transport's guards both report one).
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}
