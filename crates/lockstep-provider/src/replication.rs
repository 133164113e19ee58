//! Local transactions: collect, order, certify, commit in order, release;
//! BF aborts and replays; TOI (contract §2.11-2.19, §2.23-2.24, §4.5-4.9).
//!
//! Writesets are ordered and certified by the group (`channel`): a local
//! transaction proposes its writeset and waits for its seqno; remote
//! writesets arrive as `Event::Apply` and run through `apply_cb`.

use crate::cache_writer::ACK_WAIT;
use crate::commit_waits::CommitWait;
use crate::local_trxs::{Certified, NoCommit, NoReplay};
use crate::log::{error, info};
use crate::provider::{Provider, Until, IN_ORDER};
use crate::remote_ws::{RemoteWs, LARGE_WRITESET};
use crate::server::ThreadCtx;
use crate::shared::StateGuard;
use crate::shared::Wake;
use crate::state::{Conn, Resolution};
use crate::trx::{is_open_fragment, is_streaming, Handle, LocalTrx, TrxState};
use lockstep_core::certification::{CertOutcome, Key, KeyType};
use lockstep_core::group::node::FRAGMENT_BYTES;
use lockstep_core::group::payload::Payload;
use lockstep_core::group::{Action, EncodedBody, Writeset};
use lockstep_core::metrics::Stage;
use std::borrow::Cow;
use std::time::Instant;

fn mib(bytes: usize) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}
use wsrep_abi::{flags, status, Gtid, Status, Stid, TrxMeta, WsHandle};

/// Outcome of ordering and certifying one action.
struct Ordered {
    seqno: i64,
    depends_on: i64,
    passed: bool,
    related: Option<Vec<i64>>,
}

impl Provider {
    /// A new local transaction object: registered so BF aborts can find it.
    pub fn begin_trx(&self, trx_id: u64) {
        self.lock().trxs.begin(trx_id);
    }

    pub fn append_key(&self, trx: &mut LocalTrx, key: Key) -> Status {
        let bytes = key.part_bytes();
        if trx.oversized {
            return status::OK;
        }
        trx.counted_keys.add(&key);
        if trx.counted_size() as u64 > self.max_ws_size() {
            trx.oversized = true;
            return status::OK;
        }
        trx.key_bytes += bytes;
        trx.key_count += 1;
        trx.keys.push(key);
        status::OK
    }

