//! Galera-compatible provider options (`wsrep_provider_options`), contract §8
//! and §2.4/§2.5.
//!
//! * [`parse_pairs`] reads the raw `key = value; ...` syntax ([`syntax`]).
//! * [`table::TABLE`] lists every known key with default, type and runtime
//!   mutability; it is the documentation of what Lockstep accepts.
//! * [`Options`] holds the current value of every key: built with
//!   [`Options::new`], updated by [`Options::apply_initial`] (provider `init`)
//!   and [`Options::apply_runtime`] (`options_set`), printed by
//!   [`Options::to_galera_string`] (`options_get`).
//!
//! Printing: every key that has a value, sorted by name, as
//! `name = value; `. Values are printed as stored (the user's spelling), with
//! `\`, `;` and `=` escaped by a backslash so that the text always parses back
//! to the same values. Never printed: `lockstep.secret` (the cluster secret is
//! not disclosed through `SHOW VARIABLES`; because the output is fed back to
//! `options_set`, it is left out rather than masked, and leaving it out keeps
//! the stored secret), and the trigger keys `pc.bootstrap`, `evs.evict`,
//! `gmcast.peer_addr`, whose re-feeding would repeat the action.
//! `socket.ssl_reload` is printed once the provider sets it (see
//! [`Options::set`]); MariaDB's `FLUSH SSL` only reaches the provider then.

pub mod syntax;
pub mod table;
pub mod value;

#[cfg(test)]
mod tests;

use std::fmt;
use std::time::Duration;

pub use syntax::{escape, parse_pairs};
use table::{Effect, Init, Mutability, Spec, TABLE};
pub use value::{parse_bool, parse_duration, parse_float, parse_int, parse_size};

/// The key holding the cluster secret; never printed, redacted in `Debug`.
pub const SECRET_KEY: &str = "lockstep.secret";

/// Galera's default group-communication port.
pub const DEFAULT_BASE_PORT: u16 = 4567;

/// Errors from parsing or applying provider options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OptionsError {
    /// Malformed `key = value; ...` text.
    Syntax(String),
    /// Keys Lockstep does not know (all of them, in input order, no
    /// duplicates).
    Unknown(Vec<String>),
    /// A changed value for a key that cannot change at runtime.
    ReadOnly(String),
    /// A value that does not fit the key's type or range.
    BadValue {
        key: String,
        value: String,
        reason: String,
    },
}

impl OptionsError {
    /// For [`OptionsError::Unknown`]: one `Unrecognized parameter '<key>'`
    /// line per key, as Galera logs them at `init` before failing. Empty for
    /// the other variants.
    pub fn unrecognized_messages(&self) -> Vec<String> {
        match self {
            OptionsError::Unknown(keys) => keys
                .iter()
                .map(|k| format!("Unrecognized parameter '{k}'"))
                .collect(),
            _ => Vec::new(),
        }
    }
}

impl fmt::Display for OptionsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OptionsError::Syntax(msg) => write!(f, "Invalid wsrep_provider_options syntax: {msg}"),
            OptionsError::Unknown(keys) => {
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "Unknown parameter '{k}'")?;
                }
                Ok(())
            }
            OptionsError::ReadOnly(key) => write!(
                f,
                "Parameter '{key}' cannot be changed at runtime \
                 (set it in wsrep_provider_options and restart the server)"
            ),
            OptionsError::BadValue { key, value, reason } => {
                write!(f, "Bad value '{value}' for parameter '{key}': {reason}")
            }
        }
    }
}

impl std::error::Error for OptionsError {}

/// The option table: every known key with its current value (or unset).
#[derive(Clone, PartialEq, Eq)]
pub struct Options {
    /// Current value per [`TABLE`] row (same index).
    values: Vec<Option<String>>,
    /// Whether the value came from the user (init string or runtime set)
    /// rather than a default; explicit values are never re-derived.
    explicit: Vec<bool>,
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut m = f.debug_map();
        for (spec, v) in TABLE.iter().zip(&self.values) {
            if let Some(v) = v {
                if spec.name == SECRET_KEY {
                    m.entry(&spec.name, &"<hidden>");
                } else {
                    m.entry(&spec.name, v);
                }
            }
        }
        m.finish()
    }
}

