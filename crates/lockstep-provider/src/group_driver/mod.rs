//! The group channel: the `Worker`, which keeps this node's raft-rs node
//! (`lockstep_core::group::Group`), the transport to the other members
//! (`lockstep_net::transport`) and the timed checks, and the translation
//! of ordered deliveries into the provider's state (`deliver`).
//!
//! Its rounds run on one thread, the transport's event loop, which owns
//! the `Worker` (ADR 0039): a round runs when an input wakes the loop,
//! when a peer message came, and at least every `POLL` while anything is
//! under way (Raft's ticks). The server's threads never touch Raft: they
//! queue [`Input`]s and wait on the shared state, which the round updates
//! under the provider's one lock.

mod chores;
mod deliver;
mod identities;
mod read_ask;
mod recovery;
mod refusals;

use crate::group_input::{Input, InputTx};
use crate::log::{error, info, warn};
use crate::shared::Shared;
use crate::state::Resolution;
use lockstep_core::group::node::{is_exact_half, HoldsAll, MayLack};
use lockstep_core::group::peer::{PeerMsg, CLOCK_VERSION};
use lockstep_core::group::{relay, Action, Delivery, Group, GroupConfig, MemberInfo, Output};
use lockstep_core::metrics::Stage;
use lockstep_core::wire::lanes::{Lane, Outgoing as _};
pub use lockstep_net::transport::Identity;
use lockstep_net::transport::{self, Inbound, LoopOwner, Out, Staged, Transport};
use raft::eraftpb::MessageType;
pub use recovery::RecoveryStart;
use std::collections::HashMap;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long `GroupChannel::stop` waits for the event loop to give the
/// stopped `Worker` back (its last round, then the loop's next look).
const STOP_WAIT: Duration = Duration::from_secs(30);

/// How often the rounds run without input while anything is
/// under way (Raft's ticks, retries, the timed checks).
const POLL: Duration = Duration::from_millis(10);

/// The longest the rounds' loop waits without input when nothing is
/// under way (`Worker::quiet`): the heartbeat's pace, or the idle beat in
/// close contact (`evs.keepalive_period`, Galera's once a second), at
/// most this. The timed checks (probes, pokes) then run at the next
/// wake, up to this late.
const IDLE_POLL_MAX: Duration = Duration::from_secs(1);
/// How often a non-primary learner pokes the members.
const POKE_EVERY: Duration = Duration::from_secs(1);

/// How often to report `last_committed` for index purging.
const REPORT_COMMITTED: Duration = Duration::from_millis(500);

/// Log entries this node applies before it reports them even when
/// `last_committed` did not move (a joiner waiting for its SST): the
/// leader compacts its log only below what every member has applied.
/// The reports themselves are entries, so an idle group reports about
/// once per `APPLIED_STEP / members` rounds, not every round.
const APPLIED_STEP: u64 = 256;

/// `evs.suspect_timeout` in milliseconds, at start and at runtime alike;
/// at least 1 s, so that a mistyped value cannot make the leader evict
/// members between two heartbeats.
pub fn suspect_timeout_ms(d: Duration) -> u64 {
    (d.as_millis() as u64).max(1000)
}

/// What the transport hands over goes into the group's input; the
/// loop's next look runs the round that takes it (ADR 0039).
fn inbound_sink(tx: InputTx) -> transport::Sink {
    Arc::new(move |inbound| {
        let input = match inbound {
            Inbound::PeerUp {
                raft_id,
                peer_addr,
                cert,
            } => Input::PeerUp {
                raft_id,
                peer_addr,
                cert,
            },
            Inbound::Peer { from, msg } => Input::Peer { from, msg },
            Inbound::PeerDown { raft_id } => Input::PeerDown { raft_id },
        };
        tx.send_from_network(input)
    })
}

/// How to start the channel.
pub struct Setup {
    pub me: MemberInfo,
    pub cluster: String,
    pub listen: String,
    pub seeds: Vec<String>,
    /// `Some((history, last_seqno))` founds a new cluster.
    pub bootstrap: Option<([u8; 16], i64)>,
    pub config: GroupConfig,
    /// `pc.wait_prim_timeout`: give up joining after this long.
    pub join_timeout: Duration,
    /// `gmcast.isolate` was set before connecting.
    pub isolated: bool,
    /// `pc.ignore_sb` and `pc.ignore_quorum`.
    pub ignore_quorum: crate::group_input::QuorumOverrides,
    /// `pc.weight`.
    pub weight: u32,
    /// `pc.recovery`: a non-primary member votes too.
    pub pc_recovery: bool,
    /// `pc.recovery`: this node's vote and the saved view's addresses.
    pub recovery: Option<recovery::RecoveryStart>,
    /// `pc.recovery`: the saved view, kept in step with the group's
    /// binding table.
    pub views: Option<Arc<crate::viewstate::ViewKeeper>>,
    /// TLS or plain for peer connections.
    pub security: Arc<lockstep_net::secure::PeerSecurity>,
    /// The server's allowlist, asked for every accepted connection.
    pub admit: transport::Admission,
}

pub struct GroupChannel {
    tx: InputTx,
    /// Tells the rounds a stop is coming (`Worker::room_for_a_round`).
    stop_asked: Arc<std::sync::atomic::AtomicBool>,
    /// Where the event loop gives the stopped `Worker` back.
    back: Receiver<Box<dyn LoopOwner>>,
    /// The threads `free` waits for: a stop that gave up waits on there.
    detached: lockstep_net::threads::Threads,
}

impl GroupChannel {
    pub fn start(mut setup: Setup, shared: Arc<Shared>) -> Result<(GroupChannel, InputTx), String> {
        // Authenticated peers: no relays, whose first sender cannot be
        // checked (ADR 0014, `sender_checks`).
        setup.config.checked_senders = setup.security.enforces_bindings();
        let (sender, rx) = channel();
        let tx = InputTx::new(sender);
        let now = 0;
        let group = match setup.bootstrap {
            Some((history, last)) => {
                Group::bootstrap(setup.me.clone(), setup.config.clone(), history, last, now)?
            }
            None => Group::join(setup.me.clone(), setup.config.clone(), now)?,
        };
        let identity = Identity {
            cluster: setup.cluster.clone(),
            raft_id: setup.me.raft_id,
            peer_addr: setup.me.peer_addr.clone(),
            bind_ip: setup
                .listen
                .parse::<std::net::SocketAddr>()
                .ok()
                .map(|a| a.ip())
                .filter(|ip| !ip.is_unspecified()),
        };
        let transport = Transport::start(
            identity,
            &setup.listen,
            setup.security.clone(),
            setup.admit.clone(),
            inbound_sink(tx.clone()),
        )?;
        transport.set_isolated(setup.isolated);
        transport.set_quick(read_ask::quick(shared.clone()));
        let chores_shared = shared.clone();
        let stop_asked = Arc::new(std::sync::atomic::AtomicBool::new(false));
        for s in &setup.seeds {
            transport.dial(s);
        }
        let worker = Worker {
            recovery: setup.recovery.map(recovery::Recovery::new),
            views: setup.views,
            me: setup.me.clone(),
            config: setup.config.clone(),
            ignore_quorum: setup.ignore_quorum,
            weight: setup.weight,
            weight_told: None,
            last_poke: None,
            pc_recovery: setup.pc_recovery,
            last_view: None,
            group,
            transport,
            staged: Staged::default(),
            shared,
            seeds: setup.seeds,
            join_timeout: setup.join_timeout,
            gave_up: false,
            left_signalled: false,
            quiet: false,
            non_primary_after: Duration::from_millis(setup.config.suspect_timeout_ms),
            leaderless_since: None,
            non_primary: false,
            rejoin_asked: false,
            addrs: HashMap::new(),
            started: Instant::now(),
            epoch_ns: crate::state::mono_ns(),
            lease_published: (None, 0),
            last_ping: Instant::now(),
            taken: 0,
            wan_bytes: 0,
            last_report: Instant::now(),
            reported: -1,
            reported_applied: 0,
            rx,
            rounds_started: false,
            chores: chores::Chores::start(chores_shared.clone(), tx.clone()),
            short_of_room: None,
            stop_asked: stop_asked.clone(),
            identities: identities::Identities::new(setup.security.clone()),
            refusals: refusals::RefusalLog::default(),
        };
        tx.set_waker(worker.transport.owner_waker());
        let seat = worker.transport.owner_seat();
        let (back_tx, back) = channel();
        seat.seat(Box::new(worker), back_tx);
        Ok((
            GroupChannel {
                tx: tx.clone(),
                stop_asked,
                back,
                detached: chores_shared.detached.clone(),
            },
            tx,
        ))
    }

