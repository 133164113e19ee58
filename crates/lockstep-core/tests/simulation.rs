//! Deterministic, seeded simulations of the group channel
//! (`lockstep_core::group::Group`: raft-rs + the sequencer): ordering,
//! certification and membership under message delay, reordering, loss,
//! duplication, partitions, crashes (a restart is a new member with a new
//! Raft id), paused processes (frozen clock and inbox, `Sim::pause`),
//! graceful leaves and late joiners. Logs are compacted every 64
//! entries, so most joiners start from a snapshot of the group state
//! instead of the whole log. The harness is `sim/mod.rs`.
//!
//! Every run is a pure function of its seed. A failure prints the seed, a
//! replay command and a trace (milestones, last steps, node table);
//! `SIM_SEED=n` runs only seed n, `SIM_SEEDS=k` changes how many seeds each
//! test runs, `SIM_TRACE=1` prints the trace of passing runs too and
//! `SIM_VERBOSE=1` per-seed statistics, `SIM_COMPACT_AFTER=n` compacts
//! logs every n entries instead of 64.
//!
//! Checked on every delivery, as it happens, and after every step: all
//! nodes deliver the same stream, each a prefix of the longest (seqno,
//! origin, proposal id, writeset, certification outcome with `depends_on`,
//! view members in order); seqnos are gap-free from the genesis
//! `last_seqno + 1`; no (origin, proposal) is ordered twice; views keep
//! members in join order; every certification outcome matches an index
//! that is never purged (purging, driven by `Committed` reports, must not
//! change decisions); no live, connected node is evicted; no node reports
//! `Fatal` (which a member that received a snapshot would: it must never
//! skip ordered events). A node that starts from a snapshot continues the
//! stream exactly where the snapshot ends, with the view the stream has
//! there, and is checked like the others from there on. At the end
//! (network healed, clients stopped): the cluster settles into one view of
//! exactly the live nodes, all synced voters, one leader, nothing in
//! flight; every writeset of a node that never crashed was ordered exactly
//! once; all live nodes have the same member table, certification index
//! and whole sequencer state (as a snapshot serialises it); each node's
//! certification statistics match what was delivered to it, and are equal
//! among nodes that replayed the whole log.

mod sim;

use std::cell::Cell;

use lockstep_core::group::peer::PROTOCOL_VERSION;
use lockstep_core::group::{Action, Group};
use sim::{run_seeds, salted, writesets, Net, Rng, Sim, SimConfig, Stats, Status};

fn setup(name: &str, seed: u64) -> (SimConfig, Rng) {
    let mut rng = Rng::new(salted(name, seed));
    let cfg = SimConfig::new(&mut rng);
    (cfg, rng)
}

/// With this chance, a bad network (delays, reordering, duplicates) with
/// at most 5 % loss.
fn sometimes_lossy(cfg: &mut SimConfig, rng: &mut Rng, chance: f64) {
    if rng.chance(chance) {
        cfg.net = Net::bad(rng);
        cfg.net.loss = cfg.net.loss.min(0.05);
    }
}

fn check(ok: bool, sim: &mut Sim, why: impl FnOnce() -> String) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        sim.fail(why());
        Err(sim.report_failure())
    }
}

/// Aggregate sanity: the workload really produced conflicts, views, ….
fn assert_exercised(name: &str, total: &Stats) {
    if std::env::var("SIM_SEED").is_ok() {
        return;
    }
    assert!(total.writesets > 0, "{name}: no writesets ordered");
    assert!(total.cert_failures > 0, "{name}: no certification conflict");
    assert!(total.views > 0, "{name}: no views");
}

#[test]
fn no_faults() {
    let total = run_seeds("no_faults", 200, |name, seed| {
        let (cfg, rng) = setup(name, seed);
        let mut sim = Sim::new(name, seed, cfg, rng);
        sim.run(5000, |_| {})?;
        let stats = sim.settle(20_000)?;
        let calm =
            stats.evictions == 0 && stats.zombie_restarts == 0 && stats.evicted_restarts == 0;
        check(calm, &mut sim, || {
            format!("membership churn without faults: {stats:?}")
        })?;
        Ok(stats)
    });
    assert_exercised("no_faults", &total);
    assert!(
        total.purged > 0,
        "no_faults: the certification index was never purged"
    );
    if std::env::var("SIM_SEED").is_err() {
        assert!(
            total.compacted > 0,
            "no_faults: the log was never compacted"
        );
    }
}

/// What keeps each running node's group busy (`Group::busy_with`).
fn sim_busy(s: &Sim) -> Vec<Option<&'static str>> {
    s.nodes
        .iter()
        .filter_map(|n| n.group.as_ref().map(Group::busy_with))
        .collect()
}

/// Issue 53, tickless when idle: once the workload stops and the group
/// has settled, every member's group is quiet (`Group::is_quiet`: nothing
/// a round must push on before an input comes), so its provider may sleep
/// until the next heartbeat. A proposal makes its node busy until it is
/// delivered, and the group is quiet again after.
#[test]
fn a_settled_group_is_quiet_until_a_proposal() {
    fn all_quiet(s: &Sim) -> bool {
        let running: Vec<&Group> = s.nodes.iter().filter_map(|n| n.group.as_ref()).collect();
        !running.is_empty() && running.iter().all(|g| g.is_quiet())
    }
    run_seeds("quiet", 40, |name, seed| {
        let (cfg, rng) = setup(name, seed);
        let mut sim = Sim::new(name, seed, cfg, rng);
        sim.run(3000, |_| {})?;
        let stats = sim.settle(20_000)?;
        let quiet = sim.run_until(5_000, all_quiet);
        let why = sim_busy(&sim);
        check(quiet, &mut sim, || {
            format!("a settled group never became quiet: {why:?}")
        })?;
        let slot = sim
            .nodes
            .iter()
            .position(|n| n.group.is_some())
            .expect("a running node");
        let (raft_id, id) = (sim.nodes[slot].id, sim.nodes[slot].next_id);
        sim.propose(slot, Action::Barrier { raft_id, id });
        let busy = !sim.nodes[slot].group.as_ref().expect("running").is_quiet();
        check(busy, &mut sim, || {
            "a node with a proposal in flight was quiet".into()
        })?;
        let again = sim.run_until(5_000, all_quiet);
        let why = sim_busy(&sim);
        check(again, &mut sim, || {
            format!("not quiet again after the proposal: {why:?}")
        })?;
        Ok(stats)
    });
}

/// Issue 53, an idle cluster's CPU: the leader of a settled group spares
/// the heartbeats that would tell a follower only what it heard less than
/// `quiet_beat_ms` ago (`group::beats`). Over a second of idleness every
/// follower still hears from the leader at least every quiet beat (plus
/// the network's delay), nobody starts an election, and each follower
/// gets fewer heartbeats than raft-rs's interval would send.
#[test]
fn an_idle_leader_spares_heartbeats_and_keeps_its_followers() {
    run_seeds("quiet_beats", 40, |name, seed| {
        let (cfg, rng) = setup(name, seed);
        let group = cfg.group.clone();
        let max_delay = cfg.net.max_delay;
        let (mut sim, stats) = settled_after_a_workload(name, seed, cfg, rng)?;
        let leader = sim.leader_slot().expect("a settled group has a leader");
        let heard: Vec<(usize, u64)> = sim
            .running()
            .filter(|(slot, _)| *slot != leader)
            .map(|(slot, n)| (slot, n.heartbeats_heard))
            .collect();
        let elapsed = idle_under_one_leader(&mut sim, 1_000, group.quiet_beat_ms + max_delay)?;
        let interval = group.tick_ms * group.heartbeat_ticks as u64;
        let raft_rs = elapsed / interval;
        for (slot, before) in heard {
            let got = sim.nodes[slot].heartbeats_heard - before;
            let most = elapsed / group.quiet_beat_ms.saturating_sub(interval).max(1) + 1;
            check(got <= most && got < raft_rs, &mut sim, || {
                format!(
                    "node {slot} heard {got} heartbeats in {elapsed} ms of idleness: at most \
                     {most} expected, raft-rs sends {raft_rs}"
                )
            })?;
        }
        Ok(stats)
    });
}

/// Issue 53, tickless when idle: a quiet group's drivers sleep longer
/// than a tick in close contact (`Group::idle_wait_ms`), losing the ticks
/// beyond `max_catch_up_ticks` as the provider does. The group keeps its
/// leader, each follower hears it within the idle beat (the sleep, from
/// `evs.keepalive_period`) and a tick, and the timers wake about once
/// per idle beat. When the leader crashes, the
/// others elect a new one: each seed runs once sleeping and once with a
/// wake-up every tick, and on average the sleeping runs' elections are
/// late by at most one sleep (an election's own time varies with the
/// seed's timeouts and pre-vote rounds far more than that).
#[test]
fn an_idle_group_sleeps_between_heartbeats_and_still_fails_over() {
    let tooks = std::sync::Mutex::new((0u64, 0u64, 0u64));
    let idle_beat = sim::group_config().idle_beat_ms;
    run_seeds("quiet_sleeps", 40, |name, seed| {
        let (exact, _) = idle_then_crash_the_leader(name, seed, false)?;
        let (sleeping, stats) = idle_then_crash_the_leader(name, seed, true)?;
        let mut t = tooks.lock().unwrap();
        t.0 += exact;
        t.1 += sleeping;
        t.2 += 1;
        Ok(stats)
    });
    let (exact, sleeping, runs) = *tooks.lock().unwrap();
    let (exact, sleeping) = (exact / runs.max(1), sleeping / runs.max(1));
    eprintln!("quiet_sleeps: a new leader after {sleeping} ms sleeping, {exact} ms ticking");
    assert!(
        sleeping <= exact + idle_beat,
        "elections after sleeping took {sleeping} ms on average, {exact} ms with every tick \
         (at most one sleep, {idle_beat} ms, more expected)"
    );
}

