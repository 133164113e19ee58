//! The three sysbench workloads of the benchmark, each tied to a yardstick
//! of the design brief.

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
    /// The sysbench script, also the workload's name in the report.
    pub name: &'static str,
    pub threads: u32,
    pub placement: Placement,
    /// What it measures, for the report.
    pub measures: &'static str,
}

/// Every workload, in run order.
pub const WORKLOADS: [Workload; 3] = [
    Workload {
        name: "oltp_write_only",
        threads: 8,
        placement: Placement::OneNode,
        measures: "write throughput",
    },
    Workload {
        name: "oltp_read_write",
        threads: 12,
        placement: Placement::AllNodes,
        measures: "mixed load on all nodes",
    },
    Workload {
        name: "oltp_update_non_index",
        threads: 1,
        placement: Placement::OneNode,
        measures: "commit latency",
    },
];

impl Workload {
    /// The workloads of a comma-separated list, in the order given,
    /// each once; `all` stands for every workload.
    pub fn parse_list(list: &str) -> Result<Vec<Workload>, String> {
        let mut out: Vec<Workload> = Vec::new();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let found: Vec<Workload> = if name == "all" {
                WORKLOADS.to_vec()
            } else {
                let w = WORKLOADS.iter().find(|w| w.name == name).ok_or_else(|| {
                    let known: Vec<&str> = WORKLOADS.iter().map(|w| w.name).collect();
                    format!(
                        "unknown workload `{name}`; choose from {} (or all)",
                        known.join(", ")
                    )
                })?;
                vec![*w]
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
    fn labels_say_where_the_threads_go() {
        assert_eq!(WORKLOADS[0].load_label(3), "8 threads on node1");
        assert_eq!(WORKLOADS[1].load_label(3), "12 threads over 3 nodes");
        assert_eq!(WORKLOADS[2].load_label(3), "1 thread on node1");
    }
}
