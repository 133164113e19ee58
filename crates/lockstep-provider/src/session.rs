//! Connection life cycle: `connect` (found or join a cluster through the
//! group channel), the applier loop in `recv`, and `disconnect` with a
//! graceful leave and the final view (contract §2.7-2.9, §4.2, §4.12).
//! State transfer (joiner and donor) lives in `transfer`.

use crate::event::Event;
use crate::group_driver::RecoveryStart;
use crate::group_driver::{self, GroupChannel, Setup};
use crate::identity::CAPABILITIES;
use crate::log::{error, info, warn};
use crate::provider::{Provider, Until, IN_ORDER_UNPAUSED};
use crate::recv_spool::{RecvSpool, Spilled};
use crate::server::{ThreadCtx, View};
use crate::shared::Wake;
use crate::state::{Conn, GroupLink};
use crate::viewstate::{self, ViewMember};
use crate::writeset_cache::WritesetCache;
use lockstep_core::address::ClusterAddress;
use lockstep_core::group::recovery::Vote;
use lockstep_core::group::{GroupConfig, MemberInfo};
use std::time::{Duration, Instant};
use wsrep_abi::{status, Gtid, Status, Uuid};

/// How long `disconnect` waits for an applier to take the final view
/// before it warns that none is running.
const FINAL_VIEW_PATIENCE: Duration = Duration::from_secs(10);
/// How long a graceful leave may take before the node just closes.
const LEAVE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long `disconnect` waits for ordered local transactions to reach
/// `release` before it saves the position.
const RELEASE_WAIT: Duration = Duration::from_secs(10);

/// How long the final view waits for appliers inside `apply_cb`.
const FINAL_VIEW_WAIT: Duration = Duration::from_secs(30);

impl Provider {
    pub fn connect(&self, cluster_name: &str, url: &str, donors: &str, bootstrap: bool) -> Status {
        if self.lock().conn == Conn::Closed {
            // A session that ended without `disconnect` (a node that left
            // after an inconsistency vote: the server, already
            // disconnected, skips it before `SET GLOBAL
            // wsrep_cluster_address` connects again) still has its
            // channel: stop it, or its listener holds the group port.
            self.stop_channel();
        }
        let address = match ClusterAddress::parse(url) {
            Ok(a) => a,
            Err(e) => {
                // Galera's wording, which MariaDB's tests expect.
                error!("Failed to open channel '{cluster_name}' at '{url}': {e}");
                return status::NODE_FAIL;
            }
        };
        if !address.options.is_empty() {
            let conf: Vec<String> = address
                .options
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            if self.options_set(&conf.join(";")) != status::OK {
                error!("invalid option in wsrep_cluster_address '{url}'");
                return status::NODE_FAIL;
            }
        }
        let bootstrap = bootstrap || address.is_bootstrap();
        if bootstrap && self.arbitrator {
            // garbd cannot found a cluster either: it has no data to
            // found it with.
            error!(
                "an arbitrator cannot bootstrap cluster '{cluster_name}': it holds no data; \
                 give it the address of a running member ('{url}' names none)"
            );
            return status::NODE_FAIL;
        }
        let founding = if bootstrap {
            match self.founding_position(cluster_name) {
                Some(p) => Some(p),
                None => return status::NODE_FAIL,
            }
        } else {
            None
        };
        let (_, advertised) = self.group_addresses();
        let seeds: Vec<String> = address
            .peers
            .iter()
            .map(ToString::to_string)
            .filter(|p| *p != advertised)
            .collect();
        if !bootstrap && seeds.is_empty() {
            error!(
                "cannot join cluster '{cluster_name}': wsrep_cluster_address '{url}' names no \
                 other node; use gcomm:// (or --wsrep-new-cluster) to bootstrap"
            );
            return status::NODE_FAIL;
        }
        let recovery = if bootstrap {
            None
        } else {
            self.recovery_vote()
        };
        // A new member id for every start, as with Galera's gcomm: the
        // server recovers the streaming transactions of this node's last
        // run from its streaming log, and rolls them back only if their
        // origin id is not in the view (wsrep-lib
        // `close_orphaned_sr_transactions`); the others roll back theirs
        // when the old id leaves. pc.recovery votes with the saved id.
        let member_id = time_ordered_uuid(std::time::SystemTime::now());
        let mut setup = self.channel_setup(cluster_name, seeds.clone(), member_id, founding);
        setup.recovery = recovery.map(|mut start| {
            start.addrs.extend(seeds.iter().cloned());
            start.addrs.retain(|a| *a != setup.me.peer_addr);
            start.addrs.sort();
            start.addrs.dedup();
            start
        });
        self.remember_join(cluster_name, seeds);
        // The joiner's IST buffer holds at most what the log may hold.
        let ist_limit = usize::try_from(setup.config.compact_bytes).unwrap_or(usize::MAX);
        // Reading the cache back can take a while (up to gcache.size):
        // outside the provider's lock, which status queries also take.
        let opened = {
            let g = self.lock();
            let position = founding.map_or(
                Gtid {
                    uuid: g.history,
                    seqno: g.last_committed(),
                },
                |(uuid, seqno)| Gtid { uuid, seqno },
            );
            // An arbitrator never donates: it keeps no writeset cache.
            let missing = !g.cache.is_open() && !self.arbitrator;
            drop(g);
            missing
                .then(|| self.open_writeset_cache(position))
                .flatten()
        };
        let mut g = self.lock();
        if g.conn != Conn::Closed {
            warn!("connect called while already connected");
            return status::CONN_FAIL;
        }
        if let Some((history, last)) = founding {
            g.history = history;
            g.gates.reset(last);
            g.last_ordered = last;
        }
        // Writesets the group ordered past what the storage engine kept
        // (ADR 0026): they count as this node's position for founding and
        // for pc.recovery, and the founder replays them into its server
        // before anything else (`deliver`, the founder's first view).
        let position = g.join_position();
        let held = match &opened {
            Some(c) => c.held_past(position.uuid, position.seqno),
            None => g
                .cache
                .with_cache(|c| c.held_past(position.uuid, position.seqno))
                .flatten(),
        };
        if let Some(top) = held {
            info!(
                "the writeset cache holds the events {}..={top} of history {} past this \
                 node's committed position: the group ordered them before this node \
                 stopped, so they count as committed; this node's position for re-forming \
                 the cluster is {top}",
                position.seqno + 1,
                position.uuid
            );
            if let Some((history, seqno)) = setup.bootstrap.as_mut() {
                if *history == position.uuid.data {
                    *seqno = top;
                }
            }
            if let Some(start) = setup.recovery.as_mut() {
                if start.vote.history == position.uuid {
                    start.vote.seqno = top;
                }
            }
        }
        group_driver::log_start(&setup);
        let setup_raft_id = setup.me.raft_id;
        let (chan, tx) = match GroupChannel::start(setup, self.shared.clone()) {
            Ok(c) => c,
            Err(e) => {
                error!("{e}");
                return status::NODE_FAIL;
            }
        };
        g.member_id = member_id;
        g.conn = Conn::Open;
        let spool = match RecvSpool::create(&self.data_dir) {
            Ok(spool) => Some(spool),
            Err(e) => {
                warn!(
                    "cannot create {} in {}: {e}; a long receive queue (a joiner during SST, \
                     a donor) stays in memory",
                    crate::recv_spool::SPOOL_FILE,
                    self.data_dir.display()
                );
                None
            }
        };
        g.queue.set_spool(spool);
        g.appliers.new_session();
        g.paused_at = None;
        g.membership.left_group();
        g.want_sync = false;
        g.donations.clear();
        g.cache.open_if_none(opened);
        // After the cache is open: it supplies the fork check points.
        g.start_joining(ist_limit, donors);
        g.proto_ver = self.proto_ver;
        g.group = Some(GroupLink {
            raft_id: setup_raft_id,
            tx,
            sent: 0,
        });
        let running = g.running_state();
        drop(g);
        self.set_channel(chan);
        self.save_state(running);
        status::OK
    }