/// A settled group idles for 2 s, sleeping or not, then its leader
/// crashes: how long until another leads.
fn idle_then_crash_the_leader(name: &str, seed: u64, sleeps: bool) -> Result<(u64, Stats), String> {
    let (mut cfg, rng) = setup(name, seed);
    cfg.group.max_catch_up_ticks = 2;
    let group = cfg.group.clone();
    let max_delay = cfg.net.max_delay;
    let (mut sim, stats) = settled_after_a_workload(name, seed, cfg, rng)?;
    sim.quiet_sleeps = sleeps;
    // The timers scheduled before run out first.
    sim.run_until(2 * group.tick_ms, |_| false);
    let leader = sim.leader_slot().expect("a settled group has a leader");
    let wakes: Vec<(usize, u64)> = sim
        .running()
        .map(|(slot, n)| (slot, n.timer_wakes))
        .collect();
    // A ticking leader's follower hears it within the quiet beat; a
    // sleeping one's within the idle beat (the leader sleeps one tick
    // less, cut short for the heartbeats it spared: `close_wait_ms`),
    // give or take a tick of lateness.
    let bound = if sleeps {
        group.idle_beat_ms + group.tick_ms + max_delay
    } else {
        group.quiet_beat_ms + max_delay
    };
    let elapsed = idle_under_one_leader(&mut sim, 2_000, bound)?;
    if sleeps {
        let beat = group.tick_ms * group.heartbeat_ticks as u64;
        for (slot, before) in wakes {
            let got = sim.nodes[slot].timer_wakes - before;
            // A follower sleeps the idle beat, a leader one tick less;
            // now and then the group is not quiet for a moment (a report,
            // a configuration's last step) and ticks, and a leader drops
            // to the heartbeat's pace whenever an answer is older than
            // the idle beat. A leader wakes at most twice as often as
            // its sleeps alone would have it.
            let most = if slot == leader {
                elapsed * 2 / (group.idle_beat_ms - group.tick_ms)
            } else {
                elapsed * 5 / 4 / group.idle_beat_ms + 2
            };
            check(got <= most, &mut sim, || {
                format!(
                    "node {slot}'s timer woke {got} times in {elapsed} ms of idleness: at most \
                     {most} expected ({} at the heartbeat's pace, {} with every tick)",
                    elapsed / beat,
                    elapsed / group.tick_ms
                )
            })?;
        }
    }
    if sleeps {
        // A proposal wakes the group for a moment; the leader spares
        // heartbeats while its appends flow, then sleeps again. The
        // first long sleep must not leave a follower the spared
        // heartbeats' time longer without a message (`close_wait_ms`).
        let (raft_id, id) = (sim.nodes[leader].id, sim.nodes[leader].next_id);
        sim.propose(leader, Action::Barrier { raft_id, id });
        idle_under_one_leader(&mut sim, 1_000, bound)?;
    }
    let crashed = sim.now;
    sim.crash(leader, None);
    let elected = sim.run_until(5_000, |s| s.leader_slot().is_some_and(|l| l != leader));
    check(elected, &mut sim, || "no new leader after the crash".into())?;
    Ok((sim.now - crashed, stats))
}

/// A group that ran 3 s of workload, then settled and went quiet.
fn settled_after_a_workload(
    name: &str,
    seed: u64,
    cfg: SimConfig,
    rng: Rng,
) -> Result<(Sim, Stats), String> {
    let mut sim = Sim::new(name, seed, cfg, rng);
    sim.run(3000, |_| {})?;
    let stats = sim.settle(20_000)?;
    let settled = sim.run_until(5_000, Sim::quiet);
    check(settled, &mut sim, || "the group never settled".into())?;
    Ok((sim, stats))
}

/// Runs a settled group for `window` ms with no input: its leader stays
/// leader, and no follower goes longer than `bound` ms without a message
/// from it. The time that passed.
fn idle_under_one_leader(sim: &mut Sim, window: u64, bound: u64) -> Result<u64, String> {
    let leader = sim.leader_slot().expect("a settled group has a leader");
    let term = sim.nodes[leader].g().term();
    let followers: Vec<usize> = sim
        .running()
        .map(|(slot, _)| slot)
        .filter(|slot| *slot != leader)
        .collect();
    let start = sim.now;
    let mut longest = 0;
    sim.run_until(window, |s| {
        for slot in &followers {
            longest = longest.max(s.now - s.nodes[*slot].last_leader_contact);
        }
        false
    });
    check(
        sim.nodes[leader].g().term() == term && sim.nodes[leader].is_leader(),
        sim,
        || "an idle group changed leader".into(),
    )?;
    check(longest <= bound, sim, || {
        format!("a follower went {longest} ms without its leader (bound {bound} ms)")
    })?;
    Ok(sim.now - start)
}

/// ADR 0017: in a group of three voters a follower commits what it stores
/// of its leader's term on arrival, so a writeset proposed on a follower
/// (forwarded, then appended) comes back to it about as fast as the
/// leader's own (appended, then acknowledged): one round trip each, where
/// waiting for the leader's commit message made the follower's two
/// (measured here without the rule: 8 ms against the leader's 4).
#[test]
fn followers_commit_their_own_writes_as_fast_as_the_leader() {
    let total = run_seeds("follower_latency", 100, |name, seed| {
        let (mut cfg, rng) = setup(name, seed);
        cfg.nodes = 3;
        // Every message takes 2 ms: with random delays the leader's
        // commit takes the faster of two followers' round trips, which
        // says nothing about the order's design.
        cfg.net.min_delay = 2;
        cfg.net.max_delay = 2;
        let mut sim = Sim::new(name, seed, cfg, rng);
        // Counted once all three vote: a leader alone, early on, commits
        // at once.
        sim.run(3000, |_| {})?;
        check(sim.voters() == 3, &mut sim, || "three voters".into())?;
        sim.stats.leader_commits = 0;
        sim.stats.leader_commit_ms = 0;
        sim.stats.follower_commits = 0;
        sim.stats.follower_commit_ms = 0;
        sim.run(3000, |_| {})?;
        sim.settle(20_000)
    });
    let mean = |ms: u64, n: u64| ms as f64 / n.max(1) as f64;
    let leader = mean(total.leader_commit_ms, total.leader_commits);
    let follower = mean(total.follower_commit_ms, total.follower_commits);
    eprintln!(
        "commit latency: leader {leader:.2} ms ({} writesets), followers {follower:.2} ms ({})",
        total.leader_commits, total.follower_commits
    );
    assert!(
        total.leader_commits > 1000 && total.follower_commits > 1000,
        "too few writesets to compare: {total:?}"
    );
    assert!(
        follower <= 1.1 * leader,
        "a follower's writes commit {:.2}x slower than the leader's",
        follower / leader
    );
}

/// A leader of three voters does not send its commit index on its own:
/// each follower commits what it stores (ADR 0017), so raft-rs's empty
/// append after every commit, and its answer, told nobody anything. With
/// five voters the followers need that message, and still get it.
#[test]
fn only_followers_that_need_it_are_told_each_commit() {
    let per_writeset = |nodes: usize| {
        let name = format!("commit_broadcast_{nodes}");
        let total = run_seeds(&name, 40, |name, seed| {
            let (mut cfg, rng) = setup(name, seed);
            cfg.nodes = nodes;
            let mut sim = Sim::new(name, seed, cfg, rng);
            // Joiners are promoted one at a time.
            for _ in 0..20 {
                if sim.voters() == nodes {
                    break;
                }
                sim.run(500, |_| {})?;
            }
            check(sim.voters() == nodes, &mut sim, || {
                format!("{nodes} voters")
            })?;
            sim.stats.empty_appends = 0;
            sim.stats.leader_commits = 0;
            sim.stats.follower_commits = 0;
            sim.run(3000, |_| {})?;
            sim.settle(20_000)
        });
        let commits = total.leader_commits + total.follower_commits;
        // Not when one seed is replayed (`SIM_SEED`): too few writesets.
        if std::env::var("SIM_SEED").is_err() {
            assert!(
                commits > 1000,
                "{nodes} nodes: too few writesets: {total:?}"
            );
        }
        let ratio = total.empty_appends as f64 / commits.max(1) as f64;
        eprintln!(
            "{nodes} nodes: {} empty appends for {commits} writesets ({ratio:.3} each)",
            total.empty_appends
        );
        ratio
    };
    let (three, five) = (per_writeset(3), per_writeset(5));
    if std::env::var("SIM_SEED").is_ok() {
        return;
    }
    // What is left with three: appends to a follower that raft-rs probes
    // again after the simulated network reordered two appends (TCP does
    // not). Without the skip it was 2.7 per writeset here.
    assert!(
        three < 1.0,
        "a leader of three voters still tells each commit on its own ({three:.3} empty appends per writeset)"
    );
    assert!(
        five > 2.0,
        "a leader of five voters no longer tells each commit ({five:.3} empty appends per writeset)"
    );
}

#[test]
fn lossy_network() {
    let total = run_seeds("lossy_network", 200, |name, seed| {
        let (mut cfg, mut rng) = setup(name, seed);
        cfg.net = Net::bad(&mut rng);
        let mut sim = Sim::new(name, seed, cfg, rng);
        sim.run(15_000, |_| {})?;
        sim.settle(30_000)
    });
    assert_exercised("lossy_network", &total);
    assert!(total.lost > 0);
}

/// Hosts of running nodes, the leader's first.
fn live_hosts(sim: &Sim) -> Vec<usize> {
    let mut hosts: Vec<usize> = sim.running().map(|(_, n)| n.host).collect();
    hosts.sort_unstable();
    hosts.dedup();
    hosts
}

/// The driver of `leader_partitions`: every 100 ms while nothing is cut,
/// cut off the leader (maybe with a follower) or some followers, as long
/// as a quorum stays; heal after 50 ms to 3 s.
struct LeaderCuts {
    next: u64,
    heal_at: Option<u64>,
}

