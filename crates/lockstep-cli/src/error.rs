//! Errors of the `lockstep` command.

use std::fmt;

/// Why a subcommand failed; printed as `lockstep: error: ...`.
#[derive(Debug)]
pub enum CliError {
    /// Starting, querying or stopping servers failed.
    Cluster(lockstep_testkit::Error),
    /// The command line asks for something that cannot be done.
    Usage(String),
    /// `lockstep check` could not run.
    Check(crate::check::CheckError),
    /// `lockstep probe` could not run.
    Probe(crate::probe::ProbeError),
    /// `lockstep check-bench` could not run.
    Bench(crate::bench::BenchError),
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Cluster(e) => write!(f, "{e}"),
            CliError::Usage(m) => write!(f, "{m}"),
            CliError::Check(e) => write!(f, "{e}"),
            CliError::Probe(e) => write!(f, "{e}"),
            CliError::Bench(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for CliError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CliError::Cluster(e) => Some(e),
            CliError::Usage(_) => None,
            CliError::Check(e) => Some(e),
            CliError::Probe(e) => Some(e),
            CliError::Bench(e) => Some(e),
        }
    }
}

impl From<lockstep_testkit::Error> for CliError {
    fn from(e: lockstep_testkit::Error) -> Self {
        CliError::Cluster(e)
    }
}

impl From<crate::check::CheckError> for CliError {
    fn from(e: crate::check::CheckError) -> Self {
        CliError::Check(e)
    }
}

impl From<crate::probe::ProbeError> for CliError {
    fn from(e: crate::probe::ProbeError) -> Self {
        CliError::Probe(e)
    }
}

impl From<crate::bench::BenchError> for CliError {
    fn from(e: crate::bench::BenchError) -> Self {
        CliError::Bench(e)
    }
}
