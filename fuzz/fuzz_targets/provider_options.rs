//! `wsrep_provider_options` text, at init and at runtime: never panic, and
//! whatever is accepted prints back to text that is accepted unchanged.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| lockstep_core::fuzzing::provider_options(data));
