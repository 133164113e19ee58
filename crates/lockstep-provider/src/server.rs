//! The server's side of the contract: its callbacks, wrapped in safe calls.
//!
//! Every callback that carries a `recv_ctx` must run on the applier thread
//! that passed that context to `recv()` (contract §3.0, P20); the provider
//! guarantees this by calling these wrappers only from inside `recv()` (or
//! from `replay_trx` on the client's own thread with its `trx_ctx`).
//!
//! No callback runs under the provider's state lock (contract P27: the
//! server calls back into the provider, which takes it). That rule is a
//! type: each wrapper takes the caller's guard by value ([`Held`]) and
//! lets go of it before it calls the server. The lock is not reentrant,
//! so a thread holds at most one guard; the one it gave up is that one,
//! and code that would keep the lock across a callback does not compile.

use std::ffi::c_void;
use wsrep_abi::{
    cb_status, ApplyCb, Buf, ConnectedCb, Gtid, MemberInfo, SstDonateCb, SstRequestCb, SyncedCb,
    TrxMeta, Uuid, ViewBuffer, ViewCb, ViewHeader, WsHandle,
};

/// The state whose guard a callback takes (`state::Inner`, and nothing
/// else).
pub(crate) trait TakenByCallbacks {}

/// The caller's guard of the provider's state lock, given up for a
/// callback.
pub(crate) type Held<'a, T> = crate::state_lock::Guard<'a, T>;

/// `init_args.app_ctx`: wsrep-lib's server_state, opaque to us.
#[derive(Clone, Copy)]
pub struct AppCtx(*mut c_void);

impl AppCtx {
    pub fn new(p: *mut c_void) -> AppCtx {
        AppCtx(p)
    }
}

// SAFETY: the pointer is never dereferenced by us; it is only handed back to
// the server's callbacks, which are documented to accept it from any applier
// thread.
unsafe impl Send for AppCtx {}
// SAFETY: as above, shared references never touch the pointee.
unsafe impl Sync for AppCtx {}

/// A `recv_ctx` or `trx_ctx` handed to us by the thread that owns it.
#[derive(Clone, Copy)]
pub struct ThreadCtx(pub *mut c_void);

/// One member of a view, in Rust terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub id: Uuid,
    pub name: String,
    pub incoming: String,
}

/// Group members as a view lists them, and where `me` (a Raft id) is
/// among them. Sorted by member UUID, as Galera does: a joiner rebuilds
/// its view from `mysql.wsrep_cluster_members`, which the server reads
/// back sorted by UUID, and `wsrep_local_index` /
/// `auto_increment_offset` must agree between the two.
pub fn view_members<'a>(
    members: impl IntoIterator<Item = &'a lockstep_core::group::MemberInfo>,
    me: u64,
) -> (Vec<Member>, Option<usize>) {
    let mut sorted: Vec<_> = members.into_iter().collect();
    sorted.sort_by_key(|m| m.uuid);
    let my_idx = sorted.iter().position(|m| m.raft_id == me);
    let listed = sorted
        .iter()
        .map(|m| Member {
            id: Uuid::from_bytes(m.uuid),
            name: m.name.clone(),
            incoming: m.incoming.clone(),
        })
        .collect();
    (listed, my_idx)
}

/// A configuration to deliver to the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    pub state_id: Gtid,
    /// Configuration number, -1 for non-primary views.
    pub conf_id: i64,
    pub status: i32,
    pub capabilities: u32,
    pub my_idx: i32,
    pub proto_ver: i32,
    pub members: Vec<Member>,
}

impl View {
    /// The empty non-primary view that ends a session (contract P19).
    pub fn final_view(capabilities: u32, proto_ver: i32) -> View {
        View {
            state_id: Gtid::UNDEFINED,
            conf_id: -1,
            status: wsrep_abi::view_status::DISCONNECTED,
            capabilities,
            my_idx: -1,
            proto_ver,
            members: Vec::new(),
        }
    }
}

impl View {
    fn buffer(&self) -> ViewBuffer {
        let header = ViewHeader {
            state_id: self.state_id,
            view: self.conf_id,
            status: self.status,
            capabilities: self.capabilities,
            my_idx: self.my_idx,
            proto_ver: self.proto_ver,
        };
        let members: Vec<MemberInfo> = self
            .members
            .iter()
            .map(|m| MemberInfo::new(m.id, &m.name, &m.incoming))
            .collect();
        ViewBuffer::new(&header, &members)
    }
}

/// The callbacks from `init_args`, plus the context they take.
pub struct Server {
    pub app_ctx: AppCtx,
    pub connected_cb: Option<ConnectedCb>,
    pub view_cb: Option<ViewCb>,
    pub apply_cb: Option<ApplyCb>,
    pub synced_cb: Option<SyncedCb>,
    pub sst_request_cb: Option<SstRequestCb>,
    pub sst_donate_cb: Option<SstDonateCb>,
    /// No server at all: the arbitrator's (`lockstep arbitrator`). Views,
    /// writesets and "synced" are taken and dropped; it is never asked
    /// for a state transfer nor chosen as donor.
    pub discard: bool,
}

fn succeeded(rc: i32) -> bool {
    rc == cb_status::SUCCESS
}

