//! `lockstep status`: one row per node with its wsrep state.

use std::collections::HashMap;
use std::process::ExitCode;
use std::time::Duration;

use lockstep_testkit::{Cluster, Node, Timeouts};

use super::DirArg;
use crate::error::CliError;
use crate::table;

/// Exit code when the cluster exists but a node is down or not Synced.
pub const DEGRADED: u8 = 2;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit status: 0 all nodes Synced, 2 some node down or not Synced, \
                        1 no cluster or error."
)]
pub struct Args {
    #[command(flatten)]
    dir: DirArg,
}

const COLUMNS: [&str; 7] = [
    "wsrep_local_state_comment",
    "wsrep_cluster_status",
    "wsrep_cluster_size",
    "wsrep_ready",
    "wsrep_last_committed",
    // The lowest seqno this node can serve by IST (group log or writeset
    // cache): a joiner behind it needs SST.
    "wsrep_local_cached_downto",
    "wsrep_provider_name",
];

pub fn run(args: Args) -> Result<ExitCode, CliError> {
    let mut cluster = Cluster::attach(&args.dir.dir)?;
    for n in cluster.nodes_mut() {
        n.set_timeouts(Timeouts {
            sql: Duration::from_secs(10),
            ..n.timeouts()
        });
    }
    let header = [
        "NODE",
        "PID",
        "PORT",
        "STATE",
        "CLUSTER",
        "SIZE",
        "READY",
        "LAST_COMMITTED",
        "IST_FROM",
        "PROVIDER",
    ];
    let mut rows = Vec::new();
    let mut healthy = true;
    for node in cluster.nodes() {
        let row = node_row(node);
        healthy &= row[3] == "Synced";
        rows.push(row);
    }
    println!(
        "cluster `{}` in {} (provider {})",
        cluster.name(),
        cluster.base_dir().display(),
        cluster.provider_label()
    );
    print!("{}", table::render(&header, &rows));
    Ok(if healthy {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(DEGRADED)
    })
}

fn node_row(node: &Node) -> Vec<String> {
    let mut row = vec![
        node.name().to_string(),
        node.pid().map_or("-".into(), |p| p.to_string()),
        node.port().to_string(),
    ];
    let values = if node.is_running() {
        query(node)
    } else {
        Err("down".to_string())
    };
    match values {
        Ok(map) => row.extend(
            COLUMNS
                .iter()
                .map(|c| map.get(*c).cloned().unwrap_or_else(|| "?".into())),
        ),
        Err(state) => {
            row.push(state);
            row.extend(COLUMNS[1..].iter().map(|_| "-".to_string()));
        }
    }
    row
}

fn query(node: &Node) -> Result<HashMap<String, String>, String> {
    let list: Vec<String> = COLUMNS.iter().map(|c| format!("'{c}'")).collect();
    let sql = format!(
        "SHOW GLOBAL STATUS WHERE Variable_name IN ({})",
        list.join(",")
    );
    // A live process that does not answer is starting, joining or stuck.
    let rows = node.query_rows(&sql).map_err(|_| "no answer".to_string())?;
    Ok(rows
        .into_iter()
        .filter(|r| r.len() >= 2)
        .map(|mut r| (r.swap_remove(0).to_ascii_lowercase(), r.swap_remove(0)))
        .collect())
}
