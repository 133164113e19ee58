//! The `wsrep_t` function table. Each function: catch panics, convert the
//! arguments, call the safe `Provider` method, write results back.
//!
//! # Safety (every `extern "C"` function here)
//! They are reached only through the table `wsrep_loader` fills, and the
//! server calls them as the wsrep API v26 contract says
//! (`shared/docs/wsrep-provider-contract.md`): `w` is the `wsrep_t` the
//! loader filled, whose `ctx` is NULL or the `Box<Provider>` `init`
//! leaked until `free`; every pointer argument is NULL or valid for the
//! call, for the length or count passed with it; a `ws_handle` belongs to
//! the calling thread's transaction, and its `opaque` is NULL, the remote
//! marker, or the `Box<Handle>` an `append_*` call leaked. Each `unsafe`
//! block below relies on exactly that and says which part.

use super::convert::{self, bytes, string};
use super::guard::guard;
use super::stats;
use crate::identity::{CAPABILITIES, PROVIDER_NAME, PROVIDER_VENDOR, PROVIDER_VERSION};
use crate::log::{self, error};
use crate::provider::{InitConfig, Provider};
use crate::server::{AppCtx, Server, ThreadCtx};
use crate::trx::{Handle, LocalTrx};
use lockstep_core::certification::KeyType;
use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::OnceLock;
use wsrep_abi::{
    status, Buf, EncKey, Gtid, InitArgs, Key, PoHandle, StatsVar, Status, TrxMeta, Uuid, WsHandle,
    Wsrep,
};

struct Strings {
    name: CString,
    version: CString,
    vendor: CString,
}

fn strings() -> &'static Strings {
    static S: OnceLock<Strings> = OnceLock::new();
    S.get_or_init(|| Strings {
        name: CString::new(PROVIDER_NAME).unwrap_or_default(),
        version: CString::new(PROVIDER_VERSION).unwrap_or_default(),
        vendor: CString::new(PROVIDER_VENDOR).unwrap_or_default(),
    })
}

pub fn table() -> Wsrep {
    let s = strings();
    Wsrep {
        init: Some(init),
        capabilities: Some(capabilities),
        options_set: Some(options_set),
        options_get: Some(options_get),
        enc_set_key: Some(enc_set_key),
        connect: Some(connect),
        disconnect: Some(disconnect),
        recv: Some(recv),
        assign_read_view: Some(assign_read_view),
        certify: Some(certify),
        commit_order_enter: Some(commit_order_enter),
        commit_order_leave: Some(commit_order_leave),
        release: Some(release),
        replay_trx: Some(replay_trx),
        abort_certification: Some(abort_certification),
        rollback: Some(rollback),
        append_key: Some(append_key),
        append_data: Some(append_data),
        sync_wait: Some(sync_wait),
        last_committed_id: Some(last_committed_id),
        free_connection: Some(free_connection),
        to_execute_start: Some(to_execute_start),
        to_execute_end: Some(to_execute_end),
        preordered_collect: Some(preordered_collect),
        preordered_commit: Some(preordered_commit),
        sst_sent: Some(sst_sent),
        sst_received: Some(sst_received),
        snapshot: Some(snapshot),
        stats_get: Some(stats_get),
        stats_free: Some(stats_free),
        stats_reset: Some(stats_reset),
        pause: Some(pause),
        resume: Some(resume),
        desync: Some(desync),
        resync: Some(resync),
        lock: Some(lock),
        unlock: Some(unlock),
        is_locked: Some(is_locked),
        provider_name: s.name.as_ptr(),
        provider_version: s.version.as_ptr(),
        provider_vendor: s.vendor.as_ptr(),
        free: Some(free),
        ..Wsrep::empty()
    }
}

