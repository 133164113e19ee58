//! `wsrep_t` (`struct wsrep_st`), `struct wsrep_init_args`, the server
//! callbacks, the allowlist service and the signatures of the exported
//! entry points.
//!
//! Every function pointer is an `Option<unsafe extern "C" fn(..)>`, so a
//! NULL pointer from C is `None`. `wsrep_bool_t` is `bool`, C enums, status
//! codes and `int` are `i32`, `size_t` is `usize`.

use core::ffi::{c_char, c_int, c_void};
use core::ptr;

use crate::consts::cb_status::CbStatus;
use crate::consts::status::Status;
use crate::consts::INTERFACE_VERSION;
use crate::types::{Buf, EncCtx, EncKey, Key, PoHandle, SeqCb, StatsVar, TrxMeta, WsHandle};
use crate::uuid::{Gtid, Uuid};
use crate::view::ViewInfo;

// ---------------------------------------------------------------------------
// Server callbacks (struct wsrep_init_args)
// ---------------------------------------------------------------------------

/// `logger_cb(level, msg)`; `level` is one of [`crate::log_level`].
pub type LoggerCb = unsafe extern "C" fn(level: i32, msg: *const c_char);

/// `connected_cb(app_ctx, view)`.
pub type ConnectedCb =
    unsafe extern "C" fn(app_ctx: *mut c_void, view: *const ViewInfo) -> CbStatus;

/// `view_cb(app_ctx, recv_ctx, view, state, state_len)`. wsrep-lib ignores
/// `state`/`state_len`; pass NULL and 0.
pub type ViewCb = unsafe extern "C" fn(
    app_ctx: *mut c_void,
    recv_ctx: *mut c_void,
    view: *const ViewInfo,
    state: *const c_char,
    state_len: usize,
) -> CbStatus;

/// `sst_request_cb(app_ctx, &sst_req, &sst_req_len)`. The request is
/// `malloc`ed by the server and must be `free`d by the provider.
pub type SstRequestCb = unsafe extern "C" fn(
    app_ctx: *mut c_void,
    sst_req: *mut *mut c_void,
    sst_req_len: *mut usize,
) -> CbStatus;

/// `encrypt_cb(app_ctx, ctx, input, output, direction, last)`; `direction`
/// is one of [`crate::enc_direction`]. NULL from MariaDB 10.11.
pub type EncryptCb = unsafe extern "C" fn(
    app_ctx: *mut c_void,
    ctx: *mut EncCtx,
    input: *const Buf,
    output: *mut c_void,
    direction: i32,
    last: bool,
) -> c_int;

/// `apply_cb(recv_ctx, ws_handle, flags, data, meta, exit_loop)`. The first
/// argument is the `recv_ctx` given to `recv`, not `app_ctx`.
pub type ApplyCb = unsafe extern "C" fn(
    recv_ctx: *mut c_void,
    ws_handle: *const WsHandle,
    flags: u32,
    data: *const Buf,
    meta: *const TrxMeta,
    exit_loop: *mut bool,
) -> CbStatus;

/// `unordered_cb(recv_ctx, data)`. NULL from MariaDB 10.11.
pub type UnorderedCb = unsafe extern "C" fn(recv_ctx: *mut c_void, data: *const Buf) -> CbStatus;

/// `sst_donate_cb(app_ctx, recv_ctx, str_msg, state_id, state, bypass)`.
pub type SstDonateCb = unsafe extern "C" fn(
    app_ctx: *mut c_void,
    recv_ctx: *mut c_void,
    str_msg: *const Buf,
    state_id: *const Gtid,
    state: *const Buf,
    bypass: bool,
) -> CbStatus;

/// `synced_cb(app_ctx)`.
pub type SyncedCb = unsafe extern "C" fn(app_ctx: *mut c_void) -> CbStatus;

/// Allowlist callback `cb(context, key, value)`; `key` is one of
/// [`crate::allowlist_key`], `value` is NUL-terminated text. Returns
/// [`crate::status::OK`] to allow or [`crate::status::NOT_ALLOWED`] to
/// refuse.
pub type AllowlistCb =
    unsafe extern "C" fn(context: *mut c_void, key: i32, value: *const Buf) -> Status;

