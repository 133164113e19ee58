//! State transfer through the server's SST scripts (contract §3.3, §3.6,
//! §2.26-2.27, §4.3): the joiner's request and wait, the donor's
//! donation, and the two completion calls from the server;
//! `ist_from_cache` streams IST from a donor's writeset cache over TCP.
//! The events a joiner collects, from the log replay or from that stream,
//! wait in `crate::ist_replay`, a lower layer the state holds.
//!
//! The request travels in the total order, so every node picks the same
//! donor (`lockstep_core::group::Sequencer`). Writesets ordered while the
//! transfer runs stay queued on the joiner and are applied afterwards,
//! from the first seqno the transferred state does not contain.

pub(crate) mod ist_from_cache;

use crate::donations::Donation;
use crate::event::Event;
use crate::joining::{Asked, Outcome};
use crate::log::{error, info, warn};
use crate::provider::{Provider, Until, IN_ORDER};
use crate::server::{ThreadCtx, View};
use crate::shared::Shared;
use crate::state::{Conn, Inner};
use ist_from_cache::{Expect, IstReceiver};
use lockstep_core::group::{Action, CacheIst};
use lockstep_core::writeset_cache::StreamHeader;
use std::time::{Duration, Instant};
use wsrep_abi::{status, Gtid, Status, Uuid};

/// Galera retries a state request without a donor every second.
const NO_DONOR_RETRY: Duration = Duration::from_secs(1);
const ECANCELED: i32 = 125;
const EREMCHG: i32 = 78;
const ENODATA: i32 = 61;

