//! Raft log entries and member descriptions: decoding never panics, and a
//! batch that decodes re-encodes to the same bytes (one encoding per value).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| lockstep_core::fuzzing::log_entry(data));