impl LeaderCuts {
    fn new(now: u64) -> LeaderCuts {
        LeaderCuts {
            next: now + 200,
            heal_at: None,
        }
    }

    fn drive(&mut self, s: &mut Sim) {
        let (next, heal_at) = (&mut self.next, &mut self.heal_at);
        if let Some(t) = *heal_at {
            if s.now >= t {
                s.heal();
                *heal_at = None;
                *next = s.now + s.rng.range(100, 1500);
            }
            return;
        }
        if s.now < *next {
            return;
        }
        *next = s.now + 100;
        let Some(l) = s.leader_slot() else { return };
        let leader_host = s.nodes[l].host;
        let others: Vec<usize> = live_hosts(s)
            .into_iter()
            .filter(|h| *h != leader_host)
            .collect();
        let mut isolated = Vec::new();
        if s.rng.chance(0.5) {
            // The leader in the minority, maybe with company.
            isolated.push(leader_host);
            if !others.is_empty() && s.rng.chance(0.5) {
                isolated.push(others[s.rng.index(others.len())]);
            }
        } else {
            // The leader keeps the majority; some followers are cut off.
            for &h in &others {
                if s.rng.chance(0.4) {
                    isolated.push(h);
                }
            }
        }
        if isolated.is_empty() || !s.quorum_without(&isolated) {
            return;
        }
        s.partition(&isolated);
        // Some partitions outlast the suspect timeout (evictions, and
        // the cut-off nodes rejoin as new members).
        *heal_at = Some(s.now + s.rng.range(50, 3000));
    }
}

/// One run of leaders and followers cut off and healed (`LeaderCuts`),
/// with this chance of a causal read per client turn.
fn cut_leaders(name: &str, seed: u64, causal_read: f64) -> Result<Stats, String> {
    let (mut cfg, mut rng) = setup(name, seed);
    cfg.nodes = if rng.chance(0.5) { 3 } else { 5 };
    cfg.causal_read = causal_read;
    sometimes_lossy(&mut cfg, &mut rng, 0.5);
    let mut sim = Sim::new(name, seed, cfg, rng);
    sim.wait_formed(20_000)?;
    let mut cuts = LeaderCuts::new(sim.now);
    sim.run(30_000, |s| cuts.drive(s))?;
    sim.settle(40_000)
}

#[test]
fn leader_partitions() {
    let total = run_seeds("leader_partitions", 200, |name, seed| {
        cut_leaders(name, seed, 0.0)
    });
    assert_exercised("leader_partitions", &total);
    assert!(total.partitions > 0 && total.evictions > 0);
}

/// Causal reads (`Group::read_fence`: Raft's ReadIndex, answered from the
/// leader's lease while it holds one) while leaders are cut off and
/// replaced. The harness checks every `Output::Fence`: its seqno is never
/// below one acknowledged to a client anywhere before the read was asked
/// (an isolated leader answering from an expired lease would fail here).
#[test]
fn causal_reads_are_never_stale() {
    let total = run_seeds("causal_reads_are_never_stale", 200, |name, seed| {
        cut_leaders(name, seed, 0.2)
    });
    assert_exercised("causal_reads_are_never_stale", &total);
    assert_reads_exercised(&total, 1000);
    // The gate's bound is checked after every poll (`check_release_gate`);
    // here, that the gate held entries at all, so the check is not empty.
    assert!(total.max_held > 0, "the release gate never held an entry");
    assert!(total.partitions > 0 && total.leader_changes > 0);
}

/// More than 1000 causal reads answered by fence, and more than
/// `from_lease` from a lease on followers and on leaders each.
fn assert_reads_exercised(total: &Stats, from_lease: u64) {
    assert!(
        total.fences > 1000,
        "causal reads answered: {}",
        total.fences
    );
    assert!(
        total.local_reads > from_lease && total.leader_local_reads > from_lease,
        "reads from a lease: {} on followers, {} on leaders",
        total.local_reads,
        total.leader_local_reads
    );
}

/// The driver of `paused_processes_never_give_stale_causal_reads`: while
/// nothing is paused, every so often, pause the leader or a follower
/// (SIGSTOP) for 0.2-3 s, often past the suspect timeout (1 s), the
/// election timeout and every lease, then let it go on (SIGCONT).
struct Pauses {
    next: u64,
}

impl Pauses {
    fn drive(&mut self, s: &mut Sim) {
        if s.now < self.next || s.any_paused() {
            return;
        }
        let Some(leader) = s.leader_slot() else {
            return;
        };
        let followers: Vec<usize> = s
            .running()
            .map(|(slot, _)| slot)
            .filter(|slot| *slot != leader)
            .collect();
        let slot = if followers.is_empty() || s.rng.chance(0.5) {
            leader
        } else {
            followers[s.rng.index(followers.len())]
        };
        let ms = s.rng.range(200, 3000);
        s.pause(slot, ms);
        self.next = s.now + ms + s.rng.range(100, 1500);
    }
}

/// Processes paused and resumed (issue 34 item 6): a paused node's clock
/// and inbox are frozen (`Sim::pause`); after the resume it takes what
/// waited in arrival order. Causal reads on every node, half from a
/// lease: the harness checks every fence and every lease read against
/// what was acknowledged before the read was asked, so a leader or a
/// follower that came back and answered from a lease it no longer held
/// would fail here.
#[test]
fn paused_processes_never_give_stale_causal_reads() {
    let name = "paused_processes_never_give_stale_causal_reads";
    let total = run_seeds(name, 100, |name, seed| {
        let (mut cfg, mut rng) = setup(name, seed);
        cfg.nodes = if rng.chance(0.5) { 3 } else { 5 };
        cfg.causal_read = 0.2;
        sometimes_lossy(&mut cfg, &mut rng, 0.3);
        let mut sim = Sim::new(name, seed, cfg, rng);
        sim.wait_formed(20_000)?;
        let mut pauses = Pauses {
            next: sim.now + 200,
        };
        sim.run(30_000, |s| pauses.drive(s))?;
        sim.settle(40_000)
    });
    assert_exercised(name, &total);
    assert!(total.pauses > 0 && total.deferred > 0);
    assert_reads_exercised(&total, 1000);
    assert!(
        total.leader_changes > 0,
        "no pause outlasted the leader's election timeout"
    );
}

/// The driver of the clock-fault simulations (ADR 0036): every so often
/// one node's clock starts running fast or slow (within the leases'
/// margin of 2, which the provider's `ClockRates` guard enforces far
/// inside: beyond 1.25x it turns the leases off), back at real speed, or
/// leaps forwards or backwards by up to 5 s.
struct ClockFaults {
    next: u64,
    /// Only forward leaps (the control).
    forward_leaps_only: bool,
}

impl ClockFaults {
    fn drive(&mut self, s: &mut Sim) {
        if s.now < self.next {
            return;
        }
        let running: Vec<usize> = s.running().map(|(slot, _)| slot).collect();
        if running.is_empty() {
            return;
        }
        let slot = running[s.rng.index(running.len())];
        let leap = s.rng.range(200, 5000) as i64;
        match (self.forward_leaps_only, s.rng.index(5)) {
            (true, _) | (false, 0) => s.leap_clock(slot, leap),
            (false, 1) => s.leap_clock(slot, -leap),
            (false, 2) => s.set_clock_rate(slot, 1.6),
            (false, 3) => s.set_clock_rate(slot, 0.6),
            _ => s.set_clock_rate(slot, 1.0),
        }
        self.next = s.now + s.rng.range(200, 2000);
    }
}

/// One run with clock faults and causal reads on every node, half from a
/// lease, each checked against what was acknowledged before it was asked.
fn faulty_clocks(
    name: &str,
    seed: u64,
    forward_leaps_only: bool,
    steady: bool,
) -> Result<Stats, String> {
    let (mut cfg, mut rng) = setup(name, seed);
    cfg.nodes = if rng.chance(0.5) { 3 } else { 5 };
    cfg.causal_read = 0.2;
    // As the provider: Raft's ticks catch up at most two after a leap.
    cfg.group.max_catch_up_ticks = 2;
    cfg.group.steady_obligations = steady;
    sometimes_lossy(&mut cfg, &mut rng, 0.3);
    let mut sim = Sim::new(name, seed, cfg, rng);
    sim.wait_formed(20_000)?;
    let mut faults = ClockFaults {
        next: sim.now + 200,
        forward_leaps_only,
    };
    sim.run(30_000, |s| faults.drive(s))?;
    sim.settle(40_000)
}

/// Issue 52 item 4 (ADR 0036): clocks that run at 0.6x or 1.6x, and leap
/// forwards or backwards by up to 5 s, never make a causal read stale,
/// from a lease or a fence, on a leader or a follower.
#[test]
fn faulty_clocks_never_give_stale_causal_reads() {
    let name = "faulty_clocks_never_give_stale_causal_reads";
    let total = run_seeds(name, 200, |name, seed| {
        faulty_clocks(name, seed, false, true)
    });
    assert_exercised(name, &total);
    assert!(
        total.clock_faults > 1000,
        "clock faults: {}",
        total.clock_faults
    );
    assert_reads_exercised(&total, 1000);
}

/// The control of the test above: a granter whose obligations run on the
/// clock as it reads it (not `ObligationClock`) ends them early when its
/// clock leaps forward, and lease reads come out stale. Rarely: with the
/// spared heartbeats (`group::beats`) 1 seed of 200 (111), before them 3
/// (8, 85, 175); so the control runs 200.
#[test]
fn leaping_clocks_give_stale_reads_without_steady_obligations() {
    let name = "leaping_clocks_without_steady_obligations";
    let mut stale = Vec::new();
    for seed in sim::seeds(200) {
        if let Err(report) = faulty_clocks(name, seed, true, false) {
            assert!(report.contains("stale"), "{report}");
            stale.push(seed);
        }
    }
    eprintln!("{name}: stale reads with seeds {stale:?}");
    assert!(
        !stale.is_empty(),
        "no stale read without steady obligations"
    );
}

