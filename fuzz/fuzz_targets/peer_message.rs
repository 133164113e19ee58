//! Group-channel messages: any frame payload decodes to a message or an
//! error, never a panic; a decoded message frames again without error.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| lockstep_core::fuzzing::peer_message(data));
