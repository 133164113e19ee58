//! Writeset cache records and IST stream headers, from disk or a peer:
//! never panic; an accepted record re-encodes to the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lockstep_core::writeset_cache::{
    decode_file_header, decode_record, decode_stream_header, encode_record, Decoded,
};

fuzz_target!(|data: &[u8]| {
    let _ = decode_file_header(data);
    let _ = decode_stream_header(data);
    let mut rest = data;
    while let Ok(Decoded::Record(ev, used)) = decode_record(rest, 1 << 20) {
        let mut again = Vec::new();
        encode_record(&ev, &mut again);
        assert_eq!(&again[..], &rest[..used]);
        rest = &rest[used..];
    }
});