/// `struct wsrep_init_args`: the argument of `init`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct InitArgs {
    /// Server context, first argument of most callbacks.
    pub app_ctx: *mut c_void,
    /// `wsrep_node_name`.
    pub node_name: *const c_char,
    /// `wsrep_node_address` (host with optional port).
    pub node_address: *const c_char,
    /// Client-facing address.
    pub node_incoming: *const c_char,
    /// Directory for the provider's state files.
    pub data_dir: *const c_char,
    /// `wsrep_provider_options`; never NULL, may be empty.
    pub options: *const c_char,
    /// Maximum application protocol version.
    pub proto_ver: i32,
    /// Starting position (`wsrep_start_position`).
    pub state_id: *const Gtid,
    /// Initial state; NULL from MariaDB.
    pub state: *const Buf,
    /// Logging callback.
    pub logger_cb: Option<LoggerCb>,
    /// Connected callback.
    pub connected_cb: Option<ConnectedCb>,
    /// View change callback.
    pub view_cb: Option<ViewCb>,
    /// SST request callback.
    pub sst_request_cb: Option<SstRequestCb>,
    /// Encryption callback (NULL from MariaDB 10.11).
    pub encrypt_cb: Option<EncryptCb>,
    /// Apply callback.
    pub apply_cb: Option<ApplyCb>,
    /// Unordered data callback (NULL from MariaDB).
    pub unordered_cb: Option<UnorderedCb>,
    /// SST donate callback.
    pub sst_donate_cb: Option<SstDonateCb>,
    /// Synced callback.
    pub synced_cb: Option<SyncedCb>,
}

impl InitArgs {
    /// Every pointer NULL, every callback `None`, `proto_ver` 0.
    pub const fn empty() -> InitArgs {
        InitArgs {
            app_ctx: ptr::null_mut(),
            node_name: ptr::null(),
            node_address: ptr::null(),
            node_incoming: ptr::null(),
            data_dir: ptr::null(),
            options: ptr::null(),
            proto_ver: 0,
            state_id: ptr::null(),
            state: ptr::null(),
            logger_cb: None,
            connected_cb: None,
            view_cb: None,
            sst_request_cb: None,
            encrypt_cb: None,
            apply_cb: None,
            unordered_cb: None,
            sst_donate_cb: None,
            synced_cb: None,
        }
    }
}

impl Default for InitArgs {
    fn default() -> InitArgs {
        InitArgs::empty()
    }
}

/// `wsrep_allowlist_service_v1_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct AllowlistService {
    /// The server's callback.
    pub allowlist_cb: Option<AllowlistCb>,
    /// Opaque server context (`wsrep_allowlist_context_t*`), first argument
    /// of the callback.
    pub context: *mut c_void,
}

// ---------------------------------------------------------------------------
// wsrep_t function signatures
// ---------------------------------------------------------------------------

/// `init(wsrep, args)`.
pub type InitFn = unsafe extern "C" fn(*mut Wsrep, *const InitArgs) -> Status;
/// `capabilities(wsrep)`: [`crate::caps`] bits.
pub type CapabilitiesFn = unsafe extern "C" fn(*mut Wsrep) -> u32;
/// `options_set(wsrep, conf)`.
pub type OptionsSetFn = unsafe extern "C" fn(*mut Wsrep, conf: *const c_char) -> Status;
/// `options_get(wsrep)`: a C-`malloc`ed string freed by the caller; never
/// NULL.
pub type OptionsGetFn = unsafe extern "C" fn(*mut Wsrep) -> *mut c_char;
/// `enc_set_key(wsrep, key)`.
pub type EncSetKeyFn = unsafe extern "C" fn(*mut Wsrep, key: *const EncKey) -> Status;
/// `connect(wsrep, cluster_name, cluster_url, state_donor, bootstrap)`.
pub type ConnectFn = unsafe extern "C" fn(
    *mut Wsrep,
    cluster_name: *const c_char,
    cluster_url: *const c_char,
    state_donor: *const c_char,
    bootstrap: bool,
) -> Status;
/// `disconnect(wsrep)`.
pub type DisconnectFn = unsafe extern "C" fn(*mut Wsrep) -> Status;
/// `recv(wsrep, recv_ctx)`.
pub type RecvFn = unsafe extern "C" fn(*mut Wsrep, recv_ctx: *mut c_void) -> Status;
/// `assign_read_view(wsrep, handle, rv)`.
pub type AssignReadViewFn =
    unsafe extern "C" fn(*mut Wsrep, *mut WsHandle, rv: *const Gtid) -> Status;