/// Whether `v` is the option's default value ([`Init::Fixed`], compared as
/// typed values). An option without a fixed default has none: any value set
/// for it counts as a setting.
pub fn is_default(spec: &Spec, v: &str) -> bool {
    match spec.init {
        Init::Fixed(d) => value::same_value(spec, d, v),
        Init::Unset | Init::Derived => false,
    }
}

/// Whether Lockstep acts on the option `name` (unknown keys: false).
pub fn is_honoured(name: &str) -> bool {
    table::lookup(name).is_some_and(|s| s.effect == Effect::Honoured)
}

/// `wsrep_node_address` split into host (IPv6 in brackets) and port.
fn split_node_address(addr: &str) -> (Option<String>, Option<u16>) {
    let addr = addr.trim();
    if addr.is_empty() {
        return (None, None);
    }
    if let Some(rest) = addr.strip_prefix('[') {
        if let Some(end) = rest.find(']') {
            let host = format!("[{}]", &rest[..end]);
            let port = rest[end + 1..]
                .strip_prefix(':')
                .and_then(|p| p.parse().ok());
            return (Some(host), port);
        }
        return (Some(addr.to_string()), None);
    }
    match addr.matches(':').count() {
        0 => (Some(addr.to_string()), None),
        // host:port; an unparsable port is ignored (the default applies).
        1 => {
            let (h, p) = addr.split_once(':').unwrap_or((addr, ""));
            (Some(h.to_string()), p.parse().ok())
        }
        // Bare IPv6 address without port.
        _ => (Some(format!("[{addr}]")), None),
    }
}

fn idx(key: &str) -> Option<usize> {
    table::index_of(key)
}

fn bad_value(key: &str, value: &str, reason: String) -> OptionsError {
    OptionsError::BadValue {
        key: key.to_string(),
        value: value.to_string(),
        reason,
    }
}

impl Options {
    /// Defaults for a node. `node_address` is `wsrep_node_address` (e.g.
    /// `127.0.0.1:16001`, `[::1]:5000`, `host`, or empty); `base_host` and
    /// `base_port` derive from it (port default 4567; an unparsable port is
    /// ignored). `data_dir` (`.` if empty) becomes the `base_dir` and
    /// `gcache.dir` default.
    pub fn new(node_address: &str, data_dir: &str) -> Options {
        let mut o = Options {
            values: TABLE
                .iter()
                .map(|s| match s.init {
                    Init::Fixed(v) => Some(v.to_string()),
                    Init::Unset | Init::Derived => None,
                })
                .collect(),
            explicit: vec![false; TABLE.len()],
        };
        let (host, port) = split_node_address(node_address);
        let data_dir = if data_dir.trim().is_empty() {
            "."
        } else {
            data_dir
        };
        o.put("base_host", host);
        o.put(
            "base_port",
            Some(port.unwrap_or(DEFAULT_BASE_PORT).to_string()),
        );
        o.put("base_dir", Some(data_dir.to_string()));
        o.derive();
        o
    }

    fn put(&mut self, key: &str, value: Option<String>) {
        let i = idx(key).expect("key in table");
        self.values[i] = value;
    }

    fn is_explicit_idx(&self, key: &str) -> bool {
        idx(key).is_some_and(|i| self.explicit[i])
    }

    /// Recompute derived defaults that the user did not set explicitly.
    fn derive(&mut self) {
        if !self.is_explicit_idx("gcache.dir") {
            let dir = self.get("base_dir").map(str::to_string);
            self.put("gcache.dir", dir);
        }
        if !self.is_explicit_idx("gmcast.listen_addr") {
            let any = match self.get("base_host") {
                Some(h) if h.contains(':') => "[::]",
                _ => "0.0.0.0",
            };
            let port = self.int("base_port").unwrap_or(DEFAULT_BASE_PORT.into());
            self.put("gmcast.listen_addr", Some(format!("tcp://{any}:{port}")));
        }
    }

