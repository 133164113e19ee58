//! Raft snapshots carry the sequencer's state: restoring arbitrary bytes
//! is an error or a sequencer whose snapshot restores again, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| lockstep_core::fuzzing::sequencer_snapshot(data));
