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

use crate::provider::Tunables;
use lockstep_core::flow_control::Limits;
use lockstep_core::options::{Options, OptionsError};
use std::sync::{Arc, Mutex, RwLock};

pub struct Settings {
    current: RwLock<Arc<Options>>,
    tunables: RwLock<Tunables>,
    /// Serialises runtime changes: each starts from the one before.
    writer: Mutex<()>,
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
}

impl Settings {
    pub fn new(options: Options, server_binlog: Option<bool>) -> Settings {
        let tunables = Tunables::from_options(&options, server_binlog);
        Settings {
            current: RwLock::new(Arc::new(options)),
            tunables: RwLock::new(tunables),
            writer: Mutex::new(()),
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
        let _writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let mut next = Options::clone(&self.options());
        let changed = next.apply_runtime(conf)?;
        let tunables = Tunables::from_options(&next, self.server_binlog);
        let limits = Limits::from_options(&next);
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(next);
        *self.tunables.write().unwrap_or_else(|p| p.into_inner()) = tunables;
        Ok(Applied {
            changed,
            tunables,
            limits,
        })
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