    /// Parse `conf` and resolve every key: unknown keys (all of them,
    /// de-duplicated) first, then the first bad value.
    fn resolve(conf: &str) -> Result<Vec<(usize, String)>, OptionsError> {
        let pairs = parse_pairs(conf)?;
        let mut unknown: Vec<String> = Vec::new();
        let mut out = Vec::with_capacity(pairs.len());
        for (k, v) in pairs {
            match idx(&k) {
                Some(i) => out.push((i, v)),
                None if !unknown.contains(&k) => unknown.push(k),
                None => {}
            }
        }
        if !unknown.is_empty() {
            return Err(OptionsError::Unknown(unknown));
        }
        for (i, v) in &out {
            let spec = &TABLE[*i];
            value::validate(spec, v).map_err(|r| bad_value(spec.name, v, r))?;
        }
        Ok(out)
    }

    /// Apply the init-time string (`wsrep_provider_options`). Every unknown
    /// key is an error and all of them are reported (log each line of
    /// [`OptionsError::unrecognized_messages`], then fail `init`). Values are
    /// type-checked; runtime mutability does not matter here. Explicit
    /// options win over values derived from the node address, and derived
    /// defaults (`gmcast.listen_addr`, `gcache.dir`) follow explicit
    /// `base_port`/`base_host`/`base_dir`. On error nothing is changed.
    pub fn apply_initial(&mut self, conf: &str) -> Result<(), OptionsError> {
        for (i, v) in Self::resolve(conf)? {
            self.values[i] = Some(v);
            self.explicit[i] = true;
        }
        self.derive();
        Ok(())
    }

