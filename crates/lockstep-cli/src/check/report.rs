//! The JSON form of a verdict: every input of the decision, for dashboards
//! and for operators asking "why is this node out of the pool?".

use std::path::Path;
use std::time::UNIX_EPOCH;

use serde::Serialize;
use tokio::time::Instant;

use super::cache::Snapshot;
use super::health::{Policy, ServerState};

#[derive(Debug, Serialize)]
struct JsonReport<'a> {
    healthy: bool,
    status: u16,
    /// Machine-readable rule name (`synced`, `not_primary`, ...).
    code: &'static str,
    reason: String,
    server: &'a str,
    inputs: Inputs<'a>,
    policy: &'a Policy,
    /// Unix time (ms) when the check finished; null before the first one.
    checked_at_ms: Option<u128>,
    /// How old the answer is, in ms.
    age_ms: u128,
    check_took_ms: f64,
    checks: u64,
}

#[derive(Debug, Serialize)]
struct Inputs<'a> {
    /// Every variable is present, null when the server was not asked.
    #[serde(flatten)]
    server: &'a ServerState,
    maintenance_file: Option<&'a Path>,
    maintenance_file_present: bool,
    /// Why the server could not be asked, if it could not.
    error: Option<String>,
}

/// The JSON body (one object and a newline).
pub fn json(snap: &Snapshot, policy: &Policy, maintenance: Option<&Path>, server: &str) -> String {
    let error = match &snap.verdict {
        super::health::Verdict::CheckFailed(e) => Some(e.to_string()),
        _ => None,
    };
    let not_asked = ServerState::default();
    let report = JsonReport {
        healthy: snap.verdict.is_healthy(),
        status: snap.verdict.http_status(),
        code: snap.verdict.code(),
        reason: snap.verdict.message(),
        server,
        inputs: Inputs {
            server: snap.state.as_ref().unwrap_or(&not_asked),
            maintenance_file: maintenance,
            maintenance_file_present: snap.maintenance_present,
            error,
        },
        policy,
        checked_at_ms: snap
            .checked_at
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_millis()),
        age_ms: Instant::now()
            .saturating_duration_since(snap.checked_instant)
            .as_millis(),
        check_took_ms: (snap.took.as_secs_f64() * 1e6).round() / 1e3,
        checks: snap.checks,
    };
    let mut s = serde_json::to_string(&report).unwrap_or_else(|e| {
        // Serialising plain structs cannot fail; if it ever does, say so in JSON.
        format!("{{\"healthy\":false,\"reason\":\"cannot render report: {e}\"}}")
    });
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::health::{decide, Observation};

    #[test]
    fn the_json_report_holds_every_input() {
        let mut snap = Snapshot::pending();
        let state = ServerState {
            wsrep_cluster_status: Some("Primary".into()),
            wsrep_ready: Some("ON".into()),
            wsrep_local_state: Some(2),
            wsrep_local_state_comment: Some("Donor/Desynced".into()),
            wsrep_local_recv_queue: Some(0),
            read_only: Some(false),
            ..ServerState::default()
        };
        let policy = Policy::default();
        snap.verdict = decide(&Observation::Server(state.clone()), None, &policy);
        snap.state = Some(state);
        let body = json(&snap, &policy, Some(Path::new("/m")), "unix:/s");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["healthy"], false);
        assert_eq!(v["status"], 503);
        assert_eq!(v["code"], "not_synced");
        assert_eq!(v["inputs"]["wsrep_local_state"], 2);
        assert_eq!(v["inputs"]["wsrep_cluster_status"], "Primary");
        assert_eq!(v["inputs"]["read_only"], false);
        assert_eq!(v["inputs"]["maintenance_file"], "/m");
        assert_eq!(v["inputs"]["maintenance_file_present"], false);
        assert!(v["inputs"]["error"].is_null());
        assert_eq!(v["policy"]["available_when_donor"], false);
        assert!(v["policy"]["max_recv_queue"].is_null());
        assert_eq!(v["server"], "unix:/s");
        assert!(body.ends_with("}\n"));
    }
}
