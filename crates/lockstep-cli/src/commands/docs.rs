//! `lockstep completions <shell>` and the hidden `lockstep man --out DIR`:
//! shell completions and man pages generated from the clap definitions, so
//! they can never disagree with the command line (`make deb` installs both).

use std::path::PathBuf;
use std::process::ExitCode;

use clap_complete::Shell;

use crate::error::CliError;

#[derive(Debug, clap::Args)]
pub struct CompletionArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: Shell,
}

#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Directory to write `lockstep.1` and `lockstep-<command>.1` into.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

/// Prints the completion script for `args.shell` on standard output.
pub fn completions(args: CompletionArgs, mut cmd: clap::Command) -> Result<ExitCode, CliError> {
    let name = cmd.get_name().to_string();
    clap_complete::generate(args.shell, &mut cmd, name, &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}

/// Writes one man page per visible command into `args.out`.
pub fn man(args: ManArgs, cmd: clap::Command) -> Result<ExitCode, CliError> {
    std::fs::create_dir_all(&args.out)
        .map_err(|e| CliError::Usage(format!("cannot create {}: {e}", args.out.display())))?;
    clap_mangen::generate_to(cmd, &args.out).map_err(|e| {
        CliError::Usage(format!("writing man pages to {}: {e}", args.out.display()))
    })?;
    Ok(ExitCode::SUCCESS)
}
