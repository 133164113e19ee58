//! Rust definitions of the **wsrep API v26** C ABI: the binary interface
//! between MariaDB (through wsrep-lib) and a replication provider loaded
//! with `wsrep_provider=`.
//!
//! This crate mirrors the v26 interface as described by the project's
//! provider contract (`docs/wsrep-provider-contract.md`, §1.4–§1.7). It is
//! written from that description for x86_64 / LP64 / System V and contains
//! only data definitions and small safe helpers, no behaviour:
//!
//! * [`consts`]: return codes, enumeration values (as modules of `i32`
//!   constants, since values coming from C must be validated), writeset
//!   [`flags`], capability bits ([`caps`]) and magic strings;
//! * [`Uuid`] and [`Gtid`] with their strict text forms;
//! * plain structs ([`Stid`], [`TrxMeta`], [`Buf`], [`WsHandle`], [`Key`],
//!   [`StatsVar`], ...);
//! * [`MemberInfo`], [`ViewInfo`] and the owned [`ViewBuffer`] for the
//!   flexible member array;
//! * [`Wsrep`] (`wsrep_t`), [`InitArgs`], the callback types and the
//!   signatures of every function pointer.
//!
//! All structs are `#[repr(C)]` with the C field order and names (except
//! `type` → `type_` and `fn` → `func`); the layout tests in
//! `tests/layout.rs` pin every size and offset. Function pointers are
//! `Option<unsafe extern "C" fn(..)>` so that NULL is representable;
//! `wsrep_bool_t` is `bool`, C enums and `int` are `i32`, `size_t` is
//! `usize`.

#![warn(missing_docs)]

pub mod consts;
pub mod provider;
pub mod types;
pub mod uuid;
pub mod view;

pub use consts::{
    allowlist_key, caps, cb_status, data_type, enc_direction, flags, key_type, log_level,
    member_status, node_isolation, status, var_type, view_status, GTID_STR_LEN, INCOMING_LEN,
    INTERFACE_VERSION, MEMBER_NAME_LEN, SEQNO_UNDEFINED, STATE_TRANSFER_NONE,
    STATE_TRANSFER_TRIVIAL, UUID_STR_LEN,
};
pub use consts::{cb_status::CbStatus, status::Status};
pub use provider::*;
pub use types::{
    Buf, EncCtx, EncIv, EncKey, Key, PoHandle, SeqCb, StaticCStr, StatsValue, StatsVar, Stid,
    TrxMeta, WsHandle,
};
pub use uuid::{Gtid, GtidParseError, Uuid, UuidParseError};
pub use view::{
    view_info_alloc_size, MemberInfo, ViewBuffer, ViewHeader, ViewInfo, VIEW_INFO_FIXED_SIZE,
};