    /// Stops the rounds (the last one's messages go out) and closes every
    /// connection, here: the transport's shutdown waits for the event
    /// loop, which gives the stopped `Worker` back.
    pub fn stop(self) {
        self.stop_asked
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = self.tx.send(Input::Stop);
        let back = match self.back.recv_timeout(STOP_WAIT) {
            Ok(mut worker) => return worker.shut(),
            Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => self.back,
        };
        warn!(
            "the group's event loop did not stop its rounds within {} s; its connections stay \
             open until that round ends",
            STOP_WAIT.as_secs()
        );
        // The loop gives the `Worker` back when its round ends (or drops
        // it with the loop): shut then, on a thread `free` waits for
        // (`DETACHED_WAIT`), not on one the loop would start uncounted.
        self.detached.spawn("lockstep-late-stop", move || {
            if let Ok(mut worker) = back.recv() {
                worker.shut();
            }
        });
    }
}

/// What founding a primary component alone must respect.
#[derive(Debug, Clone, Copy)]
pub(super) enum Founding {
    /// Drop no acknowledged commit (`Group::holds_every_commit`), unless
    /// the operator forces it.
    Guarded { force: bool },
    /// `pc.ignore_sb` / `pc.ignore_quorum`: a split brain the operator
    /// chose; each side continues after what it ordered.
    SplitBrainAllowed,
    /// `pc.recovery`: every member of the last primary component voted,
    /// and this node holds the most.
    AllMembersVoted,
}

fn holds_all_words(how: HoldsAll) -> &'static str {
    match how {
        HoldsAll::Led => "this node led the group last, so it holds every commit",
        HoldsAll::CommitsNeedIt => {
            "no commit of its group could be made without this node, so it holds every commit"
        }
        HoldsAll::NeverMember => "this node was never a member; it continues after its own state",
    }
}

/// A round longer than this is logged.
const SLOW_ROUND: Duration = Duration::from_millis(500);
/// How often each peer's round trip is probed (metrics, clock rates).
const PING_EVERY: Duration = Duration::from_secs(1);
/// The same while the group sleeps in close contact, with no lease in
/// use: a clock rate is judged over at least `clocks::WINDOW_NS` (2 s)
/// anyway, and an idle cluster's every probe costs both ends two
/// wake-ups. A tenth more, so that two probes' midpoints are a whole
/// window apart despite their round trips (one a hair short would wait
/// for the next).
const PING_EVERY_IDLE: Duration =
    Duration::from_nanos(lockstep_core::clocks::WINDOW_NS + lockstep_core::clocks::WINDOW_NS / 10);

struct Worker {
    group: Group,
    me: MemberInfo,
    config: GroupConfig,
    /// `pc.ignore_sb` / `pc.ignore_quorum`: re-found alone on quorum loss
    /// (the first only in an exact-half split).
    ignore_quorum: crate::group_input::QuorumOverrides,
    pc_recovery: bool,
    /// The last primary view this node was in (for its recovery vote).
    last_view: Option<lockstep_core::group::GroupView>,
    /// `pc.recovery` in progress (no primary component reached yet).
    recovery: Option<recovery::Recovery>,
    /// See [`Setup::views`].
    views: Option<Arc<crate::viewstate::ViewKeeper>>,
    transport: Transport,
    /// The messages of the round running, written after it lets go of
    /// the driver (`driver::After`, ADR 0033).
    staged: Staged,
    shared: Arc<Shared>,
    seeds: Vec<String>,
    join_timeout: Duration,
    gave_up: bool,
    /// The end of a graceful leave was passed to the provider.
    left_signalled: bool,
    /// The last round left nothing under way on the provider's side (flow
    /// control steady, no read asked, nothing delivered, the node Synced
    /// with an empty apply queue): if the group is quiet too
    /// (`Group::idle_wait_ms`), the loop may wait until the next
    /// heartbeat is due, or an input wakes it (issue 53: tickless when
    /// idle).
    quiet: bool,
    /// Without a leader this long, the node is in a minority: non-primary.
    non_primary_after: Duration,
    leaderless_since: Option<Instant>,
    non_primary: bool,
    /// A rejoin was asked of the provider (once per channel).
    rejoin_asked: bool,
    /// Peer addresses learnt from hellos.
    addrs: HashMap<u64, String>,
    started: Instant,
    /// `state::mono_ns` when the group started: the group's time (ms) is
    /// counted from here (`clock_ms`), on the clock the leases' readers
    /// judge them on.
    epoch_ns: u64,
    last_report: Instant,
    reported: i64,
    reported_applied: u64,
    /// `pc.weight`, and when the group was last told (the group's record
    /// of it is what counts; told again until it matches).
    weight: u32,
    weight_told: Option<Instant>,
    /// When a non-primary learner last poked the members (`poke_members`).
    last_poke: Option<Instant>,
    /// The read lease and Raft leader last published to the shared state.
    lease_published: (Option<crate::causal_reads::ReadLease>, u64),
    /// When `ping_peers` last probed.
    last_ping: Instant,
    /// Proposals taken from the input (`Proposals::publish`).
    taken: u64,
    /// Messages refused because of their sender, and their warnings.
    refusals: refusals::RefusalLog,
    /// Bytes sent to members of other segments (`RoundStatus::wan_bytes_sent`).
    wan_bytes: u64,
    /// The group's input; a round takes all of it.
    rx: Receiver<Input>,
    /// `start_rounds` ran (the first turn on the event loop).
    rounds_started: bool,
    /// Disk work and frees, off the event loop (ADR 0039).
    chores: chores::Chores,
    /// The cache writer's room after the last delivering round, until it
    /// is free: since when it was looked at, and how long ago that was
    /// last logged.
    short_of_room: Option<(crate::cache_writer::Room, Instant, Duration)>,
    /// Set by `GroupChannel::stop` before its `Input::Stop`.
    stop_asked: Arc<std::sync::atomic::AtomicBool>,
    /// Members bound to their certificates (ADR 0014).
    identities: identities::Identities,
}