/// The instance behind `wsrep->ctx`.
///
/// # Safety
/// `w` is the server's `wsrep_t`, whose `ctx` is NULL or was set by `init`
/// to a leaked `Box<Provider>` that stays alive until `free`.
unsafe fn provider<'a>(w: *mut Wsrep) -> Option<&'a Provider> {
    if w.is_null() {
        return None;
    }
    // SAFETY: per the function's contract.
    let ctx = unsafe { (*w).ctx };
    // SAFETY: ctx is NULL or a live Box<Provider> (see above).
    unsafe { ctx.cast::<Provider>().as_ref() }
}

/// Runs `body` with the provider, or returns `missing` before `init`.
macro_rules! with_provider {
    ($name:literal, $w:expr, $missing:expr, |$p:ident| $body:expr) => {
        guard($name, $missing, || {
            // SAFETY: `$w` is the server's wsrep_t (see `provider`).
            match unsafe { provider($w) } {
                Some($p) => $body,
                None => $missing,
            }
        })
    };
}

/// # Safety
/// `handle` is NULL or the server's live ws handle.
unsafe fn handle_object<'a>(handle: *const WsHandle) -> Option<&'a mut Handle> {
    // SAFETY: NULL or live per the caller.
    if handle.is_null() || unsafe { is_remote(handle) } {
        return None;
    }
    // SAFETY: valid handle per the caller; opaque is NULL or a Box<Handle>
    // we leaked in append_*, owned by the transaction's thread.
    unsafe { (*handle).opaque.cast::<Handle>().as_mut() }
}

/// The handle object, shared: for calls that only read it and may run
/// while another call on the same transaction holds a reference to it.
/// `replay_trx` holds its `&LocalTrx` while the server applies the replay
/// and re-enters `commit_order_enter`/`_leave` with the same handle; a
/// `&mut` there (from [`handle_object`]) would alias the replay's
/// reference, which Rust forbids even if nothing is written.
///
/// # Safety
/// `handle` is NULL or the server's live ws handle, and no `&mut` to its
/// object is alive (only `append_*`, `certify` and `release` take one, and
/// the server never calls them inside a replay).
unsafe fn handle_shared<'a>(handle: *const WsHandle) -> Option<&'a Handle> {
    // SAFETY: NULL or live per the caller.
    if handle.is_null() || unsafe { is_remote(handle) } {
        return None;
    }
    // SAFETY: valid handle per the caller; opaque is NULL or a Box<Handle>
    // we leaked in append_*; shared, per the caller's promise above.
    unsafe { (*handle).opaque.cast::<Handle>().cast_const().as_ref() }
}

/// Whether `handle` is a remote writeset's, whose `opaque` is the marker
/// rather than one of our boxes.
///
/// # Safety
/// `handle` is NULL or the server's live ws handle.
unsafe fn is_remote(handle: *const WsHandle) -> bool {
    // SAFETY: non-NULL here, and live per the caller.
    !handle.is_null() && unsafe { (*handle).opaque } == crate::trx::remote_marker()
}

/// The handle object for a commit-order call: our boxed local handle, or
/// for a remote writeset one made from `meta` (its place in the order).
///
/// # Safety
/// `handle` is NULL or the server's live ws handle.
unsafe fn with_order_handle(
    handle: *const WsHandle,
    meta: &TrxMeta,
    f: impl FnOnce(u64, &Handle) -> Status,
) -> Status {
    if handle.is_null() {
        return status::TRX_MISSING;
    }
    // SAFETY: non-NULL and live per the caller.
    let trx_id = unsafe { (*handle).trx_id };
    // SAFETY: as above.
    if unsafe { is_remote(handle) } {
        let remote = Handle::Remote(crate::trx::RemoteHandle {
            seqno: meta.gtid.seqno,
        });
        return f(trx_id, &remote);
    }
    // SAFETY: per the caller; a shared reference, as a replay of this
    // transaction may be holding one (see `handle_shared`).
    match unsafe { handle_shared(handle) } {
        Some(h) => f(trx_id, h),
        None => status::TRX_MISSING,
    }
}

