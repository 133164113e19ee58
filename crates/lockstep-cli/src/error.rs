//! Errors of the `lockstep` command.

use std::fmt;

/// Why a subcommand failed; printed as `lockstep: error: ...`.
#[derive(Debug)]
pub enum CliError {
    /// Starting, querying or stopping servers failed.
    Cluster(lockstep_testkit::Error),
    /// The command line asks for something that cannot be done.
    Usage(String),
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Cluster(e) => write!(f, "{e}"),
            CliError::Usage(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for CliError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CliError::Cluster(e) => Some(e),
            CliError::Usage(_) => None,
        }
    }
}

impl From<lockstep_testkit::Error> for CliError {
    fn from(e: lockstep_testkit::Error) -> Self {
        CliError::Cluster(e)
    }
}