/// Local causal reads (ADR 0022): half of the reads take their index
/// from the lease `Group::read_lease` publishes, as the provider's
/// readers do, on followers and on the leader, while leaders are cut off
/// and replaced (`causal_reads_are_never_stale` checks them). The
/// control: without the release gate, follower reads are stale.
#[test]
fn follower_lease_reads_are_stale_without_the_release_gate() {
    let name = "follower_lease_reads_need_the_release_gate";
    let mut stale = Vec::new();
    let mut local = 0;
    for seed in sim::seeds(20) {
        let (mut cfg, rng) = setup(name, seed);
        cfg.nodes = 3;
        cfg.causal_read = 0.2;
        cfg.group.release_gate = false;
        let mut sim = Sim::new(name, seed, cfg, rng);
        let result = sim
            .wait_formed(20_000)
            .and_then(|()| sim.run(10_000, |_| {}));
        local += sim.stats.local_reads;
        if let Err(report) = result {
            assert!(report.contains("stale lease read"), "{report}");
            stale.push(seed);
        }
    }
    eprintln!("{name}: without the gate, stale follower reads with seeds {stale:?}");
    assert!(local > 0, "no follower read from a lease");
    assert!(!stale.is_empty(), "no stale read without the release gate");
}

/// Two data nodes and an arbitrator (Galera's two-site setup with
/// `garbd`): either data node crashes and comes back, again and again.
/// The arbitrator must keep the survivor's quorum (writes go on while a
/// data node is down), never be chosen as donor (the harness fails the run
/// if it is), and never keep the leadership: its Raft priority loses every
/// election a data node can win, and when it wins anyway (its log was
/// longer) it hands over.
#[test]
fn an_arbitrator_keeps_quorum_but_never_leads_or_donates() {
    let led = Cell::new(0u64);
    let sampled = Cell::new(0u64);
    let outage_writes = Cell::new(0u64);
    let total = run_seeds("arbitrator", 100, |name, seed| {
        let (mut cfg, mut rng) = setup(name, seed);
        cfg.nodes = 3;
        cfg.arbitrator_hosts = vec![2];
        cfg.sst_ms = (10, 800);
        // The arbitrator grants leases too (ADR 0022).
        cfg.causal_read = 0.05;
        sometimes_lossy(&mut cfg, &mut rng, 0.3);
        let mut sim = Sim::new(name, seed, cfg, rng);
        sim.wait_formed(20_000)?;
        let mut next = sim.now + 200;
        let mut sample_at = sim.now;
        // While a data node is down: the writesets ordered before.
        let mut down_since: Option<u64> = None;
        sim.run(30_000, |s| {
            if s.now >= sample_at {
                sample_at = s.now + 10;
                sampled.set(sampled.get() + 1);
                if let Some(l) = s.leader_slot() {
                    if s.is_arbitrator(s.nodes[l].host) {
                        led.set(led.get() + 1);
                    }
                }
            }
            let data_running = s
                .running()
                .filter(|(_, n)| !s.is_arbitrator(n.host))
                .count();
            match (down_since, data_running) {
                (None, 1) => down_since = Some(s.stats.writesets),
                (Some(before), 2) => {
                    outage_writes.set(outage_writes.get() + s.stats.writesets - before);
                    down_since = None;
                }
                _ => {}
            }
            if s.now < next || data_running < 2 {
                return;
            }
            next = s.now + 100;
            let data: Vec<usize> = s
                .running()
                .filter(|(_, n)| !s.is_arbitrator(n.host))
                .map(|(slot, _)| slot)
                .collect();
            let victim = data[s.rng.index(data.len())];
            if !s.quorum_without(&[s.nodes[victim].host]) {
                return;
            }
            let restart = s.rng.range(200, 2500);
            s.crash(victim, Some(restart));
            next = s.now + s.rng.range(2000, 5000);
        })?;
        let stats = sim.settle(40_000)?;
        let leader = sim.leader_slot().map(|l| sim.nodes[l].host);
        check(leader.is_some_and(|h| h != 2), &mut sim, || {
            format!("settled with the arbitrator leading (leader host {leader:?})")
        })?;
        Ok(stats)
    });
    assert_exercised("arbitrator", &total);
    assert!(total.crashes > 100, "too few crashes: {total:?}");
    let share = led.get() as f64 / sampled.get().max(1) as f64;
    eprintln!(
        "arbitrator led {:.2}% of the time; {} writesets ordered while a data node was down",
        share * 100.0,
        outage_writes.get()
    );
    assert!(
        share < 0.02,
        "the arbitrator led {:.1}% of the time",
        share * 100.0
    );
    assert!(
        outage_writes.get() > 1000,
        "writes stopped while a data node was down: {}",
        outage_writes.get()
    );
}

/// Segments (`gmcast.segment`, ADR 0020): five nodes in three sites, host
/// 0 alone in segment 0 (it founds the cluster, so it leads first), hosts
/// 1-2 in segment 1 and 3-4 in segment 2, under the write load, crashes
/// and sometimes a lossy network.
/// - The leader moves out of the one-voter site (to a site with the most
///   voters) and relays its appends to the remote site of two through one
///   member there: bundles are sent and passed on.
/// - A follower's own entries come back to it as stubs (`echo`), which it
///   fills from its copy; one it cannot fill costs a retry.
/// - The usual checks of every simulation hold: a relay that is lost,
///   late, duplicated or crashed never breaks the order.
#[test]
fn segments_relay_appends_and_the_leader_moves_to_the_biggest_site() {
    let in_small_site = Cell::new(0u64);
    let sampled = Cell::new(0u64);
    let total = run_seeds("segments", 50, |name, seed| {
        let (mut cfg, mut rng) = setup(name, seed);
        cfg.nodes = 5;
        cfg.host_segment = vec![0, 1, 1, 2, 2];
        // Causal reads too: answered by the leader or by asking it, never
        // from a follower's own lease across sites (ADR 0022).
        cfg.causal_read = 0.02;
        sometimes_lossy(&mut cfg, &mut rng, 0.3);
        let mut sim = Sim::new(name, seed, cfg, rng);
        sim.wait_formed(30_000)?;
        let mut next = sim.now + 2000;
        let mut sample_at = sim.now + 2000;
        sim.run(150_000, |s| {
            if s.now >= sample_at && s.formed() {
                sample_at = s.now + 10;
                sampled.set(sampled.get() + 1);
                if let Some(l) = s.leader_slot() {
                    if s.segment_of(s.nodes[l].host) == 0 {
                        in_small_site.set(in_small_site.get() + 1);
                    }
                }
            }
            if s.now < next {
                return;
            }
            next = s.now + s.rng.range(1000, 2500);
            let slots: Vec<usize> = s.running().map(|(slot, _)| slot).collect();
            let victim = slots[s.rng.index(slots.len())];
            if s.quorum_without(&[s.nodes[victim].host]) {
                let restart = s.rng.range(200, 2500);
                s.crash(victim, Some(restart));
            }
        })?;
        let mut stats = sim.settle(40_000)?;
        let moved = sim.run_until(10_000, |s| {
            s.leader_slot()
                .is_some_and(|l| s.segment_of(s.nodes[l].host) != 0)
        });
        check(moved, &mut sim, || {
            "settled with the leader alone in its site".into()
        })?;
        stats.bundles = sim.stats.bundles;
        stats.forwarded = sim.stats.forwarded;
        stats.stubs = sim.stats.stubs;
        Ok(stats)
    });
    assert_exercised("segments", &total);
    let share = in_small_site.get() as f64 / sampled.get().max(1) as f64;
    eprintln!(
        "segments: {} bundles, {} messages passed on, {} entries sent back to their origin \
         as stubs; the leader was in the one-voter site {:.1}% of {} samples",
        total.bundles,
        total.forwarded,
        total.stubs,
        share * 100.0,
        sampled.get()
    );
    assert!(total.bundles > 1000, "too few bundles: {total:?}");
    assert!(
        total.forwarded > 1000,
        "too few messages passed on: {total:?}"
    );
    assert!(total.stubs > 1000, "too few stubs: {total:?}");
    assert!(total.fences > 100, "too few causal reads: {total:?}");
    assert_eq!(
        total.local_reads, 0,
        "a follower read from its own lease with members in other sites"
    );
    assert!(
        share < 0.05,
        "the leader stayed in the one-voter site {:.1}% of the time",
        share * 100.0
    );
}

/// The cluster's protocol version on every running node.
fn cluster_versions(sim: &Sim) -> Vec<u32> {
    sim.running()
        .map(|(_, n)| n.g().sequencer().cluster_version())
        .collect()
}

