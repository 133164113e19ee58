//! `GET /metrics`: the node's `wsrep_%` status in Prometheus' text format
//! (version 0.0.4), from the same cached check as the health answer, so
//! a scrape never reaches MariaDB itself (ADR 0019).
//!
//! - every numeric `wsrep_%` value as `mysql_global_status_wsrep_*`, the
//!   names mysqld_exporter gives them (Galera dashboards keep working);
//!   `ON`/`OFF` values as 1/0;
//! - `lockstep_wsrep_primary` (1 in the primary component) and
//!   `lockstep_wsrep_info` (state comment, cluster status, provider);
//! - Lockstep's stage histograms (`wsrep_lockstep_*_latency`, `_wait`,
//!   `_pause`, text form of `lockstep_core::metrics`) as `*_seconds`
//!   histograms, and the round trip to each peer as
//!   `lockstep_peer_rtt_seconds{peer="..."}`;
//! - `lockstep_check_up`: 1 if the last check reached the server.

use std::fmt::Write;

use lockstep_core::metrics::{Histogram, BOUNDS_US, BUCKETS};

pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

const PEER_RTT: &str = "wsrep_lockstep_peer_rtt";

/// Strings worth a label in `lockstep_wsrep_info`.
const INFO: [(&str, &str); 4] = [
    ("wsrep_local_state_comment", "state"),
    ("wsrep_cluster_status", "cluster_status"),
    ("wsrep_provider_name", "provider"),
    ("wsrep_provider_version", "provider_version"),
];

/// The exposition for `rows` (`SHOW STATUS` names and values, as the
/// last check read them); `up`: whether that check reached the server.
pub fn render(rows: &[(String, String)], up: bool) -> String {
    let mut out = String::new();
    gauge(
        &mut out,
        "lockstep_check_up",
        "1 if the last check reached the server.",
    );
    sample(
        &mut out,
        "lockstep_check_up",
        &[],
        if up { 1.0 } else { 0.0 },
    );
    let get = |name: &str| {
        rows.iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    };
    if let Some(status) = get("wsrep_cluster_status") {
        let name = "lockstep_wsrep_primary";
        gauge(&mut out, name, "1 in the primary component.");
        sample(
            &mut out,
            name,
            &[],
            f64::from(u8::from(status == "Primary")),
        );
    }
    let labels: Vec<(&str, &str)> = INFO
        .iter()
        .filter_map(|(var, label)| get(var).map(|v| (*label, v)))
        .collect();
    if !labels.is_empty() {
        gauge(
            &mut out,
            "lockstep_wsrep_info",
            "The node's wsrep state, as labels.",
        );
        sample(&mut out, "lockstep_wsrep_info", &labels, 1.0);
    }
    for (name, value) in rows {
        let name = name.to_ascii_lowercase();
        if !name.starts_with("wsrep_") || !is_metric_name(&name) {
            continue;
        }
        if name == PEER_RTT {
            peer_rtts(&mut out, value);
        } else if let Ok(h) = Histogram::decode(value) {
            let metric = format!("{}_seconds", &name["wsrep_".len()..]);
            histogram_head(&mut out, &metric, "Lockstep replication stage latency.");
            histogram(&mut out, &metric, &[], &h);
        } else if let Some(v) = number(value) {
            let metric = format!("mysql_global_status_{name}");
            out.push_str(&format!("# TYPE {metric} untyped\n"));
            sample(&mut out, &metric, &[], v);
        }
    }
    out
}

/// `name=<histogram>;...` from `wsrep_lockstep_peer_rtt`.
fn peer_rtts(out: &mut String, value: &str) {
    let metric = "lockstep_peer_rtt_seconds";
    let peers: Vec<(&str, Histogram)> = value
        .split(';')
        .filter_map(|p| p.split_once('='))
        .filter_map(|(peer, h)| Histogram::decode(h).ok().map(|h| (peer, h)))
        .collect();
    histogram_head(
        out,
        metric,
        "Round trip to each peer (a probe every second).",
    );
    for (peer, h) in peers {
        histogram(out, metric, &[("peer", peer)], &h);
    }
}

