//! Per-transaction objects behind `ws_handle.opaque`.
//!
//! A handle reaches us in three forms that must be told apart (contract
//! §2.0): a local transaction, a remote writeset we passed to `apply_cb`,
//! and a replayed local transaction. `opaque` points at a boxed [`Handle`];
//! the bulky parts (keys, data) belong to the one thread that drives the
//! transaction, while the state other threads race on (BF aborts) lives in
//! the provider's registry keyed by trx id.

use lockstep_core::certification::Key;

/// What `ws_handle.opaque` points at.
pub enum Handle {
    Local(LocalTrx),
    /// A remote writeset inside `apply_cb`.
    Remote(RemoteHandle),
}

/// `ws_handle.opaque` of a remote writeset passed to `apply_cb`: a marker,
/// never a heap object. The server may keep a copy of that handle past the
/// callback (an applier whose apply failed releases it when its thread
/// ends, after the provider has moved on), so nothing behind it may be
/// freed; `release` recognises the marker by address and frees nothing.
static REMOTE_MARKER: u8 = 0;

/// The marker's address (see [`REMOTE_MARKER`]).
pub fn remote_marker() -> *mut std::ffi::c_void {
    std::ptr::addr_of!(REMOTE_MARKER).cast_mut().cast()
}

/// A remote writeset being applied: only its place in the order.
#[derive(Debug, Clone, Copy)]
pub struct RemoteHandle {
    pub seqno: i64,
}

/// A transaction executing on this node, collected by `append_*`.
#[derive(Default)]
pub struct LocalTrx {
    pub keys: Vec<Key>,
    pub key_bytes: usize,
    /// Keys appended (the keys themselves move into the writeset).
    pub key_count: usize,
    pub data: Vec<u8>,
    /// The data as replicated, shared with the writeset (a small one) or
    /// its fragments (a big one) rather than copied into them: `data`
    /// moves here at certification. What a replay applies.
    pub sent: lockstep_core::group::payload::Payload,
    /// Flags given at certification, kept for a replay.
    pub flags: u32,
    pub conn_id: u64,
    /// Keys or data beyond `repl.max_ws_size` were offered: nothing more
    /// is kept, and `certify` fails with the size error. (Failing the
    /// append itself is not safe: MariaDB 10.11 can go on to commit the
    /// part it appended, and the other nodes would get a truncated
    /// writeset. Galera, too, reports the size at certification.)
    pub oversized: bool,
    /// The keys as Galera counts them against `repl.max_ws_size`.
    pub counted_keys: crate::ws_size::KeyCount,
}

impl LocalTrx {
    pub fn size(&self) -> usize {
        self.key_bytes + self.data_len()
    }

    /// The data's length, before or after it moved into `sent`.
    pub fn data_len(&self) -> usize {
        self.data.len() + self.sent.len()
    }

    /// The replicated data a replay applies.
    pub fn replicated_data(&self) -> std::borrow::Cow<'_, [u8]> {
        if self.sent.is_empty() {
            std::borrow::Cow::Borrowed(&self.data)
        } else {
            self.sent.contiguous()
        }
    }

    /// The size `repl.max_ws_size` limits, counted as Galera does
    /// (`ws_size`).
    pub fn counted_size(&self) -> usize {
        crate::ws_size::counted(&self.counted_keys, self.data.len())
    }

    /// A streaming fragment committed: the object lives on for the next
    /// fragment, which starts empty (contract §5.5, Galera's
    /// `release_commit`). The connection stays.
    pub fn start_next_fragment(&mut self) {
        *self = LocalTrx {
            conn_id: self.conn_id,
            ..LocalTrx::default()
        };
    }
}

/// Whether certify `flags` describe a streaming fragment that does not end
/// its transaction (neither commit nor rollback): its object outlives
/// `release`, and a BF abort cannot replay it.
pub fn is_open_fragment(wsflags: u32) -> bool {
    use wsrep_abi::flags;
    wsflags & (flags::TRX_END | flags::ROLLBACK) == 0
}

/// Whether a replicated writeset is part of a streaming transaction (any
/// fragment, its commit or its rollback) rather than a whole transaction.
pub fn is_streaming(wsflags: u32) -> bool {
    use wsrep_abi::flags;
    let whole = flags::TRX_START | flags::TRX_END;
    wsflags & flags::ISOLATION == 0 && wsflags & whole != whole
}

/// Where a local transaction is in its life, as other threads see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrxState {
    /// Appending keys and data; not ordered yet.
    Executing,
    /// Sent to the group, waiting for its place in the order.
    Replicating,
    /// BF-aborted before it was ordered: it must not replicate (or, if
    /// it was already sent, it replays or fails once ordered).
    MustAbort,
    /// Ordered and certified; heading for commit order.
    Certified,
    /// Ordered but failed certification; its seqno still passes the gates.
    CertFailed,
    /// Inside commit order.
    Committing,
    /// BF-aborted after ordering: the server rolls back and replays it
    /// (an open streaming fragment cannot replay: it fails instead, and
    /// the server rolls the whole streaming transaction back).
    MustReplay,
    Replaying,
}

/// The shared part of a local transaction, in the provider's registry.
#[derive(Debug, Clone, Copy)]
pub struct TrxRecord {
    pub state: TrxState,
    /// -1 until ordered.
    pub seqno: i64,
    pub depends_on: i64,
    /// Has left commit order (committed or rolled back in order).
    pub commit_left: bool,
    /// The writeset being certified is a streaming fragment that does not
    /// end the transaction ([`is_open_fragment`]).
    pub open_fragment: bool,
}

impl TrxRecord {
    pub fn new() -> TrxRecord {
        TrxRecord {
            state: TrxState::Executing,
            seqno: -1,
            depends_on: -1,
            commit_left: false,
            open_fragment: false,
        }
    }
}

impl Default for TrxRecord {
    fn default() -> Self {
        Self::new()
    }
}
