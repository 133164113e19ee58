//! The frame: `magic | version | kind | reserved | length | payload | crc32`.
//!
//! ```text
//! offset  size  field
//!      0     4  magic "LKST"
//!      4     1  version (1)
//!      5     1  kind (message type, opaque to this layer)
//!      6     2  reserved, must be zero
//!      8     4  payload length, little endian, <= the receiver's bound
//!     12     n  payload
//!   12+n     4  CRC-32 (IEEE) of bytes 0 .. 12+n, little endian
//! ```

use std::fmt;

pub const MAGIC: [u8; 4] = *b"LKST";
pub const VERSION: u8 = 1;
pub const HEADER_LEN: usize = 12;
pub const TRAILER_LEN: usize = 4;
/// Default bound on one payload. Larger writesets travel in several frames
/// (so one big transaction never monopolises a connection).
pub const DEFAULT_MAX_PAYLOAD: usize = 16 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub kind: u8,
    pub payload: Vec<u8>,
}

/// A frame still in the decoder's buffer: a chunk of a big message is
/// copied from there straight into the message, without an allocation
/// and a copy of its own for each 64 KiB chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameRef<'a> {
    pub kind: u8,
    pub payload: &'a [u8],
}

impl FrameRef<'_> {
    /// The frame with a payload of its own.
    pub fn into_frame(self) -> Frame {
        Frame {
            kind: self.kind,
            payload: self.payload.to_vec(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    BadMagic([u8; 4]),
    UnsupportedVersion(u8),
    ReservedBits(u16),
    TooLarge {
        len: usize,
        max: usize,
    },
    Checksum {
        expected: u32,
        actual: u32,
    },
    /// A previous error: the stream position is lost, drop the connection.
    Poisoned,
    /// Not the length of one whole frame (a reassembled message).
    Truncated(usize),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::BadMagic(m) => write!(f, "not a Lockstep peer (magic {m:02x?})"),
            FrameError::UnsupportedVersion(v) => {
                write!(f, "peer speaks frame version {v}, this node speaks {VERSION}")
            }
            FrameError::ReservedBits(b) => write!(f, "reserved header bits set ({b:#06x})"),
            FrameError::TooLarge { len, max } => {
                write!(f, "frame of {len} bytes exceeds the limit of {max}")
            }
            FrameError::Checksum { expected, actual } => write!(
                f,
                "frame checksum mismatch (sent {expected:#010x}, computed {actual:#010x}): corrupt data"
            ),
            FrameError::Poisoned => write!(f, "stream already failed"),
            FrameError::Truncated(n) => write!(f, "{n} bytes are not one whole frame"),
        }
    }
}

impl std::error::Error for FrameError {}

