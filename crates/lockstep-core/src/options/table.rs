//! The table of every provider option Lockstep knows, with its default, its
//! value type and whether it may change at runtime.
//!
//! This file is meant to be read as documentation: one row per key, sorted by
//! name (the order `options_get()` prints in; a unit test checks it).
//! Defaults follow contract §8.5 (Galera 26.4). Keys whose default is
//! [`Init::Unset`] have no value and are not printed until someone sets them.
//! Keys whose default is [`Init::Derived`] are computed by
//! [`Options::new`](super::Options::new) from `wsrep_node_address` and the
//! data directory:
//!
//! * `base_host`: host part of the node address (IPv6 kept in brackets);
//! * `base_port`: port part of the node address, else `4567`;
//! * `base_dir`, `gcache.dir`: the data directory (`.` if empty);
//! * `gmcast.listen_addr`: `tcp://0.0.0.0:<base_port>` (`tcp://[::]:<base_port>`
//!   when `base_host` is an IPv6 address).
//!
//! Hidden Galera keys (`cert.max_length`, `cert.length_check`,
//! `ist.keep_keys`) are accepted but unset by default, so they are printed only
//! once set. The debug-build-only keys `dbug` and `signal` (contract §8.7) are
//! deliberately absent: Lockstep behaves like a release build and rejects them
//! as unknown.

/// The value type of an option. Values are validated against it when set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// ISO-8601 duration (`PT30S`, `PT0.5S`, `P1D`) or plain seconds.
    Duration,
    /// Byte count with optional `K`/`M`/`G`/`T` suffix (powers of 1024).
    Size,
    /// `yes/no/true/false/on/off/1/0`, case-insensitive.
    Bool,
    /// Signed integer, decimal or `0x` hex, optional `K`/`M`/`G`/`T` suffix.
    Int,
    /// Decimal floating-point number.
    Float,
    /// Free text (addresses, paths, names).
    Str,
}

/// Whether and how an option may change after `init`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutability {
    /// May change at runtime; the provider reacts to the new value.
    Dynamic,
    /// Fixed after `init`: a changed value at runtime fails (Galera: `EPERM`).
    /// Setting the current value again is accepted as a no-op.
    Static,
    /// A changed value at runtime is silently stored for the next start and
    /// has no effect now (Galera does this for `base_*` and `repl.proto_max`).
    StoredForRestart,
    /// An action rather than a setting: every runtime set is reported as a
    /// change, even when the value equals the stored one
    /// (`socket.ssl_reload`, `pc.bootstrap`, `evs.evict`, `gmcast.peer_addr`).
    Trigger,
}

/// Default value of an option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Init {
    /// No value; not printed until set.
    Unset,
    /// A fixed default, printed exactly like this.
    Fixed(&'static str),
    /// Computed from the node address / data directory (see module docs).
    Derived,
}

/// What Lockstep does with an option. Every key is in exactly one of two
/// states, listed in README.md (generated from this table by
/// `make options-doc`; a unit test fails when the two drift apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Lockstep does what the option says, at start and, when the option is
    /// [`Mutability::Dynamic`] or a [`Mutability::Trigger`], at runtime.
    Honoured,
    /// Accepted so that an existing Galera my.cnf keeps working, with no
    /// effect. Setting it to a value other than its default, at start or at
    /// runtime, logs one warning naming the option.
    NoEffect,
}

/// Extra validation on top of [`Kind`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Check {
    /// Nothing beyond the kind.
    None,
    /// Integer range, inclusive (for [`Kind::Int`]).
    Range(i64, i64),
    /// Float range, inclusive (for [`Kind::Float`]).
    FloatRange(f64, f64),
    /// One of these words, compared case-insensitively (for [`Kind::Str`]).
    OneOf(&'static [&'static str]),
    /// `auto` or a size (socket buffer sizes).
    AutoOrSize,
}

/// One row of the table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spec {
    /// The key, case-sensitive, exactly as Galera spells it.
    pub name: &'static str,
    /// Default value.
    pub init: Init,
    /// Value type.
    pub kind: Kind,
    /// Runtime mutability.
    pub mutability: Mutability,
    /// Extra validation.
    pub check: Check,
    /// Honoured, or accepted with no effect.
    pub effect: Effect,
    /// Whether `options_get()` prints the value when set. Only false for
    /// `lockstep.secret` (never disclosed) and for trigger keys whose re-feeding
    /// through `options_set` would repeat the action (`pc.bootstrap`,
    /// `evs.evict`, `gmcast.peer_addr`).
    pub printed: bool,
}