unsafe extern "C" fn init(w: *mut Wsrep, args: *const InitArgs) -> Status {
    guard("init", status::NODE_FAIL, || {
        if w.is_null() || args.is_null() {
            return status::NODE_FAIL;
        }
        // SAFETY: the server passes a valid init_args for the call.
        let a = unsafe { &*args };
        log::install(a.logger_cb);
        // SAFETY: strings from the server are NUL-terminated or NULL.
        let (name, address, incoming, data_dir, options) = unsafe {
            (
                string(a.node_name),
                string(a.node_address),
                string(a.node_incoming),
                string(a.data_dir),
                string(a.options),
            )
        };
        // SAFETY: NULL or a valid GTID for the call.
        let state_id = unsafe { a.state_id.as_ref() }.copied();
        let cfg = InitConfig {
            node_name: name,
            node_address: address,
            node_incoming: incoming,
            data_dir: if data_dir.is_empty() {
                ".".into()
            } else {
                data_dir.into()
            },
            options,
            proto_ver: a.proto_ver,
            state_id,
            server: Server {
                app_ctx: AppCtx::new(a.app_ctx),
                connected_cb: a.connected_cb,
                view_cb: a.view_cb,
                apply_cb: a.apply_cb,
                synced_cb: a.synced_cb,
                sst_request_cb: a.sst_request_cb,
                sst_donate_cb: a.sst_donate_cb,
                discard: false,
            },
            arbitrator: false,
        };
        match Provider::init(cfg) {
            Ok(p) => {
                // SAFETY: `w` is the server's wsrep_t; ctx is ours to set.
                unsafe { (*w).ctx = Box::into_raw(Box::new(p)).cast() };
                status::OK
            }
            Err(e) => {
                error!("failed to initialise Lockstep: {e}");
                status::NODE_FAIL
            }
        }
    })
}

unsafe extern "C" fn capabilities(_w: *mut Wsrep) -> u32 {
    CAPABILITIES
}

unsafe extern "C" fn options_set(w: *mut Wsrep, conf: *const c_char) -> Status {
    with_provider!("options_set", w, status::NODE_FAIL, |p| {
        // SAFETY: NUL-terminated or NULL from the server.
        p.options_set(&unsafe { string(conf) })
    })
}

/// The result is freed by the server with `free()`: allocate with malloc.
unsafe extern "C" fn options_get(w: *mut Wsrep) -> *mut c_char {
    let text = with_provider!("options_get", w, String::new(), |p| p.options_get());
    let c = CString::new(text).unwrap_or_default();
    // SAFETY: strdup copies a valid C string into malloc'ed memory.
    unsafe { libc::strdup(c.as_ptr()) }
}

unsafe extern "C" fn enc_set_key(_w: *mut Wsrep, _key: *const EncKey) -> Status {
    status::NOT_IMPLEMENTED
}

unsafe extern "C" fn connect(
    w: *mut Wsrep,
    cluster_name: *const c_char,
    cluster_url: *const c_char,
    state_donor: *const c_char,
    bootstrap: bool,
) -> Status {
    with_provider!("connect", w, status::NODE_FAIL, |p| {
        // SAFETY: NUL-terminated or NULL from the server.
        let (name, url, donors) = unsafe {
            (
                string(cluster_name),
                string(cluster_url),
                string(state_donor),
            )
        };
        p.connect(&name, &url, &donors, bootstrap)
    })
}

unsafe extern "C" fn disconnect(w: *mut Wsrep) -> Status {
    with_provider!("disconnect", w, status::NODE_FAIL, |p| p.disconnect())
}

unsafe extern "C" fn recv(w: *mut Wsrep, recv_ctx: *mut c_void) -> Status {
    with_provider!("recv", w, status::FATAL, |p| p.recv(ThreadCtx(recv_ctx)))
}