impl Provider {
    /// The first view of a joining node (contract §3.3 "When").
    pub(crate) fn join_view(&self, ctx: ThreadCtx, view: View) -> Option<Status> {
        let group_pos = view.state_id;
        if self.arbitrator {
            return self.join_as_arbitrator(ctx, view);
        }
        let (needed, local) = {
            let g = self.lock();
            if g.diverged.is() {
                info!(
                    "this node left the cluster inconsistent: its data is not the cluster's \
                     at any position, so it takes a full state transfer"
                );
            }
            let local = g.join_position();
            (
                local.uuid != group_pos.uuid || local.seqno + 1 < group_pos.seqno,
                local,
            )
        };
        let fork = self.lock().fork_check.take_fork();
        // Set when only a full state transfer will do.
        let mut full_sst = None;
        if let Some(fork) = fork {
            if !fork.views_only {
                return Some(self.refuse_forked(ctx, local, group_pos, &fork.detail));
            }
            // Galera's views take no seqno, so such a node simply rejoins
            // there; ours do, and its seqnos no longer name the group's
            // events. Nothing of its own is lost by copying the state.
            // A note, not a warning: nothing is wrong that needs a
            // person (and MariaDB's tests fail on unexpected warnings).
            info!(
                "this node's history differs from the cluster's only in views of its own \
                 after its last writeset ({}): it formed a primary component alone \
                 (pc.ignore_quorum, or a bootstrap of one side); no commit of its own is lost \
                 by a full state transfer, which it takes",
                fork.detail
            );
            full_sst = Some("this node's seqnos went another way in views of its own");
        }
        if full_sst.is_none() && local.uuid == group_pos.uuid && local.seqno >= group_pos.seqno {
            // Safe bootstrap: this node has commits (seqno >= the view that
            // adds it) the cluster does not. Neither an SST over them nor
            // continuing on top of a different sequence is acceptable.
            let why = format!(
                "this node's state {local} is ahead of the cluster it joins, which is at \
                 {group_pos}: the cluster was bootstrapped from a less advanced node and lacks \
                 commits this node has. Refusing to join so they are not thrown away. Stop the \
                 cluster and bootstrap it from this node (the most advanced), or, to discard \
                 this node's extra commits, delete {}/grastate.dat and restart it (full SST)",
                self.data_dir.display()
            );
            return Some(self.refuse_join(ctx, local, &why));
        }
        let held = self
            .lock()
            .cache
            .with_cache(|c| c.held_past(local.uuid, local.seqno))
            .flatten();
        if let Some(top) =
            held.filter(|top| local.uuid == group_pos.uuid && *top >= group_pos.seqno)
        {
            // The same, for what the group ordered and this node cached
            // but its storage engine lost (ADR 0026): it may hold commits
            // that were acknowledged.
            let why = format!(
                "this node's writeset cache holds events of history {} up to seqno {top}, \
                 which the group ordered before this node stopped, and the cluster it \
                 joins is at {group_pos}: the cluster was bootstrapped from a less \
                 advanced node and lacks commits this node holds. Refusing to join so they \
                 are not thrown away. Stop the cluster and bootstrap it from this node (it \
                 replays them), or, to discard them, delete {}/grastate.dat and the \
                 writeset cache and restart it (full SST)",
                local.uuid,
                self.data_dir.display()
            );
            return Some(self.refuse_join(ctx, local, &why));
        }
        if !needed && full_sst.is_none() {
            info!(
                "joining at {group_pos} with the state already here ({local}): no transfer needed"
            );
            // The view is cached before the server stores it (and moves
            // its checkpoint), as every event is before the engine commits
            // it (ADR 0032): the refusal checks are behind us and the
            // view is final in the group's order.
            self.lock().cache_catch_up(Some(&view));
            if let Some(rc) = self.deliver_primary_view(ctx, view) {
                return Some(rc);
            }
            let mut g = self.lock();
            announce_joined(&mut g, group_pos.seqno);
            return None;
        }
        let (ist, missing) = {
            let g = self.lock();
            let ist = full_sst
                .map_or(Ok(()), |why| Err(why.to_string()))
                .and_then(|()| g.joining.ist().covers(group_pos))
                .and_then(|()| {
                    // Check points the replay did not reach: the log cannot
                    // show this node's history is a prefix of the group's; a
                    // donor's cache can (it sends its records for them).
                    match g.fork_check.points().first() {
                        None => Ok(()),
                        Some((seqno, _)) => Err(format!(
                            "the group log starts after seqno {seqno}, where this node checks \
                         that it has the group's history"
                        )),
                    }
                });
            (ist, g.joining.ist().writesets())
        };
        // Same history, behind: a donor's writeset cache may hold the gap
        // the group log lacks (after a restart of the whole cluster, or a
        // long absence).
        let from_cache =
            ist.is_err() && full_sst.is_none() && local.uuid == group_pos.uuid && local.seqno >= 0;
        match &ist {
            Ok(()) => info!(
                "state transfer required: group at {group_pos}, this node at {local}; \
                 IST possible: the group log holds every event after {local} \
                 ({missing} writesets)"
            ),
            Err(why) if from_cache => info!(
                "state transfer required: group at {group_pos}, this node at {local}; \
                 the group log cannot serve IST ({why}): asking for IST from a donor's \
                 writeset cache (a full SST if its cache lacks events)"
            ),
            Err(why) => info!(
                "state transfer required: group at {group_pos}, this node at {local}; \
                 full SST ({why})"
            ),
        }
        let mut g = self.lock();
        g.local.joining();
        let Some(request) = self.server.sst_request(g) else {
            // The server could not prepare for a state transfer (its SST
            // script failed): the node can never join. Galera logs these
            // words and ends the process, and MariaDB's tests expect
            // exactly that (exit code 1 or 134, these lines suppressed).
            error!("SST request callback failed. This is unrecoverable, restart required.");
            crate::ffi::terminate_process("Will never receive state. Need to abort.");
        };
        let ist_after = (ist.is_ok() || from_cache).then_some(local.seqno);
        if from_cache {
            let received = match self.wait_for_cache_ist(&request, local, group_pos.seqno) {
                Ok(r) => r,
                Err(why) => {
                    // (A `let`: the guard must be gone before refusing.)
                    let fork = self.lock().fork_check.take_fork();
                    if let Some(fork) = fork {
                        return Some(self.refuse_forked(ctx, local, group_pos, &fork.detail));
                    }
                    return Some(self.fail_session(ctx, &why));
                }
            };
            return self.install_state(ctx, view, received);
        }
        if request.is_empty() {
            // A live server (re-join after a partition) takes no SST: only
            // IST is possible, and it needs no donor (contract §3.3).
            if ist_after.is_none() {
                return Some(self.fail_session(
                    ctx,
                    "a full state transfer is needed but the running server cannot take \
                     one (wsrep_sst_method copies files); restart the node",
                ));
            }
            return self.install_state(ctx, view, local);
        }
        let received = match self.wait_for_state(&request, ist_after) {
            Ok(r) => r,
            Err(why) => return Some(self.fail_session(ctx, &why)),
        };
        self.install_state(ctx, view, received)
    }

