//! The helper processes of a run (HAProxy, keepalived, checks, sysbench):
//! their output read line by line, and their end when the run drops them.

use std::io::{BufRead, BufReader, Read};
use std::process::Child;

use super::events::Events;

/// A child's stdout and stderr, each taken once, boxed alike so that one
/// reader loop serves both.
pub fn output_pipes(child: &mut Child) -> [Option<Box<dyn Read + Send>>; 2] {
    [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    ]
}

/// What a helper's log line means for the timeline, if anything.
pub type LineEvent = fn(&str) -> Option<String>;

/// A [`LineEvent`] for output that only goes to the log.
pub fn log_only(_: &str) -> Option<String> {
    None
}

/// Reads `pipe` on a thread of its own until it closes: every line goes to
/// the run's log under `source`, and what `event` makes of a line (if
/// anything) to the timeline.
pub fn follow(pipe: Box<dyn Read + Send>, events: Events, source: String, event: LineEvent) {
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if let Some(what) = event(&line) {
                events.push(&source, &what);
            }
            events.log(&source, &line);
        }
    });
}

/// A child killed and reaped when dropped.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
