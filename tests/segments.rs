//! WAN segments (`gmcast.segment`, issue 15, ADR 0020): the leader sends a
//! remote segment each log entry once, to one member there that passes it
//! on to the others of its site; a joiner takes its state from a donor of
//! its own site. Four real Lockstep nodes on loopback, two
//! per segment; the WAN is what the status counters say crossed between
//! segments.

#[path = "support/multi_node.rs"]
mod multi_node;

use std::time::{Duration, Instant};

use lockstep_testkit::{AckedLoad, Cluster, Node, Provider, WriterReport};
use multi_node::{check, fail, log_count, status, status_u64, OrLogs};

const WAIT: Duration = Duration::from_secs(60);
const INSERTS: u64 = 200;

/// Sends the segments' nodes `gmcast.segment` = their entry in `segments`,
/// with `options` (more provider options, `;`-terminated).
fn segmented(name: &str, segments: &[u8], options: &str) -> Cluster {
    let mut cluster = Cluster::builder(segments.len())
        .provider(Provider::lockstep_default())
        .cluster_name(name)
        .build()
        .unwrap_or_else(|e| panic!("building {} Lockstep nodes: {e}", segments.len()));
    for (n, segment) in cluster.nodes().iter().zip(segments) {
        let port = n.base_port();
        multi_node::edit_cnf(n, |text| {
            text.replace(
                &format!("base_port={port};"),
                &format!("base_port={port}; gmcast.segment={segment}; {options}"),
            )
        });
    }
    cluster
        .start_all()
        .unwrap_or_else(|e| fail(&cluster, &format!("starting: {e}")));
    cluster
}

/// The WAN counters of one node.
#[derive(Debug, Clone, Copy)]
struct Wan {
    applied: u64,
    entries: u64,
    bytes: u64,
    bundles: u64,
    relayed: u64,
    elided: u64,
}

fn wan(cluster: &Cluster, node: &Node) -> Wan {
    let get = |name: &str| status_u64(node, name).or_logs(cluster, name);
    Wan {
        applied: get("wsrep_lockstep_applied_index"),
        entries: get("wsrep_lockstep_wan_entries_sent"),
        bytes: get("wsrep_lockstep_wan_bytes_sent"),
        bundles: get("wsrep_lockstep_wan_bundles_sent"),
        relayed: get("wsrep_lockstep_relayed"),
        elided: get("wsrep_lockstep_echo_elided_bytes"),
    }
}

