//! State transfer through the server's SST scripts (contract §3.3, §3.6,
//! §2.26-2.27, §4.3): the joiner's request and wait, the donor's
//! donation, and the two completion calls from the server.
//!
//! The request travels in the total order, so every node picks the same
//! donor (`lockstep_core::group::Sequencer`). Writesets ordered while the
//! transfer runs stay queued on the joiner and are applied afterwards,
//! from the first seqno the transferred state does not contain.

use crate::log::{error, info, warn};
use crate::provider::Provider;
use crate::server::{ThreadCtx, View};
use crate::state::{Conn, Event};
use lockstep_core::group::Action;
use std::time::{Duration, Instant};
use wsrep_abi::{status, Gtid, Status};

/// Galera retries a state request without a donor every second.
const NO_DONOR_RETRY: Duration = Duration::from_secs(1);
const ECANCELED: i32 = 125;
const EREMCHG: i32 = 78;

impl Provider {
    /// The first view of a joining node (contract §3.3 "When").
    pub(crate) fn join_view(&self, ctx: ThreadCtx, view: View) -> Option<Status> {
        let group_pos = view.state_id;
        let (needed, local) = {
            let g = self.lock();
            let local = Gtid {
                uuid: g.history,
                seqno: g.last_committed(),
            };
            (
                local.uuid != group_pos.uuid || local.seqno + 1 < group_pos.seqno,
                local,
            )
        };
        if local.uuid == group_pos.uuid && local.seqno >= group_pos.seqno {
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
            // Its state is intact and consistent: keep the real position
            // in grastate.dat (the server aborts without a clean close).
            let position = self.lock().saved_state(local.seqno);
            self.save_state(position);
            return Some(self.fail_session(ctx, &why));
        }
        if !needed {
            info!(
                "joining at {group_pos} with the state already here ({local}): no transfer needed"
            );
            if let Some(rc) = self.deliver_primary_view(ctx, view) {
                return Some(rc);
            }
            let mut g = self.lock();
            let raft_id = g.raft_id();
            g.propose(
                Action::Joined {
                    raft_id,
                    seqno: group_pos.seqno,
                },
                false,
            );
            g.want_sync = true;
            return None;
        }
        let (ist, missing) = {
            let g = self.lock();
            (g.ist.covers(group_pos), g.ist.writesets())
        };
        match &ist {
            Ok(()) => info!(
                "state transfer required: group at {group_pos}, this node at {local}; \
                 IST possible: the group log holds every event after {local} \
                 ({missing} writesets)"
            ),
            Err(why) => info!(
                "state transfer required: group at {group_pos}, this node at {local}; \
                 full SST ({why})"
            ),
        }
        self.lock().local.joining();
        let Some(request) = self.server.sst_request() else {
            return Some(
                self.fail_session(ctx, "the server could not prepare for a state transfer"),
            );
        };
        let ist_after = ist.is_ok().then_some(local.seqno);
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

    /// Asks the group for a donor and waits for `sst_received`.
    fn wait_for_state(&self, request: &[u8], ist_after: Option<i64>) -> Result<Gtid, String> {
        loop {
            let mut g = self.lock();
            g.sst = Default::default();
            let raft_id = g.raft_id();
            let donors = g.donors.clone();
            g.propose(
                Action::StateRequest {
                    joiner: raft_id,
                    donors,
                    request: request.to_vec(),
                    ist_after,
                },
                false,
            );
            let (g, _) = self.wait_until(g, None, |s| {
                s.sst.received.is_some()
                    || s.sst.donor_rcode.is_some_and(|r| r != 0)
                    || s.sst.no_donor
                    || s.conn != Conn::Open
            });
            if g.conn != Conn::Open {
                return Err("disconnected while waiting for a state transfer".into());
            }
            if let Some((gtid, rcode)) = g.sst.received {
                if rcode != 0 {
                    return Err(format!(
                        "state transfer failed on this node (error {rcode})"
                    ));
                }
                return Ok(gtid);
            }
            if let Some(rcode) = g.sst.donor_rcode {
                return Err(format!(
                    "the donor failed the state transfer (error {rcode}); restart the node to retry"
                ));
            }
            // Galera's wording (MariaDB's tests expect it).
            warn!(
                "Member {} requested state transfer from '{}' but it is impossible to select \
                 State Transfer donor: Resource temporarily unavailable (retrying)",
                self.node_name,
                if g.donors.is_empty() {
                    "*any*"
                } else {
                    &g.donors
                }
            );
            let deadline = Instant::now() + NO_DONOR_RETRY;
            let _ = self.wait_until(g, Some(deadline), |s| s.conn != Conn::Open);
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
            match g.ist.take_after(gtid.seqno) {
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
            g.ist.clear();
            Vec::new()
        };
        g.history = gtid.uuid;
        g.finished.reset(gtid.seqno);
        g.commit.reset(gtid.seqno);
        g.last_ordered = g.last_ordered.max(gtid.seqno);
        g.events
            .retain(|e| e.seqno().is_none_or(|s| s > gtid.seqno));
        let writesets = replay
            .iter()
            .filter(|e| matches!(e, Event::Apply(_)))
            .count();
        if by_ist {
            // The IST events, then the view that added this node (contract
            // §4.4: IST carries the view that triggered it), then the rest.
            g.events.push_front(Event::PrimaryView(view));
            for e in replay.into_iter().rev() {
                g.events.push_front(e);
            }
        } else {
            // The SST carried the view: save it for pc.recovery here, as
            // deliver_primary_view does for views the server sees.
            g.last_view_members = view.members.len();
            drop(g);
            self.save_view(&view);
            g = self.lock();
            g.view = Some(view);
        }
        g.local.joined();
        let raft_id = g.raft_id();
        g.propose(
            Action::Joined {
                raft_id,
                seqno: gtid.seqno,
            },
            false,
        );
        g.want_sync = true;
        let queued = g.events.len();
        let running = g.running_state();
        drop(g);
        self.save_state(running);
        if by_ist {
            info!(
                "Receiving IST: applying {writesets} writesets {}..={} from the group log (no \
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
        let (mut g, _) = self.wait_until(g, None, |s| {
            s.last_committed() >= seqno || s.conn != Conn::Open
        });
        if g.conn != Conn::Open {
            return;
        }
        if let Err(state) = g.local.desync() {
            warn!("cannot donate in state {}", state.comment());
        }
        g.donating_to = Some(joiner);
        let state_id = Gtid {
            uuid: g.history,
            seqno: g.last_committed(),
        };
        drop(g);
        info!("donating state {state_id} to joiner {joiner:#x}");
        if !self.server.sst_donate(ctx, request, &state_id, false) {
            error!("the server could not start the state transfer to {joiner:#x}");
            self.finish_donation(Gtid::UNDEFINED, -ECANCELED);
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
        g.donating_to = Some(joiner);
        g.donating_bypass = true;
        let state_id = Gtid {
            uuid: g.history,
            seqno: after,
        };
        drop(g);
        info!("IST to joiner {joiner:#x}: it has the events after {state_id} from the log; releasing its SST script (bypass)");
        if !self.server.sst_donate(ctx, request, &state_id, true) {
            error!("the server could not start the bypass transfer to {joiner:#x}");
            self.finish_donation(Gtid::UNDEFINED, -ECANCELED);
        }
    }

    /// `sst_sent`: the donor's script finished.
    pub fn sst_sent(&self, state_id: Gtid, rcode: i32) -> Status {
        if self.lock().donating_to.is_none() {
            return status::CONN_FAIL;
        }
        self.finish_donation(state_id, rcode);
        status::OK
    }

    fn finish_donation(&self, state_id: Gtid, rcode: i32) {
        let mut g = self.lock();
        let Some(joiner) = g.donating_to.take() else {
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
        if std::mem::take(&mut g.donating_bypass) {
            // Never desynced: nothing to announce.
            drop(g);
            self.notify();
            return;
        }
        let _ = g.local.resync();
        if g.events.is_empty() {
            g.propose(Action::Synced { raft_id }, false);
        } else {
            g.want_sync = true;
        }
        drop(g);
        self.notify();
    }

    /// `sst_received`: the joiner's script finished and the server read
    /// its position; wake the applier waiting in `join_view`.
    pub fn sst_received(&self, state_id: Gtid, rcode: i32) -> Status {
        let mut g = self.lock();
        if g.conn != Conn::Open {
            return status::CONN_FAIL;
        }
        info!("state received: {state_id} (code {rcode})");
        g.sst.received = Some((state_id, rcode));
        drop(g);
        self.notify();
        status::OK
    }
}