/// A rolling upgrade: three nodes speak versions up to V (this build's);
/// one by one each is killed and restarted as a build that also speaks
/// V+1, under the usual write load. While any running node speaks only V
/// the cluster runs at V on every node; once the last old node is gone it
/// switches to V+1 on all of them (at the same log position: the
/// sequencer states compared when the run settles include it), and the
/// usual checks of every simulation hold throughout.
#[test]
fn a_rolling_upgrade_switches_the_version_only_once_every_member_speaks_it() {
    let v = PROTOCOL_VERSION;
    let total = run_seeds("rolling_upgrade", 50, |name, seed| {
        let (mut cfg, mut rng) = setup(name, seed);
        cfg.nodes = 3;
        cfg.host_protocol = vec![v; 3];
        sometimes_lossy(&mut cfg, &mut rng, 0.3);
        let mut sim = Sim::new(name, seed, cfg, rng);
        sim.wait_formed(20_000)?;
        for host in 0..3 {
            // An old build still runs: nobody may have switched.
            let early = |s: &Sim| {
                let old_running = s
                    .running()
                    .any(|(_, n)| s.cfg.host_protocol.get(n.host) == Some(&v));
                old_running && cluster_versions(s).iter().any(|c| *c > v)
            };
            sim.run(2000, |_| {})?;
            let versions = cluster_versions(&sim);
            check(!early(&sim), &mut sim, || {
                format!("switched while an old node runs: {versions:?}")
            })?;
            sim.cfg.host_protocol[host] = v + 1;
            let Some(slot) = sim.running().find(|(_, n)| n.host == host).map(|(s, _)| s) else {
                return Err(format!("host {host} is not running"));
            };
            let restart = sim.rng.range(100, 1500);
            sim.crash(slot, Some(restart));
            let mut switched_early = false;
            let back = sim.run_until(30_000, |s| {
                switched_early |= early(s);
                s.formed() && s.running().any(|(_, n)| n.host == host)
            });
            check(!switched_early, &mut sim, || {
                "the cluster switched while an old node was running".into()
            })?;
            check(back, &mut sim, || format!("host {host} did not come back"))?;
        }
        let switched = sim.run_until(20_000, |s| cluster_versions(s).iter().all(|c| *c == v + 1));
        let versions = cluster_versions(&sim);
        check(switched, &mut sim, || {
            format!(
                "every node speaks {}, the cluster still runs at {versions:?}",
                v + 1
            )
        })?;
        sim.settle(40_000)
    });
    assert_exercised("rolling_upgrade", &total);
    assert!(total.crashes >= 150, "{total:?}");
}

#[test]
fn crashes_and_restarts() {
    let total = run_seeds("crashes_and_restarts", 200, |name, seed| {
        let (mut cfg, mut rng) = setup(name, seed);
        // Long state transfers: leader changes happen while joiners are
        // still learners.
        cfg.sst_ms = (10, 2500);
        // Causal reads too: a crashed reader must not hold the others'
        // commits for longer than an obligation (ADR 0022).
        cfg.causal_read = 0.05;
        sometimes_lossy(&mut cfg, &mut rng, 0.3);
        let mut sim = Sim::new(name, seed, cfg, rng);
        sim.wait_formed(20_000)?;
        let mut next = sim.now + 200;
        sim.run(30_000, |s| {
            if s.now < next {
                return;
            }
            next = s.now + 100;
            let Some(l) = s.leader_slot() else { return };
            let running: Vec<usize> = s.running().map(|(slot, _)| slot).collect();
            let victim = if s.rng.chance(0.4) {
                l
            } else {
                running[s.rng.index(running.len())]
            };
            if !s.quorum_without(&[s.nodes[victim].host]) {
                return;
            }
            let restart = s.rng.range(0, 1500);
            s.crash(victim, Some(restart));
            next = s.now + s.rng.range(300, 2500);
        })?;
        sim.settle(40_000)
    });
    assert_exercised("crashes_and_restarts", &total);
    assert!(total.crashes > 0);
    if std::env::var("SIM_SEED").is_err() {
        assert!(
            total.snapshot_joins > 0,
            "crashes_and_restarts: no joiner started from a snapshot"
        );
    }
}

#[test]
fn graceful_leave_to_one() {
    let total = run_seeds("graceful_leave_to_one", 200, |name, seed| {
        let (mut cfg, rng) = setup(name, seed);
        cfg.nodes = 3;
        let mut sim = Sim::new(name, seed, cfg, rng);
        sim.wait_formed(20_000)?;
        sim.run(800, |_| {})?;
        for _ in 0..2 {
            let running: Vec<usize> = sim.running().map(|(slot, _)| slot).collect();
            let leaver = match sim.leader_slot() {
                Some(l) if sim.rng.chance(0.5) => l,
                _ => running[sim.rng.index(running.len())],
            };
            sim.leave(leaver);
            let done = sim.run_until(10_000, |s| s.nodes[leaver].status == Status::Left);
            let left = sim.nodes[leaver].id;
            check(done, &mut sim, || {
                format!("node {left} did not leave within 10 s")
            })?;
            sim.run(800, |_| {})?;
        }
        let last_view = sim.all.len();
        let survivor = sim
            .running()
            .map(|(slot, _)| slot)
            .next()
            .expect("one node left");
        sim.run(1500, |_| {})?;
        let view = sim.view.clone();
        let stats = sim.settle(20_000)?;
        let me = sim.nodes[survivor].id;
        check(view == vec![me], &mut sim, || {
            format!("final view {view:?}, expected [{me}]")
        })?;
        let ordered_alone = sim.all[last_view..]
            .iter()
            .filter(|d| matches!(d, lockstep_core::group::Delivery::Writeset(w) if w.origin == me))
            .count();
        check(ordered_alone > 0, &mut sim, || {
            "the last node ordered nothing on its own".into()
        })?;
        Ok(stats)
    });
    assert_exercised("graceful_leave_to_one", &total);
    assert_eq!(total.leaves, 2 * sim::seeds(200).len() as u64);
}

#[test]
fn late_joiner_certifies_identically() {
    // Seeds where the index had been purged before the joiner came, and
    // conflicts among the writesets ordered after it joined.
    let purged_first = Cell::new(0u64);
    let conflicts_after = Cell::new(0u64);
    let total = run_seeds("late_joiner_certifies_identically", 200, |name, seed| {
        let (mut cfg, mut rng) = setup(name, seed);
        cfg.nodes = rng.range(2, 3) as usize;
        cfg.rows = rng.range(3, 12);
        let mut sim = Sim::new(name, seed, cfg, rng);
        sim.wait_formed(20_000)?;
        let history = 500 + sim.rng.range(0, 300) as usize;
        let grown = sim.run_until(120_000, |s| s.seq.len() >= history);
        check(grown, &mut sim, || "the history did not grow".into())?;
        let genesis = sim.cfg.genesis_seqno;
        let l = sim.leader_slot().expect("a leader");
        let low = sim.nodes[l].g().sequencer().certifier().lowest_in_map();
        if low.is_some_and(|low| low > genesis + 1) {
            purged_first.set(purged_first.get() + 1);
        }
        let joined_at = genesis + sim.seq.len() as i64;
        let slot = sim.add_host();
        let joiner = sim.nodes[slot].id;
        let formed = sim.run_until(30_000, Sim::formed);
        check(formed, &mut sim, || format!("joiner {joiner} did not sync"))?;
        sim.run(5000, |_| {})?;
        let stats = sim.settle(20_000)?;
        // The joiner rebuilt its index from a snapshot of the group state
        // and the log after it, or from the whole log (each of its
        // deliveries was compared with the others' on arrival, and the
        // final check compares the indexes), then certified new writesets,
        // its own and the others', exactly as everybody else did.
        let after: Vec<_> = writesets(&sim)
            .filter(|(seqno, ..)| *seqno > joined_at)
            .collect();
        let own = after.iter().filter(|(_, o, ..)| *o == joiner).count();
        let failed = after.iter().filter(|(.., pass)| !pass).count();
        conflicts_after.set(conflicts_after.get() + failed as u64);
        check(own > 0, &mut sim, || {
            format!("joiner {joiner} ordered nothing")
        })?;
        Ok(stats)
    });
    assert_exercised("late_joiner_certifies_identically", &total);
    if std::env::var("SIM_SEED").is_err() {
        assert!(purged_first.get() > 0, "never purged before a join");
        assert!(conflicts_after.get() > 0, "no conflicts after a join");
    }
}

#[test]
fn leave_while_a_peer_is_down() {
    let total = run_seeds("leave_while_a_peer_is_down", 200, |name, seed| {
        let (mut cfg, mut rng) = setup(name, seed);
        // With 3 nodes, one dead and one gone, no quorum is left (as in
        // Galera); 4 or 5 keep one once the leaver is out of the
        // configuration.
        cfg.nodes = rng.range(4, 5) as usize;
        let mut sim = Sim::new(name, seed, cfg, rng);
        sim.wait_formed(20_000)?;
        sim.run(500, |_| {})?;
        // A follower dies (it restarts much later) and, before the group
        // has evicted it, another node (often the leader) leaves.
        let leader = sim.leader_slot().expect("formed");
        let followers: Vec<usize> = sim
            .running()
            .map(|(slot, _)| slot)
            .filter(|s| *s != leader)
            .collect();
        let dead = followers[sim.rng.index(followers.len())];
        sim.crash(dead, Some(8000));
        let wait = sim.rng.range(0, 300);
        sim.run(wait, |_| {})?;
        let leaver = match sim.leader_slot() {
            Some(l) if sim.rng.chance(0.7) => l,
            _ => {
                let others: Vec<usize> = sim.running().map(|(slot, _)| slot).collect();
                others[sim.rng.index(others.len())]
            }
        };
        sim.leave(leaver);
        let done = sim.run_until(6000, |s| s.nodes[leaver].status == Status::Left);
        let id = sim.nodes[leaver].id;
        check(done, &mut sim, || {
            format!("node {id} did not leave within 6 s while a peer was down")
        })?;
        sim.settle(40_000)
    });
    assert_exercised("leave_while_a_peer_is_down", &total);
}

/// Small key space, frequent `Committed` reports, retries: the index is
/// purged often while writesets with old last-seen seqnos are in flight.
/// Every outcome is compared with an index that is never purged.
fn purge_stress(rng: &mut Rng, cfg: &mut SimConfig) {
    cfg.net = Net::bad(rng);
    cfg.rows = rng.range(2, 6);
    cfg.report_every = 10;
}

#[test]
fn purging_never_changes_certification() {
    let total = run_seeds("purging_never_changes_certification", 200, |name, seed| {
        let (mut cfg, mut rng) = setup(name, seed);
        purge_stress(&mut rng, &mut cfg);
        let mut sim = Sim::new(name, seed, cfg, rng);
        sim.run(15_000, |_| {})?;
        sim.settle(20_000)
    });
    assert_exercised("purging_never_changes_certification", &total);
}

