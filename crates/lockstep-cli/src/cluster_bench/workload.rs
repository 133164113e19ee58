//! The sysbench workloads of the benchmark, each tied to a yardstick of
//! the design brief or an issue.

use lockstep_testkit::{Cluster, Node};

/// Where a workload's connections go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Every connection on the first node.
    OneNode,
    /// Connections round-robin over all nodes.
    AllNodes,
}

/// A sysbench OLTP script with its thread count and placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Workload {
    /// The workload's name in the report.
    pub name: &'static str,
    /// The sysbench script.
    pub script: &'static str,
    /// `wsrep_sync_wait` of the workload's sessions (set globally on every
    /// node for its run).
    pub sync_wait: u32,
    pub threads: u32,
    pub placement: Placement,
    /// What it measures, for the report.
    pub measures: &'static str,
}

/// Every workload, in run order.
pub const WORKLOADS: [Workload; 5] = [
    Workload {
        name: "oltp_write_only",
        script: "oltp_write_only",
        sync_wait: 0,
        threads: 8,
        placement: Placement::OneNode,
        measures: "write throughput",
    },
    Workload {
        name: "oltp_read_write",
        script: "oltp_read_write",
        sync_wait: 0,
        threads: 12,
        placement: Placement::AllNodes,
        measures: "mixed load on all nodes",
    },
    Workload {
        name: "oltp_update_non_index",
        script: "oltp_update_non_index",
        sync_wait: 0,
        threads: 1,
        placement: Placement::OneNode,
        measures: "commit latency",
    },
    Workload {
        name: "point_select",
        script: "oltp_point_select",
        sync_wait: 0,
        threads: 8,
        placement: Placement::AllNodes,
        measures: "read rate, the base of causal reads",
    },
    Workload {
        name: "causal_point_select",
        script: "oltp_point_select",
        sync_wait: 1,
        threads: 8,
        placement: Placement::AllNodes,
        measures: "causal reads (wsrep_sync_wait=1)",
    },
];

/// The thread sweep (issue 14, item 2): the write-only workload at 1, 32
/// and 128 client threads besides `oltp_write_only`'s 8, all on node1, to
/// show where each provider saturates. `--workloads sweep` runs the four.
pub const SWEEP: [Workload; 3] = [
    sweep_point("write_only_1", 1),
    sweep_point("write_only_32", 32),
    sweep_point("write_only_128", 128),
];

const fn sweep_point(name: &'static str, threads: u32) -> Workload {
    Workload {
        name,
        script: "oltp_write_only",
        sync_wait: 0,
        threads,
        placement: Placement::OneNode,
        measures: "write throughput by client threads",
    }
}

/// The sweep's workloads, fewest threads first (`oltp_write_only` is its
/// 8-thread point).
pub fn sweep() -> Vec<Workload> {
    let mut all: Vec<Workload> = SWEEP.to_vec();
    all.extend(WORKLOADS.iter().filter(|w| w.name == "oltp_write_only"));
    all.sort_by_key(|w| w.threads);
    all
}

/// A workload by its name, among all of them.
pub fn find(name: &str) -> Option<Workload> {
    WORKLOADS
        .iter()
        .chain(SWEEP.iter())
        .find(|w| w.name == name)
        .copied()
}

/// The cost of causal reads: `1 - causal / plain` read rate, when both
/// workloads were measured.
pub fn causal_read_cost(plain_tps: f64, causal_tps: f64) -> Option<f64> {
    (plain_tps > 0.0).then(|| 1.0 - causal_tps / plain_tps)
}

impl Workload {
    /// The workloads of a comma-separated list, in the order given,
    /// each once; `all` stands for every workload.
    pub fn parse_list(list: &str) -> Result<Vec<Workload>, String> {
        let mut out: Vec<Workload> = Vec::new();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let found: Vec<Workload> = match name {
                "all" => WORKLOADS.to_vec(),
                "sweep" => sweep(),
                _ => {
                    let w = find(name).ok_or_else(|| {
                        let known: Vec<&str> = WORKLOADS
                            .iter()
                            .chain(SWEEP.iter())
                            .map(|w| w.name)
                            .collect();
                        format!(
                            "unknown workload `{name}`; choose from {} (or all, sweep)",
                            known.join(", ")
                        )
                    })?;
                    vec![w]
                }
            };
            for w in found {
                if !out.contains(&w) {
                    out.push(w);
                }
            }
        }
        if out.is_empty() {
            return Err("--workloads names no workload".into());
        }
        Ok(out)
    }

    /// The nodes sysbench connects to.
    pub fn nodes<'a>(&self, cluster: &'a Cluster) -> Vec<&'a Node> {
        match self.placement {
            Placement::OneNode => vec![cluster.node(0)],
            Placement::AllNodes => cluster.nodes().iter().collect(),
        }
    }

    /// `8 threads on node1`, `12 threads over 3 nodes`.
    pub fn load_label(&self, cluster_size: usize) -> String {
        let threads = match self.threads {
            1 => "1 thread".to_string(),
            n => format!("{n} threads"),
        };
        match self.placement {
            Placement::OneNode => format!("{threads} on node1"),
            Placement::AllNodes => format!("{threads} over {cluster_size} nodes"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &str) -> Vec<&'static str> {
        Workload::parse_list(list)
            .unwrap()
            .iter()
            .map(|w| w.name)
            .collect()
    }

    #[test]
    fn lists_keep_the_given_order_without_repeats() {
        assert_eq!(
            names("oltp_update_non_index, oltp_write_only,oltp_update_non_index"),
            ["oltp_update_non_index", "oltp_write_only"]
        );
        assert_eq!(names("all").len(), WORKLOADS.len());
    }

    #[test]
    fn an_unknown_or_empty_list_is_refused_with_the_choices() {
        let e = Workload::parse_list("oltp_write_only,tpcc").unwrap_err();
        assert!(e.contains("`tpcc`") && e.contains("oltp_read_write"), "{e}");
        assert!(Workload::parse_list(" , ").is_err());
    }

    #[test]
    fn the_sweep_runs_the_write_only_workload_at_1_8_32_and_128_threads() {
        let threads: Vec<u32> = Workload::parse_list("sweep")
            .unwrap()
            .iter()
            .map(|w| w.threads)
            .collect();
        assert_eq!(threads, [1, 8, 32, 128]);
        let both = Workload::parse_list("all,sweep").unwrap();
        assert_eq!(both.len(), WORKLOADS.len() + SWEEP.len(), "no repeats");
        assert!(both.iter().all(|w| find(w.name) == Some(*w)));
    }

    #[test]
    fn the_causal_read_cost_is_the_share_of_the_read_rate_lost() {
        let cost = causal_read_cost(40_000.0, 36_000.0).unwrap();
        assert!((cost - 0.1).abs() < 1e-9, "{cost}");
        assert_eq!(causal_read_cost(0.0, 10.0), None, "no base rate, no cost");
        let plain = WORKLOADS.iter().find(|w| w.name == "point_select").unwrap();
        let causal = WORKLOADS
            .iter()
            .find(|w| w.name == "causal_point_select")
            .unwrap();
        assert_eq!((plain.sync_wait, causal.sync_wait), (0, 1));
        assert_eq!(
            plain.script, causal.script,
            "the same reads, with and without"
        );
    }

    #[test]
    fn labels_say_where_the_threads_go() {
        assert_eq!(WORKLOADS[0].load_label(3), "8 threads on node1");
        assert_eq!(WORKLOADS[1].load_label(3), "12 threads over 3 nodes");
        assert_eq!(WORKLOADS[2].load_label(3), "1 thread on node1");
    }
}
