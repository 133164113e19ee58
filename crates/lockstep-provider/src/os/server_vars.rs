//! What the provider learns of the server's own settings that the wsrep
//! API does not pass. The server is the program that loaded us; `mariadbd`
//! exports its globals (plugins link against them), so they can be looked
//! up by name. Anything not found reads as unknown, and callers take the
//! cautious side.

/// Whether the server writes a binary log (`log_bin`): `opt_bin_log`.
/// `None` when the program does not export it (not `mariadbd`, or a
/// build that hides its symbols).
pub(crate) fn server_writes_binlog() -> Option<bool> {
    read_bool(c"opt_bin_log")
}

/// The server's `wsrep_sst_method` (`rsync`, `mariabackup`, `mysqldump`,
/// `skip`, or a custom script's name). `None` when not exported.
pub(crate) fn server_sst_method() -> Option<String> {
    read_c_string(c"wsrep_sst_method")
}

/// Whether this start of the server founds a new cluster: started with
/// `--wsrep-new-cluster` (`wsrep_new_cluster`), or with a
/// `wsrep_cluster_address` that names no peer (`gcomm://`). `None` when
/// neither is exported.
pub(crate) fn server_bootstraps() -> Option<bool> {
    bootstraps(
        read_bool(c"wsrep_new_cluster"),
        read_c_string(c"wsrep_cluster_address").as_deref(),
    )
}

/// [`server_bootstraps`] from the two values read, by the rule the
/// connect applies (`ClusterAddress::is_bootstrap`; an address it cannot
/// parse founds nothing).
fn bootstraps(new_cluster: Option<bool>, address: Option<&str>) -> Option<bool> {
    use lockstep_core::address::ClusterAddress;
    let no_peer = address.map(|a| ClusterAddress::parse(a).is_ok_and(|c| c.is_bootstrap()));
    match (new_cluster, no_peer) {
        (None, None) => None,
        (n, p) => Some(n == Some(true) || p == Some(true)),
    }
}

/// A global `const char *` of the server, copied.
fn read_c_string(name: &std::ffi::CStr) -> Option<String> {
    // SAFETY: as in `read_bool`: only searches the loaded objects.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: the symbol is a `const char *` variable in mariadbd
    // (`wsrep_sst_method`): an aligned, readable pointer-sized slot,
    // set while the server parses its options, before any provider loads.
    let s = unsafe { std::ptr::read_volatile(p.cast::<*const libc::c_char>()) };
    if s.is_null() {
        return None;
    }
    // SAFETY: the server keeps the option's value, a NUL-terminated
    // string, for its whole life; it is copied at once.
    let value = unsafe { std::ffi::CStr::from_ptr(s) };
    Some(value.to_string_lossy().into_owned())
}

fn read_bool(name: &std::ffi::CStr) -> Option<bool> {
    // SAFETY: `dlsym` with `RTLD_DEFAULT` only searches the loaded
    // objects for a symbol; `name` is NUL-terminated and outlives the call.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: a non-null address of an exported data symbol is mapped and
    // readable. `opt_bin_log` is a one-byte `bool` set while the server
    // parses its options, before any provider is loaded; reading one byte
    // of it is sound whatever its exact C type (any is at least a byte).
    let v = unsafe { std::ptr::read_volatile(p.cast::<u8>()) };
    Some(v != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_without_the_symbol_reads_as_unknown() {
        // The test binary is not mariadbd.
        assert_eq!(server_writes_binlog(), None);
        assert_eq!(read_bool(c"lockstep_no_such_symbol"), None);
        assert_eq!(server_sst_method(), None);
    }

    #[test]
    fn a_start_bootstraps_with_new_cluster_or_an_address_without_peers() {
        assert_eq!(bootstraps(None, None), None);
        assert_eq!(bootstraps(Some(true), Some("gcomm://a,b")), Some(true));
        assert_eq!(bootstraps(Some(false), Some("gcomm://")), Some(true));
        assert_eq!(
            bootstraps(None, Some("gcomm://?pc.wait_prim=no")),
            Some(true)
        );
        assert_eq!(
            bootstraps(Some(false), Some("gcomm://127.0.0.1:4567")),
            Some(false)
        );
        assert_eq!(
            bootstraps(None, Some("gcomm://10.0.0.1?gmcast.segment=1")),
            Some(false)
        );
        assert_eq!(bootstraps(Some(false), None), Some(false));
        assert_eq!(server_bootstraps(), None, "the test binary is not mariadbd");
    }

    #[test]
    fn an_exported_variable_is_read() {
        // libc's `optind` (an int, 1 until getopt runs; little-endian).
        assert_eq!(read_bool(c"optind"), Some(true));
    }
}
