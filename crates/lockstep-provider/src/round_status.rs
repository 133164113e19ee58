//! What the rounds publish for `SHOW STATUS` and nothing else reads: the
//! group's certification figures, protocol version, bindings, WAN
//! counters and weight. A plain record with one writer (the round that
//! copies it in) and one reader (`stats.rs`); no decision of the
//! provider depends on it, so its fields are open.

use lockstep_core::certification::CertStats;
use lockstep_core::group::node::WanCounters;

#[derive(Debug)]
pub struct RoundStatus {
    /// The group's certification statistics and index size (the
    /// certifier itself lives in the sequencer).
    pub cert_stats: CertStats,
    pub cert_index_size: usize,
    /// `cert_stats` at the last `FLUSH STATUS`: the averages start there.
    pub cert_stats_base: CertStats,
    /// The group protocol version the cluster runs at.
    pub cluster_version: u32,
    /// Members bound to their certificates (ADR 0014).
    pub bound_members: usize,
    /// Peer messages refused because of their sender (ADR 0014).
    pub refused_messages: u64,
    /// Why the writeset cache failed ("" while it works): the node then
    /// refuses to commit and leaves the cluster (ADR 0032).
    pub cache_failure: String,
    /// What crossed to other segments (`gmcast.segment`, ADR 0020), and
    /// the bytes of it.
    pub wan: WanCounters,
    pub wan_bytes_sent: u64,
    /// The primary component's total `pc.weight` (`wsrep_cluster_weight`).
    pub cluster_weight: i64,
}

impl Default for RoundStatus {
    fn default() -> Self {
        RoundStatus {
            cert_stats: CertStats::default(),
            cert_index_size: 0,
            cert_stats_base: CertStats::default(),
            cluster_version: lockstep_core::group::peer::MIN_PROTOCOL_VERSION,
            bound_members: 0,
            refused_messages: 0,
            cache_failure: String::new(),
            wan: WanCounters::default(),
            wan_bytes_sent: 0,
            cluster_weight: 0,
        }
    }
}