unsafe extern "C" fn assign_read_view(
    _w: *mut Wsrep,
    _h: *mut WsHandle,
    _rv: *const Gtid,
) -> Status {
    status::NOT_IMPLEMENTED
}

unsafe extern "C" fn certify(
    w: *mut Wsrep,
    conn_id: u64,
    handle: *mut WsHandle,
    flags: u32,
    meta: *mut TrxMeta,
) -> Status {
    with_provider!("certify", w, status::FATAL, |p| {
        if handle.is_null() || meta.is_null() {
            return status::FATAL;
        }
        // SAFETY: valid handle and meta from the client thread that owns
        // this transaction.
        let (trx_id, obj, meta) = unsafe { ((*handle).trx_id, handle_object(handle), &mut *meta) };
        let trx = match obj {
            Some(Handle::Local(t)) => Some(t),
            _ => None,
        };
        p.certify(trx_id, trx, conn_id, flags, meta)
    })
}

unsafe extern "C" fn commit_order_enter(
    w: *mut Wsrep,
    handle: *const WsHandle,
    meta: *const TrxMeta,
) -> Status {
    with_provider!("commit_order_enter", w, status::FATAL, |p| {
        // SAFETY: handle and meta valid for the call (server's).
        match unsafe { meta.as_ref() } {
            // SAFETY: the server's live handle.
            Some(m) => unsafe {
                with_order_handle(handle, m, |trx_id, h| p.commit_order_enter(trx_id, h, m))
            },
            None => status::TRX_MISSING,
        }
    })
}

unsafe extern "C" fn commit_order_leave(
    w: *mut Wsrep,
    handle: *const WsHandle,
    meta: *const TrxMeta,
    err: *const Buf,
) -> Status {
    with_provider!("commit_order_leave", w, status::FATAL, |p| {
        // SAFETY: handle, meta and error buffer valid for the call.
        let (meta, err) = unsafe { (meta.as_ref(), bytes(err)) };
        match meta {
            // SAFETY: the server's live handle.
            Some(m) => unsafe {
                with_order_handle(handle, m, |trx_id, h| {
                    p.commit_order_leave(trx_id, h, m, err)
                })
            },
            None => status::TRX_MISSING,
        }
    })
}

unsafe extern "C" fn release(w: *mut Wsrep, handle: *mut WsHandle) -> Status {
    with_provider!("release", w, status::FATAL, |p| {
        if handle.is_null() {
            return status::OK;
        }
        // SAFETY: valid handle from the owning client thread.
        let h = unsafe { &mut *handle };
        if h.opaque.is_null() {
            return status::OK;
        }
        if h.opaque == crate::trx::remote_marker() {
            // A remote writeset's handle, kept by the server past its apply:
            // nothing of ours behind it.
            h.opaque = std::ptr::null_mut();
            return status::OK;
        }
        let (rc, keep) = p.release(h.trx_id);
        if keep {
            // A streaming fragment committed: the same object collects the
            // next fragment.
            // SAFETY: opaque is our live Box<Handle>, used only by the
            // client thread that owns the transaction, which called us.
            if let Handle::Local(trx) = unsafe { &mut *h.opaque.cast::<Handle>() } {
                trx.start_next_fragment();
            }
            return rc;
        }
        // SAFETY: opaque is the Box<Handle> leaked in append_*; the server
        // releases each transaction once, and we clear opaque right away.
        drop(unsafe { Box::from_raw(h.opaque.cast::<Handle>()) });
        h.opaque = std::ptr::null_mut();
        rc
    })
}

unsafe extern "C" fn replay_trx(
    w: *mut Wsrep,
    handle: *const WsHandle,
    trx_ctx: *mut c_void,
) -> Status {
    with_provider!("replay_trx", w, status::TRX_FAIL, |p| {
        // SAFETY: the client's own handle, valid for the call; shared,
        // since the apply inside the replay re-enters the commit-order
        // calls with the same handle (see `handle_shared`).
        match unsafe { handle_shared(handle) } {
            // SAFETY: non-NULL since the object exists.
            Some(Handle::Local(trx)) => p.replay_trx(unsafe { &*handle }, trx, ThreadCtx(trx_ctx)),
            _ => status::TRX_FAIL,
        }
    })
}

