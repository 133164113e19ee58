//! Raft log entries and member descriptions: decoding never panics, and a
//! batch that decodes re-encodes to the same bytes (one encoding per value).
#![no_main]
use libfuzzer_sys::fuzz_target;
use lockstep_core::group::action::{decode_batch, encode_batch};
use lockstep_core::group::MemberInfo;

fuzz_target!(|data: &[u8]| {
    if let Ok(batch) = decode_batch(data) {
        assert_eq!(encode_batch(&batch), data);
    }
    if let Ok(m) = MemberInfo::decode(data) {
        assert_eq!(m.encode(), data);
    }
});