impl Spec {
    const fn new(name: &'static str, init: Init, kind: Kind, mutability: Mutability) -> Spec {
        Spec {
            name,
            init,
            kind,
            mutability,
            check: Check::None,
            effect: Effect::NoEffect,
            printed: true,
        }
    }

    /// Marks an option Lockstep acts on (the default is [`Effect::NoEffect`],
    /// so that nothing is claimed that the code does not do).
    const fn honoured(mut self) -> Spec {
        self.effect = Effect::Honoured;
        self
    }

    const fn check(mut self, check: Check) -> Spec {
        self.check = check;
        self
    }

    const fn not_printed(mut self) -> Spec {
        self.printed = false;
        self
    }
}

use Init::{Derived, Fixed, Unset};
use Kind::{Bool, Duration, Float, Int, Size, Str};
use Mutability::{Dynamic, Static, StoredForRestart, Trigger};

const fn o(name: &'static str, init: Init, kind: Kind, m: Mutability) -> Spec {
    Spec::new(name, init, kind, m)
}

const BYTE: Check = Check::Range(0, 255);
const NON_NEG: Check = Check::Range(0, i64::MAX);
const POSITIVE: Check = Check::Range(1, i64::MAX);
const FRACTION: Check = Check::FloatRange(0.0, 1.0);

