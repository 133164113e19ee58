//! The health decision: a pure function from what the server reported (or
//! why it could not be asked), the maintenance file and the operator's
//! policy, to a verdict with a one-line reason. No I/O, no clock: every rule
//! is unit-tested below.

use std::path::PathBuf;

use serde::Serialize;

use crate::mariadb::DbError;

/// `wsrep_local_state` values (Galera's numbering, which Lockstep keeps).
pub const STATE_JOINING: u32 = 1;
pub const STATE_DONOR_DESYNCED: u32 = 2;
pub const STATE_JOINED: u32 = 3;
pub const STATE_SYNCED: u32 = 4;

/// The server variables the decision reads; `None` when not reported.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ServerState {
    pub wsrep_cluster_status: Option<String>,
    pub wsrep_ready: Option<String>,
    pub wsrep_connected: Option<String>,
    pub wsrep_local_state: Option<u32>,
    pub wsrep_local_state_comment: Option<String>,
    pub wsrep_local_recv_queue: Option<u64>,
    /// Global variable; absent on servers older than 10.1.
    pub wsrep_reject_queries: Option<String>,
    /// Global variable `read_only`.
    pub read_only: Option<bool>,
    /// Every `wsrep_%` status row as read (for `/metrics`).
    #[serde(skip)]
    pub wsrep: Vec<(String, String)>,
}

/// What one refresh produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observation {
    Server(ServerState),
    Failed(DbError),
}

/// The operator's choices (command-line flags).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Policy {
    /// `--available-when-donor`: Donor/Desynced (state 2) counts as healthy.
    pub available_when_donor: bool,
    /// `--disable-when-readonly`: `read_only=ON` makes the node unhealthy.
    pub disable_when_readonly: bool,
    /// `--max-recv-queue N`: a longer `wsrep_local_recv_queue` is unhealthy.
    pub max_recv_queue: Option<u64>,
}

/// The outcome, most urgent rule first. `Synced` and `DonorAllowed` are the
/// only healthy ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Pending,
    Maintenance {
        path: PathBuf,
    },
    /// The server could not be asked (connect, login, timeout, query).
    CheckFailed(DbError),
    /// The wsrep status variables are missing: not a cluster node.
    NotWsrep {
        missing: Vec<&'static str>,
    },
    NotPrimary {
        cluster_status: String,
    },
    NotReady {
        ready: String,
    },
    NotSynced {
        state: u32,
        comment: String,
    },
    DonorAllowed {
        comment: String,
    },
    RejectingQueries {
        value: String,
    },
    ReadOnly,
    RecvQueueTooLong {
        len: u64,
        max: u64,
    },
    Synced,
}

/// The exit status of `check --once`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    Healthy = 0,
    Unhealthy = 1,
    Unreachable = 2,
}

impl Verdict {
    pub fn is_healthy(&self) -> bool {
        matches!(self, Verdict::Synced | Verdict::DonorAllowed { .. })
    }

    /// HTTP status: 200 healthy, 503 otherwise.
    pub fn http_status(&self) -> u16 {
        if self.is_healthy() {
            200
        } else {
            503
        }
    }

    pub fn exit_status(&self) -> ExitStatus {
        match self {
            v if v.is_healthy() => ExitStatus::Healthy,
            Verdict::CheckFailed(e) if e.is_unreachable() => ExitStatus::Unreachable,
            _ => ExitStatus::Unhealthy,
        }
    }

