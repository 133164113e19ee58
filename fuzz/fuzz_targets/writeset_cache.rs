//! Writeset cache records and IST stream headers, from disk or a peer:
//! never panic; an accepted record re-encodes to the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| lockstep_core::fuzzing::writeset_cache(data));