unsafe extern "C" fn abort_certification(
    w: *mut Wsrep,
    bf_seqno: i64,
    victim_trx: u64,
    victim_seqno: *mut i64,
) -> Status {
    let mut seqno = -1;
    let rc = with_provider!("abort_certification", w, status::NOT_ALLOWED, |p| {
        p.abort_certification(bf_seqno, victim_trx, &mut seqno)
    });
    if !victim_seqno.is_null() {
        // SAFETY: the server's out-parameter; always written (P6).
        unsafe { *victim_seqno = seqno };
    }
    rc
}

unsafe extern "C" fn rollback(w: *mut Wsrep, trx: u64, _data: *const Buf) -> Status {
    // `data` is always NULL from wsrep-lib (contract §2.17).
    with_provider!("rollback", w, status::FATAL, |p| p.rollback(trx))
}

/// The transaction object behind `handle`, created on first use; `None`
/// for a remote writeset's handle (its `opaque` is the marker, not one of
/// our boxes), which the server keeps past its apply and must not append
/// to.
///
/// # Safety
/// `handle` is the server's valid, mutable, non-NULL handle of this
/// transaction.
unsafe fn trx_for_append<'a>(p: &Provider, handle: *mut WsHandle) -> Option<&'a mut LocalTrx> {
    // SAFETY: valid per the caller.
    if unsafe { is_remote(handle) } {
        error!("refusing to append to a replicated writeset's handle");
        return None;
    }
    // SAFETY: valid handle per the caller.
    let h = unsafe { &mut *handle };
    if h.opaque.is_null() {
        p.begin_trx(h.trx_id);
        h.opaque = Box::into_raw(Box::new(Handle::Local(LocalTrx::default()))).cast();
    }
    // SAFETY: opaque is our live Box<Handle>, used only by this thread.
    match unsafe { &mut *h.opaque.cast::<Handle>() } {
        Handle::Local(trx) => Some(trx),
        Handle::Remote(_) => None,
    }
}

unsafe extern "C" fn append_key(
    w: *mut Wsrep,
    handle: *mut WsHandle,
    keys: *const Key,
    count: usize,
    key_type: c_int,
    _copy: bool,
) -> Status {
    with_provider!("append_key", w, status::CONN_FAIL, |p| {
        let Some(kind) = KeyType::from_wsrep(key_type) else {
            error!("append_key: unknown key type {key_type}");
            return status::CONN_FAIL;
        };
        if handle.is_null() || (keys.is_null() && count > 0) {
            return status::CONN_FAIL;
        }
        // SAFETY: the server's handle for this transaction.
        let Some(trx) = (unsafe { trx_for_append(p, handle) }) else {
            return status::CONN_FAIL;
        };
        for i in 0..count {
            // SAFETY: `keys` holds `count` valid keys.
            let key = match unsafe { convert::key(keys.add(i), kind) } {
                Ok(key) => key,
                Err(e) => {
                    error!("append_key: refusing a malformed key ({})", e.0);
                    return status::CONN_FAIL;
                }
            };
            let rc = p.append_key(trx, key);
            if rc != status::OK {
                return rc;
            }
        }
        status::OK
    })
}

