//! The run's timeline: what the harness did (fault injected, node back)
//! and what the balancer reported (server down, address moved), each with
//! its time since the run began; and every line the balancer printed, kept
//! in a log file for the report's raw folder.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;

/// Events kept per run: a run logs a few dozen; this bound only guards
/// against a balancer that floods its log.
const MAX_EVENTS: usize = 10_000;

#[derive(Debug, Clone, Serialize)]
pub struct Event {
    pub at_ms: u64,
    pub source: String,
    pub what: String,
}

#[derive(Clone)]
pub struct Events {
    t0: Instant,
    list: Arc<Mutex<Vec<Event>>>,
    log: Arc<Mutex<Option<File>>>,
}

impl Events {
    /// A timeline starting at `t0`, raw lines appended to `log_path`.
    pub fn new(t0: Instant, log_path: &Path) -> Events {
        Events {
            t0,
            list: Arc::new(Mutex::new(Vec::new())),
            log: Arc::new(Mutex::new(File::create(log_path).ok())),
        }
    }

    pub fn now_ms(&self) -> u64 {
        self.t0.elapsed().as_millis() as u64
    }

    /// Adds an event to the timeline (and the log).
    pub fn push(&self, source: &str, what: &str) {
        let at_ms = self.now_ms();
        self.log(source, &format!("EVENT {what}"));
        let mut list = self.list.lock().unwrap_or_else(|p| p.into_inner());
        if list.len() < MAX_EVENTS {
            list.push(Event {
                at_ms,
                source: source.to_string(),
                what: what.to_string(),
            });
        }
    }

    /// A raw line for the log file only.
    pub fn log(&self, source: &str, line: &str) {
        let at = self.now_ms();
        if let Some(f) = self.log.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            let _ = writeln!(f, "{:>9.3} {source}: {line}", at as f64 / 1000.0);
        }
    }

    /// Events from `from_ms` on, in order.
    pub fn since(&self, from_ms: u64) -> Vec<Event> {
        let list = self.list.lock().unwrap_or_else(|p| p.into_inner());
        list.iter()
            .filter(|e| e.at_ms >= from_ms)
            .cloned()
            .collect()
    }
}