fn number(v: &str) -> Option<f64> {
    match v.trim() {
        "ON" | "on" | "true" => Some(1.0),
        "OFF" | "off" | "false" => Some(0.0),
        t => t.parse::<f64>().ok().filter(|f| f.is_finite()),
    }
}

fn is_metric_name(n: &str) -> bool {
    !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn gauge(out: &mut String, name: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
}

fn histogram_head(out: &mut String, name: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
}

fn histogram(out: &mut String, name: &str, labels: &[(&str, &str)], h: &Histogram) {
    let bucket = format!("{name}_bucket");
    let mut cumulative = 0u64;
    for (i, count) in h.buckets().iter().enumerate() {
        cumulative = cumulative.saturating_add(*count);
        let le = if i + 1 < BUCKETS {
            format!("{}", BOUNDS_US[i] as f64 / 1e6)
        } else {
            "+Inf".to_string()
        };
        let mut l = labels.to_vec();
        l.push(("le", &le));
        sample(out, &bucket, &l, cumulative as f64);
    }
    sample(out, &format!("{name}_sum"), labels, h.sum_us() as f64 / 1e6);
    sample(out, &format!("{name}_count"), labels, h.count() as f64);
}

fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], v: f64) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (k, val)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{k}=\"{}\"", escape(val));
        }
        out.push('}');
    }
    let _ = writeln!(out, " {v}");
}

/// Label values: backslash, double quote and newline escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn status_rows_become_gauges_info_and_histograms() {
        let mut h = Histogram::default();
        h.observe_us(20);
        h.observe_us(300);
        let rtt = format!("node2={};no\"de=3={}", h.encode(), h.encode());
        let text = render(
            &rows(&[
                ("wsrep_cluster_status", "Primary"),
                ("wsrep_local_state_comment", "Synced"),
                ("wsrep_ready", "ON"),
                ("wsrep_local_recv_queue", "3"),
                ("wsrep_cluster_state_uuid", "d1cff69f-7e97"),
                ("wsrep_lockstep_replicate_latency", &h.encode()),
                ("wsrep_lockstep_peer_rtt", &rtt),
                ("wsrep_lockstep_apply_latency", "v9:garbage"),
            ]),
            true,
        );
        for line in [
            "lockstep_check_up 1",
            "lockstep_wsrep_primary 1",
            "lockstep_wsrep_info{state=\"Synced\",cluster_status=\"Primary\"} 1",
            "mysql_global_status_wsrep_ready 1",
            "mysql_global_status_wsrep_local_recv_queue 3",
            "# TYPE lockstep_replicate_latency_seconds histogram",
            "lockstep_replicate_latency_seconds_bucket{le=\"0.000025\"} 1",
            "lockstep_replicate_latency_seconds_bucket{le=\"0.0005\"} 2",
            "lockstep_replicate_latency_seconds_bucket{le=\"+Inf\"} 2",
            "lockstep_replicate_latency_seconds_sum 0.00032",
            "lockstep_replicate_latency_seconds_count 2",
            "lockstep_peer_rtt_seconds_count{peer=\"node2\"} 2",
        ] {
            assert!(text.lines().any(|l| l == line), "no `{line}` in\n{text}");
        }
        assert!(!text.contains("state_uuid"), "a UUID is not a number");
        assert!(
            !text.contains("apply_latency"),
            "a bad histogram is left out"
        );
        // `no"de=3=...`: the name stops at the first `=`, the rest is not
        // a histogram, so that peer is left out rather than mislabelled.
        assert!(!text.contains("no\\\"de"), "{text}");
        let down = render(&[], false);
        assert_eq!(down.lines().last(), Some("lockstep_check_up 0"));
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