    /// The group channel's start: a new Raft id for every start (the log
    /// is not persisted), the member id given.
    fn channel_setup(
        &self,
        cluster_name: &str,
        seeds: Vec<String>,
        member_id: Uuid,
        founding: Option<(Uuid, i64)>,
    ) -> Setup {
        let (listen, advertised) = self.group_addresses();
        Setup {
            me: MemberInfo {
                raft_id: random_raft_id(),
                uuid: member_id.data,
                name: self.node_name.clone(),
                incoming: self.node_incoming.clone(),
                peer_addr: advertised,
                segment: self.segment(),
            },
            cluster: cluster_name.to_string(),
            listen,
            seeds,
            bootstrap: founding.map(|(h, s)| (h.data, s)),
            config: self.group_config(),
            join_timeout: self.join_timeout(),
            isolated: self.initially_isolated(),
            ignore_quorum: self.ignores_quorum(),
            weight: self.pc_weight(),
            pc_recovery: self.pc_recovery(),
            recovery: None,
            views: self.pc_recovery().then(|| self.views.clone()),
            security: self.security.clone(),
            admit: std::sync::Arc::new(crate::ffi::allowlist_admits),
        }
    }

    /// `pc.recovery` (default on).
    pub(crate) fn pc_recovery(&self) -> bool {
        let o = self.settings.options();
        o.bool("pc.recovery").unwrap_or(true)
    }

