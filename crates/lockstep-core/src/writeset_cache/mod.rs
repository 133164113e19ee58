//! The writeset cache's formats (Galera's gcache, `docs/formats.md`):
//! the records a node keeps on disk of every event it ordered, and the
//! incremental state transfer (IST) stream that carries the same records
//! from a donor's cache to a joiner.
//!
//! Sans-IO like the rest of this crate: encoders append to a buffer, the
//! decoder reads from a byte slice and says how many more bytes it needs.
//! The provider owns the files and sockets (`lockstep-provider`'s
//! `writeset_cache` and `state_transfer::ist_from_cache`).
//!
//! Everything read here came from a disk or a peer: every record is
//! length-prefixed with a bound the reader chooses, checksummed, and
//! versioned through its file or stream header.

mod record;
mod stream;

pub use record::{
    decode_record, encode_record, event_digest, membership_digest, record_pieces, CachedEvent,
    CachedKind, CachedMember, CachedMembers, Decoded, RecordError, RecordPieces, RECORD_HEADER_LEN,
};
pub use stream::{
    decode_file_header, decode_stream_header, encode_file_header, encode_stream_header,
    HeaderError, StreamHeader, FILE_HEADER_LEN, STREAM_HEADER_LEN,
};
