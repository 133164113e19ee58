//! Raft snapshots carry the sequencer's state: restoring arbitrary bytes
//! is an error or a sequencer whose snapshot restores again, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lockstep_core::group::Sequencer;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = Sequencer::restore(data) {
        let again = s.snapshot();
        Sequencer::restore(&again).expect("a snapshot of a restored sequencer restores");
    }
});