/// Why nodes must not report a `Committed` seqno above the last seen seqno
/// of one of their own writesets still in flight (the precondition of
/// `Certifier::purge_upto`): if they do, retried writesets reach a purged
/// index. Found by this suite as lost updates (a conflict passed); the
/// certifier now fails such writesets as too old, the same way on every
/// node, so the outcome differs from an unpurged index only by needless
/// aborts. Clamped reports (the provider's rule) avoid even those. Run with
/// `--ignored`.
#[test]
#[ignore = "demonstrates a hazard; the default suite keeps reports clamped"]
fn unclamped_committed_reports_change_certification() {
    let name = "unclamped_committed_reports_change_certification";
    let mut wrong = Vec::new();
    for seed in sim::seeds(50) {
        let (mut cfg, mut rng) = setup(name, seed);
        purge_stress(&mut rng, &mut cfg);
        cfg.clamp_reports = false;
        let mut sim = Sim::new(name, seed, cfg, rng);
        let result = sim.run(15_000, |_| {}).and_then(|()| sim.settle(20_000));
        if let Err(report) = result {
            assert!(report.contains("an unpurged index says"), "{report}");
            wrong.push(seed);
        }
    }
    eprintln!("{name}: certification went wrong with seeds {wrong:?}");
    assert!(!wrong.is_empty());
}

#[test]
fn chaos() {
    let total = run_seeds("chaos", 200, |name, seed| {
        let (mut cfg, mut rng) = setup(name, seed);
        cfg.nodes = rng.range(3, 5) as usize;
        cfg.net = Net::bad(&mut rng);
        cfg.net.loss = cfg.net.loss.min(0.08);
        cfg.sst_ms = (10, 1500);
        cfg.causal_read = 0.05;
        let mut sim = Sim::new(name, seed, cfg, rng);
        sim.wait_formed(30_000)?;
        let mut next = sim.now + 100;
        let mut heal_at: Option<u64> = None;
        sim.run(30_000, |s| {
            if heal_at.is_some_and(|t| s.now >= t) {
                s.heal();
                heal_at = None;
            }
            if s.now < next {
                return;
            }
            next = s.now + s.rng.range(100, 1500);
            let running: Vec<usize> = s.running().map(|(slot, _)| slot).collect();
            let pick = running[s.rng.index(running.len())];
            let host = s.nodes[pick].host;
            match s.rng.below(3) {
                0 if heal_at.is_none() => {
                    let mut isolated = vec![host];
                    let other = running[s.rng.index(running.len())];
                    if s.rng.chance(0.3) && s.nodes[other].host != host {
                        isolated.push(s.nodes[other].host);
                    }
                    if s.quorum_without(&isolated) {
                        s.partition(&isolated);
                        heal_at = Some(s.now + s.rng.range(50, 2500));
                    }
                }
                1 if s.quorum_without(&[host]) && s.partition.is_none() => {
                    let restart = s.rng.range(0, 2000);
                    s.crash(pick, Some(restart));
                }
                _ => {}
            }
        })?;
        sim.settle(60_000)
    });
    assert_exercised("chaos", &total);
}

#[test]
fn leaders_leaving_together_with_others() {
    // The leader and others leave at the same moment: leadership can come
    // back to a leaver, which then removes itself while it leads. raft-rs
    // cannot drive a leader without its own progress (a shutdown in
    // MariaDB's galera_ssl_cipher test panicked there).
    let total = run_seeds("leaders_leaving_together_with_others", 200, |name, seed| {
        let (mut cfg, rng) = setup(name, seed);
        cfg.nodes = 2 + (seed % 2) as usize;
        let mut sim = Sim::new(name, seed, cfg, rng);
        sim.wait_formed(20_000)?;
        sim.run(500, |_| {})?;
        let leader = sim.leader_slot().expect("a leader once formed");
        let running: Vec<usize> = sim.running().map(|(slot, _)| slot).collect();
        // Everybody but one, the leader among them (a whole cluster that
        // leaves at once is not a graceful leave: the last member stays).
        let stays = *running.iter().find(|s| **s != leader).expect("2 nodes");
        let leavers: Vec<usize> = running.iter().copied().filter(|s| *s != stays).collect();
        for &l in &leavers {
            sim.leave(l);
        }
        let done = sim.run_until(20_000, |s| {
            leavers.iter().all(|&l| s.nodes[l].status == Status::Left)
        });
        check(done, &mut sim, || format!("{leavers:?} did not all leave"))?;
        let stats = sim.settle(20_000)?;
        let (view, me) = (sim.view.clone(), sim.nodes[stays].id);
        check(view == vec![me], &mut sim, || {
            format!("final view {view:?}, expected [{me}]")
        })?;
        Ok(stats)
    });
    assert_exercised("leaders_leaving_together_with_others", &total);
    assert!(total.leaves >= sim::seeds(200).len() as u64);
}

/// A crafted Raft message of `kind` at `term`, far beyond any log, with a
/// forged entry and commit index.
fn forged(
    kind: raft::eraftpb::MessageType,
    from: u64,
    to: u64,
    term: u64,
) -> raft::eraftpb::Message {
    let mut m = raft::eraftpb::Message::default();
    m.set_msg_type(kind);
    m.from = from;
    m.to = to;
    m.term = term;
    m.log_term = term;
    m.index = 1 << 40;
    m.commit = 1 << 40;
    m.entries = vec![raft::eraftpb::Entry {
        term,
        index: 1 << 40,
        data: b"forged".to_vec().into(),
        ..Default::default()
    }]
    .into();
    m
}

/// Raft messages from a peer outside the configuration, the worst a
/// crafted stream can say: a term far ahead, an append with a forged
/// entry, a vote request, a heartbeat, a snapshot, all claiming to come
/// from a stranger. Leaders answer `NotMember`, followers that hear from
/// their leader ignore them: no term moves, and the cluster orders and
/// certifies as before. (A follower without a leader for an election
/// timeout hears strangers: the new leader it does not know yet may be
/// one; `chaos` covers that case.)
#[test]
fn strangers_cannot_disturb_the_group() {
    use raft::eraftpb::MessageType;
    const STRANGER: u64 = 0x5eed_5eed;
    let ignored = std::sync::atomic::AtomicU64::new(0);
    let total = run_seeds("strangers_cannot_disturb_the_group", 100, |name, seed| {
        let (cfg, rng) = setup(name, seed);
        let mut sim = Sim::new(name, seed, cfg, rng);
        sim.wait_formed(20_000)?;
        let mut round = 0u64;
        sim.run(3000, |sim| {
            round += 1;
            if !round.is_multiple_of(7) {
                return;
            }
            for node in sim.nodes.iter_mut() {
                let Some(g) = node.group.as_mut() else {
                    continue;
                };
                let to = g.me().raft_id;
                let term = g.term() + 1_000_000;
                let kinds = [
                    MessageType::MsgAppend,
                    MessageType::MsgRequestVote,
                    MessageType::MsgRequestPreVote,
                    MessageType::MsgHeartbeat,
                    MessageType::MsgSnapshot,
                    MessageType::MsgTimeoutNow,
                ];
                let kind = kinds[(round / 7) as usize % kinds.len()];
                g.step(forged(kind, STRANGER, to, term));
            }
        })?;
        for node in &sim.nodes {
            if let Some(g) = &node.group {
                let term = g.term();
                ignored.fetch_add(g.strangers_ignored(), std::sync::atomic::Ordering::Relaxed);
                if term >= 1_000_000 {
                    let id = node.id;
                    sim.fail(format!("node {id} took the stranger's term {term}"));
                    return Err(sim.report_failure());
                }
            }
        }
        sim.settle(20_000)
    });
    assert_exercised("strangers_cannot_disturb_the_group", &total);
    if std::env::var("SIM_SEED").is_err() {
        let ignored = ignored.load(std::sync::atomic::Ordering::Relaxed);
        assert!(ignored > 0, "no follower ever ignored a stranger");
    }
}