/// A round panicked (a bug), which counts as the group thread failing:
/// no round runs again. Nothing would order or deliver for this node any
/// more while it still looked Synced, so it leaves as an inconsistent
/// node does: an applier delivers the final view and the server stops
/// serving. (Its connections are closed, as `gmcast.isolate` closes
/// them, and the others see the node go.)
fn group_thread_failed(shared: &Shared, what: &str) {
    error!(
        "the group thread failed: {what}; this is a Lockstep bug, please report it with \
         this log. This node leaves the cluster"
    );
    let mut g = shared.lock();
    g.enqueue(crate::event::Event::Inconsistent(format!(
        "the group thread failed ({what})"
    )));
    drop(g);
    shared.notify();
}

impl Worker {
    /// Before the first round, on the event loop.
    fn start_rounds(&mut self) {
        // A new channel is a new member: nothing announced yet, and the
        // old group's requests do not apply. (Here, not in `start`: its
        // caller may hold the lock.)
        let mut g = self.shared.lock();
        g.flow.new_channel(crate::state::mono_ns());
        g.peers = Some(self.transport.sender());
        g.proposals.publish(0, 0);
        g.reads.forget_leader();
    }
}

impl LoopOwner for Worker {
    /// A round on the event loop, then its messages. `None` once the
    /// group stops, or after a panic in the round (a bug: the node
    /// leaves, `group_thread_failed`, and its connections close).
    fn turn(&mut self) -> Option<Duration> {
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if !self.room_for_a_round() {
                // Back-pressure: the loop still reads into the input
                // budget (then holds peers back) and writes what is queued.
                return Some(crate::cache_writer::ROOM_RETRY);
            }
            if !self.rounds_started {
                self.rounds_started = true;
                self.start_rounds();
            }
            let stop = self.round();
            // The round's messages (a farewell too, before the
            // connections close), written or queued on the loop.
            std::mem::take(&mut self.staged).send();
            (!stop).then(|| self.idle_wait())
        }));
        match ran {
            Ok(next) => next,
            Err(payload) => {
                group_thread_failed(&self.shared, &crate::log::panic_message(&*payload));
                self.transport.set_isolated(true);
                None
            }
        }
    }

    fn shut(&mut self) {
        self.transport.shutdown();
        self.chores.finish();
    }
}

impl Worker {
    /// Whether another round may deliver: no spill job is out (the
    /// receive queue's memory bound) and the writeset cache's writer has
    /// room (at most `MAX_QUEUED_BYTES` queued; logged every `ROOM_NOTE`
    /// while it has not). Once the provider asked the rounds to stop,
    /// the writer's room no longer holds them (the last rounds leave).
    fn room_for_a_round(&mut self) -> bool {
        if self.chores.spilling() {
            return false;
        }
        if self.stop_asked.load(std::sync::atomic::Ordering::SeqCst) {
            return true;
        }
        let Some((room, since, said)) = &mut self.short_of_room else {
            return true;
        };
        if room.is_free() {
            self.short_of_room = None;
            return true;
        }
        if since.elapsed() >= *said + crate::cache_writer::ROOM_NOTE {
            *said = since.elapsed();
            warn!(
                "the group has waited {} s for the writeset cache's writer to make room in its \
                 queue: the disk under gcache.dir is slow",
                said.as_secs()
            );
        }
        false
    }

    /// How long the loop may wait for the next round without input:
    /// `POLL` while anything is under way, longer when nothing is: the
    /// heartbeat's pace, or longer in close contact
    /// (`Group::idle_wait_ms`).
    fn idle_wait(&mut self) -> Duration {
        match self.group.idle_wait_ms(self.quiet) {
            Some(ms) => Duration::from_millis(ms).clamp(POLL, IDLE_POLL_MAX),
            None => POLL,
        }
    }

    /// One round, on the event loop: every pending input, the timed
    /// checks, Raft's ready, and what it sends and delivers. `true` when
    /// the group is to stop.
    fn round(&mut self) -> bool {
        let round = Instant::now();
        self.group.set_clock(self.clock_ms());
        loop {
            match self.rx.try_recv() {
                Ok(input) => {
                    if self.handle(input) {
                        return true;
                    }
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return true,
            }
        }
        let stepped = round.elapsed();
        self.report_committed();
        self.report_weight();
        let bound = self.identities.round(&mut self.group, &self.transport);
        // Messages the group refused because of their sender (it counts
        // them; they are logged here).
        for r in self.group.take_refusals() {
            self.refusals.warn(r.from, &r.what, r.why);
        }
        // The round's one look at the provider's state before Raft's
        // step (one lock, not one per concern: on two busy cores each
        // contended lock can cost a sleep and a wake-up).
        let mut g = self.shared.lock();
        let weight_moved = self.publish_local(&mut g);
        if let Some(bound) = bound {
            g.status.bound_members = bound;
        }
        g.status.refused_messages = self.refusals.total() + self.group.refused_total();
        let clocks_agree = g.clock_rates.agree();
        let flow = self.flow_control(&mut g);
        // Each round, not only on deliveries: an applier may finish an
        // asked-about seqno while nothing else is ordered.
        g.answer_votes();
        let asked = g.reads.take_asked();
        let settled =
            g.local.state() == lockstep_core::group::MemberState::Synced && g.queue.is_empty();
        let marker_removal = g.bypass.take_removal();
        let spills = g.queue.take_spills();
        drop(g);
        if let Some(job) = marker_removal {
            // A closed commit bypass's marker (ADR 0011): a durable
            // removal, under no lock that a client thread takes.
            self.chores.give(chores::Chore::Marker(job));
        }
        self.spill(spills);
        self.group.set_clocks_agree(clocks_agree);
        if let (Some(_), Some(views)) = (bound, &self.views) {
            // Rare (a founder's first binding, a reloaded certificate).
            let table = self.group.sequencer().bindings().clone();
            self.chores.give_bindings(views.clone(), table);
        }
        if weight_moved || flow == Flow::Leaving {
            self.shared.notify();
        }
        if let Flow::Announce(level) = flow {
            let raft_id = self.group.me().raft_id;
            self.group.propose(Action::FlowControl { raft_id, level });
        } else if flow == Flow::Leaving {
            self.group.leave();
        }
        if asked {
            self.group.saw_read();
        }
        self.ping_peers();
        self.check_join_timeout();
        self.drive_recovery();
        self.check_quorum();
        let now = self.clock_ms();
        self.group.tick(now);
        let outputs = self.group.poll();
        let polled = round.elapsed();
        let writesets = outputs
            .iter()
            .filter(|o| matches!(o, Output::Deliver(Delivery::Writeset(_))))
            .count() as u32;
        let delivered = outputs.iter().any(|o| matches!(o, Output::Deliver(_)));
        // The time per ordered writeset: Raft's ready and the sequencer
        // (certification); the deliveries' own time is not in it.
        // Saturating: a clock that steps back (libfaketime's leaps) makes
        // a later `elapsed` smaller than an earlier one.
        let certified =
            (writesets > 0).then(|| round.elapsed().saturating_sub(stepped) / writesets);
        self.process(outputs, certified);
        // The loop asks `idle_wait` after this round: the next deadline
        // follows at once.
        // The group's side (`Group::is_quiet`) is asked in `idle_wait`.
        self.quiet = settled && !delivered && !asked && flow == Flow::Steady;
        let reaped = self.group.sequencer_mut().take_reaped();
        if !reaped.is_empty() {
            self.chores.give(chores::Chore::Free(reaped));
        }
        if round.elapsed() >= SLOW_ROUND {
            // Heartbeats wait while a round runs: a round this long is
            // what a big writeset costs the group.
            info!(
                "group round: one round took {} ms (inputs {} ms, Raft {} ms, deliveries {} ms)",
                round.elapsed().as_millis(),
                stepped.as_millis(),
                polled.saturating_sub(stepped).as_millis(),
                round.elapsed().saturating_sub(polled).as_millis()
            );
        }
        if !self.left_signalled && self.group.has_left() {
            self.left_signalled = true;
            self.left_group();
        }
        false
    }
}

impl Worker {
    /// Once a second (every 2.2 s while the group sleeps in close
    /// contact), a round-trip probe to every other member (answered
    /// on its transport's event loop, `read_ask::quick`; ADR 0019). A member with
    /// no connection yet is dialed (Raft alone connects followers only to
    /// the leader); the probe that found none is dropped.
    fn ping_peers(&mut self) {
        let every = if self.group.sleeps_in_close_contact() {
            PING_EVERY_IDLE
        } else {
            PING_EVERY
        };
        if self.last_ping.elapsed() < every {
            return;
        }
        self.last_ping = Instant::now();
        let me = self.group.me().raft_id;
        let peers: Vec<u64> = self
            .group
            .sequencer()
            .members()
            .iter()
            .map(|m| m.info.raft_id)
            .filter(|id| *id != me)
            .collect();
        // Former members' clocks are forgotten (bounded by the members).
        self.shared.lock().clock_rates.keep(&peers);
        let clocks = self.group.sequencer().cluster_version() >= CLOCK_VERSION;
        for peer in peers {
            let sent = crate::state::mono_ns();
            let ping = if clocks {
                PeerMsg::ClockPing { sent }
            } else {
                PeerMsg::Ping { sent }
            };
            // Written now, not staged: its time is taken here, and the
            // rest of the round would count in the round trip.
            if let Ok(frame) = ping.to_frame() {
                let addr = self.address_of(peer);
                self.transport
                    .send(peer, Out::Frame(frame), Lane::Control, addr.as_deref());
            }
        }
    }

