//! Connection life cycle: `connect`, the applier loop in `recv`, and
//! `disconnect` with its final view (contract §2.7-2.9, §4.2, §4.12).

use crate::log::{error, info, warn};
use crate::provider::{Provider, CAPABILITIES};
use crate::server::{Member, ThreadCtx, View};
use crate::state::{Conn, Event};
use lockstep_core::address::ClusterAddress;
use std::time::{Duration, Instant};
use wsrep_abi::{status, view_status, Gtid, Status, Uuid};

/// How long `disconnect` waits for an applier to take the final view
/// before it warns that none is running.
const FINAL_VIEW_PATIENCE: Duration = Duration::from_secs(10);

impl Provider {
    pub fn connect(&self, cluster_name: &str, url: &str, bootstrap: bool) -> Status {
        let address = match ClusterAddress::parse(url) {
            Ok(a) => a,
            Err(e) => {
                error!("{e}");
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
        if !(bootstrap || address.is_bootstrap()) {
            let peers: Vec<String> = address.peers.iter().map(ToString::to_string).collect();
            error!(
                "cannot join cluster '{cluster_name}' at {}: this Lockstep build forms \
                 one-node clusters only (group communication is not implemented yet); \
                 start the node with --wsrep-new-cluster",
                peers.join(",")
            );
            return status::NODE_FAIL;
        }
        self.bootstrap(cluster_name)
    }

    /// Forms a one-node primary component (contract §4.2).
    fn bootstrap(&self, cluster_name: &str) -> Status {
        let saved = {
            let mut store = self.store.lock().unwrap_or_else(|p| p.into_inner());
            match store.load() {
                Ok(s) => s,
                Err(e) => {
                    error!("{e}");
                    return status::NODE_FAIL;
                }
            }
        };
        if !saved.safe_to_bootstrap {
            error!(
                "refusing to bootstrap cluster '{cluster_name}' from this node: it was not \
                 the last to leave the cluster and may lack committed transactions. Bootstrap \
                 from the most advanced node, or, if you are sure, set safe_to_bootstrap: 1 \
                 in {}/grastate.dat",
                self.data_dir.display()
            );
            return status::NODE_FAIL;
        }
        let mut g = self.lock();
        if g.conn != Conn::Closed {
            warn!("connect called while already connected");
            return status::CONN_FAIL;
        }
        // Continue the known history; otherwise start a new one at seqno 1.
        if g.history.is_nil() || g.last_committed() < 0 {
            if !g.history.is_nil() {
                warn!(
                    "history {} has no known seqno (unclean shutdown?): starting a new \
                     history; the server resets its checkpoint",
                    g.history
                );
            }
            g.history = random_uuid();
            g.finished.reset(0);
            g.commit.reset(0);
            g.certifier.reset(0);
            g.last_ordered = 0;
        }
        let seqno = g.last_ordered + 1;
        g.last_ordered = seqno;
        if let Err(e) = g.certifier.note_non_writeset(seqno) {
            error!("certification state out of order at the first view: {e:?}");
            return status::NODE_FAIL;
        }
        g.member_id = random_uuid();
        g.conn = Conn::Open;
        g.final_delivered = false;
        g.paused = false;
        let view = View {
            state_id: Gtid {
                uuid: g.history,
                seqno,
            },
            conf_id: 1,
            status: view_status::PRIMARY,
            capabilities: CAPABILITIES,
            my_idx: 0,
            proto_ver: self.proto_ver,
            members: vec![Member {
                id: g.member_id,
                name: self.node_name.clone(),
                incoming: self.node_incoming.clone(),
            }],
        };
        info!(
            "bootstrapped cluster '{cluster_name}' at {}: history {}, first view at seqno {seqno}, member {}",
            self.node_address, g.history, g.member_id
        );
        g.events.push_back(Event::Connected(view.clone()));
        g.events.push_back(Event::PrimaryView(view));
        g.events.push_back(Event::Synced);
        let running = g.running_state();
        drop(g);
        self.save_state(running);
        self.notify();
        status::OK
    }

    /// The applier loop: runs every ordered event on the calling thread.
    pub fn recv(&self, ctx: ThreadCtx) -> Status {
        {
            let mut g = self.lock();
            if g.conn == Conn::Closed {
                return status::FATAL;
            }
            g.appliers += 1;
        }
        let rc = self.recv_loop(ctx);
        self.lock().appliers -= 1;
        self.notify();
        rc
    }

    fn recv_loop(&self, ctx: ThreadCtx) -> Status {
        loop {
            let g = self.lock();
            let (mut g, _) =
                self.wait_until(g, None, |s| !s.events.is_empty() || s.conn == Conn::Closed);
            let Some(event) = g.events.pop_front() else {
                return status::CONN_FAIL;
            };
            drop(g);
            match event {
                Event::Connected(view) => {
                    if !self.server.connected(&view) {
                        return self.fail_session(ctx, "connected callback failed");
                    }
                }
                Event::PrimaryView(view) => {
                    if let Some(rc) = self.deliver_primary_view(ctx, view) {
                        return rc;
                    }
                }
                Event::Synced => {
                    let due = self.lock().local.caught_up();
                    if due == lockstep_core::group::Notify::Synced && !self.server.synced() {
                        return self.fail_session(ctx, "synced callback failed");
                    }
                }
                Event::Final => {
                    self.lock().local.closed();
                    self.end_session(ctx);
                    return status::OK;
                }
            }
        }
    }

    /// Runs a primary view in total order isolation: everything before it
    /// finished, nothing after it starts until the callback returns.
    fn deliver_primary_view(&self, ctx: ThreadCtx, view: View) -> Option<Status> {
        let seqno = view.state_id.seqno;
        let g = self.lock();
        let (g, _) = self.wait_until(g, None, |s| s.last_committed() >= seqno - 1);
        drop(g);
        let ok = self.server.view(ctx, &view);
        let mut g = self.lock();
        if !ok {
            if g.conn == Conn::Closing {
                // Interrupted by disconnect; the final view follows.
                return None;
            }
            drop(g);
            return Some(self.fail_session(ctx, "view callback failed, restart required"));
        }
        let passed = g.commit.mark(seqno).and_then(|_| g.finished.mark(seqno));
        if let Err(e) = passed {
            drop(g);
            return Some(self.fail_session(ctx, &e.to_string()));
        }
        g.local.joined();
        g.view = Some(view);
        let running = g.running_state();
        drop(g);
        self.save_state(running);
        self.notify();
        None
    }

    /// A callback failed outside shutdown: the node cannot go on as if it
    /// had succeeded. End the session on this thread with the final view.
    fn fail_session(&self, ctx: ThreadCtx, why: &str) -> Status {
        error!("{why}; leaving the cluster");
        let mut g = self.lock();
        g.local.inconsistent();
        g.conn = Conn::Closing;
        g.events.clear();
        drop(g);
        self.end_session(ctx);
        status::NODE_FAIL
    }

    /// Delivers the empty final view on this applier (contract P19) and
    /// marks the session closed, which releases `disconnect` and every
    /// other applier. A failed callback here is the end of the session
    /// anyway (contract P15).
    fn end_session(&self, ctx: ThreadCtx) {
        self.server
            .view(ctx, &View::final_view(CAPABILITIES, self.proto_ver));
        let mut g = self.lock();
        g.conn = Conn::Closed;
        g.final_delivered = true;
        g.view = None;
        drop(g);
        self.notify();
    }

    pub fn disconnect(&self) -> Status {
        let mut g = self.lock();
        match g.conn {
            Conn::Closed => return status::OK,
            Conn::Closing => {}
            Conn::Open => {
                info!("leaving the cluster (member {})", g.member_id);
                g.conn = Conn::Closing;
                g.paused = false;
                g.events.push_back(Event::Final);
                self.notify();
            }
        }
        let started = Instant::now();
        let mut warned = false;
        loop {
            let deadline = Some(Instant::now() + Duration::from_secs(1));
            let (ng, done) = self.wait_until(g, deadline, |s| s.final_delivered);
            g = ng;
            if done {
                break;
            }
            if !warned && g.appliers == 0 && started.elapsed() > FINAL_VIEW_PATIENCE {
                warn!("disconnect: no applier thread is running to take the final view; still waiting");
                warned = true;
            }
        }
        let position = g.saved_state(g.last_committed());
        g.trxs.clear();
        g.toi.clear();
        drop(g);
        self.save_state(position);
        info!(
            "closed; saved position {}:{}",
            position.uuid, position.seqno
        );
        status::OK
    }

    /// `free` on a node that was never disconnected: save what we know.
    pub fn shutdown(&self) {
        let g = self.lock();
        if g.conn == Conn::Closed || g.history.is_nil() {
            return;
        }
        let position = g.saved_state(g.last_committed());
        drop(g);
        self.save_state(position);
    }
}

/// A random (version 4) UUID for histories and member ids.
pub fn random_uuid() -> Uuid {
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
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    Uuid::from_bytes(bytes)
}
