//! One module per subcommand.

pub mod arbitrator;
pub mod bench;
pub mod cert;
pub mod check;
pub mod check_bench;
pub mod check_config;
pub mod docs;
pub mod down;
pub mod failover_bench;
pub mod probe;
pub mod status;
pub mod up;

use std::path::PathBuf;

/// Where the local cluster lives, shared by every subcommand.
#[derive(Debug, Clone, clap::Args)]
pub struct DirArg {
    /// Cluster directory (node datadirs, logs, cluster.json).
    #[arg(long, env = "LOCKSTEP_HOME", default_value = DEFAULT_DIR)]
    pub dir: PathBuf,
}

/// The cluster directory when neither --dir nor LOCKSTEP_HOME is given.
pub const DEFAULT_DIR: &str = "/tmp/lockstep-cluster";

impl DirArg {
    /// ` --dir <dir>` when the directory is not the default, for hints.
    pub fn hint(&self) -> String {
        if self.dir == std::path::Path::new(DEFAULT_DIR) {
            String::new()
        } else {
            format!(" --dir {}", self.dir.display())
        }
    }
}
