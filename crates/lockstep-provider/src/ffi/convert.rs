//! Reading the server's arguments into owned Rust values.
//!
//! The server's memory is trusted to be valid (it is our own process), but
//! its sizes are still checked before we allocate, so that a bogus length
//! fails one call instead of the node.

use std::ffi::{c_char, CStr};
use wsrep_abi::{Buf, Key};

/// wsrep-lib sends at most 3 parts per key; allow headroom, refuse junk.
pub const MAX_KEY_PARTS: usize = 16;
/// One key part larger than this is not a key MariaDB makes.
pub const MAX_KEY_PART_BYTES: usize = 64 * 1024;

/// # Safety
/// `p` is NULL or a NUL-terminated string valid for the call.
pub unsafe fn string(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: non-NULL and NUL-terminated per the caller.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// # Safety
/// `b` is NULL or points at a `Buf` whose `ptr` is valid for `len` bytes.
pub unsafe fn bytes<'a>(b: *const Buf) -> &'a [u8] {
    if b.is_null() {
        return &[];
    }
    // SAFETY: per the caller, `b` points at a valid Buf.
    let buf = unsafe { &*b };
    if buf.ptr.is_null() || buf.len == 0 {
        return &[];
    }
    // SAFETY: per the caller, `ptr` is valid for `len` bytes.
    unsafe { std::slice::from_raw_parts(buf.ptr.cast::<u8>(), buf.len) }
}

/// Concatenation of `count` buffers.
///
/// # Safety
/// `bufs` is NULL or points at `count` valid `Buf`s.
pub unsafe fn concat(bufs: *const Buf, count: usize) -> Vec<u8> {
    let mut out = Vec::new();
    if bufs.is_null() {
        return out;
    }
    for i in 0..count {
        // SAFETY: `i < count`, each element a valid Buf per the caller.
        out.extend_from_slice(unsafe { bytes(bufs.add(i)) });
    }
    out
}

#[derive(Debug, PartialEq, Eq)]
pub struct BadKey(pub String);

/// The parts of one key, copied (the server reuses its buffers, P28).
///
/// # Safety
/// `key` points at a valid `Key` whose parts array holds `key_parts_num`
/// valid buffers.
pub unsafe fn key_parts(key: *const Key) -> Result<Vec<Vec<u8>>, BadKey> {
    // SAFETY: valid per the caller.
    let key = unsafe { &*key };
    if key.key_parts_num > MAX_KEY_PARTS {
        return Err(BadKey(format!("{} key parts", key.key_parts_num)));
    }
    if key.key_parts_num > 0 && key.key_parts.is_null() {
        return Err(BadKey("NULL key parts".into()));
    }
    let mut parts = Vec::with_capacity(key.key_parts_num);
    for i in 0..key.key_parts_num {
        // SAFETY: `i < key_parts_num` elements, each valid per the caller.
        let part = unsafe { bytes(key.key_parts.add(i)) };
        if part.len() > MAX_KEY_PART_BYTES {
            return Err(BadKey(format!("a key part of {} bytes", part.len())));
        }
        parts.push(part.to_vec());
    }
    Ok(parts)
}
