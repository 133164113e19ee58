//! A client: one connection at a time to one node, running transactions
//! one after the other and recording each as a [`Txn`].
//!
//! Outcomes follow Jepsen's rules. A transaction that failed before its
//! COMMIT was sent did not commit (the server rolls back an open
//! transaction when its connection goes). At COMMIT, only errors that
//! say the transaction was rolled back count as [`Outcome::Fail`]; a lost
//! connection, a timeout or any other error is [`Outcome::Unknown`], and
//! the client continues as a new process on a new connection.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lockstep_history::{Mop, Outcome, Txn};
use lockstep_testkit::{Error, Session};

use crate::workload::{self, Counters, Workload};
use lockstep_core::rng::Rng;

/// How long one statement may take before the client gives up on it.
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(10);
/// Wait before reconnecting to a node that is down or refused.
const RECONNECT: Duration = Duration::from_millis(300);
/// Wait after a failed transaction (a non-Primary node fails at once).
const AFTER_FAILURE: Duration = Duration::from_millis(50);

/// MariaDB errors that mean the transaction was rolled back: deadlock
/// (a certification conflict or brute-force abort), lock wait timeout,
/// "record has changed since last read" (snapshot isolation), and
/// "WSREP has not yet prepared node" (the statement was refused).
const ROLLED_BACK: &[u32] = &[1213, 1205, 1020, 1047];

/// What every client of a run shares.
#[derive(Debug)]
pub struct Shared {
    pub t0: Instant,
    pub stop: AtomicBool,
    pub history: Mutex<Vec<Txn>>,
    pub counters: Counters,
    /// Registers in the register workload.
    pub registers: u64,
    /// Pause between two transactions of one client.
    pub pace: Duration,
    next_id: AtomicU64,
    next_process: AtomicU32,
}

impl Shared {
    pub fn new(registers: u64, pace: Duration) -> Shared {
        Shared {
            t0: Instant::now(),
            stop: AtomicBool::new(false),
            history: Mutex::new(Vec::new()),
            counters: Counters::default(),
            registers,
            pace,
            next_id: AtomicU64::new(1),
            next_process: AtomicU32::new(0),
        }
    }

    /// Microseconds since the run began.
    pub fn now_us(&self) -> u64 {
        self.t0.elapsed().as_micros() as u64
    }

    pub fn new_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn new_process(&self) -> u32 {
        self.next_process.fetch_add(1, Ordering::Relaxed)
    }

    pub fn record(&self, txn: Txn) {
        self.history
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(txn);
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// Where a client connects and what it runs.
#[derive(Debug, Clone)]
pub struct ClientSpec {
    pub node: u32,
    pub node_name: String,
    pub socket: PathBuf,
    pub workload: Workload,
    pub seed: u64,
}

/// Runs transactions until `shared.stop`; returns how many it attempted.
pub fn run_client(spec: ClientSpec, shared: Arc<Shared>) -> u64 {
    let mut rng = Rng::new(spec.seed);
    let mut session: Option<Session> = None;
    let mut process = shared.new_process();
    let mut attempted = 0;
    while !shared.stopped() {
        let Some(s) = session.as_mut() else {
            session = connect(&spec);
            if session.is_none() {
                std::thread::sleep(RECONNECT);
            }
            continue;
        };
        let mops = workload::next_txn(spec.workload, &mut rng, &shared.counters, shared.registers);
        let invoke_us = shared.now_us();
        let done = execute(s, mops);
        attempted += 1;
        shared.record(Txn {
            id: shared.new_id(),
            process,
            node: spec.node,
            invoke_us,
            complete_us: shared.now_us(),
            outcome: done.outcome,
            mops: done.mops,
            is_final: false,
            error: done.error,
        });
        if done.connection_lost {
            session = None;
        }
        if done.outcome == Outcome::Unknown {
            // The old transaction may still be in flight: a new process.
            process = shared.new_process();
        }
        if done.outcome != Outcome::Ok {
            std::thread::sleep(AFTER_FAILURE);
        }
        std::thread::sleep(shared.pace);
    }
    attempted
}

/// A connection with causal reads and a bounded lock wait.
fn connect(spec: &ClientSpec) -> Option<Session> {
    let mut s = Session::open(&spec.node_name, &spec.socket, STATEMENT_TIMEOUT).ok()?;
    s.sql("SET SESSION wsrep_sync_wait = 1, innodb_lock_wait_timeout = 5")
        .ok()?;
    Some(s)
}

struct Done {
    outcome: Outcome,
    mops: Vec<Mop>,
    error: Option<String>,
    connection_lost: bool,
}

/// The client lost its connection or gave up waiting: the session is
/// unusable from now on.
fn connection_lost(e: &Error) -> bool {
    match e {
        Error::Sql { code: None, .. } => true,
        // Client-side errors (2002 can't connect, 2006 gone away, 2013
        // lost during query), and a server shutting down.
        Error::Sql { code: Some(c), .. } => (2000..3000).contains(c) || *c == 1053 || *c == 1927,
        _ => true,
    }
}

/// Names the statement that failed in the error's message: `mop 2`.
fn at_statement(e: Error, mop: usize) -> Error {
    match e {
        Error::Sql {
            node,
            sql,
            code,
            message,
        } => Error::Sql {
            node,
            sql,
            code,
            message: format!("mop {mop}: {message}"),
        },
        other => other,
    }
}

fn short(e: &Error) -> String {
    e.to_string()
        .lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(200)
        .collect()
}

/// Runs one transaction statement by statement.
fn execute(s: &mut Session, mut mops: Vec<Mop>) -> Done {
    let fail = |mops, e: &Error| Done {
        outcome: Outcome::Fail,
        mops,
        error: Some(short(e)),
        connection_lost: connection_lost(e),
    };
    if let Err(e) = s.sql("START TRANSACTION") {
        return fail(mops, &at_statement(e, 0));
    }
    for i in 0..mops.len() {
        match s.sql(&workload::sql_of(&mops[i])) {
            Ok(out) => match &mut mops[i] {
                Mop::Read { values, .. } => *values = Some(workload::parse_list(&out)),
                Mop::RegRead { value, .. } => {
                    *value = Some(out.trim().parse().unwrap_or(u64::MAX));
                }
                Mop::Append { .. } | Mop::RegWrite { .. } => {}
            },
            Err(e) => {
                let e = at_statement(e, i + 1);
                let lost = connection_lost(&e);
                if !lost && s.sql("ROLLBACK").is_err() {
                    return Done {
                        connection_lost: true,
                        ..fail(mops, &e)
                    };
                }
                return fail(mops, &e);
            }
        }
    }
    match s.sql_ending("COMMIT") {
        Ok(_) => Done {
            outcome: Outcome::Ok,
            mops,
            error: None,
            connection_lost: s.is_broken(),
        },
        Err(e) => {
            let rolled_back =
                matches!(&e, Error::Sql { code: Some(c), .. } if ROLLED_BACK.contains(c));
            Done {
                outcome: if rolled_back {
                    Outcome::Fail
                } else {
                    Outcome::Unknown
                },
                mops,
                error: Some(format!("COMMIT: {}", short(&e))),
                connection_lost: connection_lost(&e) || !rolled_back,
            }
        }
    }
}