    /// The group's time: milliseconds since `epoch_ns` on the steady
    /// clock (`state::mono_ns`, ADR 0036).
    fn clock_ms(&self) -> u64 {
        crate::state::mono_ns().saturating_sub(self.epoch_ns) / 1_000_000
    }

    /// The lease for causal reads on this node (ADR 0016) and the leader,
    /// when either changed since the last one published. `process`
    /// publishes it in its lock section, before the messages of this
    /// round go out: none of them may carry a commit index above the
    /// published one.
    fn lease_to_publish(&mut self) -> Option<LeaseNews> {
        let lease = self
            .group
            .read_lease()
            .map(|(until, index)| crate::causal_reads::ReadLease {
                until_ns: self.epoch_ns + until.saturating_mul(1_000_000),
                index,
            });
        let leader = self.group.leader();
        if (lease, leader) == self.lease_published {
            return None;
        }
        let leader_changed = leader != self.lease_published.1;
        self.lease_published = (lease, leader);
        Some(LeaseNews {
            lease,
            leader,
            leader_changed,
        })
    }

    /// What became of this node's proposals: how many this thread took,
    /// how many are not ordered yet (`Inner::own_proposals_ordered`, the
    /// send queue).
    fn publish_proposals(&self, g: &mut crate::state::Inner) {
        g.proposals.publish(self.taken, self.group.in_flight());
        g.status.wan = self.group.wan_counters();
        g.status.wan_bytes_sent = self.wan_bytes;
        let version = self.group.sequencer().cluster_version();
        if version != g.status.cluster_version {
            info!("the cluster now runs group protocol version {version}");
            g.status.cluster_version = version;
        }
    }

    /// A message from a connected peer (its bytes already given back to
    /// the input budget).
    fn peer_message(&mut self, from: u64, msg: PeerMsg) {
        match msg {
            // Parsed from shared bytes: the entries' data are slices of
            // the frame, not copies (a big writeset's fragments then pass
            // from the wire to the log and the sequencer without a copy
            // on this thread; copying them was a quarter of its time while
            // one streamed, most of it page faults).
            PeerMsg::Raft(bytes) => match lockstep_core::group::peer::decode_raft(bytes) {
                Ok(m) if m.from == from => self.group.step(m),
                Ok(m) => self.refusals.refused(
                    from,
                    &format!(
                        "a Raft {:?} claiming sender {:#x}",
                        m.get_msg_type(),
                        m.from
                    ),
                    "a peer speaks only for the Raft id its connection is bound to",
                ),
                Err(e) => warn!("peer {from} sent an undecodable Raft message: {e}"),
            },
            PeerMsg::Relay(bytes) => match relay::decode(&bytes::Bytes::from(bytes)) {
                Ok(msgs) => self.group.step_relay(from, msgs),
                Err(e) => warn!("peer {from} sent an undecodable relay bundle: {e}"),
            },
            // A leader's message passed on by a member of this segment.
            PeerMsg::Relayed(bytes) => match lockstep_core::group::peer::decode_raft(bytes) {
                Ok(m) => self.group.step_relayed(from, m),
                Err(e) => warn!("peer {from} relayed an undecodable Raft message: {e}"),
            },
            PeerMsg::Join(info) if info.raft_id == from => {
                let cert = self.identities.presented_by(from);
                self.group.handle_join(info, cert)
            }
            PeerMsg::Join(info) => self.refusals.refused(
                from,
                &format!("a join request for Raft id {:#x}", info.raft_id),
                "a peer asks to join only for itself",
            ),
            // Ends a graceful leave; the loop passes it on (has_left).
            PeerMsg::Farewell => {
                self.group.handle_farewell(from);
            }
            // Taken from any peer, not only from a member of this node's
            // last view: after a crash of the others the leader that
            // removed it is a new member it never saw (`pause-crash`: a
            // check here kept the paused node out for good, ADR 0014
            // item 15). It acts only on a node without a leader, which
            // rejoins through the safe-bootstrap checks.
            PeerMsg::NotMember => self.removed_notice(from),
            PeerMsg::Lease(m) => {
                // A grant binds from the moment it is sent: the clock is
                // read after the ping arrived (`read_grants`).
                self.group.set_clock(self.clock_ms());
                self.group.step_lease(from, m);
            }
            PeerMsg::Recovery(vote) => {
                let checked = self.config.checked_senders;
                let presented = self.identities.presented_by(from);
                if let Some(r) = self.recovery.as_mut() {
                    match r.refuses(&vote, presented.as_ref()).filter(|_| checked) {
                        Some(why) => self.refusals.refused(
                            from,
                            &format!("a pc.recovery vote for member {}", vote.member),
                            why,
                        ),
                        None => r.heard(vote),
                    }
                }
            }
            // Handled on the connection threads (`read_ask`).
            PeerMsg::Hello { .. }
            | PeerMsg::Refuse { .. }
            | PeerMsg::ReadAsk { .. }
            | PeerMsg::ReadAnswer { .. }
            | PeerMsg::Ping { .. }
            | PeerMsg::Pong { .. }
            | PeerMsg::ClockPing { .. } => {}
            // Passed on by the connection thread only from a peer not in
            // this node's view.
            PeerMsg::ClockPong { sent, clock } => self.clock_pong(from, sent, clock),
        }
    }

