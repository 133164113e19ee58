//! Peer bytes: the frame decoder never panics, and whatever it returns
//! re-encodes to the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| lockstep_core::fuzzing::frame(data));
