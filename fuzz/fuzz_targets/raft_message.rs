//! See `lockstep_core::fuzzing::raft_message`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| lockstep_core::fuzzing::raft_message(data));
