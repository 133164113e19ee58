//! Reading the server's arguments into owned Rust values.
//!
//! The server's memory is trusted to be valid (it is our own process), but
//! its sizes are still checked before we allocate, so that a bogus length
//! fails one call instead of the node.

use lockstep_core::certification::{Key as CertKey, KeyType};
use std::ffi::{c_char, CStr};
use wsrep_abi::{Buf, Key};

/// wsrep-lib sends at most 3 parts per key; allow headroom, refuse junk.
pub const MAX_KEY_PARTS: usize = 16;
/// One key part larger than this is not a key MariaDB makes.
pub const MAX_KEY_PART_BYTES: usize = 64 * 1024;
/// One buffer larger than this is not one MariaDB makes (a writeset is at
/// most `repl.max_ws_size`, 2 GiB): a bogus length, read as nothing.
pub const MAX_BUF_BYTES: usize = 4 << 30;
/// Buffers in one `append_data` or TOI call, at most.
pub const MAX_BUFS: usize = 1 << 16;

/// # Safety
/// `p` is NULL or a NUL-terminated string valid for the call.
pub unsafe fn string(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: non-NULL and NUL-terminated per the caller.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// The bytes of a buffer; empty for NULL, and for a length beyond
/// [`MAX_BUF_BYTES`] (see [`checked_bytes`] to tell that apart).
///
/// # Safety
/// `b` is NULL or points at a `Buf` whose `ptr` is valid for `len` bytes.
pub unsafe fn bytes<'a>(b: *const Buf) -> &'a [u8] {
    // SAFETY: per the caller.
    unsafe { checked_bytes(b) }.unwrap_or_default()
}

/// The bytes of a buffer, or `Err` for a length no buffer of MariaDB's has.
///
/// # Safety
/// As [`bytes`].
pub unsafe fn checked_bytes<'a>(b: *const Buf) -> Result<&'a [u8], String> {
    if b.is_null() {
        return Ok(&[]);
    }
    // SAFETY: per the caller, `b` points at a valid Buf.
    let buf = unsafe { &*b };
    if buf.ptr.is_null() || buf.len == 0 {
        return Ok(&[]);
    }
    if buf.len > MAX_BUF_BYTES {
        return Err(format!("a buffer of {} bytes", buf.len));
    }
    // SAFETY: per the caller, `ptr` is valid for `len` bytes, and `len`
    // is far below isize::MAX.
    Ok(unsafe { std::slice::from_raw_parts(buf.ptr.cast::<u8>(), buf.len) })
}

/// The `count` buffers as slices of the server's memory, valid for the
/// call, and their total length; `Err` as for [`concat`], or when the
/// lengths overflow. For `append_data`, which copies them once, straight
/// into the transaction's data.
///
/// # Safety
/// `bufs` is NULL or points at `count` valid `Buf`s, which stay valid for
/// `'a`.
pub unsafe fn slices<'a>(bufs: *const Buf, count: usize) -> Result<(Vec<&'a [u8]>, usize), String> {
    if count == 0 {
        return Ok((Vec::new(), 0));
    }
    if bufs.is_null() {
        return Err(format!("a NULL array of {count} buffers"));
    }
    if count > MAX_BUFS {
        return Err(format!("{count} buffers in one call"));
    }
    let mut parts = Vec::with_capacity(count);
    let mut total = 0usize;
    for i in 0..count {
        // SAFETY: `i < count`, each element a valid Buf per the caller,
        // whose bytes stay valid for `'a`.
        let part: &'a [u8] = unsafe { checked_bytes(bufs.add(i)) }?;
        total = total
            .checked_add(part.len())
            .ok_or_else(|| format!("{count} buffers longer than memory"))?;
        parts.push(part);
    }
    Ok((parts, total))
}

/// Concatenation of `count` buffers; `Err` for a NULL array with a count,
/// too many buffers, or a bogus length.
///
/// # Safety
/// `bufs` is NULL or points at `count` valid `Buf`s.
pub unsafe fn concat(bufs: *const Buf, count: usize) -> Result<Vec<u8>, String> {
    // SAFETY: as the caller promises.
    let (parts, len) = unsafe { slices(bufs, count) }?;
    let mut out = Vec::with_capacity(len);
    for part in parts {
        out.extend_from_slice(part);
    }
    Ok(out)
}

#[derive(Debug, PartialEq, Eq)]
pub struct BadKey(pub String);

/// One key of type `kind`, copied (the server reuses its buffers, P28)
/// into one allocation.
///
/// # Safety
/// `key` points at a valid `Key` whose parts array holds `key_parts_num`
/// valid buffers.
pub unsafe fn key(key: *const Key, kind: KeyType) -> Result<CertKey, BadKey> {
    // SAFETY: valid per the caller.
    let key = unsafe { &*key };
    if key.key_parts_num > MAX_KEY_PARTS {
        return Err(BadKey(format!("{} key parts", key.key_parts_num)));
    }
    if key.key_parts_num > 0 && key.key_parts.is_null() {
        return Err(BadKey("NULL key parts".into()));
    }
    // SAFETY: `i < key_parts_num` elements, each valid per the caller;
    // `bytes` reads a bogus length as nothing.
    let part = |i: usize| unsafe { bytes(key.key_parts.add(i)) };
    if let Some(big) = (0..key.key_parts_num)
        .map(part)
        .find(|p| p.len() > MAX_KEY_PART_BYTES)
    {
        return Err(BadKey(format!("a key part of {} bytes", big.len())));
    }
    Ok(CertKey::from_slices((0..key.key_parts_num).map(part), kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buf(bytes: &[u8]) -> Buf {
        Buf {
            ptr: bytes.as_ptr().cast(),
            len: bytes.len(),
        }
    }

    #[test]
    fn buffers_concatenate_and_bogus_arrays_or_lengths_are_refused() {
        let (a, b) = (b"lock".to_vec(), b"step".to_vec());
        let bufs = [buf(&a), buf(&b)];
        // SAFETY: two valid buffers.
        assert_eq!(unsafe { concat(bufs.as_ptr(), 2) }.unwrap(), b"lockstep");
        // SAFETY: NULL with a count, never read.
        let null = unsafe { concat(std::ptr::null(), 3) };
        assert!(null.unwrap_err().contains("NULL array"));
        // SAFETY: the count is refused before any element is read.
        let many = unsafe { concat(bufs.as_ptr(), MAX_BUFS + 1) };
        assert!(many.is_err());
        // A length no buffer of MariaDB's has: refused without reading.
        let bogus = [Buf {
            ptr: a.as_ptr().cast(),
            len: MAX_BUF_BYTES + 1,
        }];
        // SAFETY: the length is refused before the pointer is used.
        assert!(unsafe { concat(bogus.as_ptr(), 1) }.is_err());
        // SAFETY: as above.
        assert_eq!(unsafe { bytes(bogus.as_ptr()) }, b"");
    }
}
