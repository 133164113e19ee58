//! `lockstep check-config [FILE...]`: the findings of
//! [`crate::check_config::rules`] for a server's option files, one line
//! each, and an exit status for scripts: 0 without errors, 1 with errors,
//! 2 when no file could be read.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::check_config::option_files::ServerSettings;
use crate::check_config::rules::{self, Level, Machine};
use crate::error::CliError;

/// What the server reads when no file is named, in its order (Debian's
/// `/etc/mysql/my.cnf` includes conf.d and mariadb.conf.d); each that
/// exists is read.
const DEFAULT_FILES: &[&str] = &["/etc/my.cnf", "/etc/mysql/my.cnf"];

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Reads the [mysqld], [server], [mariadb], [mariadbd] and [galera] groups \
    (and their -10.11 forms), following !include and !includedir. Exit status: 0 no errors, \
    1 errors found, 2 no option file could be read."
)]
pub struct Args {
    /// Option files, in the order the server reads them (later ones win).
    /// Default: /etc/my.cnf and /etc/mysql/my.cnf, those that exist.
    files: Vec<PathBuf>,
    /// Also read the groups with this suffix, as the server's option of
    /// that name (`.1` reads `[mysqld.1]`: mtr's per-server groups).
    #[arg(long, value_name = "SUFFIX")]
    defaults_group_suffix: Option<String>,
    /// Only print errors and warnings.
    #[arg(long, short)]
    quiet: bool,
}

/// The machine the command runs on: programs on PATH (and the sbin
/// directories, where the server's scripts may live).
struct ThisMachine;

impl Machine for ThisMachine {
    fn has_program(&self, name: &str) -> bool {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .chain(["/usr/sbin", "/sbin", "/usr/bin"].map(PathBuf::from))
            .any(|dir| dir.join(name).is_file())
    }

    fn has_file(&self, path: &str) -> bool {
        Path::new(path).is_file()
    }
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    let files = if args.files.is_empty() {
        let found: Vec<PathBuf> = DEFAULT_FILES
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.is_file())
            .collect();
        if found.is_empty() {
            return Err(CliError::Usage(format!(
                "no option file given and none of {} exists",
                DEFAULT_FILES.join(", ")
            )));
        }
        found
    } else {
        args.files
    };
    let settings = ServerSettings::read_with_suffix(&files, args.defaults_group_suffix.as_deref());
    if settings.files.is_empty() {
        for (_, problem) in settings.problems.iter().chain(&settings.skipped) {
            eprintln!("lockstep check-config: {problem}");
        }
        return Ok(ExitCode::from(2));
    }
    let findings = rules::check(&settings, &ThisMachine);
    let count = |l: Level| findings.iter().filter(|f| f.level == l).count();
    for f in &findings {
        if !(args.quiet && f.level == Level::Note) {
            println!("{f}");
        }
    }
    let (errors, warnings, notes) = (
        count(Level::Error),
        count(Level::Warning),
        count(Level::Note),
    );
    let read: Vec<String> = settings
        .files
        .iter()
        .map(|f| f.display().to_string())
        .collect();
    println!(
        "{errors} errors, {warnings} warnings, {notes} notes in {}",
        read.join(", ")
    );
    Ok(if errors > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