/// `certify(wsrep, conn_id, handle, flags, meta)`.
pub type CertifyFn = unsafe extern "C" fn(
    *mut Wsrep,
    conn_id: u64,
    *mut WsHandle,
    flags: u32,
    meta: *mut TrxMeta,
) -> Status;
/// `commit_order_enter(wsrep, handle, meta)`.
pub type CommitOrderEnterFn =
    unsafe extern "C" fn(*mut Wsrep, *const WsHandle, *const TrxMeta) -> Status;
/// `commit_order_leave(wsrep, handle, meta, error)`.
pub type CommitOrderLeaveFn =
    unsafe extern "C" fn(*mut Wsrep, *const WsHandle, *const TrxMeta, error: *const Buf) -> Status;
/// `release(wsrep, handle)`.
pub type ReleaseFn = unsafe extern "C" fn(*mut Wsrep, *mut WsHandle) -> Status;
/// `replay_trx(wsrep, handle, trx_ctx)`.
pub type ReplayTrxFn =
    unsafe extern "C" fn(*mut Wsrep, *const WsHandle, trx_ctx: *mut c_void) -> Status;
/// `abort_certification(wsrep, bf_seqno, victim_trx, victim_seqno)`.
pub type AbortCertificationFn = unsafe extern "C" fn(
    *mut Wsrep,
    bf_seqno: i64,
    victim_trx: u64,
    victim_seqno: *mut i64,
) -> Status;
/// `rollback(wsrep, trx, data)`.
pub type RollbackFn = unsafe extern "C" fn(*mut Wsrep, trx: u64, data: *const Buf) -> Status;
/// `append_key(wsrep, handle, keys, count, type, copy)`; `type` is one of
/// [`crate::key_type`].
pub type AppendKeyFn = unsafe extern "C" fn(
    *mut Wsrep,
    *mut WsHandle,
    keys: *const Key,
    count: usize,
    key_type: i32,
    copy: bool,
) -> Status;
/// `append_data(wsrep, handle, data, count, type, copy)`; `type` is one of
/// [`crate::data_type`].
pub type AppendDataFn = unsafe extern "C" fn(
    *mut Wsrep,
    *mut WsHandle,
    data: *const Buf,
    count: usize,
    data_type: i32,
    copy: bool,
) -> Status;
/// `sync_wait(wsrep, upto, tout, gtid)`.
pub type SyncWaitFn =
    unsafe extern "C" fn(*mut Wsrep, upto: *mut Gtid, tout: i32, gtid: *mut Gtid) -> Status;
/// `last_committed_id(wsrep, gtid)`.
pub type LastCommittedIdFn = unsafe extern "C" fn(*mut Wsrep, gtid: *mut Gtid) -> Status;
/// `free_connection(wsrep, conn_id)`.
pub type FreeConnectionFn = unsafe extern "C" fn(*mut Wsrep, conn_id: u64) -> Status;
/// `to_execute_start(wsrep, conn_id, keys, keys_num, action, count, flags,
/// meta)`.
pub type ToExecuteStartFn = unsafe extern "C" fn(
    *mut Wsrep,
    conn_id: u64,
    keys: *const Key,
    keys_num: usize,
    action: *const Buf,
    count: usize,
    flags: u32,
    meta: *mut TrxMeta,
) -> Status;
/// `to_execute_end(wsrep, conn_id, error)`.
pub type ToExecuteEndFn =
    unsafe extern "C" fn(*mut Wsrep, conn_id: u64, error: *const Buf) -> Status;
/// `preordered_collect(wsrep, handle, data, count, copy)`.
pub type PreorderedCollectFn = unsafe extern "C" fn(
    *mut Wsrep,
    *mut PoHandle,
    data: *const Buf,
    count: usize,
    copy: bool,
) -> Status;
/// `preordered_commit(wsrep, handle, source_id, flags, pa_range, commit)`.
pub type PreorderedCommitFn = unsafe extern "C" fn(
    *mut Wsrep,
    *mut PoHandle,
    source_id: *const Uuid,
    flags: u32,
    pa_range: i32,
    commit: bool,
) -> Status;
/// `sst_sent(wsrep, state_id, rcode)`.
pub type SstSentFn = unsafe extern "C" fn(*mut Wsrep, *const Gtid, rcode: i32) -> Status;
/// `sst_received(wsrep, state_id, state, rcode)`.
pub type SstReceivedFn =
    unsafe extern "C" fn(*mut Wsrep, *const Gtid, state: *const Buf, rcode: i32) -> Status;