    /// An arbitrator has no state to transfer: it says what it is (so it
    /// is never chosen as donor) and is joined at the view that adds it;
    /// what is ordered after that reaches its appliers, which discard it.
    fn join_as_arbitrator(&self, ctx: ThreadCtx, view: View) -> Option<Status> {
        let group_pos = view.state_id;
        info!("joining at {group_pos} as an arbitrator: no state transfer");
        {
            // Everything before the view counts as done: there is nothing
            // to apply it to.
            let mut g = self.lock();
            g.joining.ist_mut().clear();
            g.start_at(Gtid {
                uuid: group_pos.uuid,
                seqno: group_pos.seqno - 1,
            });
        }
        if let Some(rc) = self.deliver_primary_view(ctx, view) {
            return Some(rc);
        }
        let mut g = self.lock();
        let raft_id = g.raft_id();
        g.propose(Action::Arbitrator { raft_id }, false);
        announce_joined(&mut g, group_pos.seqno);
        None
    }

    /// IST from a donor's writeset cache: listens on `ist.recv_addr`, asks
    /// for a donor with that address, and waits for the stream and (with
    /// a server that takes SST) for `sst_received`. The donor may do a
    /// full SST instead; then no stream comes.
    fn wait_for_cache_ist(
        &self,
        request: &[u8],
        have: Gtid,
        join_seqno: i64,
    ) -> Result<Gtid, String> {
        let (bind, advertise) = self.ist_addresses();
        let expect = {
            let g = self.lock();
            Expect {
                have,
                joiner: g.raft_id(),
                join_seqno,
                limit: g.joining.ist().limit(),
                max_payload: self.max_payload(),
                check: g.fork_check.points().to_vec(),
                proto_ver: self.proto_ver,
            }
        };
        let from_cache = CacheIst {
            addr: advertise.clone(),
            check: expect.check.clone(),
        };
        let shared = self.shared.clone();
        let receiver = IstReceiver::start(&bind, expect, self.security.clone(), move |result| {
            let mut g = shared.lock();
            let result = result.map_err(|failure| {
                if failure.fork {
                    g.fork_check.found(crate::fork_check::Fork {
                        detail: failure.why.clone(),
                        views_only: false,
                    });
                }
                failure.why
            });
            g.joining.streamed(result);
            drop(g);
            shared.notify();
        })?;
        // Worded as Galera's (ist.cpp, replicator_str.cpp): MariaDB's
        // IPv6 and mariabackup tests grep the error log for these lines.
        info!("IST receiver addr using tcp://{advertise}");
        info!(
            "Prepared IST receiver for {}-{}, listening at: tcp://{bind}",
            have.seqno + 1,
            join_seqno - 1
        );
        let result =
            self.wait_for_state_with(request, Some(have.seqno), Some(from_cache), join_seqno);
        drop(receiver);
        let received = result?;
        if received.seqno >= join_seqno - 1 {
            // A full SST: it holds everything before the join view.
            self.lock().joining.ist_mut().clear();
            return Ok(received);
        }
        let streamed = self.lock().joining.stream_result();
        match streamed {
            Some(Ok(_)) => Ok(received),
            Some(Err(why)) => Err(why),
            None => Err("no IST stream arrived".into()),
        }
    }

    /// Safe bootstrap: the group's history and this node's share a UUID but
    /// not their events (a cluster bootstrapped from a stale node, with
    /// `safe_to_bootstrap` forced). Neither IST on top of different events
    /// nor an SST over this node's commits is acceptable: refuse, keeping
    /// the real position in grastate.dat.
    fn refuse_forked(&self, ctx: ThreadCtx, local: Gtid, group_pos: Gtid, detail: &str) -> Status {
        let why = format!(
            "this node's history has forked from the cluster's: {detail}. This node is at \
             {local}, the cluster at {group_pos}. Refusing to join so this node's commits are \
             not overwritten. If the cluster's data is the right one, delete {}/grastate.dat \
             and restart this node (full SST); if this node's is, bootstrap the cluster from it",
            self.data_dir.display()
        );
        self.refuse_join(ctx, local, &why)
    }

    /// Ends the session without joining. This node's state is intact and
    /// consistent at `local`: keep that real position in grastate.dat (the
    /// server aborts without a clean close, which would leave -1).
    fn refuse_join(&self, ctx: ThreadCtx, local: Gtid, why: &str) -> Status {
        let position = self.lock().saved_state(local.seqno);
        self.save_state(position);
        self.fail_session(ctx, why)
    }

