//! gvwstate.dat contents from disk: never panic; accepted views round-trip.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lockstep_core::saved_view::SavedView;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(view) = SavedView::parse(&text) {
        assert_eq!(SavedView::parse(&view.to_text()), Ok(view));
    }
});
