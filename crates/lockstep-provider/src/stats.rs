//! The `wsrep_%` status variables the provider reports (contract §7.2),
//! with Galera's names and types. Names carry no `wsrep_` prefix: the
//! server adds it.

use crate::provider::Provider;
use crate::state::Conn;
use lockstep_core::metrics::Stage;

#[derive(Debug, Clone, PartialEq)]
pub enum StatValue {
    Int(i64),
    Double(f64),
    Str(String),
}

impl Provider {
    /// A snapshot of every status variable; cheap, one short lock.
    pub fn stats(&self) -> Vec<(&'static str, StatValue)> {
        use StatValue::{Double, Int, Str};
        let g = self.lock();
        let c = &g.counters;
        let state = g.local.state();
        let primary = g.conn == Conn::Open && g.view.is_some();
        let incoming = g
            .view
            .as_ref()
            .map(|v| {
                v.members
                    .iter()
                    .map(|m| m.incoming.clone())
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default();
        let cert = g.status.cert_stats.since(&g.status.cert_stats_base);
        let queued = g.queue.len();
        let now = crate::state::mono_ns();
        let member_id = if g.conn == Conn::Closed {
            wsrep_abi::Uuid::NIL
        } else {
            g.member_id
        };
        let mut v = vec![
            ("local_state_uuid", Str(g.history.to_string())),
            ("protocol_version", Int(if primary { 11 } else { -1 })),
            ("last_committed", Int(g.last_committed())),
            ("replicated", Int(c.replicated)),
            ("replicated_bytes", Int(c.replicated_bytes)),
            ("repl_keys", Int(c.repl_keys)),
            ("repl_keys_bytes", Int(c.repl_keys_bytes)),
            ("repl_data_bytes", Int(c.repl_data_bytes)),
            ("repl_other_bytes", Int(0)),
            ("received", Int(c.received)),
            ("received_bytes", Int(c.received_bytes)),
            ("local_commits", Int(c.local_commits)),
            ("local_cert_failures", Int(c.local_cert_failures)),
            ("local_replays", Int(c.local_replays)),
            ("local_send_queue", Int(g.proposals.send_queue() as i64)),
            (
                "local_send_queue_max",
                Int(g.proposals.send_queue_stats().max(g.proposals.send_queue()) as i64),
            ),
            (
                "local_send_queue_min",
                Int(g.proposals.send_queue_stats().min(g.proposals.send_queue()) as i64),
            ),
            (
                "local_send_queue_avg",
                Double(g.proposals.send_queue_stats().avg()),
            ),
            ("local_recv_queue", Int(queued as i64)),
            (
                "local_recv_queue_max",
                Int(g.queue.stats().max(queued) as i64),
            ),
            (
                "local_recv_queue_min",
                Int(g.queue.stats().min(queued) as i64),
            ),
            ("local_recv_queue_avg", Double(g.queue.stats().avg())),
            // The lowest seqno the group log can replay to a joiner (IST).
            ("local_cached_downto", Int(g.cache.cached_downto())),
            (
                "flow_control_paused_ns",
                Int(g.flow.gate().paused_ns(now) as i64),
            ),
            (
                "flow_control_paused",
                Double(g.flow.gate().paused_fraction(now)),
            ),
            (
                "flow_control_sent",
                Int(g.flow.requester().stops_sent as i64),
            ),
            (
                "flow_control_recv",
                Int(g.flow.gate().stops_received as i64),
            ),
            (
                "flow_control_active",
                Str(g.flow.gate().stopped().to_string()),
            ),
            (
                "flow_control_requested",
                Str(g.flow.requester().requested().to_string()),
            ),
            ("cert_deps_distance", Double(cert.avg_deps_distance())),
            ("apply_oooe", Double(g.gates.apply_stats().oooe())),
            ("apply_oool", Double(g.gates.apply_stats().oool())),
            ("apply_window", Double(g.gates.apply_stats().window())),
            ("apply_waits", Int(0)),
            ("commit_oooe", Double(g.gates.commit_stats().oooe())),
            ("commit_oool", Double(g.gates.commit_stats().oool())),
            ("commit_window", Double(g.gates.commit_stats().window())),
            ("local_state", Int(state.wsrep_value())),
            ("local_state_comment", Str(state.comment().into())),
            ("cert_index_size", Int(g.status.cert_index_size as i64)),
            ("causal_reads", Int(c.causal_reads)),
            ("cert_interval", Double(cert.avg_cert_interval())),
            ("open_transactions", Int(g.trxs.open() as i64)),
            ("open_connections", Int(g.trxs.open_tois() as i64)),
            ("incoming_addresses", Str(incoming)),
            (
                "cluster_weight",
                Str(if primary { g.status.cluster_weight } else { 0 }.to_string()),
            ),
            ("desync_count", Str(g.local.desync_count().to_string())),
            ("evs_delayed", Str(String::new())),
            ("evs_evict_list", Str(String::new())),
            ("evs_repl_latency", Str("0/0/0/0/0".into())),
            (
                "evs_state",
                Str(if primary { "OPERATIONAL" } else { "CLOSED" }.into()),
            ),
            ("gcomm_uuid", Str(member_id.to_string())),
            (
                "gmcast_segment",
                Str(g
                    .membership
                    .members()
                    .iter()
                    .find(|m| m.uuid == member_id.data)
                    .map_or(0, |m| m.segment)
                    .to_string()),
            ),
            // Lockstep's own: the first seqno the in-memory group log can
            // replay (-1: all of it; it moves when the log is compacted),
            // and writesets of the receive queue waiting on disk.
            (
                "lockstep_group_log_from",
                Int(g.cache.log_from().unwrap_or(-1)),
            ),
            // The group protocol version the cluster runs at (rolling
            // upgrades, docs/formats.md).
            // The Raft leader's name ("" while none is known).
            (
                "lockstep_leader",
                Str(g
                    .membership
                    .members()
                    .iter()
                    .find(|m| m.raft_id == g.reads.leader() && g.reads.leader() != 0)
                    .map_or(String::new(), |m| m.name.clone())),
            ),
            (
                "lockstep_protocol_version",
                Int(i64::from(g.status.cluster_version)),
            ),
            // Members bound to the certificate they joined with (ADR
            // 0014): with TLS, every member once the cluster runs at 11.
            ("lockstep_bound_members", Int(g.status.bound_members as i64)),
            // Peer messages refused because of who sent them: a forged
            // sender, a relayed message where peers are authenticated
            // (ADR 0014). Each is also logged (at most one warning per
            // sender and reason every 10 s).
            (
                "lockstep_refused_messages",
                Int(g.status.refused_messages as i64),
            ),
            // Why the writeset cache failed ("" while it works): the node
            // then stopped acknowledging and left the cluster (ADR 0032).
            (
                "lockstep_cache_failure",
                Str(g
                    .cache
                    .failure()
                    .unwrap_or_else(|| g.status.cache_failure.clone())),
            ),
            // What crossed to other segments (ADR 0020): entries a remote
            // segment got once each when the relay works, their bytes,
            // bundles sent as leader, messages passed on as a relay.
            // The Raft log index applied here: entries ordered so far.
            (
                "lockstep_applied_index",
                Int(g.reads.applied_index() as i64),
            ),
            (
                "lockstep_wan_entries_sent",
                Int(g.status.wan.entries_sent as i64),
            ),
            (
                "lockstep_wan_bytes_sent",
                Int(g.status.wan_bytes_sent as i64),
            ),
            (
                "lockstep_wan_bundles_sent",
                Int(g.status.wan.bundles_sent as i64),
            ),
            ("lockstep_relayed", Int(g.status.wan.forwarded as i64)),
            // Relays replaced at once because their connections closed.
            ("lockstep_relays_lost", Int(g.status.wan.relays_lost as i64)),
            // Causal reads answered from this node's lease, no message
            // (of `wsrep_causal_reads`; ADR 0016 and 0022).
            ("lockstep_causal_lease_reads", Int(c.causal_lease_reads)),
            // A follower's own entries sent back to it as stubs (as leader:
            // the bytes left out), and stubs it could not fill (a retry).
            (
                "lockstep_echo_elided_bytes",
                Int(g.status.wan.elided_bytes as i64),
            ),
            ("lockstep_echo_unfilled", Int(g.status.wan.unfilled as i64)),
            ("lockstep_recv_spilled", Int(g.queue.spooled() as i64)),
        ];
        // The stage histograms (ADR 0019) in their text form: SHOW STATUS
        // shows them, `lockstep check` serves them to Prometheus.
        v.extend(Stage::ALL.iter().map(|s| {
            let h = g.stages.get(*s).unwrap_or(g.flow.gate().pauses());
            (s.name(), Str(h.encode()))
        }));
        // Round trips per member: `name=<histogram>;...` (names cleaned of
        // the two separators).
        let rtts: Vec<String> = g
            .membership
            .members()
            .iter()
            .filter_map(|m| {
                let h = g.peer_rtt.get(m.raft_id)?;
                let name = m.name.replace([';', '='], "_");
                Some(format!("{name}={}", h.encode()))
            })
            .collect();
        v.push(("lockstep_peer_rtt", Str(rtts.join(";"))));
        // Each peer's clock rate against this node's (ADR 0036), and
        // whether leases answer causal reads: `OFF` while a rate is more
        // than 25 % off; steps back of this host's monotonic clock.
        let rates: Vec<String> = g
            .membership
            .members()
            .iter()
            .filter_map(|m| {
                let rate = g.clock_rates.rate(m.raft_id)?;
                let name = m.name.replace([';', '='], "_");
                Some(format!("{name}={rate:.4}"))
            })
            .collect();
        v.push(("lockstep_clock_rates", Str(rates.join(";"))));
        v.push((
            "lockstep_clocks_agree",
            Str(if g.clock_rates.agree() { "ON" } else { "OFF" }.into()),
        ));
        v.push((
            "lockstep_clock_steps_back",
            Int(crate::state::clock_steps_back() as i64),
        ));
        v
    }

    /// What MariaDB reports itself from the views it is given
    /// (`wsrep_cluster_*`, `wsrep_connected`, `wsrep_ready`); a program
    /// without a server (the arbitrator) reports them from here.
    pub fn cluster_stats(&self) -> Vec<(&'static str, StatValue)> {
        use StatValue::{Int, Str};
        let g = self.lock();
        let connected = g.conn == Conn::Open;
        let synced = g.local.state() == lockstep_core::group::MemberState::Synced;
        let on = |b: bool| Str(if b { "ON" } else { "OFF" }.into());
        match (&g.view, connected) {
            (Some(v), true) => vec![
                ("cluster_status", Str("Primary".into())),
                ("cluster_size", Int(v.members.len() as i64)),
                ("cluster_conf_id", Int(v.conf_id)),
                ("cluster_state_uuid", Str(v.state_id.uuid.to_string())),
                ("connected", on(true)),
                ("ready", on(synced)),
            ],
            (_, connected) => vec![
                (
                    "cluster_status",
                    Str(if connected {
                        "non-Primary"
                    } else {
                        "Disconnected"
                    }
                    .into()),
                ),
                ("cluster_size", Int(0)),
                ("cluster_conf_id", Int(-1)),
                ("cluster_state_uuid", Str(g.history.to_string())),
                ("connected", on(connected)),
                ("ready", on(false)),
            ],
        }
    }

    /// `FLUSH STATUS`: averages and extremes start over (Galera resets
    /// the same figures); counters keep counting.
    pub fn stats_reset(&self) {
        let mut g = self.lock();
        g.queue.reset_stats();
        g.proposals.reset_stats();
        g.flow.reset_stats(crate::state::mono_ns());
        g.gates.reset_stats();
        g.status.cert_stats_base = g.status.cert_stats;
    }
}
