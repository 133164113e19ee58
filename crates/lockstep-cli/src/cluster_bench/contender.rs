//! What the benchmark compares: a provider and the settings its clusters
//! run with. `--providers lockstep,galera` gives two contenders with the
//! common my.cnf; an item may add settings after `+`, so that one run
//! compares configurations side by side, ABBA like providers:
//!
//! ```text
//! lockstep+innodb_flush_log_at_trx_commit=0+lockstep.cache_sync=yes
//! ```
//!
//! A setting whose name has a dot (`lockstep.cache_sync`, `gcs.fc_limit`)
//! is a provider option (`wsrep_provider_options`); any other is a line of
//! `[mysqld]`. The item, as written, names the contender in the report.

use std::path::PathBuf;

use lockstep_testkit::{ClusterSpec, Provider};

use super::run::lockstep_only;

/// A provider and its own settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contender {
    pub provider: Provider,
    /// The report's name: the provider's label, then `+setting` each.
    pub label: String,
    /// Appended to `wsrep_provider_options`, `;`-separated.
    pub provider_options: String,
    /// Lines appended to `[mysqld]`.
    pub mysqld: Vec<String>,
}

impl Contender {
    /// A provider with the common settings only.
    pub fn plain(provider: Provider) -> Contender {
        Contender {
            label: provider.label(),
            provider,
            provider_options: String::new(),
            mysqld: Vec::new(),
        }
    }

    /// One item of `--providers`: `lockstep`, `galera` or a library path,
    /// then `+name=value` settings. `lockstep_lib` replaces the default
    /// library of `lockstep`.
    pub fn parse(item: &str, lockstep_lib: Option<&PathBuf>) -> Result<Contender, String> {
        let mut parts = item.split('+').map(str::trim);
        let name = parts.next().unwrap_or_default();
        if name.is_empty() {
            return Err(format!("'{item}' names no provider"));
        }
        let provider = match (name, lockstep_lib) {
            ("lockstep", Some(path)) => Provider::Lockstep(path.clone()),
            _ => Provider::from_name(name),
        };
        let mut c = Contender::plain(provider);
        for setting in parts {
            let Some((key, value)) = setting.split_once('=') else {
                return Err(format!("'{setting}' in '{item}' is not name=value"));
            };
            let (key, value) = (key.trim(), value.trim());
            if key.is_empty() || value.contains(';') {
                return Err(format!("'{setting}' in '{item}' is not name=value"));
            }
            if key.contains('.') {
                if !c.provider_options.is_empty() {
                    c.provider_options.push_str("; ");
                }
                c.provider_options.push_str(&format!("{key}={value}"));
            } else {
                c.mysqld.push(format!("{key}={value}"));
            }
            c.label.push_str(&format!("+{key}={value}"));
        }
        Ok(c)
    }

    /// A cluster of `nodes` for this contender: its provider, `common`
    /// Lockstep-only options where they apply (`lockstep_only`), then its
    /// own settings, which win.
    pub fn spec(&self, nodes: usize, common_lockstep_options: &str) -> ClusterSpec {
        let common = lockstep_only(&self.provider, common_lockstep_options)
            .trim()
            .trim_matches(';');
        let options = match (common.is_empty(), self.provider_options.is_empty()) {
            (false, false) => format!("{common}; {}", self.provider_options),
            (false, true) => common.to_string(),
            _ => self.provider_options.clone(),
        };
        let mut spec = ClusterSpec::new(nodes)
            .provider(self.provider.clone())
            .provider_options(&options);
        for line in &self.mysqld {
            spec = spec.extra_mysqld(line);
        }
        spec
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_with_a_dot_are_provider_options_and_the_rest_mysqld_lines() {
        let c = Contender::parse(
            "lockstep + innodb_flush_log_at_trx_commit=0 + lockstep.cache_sync=yes",
            None,
        )
        .unwrap();
        assert_eq!(c.provider, Provider::lockstep_default());
        assert_eq!(c.provider_options, "lockstep.cache_sync=yes");
        assert_eq!(c.mysqld, ["innodb_flush_log_at_trx_commit=0"]);
        assert_eq!(
            c.label,
            "lockstep+innodb_flush_log_at_trx_commit=0+lockstep.cache_sync=yes"
        );
        let plain = Contender::parse("galera", None).unwrap();
        assert_eq!(plain, Contender::plain(Provider::Galera));
    }

    #[test]
    fn a_setting_that_is_not_name_value_is_refused() {
        for bad in [
            "lockstep+flush",
            "+a=b",
            "galera+=1",
            "lockstep+a.b=1;c.d=2",
        ] {
            assert!(Contender::parse(bad, None).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_contender_s_own_options_follow_the_common_ones() {
        let c = Contender::parse("lockstep+gcs.fc_limit=64", None).unwrap();
        let g = Contender::parse("galera+gcs.fc_limit=32", None).unwrap();
        // Only the cluster spec knows its options; its Debug form shows them.
        let shown = format!("{:?}", c.spec(3, "lockstep.commit_bypass=64M"));
        assert!(
            shown.contains("lockstep.commit_bypass=64M; gcs.fc_limit=64"),
            "{shown}"
        );
        let shown = format!("{:?}", g.spec(3, "lockstep.commit_bypass=64M"));
        assert!(!shown.contains("commit_bypass"), "{shown}");
        assert!(shown.contains("gcs.fc_limit=32"), "{shown}");
    }
}
