//! Constants of the wsrep v26 interface: return codes, enumeration values,
//! writeset flags, capability bits and a few magic strings.
//!
//! Every C enumeration is an `int` on the wire, so each one is modelled as a
//! module of `i32` constants rather than a Rust `enum`: a value that arrives
//! from C may be anything and must be validated before it is trusted.

use core::ffi::CStr;

/// Interface version string. `wsrep_t::version` and the exported
/// `wsrep_interface_version` symbol must both point at this text.
pub const INTERFACE_VERSION: &CStr = c"26";

/// The "undefined" sequence number.
pub const SEQNO_UNDEFINED: i64 = -1;

/// Size of `wsrep_member_info_t::name`, including the terminating NUL.
pub const MEMBER_NAME_LEN: usize = 32;

/// Size of `wsrep_member_info_t::incoming`, including the terminating NUL.
pub const INCOMING_LEN: usize = 256;

/// Length of the text form of a UUID (without a terminating NUL).
pub const UUID_STR_LEN: usize = 36;

/// Maximum length of the text form of a GTID, `uuid:seqno`
/// (36 + 1 + 20, without a terminating NUL).
pub const GTID_STR_LEN: usize = 57;

/// SST request that asks the donor to treat the joiner as joined without
/// copying any data (MariaDB sends it for `wsrep_sst_method=skip`).
pub const STATE_TRANSFER_TRIVIAL: &str = "trivial";

/// SST request meaning "no state transfer".
pub const STATE_TRANSFER_NONE: &str = "none";

/// `wsrep_status_t`: the result of every `wsrep_t` call.
pub mod status {
    /// `wsrep_status_t` as it appears on the wire.
    pub type Status = i32;

    /// Success.
    pub const OK: Status = 0;
    /// Minor warning; the error is logged and the call otherwise succeeded.
    pub const WARNING: Status = 1;
    /// The transaction is not known to the provider.
    pub const TRX_MISSING: Status = 2;
    /// The transaction failed (for example on certification).
    pub const TRX_FAIL: Status = 3;
    /// The transaction was brute-force aborted.
    pub const BF_ABORT: Status = 4;
    /// The writeset exceeds the configured size limit.
    pub const SIZE_EXCEEDED: Status = 5;
    /// Error in the client connection; the call must be aborted.
    pub const CONN_FAIL: Status = 6;
    /// Error in the node state; wsrep must be reinitialised.
    pub const NODE_FAIL: Status = 7;
    /// Fatal error; the server must abort.
    pub const FATAL: Status = 8;
    /// The feature is not implemented.
    pub const NOT_IMPLEMENTED: Status = 9;
    /// The operation is not allowed in the current state.
    pub const NOT_ALLOWED: Status = 10;

    /// True if `s` is one of the defined status codes.
    pub const fn is_valid(s: Status) -> bool {
        s >= OK && s <= NOT_ALLOWED
    }
}

/// `wsrep_cb_status_t`: the result of server callbacks.
pub mod cb_status {
    /// `wsrep_cb_status_t` as it appears on the wire.
    pub type CbStatus = i32;

    /// The callback succeeded.
    pub const SUCCESS: CbStatus = 0;
    /// The callback failed. Any non-zero value must be treated as failure.
    pub const FAILURE: CbStatus = 1;
}

/// `wsrep_log_level_t`: the first argument of `logger_cb`.
pub mod log_level {
    /// Unrecoverable error.
    pub const FATAL: i32 = 0;
    /// Error.
    pub const ERROR: i32 = 1;
    /// Warning.
    pub const WARN: i32 = 2;
    /// Informational message.
    pub const INFO: i32 = 3;
    /// Debug message.
    pub const DEBUG: i32 = 4;
}

/// `wsrep_member_status_t`: also the values of the `wsrep_local_state`
/// status variable.
pub mod member_status {
    /// Closed, connected or in a non-primary component.
    pub const UNDEFINED: i32 = 0;
    /// Receiving a state transfer.
    pub const JOINER: i32 = 1;
    /// Sending a state transfer, or desynced.
    pub const DONOR: i32 = 2;
    /// Has the state but is still catching up.
    pub const JOINED: i32 = 3;
    /// Fully synchronised with the group.
    pub const SYNCED: i32 = 4;
    /// Inconsistent; the node must leave the cluster.
    pub const ERROR: i32 = 5;
    /// One past the last valid value.
    pub const MAX: i32 = 6;
}

/// `wsrep_view_status_t`: `wsrep_view_info_t::status`.
pub mod view_status {
    /// Primary component.
    pub const PRIMARY: i32 = 0;
    /// Non-primary component.
    pub const NON_PRIMARY: i32 = 1;
    /// Not connected to any group.
    pub const DISCONNECTED: i32 = 2;
}

/// `wsrep_key_type_t`: the `type` argument of `append_key`.
pub mod key_type {
    /// Shared (read) key.
    pub const SHARED: i32 = 0;
    /// Reference (e.g. foreign key parent) key.
    pub const REFERENCE: i32 = 1;
    /// Update key.
    pub const UPDATE: i32 = 2;
    /// Exclusive key.
    pub const EXCLUSIVE: i32 = 3;
}

