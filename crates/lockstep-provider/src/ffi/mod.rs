//! The C ABI boundary: the symbols mariadbd looks up, and the function
//! table it calls. This is the only module with `unsafe` code that touches
//! server memory; everything behind it is safe Rust.

mod convert;
mod entry;
pub(crate) mod guard;
mod stats;

use std::ffi::c_int;
use std::sync::Mutex;
use wsrep_abi::{
    allowlist_key, status, AllowlistService, Buf, StaticCStr, Wsrep, INTERFACE_VERSION,
};

/// Read by the loader and by mtr's `wsrep_check_version` (contract §1.2).
#[no_mangle]
#[allow(non_upper_case_globals)]
pub static wsrep_interface_version: StaticCStr = StaticCStr::new(INTERFACE_VERSION);

/// Fills the server's `wsrep_t` with our function table (contract §1.3).
///
/// # Safety
/// `h` is NULL or points at writable memory of `sizeof(wsrep_t)` bytes.
#[no_mangle]
pub unsafe extern "C" fn wsrep_loader(h: *mut Wsrep) -> c_int {
    guard::guard("wsrep_loader", libc::ENOTRECOVERABLE, || {
        if h.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: non-NULL and sized for a Wsrep per the loader's contract;
        // `write` does not read the uninitialised old contents.
        unsafe { h.write(entry::table()) };
        0
    })
}

/// Ends the server process at once, as Galera does when a joiner can never
/// receive its state: `why` is logged, then `_exit(1)`. No unwinding, no
/// atexit handlers, no shutdown of a server that never finished starting
/// (its data directory is about to be replaced by a state transfer anyway).
pub(crate) fn terminate_process(why: &str) -> ! {
    crate::log::error!("{why}");
    // SAFETY: `_exit` takes no pointers and does not return; it is the
    // async-signal-safe way out that skips the process's exit handlers.
    unsafe { libc::_exit(1) }
}

/// The server's allowlist service; kept for when peers connect (the group
/// channel asks it before accepting an address).
struct Allowlist(Option<AllowlistService>);
// SAFETY: the service is a callback plus the server's context pointer,
// which the server documents as callable from any thread.
unsafe impl Send for Allowlist {}

static ALLOWLIST: Mutex<Allowlist> = Mutex::new(Allowlist(None));

/// MariaDB always passes an allowlist service; failing here would abort
/// loading (contract P2).
///
/// # Safety
/// `service` is NULL or points at a valid service struct.
#[no_mangle]
pub unsafe extern "C" fn wsrep_init_allowlist_service_v1(service: *mut AllowlistService) -> c_int {
    guard::guard("wsrep_init_allowlist_service_v1", 0, || {
        let copy = if service.is_null() {
            None
        } else {
            // SAFETY: non-NULL and valid per the caller; we copy it.
            Some(unsafe { *service })
        };
        ALLOWLIST.lock().unwrap_or_else(|p| p.into_inner()).0 = copy;
        0
    })
}

/// Whether the server's allowlist (`wsrep_allowlist`, then the table
/// `mysql.wsrep_allowlist`) admits a peer at `ip`. Without a service every
/// peer is admitted; with an empty list the server admits every peer.
pub(crate) fn allowlist_admits(ip: std::net::IpAddr) -> bool {
    // Held across the call: deinit (which takes the lock) then waits for a
    // call in progress instead of racing it.
    let guard = ALLOWLIST.lock().unwrap_or_else(|p| p.into_inner());
    let Some(AllowlistService {
        allowlist_cb: Some(cb),
        context,
    }) = guard.0
    else {
        return true;
    };
    // The server reads the value as a C string: NUL-terminated. An IPv4
    // peer on a dual-stack socket is named as IPv4, as the list has it.
    let text = format!("{}\0", ip.to_canonical());
    let value = Buf {
        ptr: text.as_ptr().cast(),
        len: text.len() - 1,
    };
    // SAFETY: `cb` and `context` are the server's service, callable from
    // any thread until deinit, which cannot run meanwhile (the lock above
    // is held); `value` points at a NUL-terminated string that outlives
    // the call.
    let rc = unsafe { cb(context, allowlist_key::IP, &value) };
    drop(guard);
    rc == status::OK
}

#[no_mangle]
pub extern "C" fn wsrep_deinit_allowlist_service_v1() {
    guard::guard("wsrep_deinit_allowlist_service_v1", (), || {
        ALLOWLIST.lock().unwrap_or_else(|p| p.into_inner()).0 = None;
    })
}