    /// A clock probe's answer from a peer not in this node's view
    /// (`read_ask::quick`): a member of the group, which this node pinged,
    /// counts (its round trip too, which the non-primary component is
    /// judged by); any other peer's is dropped, counted and noted, not
    /// warned of: a member evicted since the ping answers that way, and a
    /// stranger's answer changes nothing. (A warning here failed MariaDB's
    /// `galera.galera_kill_nochanges`, `galera_split_brain` and
    /// `MDEV-26597`, whose restarted node answers before its view.)
    fn clock_pong(&mut self, from: u64, sent: u64, clock: u64) {
        let Some(name) = self
            .group
            .sequencer()
            .member(from)
            .map(|m| m.info.name.clone())
        else {
            self.refusals.noted(
                from,
                "a clock probe's answer",
                "only a member's clock counts for the leases (ADR 0036)",
            );
            return;
        };
        let now = crate::state::mono_ns();
        read_ask::member_clock_answer(self.shared.lock(), &name, from, sent, now, clock);
    }

    /// Returns whether to stop.
    fn handle(&mut self, input: Input) -> bool {
        match input {
            Input::Peer { from, msg } => {
                self.transport
                    .input_budget()
                    .give_back(transport::input_bytes(&msg));
                self.peer_message(from, msg);
            }
            Input::PeerUp {
                raft_id,
                peer_addr,
                cert,
            } => {
                self.addrs.insert(raft_id, peer_addr);
                self.identities.peer_up(raft_id, cert);
            }
            Input::PeerDown { raft_id } => {
                self.identities.peer_down(raft_id);
                self.group.peer_lost(raft_id);
            }
            Input::Propose { id, action } => {
                self.taken += 1;
                self.group.propose_with_id(id, action);
            }
            Input::ReadFence { id } => self.group.read_fence(id),
            Input::ProposeFragments { id, parts } => {
                self.taken += 1;
                self.group.propose_fragments(id, parts);
            }
            Input::Isolate(on) => self.isolate(on),
            Input::SuspectTimeout(d) => {
                let ms = suspect_timeout_ms(d);
                self.group.set_suspect_timeout(ms);
                self.non_primary_after = Duration::from_millis(ms);
            }
            Input::Bootstrap { force } => {
                self.bootstrap_here("pc.bootstrap=YES", false, Founding::Guarded { force })
            }
            Input::IgnoreQuorum(on) => self.ignore_quorum = on,
            Input::Weight(w) => {
                self.weight = w;
                self.weight_told = None;
            }
            // The round after this input runs `flow_control`.
            Input::FlowCheck => {}
            Input::Leave => self.group.leave(),
            Input::Stop => return true,
            #[cfg(any(test, feature = "fault-injection"))]
            Input::Panic => panic!("injected by a test"),
        }
        false
    }

    fn isolate(&mut self, on: bool) {
        if on == self.transport.is_isolated() {
            return;
        }
        self.transport.set_isolated(on);
        if on {
            info!("gmcast.isolate: closed every peer connection; refusing peers until it is 0");
            return;
        }
        info!("gmcast.isolate=0: connecting to the cluster again");
        let mut addrs: Vec<String> = self.seeds.clone();
        addrs.extend(self.addrs.values().cloned());
        addrs.extend(
            self.group
                .sequencer()
                .members()
                .iter()
                .map(|m| m.info.peer_addr.clone()),
        );
        addrs.sort();
        addrs.dedup();
        for a in addrs {
            self.transport.dial(&a);
        }
    }

    /// The graceful leave is complete: end the session with the final
    /// view (unless the removal view already did).
    fn left_group(&mut self) {
        let mut g = self.shared.lock();
        if g.membership.in_group() && g.conn == crate::state::Conn::Closing {
            g.enqueue(crate::event::Event::Removed);
            g.appliers.end_isolation();
        }
        drop(g);
        self.shared.notify();
    }

    /// A joiner that reaches no primary component within
    /// `pc.wait_prim_timeout` gives up, like Galera, so the server stops
    /// instead of waiting forever (wrong address, cluster name mismatch).
    fn check_join_timeout(&mut self) {
        if self.gave_up
            || self.recovery.is_some()
            || self.group.is_member()
            || self.group.was_member()
            || self.started.elapsed() < self.join_timeout
        {
            return;
        }
        self.gave_up = true;
        let mut g = self.shared.lock();
        if g.membership.in_group() {
            return;
        }
        error!(
            "could not join a primary component within {:?} (pc.wait_prim_timeout) via {}; \
             check wsrep_cluster_address, wsrep_cluster_name and that the other nodes run",
            self.join_timeout,
            self.seeds.join(",")
        );
        g.enqueue(crate::event::Event::Removed);
        drop(g);
        self.shared.notify();
    }

    /// A member that knows no leader for `evs.suspect_timeout` is cut off
    /// from the majority: it delivers a non-primary view, so clients get
    /// errors instead of waiting (contract §4.13). When a leader is back
    /// and this node is still a member, it asks for a re-merge view.
    fn check_quorum(&mut self) {
        if !self.group.is_member() {
            return;
        }
        if self.group.has_leader() {
            self.leaderless_since = None;
            if self.non_primary {
                self.non_primary = false;
                info!("majority reachable again; asking to re-merge");
                let raft_id = self.group.me().raft_id;
                self.group.propose(Action::Remerge { raft_id });
            }
            return;
        }
        let since = *self.leaderless_since.get_or_insert_with(Instant::now);
        if self.non_primary {
            if self.last_poke.is_none_or(|t| t.elapsed() >= POKE_EVERY) {
                self.last_poke = Some(Instant::now());
                self.group.poke_members();
                self.publish_component();
            }
            return;
        }
        if since.elapsed() < self.non_primary_after {
            return;
        }
        if self.ignore_quorum.ignore_quorum {
            // Split brain allowed: stay primary, alone, with the
            // operations in flight carried over (no non-primary view).
            self.bootstrap_here("pc.ignore_quorum", true, Founding::SplitBrainAllowed);
            return;
        }
        if self.ignore_quorum.ignore_sb && self.holds_exact_half() {
            // Galera's split brain: this side has exactly half of the
            // weight (a minority does not qualify).
            self.bootstrap_here(
                "pc.ignore_sb (a split into exact halves)",
                true,
                Founding::SplitBrainAllowed,
            );
            return;
        }
        if self.group.stands_alone_by_weight() {
            // Weighted quorum: this node alone holds more than half of the
            // group's weight, so it is the primary component (Galera's
            // rule), even if the leader had not yet made it the only voter;
            // but only where the other voters cannot elect a leader
            // without it (`Group::stands_alone_by_weight`, ADR 0027).
            self.bootstrap_here(
                "pc.weight (more than half of the weight)",
                true,
                Founding::Guarded { force: false },
            );
            return;
        }
        self.non_primary = true;
        info!(
            "no contact with a majority of the cluster for {:?}: this node is non-primary \
             and refuses queries until it re-merges",
            self.non_primary_after
        );
        let component = self.component();
        let mut g = self.shared.lock();
        if g.membership.cut_off(component) {
            g.enqueue(crate::event::Event::NonPrimary);
        }
        let abandoned = g.abandon_pending();
        let last_ordered = g.last_ordered;
        drop(g);
        self.start_member_recovery(last_ordered);
        if abandoned > 0 {
            info!(
                "{abandoned} local operations waiting for the total order fail with an error \
                 (no primary component)"
            );
        }
        self.shared.notify();
    }