/// Waits until the cluster runs the protocol version that has relays.
fn await_relay_version(cluster: &Cluster) {
    let t0 = Instant::now();
    while cluster.nodes().iter().any(|n| {
        n.is_running()
            && status(n, "wsrep_lockstep_protocol_version")
                .is_ok_and(|v| v.parse::<u32>().is_ok_and(|v| v < 9))
    }) {
        check(cluster, t0.elapsed() < WAIT, || {
            "the cluster did not switch to protocol version 9".into()
        });
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Messages segment 1's members (nodes 3 and 4) have passed on so far.
fn relayed_in_segment_1(cluster: &Cluster) -> [u64; 2] {
    [2, 3].map(|i| {
        let n = cluster.node(i);
        if n.is_running() {
            status_u64(n, "wsrep_lockstep_relayed").or_logs(cluster, "relayed")
        } else {
            0
        }
    })
}

/// Restarts killed node `i` by IST (a full rsync SST would block its
/// donor's writers); waits until all four are members again and run the
/// relay's protocol version.
fn rejoin_recovered(cluster: &mut Cluster, i: usize) {
    multi_node::restart_recovered(cluster, i, "4", WAIT);
    await_relay_version(cluster);
}

/// Stops the load: what its writers did, and the slowest acknowledged
/// insert (how long a fault held the writes).
fn stop_load(load: AckedLoad) -> ((String, Vec<WriterReport>), Duration) {
    let stopped = load.stop();
    let slowest = stopped
        .1
        .iter()
        .map(|r| r.slowest)
        .max()
        .unwrap_or_default();
    (stopped, slowest)
}

/// Inserts rows `ids` of 200 bytes on `node`, one commit each, and waits
/// until every node has them.
fn insert_rows(cluster: &Cluster, node: &Node, ids: std::ops::Range<u64>) {
    let mut session = node.session().or_logs(cluster, "session");
    for i in ids {
        session
            .sql(&format!("INSERT INTO wan.t VALUES ({i}, REPEAT('x', 200))"))
            .or_logs(cluster, &format!("insert on {}", node.name()));
    }
    drop(session);
    cluster
        .wait_for_equal_last_committed(WAIT)
        .or_logs(cluster, "replicated");
}

/// Segments 0, 0, 1, 1: writes on the leader (segment 0) cross to
/// segment 1 once per log entry, not once per member there, and the
/// member that receives the bundle passes it on. Writes on that relay
/// come back to it without their data (`echo`). The nodes end identical.
#[test]
fn a_remote_segment_gets_each_entry_once() {
    let cluster = segmented("relay", &[0, 0, 1, 1], "");
    await_relay_version(&cluster);
    let leader_name = status(cluster.node(0), "wsrep_lockstep_leader").or_logs(&cluster, "leader");
    let Some(leader) = cluster.nodes().iter().position(|n| n.name() == leader_name) else {
        fail(&cluster, &format!("no leader known: {leader_name:?}"));
    };
    // Two voters per segment: the founder's site keeps the leadership.
    check(&cluster, leader < 2, || {
        format!("the leader {leader_name} left segment 0 although both have two voters")
    });
    let leader_node = cluster.node(leader);
    leader_node
        .sql("CREATE DATABASE wan; CREATE TABLE wan.t (id INT PRIMARY KEY, v VARCHAR(200))")
        .or_logs(&cluster, "create");
    cluster
        .wait_for_equal_last_committed(WAIT)
        .or_logs(&cluster, "settle");
    let before: Vec<Wan> = cluster.nodes().iter().map(|n| wan(&cluster, n)).collect();
    insert_rows(&cluster, leader_node, 0..INSERTS);
    // Let the last commit reports reach the log before counting.
    std::thread::sleep(Duration::from_secs(1));
    let after: Vec<Wan> = cluster.nodes().iter().map(|n| wan(&cluster, n)).collect();
    let d = |i: usize, f: fn(&Wan) -> u64| f(&after[i]) - f(&before[i]);
    let entries = d(leader, |w| w.applied);
    let wan_entries = d(leader, |w| w.entries);
    let wan_bytes = d(leader, |w| w.bytes);
    let bundles = d(leader, |w| w.bundles);
    let relayed: u64 = (2..4).map(|i| d(i, |w| w.relayed)).sum();
    eprintln!(
        "{INSERTS} inserts: {entries} log entries, {wan_entries} sent to segment 1 in \
         {bundles} bundles, {relayed} passed on there; {wan_bytes} WAN bytes, {} per insert",
        wan_bytes / INSERTS
    );
    check(&cluster, entries >= INSERTS, || {
        format!("only {entries} log entries for {INSERTS} inserts")
    });
    // Without the relay each entry would cross twice (two members there).
    let copies = wan_entries as f64 / entries as f64;
    check(&cluster, (0.8..=1.2).contains(&copies), || {
        format!("{copies:.2} WAN copies per log entry ({wan_entries} for {entries})")
    });
    check(
        &cluster,
        relayed * 10 >= bundles * 8 && bundles >= INSERTS,
        || format!("{bundles} bundles sent, {relayed} messages passed on"),
    );
    // Written on segment 1's relay: the writeset crosses to the leader,
    // and its echo comes back without the row (ADR 0020).
    let relay = if d(2, |w| w.relayed) >= d(3, |w| w.relayed) {
        2
    } else {
        3
    };
    // Counted on every node: whichever leads sends the stubs.
    let elided_now = || -> u64 {
        cluster
            .nodes()
            .iter()
            .map(|n| wan(&cluster, n).elided)
            .sum()
    };
    let before = elided_now();
    let writer = cluster.node(relay);
    insert_rows(&cluster, writer, INSERTS..2 * INSERTS);
    let elided = elided_now() - before;
    let name = writer.name();
    let leader_now = status(cluster.node(0), "wsrep_lockstep_leader").unwrap_or_default();
    eprintln!(
        "{INSERTS} inserts on {name}: {elided} bytes left out of their echo (leader {leader_now})"
    );
    check(&cluster, elided >= INSERTS * 200, || {
        format!("only {elided} bytes of {name}'s {INSERTS} writesets were left out")
    });
    let sums = cluster.checksums(&["wan.t"]).or_logs(&cluster, "checksums");
    check(&cluster, sums.is_consistent(), || {
        format!("the nodes differ:\n{sums}")
    });
    let count = cluster
        .node(3)
        .sql("SELECT COUNT(*) FROM wan.t")
        .or_logs(&cluster, "count");
    check(&cluster, count.trim() == (2 * INSERTS).to_string(), || {
        format!("node 4 has {count} rows")
    });
    let mut cluster = cluster;
    cluster.stop_all().or_logs(&cluster, "stop");
}

/// `gmcast.segment`: node 1 in segment 0, nodes 2 and 3 in segment 1.
/// Node 3's state transfer comes from node 2, its own segment's synced
/// member, not from node 1 (the first synced member, which it was before
/// segments counted): an SST does not cross a site's link when a local
/// member can serve it.
#[test]
fn a_joiner_takes_its_state_from_a_donor_in_its_own_segment() {
    let mut cluster = segmented("segments", &[0, 1, 1], "");
    const DONATING: &str = "donating state ";
    let donations: Vec<usize> = (0..3)
        .map(|i| log_count(cluster.node(i), DONATING))
        .collect();
    // Node 2 could only get its state from node 1; node 3 from node 2.
    check(&cluster, donations == [1, 1, 0], || {
        format!("donations per node: {donations:?} (node 3 should have had node 2's)")
    });
    let segment = status(cluster.node(2), "wsrep_gmcast_segment").or_logs(&cluster, "segment");
    check(&cluster, segment == "1", || {
        format!("node 3 reports segment {segment}")
    });
    cluster.stop_all().or_logs(&cluster, "stop");
}

/// kill -9 of segment 1's relay while every node writes: the leader stops
/// sending through it and reaches segment 1's other member directly (a
/// majority of four needs that member), the writes go on, the killed node
/// comes back and relaying resumes, and every acknowledged insert is on
/// every node, which end identical.
#[test]
fn a_relay_killed_under_load_is_replaced_and_no_acknowledged_write_is_lost() {
    let mut cluster = segmented("relaykill", &[0, 0, 1, 1], "evs.suspect_timeout=PT3S;");
    await_relay_version(&cluster);
    let load = multi_node::acked_load(&cluster, 50, WAIT);
    let before = relayed_in_segment_1(&cluster);
    load.wait_for_progress(100, WAIT)
        .or_logs(&cluster, "load before the kill");
    let after = relayed_in_segment_1(&cluster);
    let passed = [after[0] - before[0], after[1] - before[1]];
    let relay = if passed[0] >= passed[1] { 2 } else { 3 };
    check(&cluster, passed[relay - 2] > 0, || {
        format!("no member of segment 1 passed bundles on: {passed:?}")
    });
    let relay_name = cluster.node(relay).name().to_string();
    multi_node::kill_and_await_removal(&mut cluster, relay, "3", WAIT);
    // Three of four are a majority only with segment 1's survivor: these
    // commits prove the leader no longer waits on the dead relay.
    load.wait_for_progress(100, WAIT)
        .or_logs(&cluster, "writes after the relay was killed");
    rejoin_recovered(&mut cluster, relay);
    let back = relayed_in_segment_1(&cluster);
    load.wait_for_progress(100, WAIT)
        .or_logs(&cluster, "writes after the restart");
    let now = relayed_in_segment_1(&cluster);
    let resumed = (now[0] - back[0]) + (now[1] - back[1]);
    let (stopped, slowest) = stop_load(load);
    eprintln!(
        "{relay_name} killed and restarted; {resumed} messages passed on in segment 1 \
         since; slowest acknowledged insert {:.2} s",
        slowest.as_secs_f64()
    );
    check(&cluster, resumed > 0, || {
        "nothing was passed on in segment 1 after the restart".into()
    });
    // The leader heard the relay's connections close and sent segment 1's
    // appends directly at once (`Group::peer_lost`): the slowest insert
    // took about 0.3 s here alone. A relay kept until it failed to answer
    // for an election timeout held them for 1.0 s.
    let lost: u64 = cluster
        .nodes()
        .iter()
        .map(|n| status_u64(n, "wsrep_lockstep_relays_lost").or_logs(&cluster, "relays lost"))
        .sum();
    check(&cluster, lost >= 1, || {
        format!("no leader replaced the killed relay {relay_name} when its connections closed")
    });
    multi_node::verify_acked_rows(&cluster, &stopped, 300, "the relay's kill");
    cluster.stop_all().or_logs(&cluster, "stop");
}

/// kill -9 of the leader of a segmented cluster while every node writes:
/// a new leader takes over (and moves to segment 1, now the bigger site),
/// the writes go on, the killed node comes back by IST, some member
/// relays again, and every acknowledged insert is on every node, which end
/// identical.
#[test]
fn a_leader_killed_under_load_in_a_segmented_cluster_loses_no_acknowledged_write() {
    let mut cluster = segmented("leaderkill", &[0, 0, 1, 1], "evs.suspect_timeout=PT3S;");
    await_relay_version(&cluster);
    let load = multi_node::acked_load(&cluster, 100, WAIT);
    let leader_name = status(cluster.node(0), "wsrep_lockstep_leader").or_logs(&cluster, "leader");
    let Some(leader) = cluster.nodes().iter().position(|n| n.name() == leader_name) else {
        fail(&cluster, &format!("no leader known: {leader_name:?}"));
    };
    let survivor = (leader + 1) % 4;
    multi_node::kill_and_await_removal(&mut cluster, leader, "3", WAIT);
    load.wait_for_progress(100, WAIT)
        .or_logs(&cluster, "writes after the leader was killed");
    // Segment 1 now has two voters against one: the leadership goes there.
    check(&cluster, leader < 2, || {
        format!("the first leader {leader_name} was not in segment 0")
    });
    let in_segment_1 = [cluster.node(2).name(), cluster.node(3).name()];
    let t0 = Instant::now();
    let new_leader = loop {
        let name = status(cluster.node(survivor), "wsrep_lockstep_leader").unwrap_or_default();
        if in_segment_1.contains(&name.as_str()) {
            break name;
        }
        check(&cluster, t0.elapsed() < WAIT, || {
            format!("the leader is {name:?}, not in segment 1, the bigger site now")
        });
        std::thread::sleep(Duration::from_millis(100));
    };
    let moved_after = t0.elapsed();
    rejoin_recovered(&mut cluster, leader);
    let relayed = |c: &Cluster| -> u64 {
        c.nodes()
            .iter()
            .map(|n| status_u64(n, "wsrep_lockstep_relayed").or_logs(c, "relayed"))
            .sum()
    };
    let back = relayed(&cluster);
    load.wait_for_progress(100, WAIT)
        .or_logs(&cluster, "writes after the restart");
    let resumed = relayed(&cluster) - back;
    let (stopped, slowest) = stop_load(load);
    let ist = log_count(cluster.node(leader), "Receiving IST");
    eprintln!(
        "{leader_name} (leader) killed; {new_leader} led ({:.1} s after writes resumed); \
         back by IST: {}; {resumed} messages passed on since; slowest acknowledged insert \
         {:.2} s",
        moved_after.as_secs_f64(),
        ist > 0,
        slowest.as_secs_f64()
    );
    check(&cluster, resumed > 0, || {
        "no member relayed after the old leader came back".into()
    });
    multi_node::verify_acked_rows(&cluster, &stopped, 300, "the leader's kill");
    cluster.stop_all().or_logs(&cluster, "stop");
}