/// `snapshot(wsrep, msg, donor_spec)`.
pub type SnapshotFn =
    unsafe extern "C" fn(*mut Wsrep, msg: *const Buf, donor_spec: *const c_char) -> Status;
/// `stats_get(wsrep)`: an array ended by a NULL `name`, or NULL.
pub type StatsGetFn = unsafe extern "C" fn(*mut Wsrep) -> *mut StatsVar;
/// `stats_free(wsrep, stats)`.
pub type StatsFreeFn = unsafe extern "C" fn(*mut Wsrep, *mut StatsVar);
/// `stats_reset(wsrep)`.
pub type StatsResetFn = unsafe extern "C" fn(*mut Wsrep);
/// `pause(wsrep)`: the seqno paused at, or exactly `-1` on failure.
pub type PauseFn = unsafe extern "C" fn(*mut Wsrep) -> i64;
/// `resume(wsrep)`.
pub type ResumeFn = unsafe extern "C" fn(*mut Wsrep) -> Status;
/// `desync(wsrep)`.
pub type DesyncFn = unsafe extern "C" fn(*mut Wsrep) -> Status;
/// `resync(wsrep)`.
pub type ResyncFn = unsafe extern "C" fn(*mut Wsrep) -> Status;
/// `lock(wsrep, name, shared, owner, tout)`.
pub type LockFn = unsafe extern "C" fn(
    *mut Wsrep,
    name: *const c_char,
    shared: bool,
    owner: u64,
    tout: i64,
) -> Status;
/// `unlock(wsrep, name, owner)`.
pub type UnlockFn = unsafe extern "C" fn(*mut Wsrep, name: *const c_char, owner: u64) -> Status;
/// `is_locked(wsrep, name, conn, node)`.
pub type IsLockedFn =
    unsafe extern "C" fn(*mut Wsrep, name: *const c_char, conn: *mut u64, node: *mut Uuid) -> bool;
/// `free(wsrep)`; called twice by the server, must be idempotent.
pub type FreeFn = unsafe extern "C" fn(*mut Wsrep);

// ---------------------------------------------------------------------------
// Exported entry points (not part of wsrep_t)
// ---------------------------------------------------------------------------

/// `int wsrep_loader(wsrep_t*)`: fills every field; 0 or an errno value.
pub type LoaderFn = unsafe extern "C" fn(*mut Wsrep) -> c_int;
/// `wsrep_certify_v1(wsrep, conn_id, handle, flags, meta, seq_cb)`.
pub type CertifyV1Fn = unsafe extern "C" fn(
    *mut Wsrep,
    conn_id: u64,
    *mut WsHandle,
    flags: u32,
    meta: *mut TrxMeta,
    seq_cb: *const SeqCb,
) -> Status;
/// `wsrep_init_allowlist_service_v1(service)`: must return 0.
pub type InitAllowlistServiceFn = unsafe extern "C" fn(*mut AllowlistService) -> c_int;
/// `wsrep_deinit_allowlist_service_v1()`.
pub type DeinitAllowlistServiceFn = unsafe extern "C" fn();
/// `wsrep_node_isolation_mode_set_v1(mode)`: see
/// [`crate::node_isolation`]. Must be async-signal-safe.
pub type NodeIsolationModeSetFn = unsafe extern "C" fn(mode: i32) -> i32;

// ---------------------------------------------------------------------------
// wsrep_t
// ---------------------------------------------------------------------------