unsafe extern "C" fn append_data(
    w: *mut Wsrep,
    handle: *mut WsHandle,
    data: *const Buf,
    count: usize,
    data_type: c_int,
    _copy: bool,
) -> Status {
    with_provider!("append_data", w, status::CONN_FAIL, |p| {
        if handle.is_null() {
            return status::CONN_FAIL;
        }
        if data_type != wsrep_abi::data_type::ORDERED {
            // Unordered and annotation data are not replicated; MariaDB
            // does not send them.
            return status::OK;
        }
        // SAFETY: the server's handle and `count` valid buffers, which
        // stay valid until this call returns.
        let (trx, parts) = unsafe { (trx_for_append(p, handle), convert::slices(data, count)) };
        let Some(trx) = trx else {
            return status::CONN_FAIL;
        };
        match parts {
            Ok((parts, len)) => p.append_data(trx, len, parts.into_iter()),
            Err(e) => {
                error!("append_data: refusing {e}");
                status::CONN_FAIL
            }
        }
    })
}

unsafe extern "C" fn sync_wait(
    w: *mut Wsrep,
    upto: *mut Gtid,
    tout: c_int,
    gtid: *mut Gtid,
) -> Status {
    with_provider!("sync_wait", w, status::TRX_FAIL, |p| {
        // SAFETY: NULL or valid for the call.
        let target = unsafe { upto.as_ref() }.copied();
        let (rc, at) = p.sync_wait(target, tout);
        if !gtid.is_null() {
            // SAFETY: the caller's out-parameter.
            unsafe { *gtid = at };
        }
        rc
    })
}

unsafe extern "C" fn last_committed_id(w: *mut Wsrep, gtid: *mut Gtid) -> Status {
    // Must never fail (contract §2.21): answer "undefined" at worst.
    let at = with_provider!("last_committed_id", w, Gtid::UNDEFINED, |p| p
        .last_committed_id());
    if !gtid.is_null() {
        // SAFETY: the caller's out-parameter.
        unsafe { *gtid = at };
    }
    status::OK
}

unsafe extern "C" fn free_connection(_w: *mut Wsrep, _conn_id: u64) -> Status {
    status::OK
}

#[allow(clippy::too_many_arguments)] // the C signature
unsafe extern "C" fn to_execute_start(
    w: *mut Wsrep,
    conn_id: u64,
    keys: *const Key,
    keys_num: usize,
    action: *const Buf,
    count: usize,
    flags: u32,
    meta: *mut TrxMeta,
) -> Status {
    with_provider!("to_execute_start", w, status::CONN_FAIL, |p| {
        if meta.is_null() || (keys.is_null() && keys_num > 0) {
            return status::CONN_FAIL;
        }
        let mut parsed = Vec::with_capacity(keys_num);
        for i in 0..keys_num {
            // SAFETY: `keys` holds `keys_num` valid keys.
            match unsafe { convert::key(keys.add(i), KeyType::Exclusive) } {
                Ok(key) => parsed.push(key),
                Err(e) => {
                    error!("to_execute_start: refusing a malformed key ({})", e.0);
                    return status::CONN_FAIL;
                }
            }
        }
        // SAFETY: `count` valid buffers; meta valid for the call.
        let (data, meta) = unsafe { (convert::concat(action, count), &mut *meta) };
        match data {
            Ok(data) => p.to_execute_start(conn_id, parsed, data, flags, meta),
            Err(e) => {
                error!("to_execute_start: refusing {e}");
                status::CONN_FAIL
            }
        }
    })
}

unsafe extern "C" fn to_execute_end(w: *mut Wsrep, conn_id: u64, err: *const Buf) -> Status {
    with_provider!("to_execute_end", w, status::CONN_FAIL, |p| {
        // SAFETY: NULL or a valid buffer.
        p.to_execute_end(conn_id, unsafe { bytes(err) })
    })
}

unsafe extern "C" fn preordered_collect(
    _w: *mut Wsrep,
    _h: *mut PoHandle,
    _data: *const Buf,
    _count: usize,
    _copy: bool,
) -> Status {
    status::NOT_IMPLEMENTED
}

unsafe extern "C" fn preordered_commit(
    _w: *mut Wsrep,
    _h: *mut PoHandle,
    _source: *const Uuid,
    _flags: u32,
    _pa_range: c_int,
    _commit: bool,
) -> Status {
    status::NOT_IMPLEMENTED
}

