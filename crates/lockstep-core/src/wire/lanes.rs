//! Two lanes per peer connection, so that bulk data never holds back the
//! messages that keep the group alive (issue 12).
//!
//! - **Control**: heartbeats, votes, their answers, joins. Sent whole,
//!   before anything else waiting.
//! - **Bulk**: Raft log appends, forwarded proposals, snapshots. One
//!   message at a time, in order, cut into chunks of [`CHUNK_BYTES`]; a
//!   control frame waits for at most one chunk. Appends stay in one lane
//!   because Raft rejects an append that overtakes an earlier one, and
//!   the leader would then send the earlier (possibly huge) entry again.
//!
//! A chunked message travels as `Part` frames and one `End` frame whose
//! payloads, concatenated, are the message's own frame (with its own
//! checksum). The receiver's [`Inbox`] reassembles it, bounded by
//! [`MAX_MESSAGE_BYTES`]. Sans-IO: the transport's event loop asks
//! [`Outbox::take_next`] for the bytes to write and hands each frame it
//! reads to [`Inbox::accept`].

use super::frame::{self, Frame, FrameError, FrameRef, HEADER_LEN, TRAILER_LEN};
use std::collections::VecDeque;
use std::fmt;

/// Frame kinds of a chunked message (see `group::peer` for the others).
pub const K_PART: u8 = 8;
pub const K_END: u8 = 9;
/// Bytes of a chunk: what a control frame waits for at most (about
/// 0.1 ms on loopback, 5 ms at 100 Mbit/s).
pub const CHUNK_BYTES: usize = 64 * 1024;
/// Bound on one frame on the wire: a chunk, or a message small enough to
/// go whole.
pub const MAX_WIRE_FRAME: usize = CHUNK_BYTES + 64;
/// Bound on one reassembled message: a writeset up to Galera's largest
/// `repl.max_ws_size` (2 GiB - 1) plus the Raft and batch envelope.
pub const MAX_MESSAGE_BYTES: usize = (2 << 30) + (16 << 20);
/// Bound on the control lane of one connection; beyond it a message is
/// dropped (Raft resends; a peer that reads nothing for this long is
/// dead or will be evicted).
pub const MAX_CONTROL_QUEUE: usize = 8 << 20;
/// Bound on the small messages (below [`BIG_MESSAGE`]) of the bulk lane
/// of one connection. Raft itself keeps at most 256 appends of 1 MiB in
/// flight per peer.
pub const MAX_BULK_QUEUE: usize = 256 << 20;
/// A bulk message at least this big (a big writeset) is bounded by count.
pub const BIG_MESSAGE: usize = 16 << 20;
/// Big messages queued at most per connection, besides the one being
/// sent (each up to [`MAX_MESSAGE_BYTES`]).
pub const MAX_BIG_QUEUED: usize = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    Control,
    Bulk,
}

/// A message was not queued: the lane is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaneFull {
    pub lane: Lane,
    pub queued: usize,
}

/// A message waiting in an [`Outbox`]: its framed size, and its frame.
/// Encoding happens when the message is sent, by the transport's event
/// loop (or a helper thread for a big one): a 300 MB Raft message is not
/// copied in the caller's round.
pub trait Outgoing {
    /// Bytes of the frame `encode` returns (an estimate is fine for
    /// bounds, but it decides chunking only after encoding).
    fn frame_len(&self) -> usize;
    /// The framed bytes; `None` if it cannot be encoded (it is dropped).
    fn encode(self) -> Option<Vec<u8>>;
}

impl Outgoing for Vec<u8> {
    fn frame_len(&self) -> usize {
        self.len()
    }
    fn encode(self) -> Option<Vec<u8>> {
        Some(self)
    }
}

/// The sending side of one connection.
#[derive(Debug)]
pub struct Outbox<M: Outgoing = Vec<u8>> {
    /// Each message with its `frame_len`, taken once when queued (the
    /// byte counts below subtract exactly what they added).
    control: VecDeque<(usize, M)>,
    control_bytes: usize,
    bulk: VecDeque<(usize, M)>,
    bulk_bytes: usize,
    /// How many of the queued bulk messages are big, and their bytes.
    big_queued: usize,
    big_bytes: usize,
    /// The bulk message being chunked, and how much of it is sent.
    current: Option<(Vec<u8>, usize)>,
}