/// A member cannot propose for another (ADR 0014, `sender_checks`). A
/// follower forwards to the leader a proposal that binds another member's
/// Raft id to a certificate of its own choosing and sets that member's
/// weight, as a member holding a valid certificate could craft it: the
/// leader refuses it, so no node ever holds the forged binding (checked
/// after every injection; members re-bind themselves, so a forged binding
/// would not last to the end) or the forged weight. Control, at the end of
/// each seed: a weight the member proposes itself is ordered, so the check
/// would see a forged one that got through.
#[test]
fn a_member_cannot_propose_for_another() {
    use lockstep_core::group::action::encode_batch;
    use lockstep_core::group::Proposal;
    use raft::eraftpb::{Entry, Message, MessageType};
    const FORGED: [u8; 32] = [0xee; 32];
    let refused = std::sync::atomic::AtomicU64::new(0);
    let weights = |sim: &Sim| -> Vec<u32> {
        sim.running()
            .filter_map(|(_, n)| n.group.as_ref())
            .flat_map(|g| g.sequencer().members().iter().map(|m| m.weight))
            .collect()
    };
    let total = run_seeds("a_member_cannot_propose_for_another", 50, |name, seed| {
        let (cfg, rng) = setup(name, seed);
        let mut sim = Sim::new(name, seed, cfg, rng);
        sim.wait_formed(20_000)?;
        let mut round = 0u64;
        let mut forged_bound = None;
        sim.run(3000, |sim| {
            round += 1;
            let bound: Vec<u64> = sim
                .running()
                .filter_map(|(_, n)| n.group.as_ref())
                .flat_map(|g| {
                    let b = g.sequencer().bindings();
                    b.iter()
                        .filter(|(_, f)| **f == FORGED)
                        .map(|(id, _)| *id)
                        .collect::<Vec<_>>()
                })
                .collect();
            if !bound.is_empty() && forged_bound.is_none() {
                forged_bound = Some(bound);
            }
            if !round.is_multiple_of(41) {
                return;
            }
            let Some(l) = sim.leader_slot() else { return };
            let leader = sim.nodes[l].id;
            let ids: Vec<u64> = sim.running().map(|(_, n)| n.id).collect();
            let Some(&forger) = ids.iter().find(|&&id| id != leader) else {
                return;
            };
            // The victim: the leader itself or another member.
            let victim = ids[(round as usize / 41) % ids.len()];
            if victim == forger {
                return;
            }
            let id = (1 << 63) | round;
            let batch = encode_batch(&[
                Proposal {
                    origin: victim,
                    id,
                    action: Action::Bind {
                        raft_id: victim,
                        fingerprint: FORGED,
                    },
                },
                Proposal {
                    origin: victim,
                    id: id + 1,
                    action: Action::Weight {
                        raft_id: victim,
                        weight: 7,
                    },
                },
            ]);
            let mut m = Message::default();
            m.set_msg_type(MessageType::MsgPropose);
            m.from = forger;
            m.to = leader;
            m.entries = vec![Entry {
                data: batch.into(),
                ..Default::default()
            }]
            .into();
            if let Some(g) = sim.nodes[l].group.as_mut() {
                g.step(m);
            }
        })?;
        check(forged_bound.is_none(), &mut sim, || {
            format!("a forged binding was ordered for {forged_bound:x?}")
        })?;
        let stats = sim.settle(20_000)?;
        for (_, node) in sim.running() {
            if let Some(g) = node.group.as_ref() {
                refused.fetch_add(g.refused_total(), std::sync::atomic::Ordering::Relaxed);
            }
        }
        let w = weights(&sim);
        check(!w.contains(&7), &mut sim, || {
            format!("a forged weight was ordered: {w:?}")
        })?;
        // Control: a member sets its own weight.
        let Some((slot, me)) = sim.running().map(|(s, n)| (s, n.id)).next() else {
            return Ok(stats);
        };
        sim.propose(
            slot,
            Action::Weight {
                raft_id: me,
                weight: 3,
            },
        );
        sim.run(2000, |_| {})?;
        let w = weights(&sim);
        check(w.contains(&3), &mut sim, || {
            format!("the member's own weight was not ordered: {w:?}")
        })?;
        Ok(stats)
    });
    assert_exercised("a_member_cannot_propose_for_another", &total);
    if std::env::var("SIM_SEED").is_err() {
        let refused = refused.load(std::sync::atomic::Ordering::Relaxed);
        assert!(refused > 0, "the leader never refused a forged proposal");
    }
}

