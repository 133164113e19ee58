//! Causal reads, pause/resume and desync/resync (contract §2.20-2.21,
//! §2.30-2.31, §4.10-4.11).

use crate::event::Event;
use crate::log::{info, warn};
use crate::provider::Provider;
use crate::state::{Conn, Resolution};
use lockstep_core::group::Action;
use std::time::{Duration, Instant};
use wsrep_abi::{status, Gtid, Status};

/// `tout` may be INT_MAX seconds (contract P25): cap instead of overflowing.
const MAX_WAIT: Duration = Duration::from_secs(365 * 24 * 3600);

impl Provider {
    pub fn last_committed_id(&self) -> Gtid {
        let g = self.lock();
        Gtid {
            uuid: g.history,
            seqno: g.last_committed(),
        }
    }

    /// `upto = None`: a causal read; otherwise wait for that GTID.
    pub fn sync_wait(&self, upto: Option<Gtid>, tout: i32) -> (Status, Gtid) {
        let timeout = if tout < 0 {
            self.tunables().causal_read_timeout
        } else {
            Duration::from_secs(tout as u64).min(MAX_WAIT)
        };
        let deadline = Instant::now() + timeout;
        let mut g = self.lock();
        let target = match upto {
            Some(gtid) => {
                if gtid.uuid != g.history {
                    return (status::TRX_MISSING, Gtid::UNDEFINED);
                }
                gtid.seqno
            }
            None => {
                if !g.accepts_writes() {
                    return (status::TRX_FAIL, Gtid::UNDEFINED);
                }
                // Everything ordered cluster-wide before this read: a fence
                // through the total order tells which seqno that is.
                // The fence carries its own proposal id, which is how its
                // delivery finds this waiter.
                let (raft_id, next) = (g.raft_id(), g.next_proposal);
                let Some(id) = g.propose(Action::Barrier { raft_id, id: next }, true) else {
                    return (status::TRX_FAIL, Gtid::UNDEFINED);
                };
                let (mut ng, _) = self.wait_until(g, Some(deadline), |s| {
                    s.waiting.get(&id) != Some(&Resolution::Pending)
                });
                match ng.waiting.remove(&id) {
                    Some(Resolution::Fence { seqno }) => {
                        g = ng;
                        seqno
                    }
                    _ => return (status::TRX_FAIL, Gtid::UNDEFINED),
                }
            }
        };
        let (mut g, reached) = self.wait_until(g, Some(deadline), |s| {
            s.last_committed() >= target || s.conn == Conn::Closed
        });
        if !reached || g.last_committed() < target {
            return (status::TRX_FAIL, Gtid::UNDEFINED);
        }
        if upto.is_none() {
            g.counters.causal_reads += 1;
        }
        let at = Gtid {
            uuid: g.history,
            seqno: g.last_committed(),
        };
        (status::OK, at)
    }

    /// Stops ordering, drains, and returns the position (or -1).
    pub fn pause(&self) -> i64 {
        let mut g = self.lock();
        if g.conn != Conn::Open {
            return -1;
        }
        if g.paused_at.is_some() {
            warn!("pause requested while already paused");
        }
        // Seqnos already ordered drain; later ones wait for resume().
        let upto = g.last_ordered;
        g.paused_at = Some(upto);
        let (g, _) = self.wait_until(g, None, |s| {
            s.last_committed() >= upto || s.conn == Conn::Closed
        });
        let seqno = g.last_committed();
        let paused_at = g.saved_state(seqno);
        drop(g);
        self.save_state(paused_at);
        info!("provider paused at {}:{seqno}", paused_at.uuid);
        seqno
    }

    pub fn resume(&self) -> Status {
        let mut g = self.lock();
        if g.paused_at.is_none() {
            info!("resume requested while not paused; ignored");
            return status::OK;
        }
        g.paused_at = None;
        let running = g.running_state();
        drop(g);
        self.save_state(running);
        self.notify();
        info!("provider resumed");
        status::OK
    }

    pub fn desync(&self) -> Status {
        let mut g = self.lock();
        if g.conn != Conn::Open {
            return status::TRX_FAIL;
        }
        match g.local.desync() {
            Ok(()) => status::OK,
            Err(state) => {
                warn!("cannot desync in state {}", state.comment());
                status::TRX_FAIL
            }
        }
    }

    pub fn resync(&self) -> Status {
        let mut g = self.lock();
        match g.local.resync() {
            Ok(()) => {
                if g.local.state() == lockstep_core::group::MemberState::Joined {
                    // synced_cb must run on an applier thread.
                    g.enqueue(Event::Synced);
                    drop(g);
                    self.notify();
                }
                status::OK
            }
            Err(_) => {
                // Galera accepts it too: a rejoin (new membership) drops
                // the desyncs, and the server's wsrep_desync=0 follows.
                info!("resync without a matching desync: nothing to do");
                status::OK
            }
        }
    }
}
