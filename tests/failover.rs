//! The short failover run of `make test` (issue 54): `lockstep failover-bench`
//! puts Debian's HAProxy with README's single-writer configuration in front
//! of three Lockstep nodes on loopback, an application writes through it,
//! and the writer is killed with `kill -9`. The writes must move to the
//! first backup within HAProxy's detection time, no acknowledged write may
//! be lost on any node, and no write may be answered by a node that was not
//! Synced and Primary. `make failover-bench` runs every layout and fault
//! with Galera beside (docs/failover.md).

#[path = "support/operator.rs"]
mod operator;

use operator::{lockstep, scratch};

#[test]
fn kill_9_of_the_writer_behind_haproxy_moves_the_writes_and_loses_none() {
    let dir = scratch();
    let out = dir.path().join("failover");
    let run = lockstep(&[
        "failover-bench",
        "--providers",
        "lockstep",
        "--layouts",
        "haproxy-writer",
        "--faults",
        "kill",
        "--down-secs",
        "5",
        "--no-netns",
        "--out",
        out.to_str().unwrap(),
    ]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(run.status.code(), Some(0), "failover-bench failed:\n{text}");

    let json = std::fs::read_to_string(out.join("results.json")).expect("results.json");
    let runs: serde_json::Value = serde_json::from_str(&json).expect("results.json parses");
    let runs = runs.as_array().expect("a list of runs");
    assert_eq!(runs.len(), 1, "{json}");
    let layout = &runs[0];
    assert_eq!(layout["layout"], "HaproxyWriter");
    assert!(layout["error"].is_null(), "{json}");
    let faults = layout["faults"].as_array().expect("faults");
    assert_eq!(faults.len(), 1, "{json}");
    let kill = &faults[0];
    assert_eq!(kill["fault"], "Kill");
    assert!(kill["error"].is_null(), "{json}");
    let r = &kill["result"];

    // The writer's death was seen, and the writes moved to the backup.
    let failed: u64 = r["failed"]
        .as_object()
        .expect("failed by code")
        .values()
        .map(|v| v.as_u64().unwrap_or(0))
        .sum();
    assert!(
        failed >= 1,
        "no statement failed: was node1 killed?\n{json}"
    );
    let on_node2 = r["answered_by"]["node2"].as_u64().unwrap_or(0);
    assert!(on_node2 > 0, "no write reached the first backup:\n{json}");
    let outage = r["outage_ms"].as_u64().expect("an outage was measured");
    assert!(
        outage < 30_000,
        "the writes took {outage} ms to move (HAProxy detects in ~5 s):\n{text}"
    );

    // Nothing acknowledged is missing anywhere, nothing answered by a node
    // that was not Synced and Primary.
    assert!(r["lost"].as_object().unwrap().is_empty(), "lost: {json}");
    assert!(
        r["bad_answers"].as_object().unwrap().is_empty(),
        "bad answers: {json}"
    );
    assert!(r["succeeded"].as_u64().unwrap_or(0) > 100, "{json}");

    // The report and the timeline were written.
    let report = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(report.contains("| kill | lockstep |"), "{report}");
    let plot = out.join("raw/haproxy-writer-lockstep/kill.png");
    let png = std::fs::read(&plot).expect("the timeline plot");
    assert!(
        png.starts_with(b"\x89PNG"),
        "{} is not a PNG",
        plot.display()
    );
}