/// `wsrep_t` (`struct wsrep_st`): the provider's function table, 45
/// pointer-sized fields, 360 bytes. The server allocates it and
/// `wsrep_loader` must fill every field.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Wsrep {
    /// Must point at `"26"` ([`INTERFACE_VERSION`]).
    pub version: *const c_char,
    /// See [`InitFn`].
    pub init: Option<InitFn>,
    /// See [`CapabilitiesFn`].
    pub capabilities: Option<CapabilitiesFn>,
    /// See [`OptionsSetFn`].
    pub options_set: Option<OptionsSetFn>,
    /// See [`OptionsGetFn`].
    pub options_get: Option<OptionsGetFn>,
    /// See [`EncSetKeyFn`].
    pub enc_set_key: Option<EncSetKeyFn>,
    /// See [`ConnectFn`].
    pub connect: Option<ConnectFn>,
    /// See [`DisconnectFn`].
    pub disconnect: Option<DisconnectFn>,
    /// See [`RecvFn`].
    pub recv: Option<RecvFn>,
    /// See [`AssignReadViewFn`].
    pub assign_read_view: Option<AssignReadViewFn>,
    /// See [`CertifyFn`].
    pub certify: Option<CertifyFn>,
    /// See [`CommitOrderEnterFn`].
    pub commit_order_enter: Option<CommitOrderEnterFn>,
    /// See [`CommitOrderLeaveFn`].
    pub commit_order_leave: Option<CommitOrderLeaveFn>,
    /// See [`ReleaseFn`].
    pub release: Option<ReleaseFn>,
    /// See [`ReplayTrxFn`].
    pub replay_trx: Option<ReplayTrxFn>,
    /// See [`AbortCertificationFn`].
    pub abort_certification: Option<AbortCertificationFn>,
    /// See [`RollbackFn`].
    pub rollback: Option<RollbackFn>,
    /// See [`AppendKeyFn`].
    pub append_key: Option<AppendKeyFn>,
    /// See [`AppendDataFn`].
    pub append_data: Option<AppendDataFn>,
    /// See [`SyncWaitFn`].
    pub sync_wait: Option<SyncWaitFn>,
    /// See [`LastCommittedIdFn`].
    pub last_committed_id: Option<LastCommittedIdFn>,
    /// See [`FreeConnectionFn`].
    pub free_connection: Option<FreeConnectionFn>,
    /// See [`ToExecuteStartFn`].
    pub to_execute_start: Option<ToExecuteStartFn>,
    /// See [`ToExecuteEndFn`].
    pub to_execute_end: Option<ToExecuteEndFn>,
    /// See [`PreorderedCollectFn`].
    pub preordered_collect: Option<PreorderedCollectFn>,
    /// See [`PreorderedCommitFn`].
    pub preordered_commit: Option<PreorderedCommitFn>,
    /// See [`SstSentFn`].
    pub sst_sent: Option<SstSentFn>,
    /// See [`SstReceivedFn`].
    pub sst_received: Option<SstReceivedFn>,
    /// See [`SnapshotFn`].
    pub snapshot: Option<SnapshotFn>,
    /// See [`StatsGetFn`].
    pub stats_get: Option<StatsGetFn>,
    /// See [`StatsFreeFn`].
    pub stats_free: Option<StatsFreeFn>,
    /// See [`StatsResetFn`].
    pub stats_reset: Option<StatsResetFn>,
    /// See [`PauseFn`].
    pub pause: Option<PauseFn>,
    /// See [`ResumeFn`].
    pub resume: Option<ResumeFn>,
    /// See [`DesyncFn`].
    pub desync: Option<DesyncFn>,
    /// See [`ResyncFn`].
    pub resync: Option<ResyncFn>,
    /// See [`LockFn`].
    pub lock: Option<LockFn>,
    /// See [`UnlockFn`].
    pub unlock: Option<UnlockFn>,
    /// See [`IsLockedFn`].
    pub is_locked: Option<IsLockedFn>,
    /// Provider name, e.g. `"Galera"`.
    pub provider_name: *const c_char,
    /// Provider version string.
    pub provider_version: *const c_char,
    /// Provider vendor string.
    pub provider_vendor: *const c_char,
    /// See [`FreeFn`].
    pub free: Option<FreeFn>,
    /// The `dlopen` handle, written by the loader after `wsrep_loader`.
    pub dlh: *mut c_void,
    /// Provider-private instance pointer.
    pub ctx: *mut c_void,
}