    /// A stable machine-readable name of the rule that decided.
    pub fn code(&self) -> &'static str {
        match self {
            Verdict::Pending => "pending",
            Verdict::Maintenance { .. } => "maintenance",
            Verdict::CheckFailed(e) if e.is_unreachable() => "unreachable",
            Verdict::CheckFailed(DbError::Timeout { .. }) => "timeout",
            Verdict::CheckFailed(_) => "check_failed",
            Verdict::NotWsrep { .. } => "not_wsrep",
            Verdict::NotPrimary { .. } => "not_primary",
            Verdict::NotReady { .. } => "not_ready",
            Verdict::NotSynced { .. } => "not_synced",
            Verdict::DonorAllowed { .. } => "donor_allowed",
            Verdict::RejectingQueries { .. } => "rejecting_queries",
            Verdict::ReadOnly => "read_only",
            Verdict::RecvQueueTooLong { .. } => "recv_queue",
            Verdict::Synced => "synced",
        }
    }

    /// The one-line body, clustercheck style ("Node is synced.").
    pub fn message(&self) -> String {
        match self {
            Verdict::Pending => "No health check has completed yet.".into(),
            Verdict::Maintenance { path } => {
                format!("Node is in maintenance: {} exists.", path.display())
            }
            Verdict::CheckFailed(e) => format!("Node is unavailable: {e}."),
            Verdict::NotWsrep { missing } => format!(
                "Node is not a cluster member: {} not reported (wsrep_on=OFF or no provider?).",
                missing.join(", ")
            ),
            Verdict::NotPrimary { cluster_status } => format!(
                "Node is not in the Primary component: wsrep_cluster_status={cluster_status}."
            ),
            Verdict::NotReady { ready } => format!("Node is not ready: wsrep_ready={ready}."),
            Verdict::NotSynced { state, comment } => {
                format!("Node is not synced: {comment} (wsrep_local_state={state}).")
            }
            Verdict::DonorAllowed { comment } => format!(
                "Node is {comment} (wsrep_local_state=2); available (--available-when-donor)."
            ),
            Verdict::RejectingQueries { value } => {
                format!("Node rejects queries: wsrep_reject_queries={value}.")
            }
            Verdict::ReadOnly => {
                "Node is read-only: read_only=ON (--disable-when-readonly).".into()
            }
            Verdict::RecvQueueTooLong { len, max } => format!(
                "Node is lagging: wsrep_local_recv_queue={len} exceeds --max-recv-queue {max}."
            ),
            Verdict::Synced => "Node is synced.".into(),
        }
    }
}

/// Galera's name for a `wsrep_local_state` number.
pub fn state_name(state: u32) -> &'static str {
    match state {
        STATE_JOINING => "Joining",
        STATE_DONOR_DESYNCED => "Donor/Desynced",
        STATE_JOINED => "Joined",
        STATE_SYNCED => "Synced",
        _ => "Initialized",
    }
}

