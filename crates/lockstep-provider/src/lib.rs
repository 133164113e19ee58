//! liblockstep.so: a wsrep API v26 provider that stock MariaDB loads with
//! `wsrep_provider=/path/liblockstep.so`, in place of Galera.
//!
//! Layout: `ffi` is the C boundary (the only place that touches server
//! memory); `os` reads what the server exports about its settings and
//! advises the kernel on big buffers (with `ffi`, the only modules with
//! `unsafe`); `provider`, `session`, `replication`, `control` and `stats`
//! implement the contract in safe Rust on top of `lockstep_core`'s pure
//! state machines; `server` wraps the server's callbacks; `grastate` keeps
//! the saved position on disk; `storage` is the file-system seam its
//! small state files go through (power-loss tests cut it at every step).

mod appliers;
mod apply_queue;
pub mod arbitrator;
mod bypass;
mod cache_feed;
mod cache_writer;
mod causal_reads;
mod clock_log;
mod commit_waits;
mod control;
mod diverged;
mod donations;
mod event;
pub mod ffi;
mod flow_control;
mod fork_check;
mod galera_export;
mod galera_import;
mod grastate;
mod group_driver;
mod group_input;
mod identity;
mod ist_replay;
mod joining;
mod local_trxs;
pub mod log;
mod membership;
mod order_gates;
mod os;
mod peer_security;
mod position_recovery;
mod proposals;
mod provider;
mod read_asks;
mod recv_spool;
mod remote_ws;
mod replication;
mod round_status;
mod server;
mod session;
mod settings;
mod shared;
mod sleepers;
mod state;
mod state_lock;
mod state_transfer;
mod stats;
mod storage;
#[cfg(test)]
mod tests;
mod trx;
mod viewstate;
mod vote;
mod votes;
mod writeset_cache;
mod ws_size;
