//! Bytes on the wire between Lockstep nodes.
//!
//! Every message travels in a [`frame`]: versioned, length-prefixed and
//! checksummed, with the length checked against a bound before anything is
//! allocated. Peers are untrusted until authenticated, and even then a
//! corrupt frame must cost a dropped connection, never a panic inside
//! mariadbd. The format is documented in `docs/formats.md`.

pub mod codec;
pub mod frame;
pub mod lanes;