    /// A joining node with a saved view of this history takes part in
    /// re-forming it if no primary component runs: its vote (as the member
    /// it was in that view) and the saved view's addresses.
    fn recovery_vote(&self) -> Option<RecoveryStart> {
        if !self.pc_recovery() {
            viewstate::remove(&self.data_dir);
            return None;
        }
        let saved = match viewstate::load(&self.data_dir) {
            Ok(Some(v)) => v,
            Ok(None) => return None,
            Err(e) => {
                warn!("{e}; starting without pc.recovery");
                return None;
            }
        };
        let g = self.lock();
        if saved.history != g.history {
            info!(
                "gvwstate.dat is for history {}, this node's state for {}: not used",
                saved.history, g.history
            );
            return None;
        }
        info!(
            "pc.recovery: last primary component (view at seqno {}) had {} members; this \
             node is at seqno {}",
            saved.seqno,
            saved.members.len(),
            g.last_committed()
        );
        let vote = Vote {
            member: saved.me,
            history: saved.history,
            seqno: g.last_committed(),
            view_seqno: saved.seqno,
            view: saved.members.iter().map(|m| m.uuid).collect(),
            // Restarted: its Raft state of that group is gone.
            in_group: false,
        };
        let addrs = saved
            .members
            .iter()
            .filter(|m| !m.addr.is_empty())
            .map(|m| m.addr.clone())
            .collect();
        let certs = saved
            .members
            .iter()
            .filter_map(|m| Some((m.uuid, m.cert?)))
            .collect();
        Some(RecoveryStart { vote, addrs, certs })
    }

    /// Saves the primary view just delivered (`pc.recovery`).
    pub(crate) fn save_view(&self, view: &View) {
        if !self.pc_recovery() {
            return;
        }
        let (me, members) = {
            let g = self.lock();
            let members = view
                .members
                .iter()
                .map(|m| {
                    let info = g.membership.members().iter().find(|i| i.uuid == m.id.data);
                    ViewMember {
                        uuid: m.id,
                        raft_id: info.map_or(0, |i| i.raft_id),
                        addr: info.map_or(String::new(), |i| i.peer_addr.clone()),
                    }
                })
                .collect();
            (g.member_id, members)
        };
        // The certificates come from the group's binding table, which the
        // keeper follows (ADR 0014).
        let saved = self
            .views
            .save(me, view.state_id.uuid, view.state_id.seqno, members);
        if let Err(e) = saved {
            warn!("{e}");
        }
    }

    /// The primary component removed this node while it was cut off (or
    /// evicted it as silent): join again as a new Raft member with the
    /// same member id, without ending the server's session. The replayed
    /// log brings what the node missed (IST into the running server,
    /// contract §4.13 "re-merge"); while it rejoins it stays non-primary.
    pub(crate) fn rejoin(&self, ctx: ThreadCtx) -> Option<Status> {
        let Some((cluster, mut seeds)) = self.joined_via() else {
            return Some(
                self.fail_session(ctx, "removed from the cluster, and no address to rejoin"),
            );
        };
        let member_id = {
            let mut g = self.lock();
            if g.conn != Conn::Open {
                return None;
            }
            let abandoned = g.abandon_pending();
            if abandoned > 0 {
                info!("{abandoned} local operations waiting for the total order fail: rejoining");
            }
            if g.view.is_some() || !g.membership.non_primary() {
                // Still serving as primary: go non-primary first, so that
                // clients get errors until the rejoin completes.
                g.membership.mark_non_primary();
                g.queue.push_front(Event::Rejoin);
                g.queue.push_front(Event::NonPrimary);
                drop(g);
                self.notify();
                return None;
            }
            seeds.extend(g.membership.members().iter().map(|m| m.peer_addr.clone()));
            g.member_id
        };
        self.stop_channel();
        let (_, advertised) = self.group_addresses();
        seeds.retain(|s| *s != advertised);
        seeds.sort();
        seeds.dedup();
        let setup = self.channel_setup(&cluster, seeds, member_id, None);
        let raft_id = setup.me.raft_id;
        let ist_limit = usize::try_from(setup.config.compact_bytes).unwrap_or(usize::MAX);
        info!(
            "rejoining cluster '{cluster}' as Raft member {raft_id:#x} (member {member_id}) \
             via {}",
            setup.seeds.join(",")
        );
        let (chan, tx) = match GroupChannel::start(setup, self.shared.clone()) {
            Ok(c) => c,
            Err(e) => return Some(self.fail_session(ctx, &e)),
        };
        let mut g = self.lock();
        g.membership.left_group();
        g.rejoining = true;
        // A new membership: desyncs belonged to the old one (Galera too).
        g.local.closed();
        // The same server session: the same `wsrep_sst_donor`.
        let donors = g.joining.donors().to_string();
        g.start_joining(ist_limit, &donors);
        g.last_ordered = g.last_committed();
        g.group = Some(GroupLink {
            raft_id,
            tx,
            sent: 0,
        });
        drop(g);
        self.set_channel(chan);
        None
    }

    /// Where a founding node continues: its saved history, or a new one at
    /// seqno 0. Refuses when grastate.dat says another node is ahead.
    fn founding_position(&self, cluster_name: &str) -> Option<(Uuid, i64)> {
        let saved = match self.load_state() {
            Ok(s) => s,
            Err(e) => {
                error!("{e}");
                return None;
            }
        };
        if !saved.safe_to_bootstrap {
            error!(
                "It may not be safe to bootstrap the cluster from this node. It was not the \
                 last one to leave the cluster and may not contain all the updates. To force \
                 cluster bootstrap with this node, edit the grastate.dat file manually and set \
                 safe_to_bootstrap to 1 . (Lockstep: refusing to bootstrap cluster \
                 '{cluster_name}'; bootstrap from the most advanced node, or set \
                 safe_to_bootstrap: 1 in {}/grastate.dat if you are sure.)",
                self.data_dir.display()
            );
            return None;
        }
        let g = self.lock();
        if g.history.is_nil() || g.last_committed() < 0 {
            if !g.history.is_nil() {
                info!(
                    "history {} has no known seqno (unclean shutdown?): starting a new \
                     history; the server resets its checkpoint",
                    g.history
                );
            }
            return Some((random_uuid(), 0));
        }
        info!(
            "bootstrapping cluster '{cluster_name}': continuing history {} after seqno {}",
            g.history,
            g.last_committed()
        );
        Some((g.history, g.last_committed()))
    }

