//! The provider options (`wsrep_provider_options`) and the typed values
//! the hot paths read, changed at runtime by `options_set`.
//!
//! Lock rule: the options lock and the provider's state lock are never
//! held together (a thread in `options_set` that took the state lock
//! under the options lock would deadlock against one that reads an
//! option under the state lock). Here that is structure, not a comment:
//! the locks are private to this module, no guard leaves it (readers get
//! an `Arc` snapshot, `Tunables` by copy), and this module has no path to
//! the provider's state.

use crate::log::info;
use lockstep_core::flow_control::Limits;
use lockstep_core::options::{Options, OptionsError};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

pub struct Settings {
    current: RwLock<Arc<Options>>,
    tunables: RwLock<Tunables>,
    /// Serialises runtime changes (each starts from the one before) and
    /// numbers them.
    writer: Mutex<u64>,
    /// Whether the server writes a binary log (`None`: unknown), which
    /// decides the default of `lockstep.commit_bypass`.
    server_binlog: Option<bool>,
}

/// A runtime change that was applied.
pub struct Applied {
    /// The keys that changed, with their new values.
    pub changed: Vec<(String, String)>,
    pub tunables: Tunables,
    pub limits: Limits,
    /// Its number among runtime changes: the state takes the values of a
    /// change only if it has not taken a later one (two `options_set`
    /// calls may reach the state lock in either order).
    pub generation: u64,
}

impl Settings {
    pub fn new(options: Options, server_binlog: Option<bool>) -> Settings {
        let tunables = Tunables::from_options(&options, server_binlog);
        Settings {
            current: RwLock::new(Arc::new(options)),
            tunables: RwLock::new(tunables),
            writer: Mutex::new(0),
            server_binlog,
        }
    }

