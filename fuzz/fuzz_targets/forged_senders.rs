//! See `lockstep_core::fuzzing::forged_senders`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| lockstep_core::fuzzing::forged_senders(data));