    /// (listen address, address advertised to peers) from
    /// `gmcast.listen_addr`, `base_host` and `base_port`.
    pub(crate) fn group_addresses(&self) -> (String, String) {
        let o = self.settings.options();
        let port = o.int("base_port").unwrap_or(4567);
        // Galera takes `gmcast.listen_addr=127.0.0.2` without a port, as
        // MariaDB's galera_allowlist test sets it: the port is base_port.
        let listen = crate::state_transfer::ist_from_cache::socket_addr(
            o.get("gmcast.listen_addr").unwrap_or("tcp://0.0.0.0:4567"),
            port,
        );
        let host = match o.get("base_host") {
            Some(h) if !h.is_empty() && h != "0.0.0.0" => h.to_string(),
            _ => "127.0.0.1".to_string(),
        };
        let host = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]")
        } else {
            host
        };
        (listen, format!("{host}:{port}"))
    }

    /// Opens the writeset cache (`gcache.*`); `None`, with a warning, if
    /// it cannot be (the node runs on; joiners then need SST).
    fn open_writeset_cache(&self, position: Gtid) -> Option<WritesetCache> {
        let max_payload = self.max_payload();
        let o = self.settings.options();
        let dir = std::path::PathBuf::from(o.get("gcache.dir").unwrap_or("."));
        let dir = if dir.is_relative() {
            self.data_dir.join(dir)
        } else {
            dir
        };
        let name = o.get("gcache.name").unwrap_or("galera.cache").to_string();
        let size = o.size("gcache.size").unwrap_or(128 << 20);
        let recover = o.bool("gcache.recover").unwrap_or(true);
        let sync = o.bool("lockstep.cache_sync").unwrap_or(false);
        drop(o);
        if recover && !position.uuid.is_nil() && position.seqno >= 0 {
            // Lockstep's files set aside by a stop that left Galera's
            // format: back if nothing ran since, else dropped.
            crate::galera_export::restore_aside(
                &dir.join(&name),
                &dir.join(format!("{name}.1")),
                position,
            );
        }
        let opened = WritesetCache::open(&dir, &name, size, max_payload, recover, position)
            .and_then(|mut c| c.set_sync(sync).map(|()| c));
        match opened {
            Ok(c) => Some(c),
            Err(e) => {
                warn!(
                    "writeset cache {}: {e}; running without one (joiners that need events \
                     from this node will take a full SST)",
                    dir.join(&name).display()
                );
                None
            }
        }
    }

    /// Raft timing from the Galera options people already set.
    fn group_config(&self) -> GroupConfig {
        let mut c = GroupConfig::default();
        if let Some(d) = self.failure_timeout() {
            c.suspect_timeout_ms = group_driver::suspect_timeout_ms(d);
        }
        let o = self.settings.options();
        if let Ok(tick) = o.duration("lockstep.raft_tick") {
            c.tick_ms = (tick.as_millis() as u64).clamp(10, 1000);
        }
        // A settled follower hears from its leader four times per
        // election timeout, whatever the tick.
        c.quiet_beat_ms = c.tick_ms * c.election_ticks as u64 / 4;
        if let Ok(keepalive) = o.duration("evs.keepalive_period") {
            c.set_keepalive_ms(keepalive.as_millis() as u64);
        }
        // The in-memory log is the writeset cache: bounded like Galera's.
        if let Ok(size) = o.size("gcache.size") {
            c.compact_bytes = size.max(1 << 16);
        }
        c.arbitrator = self.arbitrator;
        // A node that keeps no state to donate (Galera 26.4.23).
        c.stateless = o.bool("gcs.stateless").unwrap_or(false);
        c
    }

    fn initially_isolated(&self) -> bool {
        let o = self.settings.options();
        o.int("gmcast.isolate").is_ok_and(|v| v != 0)
    }

    fn join_timeout(&self) -> Duration {
        let o = self.settings.options();
        o.duration("pc.wait_prim_timeout")
            .unwrap_or(Duration::from_secs(30))
    }

    /// The applier loop: runs every ordered event on the calling thread.
    pub fn recv(&self, ctx: ThreadCtx) -> Status {
        {
            let mut g = self.lock();
            if g.conn == Conn::Closed {
                return status::FATAL;
            }
            g.appliers.enter_recv();
        }
        let rc = self.recv_loop(ctx);
        self.lock().appliers.leave_recv();
        self.notify();
        rc
    }

    fn recv_loop(&self, ctx: ThreadCtx) -> Status {
        // One lock section between two events: the end of one and the
        // wait for the next.
        let mut g = self.lock();
        loop {
            let (mut taken, _) = self.wait_on(Wake::Work, g, Until::Idle, |s| {
                (!s.queue.is_empty() && s.appliers.may_start()) || s.conn == Conn::Closed
            });
            let Some(event) = taken.pop_event() else {
                return status::CONN_FAIL;
            };
            let isolating = event.isolating();
            taken.appliers.start_event(isolating);
            drop(taken);
            let outcome = self.run_event(ctx, event);
            g = self.lock();
            if isolating {
                g.appliers.end_isolation();
            }
            if g.want_sync && g.queue.is_empty() {
                g.want_sync = false;
                let raft_id = g.raft_id();
                g.propose(lockstep_core::group::Action::Synced { raft_id }, false);
            }
            if isolating {
                // Other appliers may now start; an ordinary event
                // announced its own changes.
                drop(g);
                self.notify();
                g = self.lock();
            }
            if let Some(rc) = outcome {
                return rc;
            }
        }
    }

    /// A writeset that waited in the receive spool: read it back (outside
    /// the lock) and apply it. One that cannot be read back stops the
    /// node: skipping it would diverge.
    fn apply_spilled(&self, ctx: ThreadCtx, s: Spilled) -> Option<Status> {
        let current = self.lock().queue.is_current(&s);
        if !current {
            return None; // its queue was cleared since (the session ended)
        }
        let read = RecvSpool::read(&s, self.max_payload());
        self.lock().queue.consumed(&s);
        match read {
            Ok(ws) => self.apply_remote(ctx, ws),
            Err(e) => Some(self.fail_session(ctx, &e)),
        }
    }

    /// Runs one event; `Some(rc)` ends this applier's `recv()`.
    fn run_event(&self, ctx: ThreadCtx, event: Event) -> Option<Status> {
        match event {
            Event::Connected(view) => {
                if !self.server.connected(self.lock(), &view) {
                    return Some(self.fail_session(ctx, "connected callback failed"));
                }
                None
            }
            Event::JoinView(view) => self.join_view(ctx, view),
            Event::PrimaryView(view) => self.deliver_primary_view(ctx, view),
            Event::Apply(ws) => self.apply_remote(ctx, ws),
            Event::Spilled(s) => self.apply_spilled(ctx, s),
            Event::Donate {
                request,
                seqno,
                joiner,
                ist_after,
                from_cache,
            } => {
                match (ist_after, from_cache) {
                    (Some(after), Some(c)) => {
                        self.donate_from_cache(ctx, &request, (seqno, joiner), after, &c)
                    }
                    (Some(after), None) => self.donate_bypass(ctx, &request, after, joiner),
                    (None, _) => self.donate(ctx, &request, seqno, joiner),
                }
                None
            }
            Event::PastView(seqno, _, view) => self.pass_past_view(ctx, seqno, view.as_deref()),
            Event::Rejoin => self.rejoin(ctx),
            Event::Inconsistent(why) => {
                let marker = self.lock().diverged.set();
                crate::diverged::write(marker);
                Some(self.fail_session(ctx, &why))
            }
            // Not diverged: every commit it acknowledged is in the cache,
            // and nothing is committed past it (`cached_first`).
            Event::CacheFailed(why) => Some(self.fail_session(ctx, &why)),
            Event::Synced => {
                let mut g = self.lock();
                let due = g.local.caught_up();
                if due == lockstep_core::group::Notify::Synced && !self.server.synced(g) {
                    return Some(self.fail_session(ctx, "synced callback failed"));
                }
                None
            }
            Event::NonPrimary => {
                self.deliver_non_primary(ctx);
                None
            }
            Event::Removed => {
                let closing = self.lock().conn == Conn::Closing;
                if !closing {
                    warn!("this node was removed from the primary component; leaving");
                }
                self.lock().local.closed();
                self.end_session(ctx);
                Some(status::OK)
            }
            Event::Final => {
                self.lock().local.closed();
                self.end_session(ctx);
                Some(status::OK)
            }
        }
    }

    /// Runs a primary view in total order isolation: everything before it
    /// finished, nothing after it starts until the callback returns.
    pub(crate) fn deliver_primary_view(&self, ctx: ThreadCtx, view: View) -> Option<Status> {
        let seqno = view.state_id.seqno;
        // The server stores the view with its seqno as the engine's
        // checkpoint: the view's event first (ADR 0032).
        let g = match self.cached_first(self.lock(), seqno) {
            Ok(g) => g,
            Err(why) => return Some(self.fail_session(ctx, &why)),
        };
        // A view takes a seqno: not while the provider is paused below it
        // (a donor's SST copies the storage meanwhile; the server would
        // store this view in it without the position that goes with it,
        // and the joiner refuses that state: MariaDB's
        // galera_3nodes.GCF-376).
        let (g, _) = self.wait_until(g, Until::Progress(IN_ORDER_UNPAUSED), |s| {
            (s.last_committed() >= seqno - 1 && s.may_commit(seqno)) || s.conn == Conn::Closed
        });
        let ok = self.server.view(g, ctx, &view);
        let mut g = self.lock();
        if !ok {
            if g.conn == Conn::Closing {
                // Interrupted by disconnect; the final view follows.
                return None;
            }
            drop(g);
            return Some(self.fail_session(ctx, "view callback failed, restart required"));
        }
        if let Err(e) = pass_view_gates(&mut g, seqno) {
            drop(g);
            return Some(self.fail_session(ctx, &e));
        }
        if matches!(
            g.local.state(),
            lockstep_core::group::MemberState::Undefined
                | lockstep_core::group::MemberState::Joiner
        ) {
            g.local.joined();
        }
        g.membership.primary_view_size(view.members.len());
        drop(g);
        self.save_view(&view);
        let mut g = self.lock();
        g.view = Some(view);
        let running = g.running_state();
        drop(g);
        self.save_state(running);
        self.notify();
        None
    }

    /// A view from before this node joined, carried by IST: its seqno
    /// passes the gates in order so the writesets after it can commit.
    /// When its members are known the server sees it first (this node not
    /// in it, `own_index` -1, as with Galera's IST): the server then rolls
    /// back the streaming transactions of members that had left, which it
    /// recovered from its streaming log, before later writesets need
    /// their rows.
    fn pass_past_view(&self, ctx: ThreadCtx, seqno: i64, view: Option<&View>) -> Option<Status> {
        // The view's event before the server stores it (ADR 0032).
        let g = match self.cached_first(self.lock(), seqno) {
            Ok(g) => g,
            Err(why) => return Some(self.fail_session(ctx, &why)),
        };
        let (g, _) = self.wait_until(g, Until::Progress(IN_ORDER_UNPAUSED), |s| {
            (s.last_committed() >= seqno - 1 && s.may_commit(seqno)) || s.conn == Conn::Closed
        });
        if g.conn == Conn::Closed {
            return None;
        }
        match view {
            Some(view) => {
                if !self.server.view(g, ctx, view) {
                    return Some(self.fail_session(ctx, "view callback failed, restart required"));
                }
            }
            // The lock is taken again below: not held across.
            None => drop(g),
        }
        let mut g = self.lock();
        if let Err(e) = pass_view_gates(&mut g, seqno) {
            drop(g);
            return Some(self.fail_session(ctx, &e));
        }
        drop(g);
        self.notify();
        None
    }

    /// Quorum lost: a non-primary view of this node alone (the provider
    /// does not know who else is on its side), after everything ordered
    /// so far has finished.
    fn deliver_non_primary(&self, ctx: ThreadCtx) {
        let mut g = self.lock();
        let upto = g.last_ordered;
        let (ng, _) = self.wait_until(
            g,
            Until::Deadline(Instant::now() + Duration::from_secs(5)),
            |s| s.last_committed() >= upto || s.conn == Conn::Closed,
        );
        g = ng;
        let view = View {
            state_id: wsrep_abi::Gtid {
                uuid: g.history,
                seqno: g.last_committed(),
            },
            conf_id: -1,
            status: wsrep_abi::view_status::NON_PRIMARY,
            capabilities: CAPABILITIES,
            my_idx: 0,
            proto_ver: self.proto_ver,
            members: vec![crate::server::Member {
                id: g.member_id,
                name: self.node_name.clone(),
                incoming: self.node_incoming.clone(),
            }],
        };
        let view = non_primary_component(
            g.membership.members(),
            g.membership.component(),
            g.raft_id(),
            view,
        );
        g.local.left_primary();
        g.view = None;
        if !self.server.view(g, ctx, &view) {
            warn!("the server did not accept the non-primary view");
        }
    }

    /// A callback failed outside shutdown: the node cannot go on as if it
    /// had succeeded. End the session on this thread with the final view.
    pub(crate) fn fail_session(&self, ctx: ThreadCtx, why: &str) -> Status {
        error!("{why}; leaving the cluster");
        let mut g = self.lock();
        g.local.inconsistent();
        g.conn = Conn::Closing;
        g.queue.clear();
        if let Some(link) = &g.group {
            let _ = link.tx.send(crate::group_input::Input::Leave);
        }
        drop(g);
        self.end_session(ctx);
        status::NODE_FAIL
    }

    /// Delivers the empty final view on this applier (contract P19) and
    /// marks the session closed, which releases `disconnect` and every
    /// other applier. A failed callback here is the end of the session
    /// anyway (contract P15).
    fn end_session(&self, ctx: ThreadCtx) {
        // Once per session: two appliers failing at the same moment
        // must not both deliver a final view (the server crashes on
        // the second).
        let mut g = self.lock();
        if !g.appliers.begin_ending() {
            return;
        }
        // Appliers still inside apply_cb finish first: a final view
        // under them makes the server fail their apply and log it as
        // an error (Galera delivers it after them too).
        let deadline = Instant::now() + FINAL_VIEW_WAIT;
        let (g, _) = self.wait_until(g, Until::Deadline(deadline), |s| !s.appliers.any_applying());
        self.server
            .view(g, ctx, &View::final_view(CAPABILITIES, self.proto_ver));
        let mut g = self.lock();
        g.conn = Conn::Closed;
        g.appliers.ended();
        g.view = None;
        g.membership.left_group();
        g.queue.clear();
        g.proposals.drop_pending();
        drop(g);
        self.notify();
    }

    pub fn disconnect(&self) -> Status {
        let mut g = self.lock();
        // A node still waiting to re-form its primary component keeps its
        // saved view: only leaving a primary component ends recovery.
        let was_in_group = g.membership.in_group();
        match g.conn {
            Conn::Closed => {
                drop(g);
                self.stop_channel();
                return status::OK;
            }
            Conn::Closing => {}
            Conn::Open => {
                info!("leaving the cluster (member {})", g.member_id);
                g.conn = Conn::Closing;
                g.paused_at = None;
                let alone = g.membership.members().len() <= 1 || !g.membership.in_group();
                match &g.group {
                    Some(link) if !alone => {
                        let _ = link.tx.send(crate::group_input::Input::Leave);
                    }
                    _ => g.enqueue(Event::Final),
                }
                self.notify();
            }
        }
        let started = Instant::now();
        let mut warned = false;
        let mut forced = false;
        loop {
            let deadline = Until::Deadline(Instant::now() + Duration::from_secs(1));
            let (ng, done) = self.wait_until(g, deadline, |s| s.appliers.final_delivered());
            g = ng;
            if done {
                break;
            }
            if !forced && started.elapsed() > LEAVE_TIMEOUT {
                info!("graceful leave did not complete in {LEAVE_TIMEOUT:?}; closing anyway");
                g.enqueue(Event::Final);
                g.appliers.end_isolation();
                forced = true;
                self.notify();
            }
            if !warned && g.appliers.in_recv() == 0 && started.elapsed() > FINAL_VIEW_PATIENCE {
                warn!("disconnect: no applier thread is running to take the final view; still waiting");
                warned = true;
            }
        }
        // A local transaction ordered before the close may still be
        // committing in the engine (or past its commit, before `release`):
        // its client may already have its OK. The saved position must
        // include it, or a restart re-applies or re-numbers that seqno
        // (Galera drains its apply monitor on leave for the same reason).
        let deadline = Until::Deadline(Instant::now() + RELEASE_WAIT);
        let (ng, released) =
            self.wait_until(g, deadline, |s| s.trxs.unreleased_seqnos().is_empty());
        g = ng;
        if !released {
            let left = g.trxs.unreleased_seqnos();
            warn!(
                "disconnect: local transactions at seqnos {left:?} were not released within \
                 {RELEASE_WAIT:?}; saving the position without them"
            );
        }
        // A diverged node's seqno names no state of the group's: saving
        // it would let a restart catch up by IST on top of other data.
        let seqno = if g.diverged.is() {
            -1
        } else {
            g.last_committed()
        };
        let position = g.saved_state(seqno);
        g.trxs.clear();
        g.group = None;
        g.queue.remove_spool();
        drop(g);
        self.stop_channel();
        self.save_state(position);
        if position.seqno >= 0 {
            self.leave_galera_cache(Gtid {
                uuid: position.uuid,
                seqno: position.seqno,
            });
        }
        if was_in_group {
            // A clean leave: no automatic recovery of this view (Galera too).
            self.views.forget();
        }
        info!(
            "closed; saved position {}:{}",
            position.uuid, position.seqno
        );
        status::OK
    }

    /// `lockstep.leave_galera_cache=yes`: the writeset cache written in
    /// Galera's format at this clean stop, for a switch back to Galera
    /// (`galera_export`, ADR 0028).
    fn leave_galera_cache(&self, position: Gtid) {
        let (on, size) = {
            let o = self.settings.options();
            (
                o.bool("lockstep.leave_galera_cache").unwrap_or(false),
                o.size("gcache.size").unwrap_or(128 << 20),
            )
        };
        if !on {
            return;
        }
        let writer = self.lock().cache.take_writer();
        let Some(mut cache) = writer.and_then(crate::cache_writer::CacheWriter::close) else {
            warn!(
                "lockstep.leave_galera_cache: this node keeps no writeset cache \
                 (gcache.recover=no, or it failed); Galera will start with an empty one"
            );
            return;
        };
        match crate::galera_export::export(&mut cache, position, size) {
            Ok(Some(_)) => {}
            Ok(None) => warn!(
                "lockstep.leave_galera_cache: the writeset cache ({}) holds no run Galera can \
                 take up to {position}; Galera will start with an empty cache",
                cache.describe()
            ),
            Err(e) => warn!(
                "lockstep.leave_galera_cache: writing the cache in Galera's format failed \
                 ({e}); Lockstep's own files stay, and Galera will start with an empty cache"
            ),
        }
    }

    fn stop_channel(&self) {
        if let Some(c) = self.take_channel() {
            c.stop();
        }
    }

    /// `free` on a node that was never disconnected: save what we know.
    pub fn shutdown(&self) {
        self.stop_channel();
        // The cache's writer writes what is queued and ends (not under
        // the lock: that may take a while on a slow disk).
        let writer = self.lock().cache.take_writer();
        drop(writer.and_then(crate::cache_writer::CacheWriter::close));
        // IST senders stop at their next record, a big writeset being
        // freed finishes: then nothing of ours runs once `free` returns.
        self.shared
            .stopping
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let left = self.shared.detached.wait_all(DETACHED_WAIT);
        if left > 0 {
            warn!("{left} provider threads still run after {DETACHED_WAIT:?} at shutdown");
        }
        let g = self.lock();
        if g.conn == Conn::Closed || g.history.is_nil() || g.diverged.is() {
            return;
        }
        let position = g.saved_state(g.last_committed());
        drop(g);
        self.save_state(position);
    }
}