    /// Makes this node a primary component of its own, continuing the
    /// history after everything it has ordered: `pc.bootstrap=YES`, or
    /// quorum loss with `pc.ignore_sb`. The old group is dropped; its
    /// members that reach this node again are told they are not members
    /// of the new one and rejoin it. A split brain, if the rest of the
    /// cluster is still running, is what the operator asked for. With
    /// `carry`, the proposals not ordered yet are proposed again in the
    /// new group (their clients still wait); otherwise they were already
    /// failed (non-primary) and are dropped.
    fn bootstrap_here(&mut self, why: &str, carry: bool, founding: Founding) {
        if self.group.has_leader() && self.group.is_member() {
            info!("{why}: this node is already in a primary component");
            return;
        }
        if let Founding::Guarded { force } = founding {
            match self.group.holds_every_commit() {
                Ok(how) => info!("{why}: {}", holds_all_words(how)),
                Err(lack) if force => warn!(
                    "{why} with lockstep.force_bootstrap: {}; founding anyway, as asked: what \
                     only they hold is lost",
                    self.may_lack_words(lack)
                ),
                Err(lack) => {
                    error!(
                        "{why} refused: {}. Bootstrap that node instead (SET GLOBAL \
                         wsrep_provider_options='pc.bootstrap=YES' there). If it is lost for \
                         good, accept losing what only it held: SET GLOBAL \
                         wsrep_provider_options='lockstep.force_bootstrap=YES; pc.bootstrap=YES'",
                        self.may_lack_words(lack)
                    );
                    return;
                }
            }
            // What this node stored may have been acknowledged elsewhere
            // before it learned that it committed: deliver it first, as a
            // new Raft leader would commit it.
            self.group.commit_stored();
            let outputs = self.group.poll();
            self.process(outputs, None);
        }
        let (history, last) = {
            let g = self.shared.lock();
            // A member continues after everything ordered (it is applied
            // in order before the new view); a node that never joined,
            // after what it has committed.
            let last = if g.membership.in_group() {
                g.last_ordered
            } else {
                g.last_committed()
            };
            if g.history.is_nil() || last < 0 {
                warn!(
                    "{why}: this node's position is unknown ({}:{last}); ignored (start it with \
                     --wsrep-recover, or bootstrap with --wsrep-new-cluster)",
                    g.history
                );
                return;
            }
            (g.history, last)
        };
        let now = self.clock_ms();
        match Group::bootstrap(
            self.me.clone(),
            self.config.clone(),
            history.data,
            last,
            now,
        ) {
            Ok(group) => {
                info!(
                    "{why}: bootstrapping a primary component from this node at \
                     {history}:{last}"
                );
                let carried = if carry {
                    self.group.take_unordered()
                } else {
                    Vec::new()
                };
                self.group = group;
                // Only the provider's own proposals (ids with the top bit
                // set): the group's internal ones restart their numbering
                // in the new group and would collide.
                for p in carried.into_iter().filter(|p| p.id >= 1 << 63) {
                    self.group.propose_with_id(p.id, p.action);
                }
                self.recovery = None;
                self.leaderless_since = None;
                self.non_primary = false;
            }
            Err(e) => error!("{why}: cannot bootstrap: {e}"),
        }
    }

    /// Who may hold acknowledged commits this node lacks, in words.
    fn may_lack_words(&self, lack: MayLack) -> String {
        let leader = match lack.leader {
            Some(id) => match self.group.sequencer().member(id) {
                Some(m) => format!("node {} ({})", m.info.name, m.info.peer_addr),
                None => format!("node {id:#x}"),
            },
            None => "the leader (this node never knew one)".to_string(),
        };
        let why = if lack.change_in_flight {
            "a configuration change was in flight (it may have added a voter), so the others \
             could commit without it"
                .to_string()
        } else {
            format!(
                "it was one of {} voters, which could commit without it",
                lack.voters
            )
        };
        format!(
            "{why}: it may lack acknowledged commits; {leader}, the last leader it knew, holds \
             every commit up to the time this node lost it"
        )
    }

    /// The leader says this node is not in the configuration: the
    /// primary component removed it while it was cut off. Only a node
    /// that itself sees no leader acts on it (a member that has one knows
    /// better than a stray message).
    fn removed_notice(&mut self, from: u64) {
        if !self.non_primary || self.rejoin_asked || self.group.has_leader() {
            return;
        }
        self.rejoin_asked = true;
        info!(
            "peer {from:#x} (the leader) says the primary component removed this node while \
             it was cut off; rejoining as a new member"
        );
        let mut g = self.shared.lock();
        if g.membership.in_group() && g.conn == crate::state::Conn::Open {
            g.enqueue(crate::event::Event::Rejoin);
        }
        drop(g);
        self.shared.notify();
    }

    /// Tells the group how far this node has committed, so every node
    /// purges its certification index at the same log position.
    fn report_committed(&mut self) {
        if self.last_report.elapsed() < REPORT_COMMITTED || !self.group.is_member() {
            return;
        }
        self.last_report = Instant::now();
        let committed = self.shared.lock().purgeable_upto();
        let applied = self.group.applied_index();
        // A configuration change applied since the last report: say so
        // soon, so that a member may re-form alone on weight or bootstrap
        // knowing nobody counts with the configuration before
        // (`Group::in_every_quorum`, ADR 0027).
        let conf_change = self.group.conf_applied_at() > self.reported_applied;
        if committed > self.reported
            || applied >= self.reported_applied + APPLIED_STEP
            || conf_change
        {
            self.reported = self.reported.max(committed);
            self.reported_applied = applied;
            let raft_id = self.group.me().raft_id;
            self.group.propose(Action::Committed {
                raft_id,
                seqno: committed,
                applied,
            });
        }
    }

    /// Whether this node's recorded weight is more than half of the
    /// group's (the weights the group agreed on, not local settings).
    /// The members heard within the suspect timeout hold exactly half of
    /// the group's weight.
    fn holds_exact_half(&self) -> bool {
        let window = self.non_primary_after.as_millis() as u64;
        is_exact_half(self.group.sequencer().members(), |id| {
            self.group.heard_within(id, window)
        })
    }