    /// The options set by the user, at start or since, to something other
    /// than their default although Lockstep gives them no effect
    /// ([`Effect::NoEffect`]): the provider warns about each, naming it.
    pub fn ignored_settings(&self) -> Vec<&'static str> {
        TABLE
            .iter()
            .enumerate()
            .filter(|(i, spec)| {
                spec.effect == Effect::NoEffect
                    && self.explicit[*i]
                    && self.values[*i]
                        .as_deref()
                        .is_some_and(|v| !is_default(spec, v))
            })
            .map(|(_, spec)| spec.name)
            .collect()
    }

    /// Runtime `SET GLOBAL wsrep_provider_options` (`options_set`).
    ///
    /// * Empty or blank input is a successful no-op.
    /// * A key whose value equals the current one (textually or as the same
    ///   typed value, e.g. `128M` and `134217728`) is accepted and changes
    ///   nothing, even for read-only keys.
    /// * Unknown keys fail with [`OptionsError::Unknown`] (display:
    ///   `Unknown parameter '<key>'`); bad values with
    ///   [`OptionsError::BadValue`]; a changed value of a
    ///   [`Mutability::Static`] key (`gcache.size`, `gcache.name`,
    ///   `gcache.dir`, `repl.commit_order`, ...) with
    ///   [`OptionsError::ReadOnly`].
    /// * [`Mutability::StoredForRestart`] keys (`base_host`, `base_port`,
    ///   `base_dir`, `repl.proto_max`) are silently stored.
    /// * [`Mutability::Trigger`] keys (`socket.ssl_reload`, `pc.bootstrap`,
    ///   `evs.evict`, `gmcast.peer_addr`) are always reported as changed.
    ///
    /// The call is atomic: on error nothing is changed. On success returns the
    /// `(key, value)` pairs that changed, in input order (a key set twice
    /// appears once, with its last value), so the provider can react.
    pub fn apply_runtime(&mut self, conf: &str) -> Result<Vec<(String, String)>, OptionsError> {
        let resolved = Self::resolve(conf)?;
        let mut next = self.clone();
        let mut changes: Vec<(String, String)> = Vec::new();
        for (i, v) in resolved {
            let spec: &Spec = &TABLE[i];
            let unchanged = next.values[i]
                .as_deref()
                .is_some_and(|cur| value::same_value(spec, cur, &v));
            if unchanged && spec.mutability != Mutability::Trigger {
                continue;
            }
            if spec.mutability == Mutability::Static {
                return Err(OptionsError::ReadOnly(spec.name.to_string()));
            }
            next.values[i] = Some(v.clone());
            next.explicit[i] = true;
            match changes.iter_mut().find(|(k, _)| k == spec.name) {
                Some(c) => c.1 = v,
                None => changes.push((spec.name.to_string(), v)),
            }
        }
        *self = next;
        Ok(changes)
    }

    /// Galera's `options_get()` text: every printable key that has a value,
    /// sorted by name, each as `name = value; ` (so non-empty output ends
    /// with `"; "`). See the module docs for escaping and the keys never
    /// printed.
    pub fn to_galera_string(&self) -> String {
        let mut out = String::new();
        for (spec, v) in TABLE.iter().zip(&self.values) {
            if let (true, Some(v)) = (spec.printed, v) {
                out.push_str(spec.name);
                out.push_str(" = ");
                out.push_str(&escape(v));
                out.push_str("; ");
            }
        }
        out
    }

    /// Current value of `key` (`None` if unknown or unset). Returns
    /// `lockstep.secret` too; only printing hides it.
    pub fn get(&self, key: &str) -> Option<&str> {
        idx(key).and_then(|i| self.values[i].as_deref())
    }

    /// Whether the user set `key` explicitly (init string or runtime) rather
    /// than it holding a default.
    pub fn is_explicit(&self, key: &str) -> bool {
        self.is_explicit_idx(key)
    }

    /// Provider-internal set, bypassing runtime mutability (for values the
    /// provider learns later: `gmcast.group` = cluster name at `connect`,
    /// `ist.recv_addr` when derived, `socket.ssl_reload` = `1` when TLS is
    /// configured so that `FLUSH SSL` reaches the provider). The value is
    /// type-checked; the key does not count as explicit.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), OptionsError> {
        let i = idx(key).ok_or_else(|| OptionsError::Unknown(vec![key.to_string()]))?;
        value::validate(&TABLE[i], value).map_err(|r| bad_value(key, value, r))?;
        self.values[i] = Some(value.to_string());
        Ok(())
    }

    fn typed<T>(&self, key: &str, parse: fn(&str) -> Result<T, String>) -> Result<T, OptionsError> {
        let i = idx(key).ok_or_else(|| OptionsError::Unknown(vec![key.to_string()]))?;
        let v = self.values[i]
            .as_deref()
            .ok_or_else(|| bad_value(key, "", "parameter has no value".to_string()))?;
        parse(v).map_err(|r| bad_value(key, v, r))
    }

    /// Value of `key` as an ISO-8601 duration (`PT30S`, `PT0.5S`, `P1D`).
    pub fn duration(&self, key: &str) -> Result<Duration, OptionsError> {
        self.typed(key, parse_duration)
    }

    /// Value of `key` as a byte size (`128M`, `1G`, plain bytes).
    pub fn size(&self, key: &str) -> Result<u64, OptionsError> {
        self.typed(key, parse_size)
    }

    /// Value of `key` as a boolean (`yes/no/true/false/on/off/1/0`).
    pub fn bool(&self, key: &str) -> Result<bool, OptionsError> {
        self.typed(key, parse_bool)
    }

    /// Value of `key` as an integer (decimal, `0x` hex, `K/M/G/T` suffix).
    pub fn int(&self, key: &str) -> Result<i64, OptionsError> {
        self.typed(key, parse_int)
    }

    /// Value of `key` as a float (`0.25`).
    pub fn float(&self, key: &str) -> Result<f64, OptionsError> {
        self.typed(key, parse_float)
    }
}
