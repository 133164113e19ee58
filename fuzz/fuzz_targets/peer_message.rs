//! Group-channel messages: any frame payload decodes to a message or an
//! error, never a panic; a decoded message frames again without error.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lockstep_core::wire::frame::Frame;
use lockstep_core::wire::peer::PeerMsg;

fuzz_target!(|data: &[u8]| {
    let Some((&kind, payload)) = data.split_first() else {
        return;
    };
    let frame = Frame {
        kind,
        payload: payload.to_vec(),
    };
    if let Ok(msg) = PeerMsg::from_frame(frame) {
        msg.to_frame().expect("a decoded message fits a frame");
    }
});