impl<M: Outgoing> Default for Outbox<M> {
    fn default() -> Self {
        Outbox {
            control: VecDeque::new(),
            control_bytes: 0,
            bulk: VecDeque::new(),
            bulk_bytes: 0,
            big_queued: 0,
            big_bytes: 0,
            current: None,
        }
    }
}

impl<M: Outgoing> Outbox<M> {
    /// Queues one message. A control message larger than a chunk goes
    /// to the bulk lane (it must be chunked, and only bulk is).
    pub fn push(&mut self, lane: Lane, frame: M) -> Result<(), LaneFull> {
        let len = frame.frame_len();
        let lane = if len > MAX_WIRE_FRAME {
            Lane::Bulk
        } else {
            lane
        };
        match lane {
            Lane::Control => {
                if self.control_bytes + len > MAX_CONTROL_QUEUE {
                    return Err(LaneFull {
                        lane,
                        queued: self.control_bytes,
                    });
                }
                self.control_bytes += len;
                self.control.push_back((len, frame));
            }
            Lane::Bulk => {
                // Big messages (one writeset each) are bounded by count,
                // the others by bytes; neither kind pushes the other out,
                // since a dropped append makes the follower reject the
                // next one and the leader send the big one again.
                let full = if len >= BIG_MESSAGE {
                    self.big_queued >= MAX_BIG_QUEUED
                } else {
                    self.bulk_bytes - self.big_bytes + len > MAX_BULK_QUEUE
                };
                if full {
                    return Err(LaneFull {
                        lane,
                        queued: self.bulk_bytes,
                    });
                }
                if len >= BIG_MESSAGE {
                    self.big_queued += 1;
                    self.big_bytes += len;
                }
                self.bulk_bytes += len;
                self.bulk.push_back((len, frame));
            }
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.control.is_empty() && self.bulk.is_empty() && self.current.is_none()
    }

    /// Bytes waiting in both lanes (the chunked message counts whole).
    pub fn queued_bytes(&self) -> usize {
        self.control_bytes + self.bulk_bytes + self.current.as_ref().map_or(0, |(m, _)| m.len())
    }

    /// What to write next: a control message if one waits, else the next
    /// chunk of the bulk message being sent, else the next bulk message.
    /// Messages come out unencoded ([`Next::Control`], [`Next::Bulk`]):
    /// the caller encodes them without holding whatever guards this
    /// outbox (encoding 300 MB takes a second; the caller's round must not
    /// wait to queue a heartbeat meanwhile), and hands a bulk frame back
    /// through [`Outbox::start_bulk`].
    pub fn take_next(&mut self) -> Option<Next<M>> {
        if let Some((len, m)) = self.control.pop_front() {
            self.control_bytes -= len;
            return Some(Next::Control(m));
        }
        if self.current.is_some() {
            return Some(Next::Bytes(self.next_chunk()));
        }
        let (len, m) = self.bulk.pop_front()?;
        self.bulk_bytes -= len;
        if len >= BIG_MESSAGE {
            self.big_queued -= 1;
            self.big_bytes -= len;
        }
        Some(Next::Bulk(m))
    }

    /// The next control message only, for a caller that still encodes the
    /// bulk message `take_next` gave it (on another thread): control
    /// messages may pass it, the next bulk message may not.
    pub fn take_control(&mut self) -> Option<M> {
        let (len, m) = self.control.pop_front()?;
        self.control_bytes -= len;
        Some(m)
    }

    /// The encoded frame of a message [`Outbox::take_next`] gave as
    /// [`Next::Bulk`]: the bytes to write now (all of it, or its first
    /// chunk; the other chunks come from `take_next`).
    pub fn start_bulk(&mut self, frame: Vec<u8>) -> Vec<u8> {
        if frame.len() <= MAX_WIRE_FRAME {
            return frame;
        }
        self.current = Some((frame, 0));
        self.next_chunk()
    }

    fn next_chunk(&mut self) -> Vec<u8> {
        let (msg, sent) = self.current.as_mut().expect("a bulk message is being sent");
        let end = (*sent + CHUNK_BYTES).min(msg.len());
        let last = end == msg.len();
        let mut out = Vec::with_capacity(end - *sent + HEADER_LEN + TRAILER_LEN);
        let kind = if last { K_END } else { K_PART };
        frame::encode(kind, &msg[*sent..end], CHUNK_BYTES, &mut out)
            .expect("a chunk is within the frame bound");
        *sent = end;
        if last {
            self.current = None;
        }
        out
    }

    /// [`Outbox::take_next`] and the encoding in one step, for callers that
    /// hold no lock around the outbox (and tests). Messages that fail to
    /// encode are skipped.
    pub fn next_write(&mut self) -> Option<Vec<u8>> {
        loop {
            match self.take_next()? {
                Next::Bytes(b) => return Some(b),
                Next::Control(m) => {
                    if let Some(f) = m.encode() {
                        return Some(f);
                    }
                }
                Next::Bulk(m) => {
                    if let Some(f) = m.encode() {
                        return Some(self.start_bulk(f));
                    }
                }
            }
        }
    }
}

/// See [`Outbox::take_next`].
#[derive(Debug)]
pub enum Next<M> {
    /// Bytes ready to write (a chunk).
    Bytes(Vec<u8>),
    /// A control message: encode and write it.
    Control(M),
    /// A bulk message: encode it, then `start_bulk`.
    Bulk(M),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InboxError {
    /// The reassembled message would exceed [`MAX_MESSAGE_BYTES`].
    TooLarge(usize),
    /// The reassembled bytes are not one valid frame.
    BadMessage(FrameError),
    /// A chunked message inside a chunked message, or trailing bytes.
    Malformed(&'static str),
}

impl fmt::Display for InboxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InboxError::TooLarge(n) => write!(
                f,
                "chunked message of more than {n} bytes exceeds the limit of {MAX_MESSAGE_BYTES}"
            ),
            InboxError::BadMessage(e) => write!(f, "chunked message: {e}"),
            InboxError::Malformed(why) => write!(f, "chunked message: {why}"),
        }
    }
}

