//! README's first screen, run as a new user would (issue 51): the quick
//! start's shell block, line by line exactly as README shows it, with only
//! the cluster directory moved to a scratch directory of this test and the
//! load shortened (`DEMO_SECONDS`). Its first line is `make demo`, which
//! builds (a no-op after `make test`'s build), runs `scripts/demo.sh` and so
//! starts a fresh three-node cluster on ports of its own.
//!
//! Every line must exit 0. What the lines print is checked here, not taken
//! from the script's own verdict: the demo committed transactions, every
//! node's checksums (causal reads) are equal, `lockstep status` shows three
//! Synced Primary nodes, the probe saw no stale read, README's retry loop
//! kept every acknowledged increment, and after `down` nothing runs.

#[path = "support/operator.rs"]
mod operator;

use operator::lockstep;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const DEFAULT_DIR: &str = "/tmp/lockstep-demo";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives in the workspace")
        .to_path_buf()
}

fn readme() -> String {
    std::fs::read_to_string(workspace().join("README.md")).expect("reading README.md")
}

/// The first fenced block of `lang` after the heading `heading`.
fn block_after(text: &str, heading: &str, lang: &str) -> String {
    let start = text
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("README.md has no heading {heading:?}"));
    let rest = &text[start..];
    let open = format!("```{lang}\n");
    let from = rest
        .find(&open)
        .unwrap_or_else(|| panic!("no ```{lang} block after {heading:?} in README.md"))
        + open.len();
    let len = rest[from..]
        .find("```")
        .unwrap_or_else(|| panic!("the block after {heading:?} is not closed"));
    rest[from..from + len].to_string()
}

/// The shell lines of a block: comment-only and blank lines dropped.
fn commands(block: &str) -> Vec<String> {
    block
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect()
}

/// Stops and removes the test's cluster even when an assertion fails.
struct Purge(PathBuf);

impl Drop for Purge {
    fn drop(&mut self) {
        let dir = self.0.to_str().unwrap_or_default();
        let _ = lockstep(&["down", "--dir", dir, "--purge"]);
    }
}

struct Ran {
    code: i32,
    out: String,
}

/// Runs one README line with bash in the workspace, as a user at a prompt.
fn run_line(line: &str, env: &BTreeMap<String, String>) -> Ran {
    let mut cmd = Command::new("bash");
    cmd.args(["-o", "pipefail", "-c", line])
        .current_dir(workspace())
        .stdin(Stdio::null())
        // `make test` runs this test: the inner `make demo` must not take
        // the outer make's jobserver, which is not open here.
        .env_remove("MAKEFLAGS")
        .env_remove("MFLAGS")
        .env_remove("MAKELEVEL")
        .envs(env);
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {line:?}: {e}"));
    Ran {
        code: out.status.code().unwrap_or(-1),
        out: format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

/// `make demo`: transactions committed, and the CHECKSUM TABLE line of
/// every node, compared here.
fn check_demo(out: &str) {
    let committed: u64 = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("transactions:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no sysbench transaction count in make demo's output:\n{out}"));
    assert!(committed > 0, "the demo committed nothing:\n{out}");
    for code in ["1213", "1020", "1205"] {
        assert!(
            out.lines().any(|l| l.trim_start().starts_with(code)),
            "the demo shows no count for error {code}:\n{out}"
        );
    }
    let sums: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("mysqld.sock") && l.contains("sbtest.sbtest1="))
        .map(|l| {
            l.split_once("mysqld.sock")
                .map_or("", |(_, sums)| sums.trim())
        })
        .collect();
    assert_eq!(sums.len(), 3, "a checksum line per node expected:\n{out}");
    assert!(
        sums.iter()
            .all(|s| s == &sums[0] && s.contains("sbtest.sbtest2=")),
        "the nodes' checksums differ:\n{out}"
    );
    assert!(out.contains("demo: ok"), "{out}");
}