    /// Tells the group this node's `pc.weight` while its record differs
    /// (at most once per `REPORT_COMMITTED`).
    fn report_weight(&mut self) {
        let me = self.group.me().raft_id;
        let Some(recorded) = self.group.sequencer().member(me).map(|m| m.weight) else {
            return;
        };
        let due = self
            .weight_told
            .is_none_or(|t| t.elapsed() >= REPORT_COMMITTED);
        if recorded != self.weight && due {
            self.weight_told = Some(Instant::now());
            self.group.propose(Action::Weight {
                raft_id: me,
                weight: self.weight,
            });
        }
    }

    /// Logs the local state's transitions since the last round, and
    /// while a runtime `pc.weight` change waits, publishes whether this
    /// node's weight is in force (`Inner::weight_in_force`); `true` when
    /// that changed (its waiter is to be woken).
    fn publish_local(&self, g: &mut crate::state::Inner) -> bool {
        log_state_shifts(g);
        if g.weight_waiters == 0 {
            return false;
        }
        let me = self.group.me().raft_id;
        let in_force = self
            .group
            .sequencer()
            .member(me)
            .map(|m| m.weight)
            .filter(|_| self.group.weights_in_force());
        let moved = g.weight_in_force != in_force;
        g.weight_in_force = in_force;
        moved
    }

    /// The members this node has a connection with and that answered a
    /// ping within the suspect timeout, itself included: the non-primary
    /// component it is in, as Galera's view lists it (MariaDB's
    /// galera_pc_weight expects two members on the side of a cut that
    /// lost the heavy node). An open connection alone is not enough: the
    /// kernel keeps one to a stopped process (galera_suspend_slave). Raft
    /// traffic is no measure either: followers hear only their leader.
    fn component(&self) -> Vec<u64> {
        let me = self.group.me().raft_id;
        let window = self.non_primary_after.max(3 * PING_EVERY).as_nanos() as u64;
        let now = crate::state::mono_ns();
        let g = self.shared.lock();
        self.group
            .sequencer()
            .members()
            .iter()
            .map(|m| m.info.raft_id)
            .filter(|id| {
                *id == me
                    || (self.transport.is_connected(*id)
                        && g.peer_rtt
                            .answered_at(*id)
                            .is_some_and(|at| now.saturating_sub(at) <= window))
            })
            .collect()
    }

    /// While non-primary: a new non-primary view when the component
    /// changed (a peer of this side came or went), as Galera delivers one.
    fn publish_component(&mut self) {
        let component = self.component();
        let mut g = self.shared.lock();
        if !g.membership.component_changed(component) {
            return;
        }
        g.enqueue(crate::event::Event::NonPrimary);
        drop(g);
        self.shared.notify();
    }

    /// Flow control, this node's side: the level to announce to the
    /// group when its receive queue crosses a boundary (`flow_control`),
    /// or that this node leaves (a queue past its hard limit).
    fn flow_control(&self, g: &mut crate::state::Inner) -> Flow {
        if !self.group.is_member() || !self.group.has_leader() {
            return Flow::Steady;
        }
        g.flow.round_looked();
        if !g.membership.in_group() {
            return Flow::Steady;
        }
        let members = g.membership.members().len();
        // What waits behind a large writeset's apply is left out, within
        // a bound (ADR 0011).
        let inner = &mut *g;
        let queue = inner.bypass.counted(
            inner.gates.commit_level(),
            inner.queue.iter().map(|e| (e.seqno(), e.bytes())),
            Instant::now(),
        );
        if let Some((bytes, limit)) = g.queue.over_hard_limit() {
            // Galera aborts the node here; Lockstep leaves the cluster
            // and the server runs on (it comes back by state
            // transfer). The queued writesets are dropped: this
            // node's state is no longer the group's, and the limit
            // is about the memory they hold.
            error!(
                "receive queue of {bytes} bytes exceeds gcs.recv_q_hard_limit ({limit}); \
                 this node leaves the cluster and needs a state transfer to rejoin"
            );
            g.local.inconsistent();
            g.queue.drop_writesets();
            g.queue.push_front(crate::event::Event::Removed);
            return Flow::Leaving;
        }
        // Only a node whose state is the group's holds writers back
        // (Synced, or Joined and catching up, as in Galera): a joiner
        // waiting for its state transfer queues by design, and a donor or
        // desynced node never holds the cluster back.
        use lockstep_core::group::MemberState::{Joined, Synced};
        let exempt = !matches!(g.local.state(), Synced | Joined);
        let Some((level, limits)) = g.flow.update(queue, members, exempt) else {
            return Flow::Steady;
        };
        if level == lockstep_core::flow_control::STOP {
            info!(
                "flow control: receive queue at {queue} (gcs.fc_limit {} for {members} members); \
                 asking the cluster to pause",
                limits.upper(members)
            );
        }
        Flow::Announce(level)
    }

    /// A leader's appends for several members of a remote segment, as one
    /// bundle to the relay `via` (ADR 0020); one too big for a message
    /// goes as raft-rs made it.
    fn send_bundle(&mut self, via: u64, msgs: Vec<raft::eraftpb::Message>) {
        let frame = relay::encode(&msgs)
            .map_err(|e| e.to_string())
            .and_then(|b| PeerMsg::Relay(b).into_frame().map_err(|e| e.to_string()));
        match frame {
            Ok(frame) => {
                self.wan_bytes += frame.len() as u64;
                self.stage(via, Out::Frame(frame), Lane::Bulk);
            }
            Err(e) => {
                info!("appends to {via}'s segment go one by one ({e})");
                for msg in msgs {
                    let (to, out) = (msg.to, Out::Raft(msg));
                    self.wan_bytes += out.frame_len() as u64;
                    self.stage(to, out, Lane::Bulk);
                }
            }
        }
    }

    /// As a relay, passes a leader's message on inside this segment.
    fn forward(&mut self, to: u64, msg: raft::eraftpb::Message) {
        match lockstep_core::group::peer::relayed_frame(&msg) {
            Ok(frame) => self.stage(to, Out::Frame(frame), Lane::Bulk),
            Err(e) => warn!("cannot pass a leader's message on to {to}: {e}"),
        }
    }

    /// Stages `msg` for `to` on the control lane (a message that cannot be
    /// framed is not sent).
    fn send_control(&mut self, to: u64, msg: PeerMsg) {
        if let Ok(frame) = msg.to_frame() {
            self.stage(to, Out::Frame(frame), Lane::Control);
        }
    }

    /// Stages `out` for member `to` on `lane`, to be written after the
    /// round (ADR 0033); without a connection its address is dialed.
    fn stage(&mut self, to: u64, out: Out, lane: Lane) {
        let addr = self.address_of(to);
        self.transport
            .stage(&mut self.staged, to, out, lane, addr.as_deref());
    }

    fn address_of(&self, raft_id: u64) -> Option<String> {
        self.group
            .sequencer()
            .member(raft_id)
            .map(|m| m.info.peer_addr.clone())
            .or_else(|| self.addrs.get(&raft_id).cloned())
    }