    /// The options as they are now. A snapshot: a change made meanwhile
    /// shows in the next one.
    pub fn options(&self) -> Arc<Options> {
        Arc::clone(&self.current.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// The option values hot paths read, without parsing text.
    pub fn tunables(&self) -> Tunables {
        *self.tunables.read().unwrap_or_else(|p| p.into_inner())
    }

    /// `wsrep_provider_options` as Galera prints it.
    pub fn galera_string(&self) -> String {
        self.options().to_galera_string()
    }

    /// Applies `options_set`'s `conf`: all of it or, on an error, none.
    pub fn apply_runtime(&self, conf: &str) -> Result<Applied, OptionsError> {
        let mut generation = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let mut next = Options::clone(&self.options());
        let changed = next.apply_runtime(conf)?;
        let tunables = Tunables::from_options(&next, self.server_binlog);
        let limits = Limits::from_options(&next);
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(next);
        *self.tunables.write().unwrap_or_else(|p| p.into_inner()) = tunables;
        *generation += 1;
        Ok(Applied {
            changed,
            tunables,
            limits,
            generation: *generation,
        })
    }
}

/// `repl.max_ws_size` default (Galera): 2 GiB - 1.
const DEFAULT_MAX_WS_SIZE: u64 = 2_147_483_647;
const DEFAULT_CAUSAL_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Option values read per key or per statement, parsed once whenever the
/// options change instead of on every `append_key` or causal read.
#[derive(Debug, Clone, Copy)]
pub struct Tunables {
    pub max_ws_size: u64,
    pub causal_read_timeout: Duration,
    /// `gcs.recv_q_hard_limit`, bytes; `None` at Galera's default
    /// (`LLONG_MAX`), which means no limit.
    pub recv_q_hard_limit: Option<u64>,
    /// `lockstep.commit_bypass`, bytes (0: never): local transactions
    /// that do not depend on a remote writeset at least this big may
    /// commit before it (ADR 0011).
    pub commit_bypass: u64,
}

impl Tunables {
    /// The typed values of `options`; the defaults stand in for a value
    /// that does not parse (the option table validates values on set).
    /// `server_binlog`: whether the server writes a binary log (`None`:
    /// unknown), for the default of `lockstep.commit_bypass`.
    pub(crate) fn from_options(options: &Options, server_binlog: Option<bool>) -> Tunables {
        Tunables {
            max_ws_size: options
                .size("repl.max_ws_size")
                .unwrap_or(DEFAULT_MAX_WS_SIZE),
            causal_read_timeout: options
                .duration("repl.causal_read_timeout")
                .unwrap_or(DEFAULT_CAUSAL_READ_TIMEOUT),
            recv_q_hard_limit: options
                .size("gcs.recv_q_hard_limit")
                .ok()
                .filter(|v| *v < i64::MAX as u64),
            commit_bypass: commit_bypass(options, server_binlog),
        }
    }
}

/// Whether `repl.commit_order` lets local transactions commit out of
/// order. Galera's values: 3 (the default) no out-of-order commit, 2 local
/// transactions only, 1 any, 0 no commit order at all. Lockstep's bypass
/// is the local kind; 0 and 1 allow it too, and nothing looser.
fn commit_order_allows_bypass(options: &Options) -> bool {
    options.int("repl.commit_order").unwrap_or(3) < 3
}

/// `lockstep.commit_bypass` in effect (ADR 0011). Off in strict commit
/// order (`repl.commit_order=3`, the default): a whole-cluster crash
/// inside a bypass window could cost an acknowledged commit (issue 34).
/// Otherwise, set explicitly, it is what it says; by default it is on
/// (64M) only where the server is known to write no binary log: a binlog
/// records commits in commit order, and with `wsrep_gtid_mode` its GTIDs
/// must name the same transactions on every node, which a local
/// transaction committing ahead would break.
fn commit_bypass(options: &Options, server_binlog: Option<bool>) -> u64 {
    if !commit_order_allows_bypass(options) {
        return 0;
    }
    let value = options.size("lockstep.commit_bypass").unwrap_or(0);
    if options.is_explicit("lockstep.commit_bypass") || server_binlog == Some(false) {
        value
    } else {
        0
    }
}

pub(crate) fn log_commit_bypass(options: &Options, server_binlog: Option<bool>, bytes: u64) {
    if !commit_order_allows_bypass(options) {
        if options.is_explicit("lockstep.commit_bypass") {
            info!(
                "commit bypass off: repl.commit_order=3 (strict commit order, the default) \
                 overrides lockstep.commit_bypass; set repl.commit_order=2 to let local \
                 transactions commit ahead of large writesets"
            );
        }
        return;
    }
    if options.is_explicit("lockstep.commit_bypass") {
        return;
    }
    match (server_binlog, bytes) {
        (Some(false), b) if b > 0 => info!(
            "commit bypass on for writesets of {} MiB or more (lockstep.commit_bypass): \
             local transactions that do not depend on such a writeset commit before its apply \
             ends; set lockstep.commit_bypass=0 for strict commit order",
            b >> 20
        ),
        (Some(true), _) => info!(
            "commit bypass off: this server writes a binary log, which must follow the commit \
             order (set lockstep.commit_bypass to override)"
        ),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_shows_in_the_next_snapshot_and_a_bad_one_in_none() {
        let dir = tempfile::tempdir().unwrap();
        let s = Settings::new(
            Options::new("127.0.0.1", &dir.path().to_string_lossy()),
            None,
        );
        let before = s.options();
        let applied = s.apply_runtime("repl.max_ws_size=100").unwrap();
        assert_eq!(applied.tunables.max_ws_size, 100);
        let next = s.apply_runtime("repl.max_ws_size=100").unwrap();
        assert!(next.generation > applied.generation);
        assert_eq!(s.tunables().max_ws_size, 100);
        assert_ne!(before.size("repl.max_ws_size").unwrap(), 100, "a snapshot");
        assert_eq!(s.options().size("repl.max_ws_size").unwrap(), 100);
        assert!(s
            .apply_runtime("repl.max_ws_size=200;no.such.option=1")
            .is_err());
        assert_eq!(s.tunables().max_ws_size, 100, "all or nothing");
        assert_eq!(s.options().size("repl.max_ws_size").unwrap(), 100);
    }
}
