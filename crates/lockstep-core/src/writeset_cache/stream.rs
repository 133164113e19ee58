//! The headers in front of the records: one per cache file, one per IST
//! stream.
//!
//! Cache file header (12 bytes):
//!
//! ```text
//! offset  size  field
//!      0     4  magic "LSWC"
//!      4     1  version (1)
//!      5     3  reserved, zero
//!      8     4  CRC-32 (IEEE) of bytes 0..8
//! ```
//!
//! IST stream header (52 bytes), sent by the donor once connected:
//!
//! ```text
//! offset  size  field
//!      0     4  magic "LSIS"
//!      4     1  version (1)
//!      5     3  reserved, zero
//!      8    16  history UUID
//!     24     8  joiner's Raft id (the joiner checks it is the addressee)
//!     32     8  i64 after: the stream holds the events after this seqno
//!     40     8  i64 last: ... up to and including this one
//!     48     4  CRC-32 (IEEE) of bytes 0..48
//! ```
//!
//! The records follow, `after + 1 ..= last` in order, then an end record
//! whose seqno is `last`.

use std::fmt;

pub const FILE_HEADER_LEN: usize = 12;
pub const STREAM_HEADER_LEN: usize = 52;
const FILE_MAGIC: [u8; 4] = *b"LSWC";
const STREAM_MAGIC: [u8; 4] = *b"LSIS";
const VERSION: u8 = 1;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderError {
    Short(usize),
    BadMagic([u8; 4]),
    UnsupportedVersion(u8),
    Reserved,
    Checksum,
    /// `after` is not before `last`, or negative.
    BadRange {
        after: i64,
        last: i64,
    },
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeaderError::Short(n) => write!(f, "header truncated ({n} bytes)"),
            HeaderError::BadMagic(m) => write!(f, "not a Lockstep header (magic {m:02x?})"),
            HeaderError::UnsupportedVersion(v) => {
                write!(f, "format version {v}, this node reads {VERSION}")
            }
            HeaderError::Reserved => write!(f, "reserved header bytes set"),
            HeaderError::Checksum => write!(f, "header checksum mismatch"),
            HeaderError::BadRange { after, last } => {
                write!(f, "invalid range: events after {after} up to {last}")
            }
        }
    }
}

impl std::error::Error for HeaderError {}

fn prefix(magic: [u8; 4]) -> [u8; 8] {
    let mut p = [0u8; 8];
    p[..4].copy_from_slice(&magic);
    p[4] = VERSION;
    p
}

fn check_prefix(buf: &[u8], magic: [u8; 4], len: usize) -> Result<(), HeaderError> {
    if buf.len() < len {
        return Err(HeaderError::Short(buf.len()));
    }
    let m: [u8; 4] = buf[..4].try_into().expect("4 bytes");
    if m != magic {
        return Err(HeaderError::BadMagic(m));
    }
    if buf[4] != VERSION {
        return Err(HeaderError::UnsupportedVersion(buf[4]));
    }
    if buf[5..8] != [0, 0, 0] {
        return Err(HeaderError::Reserved);
    }
    let stored = u32::from_le_bytes(buf[len - 4..len].try_into().expect("4 bytes"));
    if crc32fast::hash(&buf[..len - 4]) != stored {
        return Err(HeaderError::Checksum);
    }
    Ok(())
}

pub fn encode_file_header() -> [u8; FILE_HEADER_LEN] {
    let mut out = [0u8; FILE_HEADER_LEN];
    out[..8].copy_from_slice(&prefix(FILE_MAGIC));
    let crc = crc32fast::hash(&out[..8]);
    out[8..].copy_from_slice(&crc.to_le_bytes());
    out
}

pub fn decode_file_header(buf: &[u8]) -> Result<(), HeaderError> {
    check_prefix(buf, FILE_MAGIC, FILE_HEADER_LEN)
}

/// What an IST stream carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamHeader {
    pub history: [u8; 16],
    pub joiner: u64,
    pub after: i64,
    pub last: i64,
}

pub fn encode_stream_header(h: &StreamHeader) -> [u8; STREAM_HEADER_LEN] {
    let mut out = [0u8; STREAM_HEADER_LEN];
    out[..8].copy_from_slice(&prefix(STREAM_MAGIC));
    out[8..24].copy_from_slice(&h.history);
    out[24..32].copy_from_slice(&h.joiner.to_le_bytes());
    out[32..40].copy_from_slice(&h.after.to_le_bytes());
    out[40..48].copy_from_slice(&h.last.to_le_bytes());
    let crc = crc32fast::hash(&out[..48]);
    out[48..].copy_from_slice(&crc.to_le_bytes());
    out
}

pub fn decode_stream_header(buf: &[u8]) -> Result<StreamHeader, HeaderError> {
    check_prefix(buf, STREAM_MAGIC, STREAM_HEADER_LEN)?;
    let i64_at = |at: usize| i64::from_le_bytes(buf[at..at + 8].try_into().expect("8 bytes"));
    let h = StreamHeader {
        history: buf[8..24].try_into().expect("16 bytes"),
        joiner: u64::from_le_bytes(buf[24..32].try_into().expect("8 bytes")),
        after: i64_at(32),
        last: i64_at(40),
    };
    if h.after < 0 || h.last <= h.after {
        return Err(HeaderError::BadRange {
            after: h.after,
            last: h.last,
        });
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn headers_round_trip_and_reject_damage() {
        let f = encode_file_header();
        assert_eq!(decode_file_header(&f), Ok(()));
        let mut bad = f;
        bad[4] = 2;
        assert_eq!(
            decode_file_header(&bad),
            Err(HeaderError::UnsupportedVersion(2))
        );
        assert!(matches!(
            decode_file_header(b"galera.cache"),
            Err(HeaderError::BadMagic(_))
        ));

        let h = StreamHeader {
            history: [5; 16],
            joiner: 77,
            after: 10,
            last: 20,
        };
        let enc = encode_stream_header(&h);
        assert_eq!(decode_stream_header(&enc), Ok(h));
        let mut bad = enc;
        bad[30] ^= 1;
        assert_eq!(decode_stream_header(&bad), Err(HeaderError::Checksum));
        let empty = encode_stream_header(&StreamHeader { last: 10, ..h });
        assert!(matches!(
            decode_stream_header(&empty),
            Err(HeaderError::BadRange { .. })
        ));
        assert_eq!(
            decode_stream_header(&enc[..10]),
            Err(HeaderError::Short(10))
        );
    }

    proptest! {
        #[test]
        fn arbitrary_headers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode_stream_header(&bytes);
            let _ = decode_file_header(&bytes);
        }
    }
}