impl Wsrep {
    /// `version` set to [`INTERFACE_VERSION`], every other pointer NULL.
    /// A starting point for the provider's template.
    pub const fn empty() -> Wsrep {
        Wsrep {
            version: INTERFACE_VERSION.as_ptr(),
            init: None,
            capabilities: None,
            options_set: None,
            options_get: None,
            enc_set_key: None,
            connect: None,
            disconnect: None,
            recv: None,
            assign_read_view: None,
            certify: None,
            commit_order_enter: None,
            commit_order_leave: None,
            release: None,
            replay_trx: None,
            abort_certification: None,
            rollback: None,
            append_key: None,
            append_data: None,
            sync_wait: None,
            last_committed_id: None,
            free_connection: None,
            to_execute_start: None,
            to_execute_end: None,
            preordered_collect: None,
            preordered_commit: None,
            sst_sent: None,
            sst_received: None,
            snapshot: None,
            stats_get: None,
            stats_free: None,
            stats_reset: None,
            pause: None,
            resume: None,
            desync: None,
            resync: None,
            lock: None,
            unlock: None,
            is_locked: None,
            provider_name: ptr::null(),
            provider_version: ptr::null(),
            provider_vendor: ptr::null(),
            free: None,
            dlh: ptr::null_mut(),
            ctx: ptr::null_mut(),
        }
    }

    /// Names of the fields that the server's loader `verify()` requires to
    /// be non-NULL (`version` excluded) and that are NULL here. An empty
    /// result means the table passes that check (the version text itself
    /// is not examined).
    pub fn missing_required(&self) -> Vec<&'static str> {
        let checks: [(&'static str, bool); 37] = [
            ("init", self.init.is_some()),
            ("options_set", self.options_set.is_some()),
            ("options_get", self.options_get.is_some()),
            ("enc_set_key", self.enc_set_key.is_some()),
            ("connect", self.connect.is_some()),
            ("disconnect", self.disconnect.is_some()),
            ("recv", self.recv.is_some()),
            ("assign_read_view", self.assign_read_view.is_some()),
            ("certify", self.certify.is_some()),
            ("commit_order_enter", self.commit_order_enter.is_some()),
            ("commit_order_leave", self.commit_order_leave.is_some()),
            ("release", self.release.is_some()),
            ("replay_trx", self.replay_trx.is_some()),
            ("abort_certification", self.abort_certification.is_some()),
            ("append_key", self.append_key.is_some()),
            ("append_data", self.append_data.is_some()),
            ("free_connection", self.free_connection.is_some()),
            ("to_execute_start", self.to_execute_start.is_some()),
            ("to_execute_end", self.to_execute_end.is_some()),
            ("preordered_collect", self.preordered_collect.is_some()),
            ("preordered_commit", self.preordered_commit.is_some()),
            ("sst_sent", self.sst_sent.is_some()),
            ("sst_received", self.sst_received.is_some()),
            ("stats_get", self.stats_get.is_some()),
            ("stats_free", self.stats_free.is_some()),
            ("stats_reset", self.stats_reset.is_some()),
            ("pause", self.pause.is_some()),
            ("resume", self.resume.is_some()),
            ("desync", self.desync.is_some()),
            ("resync", self.resync.is_some()),
            ("lock", self.lock.is_some()),
            ("unlock", self.unlock.is_some()),
            ("is_locked", self.is_locked.is_some()),
            ("provider_name", !self.provider_name.is_null()),
            ("provider_version", !self.provider_version.is_null()),
            ("provider_vendor", !self.provider_vendor.is_null()),
            ("free", self.free.is_some()),
        ];
        checks
            .iter()
            .filter(|(_, ok)| !ok)
            .map(|(name, _)| *name)
            .collect()
    }
}