    /// Asks the group for a donor and waits for `sst_received`.
    fn wait_for_state(&self, request: &[u8], ist_after: Option<i64>) -> Result<Gtid, String> {
        self.wait_for_state_with(request, ist_after, None, i64::MAX)
    }

    /// [`Self::wait_for_state`]; with `from_cache`, also waits for the cache
    /// IST stream when the state received is before `join_seqno - 1`. An
    /// empty `request` (a running server) waits for the stream only.
    fn wait_for_state_with(
        &self,
        request: &[u8],
        ist_after: Option<i64>,
        from_cache: Option<CacheIst>,
        join_seqno: i64,
    ) -> Result<Gtid, String> {
        let asked = Asked {
            streaming: from_cache.is_some(),
            stream_only: request.is_empty(),
            join_seqno,
        };
        loop {
            let mut g = self.lock();
            let donors = g.joining.new_request();
            let raft_id = g.raft_id();
            g.propose(
                Action::StateRequest {
                    joiner: raft_id,
                    donors,
                    request: request.to_vec(),
                    ist_after,
                    from_cache: from_cache.clone(),
                },
                false,
            );
            let why = "the transfer ends: the state arrives or fails, the donor fails or \
                       leaves, no donor is found (asked again after a second), or the \
                       session closes";
            let (g, _) = self.wait_until(g, Until::Progress(why), |s| {
                s.conn != Conn::Open || s.joining.outcome(&asked).is_some()
            });
            if g.conn != Conn::Open {
                return Err("disconnected while waiting for a state transfer".into());
            }
            match g.joining.outcome(&asked) {
                None => unreachable!("the wait ends on an outcome or a closed session"),
                Some(Outcome::DonorLeft) => {
                    return Err(
                        "the donor left the cluster before the state transfer ended; restart \
                         the node to retry with another donor"
                            .into(),
                    )
                }
                Some(Outcome::StreamFailed(why)) => return Err(why),
                Some(Outcome::Streamed) => {
                    return Ok(ist_after.map_or(Gtid::UNDEFINED, |seqno| Gtid {
                        uuid: g.history,
                        seqno,
                    }))
                }
                Some(Outcome::Received(_, rcode)) if rcode != 0 => {
                    return Err(format!(
                        "state transfer failed on this node (error {rcode})"
                    ))
                }
                Some(Outcome::Received(gtid, _)) => return Ok(gtid),
                Some(Outcome::DonorFailed(rcode)) => {
                    // Galera's words (what DBAs and MariaDB's tests look for).
                    let why = format!(
                        "State transfer to this node failed on the donor: {rcode} ({}). Will \
                         never receive state. Need to abort. Restart the node to retry",
                        std::io::Error::from_raw_os_error(-rcode)
                    );
                    if !asked.stream_only {
                        // A server waiting in its startup for an SST:
                        // Galera ends the process here, before the
                        // server's own shutdown of a half-started server
                        // (which writes errors MariaDB's tests do not
                        // expect, and leaves the same result: a node to
                        // restart).
                        drop(g);
                        crate::ffi::terminate_process(&why);
                    }
                    return Err(why);
                }
                Some(Outcome::NoDonor) => {}
            }
            // Galera's wording (MariaDB's tests expect it).
            warn!(
                "Member {} requested state transfer from '{}' but it is impossible to select \
                 State Transfer donor: Resource temporarily unavailable (retrying)",
                self.node_name,
                if g.joining.donors().is_empty() {
                    "*any*"
                } else {
                    g.joining.donors()
                }
            );
            let deadline = Instant::now() + NO_DONOR_RETRY;
            let _ = self.wait_until(g, Until::Deadline(deadline), |s| s.conn != Conn::Open);
        }
    }