/// Every known option, sorted by name (byte order).
#[rustfmt::skip]
pub const TABLE: &[Spec] = &[
    //  name                             default                       kind      mutability
    o("base_dir",                      Derived,                      Str,      StoredForRestart),
    o("base_host",                     Derived,                      Str,      StoredForRestart).honoured(),
    o("base_port",                     Derived,                      Int,      StoredForRestart).check(Check::Range(0, 65535)).honoured(),
    o("cert.length_check",             Unset,                        Bool,     Dynamic),   // hidden in Galera
    o("cert.log_conflicts",            Fixed("no"),                  Bool,     Dynamic),
    o("cert.max_length",               Unset,                        Int,      Dynamic).check(NON_NEG), // hidden
    o("cert.optimistic_pa",            Fixed("yes"),                 Bool,     Dynamic),
    o("debug",                         Fixed("no"),                  Bool,     Dynamic),
    o("evs.auto_evict",                Fixed("0"),                   Int,      Dynamic).check(NON_NEG),
    o("evs.causal_keepalive_period",   Fixed("PT1S"),                Duration, Dynamic),
    o("evs.debug_log_mask",            Fixed("0x1"),                 Int,      Dynamic),
    o("evs.delay_margin",              Fixed("PT1S"),                Duration, Dynamic),
    o("evs.delayed_keep_period",       Fixed("PT30S"),               Duration, Dynamic),
    o("evs.evict",                     Unset,                        Str,      Trigger).not_printed(), // member UUID
    o("evs.inactive_check_period",     Fixed("PT0.5S"),              Duration, Dynamic),
    o("evs.inactive_timeout",          Fixed("PT15S"),               Duration, Dynamic).honoured(),   // declare a peer dead
    o("evs.info_log_mask",             Fixed("0"),                   Int,      Dynamic),
    o("evs.install_timeout",           Fixed("PT7.5S"),              Duration, Dynamic),
    o("evs.join_retrans_period",       Fixed("PT1S"),                Duration, Dynamic),
    o("evs.keepalive_period",          Fixed("PT1S"),                Duration, Dynamic).honoured(),   // the idle heartbeat pace
    o("evs.max_install_timeouts",      Fixed("3"),                   Int,      Dynamic).check(NON_NEG),
    o("evs.send_window",               Fixed("4"),                   Int,      Dynamic).check(POSITIVE),
    o("evs.stats_report_period",       Fixed("PT1M"),                Duration, Dynamic),
    o("evs.suspect_timeout",           Fixed("PT5S"),                Duration, Dynamic).honoured(),   // suspect a peer
    o("evs.use_aggregate",             Fixed("true"),                Bool,     Static),
    o("evs.user_send_window",          Fixed("2"),                   Int,      Dynamic).check(POSITIVE),
    o("evs.version",                   Fixed("1"),                   Int,      Static).check(Check::Range(0, 1)),
    o("evs.view_forget_timeout",       Fixed("P1D"),                 Duration, Dynamic),
    o("gcache.dir",                    Derived,                      Str,      Static).honoured(),
    o("gcache.keep_pages_size",        Fixed("0"),                   Size,     Dynamic),
    o("gcache.mem_size",               Fixed("0"),                   Size,     Dynamic),   // deprecated
    o("gcache.name",                   Fixed("galera.cache"),        Str,      Static).honoured(),
    o("gcache.page_size",              Fixed("128M"),                Size,     Dynamic),
    o("gcache.recover",                Fixed("yes"),                 Bool,     Static).honoured(),
    o("gcache.size",                   Fixed("128M"),                Size,     Static).honoured(),
    o("gcomm.thread_prio",             Fixed(""),                    Str,      Static),    // e.g. "rr:2"
    o("gcs.fc_debug",                  Fixed("0"),                   Int,      Dynamic).check(NON_NEG),
    o("gcs.fc_factor",                 Fixed("1.0"),                 Float,    Dynamic).check(FRACTION).honoured(),
    o("gcs.fc_limit",                  Fixed("16"),                  Int,      Dynamic).check(NON_NEG).honoured(),
    o("gcs.fc_master_slave",           Fixed("no"),                  Bool,     Static).honoured(),    // deprecated
    o("gcs.fc_single_primary",         Fixed("no"),                  Bool,     Static).honoured(),
    o("gcs.max_packet_size",           Fixed("64500"),               Int,      Dynamic).check(POSITIVE),
    o("gcs.max_throttle",              Fixed("0.25"),                Float,    Dynamic).check(FRACTION),
    o("gcs.recv_q_hard_limit",         Fixed("9223372036854775807"), Size,     Dynamic).honoured(),
    o("gcs.recv_q_soft_limit",         Fixed("0.25"),                Float,    Dynamic).check(FRACTION),
    o("gcs.stateless",                 Unset,                        Bool,     Static).honoured(),    // 26.4.23
    o("gcs.sync_donor",                Fixed("no"),                  Bool,     Dynamic),
    o("gcs.vote_policy",               Unset,                        Int,      Dynamic).check(BYTE), // 26.4.23
    o("gmcast.group",                  Unset,                        Str,      Static),    // cluster name
    o("gmcast.isolate",                Fixed("0"),                   Int,      Dynamic).check(Check::Range(0, 2)).honoured(),
    o("gmcast.listen_addr",            Derived,                      Str,      Static).honoured(),
    o("gmcast.mcast_addr",             Fixed(""),                    Str,      Static),
    o("gmcast.mcast_port",             Unset,                        Int,      Static).check(Check::Range(0, 65535)),
    o("gmcast.mcast_ttl",              Fixed("1"),                   Int,      Static).check(BYTE),
    o("gmcast.mira",                   Unset,                        Int,      Static).check(NON_NEG),
    o("gmcast.peer_addr",              Unset,                        Str,      Trigger).not_printed(),
    o("gmcast.peer_timeout",           Fixed("PT3S"),                Duration, Static),
    o("gmcast.segment",                Fixed("0"),                   Int,      Static).check(BYTE).honoured(),  // donors, relays, the leader's site (ADR 0020)
    o("gmcast.time_wait",              Fixed("PT5S"),                Duration, Static),
    o("gmcast.version",                Fixed("0"),                   Int,      Static),
    o("ist.keep_keys",                 Unset,                        Bool,     Dynamic),   // hidden
    o("ist.recv_addr",                 Unset,                        Str,      Static).honoured(),    // provider derives it when unset
    o("ist.recv_bind",                 Unset,                        Str,      Static).honoured(),
    o("lockstep.cache_sync",           Fixed("no"),                  Bool,     Static).honoured(),    // fsync the writeset cache per batch (ADR 0026)
    o("lockstep.commit_bypass",        Fixed("64M"),               Size,     Dynamic).honoured(),   // provider: only with repl.commit_order<3 and no binlog
    o("lockstep.force_bootstrap",      Fixed("no"),                  Bool,     Dynamic).honoured(),   // pc.bootstrap even where acknowledged commits may be missing (ADR 0027)
    o("lockstep.leave_galera_cache",   Fixed("no"),                  Bool,     Dynamic).honoured(),   // at a clean stop, the writeset cache in Galera's format (switching back, ADR 0028)
    o("lockstep.raft_tick",            Fixed("PT0.05S"),              Duration, Static).honoured(),
    o("lockstep.secret",               Unset,                        Str,      Static).not_printed(),
    o("pc.announce_timeout",           Fixed("PT3S"),                Duration, Static),
    o("pc.bootstrap",                  Unset,                        Bool,     Trigger).not_printed().honoured(),
    o("pc.checksum",                   Fixed("false"),               Bool,     Static),
    o("pc.ignore_quorum",              Fixed("false"),               Bool,     Dynamic).honoured(),
    o("pc.ignore_sb",                  Fixed("false"),               Bool,     Dynamic).honoured(),
    o("pc.linger",                     Fixed("PT20S"),               Duration, Static),
    o("pc.npvo",                       Fixed("false"),               Bool,     Static),
    o("pc.recovery",                   Fixed("true"),                Bool,     Static).honoured(),
    o("pc.version",                    Fixed("0"),                   Int,      Static),
    o("pc.wait_prim",                  Fixed("true"),                Bool,     Static),
    o("pc.wait_prim_timeout",          Fixed("PT30S"),               Duration, Static).honoured(),
    o("pc.weight",                     Fixed("1"),                   Int,      Dynamic).check(BYTE).honoured(),
    o("protonet.backend",              Fixed("asio"),                Str,      Static).check(Check::OneOf(&["asio"])),
    o("protonet.version",              Fixed("0"),                   Int,      Static),
    o("repl.causal_read_timeout",      Fixed("PT30S"),               Duration, Dynamic).honoured(),
    o("repl.commit_order",             Fixed("3"),                   Int,      Static).check(Check::Range(0, 3)).honoured(),  // 3 strict; 0-2 allow the commit bypass (ADR 0011)
    o("repl.key_format",               Fixed("FLAT8"),               Str,      Dynamic)
        .check(Check::OneOf(&["FLAT8", "FLAT8A", "FLAT16", "FLAT16A"])),
    o("repl.max_ws_size",              Fixed("2147483647"),          Int,      Dynamic).check(NON_NEG).honoured(),
    o("repl.proto_max",                Fixed("11"),                  Int,      StoredForRestart).check(POSITIVE),
    o("socket.checksum",               Fixed("2"),                   Int,      Static).check(Check::Range(0, 2)),
    o("socket.dynamic",                Unset,                        Bool,     Static).honoured(),
    o("socket.non_blocking",           Unset,                        Bool,     Static),
    o("socket.recv_buf_size",          Fixed("auto"),                Str,      Static).check(Check::AutoOrSize),
    o("socket.send_buf_size",          Fixed("auto"),                Str,      Static).check(Check::AutoOrSize),
    o("socket.ssl",                    Unset,                        Bool,     Static).honoured(),
    o("socket.ssl_ca",                 Unset,                        Str,      Static).honoured(),
    o("socket.ssl_cert",               Unset,                        Str,      Static).honoured(),
    o("socket.ssl_cipher",             Unset,                        Str,      Static).honoured(),
    o("socket.ssl_compression",        Unset,                        Bool,     Static),
    o("socket.ssl_key",                Unset,                        Str,      Static).honoured(),
    o("socket.ssl_password_file",      Unset,                        Str,      Static).honoured(),
    o("socket.ssl_reload",             Unset,                        Str,      Trigger).honoured(),
];

