//! From bytes read off a connection to whole peer messages: frames, the
//! chunks of big messages, then `PeerMsg`. Shared by the opening thread
//! (the hello, read blocking) and the event loop (everything after).

use super::queue::LOG_BIG;
use lockstep_core::group::peer::PeerMsg;
use lockstep_core::wire::frame::FrameDecoder;
use lockstep_core::wire::lanes::Inbox;
use log::{info, warn};
use std::time::Instant;

/// Why a connection is to be dropped (already logged).
#[derive(Debug)]
pub(super) struct Dropped;

/// The next whole message among the bytes `dec` holds; `Ok(None)` when
/// it needs more. Without an `inbox` (before the hello) chunked messages
/// are refused, so a stranger gets at most one frame's worth of memory.
/// `started`: when the chunked message being received began (for the log
/// line of a big one).
pub(super) fn next_message(
    dec: &mut FrameDecoder,
    mut inbox: Option<&mut Inbox>,
    started: &mut Option<Instant>,
    peer: &str,
) -> Result<Option<PeerMsg>, Dropped> {
    loop {
        let f = match dec.next_frame_ref() {
            Ok(Some(f)) => f,
            Ok(None) => return Ok(None),
            Err(e) => {
                warn!("dropping connection to {peer}: {e}");
                return Err(Dropped);
            }
        };
        let whole = match inbox.as_deref_mut() {
            None => f.into_frame(),
            Some(inbox) => match inbox.accept_ref(f) {
                Ok(Some(f)) => {
                    if let Some(t0) = started.take() {
                        if f.payload.len() >= LOG_BIG {
                            info!(
                                "received a message of {} MiB from {peer} in {} ms",
                                f.payload.len() >> 20,
                                t0.elapsed().as_millis()
                            );
                        }
                    }
                    f
                }
                Ok(None) => {
                    started.get_or_insert_with(Instant::now);
                    continue;
                }
                Err(e) => {
                    warn!("dropping connection to {peer}: {e}");
                    return Err(Dropped);
                }
            },
        };
        return match PeerMsg::from_frame(whole) {
            Ok(m) => Ok(Some(m)),
            Err(e) => {
                warn!("dropping connection to {peer}: bad message: {e}");
                Err(Dropped)
            }
        };
    }
}