    /// Appends the server's buffers `parts` (of `len` bytes in all) to the
    /// transaction's data: one copy, straight from the server's memory.
    pub fn append_data<'a>(
        &self,
        trx: &mut LocalTrx,
        len: usize,
        parts: impl Iterator<Item = &'a [u8]>,
    ) -> Status {
        if trx.oversized || (trx.counted_size() + len) as u64 > self.max_ws_size() {
            trx.oversized = true;
            return status::OK;
        }
        trx.data.reserve(len);
        for part in parts {
            trx.data.extend_from_slice(part);
        }
        status::OK
    }

    fn max_ws_size(&self) -> u64 {
        self.tunables().max_ws_size
    }

    /// Sends a writeset to the group and waits for its place in the total
    /// order and its certification result (identical on every node).
    /// `None`: it was not ordered (the node left the group).
    fn order<'a>(
        &'a self,
        mut g: StateGuard<'a>,
        ws: Writeset,
        body: Option<EncodedBody>,
    ) -> (StateGuard<'a>, Option<Ordered>) {
        let last_seen = ws.last_seen;
        let proposed = match body {
            Some(body) => g.propose_fragments_unwoken(body.with_head(&ws)),
            None => g.propose_unwoken(Action::Writeset(ws)),
        };
        let Some(id) = proposed else {
            return (g, None);
        };
        g.proposals.set_last_seen(id, last_seen);
        let t0 = Instant::now();
        // The rounds' loop takes the proposal into Raft (ADR 0039), woken
        // once this thread has let go of the lock, which a round takes.
        match g.group.as_ref().map(|l| l.tx.clone()) {
            Some(inputs) => inputs.wake_after(g),
            None => drop(g),
        }
        let g = self.lock();
        let mut g = self.wait_for(g, CommitWait::Resolved(id));
        g.stages.observe(Stage::Replicate, t0.elapsed());
        let ordered = match g.proposals.take(id) {
            Some(Resolution::Ordered {
                seqno,
                outcome,
                related,
            }) => Some(match outcome {
                CertOutcome::Pass { depends_on } => Ordered {
                    seqno,
                    depends_on,
                    passed: true,
                    related,
                },
                CertOutcome::Fail { reason } => {
                    info!("seqno {seqno} failed certification: {reason}");
                    Ordered {
                        seqno,
                        depends_on: seqno - 1,
                        passed: false,
                        related: None,
                    }
                }
            }),
            _ => None,
        };
        (g, ordered)
    }

    /// Flow control, the writers' side: waits while a member asks the
    /// cluster to stop (woken by its withdrawal, a view without it, or
    /// the end of the session), then, while a member throttles, waits
    /// the level's delay without the lock (at most 20 ms).
    ///
    /// `trx`: the local transaction that waits. It holds row locks, so a
    /// BF abort (a writeset ordered before it needs them) ends its wait:
    /// it is then never replicated.
    fn flow_control_wait<'a>(&'a self, g: StateGuard<'a>, trx: Option<u64>) -> StateGuard<'a> {
        let g = self.wait_for(g, CommitWait::FlowOpen(trx));
        let delay = lockstep_core::flow_control::throttle_delay(g.flow.gate().level());
        if delay.is_zero() {
            return g;
        }
        drop(g);
        std::thread::sleep(delay);
        self.lock()
    }

    /// Waits while the provider is paused (FTWRL, SST donation).
    fn wait_unpaused<'a>(&'a self, g: StateGuard<'a>) -> StateGuard<'a> {
        self.wait_for(g, CommitWait::Unpaused)
    }

    pub fn certify(
        &self,
        trx_id: u64,
        mut trx: Option<&mut LocalTrx>,
        conn_id: u64,
        wsflags: u32,
        meta: &mut TrxMeta,
    ) -> Status {
        // A big writeset is encoded here, before the lock: O(size) work
        // under it would hold up every other session and applier, and on
        // the round every heartbeat and every other writeset. Its data
        // moves into a shared payload, as a small one's does below, which
        // the fragments slice and the transaction keeps for a replay.
        let body = match trx.as_deref_mut() {
            Some(t) if !t.oversized && t.size() > FRAGMENT_BYTES => {
                // Moved once: `sent` keeps it if this is asked again.
                if !t.data.is_empty() {
                    t.sent = Payload::from(std::mem::take(&mut t.data));
                }
                Some(EncodedBody::encode(&t.keys, &t.sent, FRAGMENT_BYTES))
            }
            _ => None,
        };
        let g = self.lock();
        let member = g.member_id;
        *meta = TrxMeta::undefined();
        meta.stid = Stid {
            node: member,
            trx: u64::MAX,
            conn: conn_id,
        };
        let Some(trx) = trx else {
            // Nothing was appended: nothing to replicate.
            return status::OK;
        };
        meta.stid.trx = trx_id;
        trx.flags = wsflags;
        trx.conn_id = conn_id;
        if trx.oversized {
            info!(
                "transaction {trx_id} exceeds repl.max_ws_size ({} bytes); not replicated",
                self.max_ws_size()
            );
            return status::SIZE_EXCEEDED;
        }
        let g = self.flow_control_wait(g, Some(trx_id));
        let mut g = self.wait_unpaused(g);
        if g.local.state() == lockstep_core::group::MemberState::Error {
            return status::NODE_FAIL;
        }
        if !g.accepts_writes() {
            return status::CONN_FAIL;
        }
        let open_fragment = is_open_fragment(wsflags);
        if !g.trxs.start_replicating(trx_id, open_fragment) {
            // BF-aborted before it was ordered: never replicate it.
            return status::CONN_FAIL;
        }
        let large = (trx.size() >= LARGE_WRITESET).then(Instant::now);
        if large.is_some() {
            info!(
                "replicating a large writeset: {:.0} MiB of data, {} keys",
                mib(trx.data_len()),
                trx.key_count
            );
        }
        let (size, data_len) = (trx.size(), trx.data_len());
        // A small writeset's data moves into a shared payload, which the
        // transaction keeps for a replay: the bytes are not copied again.
        if body.is_none() {
            trx.sent = Payload::from(std::mem::take(&mut trx.data));
        }
        let ws = Writeset {
            source: member.data,
            trx_id,
            conn_id,
            last_seen: g.last_committed(),
            flags: wsflags,
            // A big one's keys and data are in `body` already; they stay
            // with the transaction (the data shared with the fragments),
            // freed later outside the lock.
            keys: match body {
                Some(_) => Vec::new(),
                None => std::mem::take(&mut trx.keys),
            },
            data: match body {
                Some(_) => Payload::default(),
                None => trx.sent.clone(),
            },
        };
        let (mut g, ordered) = self.order(g, ws, body);
        if let (Some(t0), Some(o)) = (large, &ordered) {
            info!(
                "large writeset ordered as seqno {} in {:.1} s",
                o.seqno,
                t0.elapsed().as_secs_f64()
            );
        }
        let Some(ordered) = ordered else {
            g.trxs.not_ordered(trx_id);
            return status::CONN_FAIL;
        };
        g.counters.replicated += 1;
        g.counters.replicated_bytes += size as i64;
        g.counters.repl_keys += trx.key_count as i64;
        g.counters.repl_keys_bytes += trx.key_bytes as i64;
        g.counters.repl_data_bytes += data_len as i64;
        meta.gtid = Gtid {
            uuid: g.history,
            seqno: ordered.seqno,
        };
        meta.depends_on = ordered.depends_on;
        if ordered.passed {
            // Applied already (it ran here); it waits only for commit order.
            g.gates.enter_apply(ordered.seqno);
            // A large local commit holds commit order as long as a remote
            // one: the same bypass applies behind it.
            let size = trx.size();
            if g.bypass.ordered(ordered.seqno, size) {
                // A transaction ordered after it may already wait for its
                // commit turn: it must now wait as one held back.
                self.shared.notify_all_turns();
            }
            g.bypass
                .note_related(ordered.seqno, ordered.related.clone());
        }
        let certified = g
            .trxs
            .ordered(trx_id, ordered.seqno, ordered.depends_on, ordered.passed);
        match certified.expect("registered above") {
            Certified::Failed => {
                g.counters.local_cert_failures += 1;
                status::TRX_FAIL
            }
            // A fragment cannot replay: the other nodes apply it, and the
            // server rolls the streaming transaction back everywhere
            // (`rollback`). Its seqno passes the gates at `release`.
            Certified::AbortedFragment => status::TRX_FAIL,
            // Aborted by a writeset ordered before it while in flight: it
            // keeps its seqno and replays (contract §2.11, BF_ABORT).
            Certified::MustReplay => status::BF_ABORT,
            Certified::Passed => status::OK,
        }
    }

    /// Returns the state lock once the event at `seqno` is in the
    /// writeset cache file, which the storage engine may then commit
    /// (ADR 0032): so after a crash the cache reaches the engine's
    /// position, and every acknowledged commit is in it. Usually it is
    /// written by now and this is one look; otherwise the lock is let go
    /// while this thread writes the batch itself, or waits (at most
    /// `ACK_WAIT`) for the thread that writes it.
    ///
    /// If the cache failed (a write error, a stuck disk), the event must
    /// not be committed: `Err` with the reason (logged once, and in
    /// `wsrep_lockstep_cache_failure`). The caller then fails the event
    /// and the node leaves the cluster: an applier at once
    /// (`fail_session`), a client's thread through the applier
    /// (`failed_cache_from_client`).
    pub(crate) fn cached_first<'a>(
        &'a self,
        g: StateGuard<'a>,
        seqno: i64,
    ) -> Result<StateGuard<'a>, String> {
        let written = g.cached(seqno);
        if written.done() {
            return Ok(g);
        }
        drop(g);
        match written.wait(ACK_WAIT) {
            Ok(()) => Ok(self.lock()),
            Err(why) => {
                let mut g = self.lock();
                if g.status.cache_failure.is_empty() {
                    error!(
                        "{why}: seqno {seqno} and every later event are refused, and this node \
                         leaves the cluster (every commit it acknowledged is in the cache). Fix \
                         the disk under gcache.dir, then restart the server"
                    );
                    g.status.cache_failure = why.clone();
                }
                Err(format!("the writeset cache failed ({why})"))
            }
        }
    }

    /// A client's commit or statement found the cache failed: it fails
    /// (nothing is acknowledged), and an applier takes the node out of
    /// the cluster (`Event::CacheFailed`).
    fn failed_cache_from_client(&self, why: String) -> Status {
        let mut g = self.lock();
        if g.conn == Conn::Open {
            g.enqueue(crate::event::Event::CacheFailed(why));
        }
        drop(g);
        self.notify();
        status::NODE_FAIL
    }

    pub fn commit_order_enter(&self, trx_id: u64, h: &Handle, meta: &TrxMeta) -> Status {
        let seqno = meta.gtid.seqno;
        let g = self.lock();
        if let Handle::Remote(r) = h {
            if r.seqno != seqno {
                return self.inconsistent(
                    g,
                    &format!(
                        "commit order for seqno {seqno} with the handle of {}",
                        r.seqno
                    ),
                );
            }
            let t0 = Instant::now();
            let mut g = self.wait_for(g, CommitWait::RemoteCommitTurn(seqno));
            if g.conn == Conn::Closed {
                return status::CONN_FAIL;
            }
            g.stages.observe(Stage::CommitOrderWait, t0.elapsed());
            g.gates.enter_commit(seqno);
            return status::OK;
        }
        // A local event: the engine commits it next (a remote one waited
        // before its apply, `apply_remote`).
        let mut g = match self.cached_first(g, seqno) {
            Ok(g) => g,
            Err(why) => return self.failed_cache_from_client(why),
        };
        let depends_on = g.trxs.depends_on(trx_id).unwrap_or(seqno - 1);
        if g.bypass.holds_back(seqno, g.gates.commit_level()) {
            // Its marker on disk before anything passes the large
            // writeset, written under no lock (issue 53); the wait below
            // looks at everything again.
            if let Some(job) = g.bypass.prepare() {
                drop(g);
                let wish = job.wish();
                let written = crate::bypass::run_marker_job(job, &crate::storage::Disk);
                g = self.lock();
                g.bypass.marker_done(wish, written);
                drop(g);
                // Those held back too may pass now.
                self.notify();
                g = self.lock();
            }
        }
        let t0 = Instant::now();
        // Held back by a large writeset, this transaction may pass it as
        // soon as its own dependencies commit (ADR 0011).
        let mut g = self.wait_for(
            g,
            CommitWait::LocalCommitTurn {
                trx: trx_id,
                seqno,
                depends_on,
            },
        );
        let in_order = g.gates.commit_level() >= seqno - 1;
        if g.conn == Conn::Closed && !g.local_commit_turn(seqno, depends_on) {
            // The session ended (shutdown, a fatal error): the seqnos
            // before this one will not commit here.
            return status::CONN_FAIL;
        }
        // A BF abort means replay for a final writeset; an open streaming
        // fragment fails instead (contract §2.12, as Galera does).
        match g.trxs.enter_commit(trx_id) {
            Ok(()) => {}
            Err(NoCommit::Missing) => return status::TRX_MISSING,
            Err(NoCommit::Replay) => return status::BF_ABORT,
            Err(NoCommit::Fail) => return status::TRX_FAIL,
        }
        if !in_order {
            // Ahead of a large writeset still being applied (ADR 0011).
            g.bypass.opened(seqno);
        }
        g.stages.observe(Stage::CommitOrderWait, t0.elapsed());
        g.gates.enter_commit(seqno);
        status::OK
    }

    pub fn commit_order_leave(
        &self,
        trx_id: u64,
        h: &Handle,
        meta: &TrxMeta,
        err: &[u8],
    ) -> Status {
        let seqno = meta.gtid.seqno;
        let mut g = self.lock();
        if !err.is_empty() {
            info!(
                "seqno {seqno} left commit order with an error: {}",
                String::from_utf8_lossy(err)
            );
        }
        // An applier failed: the group decides whether this node is
        // consistent (a failure here fails apply_cb, and the node leaves).
        // The vote is cast before the seqno counts as finished.
        let vote = (!err.is_empty() && !matches!(h, Handle::Local(_)))
            .then(|| g.vote_failure(seqno, err))
            .flatten();
        if let Err(e) = g.leave_commit(seqno) {
            return self.inconsistent(g, &e.to_string());
        }
        if let Handle::Local(_) = h {
            g.trxs.left_commit(trx_id);
        }
        self.notify_gates(g);
        match vote {
            Some(v) => self.await_vote(v),
            None => status::OK,
        }
    }

    /// End of a local transaction, or of one fragment of a streaming
    /// transaction: its seqno (if any) is finished, passing commit order
    /// now if a rollback never went through it.
    ///
    /// Returns the status and whether the object lives on: a streaming
    /// fragment that committed keeps it for the next fragment (contract
    /// §2.14). An abort that arrived while the fragment was inside commit
    /// order is reported now, with `BF_ABORT` (Galera's deferred abort).
    pub fn release(&self, trx_id: u64) -> (Status, bool) {
        let mut g = self.lock();
        let Some(rec) = g.trxs.release(trx_id) else {
            return (status::OK, false);
        };
        let fragment_done = rec.open_fragment && rec.commit_left && rec.seqno >= 0;
        if rec.seqno >= 0 {
            if !rec.commit_left {
                g = self.wait_for(g, CommitWait::ReleaseTurn(rec.seqno));
                if g.gates.commit_level() < rec.seqno - 1 {
                    // The session ended: the gates no longer move.
                    return (status::OK, false);
                }
                if let Err(e) = g.leave_commit(rec.seqno) {
                    return (self.inconsistent(g, &e.to_string()), false);
                }
            }
            if let Err(e) = g.leave_apply(rec.seqno) {
                return (self.inconsistent(g, &e.to_string()), false);
            }
            if matches!(rec.state, TrxState::Committing | TrxState::Replaying)
                && rec.commit_left
                && !rec.open_fragment
            {
                g.counters.local_commits += 1;
            }
        }
        let outcome = if !fragment_done {
            (status::OK, false)
        } else if rec.state == TrxState::MustAbort {
            (status::BF_ABORT, false)
        } else {
            g.trxs.next_fragment(trx_id);
            (status::OK, true)
        };
        self.notify_gates(g);
        outcome
    }

    /// Contract §2.17: broadcasts the rollback of this node's streaming
    /// transaction `trx_id` without waiting for it. It is ordered like any
    /// writeset and applied on every node, this one included, where the
    /// server's streaming applier removes the fragments.
    pub fn rollback(&self, trx_id: u64) -> Status {
        let mut g = self.lock();
        g.trxs.rolled_back(trx_id);
        if !g.accepts_writes() {
            // The server keeps the id and sends it again at the next
            // certification or sync.
            return status::CONN_FAIL;
        }
        let ws = Writeset {
            source: g.member_id.data,
            trx_id,
            conn_id: u64::MAX,
            last_seen: g.last_committed(),
            flags: flags::ROLLBACK | flags::PA_UNSAFE,
            keys: Vec::new(),
            data: Vec::new().into(),
        };
        let Some(id) = g.propose(Action::Writeset(ws), false) else {
            return status::CONN_FAIL;
        };
        g.proposals.detach(id);
        info!("streaming transaction {trx_id}: rollback sent");
        self.notify_gates(g);
        status::OK
    }

    /// Contract §2.16: decide and mark without blocking on the victim.
    pub fn abort_certification(
        &self,
        bf_seqno: i64,
        victim: u64,
        victim_seqno: &mut i64,
    ) -> Status {
        let mut g = self.lock();
        let abort = g.trxs.bf_abort(victim, bf_seqno);
        *victim_seqno = abort.seqno;
        let rc = if abort.allowed {
            status::OK
        } else {
            status::NOT_ALLOWED
        };
        self.notify_gates(g);
        // The victim may wait for its commit turn: it must see the abort.
        self.shared.notify_all_turns();
        rc
    }

    /// Re-applies a BF-aborted local transaction from its own writeset, on
    /// the client's thread (contract §2.15).
    pub fn replay_trx(&self, handle: &WsHandle, trx: &LocalTrx, ctx: ThreadCtx) -> Status {
        let trx_id = handle.trx_id;
        let mut g = self.lock();
        let (seqno, depends_on) = match g.trxs.start_replay(trx_id) {
            Ok(at) => at,
            Err(NoReplay::CertFailed) => return status::TRX_FAIL,
            Err(NoReplay::NotWaiting) => {
                error!("replay_trx for trx {trx_id}, which is not waiting for a replay");
                return status::TRX_FAIL;
            }
        };
        g = self.wait_for(g, CommitWait::ReplayTurn(depends_on));
        if g.last_committed() < depends_on {
            return status::CONN_FAIL;
        }
        let meta = TrxMeta {
            gtid: Gtid {
                uuid: g.history,
                seqno,
            },
            stid: Stid {
                node: g.member_id,
                trx: trx_id,
                conn: trx.conn_id,
            },
            depends_on,
        };
        drop(g);
        let apply_flags = trx.flags & flags::MASK;
        let data = trx.replicated_data();
        let (ok, _) = self
            .server
            .apply(self.lock(), ctx, handle, apply_flags, &data, &meta);
        if !ok {
            let g = self.lock();
            return self.inconsistent(g, &format!("replay of seqno {seqno} failed to apply"));
        }
        self.lock().counters.local_replays += 1;
        status::OK
    }

    pub fn to_execute_start(
        &self,
        conn_id: u64,
        keys: Vec<Key>,
        action: Vec<u8>,
        wsflags: u32,
        meta: &mut TrxMeta,
    ) -> Status {
        *meta = TrxMeta::undefined();
        let start_end = flags::TRX_START | flags::TRX_END;
        if wsflags & start_end != start_end || wsflags & flags::ROLLBACK != 0 {
            return status::CONN_FAIL;
        }
        let mut toi = LocalTrx {
            key_bytes: keys.iter().map(Key::part_bytes).sum(),
            key_count: keys.len(),
            keys: keys
                .into_iter()
                .map(|mut k| {
                    k.kind = KeyType::Exclusive;
                    k
                })
                .collect(),
            data: action,
            flags: wsflags | flags::ISOLATION,
            conn_id,
            ..LocalTrx::default()
        };
        for k in &toi.keys {
            toi.counted_keys.add(k);
        }
        let g = self.flow_control_wait(self.lock(), None);
        let g = self.wait_unpaused(g);
        if !g.accepts_writes() {
            return status::CONN_FAIL;
        }
        if toi.counted_size() as u64 > self.max_ws_size() {
            return status::SIZE_EXCEEDED;
        }
        let ws = Writeset {
            source: g.member_id.data,
            trx_id: u64::MAX,
            conn_id,
            last_seen: g.last_committed(),
            flags: toi.flags,
            keys: toi.keys,
            data: toi.data.into(),
        };
        let size = ws.size() as i64;
        let (mut g, ordered) = self.order(g, ws, None);
        let Some(ordered) = ordered else {
            return status::CONN_FAIL;
        };
        let seqno = ordered.seqno;
        g.counters.replicated += 1;
        g.counters.replicated_bytes += size;
        meta.gtid = Gtid {
            uuid: g.history,
            seqno,
        };
        meta.depends_on = seqno - 1;
        meta.stid = Stid {
            node: g.member_id,
            trx: u64::MAX,
            conn: conn_id,
        };
        // The statement changes the engine next: its event first.
        let g = match self.cached_first(g, seqno) {
            Ok(g) => g,
            Err(why) => return self.failed_cache_from_client(why),
        };
        // Total order isolation: everything before it has finished, and it
        // holds commit order until to_execute_end.
        let mut g = self.wait_for(g, CommitWait::IsolatedTurn(seqno));
        if !g.isolated_turn(seqno) {
            // The session ended before the statement's turn came.
            return status::CONN_FAIL;
        }
        g.gates.enter_apply(seqno);
        g.gates.enter_commit(seqno);
        g.trxs.start_toi(conn_id, seqno);
        if ordered.passed {
            status::OK
        } else {
            status::TRX_FAIL
        }
    }

    pub fn to_execute_end(&self, conn_id: u64, err: &[u8]) -> Status {
        let mut g = self.lock();
        let Some(seqno) = g.trxs.end_toi(conn_id) else {
            return status::CONN_FAIL;
        };
        if !err.is_empty() {
            info!(
                "TOI seqno {seqno} failed locally: {}",
                String::from_utf8_lossy(err)
            );
        }
        // Cast before the seqno counts as finished (`Inner::vote_failure`).
        let vote = (!err.is_empty())
            .then(|| g.vote_failure(seqno, err))
            .flatten();
        let passed = g.leave_commit(seqno).and_then(|_| g.leave_apply(seqno));
        if let Err(e) = passed {
            return self.inconsistent(g, &e.to_string());
        }
        self.notify_gates(g);
        if vote.is_some_and(|v| self.await_vote(v) != status::OK) {
            // The statement failed here and nowhere else: this node leaves
            // (on an applier thread, which delivers the final view).
            let mut g = self.lock();
            let why = format!(
                "Inconsistency detected: Inconsistent by consensus on {}:{seqno}",
                g.history
            );
            g.enqueue(crate::event::Event::Inconsistent(why));
            drop(g);
            self.notify();
            // Galera returns OK here too and leaves asynchronously; an
            // error would only add a server warning to the same story.
        }
        status::OK
    }

    /// The node lost track of its own order: stop serving loudly rather
    /// than risk diverging.
    pub fn inconsistent(&self, mut g: StateGuard<'_>, why: &str) -> Status {
        error!("node consistency compromised: {why}; refusing further writes, restart required");
        g.local.inconsistent();
        let marker = g.diverged.set();
        drop(g);
        crate::diverged::write(marker);
        self.notify();
        status::NODE_FAIL
    }

    /// An applier left `apply_cb`; wakes a final view waiting for it.
    fn done_applying(&self) {
        let mut g = self.lock();
        let ending = g.appliers.end_apply();
        drop(g);
        if ending {
            self.notify();
        }
    }

    /// Applies a remote writeset on an applier thread: once its
    /// dependencies have finished, through `apply_cb`; the server passes
    /// commit order itself; then the seqno is finished.
    pub(crate) fn apply_remote(&self, ctx: ThreadCtx, r: RemoteWs) -> Option<Status> {
        let seqno = r.seqno;
        let toi = r.ws.flags & flags::ISOLATION != 0;
        let (passed, depends_on) = match r.outcome {
            // TOI runs alone; the writesets of a streaming transaction run
            // one after the other, because the server applies them all
            // through the same streaming applier (Galera makes each fragment
            // depend on the previous one; serial is the simple safe form).
            CertOutcome::Pass { .. } if toi || is_streaming(r.ws.flags) => (true, seqno - 1),
            CertOutcome::Pass { depends_on } => (true, depends_on),
            CertOutcome::Fail { .. } => (false, seqno - 1),
        };
        // A big writeset's data comes in the parts the log ordered:
        // joined here, on this applier's thread (not the group's), before
        // it takes the lock.
        let data = if passed {
            crate::os::contiguous(&r.ws.data)
        } else {
            Cow::Borrowed(&[][..])
        };
        // Applying changes the engine (a TOI at once, a writeset at its
        // commit): its event first.
        let mut g = match self.cached_first(self.lock(), seqno) {
            Ok(g) => g,
            Err(why) => return Some(self.fail_session(ctx, &why)),
        };
        g.gates.arrive_apply(seqno);
        let (mut g, _) = self.wait_on(Wake::Turn(depends_on), g, Until::Progress(IN_ORDER), |s| {
            (s.last_committed() >= depends_on && s.may_commit(seqno)) || s.conn == Conn::Closed
        });
        if g.conn == Conn::Closed {
            return Some(status::CONN_FAIL);
        }
        g.gates.enter_apply(seqno);
        // A TOI that failed certification is never delivered (contract
        // P16): its seqno just passes the gates.
        let deliver = passed || !toi;
        if deliver {
            g.appliers.start_apply();
        }
        let meta = TrxMeta {
            gtid: Gtid {
                uuid: g.history,
                seqno,
            },
            stid: Stid {
                node: wsrep_abi::Uuid::from_bytes(r.ws.source),
                trx: r.ws.trx_id,
                conn: r.ws.conn_id,
            },
            depends_on,
        };
        let mut exit_loop = false;
        let mut applied_in = None;
        let large = (r.size >= LARGE_WRITESET).then(|| {
            info!(
                "applying large writeset seqno {seqno}: {:.0} MiB",
                mib(r.size)
            );
            Instant::now()
        });
        if !deliver {
            drop(g);
        } else {
            let wsflags = (r.ws.flags & flags::MASK) | if passed { 0 } else { flags::ROLLBACK };
            let t0 = Instant::now();
            let (ok, exit) =
                self.server
                    .apply_remote(g, ctx, r.ws.trx_id, seqno, wsflags, &data, &meta);
            applied_in = Some(t0.elapsed());
            if !ok {
                self.done_applying();
                let mut g = self.lock();
                // Its data is no longer the group's at any seqno.
                let marker = g.diverged.set();
                let lost_vote = g.votes.lost(seqno);
                let why = if lost_vote {
                    format!(
                        "Inconsistency detected: Inconsistent by consensus on {}:{seqno}",
                        g.history
                    )
                } else {
                    format!("failed to apply writeset {seqno}: node consistency compromised")
                };
                drop(g);
                crate::diverged::write(marker);
                return Some(self.fail_session(ctx, &why));
            }
            exit_loop = exit;
        }
        let mut g = self.lock();
        if let Some(took) = applied_in {
            // Out of `apply_cb` (`done_applying`, in this lock section).
            if g.appliers.end_apply() {
                // A final view waits for the appliers: told before this
                // thread may wait for its commit turn below.
                drop(g);
                self.notify();
                g = self.lock();
            }
            g.stages.observe(Stage::Apply, took);
        }
        if !g.gates.commit().has_passed(seqno) {
            let (ng, _) = self.wait_on(Wake::Turn(seqno - 1), g, Until::Progress(IN_ORDER), |s| {
                s.gates.commit_level() >= seqno - 1 || s.conn == Conn::Closed
            });
            g = ng;
            if g.gates.commit_level() < seqno - 1 {
                return Some(status::CONN_FAIL);
            }
            g.gates.enter_commit(seqno);
            if let Err(e) = g.leave_commit(seqno) {
                return Some(self.inconsistent(g, &e.to_string()));
            }
        }
        if let Err(e) = g.leave_apply(seqno) {
            return Some(self.inconsistent(g, &e.to_string()));
        }
        g.counters.received += 1;
        g.counters.received_bytes += r.size as i64;
        if let Some(t0) = large {
            info!(
                "large writeset seqno {seqno} applied and committed in {:.1} s",
                t0.elapsed().as_secs_f64()
            );
        }
        let last_applier = g.appliers.is_last();
        self.notify_gates(g);
        (exit_loop && !last_applier).then_some(status::OK)
    }
}
