//! Which wsrep provider library the servers load.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Where Debian's galera-4 package installs the Galera provider.
pub const GALERA_PATH: &str = "/usr/lib/galera/libgalera_smm.so";

/// The environment variable a run sets to `1` to let tests whose
/// dependency is missing (the Galera package) pass as skipped. CI never sets
/// it: there a missing dependency fails the test.
pub const ALLOW_SKIP_ENV: &str = "LOCKSTEP_ALLOW_SKIP";

/// Whether Galera 4 is installed. When it is not, a test that needs it
/// fails with a message saying how to install it, unless the run opted in
/// to skipping with `LOCKSTEP_ALLOW_SKIP=1`; then this prints "skipped" and
/// returns false, and the caller returns early.
#[track_caller]
pub fn require_galera(test: &str) -> bool {
    if Path::new(GALERA_PATH).is_file() {
        return true;
    }
    if std::env::var(ALLOW_SKIP_ENV).is_ok_and(|v| v == "1") {
        eprintln!("{test}: SKIPPED ({GALERA_PATH} missing; {ALLOW_SKIP_ENV}=1 allows the skip)");
        return false;
    }
    panic!(
        "{test} needs Galera 4 ({GALERA_PATH}), which is missing: run scripts/setup.sh \
         (apt-get install galera-4), or set {ALLOW_SKIP_ENV}=1 to skip such tests knowingly"
    );
}

/// File name of our provider as cargo builds it.
pub const LOCKSTEP_LIB: &str = "liblockstep.so";

/// The wsrep provider a cluster runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Provider {
    /// Our library at the given path.
    Lockstep(PathBuf),
    /// Galera 4 from the galera-4 package, the reference.
    Galera,
    /// Any other provider library.
    Path(PathBuf),
}

impl Provider {
    /// Our library: `$LOCKSTEP_PROVIDER` if set, else `target/release/liblockstep.so`
    /// of the workspace this code was built in (found from the running
    /// executable's location, then from the testkit's source location).
    /// The path is checked when a cluster starts, not here.
    pub fn lockstep_default() -> Provider {
        if let Some(p) = std::env::var_os("LOCKSTEP_PROVIDER").filter(|p| !p.is_empty()) {
            return Provider::Lockstep(PathBuf::from(p));
        }
        let candidates = lockstep_candidates();
        let found = candidates.iter().find(|p| p.is_file()).cloned();
        Provider::Lockstep(found.unwrap_or_else(|| candidates[candidates.len() - 1].clone()))
    }

    /// Parses a name as the CLI and test environments spell it:
    /// `lockstep`, `galera`, or a path to a `.so`.
    pub fn from_name(name: &str) -> Provider {
        match name {
            "lockstep" => Provider::lockstep_default(),
            "galera" => Provider::Galera,
            other => Provider::Path(PathBuf::from(other)),
        }
    }

    /// The provider selected by `$LOCKSTEP_TEST_PROVIDER` (same spelling as
    /// [`Provider::from_name`]), defaulting to our library.
    pub fn from_env() -> Provider {
        match std::env::var("LOCKSTEP_TEST_PROVIDER") {
            Ok(name) if !name.is_empty() => Provider::from_name(&name),
            _ => Provider::lockstep_default(),
        }
    }

    /// The library path as configured (not yet resolved or copied).
    pub fn path(&self) -> PathBuf {
        match self {
            Provider::Lockstep(p) | Provider::Path(p) => p.clone(),
            Provider::Galera => PathBuf::from(GALERA_PATH),
        }
    }

    /// A short name for logs and reports.
    pub fn label(&self) -> String {
        match self {
            Provider::Lockstep(_) => "lockstep".into(),
            Provider::Galera => "galera".into(),
            Provider::Path(p) => p.display().to_string(),
        }
    }

    /// The absolute path of an existing library, or [`Error::ProviderMissing`].
    pub(crate) fn resolve(&self) -> Result<PathBuf> {
        let path = self.path();
        if path.is_file() {
            return std::path::absolute(&path)
                .map_err(|e| Error::io(format!("resolving {}", path.display()), e));
        }
        let tried = match self {
            Provider::Lockstep(_) if std::env::var_os("LOCKSTEP_PROVIDER").is_none() => {
                let mut t = lockstep_candidates();
                if !t.contains(&path) {
                    t.push(path);
                }
                t
            }
            _ => vec![path],
        };
        Err(Error::ProviderMissing { tried })
    }
}

/// Places where `cargo build --release` leaves liblockstep.so, best first.
fn lockstep_candidates() -> Vec<PathBuf> {
    let mut out = Vec::new();
    // A test or binary runs from <target>/<profile>/[deps/]name: its target dir
    // also holds release/ (CARGO_TARGET_DIR is honoured this way).
    if let Ok(exe) = std::env::current_exe() {
        if let Some(target) = exe.ancestors().find(|a| is_target_dir(a)) {
            out.push(target.join("release").join(LOCKSTEP_LIB));
        }
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let p = workspace.join("target/release").join(LOCKSTEP_LIB);
    let p = normalize(&p);
    if !out.contains(&p) {
        out.push(p);
    }
    out
}

fn is_target_dir(dir: &Path) -> bool {
    dir.join("CACHEDIR.TAG").is_file() || dir.file_name().is_some_and(|n| n == "target")
}

fn normalize(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| {
        // The file may not exist yet: canonicalize the directory part only.
        let mut dir = p.to_path_buf();
        let mut tail = Vec::new();
        while !dir.exists() {
            match (dir.file_name().map(|n| n.to_owned()), dir.parent()) {
                (Some(n), Some(parent)) => {
                    tail.push(n);
                    dir = parent.to_path_buf();
                }
                _ => return p.to_path_buf(),
            }
        }
        let mut base = dir.canonicalize().unwrap_or(dir);
        for n in tail.into_iter().rev() {
            base.push(n);
        }
        base
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_providers() {
        assert_eq!(Provider::from_name("galera"), Provider::Galera);
        assert_eq!(
            Provider::from_name("/x/y.so"),
            Provider::Path(PathBuf::from("/x/y.so"))
        );
        assert!(matches!(
            Provider::from_name("lockstep"),
            Provider::Lockstep(_)
        ));
    }

    #[test]
    fn default_lockstep_path_ends_in_release_lib() {
        let p = lockstep_candidates();
        assert!(
            p.iter().all(|p| p.ends_with("release/liblockstep.so")),
            "{p:?}"
        );
    }

    #[test]
    fn missing_provider_names_what_was_tried() {
        let e = Provider::Path("/nonexistent/x.so".into())
            .resolve()
            .unwrap_err();
        assert!(e.to_string().contains("/nonexistent/x.so"), "{e}");
    }
}