/// `wsrep_data_type_t`: the `type` argument of `append_data`.
pub mod data_type {
    /// Data applied in total order.
    pub const ORDERED: i32 = 0;
    /// Data delivered outside the total order.
    pub const UNORDERED: i32 = 1;
    /// Annotation only, not applied.
    pub const ANNOTATION: i32 = 2;
}

/// `wsrep_var_type_t`: `wsrep_stats_var::type`.
pub mod var_type {
    /// `value.string` is valid.
    pub const STRING: i32 = 0;
    /// `value.int64` is valid.
    pub const INT64: i32 = 1;
    /// `value.double` is valid.
    pub const DOUBLE: i32 = 2;
}

/// `wsrep_enc_direction_t`: the direction argument of `encrypt_cb`.
pub mod enc_direction {
    /// Encrypt.
    pub const ENC: i32 = 0;
    /// Decrypt.
    pub const DEC: i32 = 1;
}

/// `wsrep_allowlist_key_t`: the `key` argument of the allowlist callback.
pub mod allowlist_key {
    /// The value is the peer IP address as NUL-terminated text.
    pub const IP: i32 = 0;
    /// The value is SSL information.
    pub const SSL: i32 = 1;
}

/// `wsrep_node_isolation_mode` and `wsrep_node_isolation_result`
/// (argument and result of `wsrep_node_isolation_mode_set_v1`).
pub mod node_isolation {
    /// Mode: normal operation.
    pub const NOT_ISOLATED: i32 = 0;
    /// Mode: isolate the node from the group.
    pub const ISOLATED: i32 = 1;
    /// Mode: forcibly disconnect from the group.
    pub const FORCE_DISCONNECT: i32 = 2;

    /// Result: the mode was applied.
    pub const SUCCESS: i32 = 0;
    /// Result: the mode value was not recognised.
    pub const INVALID_VALUE: i32 = 1;
}

/// Writeset flags (`uint32_t`), used by `certify`, `to_execute_start`,
/// `apply_cb` and `preordered_commit`.
pub mod flags {
    /// The writeset ends a transaction (commit fragment).
    pub const TRX_END: u32 = 1;
    /// The writeset rolls back a (streaming) transaction.
    pub const ROLLBACK: u32 = 2;
    /// Total order isolation writeset.
    pub const ISOLATION: u32 = 4;
    /// The writeset may not be applied in parallel.
    pub const PA_UNSAFE: u32 = 8;
    /// The writeset is commutative.
    pub const COMMUTATIVE: u32 = 16;
    /// The writeset carries native (non-wsrep) data.
    pub const NATIVE: u32 = 32;
    /// The writeset starts a transaction (first fragment).
    pub const TRX_START: u32 = 64;
    /// The writeset prepares an XA transaction.
    pub const TRX_PREPARE: u32 = 128;
    /// The writeset is a snapshot.
    pub const SNAPSHOT: u32 = 256;
    /// Dependencies are implicit (the provider may not compute them).
    pub const IMPLICIT_DEPS: u32 = 512;
    /// Every defined flag bit.
    pub const MASK: u32 = 0x3FF;
}

/// Provider capability bits (`wsrep_cap_t`), returned by `capabilities` and
/// carried in `wsrep_view_info_t::capabilities`.
pub mod caps {
    /// Multi-master operation.
    pub const MULTI_MASTER: u32 = 1 << 0;
    /// Certification-based conflict detection.
    pub const CERTIFICATION: u32 = 1 << 1;
    /// Parallel applying.
    pub const PARALLEL_APPLYING: u32 = 1 << 2;
    /// Transaction replay after BF abort.
    pub const TRX_REPLAY: u32 = 1 << 3;
    /// Total order isolation.
    pub const ISOLATION: u32 = 1 << 4;
    /// `pause`/`resume`.
    pub const PAUSE: u32 = 1 << 5;
    /// Causal reads (`sync_wait`).
    pub const CAUSAL_READS: u32 = 1 << 6;
    /// Causal transactions.
    pub const CAUSAL_TRX: u32 = 1 << 7;
    /// Incremental writesets.
    pub const INCREMENTAL_WRITESET: u32 = 1 << 8;
    /// Session locks.
    pub const SESSION_LOCKS: u32 = 1 << 9;
    /// Distributed locks.
    pub const DISTRIBUTED_LOCKS: u32 = 1 << 10;
    /// Consistency checks.
    pub const CONSISTENCY_CHECK: u32 = 1 << 11;
    /// Unordered data.
    pub const UNORDERED: u32 = 1 << 12;
    /// Annotations.
    pub const ANNOTATION: u32 = 1 << 13;
    /// Preordered writesets.
    pub const PREORDERED: u32 = 1 << 14;
    /// Streaming replication.
    pub const STREAMING: u32 = 1 << 15;
    /// Snapshot writesets.
    pub const SNAPSHOT: u32 = 1 << 16;
    /// Non-blocking operations.
    pub const NBO: u32 = 1 << 17;
    /// Every defined capability bit. Higher bits trip an assertion in
    /// wsrep-lib debug builds.
    pub const ALL: u32 = (1 << 18) - 1;
}