impl std::error::Error for InboxError {}

/// The receiving side of one connection: passes whole frames through and
/// reassembles chunked ones.
///
/// A chunked message is taken apart as its bytes arrive: its header says
/// how long its payload is, the payload is copied once into a buffer of
/// that size, and the checksum is computed on the way. (Joining the chunks
/// first and then cutting the header off copied every byte three times,
/// into buffers that grew by doubling: for a 300 MB writeset streaming to
/// a follower, most of the time spent reading it.)
#[derive(Debug)]
pub struct Inbox {
    /// The inner frame's header, until all of it is here.
    head: Vec<u8>,
    /// The message after its header, once that is read.
    body: Option<Body>,
    /// Bytes of the chunked message received so far (header, payload and
    /// trailer), held to `max`.
    received: usize,
    max: usize,
}

#[derive(Debug)]
struct Body {
    kind: u8,
    len: usize,
    payload: Vec<u8>,
    crc: crc32fast::Hasher,
    trailer: Vec<u8>,
}

/// What a header may make the inbox reserve before the bytes arrive: the
/// length is the sender's word.
const RESERVE_AHEAD: usize = 4 << 20;

impl Default for Inbox {
    fn default() -> Self {
        Inbox::new(MAX_MESSAGE_BYTES)
    }
}

impl Inbox {
    pub fn new(max: usize) -> Inbox {
        Inbox {
            head: Vec::new(),
            body: None,
            received: 0,
            max,
        }
    }

    /// Bytes of a chunked message received so far.
    pub fn partial_bytes(&self) -> usize {
        self.received
    }

    /// Takes one frame off the wire; returns a whole message when there
    /// is one.
    pub fn accept(&mut self, f: Frame) -> Result<Option<Frame>, InboxError> {
        if !matches!(f.kind, K_PART | K_END) {
            return Ok(Some(f));
        }
        self.accept_chunk(f.kind, &f.payload)
    }

    /// As [`Inbox::accept`], for a frame still in the decoder's buffer: a
    /// chunk is copied once, into its message; any other frame is copied
    /// out whole.
    pub fn accept_ref(&mut self, f: FrameRef<'_>) -> Result<Option<Frame>, InboxError> {
        if !matches!(f.kind, K_PART | K_END) {
            return Ok(Some(f.into_frame()));
        }
        self.accept_chunk(f.kind, f.payload)
    }

    fn accept_chunk(&mut self, kind: u8, payload: &[u8]) -> Result<Option<Frame>, InboxError> {
        let n = self.received + payload.len();
        if n > self.max {
            self.reset();
            return Err(InboxError::TooLarge(n));
        }
        self.received = n;
        let outcome = match self.take(payload) {
            Ok(()) if kind == K_PART => return Ok(None),
            Ok(()) => self.finish(),
            Err(e) => Err(e),
        };
        self.reset();
        outcome.map(Some)
    }

