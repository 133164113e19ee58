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
    }

    #[test]
    fn an_exported_variable_is_read() {
        // libc's `optind` (an int, 1 until getopt runs; little-endian).
        assert_eq!(read_bool(c"optind"), Some(true));
    }
}
