//! The helper processes of a run (HAProxy, keepalived, checks, sysbench):
//! their output read line by line, and their end when the run drops them.

use std::io::Read;
use std::process::Child;

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

/// A child killed and reaped when dropped.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