/// The decision. `maintenance` is the maintenance file if it exists.
pub fn decide(obs: &Observation, maintenance: Option<&PathBuf>, policy: &Policy) -> Verdict {
    // The operator's explicit "take me out" wins over anything the server says.
    if let Some(path) = maintenance {
        return Verdict::Maintenance { path: path.clone() };
    }
    let s = match obs {
        Observation::Failed(e) => return Verdict::CheckFailed(e.clone()),
        Observation::Server(s) => s,
    };
    let mut missing = Vec::new();
    if s.wsrep_cluster_status.is_none() {
        missing.push("wsrep_cluster_status");
    }
    if s.wsrep_ready.is_none() {
        missing.push("wsrep_ready");
    }
    if s.wsrep_local_state.is_none() {
        missing.push("wsrep_local_state");
    }
    if s.wsrep_local_recv_queue.is_none() && policy.max_recv_queue.is_some() {
        missing.push("wsrep_local_recv_queue");
    }
    let (Some(cluster_status), Some(ready), Some(state)) = (
        s.wsrep_cluster_status.as_deref(),
        s.wsrep_ready.as_deref(),
        s.wsrep_local_state,
    ) else {
        return Verdict::NotWsrep { missing };
    };
    if !missing.is_empty() {
        return Verdict::NotWsrep { missing };
    }
    if !cluster_status.eq_ignore_ascii_case("Primary") {
        return Verdict::NotPrimary {
            cluster_status: cluster_status.to_string(),
        };
    }
    if !ready.eq_ignore_ascii_case("ON") {
        return Verdict::NotReady {
            ready: ready.to_string(),
        };
    }
    let comment = s
        .wsrep_local_state_comment
        .clone()
        .unwrap_or_else(|| state_name(state).to_string());
    let donor_ok = state == STATE_DONOR_DESYNCED && policy.available_when_donor;
    if state != STATE_SYNCED && !donor_ok {
        return Verdict::NotSynced { state, comment };
    }
    if let Some(value) = &s.wsrep_reject_queries {
        if !value.eq_ignore_ascii_case("NONE") {
            return Verdict::RejectingQueries {
                value: value.clone(),
            };
        }
    }
    if policy.disable_when_readonly && s.read_only == Some(true) {
        return Verdict::ReadOnly;
    }
    if let (Some(max), Some(len)) = (policy.max_recv_queue, s.wsrep_local_recv_queue) {
        if len > max {
            return Verdict::RecvQueueTooLong { len, max };
        }
    }
    if donor_ok {
        Verdict::DonorAllowed { comment }
    } else {
        Verdict::Synced
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn synced() -> ServerState {
        ServerState {
            wsrep_cluster_status: Some("Primary".into()),
            wsrep_ready: Some("ON".into()),
            wsrep_connected: Some("ON".into()),
            wsrep_local_state: Some(4),
            wsrep_local_state_comment: Some("Synced".into()),
            wsrep_local_recv_queue: Some(0),
            wsrep_reject_queries: Some("NONE".into()),
            read_only: Some(false),
            wsrep: Vec::new(),
        }
    }

    fn verdict(s: ServerState, policy: &Policy) -> Verdict {
        decide(&Observation::Server(s), None, policy)
    }

    fn donor() -> ServerState {
        ServerState {
            wsrep_local_state: Some(2),
            wsrep_local_state_comment: Some("Donor/Desynced".into()),
            ..synced()
        }
    }

    #[test]
    fn a_synced_primary_ready_node_is_healthy() {
        let v = verdict(synced(), &Policy::default());
        assert_eq!(v, Verdict::Synced);
        assert!(v.is_healthy());
        assert_eq!(v.http_status(), 200);
        assert_eq!(v.exit_status(), ExitStatus::Healthy);
        assert_eq!(v.message(), "Node is synced.");
    }

    #[test]
    fn a_donor_is_unhealthy_unless_available_when_donor() {
        let v = verdict(donor(), &Policy::default());
        assert_eq!(
            v.message(),
            "Node is not synced: Donor/Desynced (wsrep_local_state=2)."
        );
        assert_eq!(v.http_status(), 503);
        assert_eq!(v.exit_status(), ExitStatus::Unhealthy);
        let p = Policy {
            available_when_donor: true,
            ..Policy::default()
        };
        let v = verdict(donor(), &p);
        assert!(v.is_healthy(), "{v:?}");
        assert_eq!(v.code(), "donor_allowed");
        assert!(v.message().contains("--available-when-donor"));
    }

    #[test]
    fn joining_and_joined_are_never_healthy_even_for_donor_policy() {
        let p = Policy {
            available_when_donor: true,
            ..Policy::default()
        };
        for (state, name) in [(1, "Joining"), (3, "Joined"), (0, "Initialized")] {
            let s = ServerState {
                wsrep_local_state: Some(state),
                wsrep_local_state_comment: None,
                ..synced()
            };
            let v = verdict(s, &p);
            assert_eq!(
                v,
                Verdict::NotSynced {
                    state,
                    comment: name.into()
                }
            );
        }
    }

    #[test]
    fn non_primary_is_unhealthy_and_checked_before_the_state() {
        let s = ServerState {
            wsrep_cluster_status: Some("non-Primary".into()),
            wsrep_ready: Some("OFF".into()),
            wsrep_local_state: Some(1),
            ..synced()
        };
        let v = verdict(s, &Policy::default());
        assert_eq!(v.code(), "not_primary");
        assert_eq!(
            v.message(),
            "Node is not in the Primary component: wsrep_cluster_status=non-Primary."
        );
    }

    #[test]
    fn not_ready_is_unhealthy() {
        let s = ServerState {
            wsrep_ready: Some("OFF".into()),
            ..synced()
        };
        assert_eq!(
            verdict(s, &Policy::default()).message(),
            "Node is not ready: wsrep_ready=OFF."
        );
    }

    #[test]
    fn rejecting_queries_is_unhealthy_whatever_the_value() {
        for value in ["ALL", "ALL_KILL"] {
            let s = ServerState {
                wsrep_reject_queries: Some(value.into()),
                ..synced()
            };
            let v = verdict(s, &Policy::default());
            assert_eq!(
                v,
                Verdict::RejectingQueries {
                    value: value.into()
                }
            );
        }
        // Servers without the variable are not penalised.
        let s = ServerState {
            wsrep_reject_queries: None,
            ..synced()
        };
        assert!(verdict(s, &Policy::default()).is_healthy());
    }

    #[test]
    fn read_only_matters_only_with_disable_when_readonly() {
        let ro = ServerState {
            read_only: Some(true),
            ..synced()
        };
        assert!(verdict(ro.clone(), &Policy::default()).is_healthy());
        let p = Policy {
            disable_when_readonly: true,
            ..Policy::default()
        };
        let v = verdict(ro, &p);
        assert_eq!(v, Verdict::ReadOnly);
        assert_eq!(v.http_status(), 503);
        assert!(verdict(synced(), &p).is_healthy());
    }

    #[test]
    fn a_long_receive_queue_is_unhealthy_only_past_the_limit() {
        let s = |len| ServerState {
            wsrep_local_recv_queue: Some(len),
            ..synced()
        };
        let p = Policy {
            max_recv_queue: Some(10),
            ..Policy::default()
        };
        assert!(verdict(s(10), &p).is_healthy());
        let v = verdict(s(11), &p);
        assert_eq!(v, Verdict::RecvQueueTooLong { len: 11, max: 10 });
        assert!(v.message().contains("--max-recv-queue 10"));
        assert!(verdict(s(1_000_000), &Policy::default()).is_healthy());
    }

    #[test]
    fn the_maintenance_file_wins_over_everything() {
        let path = PathBuf::from("/etc/lockstep/maintenance");
        for obs in [
            Observation::Server(synced()),
            Observation::Failed(DbError::Connect {
                endpoint: "x".into(),
                reason: "y".into(),
            }),
        ] {
            let v = decide(&obs, Some(&path), &Policy::default());
            assert_eq!(v.code(), "maintenance");
            assert_eq!(v.exit_status(), ExitStatus::Unhealthy);
            assert_eq!(
                v.message(),
                "Node is in maintenance: /etc/lockstep/maintenance exists."
            );
        }
    }

    #[test]
    fn pending_until_the_first_check() {
        let v = Verdict::Pending;
        assert_eq!(v.http_status(), 503);
        assert_eq!(v.message(), "No health check has completed yet.");
    }

    #[test]
    fn failures_say_why_and_login_failures_exit_2() {
        let refused = DbError::Connect {
            endpoint: "127.0.0.1:3306".into(),
            reason: "connection refused (is mariadbd running and listening there?)".into(),
        };
        let v = decide(&Observation::Failed(refused), None, &Policy::default());
        assert_eq!(v.exit_status(), ExitStatus::Unreachable);
        assert_eq!(v.code(), "unreachable");
        assert!(v
            .message()
            .starts_with("Node is unavailable: cannot connect"));
        let hung = DbError::Timeout {
            endpoint: "h:1".into(),
            what: "reading wsrep status",
            after: Duration::from_millis(2000),
        };
        let v = decide(&Observation::Failed(hung), None, &Policy::default());
        assert_eq!(v.code(), "timeout");
        assert_eq!(v.exit_status(), ExitStatus::Unhealthy);
        assert!(v.message().contains("did not answer within 2000 ms"));
    }

    #[test]
    fn a_server_without_wsrep_is_not_a_cluster_member() {
        let v = verdict(ServerState::default(), &Policy::default());
        assert_eq!(
            v,
            Verdict::NotWsrep {
                missing: vec!["wsrep_cluster_status", "wsrep_ready", "wsrep_local_state"]
            }
        );
        let s = ServerState {
            wsrep_local_recv_queue: None,
            ..synced()
        };
        let p = Policy {
            max_recv_queue: Some(1),
            ..Policy::default()
        };
        assert_eq!(verdict(s, &p).code(), "not_wsrep");
    }

    #[test]
    fn rules_apply_in_order_primary_ready_state_reject_readonly_queue() {
        let p = Policy {
            available_when_donor: false,
            disable_when_readonly: true,
            max_recv_queue: Some(0),
        };
        let mut s = ServerState {
            wsrep_cluster_status: Some("non-Primary".into()),
            wsrep_ready: Some("OFF".into()),
            wsrep_local_state: Some(2),
            wsrep_local_state_comment: Some("Donor/Desynced".into()),
            wsrep_local_recv_queue: Some(5),
            wsrep_reject_queries: Some("ALL".into()),
            read_only: Some(true),
            wsrep_connected: Some("ON".into()),
            wsrep: Vec::new(),
        };
        let mut seen = Vec::new();
        loop {
            let v = verdict(s.clone(), &p);
            seen.push(v.code());
            match v {
                Verdict::NotPrimary { .. } => s.wsrep_cluster_status = Some("Primary".into()),
                Verdict::NotReady { .. } => s.wsrep_ready = Some("ON".into()),
                Verdict::NotSynced { .. } => s.wsrep_local_state = Some(4),
                Verdict::RejectingQueries { .. } => s.wsrep_reject_queries = Some("NONE".into()),
                Verdict::ReadOnly => s.read_only = Some(false),
                Verdict::RecvQueueTooLong { .. } => s.wsrep_local_recv_queue = Some(0),
                _ => break,
            }
        }
        assert_eq!(
            seen,
            [
                "not_primary",
                "not_ready",
                "not_synced",
                "rejecting_queries",
                "read_only",
                "recv_queue",
                "synced"
            ]
        );
    }
}