    /// Takes the received position as this node's, queues what it lacks
    /// (IST: the replayed events after it, then the join view itself), drops
    /// what it already contains from the queue, and announces JOINED.
    fn install_state(&self, ctx: ThreadCtx, view: View, gtid: Gtid) -> Option<Status> {
        let group_pos = view.state_id;
        if gtid.uuid != group_pos.uuid {
            let why = format!(
                "received state {gtid} does not belong to the group at {group_pos}; restart required"
            );
            return Some(self.fail_session(ctx, &why));
        }
        let mut g = self.lock();
        let by_ist = gtid.seqno < group_pos.seqno;
        let replay = if by_ist {
            match g.joining.ist_mut().take_after(gtid.seqno) {
                Ok(events) => events,
                Err(why) => {
                    drop(g);
                    let why = format!(
                        "received state {gtid} is behind the group at {group_pos} and the \
                         events in between are not available ({why}); restart required"
                    );
                    return Some(self.fail_session(ctx, &why));
                }
            }
        } else {
            g.joining.ist_mut().clear();
            Vec::new()
        };
        // A whole state replaced the data that was not the group's: its
        // marker goes below, under no lock (until then it errs on the
        // safe side).
        let undiverged = g.diverged.clear();
        g.start_at(gtid);
        let writesets = replay
            .iter()
            .filter(|e| matches!(e, Event::Apply(_)))
            .count();
        if by_ist {
            // The IST events, then the view that added this node (contract
            // §4.4: IST carries the view that triggered it), then the rest.
            g.queue.push_front(Event::PrimaryView(view));
            for e in replay.into_iter().rev() {
                g.queue.push_front(e);
            }
        } else {
            // The SST carried the view: save it for pc.recovery here, as
            // deliver_primary_view does for views the server sees.
            g.membership.primary_view_size(view.members.len());
            drop(g);
            self.save_view(&view);
            g = self.lock();
            g.view = Some(view);
        }
        // Filtered above, and the IST events put in front.

        g.local.joined();
        g.cache_catch_up(None);
        announce_joined(&mut g, gtid.seqno);
        let queued = g.queue.len();
        let running = g.running_state();
        let source = if g.joining.stream_result().is_some() {
            "the donor's writeset cache"
        } else {
            "the group log"
        };
        drop(g);
        if let Some(job) = undiverged {
            crate::diverged::remove(job);
        }
        self.save_state(running);
        if by_ist {
            info!(
                "Receiving IST: applying {writesets} writesets {}..={} from {source} (no \
                 data copied); {queued} queued events in all",
                gtid.seqno + 1,
                group_pos.seqno
            );
        } else {
            info!("state transfer complete at {gtid}; {queued} queued events to apply");
        }
        None
    }

    /// This node was chosen as donor: once everything ordered before the
    /// request has finished, hand over to the server's SST script.
    pub(crate) fn donate(&self, ctx: ThreadCtx, request: &[u8], seqno: i64, joiner: u64) {
        let g = self.lock();
        let (mut g, _) = self.wait_until(g, Until::Progress(IN_ORDER), |s| {
            s.last_committed() >= seqno || s.conn != Conn::Open
        });
        if g.conn != Conn::Open {
            return;
        }
        if let Err(state) = g.local.desync() {
            warn!("cannot donate in state {}", state.comment());
        }
        let state_id = Gtid {
            uuid: g.history,
            seqno: g.last_committed(),
        };
        g.donations.start(Donation {
            joiner,
            seqno: state_id.seqno,
            desynced: true,
        });
        info!("donating state {state_id} to joiner {joiner:#x}");
        if !self.server.sst_donate(g, ctx, request, &state_id, false) {
            error!("the server could not start the state transfer to {joiner:#x}");
            self.shared
                .finish_donation(Some(joiner), Gtid::UNDEFINED, -ECANCELED);
        }
    }

    /// The joiner has every event after `after` (IST from the log): start
    /// the server's SST script in bypass mode, which copies nothing and
    /// only tells the joiner's script the position (contract §4.4). The
    /// donor stays Synced and keeps applying.
    pub(crate) fn donate_bypass(&self, ctx: ThreadCtx, request: &[u8], after: i64, joiner: u64) {
        let mut g = self.lock();
        if g.conn != Conn::Open {
            return;
        }
        g.donations.start(Donation {
            joiner,
            seqno: after,
            desynced: false,
        });
        let state_id = Gtid {
            uuid: g.history,
            seqno: after,
        };
        info!("IST to joiner {joiner:#x}: it has the events after {state_id} from the log; releasing its SST script (bypass)");
        if !self.server.sst_donate(g, ctx, request, &state_id, true) {
            error!("the server could not start the bypass transfer to {joiner:#x}");
            self.shared
                .finish_donation(Some(joiner), Gtid::UNDEFINED, -ECANCELED);
        }
    }

