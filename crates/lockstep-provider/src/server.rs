//! The server's side of the contract: its callbacks, wrapped in safe calls.
//!
//! Every callback that carries a `recv_ctx` must run on the applier thread
//! that passed that context to `recv()` (contract §3.0, P20); the provider
//! guarantees this by calling these wrappers only from inside `recv()` (or
//! from `replay_trx` on the client's own thread with its `trx_ctx`).

use std::ffi::c_void;
use wsrep_abi::{
    cb_status, ApplyCb, Buf, ConnectedCb, Gtid, MemberInfo, SyncedCb, TrxMeta, Uuid, ViewBuffer,
    ViewCb, ViewHeader, WsHandle,
};

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
}

fn succeeded(rc: i32) -> bool {
    rc == cb_status::SUCCESS
}

impl Server {
    pub fn connected(&self, view: &View) -> bool {
        let Some(cb) = self.connected_cb else {
            return false;
        };
        let info = view.buffer();
        // SAFETY: the server's callback with its own app_ctx and a view
        // buffer that lives until it returns (the server copies it).
        succeeded(unsafe { cb(self.app_ctx.0, info.as_ptr()) })
    }

    pub fn view(&self, recv_ctx: ThreadCtx, view: &View) -> bool {
        let Some(cb) = self.view_cb else {
            return false;
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

    pub fn synced(&self) -> bool {
        let Some(cb) = self.synced_cb else {
            return false;
        };
        // SAFETY: the server's callback with its own context.
        succeeded(unsafe { cb(self.app_ctx.0) })
    }

    /// Applies a writeset on the thread owning `ctx`. Returns (success,
    /// whether the server asked this applier to leave its loop).
    pub fn apply(
        &self,
        ctx: ThreadCtx,
        handle: &WsHandle,
        flags: u32,
        data: &[u8],
        meta: &TrxMeta,
    ) -> (bool, bool) {
        let Some(cb) = self.apply_cb else {
            return (false, false);
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