/// The README's option section: which options are honoured and which are
/// accepted with no effect, generated from [`TABLE`] so it cannot drift
/// (`make options-doc` rewrites it; a unit test compares).
pub fn readme_section() -> String {
    let list = |effect: Effect| {
        let names: Vec<String> = TABLE
            .iter()
            .filter(|s| s.effect == effect)
            .map(|s| format!("`{}`", s.name))
            .collect();
        (names.len(), names.join(", "))
    };
    let (n_honoured, honoured) = list(Effect::Honoured);
    let (n_ignored, ignored) = list(Effect::NoEffect);
    format!(
        "**Honoured** ({n_honoured}): {honoured}.\n\n\
         **Accepted for compatibility, with no effect** ({n_ignored}): {ignored}. \
         Setting one of these to a value other than its default, in my.cnf or with \
         `SET GLOBAL wsrep_provider_options`, logs a note naming it.\n"
    )
}

/// Index of `name` in [`TABLE`] (exact, case-sensitive match).
pub fn index_of(name: &str) -> Option<usize> {
    TABLE.binary_search_by(|s| s.name.cmp(name)).ok()
}

/// The row for `name`, if Lockstep knows the key.
pub fn lookup(name: &str) -> Option<&'static Spec> {
    index_of(name).map(|i| &TABLE[i])
}
