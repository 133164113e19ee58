//! `lockstep status`: one row per node with its wsrep state.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use lockstep_testkit::{Cluster, Node, Timeouts};

use super::DirArg;
use crate::arbitrator::status_file;
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
    /// Also show the arbitrator whose working directory this is
    /// (`lockstep arbitrator --workdir`); repeatable.
    #[arg(long, value_name = "WORKDIR")]
    arbitrator: Vec<PathBuf>,
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

/// Flow control, shown as RECV_Q (the node's receive queue) and FLOW:
/// `-`, `paused` (some node asked the cluster to pause), or `asked` (this
/// node did, its appliers are behind), with the share of time paused since
/// the last FLUSH STATUS.
const FLOW: [&str; 4] = [
    "wsrep_local_recv_queue",
    "wsrep_flow_control_active",
    "wsrep_flow_control_requested",
    "wsrep_flow_control_paused",
];

/// Where a node stands in a WAN layout: SEGMENT (`gmcast.segment`) and
/// LEADER (`yes` on Lockstep's Raft leader, ADR 0020; Galera has none).
const PLACE: [&str; 2] = ["wsrep_gmcast_segment", "wsrep_lockstep_leader"];

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
        "RECV_Q",
        "FLOW",
        "PROVIDER",
        "SEGMENT",
        "LEADER",
    ];
    let mut rows = Vec::new();
    let mut healthy = true;
    for node in cluster.nodes() {
        let row = node_row(node);
        healthy &= row[3] == "Synced";
        rows.push(row);
    }
    for dir in &args.arbitrator {
        let row = arbitrator_row(dir);
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
    let row = vec![
        node.name().to_string(),
        node.pid().map_or("-".into(), |p| p.to_string()),
        node.port().to_string(),
    ];
    let values = if node.is_running() {
        query(node)
    } else {
        Err("down".to_string())
    };
    row_of(row, values)
}

/// An arbitrator's row, from its status file; PORT is its group port.
fn arbitrator_row(dir: &Path) -> Vec<String> {
    match status_file::read(dir) {
        Ok(st) => {
            let row = vec![
                st.name.clone(),
                st.pid.to_string(),
                st.listen.rsplit(':').next().unwrap_or("-").to_string(),
            ];
            let values = st
                .rows(std::time::SystemTime::now())
                .map(|rows| {
                    let mut map: HashMap<String, String> = rows.into_iter().collect();
                    map.insert("wsrep_provider_name".into(), "arbitrator".into());
                    map
                })
                .map_err(|_| "down".to_string());
            row_of(row, values)
        }
        Err(_) => row_of(
            vec![dir.display().to_string(), "-".into(), "-".into()],
            Err("down".into()),
        ),
    }
}

/// The state columns after NODE, PID and PORT.
fn row_of(mut row: Vec<String>, values: Result<HashMap<String, String>, String>) -> Vec<String> {
    let get = |map: &HashMap<String, String>, c: &str| map.get(c).cloned().unwrap_or("?".into());
    match values {
        Ok(map) => {
            let last = COLUMNS.len() - 1;
            row.extend(COLUMNS[..last].iter().map(|c| get(&map, c)));
            row.push(get(&map, FLOW[0]));
            row.push(flow_cell(
                &get(&map, FLOW[1]),
                &get(&map, FLOW[2]),
                &get(&map, FLOW[3]),
            ));
            row.push(get(&map, COLUMNS[last]));
            row.push(map.get(PLACE[0]).cloned().unwrap_or("-".into()));
            let leads = map.get(PLACE[1]).is_some_and(|l| *l == row[0]);
            row.push(if leads { "yes" } else { "-" }.into());
        }
        Err(state) => {
            row.push(state);
            row.extend((1..COLUMNS.len() + 2 + PLACE.len()).map(|_| "-".to_string()));
        }
    }
    row
}

/// FLOW: the pause state and the share of time paused, e.g. `asked,12%`.
fn flow_cell(active: &str, requested: &str, paused: &str) -> String {
    let state = match (active, requested) {
        (_, "true") => "asked",
        ("true", _) => "paused",
        _ => "-",
    };
    match paused.parse::<f64>() {
        Ok(f) if f > 0.0 => format!("{state},{:.0}%", f * 100.0),
        _ => state.to_string(),
    }
}

fn query(node: &Node) -> Result<HashMap<String, String>, String> {
    let list: Vec<String> = COLUMNS
        .iter()
        .chain(FLOW.iter())
        .chain(PLACE.iter())
        .map(|c| format!("'{c}'"))
        .collect();
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

#[cfg(test)]
mod tests {
    use super::flow_cell;

    #[test]
    fn the_flow_cell_says_who_paused_and_for_how_long() {
        assert_eq!(flow_cell("false", "false", "0.000000"), "-");
        assert_eq!(flow_cell("true", "false", "0.25"), "paused,25%");
        assert_eq!(flow_cell("true", "true", "0.5"), "asked,50%");
        assert_eq!(flow_cell("false", "false", "0.031"), "-,3%");
        assert_eq!(flow_cell("?", "?", "?"), "-");
    }
}
