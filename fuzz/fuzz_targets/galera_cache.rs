//! Galera's galera.cache as read at a switch from Galera (ring buffer,
//! writesets, configuration changes): never panic, whatever the bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| lockstep_core::fuzzing::galera_cache(data));