impl Server {
    /// The arbitrator's: nothing to call.
    pub fn discarding() -> Server {
        Server {
            app_ctx: AppCtx::new(std::ptr::null_mut()),
            connected_cb: None,
            view_cb: None,
            apply_cb: None,
            synced_cb: None,
            sst_request_cb: None,
            sst_donate_cb: None,
            discard: true,
        }
    }

    pub fn connected<T: TakenByCallbacks>(&self, held: Held<'_, T>, view: &View) -> bool {
        drop(held);
        let Some(cb) = self.connected_cb else {
            return self.discard;
        };
        let info = view.buffer();
        // SAFETY: the server's callback with its own app_ctx and a view
        // buffer that lives until it returns (the server copies it).
        succeeded(unsafe { cb(self.app_ctx.0, info.as_ptr()) })
    }

    pub fn view<T: TakenByCallbacks>(
        &self,
        held: Held<'_, T>,
        recv_ctx: ThreadCtx,
        view: &View,
    ) -> bool {
        drop(held);
        let Some(cb) = self.view_cb else {
            return self.discard;
        };
        let info = view.buffer();
        // SAFETY: called on the applier thread that owns `recv_ctx`; the
        // view buffer outlives the call; no state pointer is passed.
        succeeded(unsafe {
            cb(
                self.app_ctx.0,
                recv_ctx.0,
                info.as_ptr(),
                std::ptr::null(),
                0,
            )
        })
    }

    pub fn synced<T: TakenByCallbacks>(&self, held: Held<'_, T>) -> bool {
        drop(held);
        let Some(cb) = self.synced_cb else {
            return self.discard;
        };
        // SAFETY: the server's callback with its own context.
        succeeded(unsafe { cb(self.app_ctx.0) })
    }

    /// Asks the server to prepare for a state transfer (contract §3.3).
    /// Returns the request bytes (including the final NUL), empty when
    /// only IST is possible, or `None` if the server failed.
    pub fn sst_request<T: TakenByCallbacks>(&self, held: Held<'_, T>) -> Option<Vec<u8>> {
        drop(held);
        let cb = self.sst_request_cb?;
        let mut ptr: *mut c_void = std::ptr::null_mut();
        let mut len: usize = 0;
        // SAFETY: the server's callback with its app_ctx and two valid
        // out-parameters; it may block while the SST script starts.
        let rc = unsafe { cb(self.app_ctx.0, &mut ptr, &mut len) };
        let bytes = if ptr.is_null() || len == 0 {
            Vec::new()
        } else {
            // SAFETY: the server allocated `len` bytes at `ptr` for us.
            unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) }.to_vec()
        };
        if !ptr.is_null() {
            // SAFETY: allocated by the server with malloc; the provider
            // owns and frees it (contract §3.3).
            unsafe { libc::free(ptr) };
        }
        succeeded(rc).then_some(bytes)
    }

    /// Starts donating state to a joiner (contract §3.6), on the applier
    /// thread owning `ctx`.
    pub fn sst_donate<T: TakenByCallbacks>(
        &self,
        held: Held<'_, T>,
        ctx: ThreadCtx,
        request: &[u8],
        state_id: &Gtid,
        bypass: bool,
    ) -> bool {
        drop(held);
        let Some(cb) = self.sst_donate_cb else {
            return false;
        };
        let msg = Buf {
            ptr: request.as_ptr().cast(),
            len: request.len(),
        };
        // SAFETY: called on the applier thread owning `ctx`; the request
        // and state id outlive the call; no state buffer is passed.
        succeeded(unsafe {
            cb(
                self.app_ctx.0,
                ctx.0,
                &msg,
                state_id,
                std::ptr::null(),
                bypass,
            )
        })
    }

    /// Applies a writeset on the thread owning `ctx`. Returns (success,
    /// whether the server asked this applier to leave its loop).
    pub fn apply<T: TakenByCallbacks>(
        &self,
        held: Held<'_, T>,
        ctx: ThreadCtx,
        handle: &WsHandle,
        flags: u32,
        data: &[u8],
        meta: &TrxMeta,
    ) -> (bool, bool) {
        drop(held);
        let Some(cb) = self.apply_cb else {
            return (self.discard, false);
        };
        let buf = Buf {
            ptr: if data.is_empty() {
                std::ptr::null()
            } else {
                data.as_ptr().cast()
            },
            len: data.len(),
        };
        let mut exit_loop = false;
        // SAFETY: `ctx` belongs to the calling thread; handle, data and meta
        // outlive the call; exit_loop is a valid bool the server may set.
        let rc = unsafe { cb(ctx.0, handle, flags, &buf, meta, &mut exit_loop) };
        (succeeded(rc), exit_loop)
    }
}

impl Server {
    /// Applies a remote writeset: its `ws_handle.opaque` is the remote
    /// marker ([`crate::trx::remote_marker`]), which the commit-order calls
    /// recognise and `release` never frees.
    #[allow(clippy::too_many_arguments)]
    pub fn apply_remote<T: TakenByCallbacks>(
        &self,
        held: Held<'_, T>,
        ctx: ThreadCtx,
        trx_id: u64,
        seqno: i64,
        flags: u32,
        data: &[u8],
        meta: &TrxMeta,
    ) -> (bool, bool) {
        debug_assert_eq!(meta.gtid.seqno, seqno);
        let handle = WsHandle {
            trx_id,
            opaque: crate::trx::remote_marker(),
        };
        self.apply(held, ctx, &handle, flags, data, meta)
    }
}
