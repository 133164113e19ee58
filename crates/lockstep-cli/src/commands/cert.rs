//! `lockstep cert`: a CA and node certificates for peer TLS in a real
//! deployment, as PEM files Galera's `socket.ssl_*` options name.
//!
//! ```text
//! lockstep cert ca   --dir /etc/mysql/lockstep-ca
//! lockstep cert node --dir /etc/mysql/lockstep-ca --name db1 --host 10.0.0.1 --host db1.example
//! ```
//!
//! The CA key stays in the CA directory; copy only `ca.pem`, `<name>.pem`
//! and `<name>-key.pem` to the node.

use std::path::PathBuf;
use std::process::ExitCode;

use lockstep_net::pki::Authority;

use crate::error::CliError;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(Debug, clap::Subcommand)]
enum What {
    /// Make a new CA (`ca.pem`, `ca-key.pem`) in --dir.
    Ca {
        /// The CA's directory; must not hold a CA yet.
        #[arg(long)]
        dir: PathBuf,
        /// The CA's common name.
        #[arg(long, default_value = "lockstep cluster CA")]
        name: String,
    },
    /// Issue a node certificate (`<name>.pem`, `<name>-key.pem`) with the CA in --dir.
    Node {
        /// The CA's directory (from `lockstep cert ca`).
        #[arg(long)]
        dir: PathBuf,
        /// The node's name (common name and file names), e.g. its wsrep_node_name.
        #[arg(long)]
        name: String,
        /// An IP address or DNS name of the node (repeatable).
        #[arg(long = "host")]
        hosts: Vec<String>,
        /// Where to write the node's files (default: --dir).
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    match args.what {
        What::Ca { dir, name } => {
            Authority::generate(&name)
                .and_then(|ca| ca.save(&dir))
                .map_err(CliError::Usage)?;
            println!(
                "CA `{name}` written to {}/ca.pem (keep {}/ca-key.pem private)",
                dir.display(),
                dir.display()
            );
            println!(
                "next: lockstep cert node --dir {} --name <node> --host <address>",
                dir.display()
            );
        }
        What::Node {
            dir,
            name,
            hosts,
            out,
        } => {
            if name.is_empty() || name.contains(['/', '\0']) || name.starts_with('.') {
                return Err(CliError::Usage(format!(
                    "--name {name:?} cannot be a file name"
                )));
            }
            let ca = Authority::load(&dir).map_err(CliError::Usage)?;
            let out = out.unwrap_or(dir);
            let files = ca
                .issue_into(&out, &name, &hosts)
                .map_err(CliError::Usage)?;
            println!("certificate for `{name}` written:");
            println!("  {}", files.cert.display());
            println!("  {} (private)", files.key.display());
            println!("  {}", files.ca.display());
            println!("in the node's my.cnf ([mysqld] or [galera]):");
            println!(
                "  wsrep_provider_options=\"{}\"",
                files.provider_options().replace("socket.ssl=YES; ", "")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