    fn reset(&mut self) {
        self.head = Vec::new();
        self.body = None;
        self.received = 0;
    }

    /// The next bytes of the inner frame: header, payload, trailer.
    fn take(&mut self, mut bytes: &[u8]) -> Result<(), InboxError> {
        while !bytes.is_empty() {
            let Some(b) = self.body.as_mut() else {
                let n = (HEADER_LEN - self.head.len()).min(bytes.len());
                self.head.extend_from_slice(&bytes[..n]);
                bytes = &bytes[n..];
                if let Ok(head) = <&[u8; HEADER_LEN]>::try_from(self.head.as_slice()) {
                    self.body = Some(Body::open(head, self.max)?);
                }
                continue;
            };
            let n = if b.payload.len() < b.len {
                let n = (b.len - b.payload.len()).min(bytes.len());
                b.crc.update(&bytes[..n]);
                b.payload.extend_from_slice(&bytes[..n]);
                n
            } else if b.trailer.len() < TRAILER_LEN {
                let n = (TRAILER_LEN - b.trailer.len()).min(bytes.len());
                b.trailer.extend_from_slice(&bytes[..n]);
                n
            } else {
                return Err(InboxError::BadMessage(FrameError::Truncated(self.received)));
            };
            bytes = &bytes[n..];
        }
        Ok(())
    }

    /// The message, at its `End` chunk: whole, and its checksum right.
    fn finish(&mut self) -> Result<Frame, InboxError> {
        let b = match self.body.take() {
            Some(b) if b.payload.len() == b.len && b.trailer.len() == TRAILER_LEN => b,
            _ => return Err(InboxError::BadMessage(FrameError::Truncated(self.received))),
        };
        let sent = u32::from_le_bytes([b.trailer[0], b.trailer[1], b.trailer[2], b.trailer[3]]);
        let actual = b.crc.finalize();
        if sent != actual {
            return Err(InboxError::BadMessage(FrameError::Checksum {
                expected: sent,
                actual,
            }));
        }
        Ok(Frame {
            kind: b.kind,
            payload: b.payload,
        })
    }
}

