//! grastate.dat contents from disk: never panic; accepted states round-trip.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lockstep_core::saved_state::SavedState;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(state) = SavedState::parse(&text) {
        assert_eq!(SavedState::parse(&state.render()), Ok(state));
    }
});
