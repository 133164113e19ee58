//! Calls into the process and the kernel that are not the wsrep API: what
//! the server that loaded us exports about its own settings, and advice
//! on how big buffers are backed. Like `ffi`, a place where `unsafe` is
//! allowed, each block saying why it is sound; it imports nothing from the
//! rest of the provider.

mod memory;
mod server_vars;

pub(crate) use memory::contiguous;
pub(crate) use server_vars::{server_bootstraps, server_sst_method, server_writes_binlog};