/// `lockstep status`: three Synced Primary nodes of size 3.
fn check_status(out: &str) {
    let rows: Vec<Vec<&str>> = out
        .lines()
        .filter(|l| l.starts_with("node"))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 3, "{out}");
    for r in &rows {
        assert_eq!(r.get(3..6), Some(&["Synced", "Primary", "3"][..]), "{out}");
    }
}

#[test]
fn readme_quick_start_runs_as_shown() {
    let text = readme();
    let lines = commands(&block_after(&text, "## Quick start", "sh"));
    assert!(
        lines.first().is_some_and(|l| l.starts_with("make demo")),
        "the quick start begins with make demo: {lines:?}"
    );
    assert!(
        lines.last().is_some_and(|l| l.contains("lockstep down")),
        "the quick start ends by stopping the cluster: {lines:?}"
    );

    let tmp = tempfile::Builder::new()
        .prefix("lockstep-demo-test-")
        .tempdir_in("/tmp")
        .expect("a scratch directory");
    let dir = tmp.path().join("demo");
    let dir_str = dir.to_str().expect("a UTF-8 path").to_string();
    let _purge = Purge(dir.clone());
    let mut env = BTreeMap::from([
        ("LOCKSTEP_HOME".to_string(), dir_str.clone()),
        ("DEMO_SECONDS".to_string(), "3".to_string()),
    ]);

    let mut checked = Vec::new();
    for readme_line in &lines {
        let line = readme_line.replace(DEFAULT_DIR, &dir_str);
        if let Some(assignment) = line.strip_prefix("export ") {
            let (key, value) = assignment
                .split_whitespace()
                .next()
                .and_then(|a| a.split_once('='))
                .unwrap_or_else(|| panic!("an export README shows: {readme_line:?}"));
            env.insert(key.into(), value.into());
            continue;
        }
        let ran = run_line(&line, &env);
        eprintln!("$ {line}\n{}", ran.out);
        assert_eq!(
            ran.code, 0,
            "README's quick start line {readme_line:?} failed:\n{}",
            ran.out
        );
        if line.starts_with("make demo") {
            check_demo(&ran.out);
            checked.push("demo");
        } else if line.contains("lockstep status") {
            check_status(&ran.out);
            checked.push("status");
        } else if line.contains("lockstep probe") {
            assert!(ran.out.contains("stale reads: 0 of"), "{}", ran.out);
            checked.push("probe");
        } else if line.contains("retry.py") {
            let lost: Vec<&str> = ran
                .out
                .lines()
                .filter(|l| l.contains("lost updates"))
                .collect();
            assert_eq!(lost.len(), 3, "a counter per node:\n{}", ran.out);
            assert!(
                lost.iter().all(|l| l.contains("lost updates 0 ")),
                "{}",
                ran.out
            );
            assert!(
                ran.out.contains("600 increments acknowledged"),
                "{}",
                ran.out
            );
            checked.push("retry");
        } else if line.contains("lockstep down") {
            let (code, after) = {
                let ran = run_line("target/release/lockstep status", &env);
                (ran.code, ran.out)
            };
            assert_ne!(code, 0, "status after README's down:\n{after}");
            assert!(!dir.exists(), "--purge left {}", dir.display());
            checked.push("down");
        }
    }
    assert_eq!(
        checked,
        ["demo", "status", "probe", "retry", "down"],
        "README's quick start changed: say here what its new lines must show"
    );
}

/// README quotes the retry loop of `docs/examples/retry.py`, which the quick
/// start runs: the two must not drift apart.
#[test]
fn readme_retry_loop_is_the_one_the_example_runs() {
    let text = readme();
    let quoted = block_after(
        &text,
        "## Conflicts and retries: what an application must do",
        "python",
    );
    let example = std::fs::read_to_string(workspace().join("docs/examples/retry.py"))
        .expect("reading docs/examples/retry.py");
    assert!(quoted.contains("def in_transaction"), "{quoted}");
    assert!(
        example.contains(quoted.trim()),
        "README's retry loop is not the one in docs/examples/retry.py:\n{quoted}"
    );
}
