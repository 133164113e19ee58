//! Plain data structures of the interface: transaction metadata, buffers,
//! handles, keys, status variables and encryption/sequencing contexts.

use core::ffi::{c_char, c_void, CStr};
use core::fmt;
use core::ptr;

use crate::consts::{var_type, SEQNO_UNDEFINED};
use crate::uuid::{Gtid, Uuid};

/// `wsrep_stid_t`: identifies a transaction by its origin.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Stid {
    /// Member id of the originating node.
    pub node: Uuid,
    /// Originator's transaction id (`wsrep_trx_id_t`); `u64::MAX` if
    /// undefined.
    pub trx: u64,
    /// Originator's connection (client) id (`wsrep_conn_id_t`).
    pub conn: u64,
}

impl Stid {
    /// Nil node, transaction `u64::MAX` ("undefined"), connection 0.
    pub const UNDEFINED: Stid = Stid {
        node: Uuid::NIL,
        trx: u64::MAX,
        conn: 0,
    };

    /// Builds a source transaction id.
    pub const fn new(node: Uuid, trx: u64, conn: u64) -> Stid {
        Stid { node, trx, conn }
    }
}

/// `wsrep_trx_meta_t`: what the provider reports about an ordered writeset.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TrxMeta {
    /// Global transaction id (history UUID and seqno).
    pub gtid: Gtid,
    /// Source transaction id.
    pub stid: Stid,
    /// Highest seqno this writeset depends on; `-1` if none/undefined.
    pub depends_on: i64,
}

impl TrxMeta {
    /// Undefined metadata: GTID nil:-1, [`Stid::UNDEFINED`] and
    /// `depends_on = -1`.
    pub const fn undefined() -> TrxMeta {
        TrxMeta {
            gtid: Gtid::UNDEFINED,
            stid: Stid::UNDEFINED,
            depends_on: SEQNO_UNDEFINED,
        }
    }
}

impl Default for TrxMeta {
    fn default() -> TrxMeta {
        TrxMeta::undefined()
    }
}

/// `wsrep_buf_t`: a borrowed byte range.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Buf {
    /// Start of the bytes (may be NULL when `len` is 0).
    pub ptr: *const c_void,
    /// Number of bytes.
    pub len: usize,
}

impl Buf {
    /// NULL pointer, zero length.
    pub const EMPTY: Buf = Buf {
        ptr: ptr::null(),
        len: 0,
    };

    /// Describes `bytes`. The result borrows nothing in the type system:
    /// the caller must keep `bytes` alive while the `Buf` is used.
    pub const fn from_slice(bytes: &[u8]) -> Buf {
        Buf {
            ptr: bytes.as_ptr().cast(),
            len: bytes.len(),
        }
    }

    /// Views the bytes as a slice. A NULL pointer or zero length gives an
    /// empty slice.
    ///
    /// # Safety
    ///
    /// If `ptr` is non-NULL and `len` is non-zero, `ptr` must point at
    /// `len` initialised bytes that stay valid and unmodified for `'a`.
    pub unsafe fn as_slice<'a>(&self) -> &'a [u8] {
        if self.ptr.is_null() || self.len == 0 {
            return &[];
        }
        // SAFETY: non-NULL and non-empty; validity for `len` bytes and the
        // lifetime are guaranteed by the caller.
        unsafe { core::slice::from_raw_parts(self.ptr.cast::<u8>(), self.len) }
    }
}

impl Default for Buf {
    fn default() -> Buf {
        Buf::EMPTY
    }
}

/// `wsrep_enc_key_t`: an encryption key, laid out as a [`Buf`].
pub type EncKey = Buf;

/// `wsrep_enc_iv_t`: a 32-byte initialisation vector.
pub type EncIv = [c_char; 32];

/// `wsrep_ws_handle_t`: a transaction handle. `opaque` belongs to the
/// provider.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WsHandle {
    /// Server transaction id.
    pub trx_id: u64,
    /// Provider-private pointer.
    pub opaque: *mut c_void,
}

/// `wsrep_key_t`: one key made of several parts.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Key {
    /// Array of `key_parts_num` parts.
    pub key_parts: *const Buf,
    /// Number of parts.
    pub key_parts_num: usize,
}

impl Key {
    /// Views the key parts as a slice. A NULL pointer or zero count gives an
    /// empty slice.
    ///
    /// # Safety
    ///
    /// If non-NULL and non-empty, `key_parts` must point at
    /// `key_parts_num` valid `Buf`s that stay valid for `'a`.
    pub unsafe fn parts<'a>(&self) -> &'a [Buf] {
        if self.key_parts.is_null() || self.key_parts_num == 0 {
            return &[];
        }
        // SAFETY: non-NULL and non-empty; validity and lifetime are
        // guaranteed by the caller.
        unsafe { core::slice::from_raw_parts(self.key_parts, self.key_parts_num) }
    }
}