    /// IST from this node's writeset cache (the joiner's log replay did
    /// not reach back to its position `after`): stream the events after it
    /// up to `seqno` to the joiner's receiver at `addr`, and release the
    /// joiner's SST script in bypass mode. If the cache lacks some of
    /// them, a full SST, or (a running joiner server, which takes no SST)
    /// a failed transfer.
    pub(crate) fn donate_from_cache(
        &self,
        ctx: ThreadCtx,
        request: &[u8],
        (seqno, joiner): (i64, u64),
        after: i64,
        from_cache: &CacheIst,
    ) {
        let addr = from_cache.addr.as_str();
        // The joiner's check point (a writeset at or before `after`) is
        // sent first, so the joiner can compare it with its own.
        let check: Vec<i64> = from_cache
            .check
            .iter()
            .map(|(s, _)| *s)
            .filter(|s| *s <= after)
            .collect();
        let first = check.iter().min().map_or(after, |s| s - 1);
        let mut g = self.lock();
        if g.conn != Conn::Open {
            return;
        }
        let history = Uuid::from_bytes(g.group_history);
        let reader = g
            .cache
            .with_cache(|cache| match cache.reader(history, first, seqno) {
                Ok(r) => Ok((r, check)),
                // The cache reaches back to the gap but not to the check
                // point: IST without the check.
                Err(_) if !check.is_empty() => {
                    cache.reader(history, after, seqno).map(|r| (r, Vec::new()))
                }
                Err(e) => Err(e),
            })
            .unwrap_or_else(|| {
                Err("this node keeps no writeset cache (disabled after an error)".into())
            });
        let (reader, check) = match reader {
            Ok(r) => r,
            Err(why) if request.is_empty() => {
                info!(
                    "IST to joiner {joiner:#x} impossible ({why}), and its running server \
                     cannot take a full SST"
                );
                g.donations.start(Donation {
                    joiner,
                    seqno: after,
                    desynced: false,
                });
                drop(g);
                self.shared
                    .finish_donation(Some(joiner), Gtid::UNDEFINED, -ENODATA);
                return;
            }
            Err(why) => {
                drop(g);
                // Galera's wording (replicator_str.cpp), which MariaDB's
                // galera_gcache_recover_full_gcache test looks for.
                info!(
                    "IST first seqno {} not found from cache, falling back to SST (IST to \
                     joiner {joiner:#x} impossible: {why})",
                    after + 1
                );
                self.donate(ctx, request, seqno, joiner);
                return;
            }
        };
        if let Err(state) = g.local.desync() {
            warn!("cannot donate in state {}", state.comment());
        }
        g.donations.start(Donation {
            joiner,
            seqno: after,
            desynced: true,
        });
        drop(g);
        let header = StreamHeader {
            history: *history.as_bytes(),
            joiner,
            after,
            last: seqno,
        };
        // Galera's wording (ist.cpp), which MariaDB's tests count.
        info!(
            "async IST sender starting to serve tcp://{addr} sending {}-{seqno}, preload \
             starts from {} (IST to joiner {joiner:#x} from the writeset cache)",
            after + 1,
            after + 1
        );
        let shared = self.shared.clone();
        let security = self.security.clone();
        let addr = addr.to_string();
        let report = request.is_empty();
        let threads = self.shared.detached.clone();
        let spawned = threads.spawn("lockstep-ist-send", move || {
            // A bug must not leave the donation open forever.
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                ist_from_cache::send(&addr, header, &check, reader, &security, &shared.stopping)
            }))
            .unwrap_or_else(|_| Err("the IST sender panicked (a bug)".into()));
            let rcode = match &result {
                Ok(n) => {
                    info!("IST to joiner {joiner:#x} complete: {n} events sent");
                    0
                }
                Err(why) => {
                    warn!("IST to joiner {joiner:#x} failed: {why}");
                    -ECANCELED
                }
            };
            // A running joiner has no SST script whose end reports it.
            if report {
                let state_id = Gtid {
                    uuid: Uuid::from_bytes(header.history),
                    seqno: header.after,
                };
                shared.finish_donation(Some(joiner), state_id, rcode);
            }
        });
        if !spawned {
            error!("cannot start the IST sender");
            self.shared
                .finish_donation(Some(joiner), Gtid::UNDEFINED, -ECANCELED);
            return;
        }
        if report {
            return;
        }
        let state_id = Gtid {
            uuid: history,
            seqno: after,
        };
        if !self
            .server
            .sst_donate(self.lock(), ctx, request, &state_id, true)
        {
            error!("the server could not start the bypass transfer to {joiner:#x}");
            self.shared
                .finish_donation(Some(joiner), Gtid::UNDEFINED, -ECANCELED);
        }
    }

    /// (bind, announced) addresses of this node's IST receiver:
    /// `ist.recv_bind` / `ist.recv_addr`, by default the group address's
    /// host with `base_port + 1` (Galera's defaults).
    fn ist_addresses(&self) -> (String, String) {
        let (_, group) = self.group_addresses();
        let o = self.settings.options();
        let port = o.int("base_port").unwrap_or(4567) + 1;
        let host = group.rsplit_once(':').map_or(group.as_str(), |(h, _)| h);
        let advertise = match o.get("ist.recv_addr") {
            Some(a) if !a.trim().is_empty() => ist_from_cache::socket_addr(a, port),
            _ => format!("{host}:{port}"),
        };
        let bind = match o.get("ist.recv_bind") {
            Some(b) if !b.trim().is_empty() => ist_from_cache::socket_addr(b, port),
            _ => advertise.clone(),
        };
        (bind, advertise)
    }

    /// The largest record payload read back from a cache or an IST
    /// stream: `repl.max_ws_size` plus room for keys and headers.
    pub(crate) fn max_payload(&self) -> usize {
        let o = self.settings.options();
        let max_ws = o.size("repl.max_ws_size").unwrap_or(i32::MAX as u64);
        usize::try_from(max_ws.saturating_add(1 << 20)).unwrap_or(usize::MAX)
    }

    /// `sst_sent`: the donor's script finished.
    pub fn sst_sent(&self, state_id: Gtid, rcode: i32) -> Status {
        if self.lock().donations.is_empty() {
            return status::CONN_FAIL;
        }
        self.shared.finish_donation(None, state_id, rcode);
        status::OK
    }

    /// `sst_received`: the joiner's script finished and the server read
    /// its position; wake the applier waiting in `join_view`.
    pub fn sst_received(&self, state_id: Gtid, rcode: i32) -> Status {
        let mut g = self.lock();
        if g.conn != Conn::Open {
            return status::CONN_FAIL;
        }
        info!("state received: {state_id} (code {rcode})");
        // A whole state replaces whatever a crash inside a commit bypass
        // may have left: the marker goes, after the lock is let go of.
        let forget = (rcode == 0).then(|| g.bypass.forget_marker());
        g.joining.state_received(state_id, rcode);
        drop(g);
        self.notify();
        if let Some(job) = forget {
            crate::bypass::run_marker_job(job, &crate::storage::Disk);
        }
        status::OK
    }
}