/// Appends one frame to `out`.
pub fn encode(
    kind: u8,
    payload: &[u8],
    max_payload: usize,
    out: &mut Vec<u8>,
) -> Result<(), FrameError> {
    if payload.len() > max_payload || payload.len() > u32::MAX as usize {
        return Err(FrameError::TooLarge {
            len: payload.len(),
            max: max_payload,
        });
    }
    let start = out.len();
    out.extend_from_slice(&MAGIC);
    out.push(VERSION);
    out.push(kind);
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(payload);
    let crc = crc32fast::hash(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// Appends one frame whose `len` payload bytes `write` appends to `out`
/// itself: an encoder that writes in place, so the payload is not built
/// apart and copied in (a Raft append of a big writeset was copied twice).
/// If `write` fails or appends another count than `len`, `out` is left as
/// it was and the error says so.
pub fn encode_with(
    kind: u8,
    len: usize,
    max_payload: usize,
    out: &mut Vec<u8>,
    write: impl FnOnce(&mut Vec<u8>) -> bool,
) -> Result<(), FrameError> {
    if len > max_payload || len > u32::MAX as usize {
        return Err(FrameError::TooLarge {
            len,
            max: max_payload,
        });
    }
    let start = out.len();
    out.reserve(HEADER_LEN + len + TRAILER_LEN);
    out.extend_from_slice(&MAGIC);
    out.push(VERSION);
    out.push(kind);
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&(len as u32).to_le_bytes());
    let written = write(out);
    let got = out.len() - start - HEADER_LEN;
    if !written || got != len {
        out.truncate(start);
        return Err(FrameError::Truncated(got));
    }
    let crc = crc32fast::hash(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// Checks a whole frame header (magic, version, reserved bits, the bound
/// on its payload); returns its kind and payload length.
pub fn check_header(
    head: &[u8; HEADER_LEN],
    max_payload: usize,
) -> Result<(u8, usize), FrameError> {
    let mut d = FrameDecoder::new(max_payload);
    d.push(head);
    // A header alone is not a frame yet: `Ok(None)` once it passed.
    d.parse()?;
    let len = u32::from_le_bytes([head[8], head[9], head[10], head[11]]) as usize;
    Ok((head[5], len))
}

/// Decodes `bytes` as exactly one frame, reusing its allocation for the
/// payload (a reassembled message may be hundreds of megabytes).
pub fn decode_one(mut bytes: Vec<u8>, max_payload: usize) -> Result<Frame, FrameError> {
    let mut head = FrameDecoder::new(max_payload);
    head.push(&bytes[..bytes.len().min(HEADER_LEN)]);
    // Checks magic, version, reserved bits and the length bound.
    head.parse()?;
    if bytes.len() < HEADER_LEN {
        return Err(FrameError::Truncated(bytes.len()));
    }
    let len = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize;
    let body_end = HEADER_LEN + len;
    if bytes.len() != body_end + TRAILER_LEN {
        return Err(FrameError::Truncated(bytes.len()));
    }
    let sent = u32::from_le_bytes([
        bytes[body_end],
        bytes[body_end + 1],
        bytes[body_end + 2],
        bytes[body_end + 3],
    ]);
    let actual = crc32fast::hash(&bytes[..body_end]);
    if sent != actual {
        return Err(FrameError::Checksum {
            expected: sent,
            actual,
        });
    }
    let kind = bytes[5];
    bytes.truncate(body_end);
    bytes.drain(..HEADER_LEN);
    Ok(Frame {
        kind,
        payload: bytes,
    })
}

/// Incremental decoder: feed bytes as they arrive, take frames out.
#[derive(Debug)]
pub struct FrameDecoder {
    max_payload: usize,
    /// Bytes received; those before `start` are taken already. They are
    /// dropped when new bytes come (not after each frame, which moved the
    /// rest of a large read once per frame in it).
    buf: Vec<u8>,
    start: usize,
    failed: bool,
}

impl FrameDecoder {
    pub fn new(max_payload: usize) -> FrameDecoder {
        FrameDecoder {
            max_payload,
            buf: Vec::new(),
            start: 0,
            failed: false,
        }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        if !self.failed {
            self.buf.drain(..self.start);
            self.start = 0;
            self.buf.extend_from_slice(bytes);
        }
    }

    /// Changes the bound on payloads from the next frame on (a connection
    /// takes only a small hello from a peer it does not know yet).
    pub fn set_max_payload(&mut self, max_payload: usize) {
        self.max_payload = max_payload;
    }

    /// Bytes received but not yet returned as frames.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    /// The next complete frame, `None` if more bytes are needed.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, FrameError> {
        Ok(self.next_frame_ref()?.map(FrameRef::into_frame))
    }

    /// The next complete frame, borrowed from the decoder until the next
    /// call; `None` if more bytes are needed.
    pub fn next_frame_ref(&mut self) -> Result<Option<FrameRef<'_>>, FrameError> {
        if self.failed {
            return Err(FrameError::Poisoned);
        }
        match self.parse() {
            Err(e) => {
                self.failed = true;
                self.buf = Vec::new();
                self.start = 0;
                Err(e)
            }
            Ok(None) => Ok(None),
            Ok(Some((kind, body))) => Ok(Some(FrameRef {
                kind,
                payload: &self.buf[body],
            })),
        }
    }

    /// The next frame's kind and where its payload lies in `buf`; the
    /// frame counts as taken.
    fn parse(&mut self) -> Result<Option<(u8, std::ops::Range<usize>)>, FrameError> {
        let buf = &self.buf[self.start..];
        // Validate what we have of the header as early as possible, so a
        // stranger is refused after 4 bytes rather than after 16 MiB.
        let have = buf.len().min(4);
        if buf[..have] != MAGIC[..have] {
            let mut m = [0u8; 4];
            m[..have].copy_from_slice(&buf[..have]);
            return Err(FrameError::BadMagic(m));
        }
        if buf.len() < HEADER_LEN {
            return Ok(None);
        }
        if buf[4] != VERSION {
            return Err(FrameError::UnsupportedVersion(buf[4]));
        }
        let reserved = u16::from_le_bytes([buf[6], buf[7]]);
        if reserved != 0 {
            return Err(FrameError::ReservedBits(reserved));
        }
        let len = u32::from_le_bytes([buf[8], buf[9], buf[10], buf[11]]) as usize;
        if len > self.max_payload {
            return Err(FrameError::TooLarge {
                len,
                max: self.max_payload,
            });
        }
        let total = HEADER_LEN + len + TRAILER_LEN;
        if buf.len() < total {
            return Ok(None);
        }
        let body_end = HEADER_LEN + len;
        let sent = u32::from_le_bytes([
            buf[body_end],
            buf[body_end + 1],
            buf[body_end + 2],
            buf[body_end + 3],
        ]);
        let actual = crc32fast::hash(&buf[..body_end]);
        if sent != actual {
            return Err(FrameError::Checksum {
                expected: sent,
                actual,
            });
        }
        let kind = buf[5];
        let body = self.start + HEADER_LEN..self.start + body_end;
        self.start += total;
        Ok(Some((kind, body)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn encoded(kind: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode(kind, payload, DEFAULT_MAX_PAYLOAD, &mut out).unwrap();
        out
    }

    #[test]
    fn a_frame_written_in_place_is_the_frame_of_its_payload() {
        let mut out = vec![9];
        encode_with(3, 5, DEFAULT_MAX_PAYLOAD, &mut out, |o| {
            o.extend_from_slice(b"hello");
            true
        })
        .unwrap();
        assert_eq!(out[1..], encoded(3, b"hello")[..]);
        let short = encode_with(3, 5, DEFAULT_MAX_PAYLOAD, &mut out, |o| {
            o.extend_from_slice(b"hell");
            true
        });
        assert_eq!(short, Err(FrameError::Truncated(4)));
        let failed = encode_with(3, 0, DEFAULT_MAX_PAYLOAD, &mut out, |_| false);
        assert!(failed.is_err());
        assert_eq!(out[1..], encoded(3, b"hello")[..], "left as it was");
        let big = encode_with(3, 10, 9, &mut out, |_| true);
        assert!(matches!(big, Err(FrameError::TooLarge { len: 10, max: 9 })));
    }

    #[test]
    fn frames_round_trip_when_fed_one_byte_at_a_time() {
        let mut bytes = encoded(3, b"hello");
        bytes.extend(encoded(4, b""));
        let mut d = FrameDecoder::new(DEFAULT_MAX_PAYLOAD);
        let mut got = Vec::new();
        for b in bytes {
            d.push(&[b]);
            while let Some(f) = d.next_frame().unwrap() {
                got.push(f);
            }
        }
        assert_eq!(
            got,
            [
                Frame {
                    kind: 3,
                    payload: b"hello".to_vec()
                },
                Frame {
                    kind: 4,
                    payload: vec![]
                }
            ]
        );
        assert_eq!(d.buffered(), 0);
    }

    #[test]
    fn an_oversized_length_is_refused_before_the_payload_arrives() {
        let mut d = FrameDecoder::new(1024);
        let mut header = Vec::from(MAGIC);
        header.extend([VERSION, 1, 0, 0]);
        header.extend((1u32 << 30).to_le_bytes());
        d.push(&header);
        assert_eq!(
            d.next_frame(),
            Err(FrameError::TooLarge {
                len: 1 << 30,
                max: 1024
            })
        );
        assert_eq!(d.next_frame(), Err(FrameError::Poisoned));
    }

    #[test]
    fn a_stranger_is_refused_on_the_first_bytes() {
        let mut d = FrameDecoder::new(1024);
        d.push(b"GET ");
        assert!(matches!(d.next_frame(), Err(FrameError::BadMagic(_))));
    }

    #[test]
    fn the_encoder_refuses_payloads_over_the_bound() {
        let mut out = Vec::new();
        assert!(encode(1, &[0; 10], 9, &mut out).is_err());
        assert!(out.is_empty());
    }

    proptest! {
        /// Flipping any bit of a frame never yields a different frame: it
        /// is either rejected or (for the length field) waits for more.
        #[test]
        fn corruption_is_detected(payload in proptest::collection::vec(any::<u8>(), 0..200), bit in 0usize..8, pos in any::<proptest::sample::Index>()) {
            let mut bytes = encoded(9, &payload);
            let i = pos.index(bytes.len());
            bytes[i] ^= 1 << bit;
            let mut d = FrameDecoder::new(4096);
            d.push(&bytes);
            if let Ok(Some(f)) = d.next_frame() {
                prop_assert!(false, "corrupt frame accepted: {f:?}");
            }
        }

        #[test]
        fn decoder_never_panics(chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..16)) {
            let mut d = FrameDecoder::new(256);
            for c in chunks {
                d.push(&c);
                let _ = d.next_frame();
            }
        }
    }
}