impl Default for Wsrep {
    fn default() -> Wsrep {
        Wsrep::empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consts::{caps, cb_status, status};

    // Stubs whose types must match the aliases exactly (checked by the
    // compiler when they are stored in the table below).
    unsafe extern "C" fn st0(_: *mut Wsrep) -> Status {
        status::OK
    }
    unsafe extern "C" fn init(_: *mut Wsrep, _: *const InitArgs) -> Status {
        status::OK
    }
    unsafe extern "C" fn capabilities(_: *mut Wsrep) -> u32 {
        caps::MULTI_MASTER | caps::CERTIFICATION
    }
    unsafe extern "C" fn options_set(_: *mut Wsrep, _: *const c_char) -> Status {
        status::OK
    }
    unsafe extern "C" fn options_get(_: *mut Wsrep) -> *mut c_char {
        ptr::null_mut()
    }
    unsafe extern "C" fn enc_set_key(_: *mut Wsrep, _: *const EncKey) -> Status {
        status::NOT_IMPLEMENTED
    }
    unsafe extern "C" fn connect(
        _: *mut Wsrep,
        _: *const c_char,
        _: *const c_char,
        _: *const c_char,
        _: bool,
    ) -> Status {
        status::OK
    }
    unsafe extern "C" fn recv(_: *mut Wsrep, _: *mut c_void) -> Status {
        status::OK
    }
    unsafe extern "C" fn assign_read_view(
        _: *mut Wsrep,
        _: *mut WsHandle,
        _: *const Gtid,
    ) -> Status {
        status::NOT_IMPLEMENTED
    }
    unsafe extern "C" fn certify(
        _: *mut Wsrep,
        _: u64,
        _: *mut WsHandle,
        _: u32,
        meta: *mut TrxMeta,
    ) -> Status {
        // SAFETY: the test passes a valid, writable `TrxMeta`.
        unsafe { *meta = TrxMeta::undefined() };
        status::TRX_FAIL
    }
    unsafe extern "C" fn co_enter(_: *mut Wsrep, _: *const WsHandle, _: *const TrxMeta) -> Status {
        status::OK
    }
    unsafe extern "C" fn co_leave(
        _: *mut Wsrep,
        _: *const WsHandle,
        _: *const TrxMeta,
        _: *const Buf,
    ) -> Status {
        status::OK
    }
    unsafe extern "C" fn release(_: *mut Wsrep, _: *mut WsHandle) -> Status {
        status::OK
    }
    unsafe extern "C" fn replay_trx(_: *mut Wsrep, _: *const WsHandle, _: *mut c_void) -> Status {
        status::OK
    }
    unsafe extern "C" fn abort_cert(_: *mut Wsrep, _: i64, _: u64, _: *mut i64) -> Status {
        status::OK
    }
    unsafe extern "C" fn rollback(_: *mut Wsrep, _: u64, _: *const Buf) -> Status {
        status::OK
    }
    unsafe extern "C" fn append_key(
        _: *mut Wsrep,
        _: *mut WsHandle,
        _: *const Key,
        _: usize,
        _: i32,
        _: bool,
    ) -> Status {
        status::OK
    }
    unsafe extern "C" fn append_data(
        _: *mut Wsrep,
        _: *mut WsHandle,
        _: *const Buf,
        _: usize,
        _: i32,
        _: bool,
    ) -> Status {
        status::OK
    }
    unsafe extern "C" fn sync_wait(_: *mut Wsrep, _: *mut Gtid, _: i32, _: *mut Gtid) -> Status {
        status::OK
    }
    unsafe extern "C" fn last_committed_id(_: *mut Wsrep, _: *mut Gtid) -> Status {
        status::OK
    }
    unsafe extern "C" fn conn_op(_: *mut Wsrep, _: u64) -> Status {
        status::OK
    }
    #[allow(clippy::too_many_arguments)]
    unsafe extern "C" fn to_start(
        _: *mut Wsrep,
        _: u64,
        _: *const Key,
        _: usize,
        _: *const Buf,
        _: usize,
        _: u32,
        _: *mut TrxMeta,
    ) -> Status {
        status::OK
    }
    unsafe extern "C" fn to_end(_: *mut Wsrep, _: u64, _: *const Buf) -> Status {
        status::OK
    }
    unsafe extern "C" fn po_collect(
        _: *mut Wsrep,
        _: *mut PoHandle,
        _: *const Buf,
        _: usize,
        _: bool,
    ) -> Status {
        status::NOT_IMPLEMENTED
    }
    unsafe extern "C" fn po_commit(
        _: *mut Wsrep,
        _: *mut PoHandle,
        _: *const Uuid,
        _: u32,
        _: i32,
        _: bool,
    ) -> Status {
        status::NOT_IMPLEMENTED
    }
    unsafe extern "C" fn sst_sent(_: *mut Wsrep, _: *const Gtid, _: i32) -> Status {
        status::OK
    }
    unsafe extern "C" fn sst_received(
        _: *mut Wsrep,
        _: *const Gtid,
        _: *const Buf,
        _: i32,
    ) -> Status {
        status::OK
    }
    unsafe extern "C" fn snapshot(_: *mut Wsrep, _: *const Buf, _: *const c_char) -> Status {
        status::NOT_IMPLEMENTED
    }
    unsafe extern "C" fn stats_get(_: *mut Wsrep) -> *mut StatsVar {
        ptr::null_mut()
    }
    unsafe extern "C" fn stats_free(_: *mut Wsrep, _: *mut StatsVar) {}
    unsafe extern "C" fn void0(_: *mut Wsrep) {}
    unsafe extern "C" fn pause(_: *mut Wsrep) -> i64 {
        -1
    }
    unsafe extern "C" fn lock(_: *mut Wsrep, _: *const c_char, _: bool, _: u64, _: i64) -> Status {
        status::NOT_IMPLEMENTED
    }
    unsafe extern "C" fn unlock(_: *mut Wsrep, _: *const c_char, _: u64) -> Status {
        status::NOT_IMPLEMENTED
    }
    unsafe extern "C" fn is_locked(
        _: *mut Wsrep,
        _: *const c_char,
        _: *mut u64,
        _: *mut Uuid,
    ) -> bool {
        false
    }
    unsafe extern "C" fn synced(_: *mut c_void) -> CbStatus {
        cb_status::SUCCESS
    }
    unsafe extern "C" fn apply(
        _: *mut c_void,
        _: *const WsHandle,
        _: u32,
        _: *const Buf,
        _: *const TrxMeta,
        exit_loop: *mut bool,
    ) -> CbStatus {
        // SAFETY: the test passes a valid, writable `bool`.
        unsafe { *exit_loop = true };
        cb_status::SUCCESS
    }

    fn full_table() -> Wsrep {
        Wsrep {
            init: Some(init),
            capabilities: Some(capabilities),
            options_set: Some(options_set),
            options_get: Some(options_get),
            enc_set_key: Some(enc_set_key),
            connect: Some(connect),
            disconnect: Some(st0),
            recv: Some(recv),
            assign_read_view: Some(assign_read_view),
            certify: Some(certify),
            commit_order_enter: Some(co_enter),
            commit_order_leave: Some(co_leave),
            release: Some(release),
            replay_trx: Some(replay_trx),
            abort_certification: Some(abort_cert),
            rollback: Some(rollback),
            append_key: Some(append_key),
            append_data: Some(append_data),
            sync_wait: Some(sync_wait),
            last_committed_id: Some(last_committed_id),
            free_connection: Some(conn_op),
            to_execute_start: Some(to_start),
            to_execute_end: Some(to_end),
            preordered_collect: Some(po_collect),
            preordered_commit: Some(po_commit),
            sst_sent: Some(sst_sent),
            sst_received: Some(sst_received),
            snapshot: Some(snapshot),
            stats_get: Some(stats_get),
            stats_free: Some(stats_free),
            stats_reset: Some(void0),
            pause: Some(pause),
            resume: Some(st0),
            desync: Some(st0),
            resync: Some(st0),
            lock: Some(lock),
            unlock: Some(unlock),
            is_locked: Some(is_locked),
            provider_name: c"Lockstep".as_ptr(),
            provider_version: c"0.1.0".as_ptr(),
            provider_vendor: c"Lockstep".as_ptr(),
            free: Some(void0),
            ..Wsrep::empty()
        }
    }

    #[test]
    fn full_table_passes_required_check() {
        let w = full_table();
        assert!(w.missing_required().is_empty());
        let mut w2 = w;
        w2.certify = None;
        w2.provider_vendor = ptr::null();
        assert_eq!(w2.missing_required(), ["certify", "provider_vendor"]);
    }

    #[test]
    fn call_through_table() {
        let mut w = full_table();
        let wp: *mut Wsrep = &mut w;
        let mut meta = TrxMeta {
            depends_on: 99,
            ..TrxMeta::undefined()
        };
        let mut h = WsHandle {
            trx_id: 1,
            opaque: ptr::null_mut(),
        };
        // SAFETY: the stubs only touch `meta`, which is valid and writable.
        let rc = unsafe { (w.certify.unwrap())(wp, 7, &mut h, 0, &mut meta) };
        assert_eq!(rc, status::TRX_FAIL);
        assert_eq!(meta, TrxMeta::undefined());
        // SAFETY: the stub ignores its argument.
        assert_eq!(unsafe { (w.capabilities.unwrap())(wp) }, 3);

        let args = InitArgs {
            apply_cb: Some(apply),
            synced_cb: Some(synced),
            ..InitArgs::empty()
        };
        let mut exit = false;
        // SAFETY: the stub only writes `exit`, which is valid and writable.
        let rc = unsafe {
            (args.apply_cb.unwrap())(ptr::null_mut(), &h, 0, ptr::null(), &meta, &mut exit)
        };
        assert_eq!(rc, cb_status::SUCCESS);
        assert!(exit);
    }
}
