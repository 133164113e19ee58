//! `wsrep_provider_options` text, at init and at runtime: never panic, and
//! whatever is accepted prints back to text that is accepted unchanged.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lockstep_core::options::Options;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut opts = Options::new("127.0.0.1:4567", "/var/lib/mysql");
    if opts.apply_initial(text).is_ok() {
        let printed = opts.to_galera_string();
        let changed = opts.apply_runtime(&printed).expect("printed options parse back");
        assert!(changed.is_empty(), "round trip changed {changed:?}");
    }
    let _ = opts.apply_runtime(text);
});
