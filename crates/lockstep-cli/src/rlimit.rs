//! File-descriptor headroom for thousands of connections.

use nix::sys::resource::{getrlimit, setrlimit, Resource};

/// Raises the soft RLIMIT_NOFILE to the hard limit. The common soft default
/// of 1024 is below what 1000 keep-alive clients plus listeners need; the
/// hard limit is the administrator's decision, so that is where we stop.
pub fn raise_nofile() {
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        if soft < hard {
            if let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
                eprintln!("lockstep: cannot raise the open-files limit from {soft} to {hard}: {e}");
            }
        }
    }
}