/// How long `free` waits for the threads nobody joins.
const DETACHED_WAIT: Duration = Duration::from_secs(30);

/// A view's seqno through the apply and commit gates (views take no
/// server commit of their own).
fn pass_view_gates(g: &mut crate::state::Inner, seqno: i64) -> Result<(), String> {
    if g.last_committed() >= seqno {
        return Ok(());
    }
    g.gates.enter_apply(seqno);
    g.gates.enter_commit(seqno);
    g.leave_commit(seqno)
        .and_then(|_| g.leave_apply(seqno))
        .map_err(|e| e.to_string())
}

/// 16 random bytes from the OS (time and pid as a fallback).
fn random_bytes() -> [u8; 16] {
    let mut bytes = [0u8; 16];
    let filled = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes));
    if filled.is_err() {
        // No urandom (chroot?): fall back to time and process entropy, which
        // is unique enough for ids that are never used as secrets.
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
            ^ (u128::from(std::process::id()) << 64);
        bytes = seed.to_le_bytes();
    }
    bytes
}

/// A random (version 4) UUID for histories and member ids.
pub fn random_uuid() -> Uuid {
    let mut bytes = random_bytes();
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    Uuid::from_bytes(bytes)
}

/// A member id that sorts in start order (a version 7 UUID: milliseconds
/// since the epoch first, then random bits), as Galera's time-based ones
/// do. Views list members in UUID order and the server derives
/// `wsrep_local_index` and `auto_increment_offset` from it, so with random
/// ids a node restarted into the same cluster could change places (and
/// offsets) at random; MariaDB's suites expect the start order.
pub fn time_ordered_uuid(now: std::time::SystemTime) -> Uuid {
    let ms = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let mut bytes = random_bytes();
    bytes[..6].copy_from_slice(&ms.to_be_bytes()[2..]);
    bytes[6] = (bytes[6] & 0x0f) | 0x70;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    Uuid::from_bytes(bytes)
}