impl Shared {
    /// The donation ended: report it to the group (and resync unless it
    /// was a bypass). Runs on the IST sender's thread too, which holds
    /// only the shared state.
    /// `joiner`: which one, when known; `sst_sent` is not told, so its
    /// script is found by the seqno it reports (the oldest if none
    /// matches).
    pub(crate) fn finish_donation(&self, joiner: Option<u64>, state_id: Gtid, rcode: i32) {
        let mut g = self.lock();
        let Some(Donation {
            joiner, desynced, ..
        }) = g.donations.finish(joiner, state_id.seqno)
        else {
            return;
        };
        let rcode = if rcode == 0 && state_id.uuid != g.history {
            -EREMCHG
        } else if rcode > 0 {
            -rcode
        } else {
            rcode
        };
        info!("state transfer to {joiner:#x} ended at {state_id} (code {rcode})");
        let raft_id = g.raft_id();
        g.propose(
            Action::StateTransferred {
                donor: raft_id,
                joiner,
                seqno: state_id.seqno,
                rcode,
            },
            false,
        );
        if !desynced {
            // Never desynced: nothing to announce.
            drop(g);
            self.notify();
            return;
        }
        let _ = g.local.resync();
        if g.queue.is_empty() {
            g.propose(Action::Synced { raft_id }, false);
        } else {
            g.want_sync = true;
        }
        drop(g);
        self.notify();
    }
}

/// The node has its state at `seqno`: tell the group (Joined), and say
/// Synced once the applier queue is empty.
fn announce_joined(g: &mut Inner, seqno: i64) {
    let raft_id = g.raft_id();
    g.propose(Action::Joined { raft_id, seqno }, false);
    g.want_sync = true;
}
