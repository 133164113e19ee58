//! Every thread's stack of a live `mariadbd`, taken with gdb before a hung
//! node is killed: a shutdown hang is a bug, and the stacks say where each
//! thread waited, which the error log cannot (the jepsen clock nemesis hit
//! one that no log line explained).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// gdb gets this long to attach and print; a gdb that hangs too is killed.
const GDB_DEADLINE: Duration = Duration::from_secs(60);
/// At most this many frames of one thread in the summary.
const FRAMES_SHOWN: usize = 12;
/// At most this many threads in the summary (the file has them all).
const THREADS_SHOWN: usize = 16;
/// A frame's line in the summary is cut here (gdb prints every argument).
const FRAME_CHARS: usize = 160;
/// A thread is in the summary when a frame names one of these: the
/// provider's code, the server's wsrep glue, or its shutdown path.
const SHOWN_IF_NAMED: [&str; 4] = ["lockstep", "wsrep", "close_connections", "kill_server"];

/// What [`take`] found: the whole dump's file and a summary of the threads
/// that were in Lockstep or wsrep code.
#[derive(Debug, Clone)]
pub struct Stacks {
    pub file: PathBuf,
    pub summary: String,
}

/// Dumps every thread of `pid` into `dir/stacks-<pid>.txt`. `None` when
/// gdb is missing or failed: the caller kills the node either way.
pub fn take(pid: u32, dir: &Path) -> Option<Stacks> {
    let mut child = Command::new("gdb")
        .args(["--batch", "--nx", "-p", &pid.to_string()])
        .args(["-ex", "set pagination off", "-ex", "thread apply all bt"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut stdout = child.stdout.take()?;
    // Read on a thread so that a full pipe cannot stall gdb while we wait.
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });
    let t0 = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if t0.elapsed() < GDB_DEADLINE => {
                std::thread::sleep(Duration::from_millis(100))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
        }
    }
    let dump = reader.join().ok()?;
    if !dump.contains("Thread ") {
        return None;
    }
    let file = dir.join(format!("stacks-{pid}.txt"));
    std::fs::write(&file, &dump).ok()?;
    Some(Stacks {
        file,
        summary: summarize(&dump),
    })
}

/// The threads with a frame in [`SHOWN_IF_NAMED`], each cut to its top
/// frames; the server's idle threads would bury them.
fn summarize(dump: &str) -> String {
    let mut out = String::new();
    let mut shown = 0;
    for thread in dump.split("\nThread ").skip(1) {
        if !SHOWN_IF_NAMED.iter().any(|name| thread.contains(name)) {
            continue;
        }
        if shown == THREADS_SHOWN {
            out.push_str("(more in the file)\n");
            break;
        }
        shown += 1;
        let mut lines = thread.lines();
        if let Some(header) = lines.next() {
            out.push_str("Thread ");
            out.push_str(header);
            out.push('\n');
        }
        for frame in lines.filter(|l| l.starts_with('#')).take(FRAMES_SHOWN) {
            out.push_str("  ");
            out.extend(frame.chars().take(FRAME_CHARS));
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_keeps_only_threads_in_our_code_cut_to_their_top_frames() {
        let mut dump = String::from("preamble\n");
        dump.push_str("\nThread 3 (LWP 12 \"mariadbd\"):\n#0 poll ()\n#1 handle_connections ()\n");
        dump.push_str("\nThread 2 (LWP 11 \"lockstep-loop\"):\n");
        for i in 0..20 {
            dump.push_str(&format!("#{i} lockstep_provider::f{i} ()\n"));
        }
        let s = summarize(&dump);
        assert!(s.starts_with("Thread 2 (LWP 11"), "{s}");
        assert!(!s.contains("handle_connections"), "{s}");
        assert!(s.contains("f11"), "{s}");
        assert!(!s.contains("f12"), "{s}");
    }

    #[test]
    fn a_live_process_gives_its_stacks() {
        let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
        let dir = std::env::temp_dir();
        let got = take(sleeper.id(), &dir);
        let _ = sleeper.kill();
        let _ = sleeper.wait();
        let got = got.expect("gdb attached to a live process");
        let dump = std::fs::read_to_string(&got.file).unwrap();
        let _ = std::fs::remove_file(&got.file);
        assert!(dump.contains("#0"), "{dump}");
    }
}