/// A Raft id, new for every connect (never 0, Raft's "none").
fn random_raft_id() -> u64 {
    let b = random_bytes();
    u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]).max(1)
}

/// A non-primary view lists the component this node is in
/// (`Membership::component`) among the last view's `members`,
/// sorted as primary views are (`server::view_members`); `alone` (this
/// node only) where the component does not name this node `me` among
/// them.
fn non_primary_component(
    members: &[lockstep_core::group::MemberInfo],
    component: &[u64],
    me: u64,
    alone: View,
) -> View {
    let here = members.iter().filter(|m| component.contains(&m.raft_id));
    match crate::server::view_members(here, me) {
        (members, Some(my_idx)) => View {
            my_idx: my_idx as i32,
            members,
            ..alone
        },
        (_, None) => alone,
    }
}

#[cfg(test)]
mod non_primary_tests {
    use super::*;
    use lockstep_core::group::MemberInfo;

    fn member(raft_id: u64, uuid: u8) -> MemberInfo {
        MemberInfo {
            raft_id,
            uuid: [uuid; 16],
            name: format!("node{raft_id}"),
            incoming: String::new(),
            peer_addr: String::new(),
            segment: 0,
        }
    }

    fn alone() -> View {
        View {
            state_id: wsrep_abi::Gtid {
                uuid: wsrep_abi::Uuid::NIL,
                seqno: 7,
            },
            conf_id: -1,
            status: wsrep_abi::view_status::NON_PRIMARY,
            capabilities: CAPABILITIES,
            my_idx: 0,
            proto_ver: 4,
            members: vec![crate::server::Member {
                id: wsrep_abi::Uuid::from_bytes([9; 16]),
                name: "me".into(),
                incoming: String::new(),
            }],
        }
    }

    #[test]
    fn a_non_primary_view_lists_the_members_this_node_reaches() {
        let members = [member(1, 3), member(2, 1), member(3, 2)];
        // Node 3 reaches node 2, not node 1 (cut off, the heavy one).
        let v = non_primary_component(&members, &[3, 2], 3, alone());
        let names: Vec<&str> = v.members.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["node2", "node3"], "sorted by member id");
        assert_eq!(v.my_idx, 1);
        assert_eq!(v.conf_id, -1);
        assert_eq!(v.state_id.seqno, 7);
        // Alone, or not in the last view: this node only.
        assert_eq!(
            non_primary_component(&members, &[3], 3, alone())
                .members
                .len(),
            1
        );
        assert_eq!(
            non_primary_component(&members, &[1, 2], 3, alone()),
            alone()
        );
        assert_eq!(non_primary_component(&[], &[3], 3, alone()), alone());
    }
}
