//! Jepsen-style runs against a real three-node cluster (issue 33).
//!
//! One [`run::run`] starts three `mariadbd` nodes with a provider (Lockstep
//! or Galera, the same way), lets [`client`]s run list-append and register
//! transactions on every node while a [`nemesis::Nemesis`] injects one
//! fault and heals it, waits for the cluster to recover, takes a final
//! read on every node, and checks the recorded history with
//! `lockstep-history`. [`report`] turns many runs into `docs/jepsen.md`.
//!
//! Bounds: every statement has a client timeout ([`client::STATEMENT_TIMEOUT`]),
//! every nemesis step ends by itself, recovery has a deadline, and all
//! traffic stays on loopback.

#![forbid(unsafe_code)]

pub mod client;
pub mod disks;
pub mod nemesis;
pub use lockstep_testkit::net;
pub mod report;
pub mod run;
pub mod workload;