/// A relayed message proves nothing about its first sender (ADR 0014):
/// where peers are authenticated the leader sends no bundles, and a
/// relayed append claiming to be the leader's, a term ahead, with a
/// forged entry and commit index, is refused by every node: no term moves,
/// and the usual checks (one stream everywhere) hold. Control: a node
/// that does not check senders takes the same message's term.
#[test]
fn relayed_messages_are_refused_where_peers_are_authenticated() {
    use raft::eraftpb::MessageType;
    let forged_term = |g: &lockstep_core::group::Group, leader: u64| {
        forged(MessageType::MsgAppend, leader, g.me().raft_id, g.term() + 1)
    };
    let took = std::sync::atomic::AtomicU64::new(0);
    let total = run_seeds(
        "relayed_messages_are_refused_where_peers_are_authenticated",
        60,
        |name, seed| {
            let (mut cfg, rng) = setup(name, seed);
            // Every node checks in even seeds; none in odd ones (control).
            let checked = seed % 2 == 0;
            cfg.group.checked_senders = checked;
            // Three sites, so that the leader would relay if it might.
            cfg.nodes = 5;
            cfg.host_segment = vec![0, 1, 1, 2, 2];
            let mut sim = Sim::new(name, seed, cfg, rng);
            sim.wait_formed(20_000)?;
            let mut round = 0u64;
            let mut failure = None;
            sim.run(2000, |sim| {
                round += 1;
                if !round.is_multiple_of(53) || failure.is_some() {
                    return;
                }
                let Some(l) = sim.leader_slot() else { return };
                let leader = sim.nodes[l].id;
                let ids: Vec<u64> = sim.running().map(|(_, n)| n.id).collect();
                let Some(&relay) = ids.iter().find(|&&id| id != leader) else {
                    return;
                };
                for node in sim.nodes.iter_mut() {
                    let Some(g) = node.group.as_mut() else {
                        continue;
                    };
                    let me = g.me().raft_id;
                    if me == leader || me == relay {
                        continue;
                    }
                    let before = g.term();
                    let m = forged_term(g, leader);
                    g.step_relayed(relay, m);
                    if g.term() > before {
                        if checked {
                            failure = Some(format!("node {me} took a relayed term"));
                        }
                        took.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            })?;
            if let Some(f) = failure {
                sim.fail(f);
                return Err(sim.report_failure());
            }
            if !checked {
                // The control's group was disturbed on purpose; its
                // checks are not the point.
                return Ok(Stats::default());
            }
            let bundles = sim.stats.bundles;
            check(bundles == 0, &mut sim, || {
                format!("{bundles} bundles with authenticated peers")
            })?;
            sim.settle(20_000)
        },
    );
    assert!(total.seqnos > 0, "no checked seed ordered anything");
    if std::env::var("SIM_SEED").is_err() {
        assert!(
            took.load(std::sync::atomic::Ordering::Relaxed) > 0,
            "control: no node without checks took the relayed term"
        );
    }
}

/// What one side of a cut did: elected a leader (after the old one had
/// an election timeout to step down), or re-formed alone by weight.
#[derive(Debug, Default, Clone, Copy)]
struct SideFate {
    led: bool,
    founded: bool,
}

impl SideFate {
    fn primary(&self) -> bool {
        self.led || self.founded
    }
}

/// Runs three suspect timeouts after a cut, watching both sides at every
/// step, as the provider would act: a node leaderless for a suspect
/// timeout that `stands_alone_by_weight` re-forms alone, for good; a
/// side with a leader that holds its quorum orders.
fn watch_sides(sim: &mut Sim, a: &[usize], b: &[usize]) -> (SideFate, SideFate) {
    let cut = sim.now;
    let suspect = sim.cfg.group.suspect_timeout_ms;
    let g = &sim.cfg.group;
    let election = g.election_ticks as u64 * g.tick_ms;
    let _ = election;
    let mut fates = (SideFate::default(), SideFate::default());
    let mut leaderless: std::collections::HashMap<usize, u64> = Default::default();
    while sim.now < cut + 3 * suspect {
        if !sim.step() {
            break;
        }
        let now = sim.now;
        for (slot, n) in sim.running() {
            if !n.in_view || n.removed {
                continue;
            }
            let fate = if a.contains(&n.host) {
                &mut fates.0
            } else if b.contains(&n.host) {
                &mut fates.1
            } else {
                continue;
            };
            let g = n.g();
            let side = if a.contains(&n.host) { a } else { b };
            if g.has_leader() {
                leaderless.remove(&slot);
                // A leader orders only with a quorum of its voters on its
                // side (an old one may not have stepped down yet).
                let members = g.sequencer().members();
                let voters = members.iter().filter(|m| m.voter).count();
                let here = members
                    .iter()
                    .filter(|m| m.voter)
                    .filter(|m| {
                        sim.host_of_id(m.info.raft_id)
                            .is_some_and(|h| side.contains(&h))
                    })
                    .count();
                if g.is_leader() && here * 2 > voters {
                    fate.led = true;
                }
            } else {
                let since = *leaderless.entry(slot).or_insert(now);
                if now >= since + suspect && g.stands_alone_by_weight() {
                    fate.founded = true;
                }
            }
        }
    }
    fates
}

/// Every member's table agrees that the weights are `weights` and the
/// voters are the ones they call for.
fn weights_settled(sim: &Sim, weights: &[u32]) -> bool {
    sim.running().all(|(_, n)| {
        let members = n.g().sequencer().members();
        let wanted = lockstep_core::group::node::wanted_voters(members);
        members.len() == weights.len()
            && members.iter().all(|m| {
                sim.host_of_id(m.info.raft_id)
                    .is_some_and(|h| m.weight == weights[h])
            })
            && members
                .iter()
                .all(|m| m.voter == wanted.contains(&m.info.raft_id))
            && n.g().voters() == wanted.len()
    })
}

struct WeightChange {
    nodes: usize,
    /// Weights set (and settled) before the change, per host.
    before: &'static [(usize, u32)],
    /// The change whose every step is cut: (host, new weight).
    change: (usize, u32),
}

/// A cluster of `c.nodes` with the weights of `c.before` in place and
/// every node settled, ready for the change.
fn weighted_cluster(name: &str, seed: u64, c: &WeightChange) -> Result<(Sim, Vec<u32>), String> {
    let (mut cfg, rng) = setup(name, seed);
    cfg.nodes = c.nodes;
    // The test watches quorum, not the provider's restart of a member
    // that stays leaderless.
    cfg.zombie_ms = u64::MAX / 4;
    let mut sim = Sim::new(name, seed, cfg, rng);
    sim.workload = false;
    sim.wait_formed(20_000)?;
    let mut weights = vec![1u32; c.nodes];
    // The change itself the caller proposes, step by step.
    for &(host, w) in c.before {
        propose_weight(&mut sim, host, w);
        weights[host] = w;
        let target = weights.clone();
        if !sim.run_until(10_000, |s| weights_settled(s, &target)) {
            return Err(format!("{name}: weights {target:?} did not settle"));
        }
    }
    Ok((sim, weights))
}

fn propose_weight(sim: &mut Sim, host: usize, weight: u32) {
    let slot = sim
        .running()
        .find(|(_, n)| n.host == host)
        .map(|(s, _)| s)
        .expect("a node on the host");
    let id = sim.nodes[slot].id;
    sim.propose(
        slot,
        Action::Weight {
            raft_id: id,
            weight,
        },
    );
}

/// Issue 34 item 4: no two primary components at any step of a weight
/// change (`pc.weight`). The weight entry, the promotions and demotions
/// it calls for, and a leadership hand-over are separate log entries;
/// the network is cut between every two steps of the change (one event
/// of the simulation each), into every split of the hosts, and after
/// three suspect timeouts at most one side may be primary, counting a
/// node that re-forms alone on the weighted quorum. Before the rule,
/// a node that held the weight majority re-formed alone while the two
/// others, still voters, elected a leader of their own.
#[test]
fn weight_changes_never_leave_two_primaries() {
    // On every host in turn: one of them leads, and the window differs
    // between a change the leader orders for itself and one it learns.
    let mut changes = Vec::new();
    for nodes in [2usize, 3] {
        let dominant = nodes as u32;
        for h in 0..nodes {
            const BEFORE: [&[(usize, u32)]; 3] = [&[(0, 3)], &[(1, 3)], &[(2, 3)]];
            const BEFORE2: [&[(usize, u32)]; 2] = [&[(0, 2)], &[(1, 2)]];
            let before = if nodes == 2 { BEFORE2[h] } else { BEFORE[h] };
            changes.push(WeightChange {
                nodes,
                before: &[],
                change: (h, dominant),
            });
            changes.push(WeightChange {
                nodes,
                before,
                change: (h, 1),
            });
            if nodes == 3 {
                // Dominance moves from host h to the next one.
                changes.push(WeightChange {
                    nodes,
                    before,
                    change: ((h + 1) % 3, 5),
                });
            }
        }
    }
    let (mut cuts, mut alone, mut neither) = (0u64, 0u64, 0u64);
    for (i, c) in changes.iter().enumerate() {
        let name = "weight_changes";
        let seed = i as u64;
        // How many steps the change takes, uncut.
        let (mut sim, mut weights) = weighted_cluster(name, seed, c).unwrap();
        weights[c.change.0] = c.change.1;
        propose_weight(&mut sim, c.change.0, c.change.1);
        let mut steps = 0u64;
        while !weights_settled(&sim, &weights) {
            assert!(sim.step() && steps < 100_000, "change {i} never settled");
            steps += 1;
        }
        let splits: Vec<Vec<usize>> = if c.nodes == 2 {
            vec![vec![0]]
        } else {
            (0..c.nodes).map(|h| vec![h]).collect()
        };
        for k in 0..=steps + 20 {
            for side in &splits {
                let (mut sim, _) = weighted_cluster(name, seed, c).unwrap();
                propose_weight(&mut sim, c.change.0, c.change.1);
                for _ in 0..k {
                    sim.step();
                }
                sim.partition(side);
                let other: Vec<usize> = (0..c.nodes).filter(|h| !side.contains(h)).collect();
                let (a, b) = watch_sides(&mut sim, side, &other);
                assert!(
                    !(a.primary() && b.primary()),
                    "change {i} ({:?} on {} nodes, before {:?}) cut after {k} of {steps} steps \
                     into {side:?} ({a:?}) | {other:?} ({b:?}): both sides are primary\n{}",
                    c.change,
                    c.nodes,
                    c.before,
                    sim.trace()
                );
                alone += u64::from(a.founded || b.founded);
                let (a, b) = (a.primary(), b.primary());
                cuts += 1;
                neither += u64::from(!a && !b);
            }
        }
    }
    eprintln!(
        "weight changes: {cuts} cuts, {alone} with a node re-forming alone by weight, {neither} \
         with no primary side (the window a change leaves)"
    );
    assert!(alone > 0, "no cut exercised the weighted quorum's shortcut");
}

/// What a runtime `pc.weight` change waits for before it returns
/// (`Group::weights_in_force`): once the node that took the weight sees
/// it in force, a cut at once leaves that node primary alone (MariaDB's
/// galera_pc_weight sets `pc.weight=3` on one node of three and isolates
/// it in the next statement) and the others not primary.
#[test]
fn a_weight_in_force_decides_a_cut_made_at_once() {
    let mut alone = 0;
    for seed in 0..6u64 {
        let host = (seed % 3) as usize;
        let c = WeightChange {
            nodes: 3,
            before: &[],
            change: (host, 3),
        };
        let name = "weight_in_force";
        let (mut sim, _) = weighted_cluster(name, seed, &c).unwrap();
        let in_force = |s: &Sim| {
            s.running().any(|(_, n)| {
                n.host == host && n.g().weights_in_force() && {
                    let me = n.g().me().raft_id;
                    n.g().sequencer().member(me).map(|m| m.weight) == Some(3)
                }
            })
        };
        assert!(!in_force(&sim), "seed {seed}: in force before the change");
        propose_weight(&mut sim, host, 3);
        assert!(
            sim.run_until(10_000, in_force),
            "seed {seed}: the weight never came in force\n{}",
            sim.trace()
        );
        sim.partition(&[host]);
        let other: Vec<usize> = (0..3).filter(|h| *h != host).collect();
        let (a, b) = watch_sides(&mut sim, &[host], &other);
        assert!(
            a.primary() && !b.primary(),
            "seed {seed}: heavy host {host} ({a:?}) | {other:?} ({b:?})\n{}",
            sim.trace()
        );
        alone += u64::from(a.founded);
    }
    eprintln!("weight in force: {alone} of 6 heavy nodes re-formed alone (the others led)");
}

/// Issue 34 item 4: `pc.bootstrap` on a survivor drops no acknowledged
/// commit. After every other node crashed, a survivor that holds every
/// commit (it led last, or it was in every quorum) founds alone and
/// delivers what it stored first; every writeset acknowledged anywhere
/// is then delivered on it. A survivor that may lack commits (a follower
/// of three voters) must refuse and name the last leader; the test
/// counts how often such a survivor really lacked an acknowledged one.
#[test]
fn a_survivor_founds_alone_only_when_it_holds_every_acknowledged_commit() {
    let founded = Cell::new(0u64);
    let lacked = Cell::new(0u64);
    let refused = Cell::new(0u64);
    let from_stored = Cell::new(0u64);
    run_seeds("survivor_founds", 200, |name, seed| {
        let (mut cfg, mut rng) = setup(name, seed);
        cfg.nodes = if rng.chance(0.5) { 2 } else { 3 };
        cfg.zombie_ms = u64::MAX / 4;
        sometimes_lossy(&mut cfg, &mut rng, 0.3);
        let run_ms = rng.range(100, 1500);
        let churn = rng.chance(0.5);
        let mut sim = Sim::new(name, seed, cfg, rng);
        sim.wait_formed(20_000)?;
        if churn {
            // Membership changes before the crash: one node restarts (a
            // new member; the old one is evicted).
            let live: Vec<usize> = sim.running().map(|(s, _)| s).collect();
            let victim = live[sim.rng.index(live.len())];
            let back = sim.rng.range(200, 1500);
            sim.crash(victim, Some(back));
            let settle = back + sim.rng.range(0, 3000);
            sim.run_until(settle, |_| false);
        }
        sim.run_until(run_ms, |_| false);
        let live: Vec<usize> = sim.running().map(|(s, _)| s).collect();
        // The survivor is a member: a node still joining holds no state
        // of the group yet (a real one bootstraps from its own data, the
        // safe-bootstrap rules' business, not this one's).
        let members: Vec<usize> = live
            .iter()
            .copied()
            .filter(|&s| sim.nodes[s].in_view && !sim.nodes[s].removed)
            .collect();
        if members.is_empty() {
            return Ok(sim.stats.clone());
        }
        let survivor = members[sim.rng.index(members.len())];
        let leader_before = sim.leader_slot().map(|s| sim.nodes[s].id);
        for &s in &live {
            if s != survivor {
                sim.crash(s, None);
            }
        }
        let wait = 3 * sim.cfg.group.suspect_timeout_ms;
        sim.run_until(wait, |s| !s.nodes[survivor].g().has_leader());
        let acked = sim.acked;
        let verdict = sim.nodes[survivor].g().holds_every_commit();
        match verdict {
            Ok(_) => {
                let before = sim.nodes[survivor].last_seqno;
                sim.commit_stored(survivor);
                if sim.failed() {
                    return Err(sim.report_failure());
                }
                let held = sim.nodes[survivor].last_seqno.unwrap_or(i64::MIN);
                if held > before.unwrap_or(i64::MIN) {
                    from_stored.set(from_stored.get() + 1);
                }
                founded.set(founded.get() + 1);
                check(held >= acked, &mut sim, || {
                    format!(
                        "the survivor holds every commit ({verdict:?}) but has seqno {held} \
                         after delivering what it stored; {acked} was acknowledged"
                    )
                })?;
            }
            Err(lack) => {
                refused.set(refused.get() + 1);
                let held = sim.nodes[survivor].last_seqno.unwrap_or(i64::MIN);
                lacked.set(lacked.get() + u64::from(held < acked));
                let n = &sim.nodes[survivor];
                let votes = n.g().sequencer().member(n.id).is_some_and(|m| m.voter);
                let why = lack.voters >= 3 || lack.change_in_flight || !votes;
                check(lack.leader.is_some() && why, &mut sim, || {
                    format!("refused without naming a leader, or without a reason: {lack:?}")
                })?;
                if let Some(l) = leader_before {
                    check(lack.leader == Some(l), &mut sim, || {
                        format!("names {:?}, the leader was {l}", lack.leader)
                    })?;
                }
            }
        }
        Ok(sim.stats.clone())
    });
    eprintln!(
        "survivors: {} founded ({} delivered stored entries first), {} refused ({} of them \
         lacked an acknowledged commit)",
        founded.get(),
        from_stored.get(),
        refused.get(),
        lacked.get()
    );
    assert!(founded.get() > 0 && refused.get() > 0);
    assert!(
        lacked.get() > 0,
        "no refused survivor lacked a commit: the test does not show why the rule is needed"
    );
}