/// The donor's SST script finished (contract §2.26).
unsafe extern "C" fn sst_sent(w: *mut Wsrep, state_id: *const Gtid, rcode: c_int) -> Status {
    with_provider!("sst_sent", w, status::CONN_FAIL, |p| {
        // SAFETY: NULL or the server's GTID, valid for the call.
        let gtid = unsafe { state_id.as_ref() }
            .copied()
            .unwrap_or(Gtid::UNDEFINED);
        p.sst_sent(gtid, rcode)
    })
}

/// The joiner received its state (contract §2.27); `state` is unused.
unsafe extern "C" fn sst_received(
    w: *mut Wsrep,
    state_id: *const Gtid,
    _state: *const Buf,
    rcode: c_int,
) -> Status {
    with_provider!("sst_received", w, status::CONN_FAIL, |p| {
        // SAFETY: NULL or the server's GTID, valid for the call.
        let gtid = unsafe { state_id.as_ref() }
            .copied()
            .unwrap_or(Gtid::UNDEFINED);
        p.sst_received(gtid, rcode)
    })
}

unsafe extern "C" fn snapshot(_w: *mut Wsrep, _msg: *const Buf, _donor: *const c_char) -> Status {
    status::NOT_IMPLEMENTED
}

unsafe extern "C" fn stats_get(w: *mut Wsrep) -> *mut StatsVar {
    with_provider!("stats_get", w, std::ptr::null_mut(), |p| stats::export(
        p.stats()
    ))
}

unsafe extern "C" fn stats_free(_w: *mut Wsrep, vars: *mut StatsVar) {
    guard("stats_free", (), || stats::release(vars))
}

/// `FLUSH STATUS`: the averaged figures start over.
unsafe extern "C" fn stats_reset(w: *mut Wsrep) {
    with_provider!("stats_reset", w, (), |p| p.stats_reset())
}

unsafe extern "C" fn pause(w: *mut Wsrep) -> i64 {
    with_provider!("pause", w, -1, |p| p.pause())
}

unsafe extern "C" fn resume(w: *mut Wsrep) -> Status {
    with_provider!("resume", w, status::NODE_FAIL, |p| p.resume())
}

unsafe extern "C" fn desync(w: *mut Wsrep) -> Status {
    with_provider!("desync", w, status::TRX_FAIL, |p| p.desync())
}

unsafe extern "C" fn resync(w: *mut Wsrep) -> Status {
    with_provider!("resync", w, status::NODE_FAIL, |p| p.resync())
}

unsafe extern "C" fn lock(
    _w: *mut Wsrep,
    _name: *const c_char,
    _shared: bool,
    _owner: u64,
    _tout: i64,
) -> Status {
    status::NOT_IMPLEMENTED
}

unsafe extern "C" fn unlock(_w: *mut Wsrep, _name: *const c_char, _owner: u64) -> Status {
    status::OK
}

unsafe extern "C" fn is_locked(
    _w: *mut Wsrep,
    _name: *const c_char,
    _conn: *mut u64,
    _node: *mut Uuid,
) -> bool {
    false
}

/// Called twice (contract P1): the first call tears down, the second sees
/// `ctx == NULL` and returns.
unsafe extern "C" fn free(w: *mut Wsrep) {
    guard("free", (), || {
        if w.is_null() {
            return;
        }
        // SAFETY: the server's wsrep_t.
        let ctx = unsafe { (*w).ctx };
        if ctx.is_null() {
            return;
        }
        // SAFETY: ctx is the Box<Provider> leaked by init; clearing ctx
        // first makes a second call a no-op.
        unsafe { (*w).ctx = std::ptr::null_mut() };
        // SAFETY: see above; no other thread uses the provider after free.
        let p = unsafe { Box::from_raw(ctx.cast::<Provider>()) };
        p.shutdown();
        drop(p);
        log::uninstall();
    })
}
