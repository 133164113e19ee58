//! `lockstep down`: graceful stop of the local cluster.

use std::process::ExitCode;
use std::time::Instant;

use lockstep_testkit::Cluster;

use super::DirArg;
use crate::error::CliError;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    dir: DirArg,
    /// Also delete datadirs and logs (by default they are kept).
    #[arg(long)]
    purge: bool,
}

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    let mut cluster = match Cluster::attach(&args.dir.dir) {
        Err(lockstep_testkit::Error::NoCluster { .. }) if args.purge => {
            return purge_leftovers(&args.dir);
        }
        other => other?,
    };
    let mut first_err = None;
    for node in cluster.nodes_mut().iter_mut().rev() {
        if !node.is_running() {
            println!("{}: already down", node.name());
            continue;
        }
        let t0 = Instant::now();
        match node.stop() {
            Ok(()) => println!(
                "{}: stopped in {:.1} s",
                node.name(),
                t0.elapsed().as_secs_f64()
            ),
            Err(e) => {
                eprintln!("lockstep: {e}");
                first_err.get_or_insert(e);
            }
        }
    }
    let live = cluster.running_nodes();
    if !live.is_empty() {
        return Err(CliError::Usage(format!(
            "still running after stop: {}; the state file {} is kept; check `pgrep -a mariadbd`",
            live.join(", "),
            lockstep_testkit::state_path(cluster.base_dir()).display()
        )));
    }
    if args.purge {
        cluster.purge()?;
        println!(
            "removed the cluster's files in {}",
            cluster.base_dir().display()
        );
    } else {
        cluster.remove_state()?;
        println!(
            "datadirs and logs kept in {}; `lockstep down{} --purge` would delete them",
            cluster.base_dir().display(),
            args.dir.hint()
        );
    }
    // A hung shutdown was escalated to SIGKILL: report it as a failure.
    match first_err {
        Some(e) => Err(e.into()),
        None => Ok(ExitCode::SUCCESS),
    }
}

/// `down --purge` after a `down` that kept the files: no state file is left.
fn purge_leftovers(dir: &DirArg) -> Result<ExitCode, CliError> {
    let removed = Cluster::purge_leftovers(&dir.dir)?;
    if removed.is_empty() {
        return Err(lockstep_testkit::Error::NoCluster {
            dir: dir.dir.clone(),
        }
        .into());
    }
    for p in removed {
        println!("removed {}", p.display());
    }
    Ok(ExitCode::SUCCESS)
}
