//! grastate.dat contents from disk: never panic; accepted states round-trip.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| lockstep_core::fuzzing::saved_state(data));
