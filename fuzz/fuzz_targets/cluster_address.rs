//! wsrep_cluster_address: never panic on any text.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lockstep_core::address::ClusterAddress;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = ClusterAddress::parse(text);
    }
});