impl Body {
    fn open(head: &[u8; HEADER_LEN], max: usize) -> Result<Body, InboxError> {
        let (kind, len) = frame::check_header(head, max).map_err(InboxError::BadMessage)?;
        if matches!(kind, K_PART | K_END) {
            return Err(InboxError::Malformed("a chunk inside a chunked message"));
        }
        let mut crc = crc32fast::Hasher::new();
        crc.update(head);
        Ok(Body {
            kind,
            len,
            payload: Vec::with_capacity(len.min(RESERVE_AHEAD)),
            crc,
            trailer: Vec::with_capacity(TRAILER_LEN),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::frame::FrameDecoder;
    use proptest::prelude::*;

    fn framed(kind: u8, len: usize, fill: u8) -> Vec<u8> {
        let mut out = Vec::new();
        frame::encode(kind, &vec![fill; len], MAX_MESSAGE_BYTES, &mut out).unwrap();
        out
    }

    /// Writes everything `out` has through a frame decoder into `inbox`,
    /// returning the messages in arrival order.
    fn drain(out: &mut Outbox, inbox: &mut Inbox) -> Vec<Frame> {
        let mut dec = FrameDecoder::new(MAX_WIRE_FRAME);
        let mut got = Vec::new();
        while let Some(bytes) = out.next_write() {
            assert!(bytes.len() <= MAX_WIRE_FRAME + HEADER_LEN + TRAILER_LEN);
            dec.push(&bytes);
            while let Some(f) = dec.next_frame().unwrap() {
                if let Some(m) = inbox.accept(f).unwrap() {
                    got.push(m);
                }
            }
        }
        got
    }

    #[test]
    fn a_big_message_is_chunked_and_reassembled() {
        let mut out = Outbox::default();
        let big = framed(3, 1_000_000, 7);
        out.push(Lane::Bulk, big.clone()).unwrap();
        let mut inbox = Inbox::default();
        let got = drain(&mut out, &mut inbox);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].kind, 3);
        assert_eq!(got[0].payload, vec![7; 1_000_000]);
        assert!(out.is_empty());
        assert_eq!(out.queued_bytes(), 0);
    }

    #[test]
    fn control_frames_overtake_a_bulk_message_within_one_chunk() {
        let mut out = Outbox::default();
        out.push(Lane::Bulk, framed(3, 10 * CHUNK_BYTES, 1))
            .unwrap();
        // The first chunk is on its way when the heartbeat is queued.
        let first = out.next_write().unwrap();
        assert_eq!(first[5], K_PART);
        out.push(Lane::Control, framed(4, 10, 2)).unwrap();
        let next = out.next_write().unwrap();
        assert_eq!(next[5], 4, "the control frame goes next");
    }

    #[test]
    fn while_a_bulk_message_is_encoded_only_control_messages_are_taken() {
        let mut out = Outbox::default();
        out.push(Lane::Bulk, framed(3, 10, 1)).unwrap();
        out.push(Lane::Bulk, framed(3, 10, 2)).unwrap();
        let Some(Next::Bulk(first)) = out.take_next() else {
            panic!("the first bulk message comes out unencoded");
        };
        assert_eq!(out.take_control(), None, "the second bulk message waits");
        out.push(Lane::Control, framed(4, 10, 3)).unwrap();
        assert_eq!(out.take_control(), Some(framed(4, 10, 3)));
        assert_eq!(out.queued_bytes(), framed(3, 10, 2).len());
        assert_eq!(out.start_bulk(first), framed(3, 10, 1));
        assert_eq!(out.next_write(), Some(framed(3, 10, 2)));
        assert!(out.is_empty());
    }

    #[test]
    fn lanes_are_bounded() {
        let mut out = Outbox::default();
        // Big messages are bounded by count...
        for _ in 0..MAX_BIG_QUEUED {
            out.push(Lane::Bulk, vec![0; MAX_BULK_QUEUE + 1]).unwrap();
        }
        let e = out.push(Lane::Bulk, vec![0; BIG_MESSAGE]).unwrap_err();
        assert_eq!(e.lane, Lane::Bulk);
        // ...and do not crowd out small ones, which are bounded by bytes.
        let small = BIG_MESSAGE - 1;
        for _ in 0..MAX_BULK_QUEUE / small {
            out.push(Lane::Bulk, vec![0; small]).unwrap();
        }
        assert!(out.push(Lane::Bulk, vec![0; small]).is_err());
        // Sending one big message makes room for another.
        let first = out.next_write().unwrap();
        assert_eq!(first[5], K_PART);
        out.push(Lane::Bulk, vec![0; BIG_MESSAGE]).unwrap();
        let small = framed(4, 1000, 0);
        let fit = MAX_CONTROL_QUEUE / small.len();
        for _ in 0..fit {
            out.push(Lane::Control, small.clone()).unwrap();
        }
        assert!(out.push(Lane::Control, small).is_err());
    }

    #[test]
    fn a_reassembled_message_is_bounded_and_checked() {
        let mut inbox = Inbox::new(100);
        let message = framed(4, 90, 0);
        let part = |m: &[u8], r: std::ops::Range<usize>| Frame {
            kind: K_PART,
            payload: m[r].to_vec(),
        };
        assert!(inbox.accept(part(&message, 0..80)).unwrap().is_none());
        assert_eq!(
            inbox.accept(part(&message, 80..106)),
            Err(InboxError::TooLarge(106))
        );
        // A header announcing more than the bound is refused at once.
        let huge = framed(4, 150, 0);
        assert!(matches!(
            Inbox::new(100).accept(part(&huge, 0..20)),
            Err(InboxError::BadMessage(FrameError::TooLarge {
                len: 150,
                max: 100
            }))
        ));
        let message = framed(4, 150, 0);
        // A header that is not one is refused when it is whole, not at
        // the end of the message.
        let mut inbox = Inbox::default();
        let zeros = Frame {
            kind: K_PART,
            payload: vec![0; 80],
        };
        assert!(matches!(
            inbox.accept(zeros),
            Err(InboxError::BadMessage(FrameError::BadMagic(_)))
        ));
        assert_eq!(inbox.partial_bytes(), 0, "and forgotten");
        // A flipped byte fails the checksum; a short message is truncated.
        let mut bad = framed(4, 150, 7);
        bad[40] ^= 1;
        let end = |payload: Vec<u8>| Frame {
            kind: K_END,
            payload,
        };
        assert!(matches!(
            Inbox::default().accept(end(bad)),
            Err(InboxError::BadMessage(FrameError::Checksum { .. }))
        ));
        assert!(matches!(
            Inbox::default().accept(end(message[..100].to_vec())),
            Err(InboxError::BadMessage(FrameError::Truncated(100)))
        ));
        let mut long = message.clone();
        long.push(0);
        assert!(matches!(
            Inbox::default().accept(end(long)),
            Err(InboxError::BadMessage(FrameError::Truncated(_)))
        ));
        // Garbage that is not a frame.
        let mut inbox = Inbox::default();
        let end = Frame {
            kind: K_END,
            payload: b"not a frame at all".to_vec(),
        };
        assert!(matches!(inbox.accept(end), Err(InboxError::BadMessage(_))));
        // A chunked message may not hold another.
        let mut inbox = Inbox::default();
        let end = Frame {
            kind: K_END,
            payload: framed(K_PART, 3, 0),
        };
        assert!(matches!(inbox.accept(end), Err(InboxError::Malformed(_))));
    }

    proptest! {
        /// Whatever mix of sizes and lanes, each lane arrives complete and
        /// in order, and a control frame waits for at most one chunk.
        #[test]
        fn lanes_keep_their_order(msgs in proptest::collection::vec((any::<bool>(), 0usize..200_000), 1..24)) {
            let mut out = Outbox::default();
            let mut want_control = Vec::new();
            let mut want_bulk = Vec::new();
            for (i, (control, len)) in msgs.iter().enumerate() {
                let len = if *control { len % 2000 } else { *len };
                let kind = if *control { 4 } else { 3 };
                let f = framed(kind, len, i as u8);
                out.push(if *control { Lane::Control } else { Lane::Bulk }, f).unwrap();
                if *control { want_control.push((i as u8, len)) } else { want_bulk.push((i as u8, len)) }
            }
            let mut inbox = Inbox::default();
            let got = drain(&mut out, &mut inbox);
            let seen = |k: u8| -> Vec<(u8, usize)> {
                got.iter().filter(|f| f.kind == k)
                    .map(|f| (f.payload.first().copied().unwrap_or(0), f.payload.len())).collect()
            };
            let strip = |v: Vec<(u8, usize)>| -> Vec<usize> { v.into_iter().map(|(_, l)| l).collect() };
            prop_assert_eq!(strip(seen(4)), strip(want_control.clone()));
            prop_assert_eq!(strip(seen(3)), strip(want_bulk.clone()));
            // Control is queued first, so all of it arrives before bulk.
            let first_bulk = got.iter().position(|f| f.kind == 3).unwrap_or(got.len());
            prop_assert!(got[first_bulk..].iter().all(|f| f.kind == 3));
        }

        /// Taking frames borrowed from the decoder (chunks copied once,
        /// into their message) gives what taking owned frames gives, in
        /// whatever pieces the bytes arrive.
        #[test]
        fn borrowed_frames_reassemble_as_owned_ones(
            lens in proptest::collection::vec(0usize..300_000, 1..8),
            piece in 1usize..100_000,
        ) {
            let mut out = Outbox::default();
            for (i, len) in lens.iter().enumerate() {
                let lane = if len % 3 == 0 { Lane::Control } else { Lane::Bulk };
                let len = if lane == Lane::Control { len % 2000 } else { *len };
                out.push(lane, framed(i as u8, len, i as u8)).unwrap();
            }
            let mut wire = Vec::new();
            while let Some(bytes) = out.next_write() {
                wire.extend_from_slice(&bytes);
            }
            let (mut owned, mut borrowed) = (Vec::new(), Vec::new());
            let (mut in_owned, mut in_borrowed) = (Inbox::default(), Inbox::default());
            let mut dec_owned = FrameDecoder::new(MAX_WIRE_FRAME);
            let mut dec_borrowed = FrameDecoder::new(MAX_WIRE_FRAME);
            for bytes in wire.chunks(piece) {
                dec_owned.push(bytes);
                while let Some(f) = dec_owned.next_frame().unwrap() {
                    owned.extend(in_owned.accept(f).unwrap());
                }
                dec_borrowed.push(bytes);
                while let Some(f) = dec_borrowed.next_frame_ref().unwrap() {
                    borrowed.extend(in_borrowed.accept_ref(f).unwrap());
                }
            }
            prop_assert_eq!(owned.len(), lens.len());
            prop_assert_eq!(&borrowed, &owned);
        }
    }
}