    /// The round's outputs: messages staged, then one lock section for
    /// the shared state (the lease, fences, deliveries, status and the
    /// certification stage's time, `certified` per writeset), then the
    /// wake-ups.
    fn process(&mut self, outputs: Vec<Output>, certified: Option<Duration>) {
        let lease = self.lease_to_publish();
        let mut deliveries = Vec::new();
        let mut fences = Vec::new();
        for o in outputs {
            match o {
                Output::Send { to, msg } => {
                    // Appends, forwarded proposals and snapshots carry
                    // writesets: the bulk lane, in order. Everything
                    // else (heartbeats, votes, answers) overtakes them.
                    let lane = match msg.get_msg_type() {
                        MessageType::MsgAppend
                        | MessageType::MsgPropose
                        | MessageType::MsgSnapshot => Lane::Bulk,
                        _ => Lane::Control,
                    };
                    let out = Out::Raft(msg);
                    if self.group.in_other_segment(to) {
                        self.wan_bytes += out.frame_len() as u64;
                    }
                    self.stage(to, out, lane);
                }
                Output::Relay { via, msgs } => self.send_bundle(via, msgs),
                Output::Forward { to, msg } => self.forward(to, msg),
                Output::Join(info) => {
                    if let Ok(frame) = PeerMsg::Join(info).to_frame() {
                        self.transport.stage_broadcast(&mut self.staged, &frame);
                    }
                    for s in &self.seeds {
                        self.transport.dial(s);
                    }
                }
                Output::Deliver(d) => deliveries.push(d),
                Output::Fence { reads, seqno } => fences.push((reads, seqno)),
                // Starting from a snapshot: its last view, taken like any
                // view (without this node: history from before it joined;
                // with it: it stands for the view that added this node).
                Output::Restored(view) => {
                    info!(
                        "starting from a snapshot of the group state at seqno {} \
                         (the log before it was compacted)",
                        self.group.sequencer().last_seqno()
                    );
                    deliveries.push(Delivery::View(view));
                }
                Output::Farewell { to } => self.send_control(to, PeerMsg::Farewell),
                Output::Lease { to, msg } => self.send_control(to, PeerMsg::Lease(msg)),
                Output::NotMember { to } => self.send_control(to, PeerMsg::NotMember),
                Output::Fatal(why) => {
                    error!("group channel failed: {why}; this node stops replicating");
                    let mut g = self.shared.lock();
                    g.local.inconsistent();
                    g.enqueue(crate::event::Event::Removed);
                    drop(g);
                    self.shared.notify();
                }
            }
        }
        let me = self.group.me().raft_id;
        for d in &deliveries {
            if let Delivery::View(v) = d {
                if v.members.iter().any(|m| m.raft_id == me) {
                    self.last_view = Some(v.clone());
                }
            }
        }
        let views = deliveries.iter().any(|d| matches!(d, Delivery::View(_)));
        let mut g = self.shared.lock();
        let mut notify_all = false;
        if let Some(news) = &lease {
            g.reads.publish(news.lease, news.leader);
        }
        if let Some(per) = certified {
            g.stages.observe(Stage::Certification, per);
        }
        if !fences.is_empty() {
            // A fence is a target seqno: its reader then waits until that
            // is committed here, so it may be told before the deliveries
            // that order it are taken.
            for (reads, seqno) in fences {
                for id in reads {
                    g.proposals.resolve(id, Resolution::Fence { seqno });
                }
            }
            notify_all = true;
        }
        if deliveries.is_empty() {
            // Entries without deliveries (a new term's empty one) still
            // move the index a lease read waits for.
            self.publish_proposals(&mut g);
            notify_all |= g.reads.set_applied_index(self.group.applied_index());
            drop(g);
            if notify_all {
                self.shared.notify();
            } else if lease.is_some_and(|n| n.leader_changed) {
                // Causal reads waiting for the old leader's index ask again.
                self.shared.changed.notify_all();
            }
            return;
        }
        let queued = g.queue.len();
        for d in deliveries {
            deliver::deliver(&mut g, me, d);
        }
        let added = g.queue.len().saturating_sub(queued);
        let certifier = self.group.sequencer().certifier();
        g.status.cert_stats = certifier.stats();
        g.status.cert_index_size = certifier.index_size();
        g.cache.set_log_after(self.group.cached_after());
        g.status.cluster_weight = self
            .group
            .sequencer()
            .members()
            .iter()
            .map(|m| i64::from(m.weight))
            .sum();
        g.cache.end_batch();
        let room = g.cache.room();
        let spills = g.queue.take_spills();
        self.publish_proposals(&mut g);
        g.reads.set_applied_index(self.group.applied_index());
        g.proposals.sample_send_queue();
        let resolved = g.proposals.take_resolved_slots();
        drop(g);
        if views || notify_all {
            self.shared.notify();
        } else {
            // The `changed` waiters are woken here: a new leader's causal
            // reads among them.
            self.shared.notify_delivered(added, resolved);
        }
        self.spill(spills);
        // The cache writer's bound: no round runs until it has room
        // (`LoopOwner::turn`); the event loop and the server's threads go
        // on meanwhile (ADR 0039).
        if let Some(room) = room {
            self.short_of_room = Some((room, Instant::now(), Duration::ZERO));
        }
    }

    /// Writes the writesets queued past the receive queue's memory budget
    /// to the spool, under no lock, and swaps in their placeholders
    /// (`recv_spool`, issue 53).
    fn spill(&self, job: Option<crate::recv_spool::SpillJob>) {
        if let Some(job) = job {
            self.chores.give(chores::Chore::Spill(job));
        }
    }
}

/// A lease or leader to publish (`Worker::lease_to_publish`).
#[derive(Debug, Clone, Copy)]
struct LeaseNews {
    lease: Option<crate::causal_reads::ReadLease>,
    leader: u64,
    leader_changed: bool,
}

/// What this node's side of flow control asks of the round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Steady,
    /// Announce this level to the group.
    Announce(u8),
    /// The receive queue passed its hard limit: this node leaves.
    Leaving,
}

/// Logs the group channel's start (used by `session`).
pub fn log_start(setup: &Setup) {
    info!(
        "group channel: member {} at {} (Raft id {:#x}) {} cluster '{}' via {}",
        setup.me.name,
        setup.me.peer_addr,
        setup.me.raft_id,
        if setup.bootstrap.is_some() {
            "founding"
        } else {
            "joining"
        },
        setup.cluster,
        if setup.seeds.is_empty() {
            "-".to_string()
        } else {
            setup.seeds.join(",")
        }
    );
}

/// Galera's line for each transition of the local state, in order (the
/// transitions are kept where they happen, bounded, and taken here each
/// round): operators and MariaDB's tests grep for "Shifting SYNCED ->
/// DONOR/DESYNCED". Transitions into or out of a state Galera names
/// otherwise (outside a primary component) are not logged.
fn log_state_shifts(g: &mut crate::state::Inner) {
    for (from, to) in g.local.take_shifts() {
        if let (Some(a), Some(b)) = (from.shift_name(), to.shift_name()) {
            info!("Shifting {a} -> {b} (TO: {})", g.last_committed());
        }
    }
}