/// `wsrep_po_handle_t`: a preordered-writeset handle.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PoHandle {
    /// Provider-private pointer.
    pub opaque: *mut c_void,
}

/// `wsrep_enc_ctx_t`: the context passed to `encrypt_cb`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EncCtx {
    /// The key.
    pub key: *const EncKey,
    /// The initialisation vector.
    pub iv: *const EncIv,
    /// Callback-private state.
    pub ctx: *mut c_void,
}

/// `wsrep_seq_cb_t`: the sequencing callback of `wsrep_certify_v1`. The
/// provider calls `func(ctx)` once sequential consistency is guaranteed.
/// (The C field is named `fn`.)
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SeqCb {
    /// Argument for `func`.
    pub ctx: *mut c_void,
    /// The callback.
    pub func: Option<unsafe extern "C" fn(*mut c_void)>,
}

/// The value union of `struct wsrep_stats_var`. Which member is valid is
/// given by [`StatsVar::type_`].
#[repr(C)]
#[derive(Clone, Copy)]
pub union StatsValue {
    /// Valid when the type is [`var_type::INT64`].
    pub int64: i64,
    /// Valid when the type is [`var_type::DOUBLE`].
    pub double: f64,
    /// Valid when the type is [`var_type::STRING`]: a NUL-terminated string.
    pub string: *const c_char,
}

/// `struct wsrep_stats_var`: one status variable. Arrays of these are
/// terminated by an element whose `name` is NULL ([`StatsVar::END`]).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct StatsVar {
    /// Variable name without the `wsrep_` prefix; NULL ends the array.
    pub name: *const c_char,
    /// One of [`var_type`].
    pub type_: i32,
    /// The value.
    pub value: StatsValue,
}

impl StatsVar {
    /// The terminating element: NULL name, type `INT64`, value 0.
    pub const END: StatsVar = StatsVar {
        name: ptr::null(),
        type_: var_type::INT64,
        value: StatsValue { int64: 0 },
    };

    /// An `INT64` variable. `name` must outlive every use of the result.
    pub const fn int64(name: *const c_char, v: i64) -> StatsVar {
        StatsVar {
            name,
            type_: var_type::INT64,
            value: StatsValue { int64: v },
        }
    }

    /// A `DOUBLE` variable. `name` must outlive every use of the result.
    pub const fn double(name: *const c_char, v: f64) -> StatsVar {
        StatsVar {
            name,
            type_: var_type::DOUBLE,
            value: StatsValue { double: v },
        }
    }

    /// A `STRING` variable. `name` and `v` must outlive every use of the
    /// result.
    pub const fn string(name: *const c_char, v: *const c_char) -> StatsVar {
        StatsVar {
            name,
            type_: var_type::STRING,
            value: StatsValue { string: v },
        }
    }

    /// True for the terminating element.
    pub fn is_end(&self) -> bool {
        self.name.is_null()
    }
}

impl fmt::Debug for StatsVar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("StatsVar");
        d.field("name", &self.name).field("type_", &self.type_);
        // SAFETY: every member of the union is 8 bytes wide and every bit
        // pattern is a valid `i64`, `f64` or raw pointer; the pointer is only
        // printed, never dereferenced.
        unsafe {
            match self.type_ {
                var_type::DOUBLE => d.field("value", &self.value.double),
                var_type::STRING => d.field("value", &self.value.string),
                _ => d.field("value", &self.value.int64),
            };
        }
        d.finish()
    }
}

/// A `const char*` to a `'static` C string that may be stored in a
/// `static` (for example the exported `wsrep_interface_version` symbol,
/// which must be a data symbol holding a pointer to `"26"`).
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub struct StaticCStr(*const c_char);

impl StaticCStr {
    /// Wraps a `'static` C string.
    pub const fn new(s: &'static CStr) -> StaticCStr {
        StaticCStr(s.as_ptr())
    }

    /// The raw pointer.
    pub const fn as_ptr(self) -> *const c_char {
        self.0
    }
}

// SAFETY: the pointer always comes from a `&'static CStr` (the only
// constructor), which is immutable and lives forever, so sharing it between
// threads is sound.
unsafe impl Sync for StaticCStr {}
// SAFETY: as above; the pointee is immutable `'static` data.
unsafe impl Send for StaticCStr {}
