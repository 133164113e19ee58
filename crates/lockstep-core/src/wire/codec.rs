//! Little-endian field encoding for message payloads, with a reader that
//! checks every length against the bytes actually present before it
//! allocates, so a hostile length prefix costs an error, never memory.

use std::fmt;

/// Why a payload could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The payload ended inside a field.
    Truncated { field: &'static str },
    /// A field holds a value this version does not know.
    Invalid { field: &'static str, value: u64 },
    /// Bytes were left over after the last field.
    Trailing(usize),
    /// A string field is not UTF-8.
    NotUtf8 { field: &'static str },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated { field } => write!(f, "message truncated in field {field}"),
            DecodeError::Invalid { field, value } => {
                write!(f, "invalid value {value} in field {field}")
            }
            DecodeError::Trailing(n) => write!(f, "{n} unexpected bytes after the message"),
            DecodeError::NotUtf8 { field } => write!(f, "field {field} is not UTF-8"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Appends fields to a buffer.
#[derive(Default)]
pub struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    pub fn new() -> Writer {
        Writer::default()
    }
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn uuid(&mut self, v: &[u8; 16]) -> &mut Self {
        self.buf.extend_from_slice(v);
        self
    }
    /// A SHA-256 digest (a certificate's fingerprint), 32 bytes as is.
    pub fn digest(&mut self, v: &[u8; 32]) -> &mut Self {
        self.buf.extend_from_slice(v);
        self
    }
    /// A byte string: u32 length, then the bytes.
    pub fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.u32(v.len() as u32);
        self.buf.extend_from_slice(v);
        self
    }
    pub fn str(&mut self, v: &str) -> &mut Self {
        self.bytes(v.as_bytes())
    }
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }
}

/// Reads fields from a payload, bounds-checked.
#[derive(Clone)]
pub struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { rest: bytes }
    }

    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], DecodeError> {
        if self.rest.len() < n {
            return Err(DecodeError::Truncated { field });
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, field)?);
        Ok(out)
    }

    pub fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        Ok(self.take(1, field)?[0])
    }
    pub fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }
    pub fn u64(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }
    pub fn i64(&mut self, field: &'static str) -> Result<i64, DecodeError> {
        Ok(i64::from_le_bytes(self.array(field)?))
    }
    pub fn i32(&mut self, field: &'static str) -> Result<i32, DecodeError> {
        Ok(i32::from_le_bytes(self.array(field)?))
    }
    pub fn uuid(&mut self, field: &'static str) -> Result<[u8; 16], DecodeError> {
        self.array(field)
    }
    pub fn digest(&mut self, field: &'static str) -> Result<[u8; 32], DecodeError> {
        self.array(field)
    }
    /// A byte string; the length is checked against what is left before
    /// anything is copied.
    pub fn bytes(&mut self, field: &'static str) -> Result<&'a [u8], DecodeError> {
        let len = self.u32(field)? as usize;
        self.take(len, field)
    }
    pub fn string(&mut self, field: &'static str) -> Result<String, DecodeError> {
        let b = self.bytes(field)?;
        String::from_utf8(b.to_vec()).map_err(|_| DecodeError::NotUtf8 { field })
    }
    /// A count of items that each need at least `min_item` bytes: refuses
    /// counts the remaining bytes cannot hold, so callers may reserve.
    pub fn count(&mut self, field: &'static str, min_item: usize) -> Result<usize, DecodeError> {
        let n = self.u32(field)? as usize;
        if n.saturating_mul(min_item.max(1)) > self.rest.len() {
            return Err(DecodeError::Truncated { field });
        }
        Ok(n)
    }
    pub fn remaining(&self) -> usize {
        self.rest.len()
    }
    /// Every byte must have been consumed.
    pub fn end(&self) -> Result<(), DecodeError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::Trailing(self.rest.len()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut w = Writer::new();
        w.u8(7).u32(9).u64(u64::MAX).i64(-1).i32(-5).uuid(&[3; 16]);
        w.bytes(b"abc").str("name");
        let buf = w.finish();
        let mut r = Reader::new(&buf);
        assert_eq!(r.u8("a").unwrap(), 7);
        assert_eq!(r.u32("b").unwrap(), 9);
        assert_eq!(r.u64("c").unwrap(), u64::MAX);
        assert_eq!(r.i64("d").unwrap(), -1);
        assert_eq!(r.i32("e").unwrap(), -5);
        assert_eq!(r.uuid("f").unwrap(), [3; 16]);
        assert_eq!(r.bytes("g").unwrap(), b"abc");
        assert_eq!(r.string("h").unwrap(), "name");
        r.end().unwrap();
    }

    #[test]
    fn hostile_lengths_are_refused_without_allocating() {
        let mut w = Writer::new();
        w.u32(u32::MAX);
        let buf = w.finish();
        assert!(Reader::new(&buf).bytes("x").is_err());
        assert!(Reader::new(&buf).count("n", 1).is_err());
        let mut r = Reader::new(&[1, 2]);
        assert_eq!(r.u32("y"), Err(DecodeError::Truncated { field: "y" }));
    }
}
