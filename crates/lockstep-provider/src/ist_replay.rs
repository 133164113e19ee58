//! Incremental state transfer from the group log.
//!
//! A node that connects with a known position (`grastate.dat` after a
//! clean stop, or `wsrep_start_position` from `--wsrep-recover` after a
//! crash) joins as a new Raft member and replays the leader's log, which
//! keeps the newest half of `gcache.size` (`lockstep_core::group::node`,
//! `maybe_compact`). Everything that log orders before the view that adds
//! this node is history the node was not a member for; when the log
//! reaches back to the node's own position, those events are exactly the
//! ones it lacks. [`IstBuffer`] collects them during the replay, so the
//! node can apply them instead of taking a full SST.
//!
//! Bound: the events are the log's own (writesets shared by `Arc`), and
//! the log is bounded by `gcache.size`; the buffer also gives up (falls
//! back to SST) past `limit` bytes, so a bug elsewhere cannot make it grow
//! without end.

use crate::event::Event;
use crate::remote_ws::RemoteWs;
use crate::server::View;
use lockstep_core::writeset_cache::CachedKind;
use std::collections::VecDeque;
use wsrep_abi::{Gtid, Uuid};

/// Rough bytes of one buffered writeset: payload, keys, and bookkeeping.
fn writeset_bytes(ws: &RemoteWs) -> usize {
    let keys: usize = ws.ws.keys.iter().map(|k| k.part_bytes() + 16).sum();
    ws.ws.data.len() + keys + 64
}

/// A cached view as the server is shown it during IST: primary, this
/// node not in it (`my_idx` -1).
pub fn past_view(
    history: Uuid,
    seqno: i64,
    who: &lockstep_core::writeset_cache::CachedMembers,
    proto_ver: i32,
) -> View {
    View {
        state_id: Gtid {
            uuid: history,
            seqno,
        },
        conf_id: who.conf_id,
        status: wsrep_abi::view_status::PRIMARY,
        capabilities: crate::identity::CAPABILITIES,
        my_idx: -1,
        proto_ver,
        members: who
            .members
            .iter()
            .map(|m| crate::server::Member {
                id: Uuid::from_bytes(m.uuid),
                name: m.name.clone(),
                incoming: m.incoming.clone(),
            })
            .collect(),
    }
}

/// What the replay collected, or why it cannot serve as IST.
pub struct IstBuffer {
    /// The position this node had when the session started.
    have: Gtid,
    /// History of the views replayed so far.
    history: Option<Uuid>,
    /// The next seqno the buffer needs to stay gap-free.
    next: i64,
    events: VecDeque<Event>,
    writesets: usize,
    bytes: usize,
    limit: usize,
    /// Why the replay cannot serve as IST (first reason only).
    broken: Option<String>,
}

impl IstBuffer {
    /// An empty buffer for a node at `have`, giving up past `limit` bytes.
    pub fn new(have: Gtid, limit: usize) -> IstBuffer {
        let broken = if have.uuid.is_nil() || have.seqno < 0 {
            Some(format!(
                "this node has no known position ({}:{})",
                have.uuid, have.seqno
            ))
        } else {
            None
        };
        IstBuffer {
            have,
            history: None,
            next: have.seqno + 1,
            events: VecDeque::new(),
            writesets: 0,
            bytes: 0,
            limit,
            broken,
        }
    }

    fn give_up(&mut self, why: String) {
        if self.broken.is_none() {
            self.broken = Some(why);
        }
        self.events.clear();
        self.bytes = 0;
        self.writesets = 0;
    }

    /// Whether the buffer must keep the event at `seqno` (false: already
    /// in this node's state, or the buffer gave up).
    fn take_place(&mut self, seqno: i64) -> bool {
        if self.broken.is_some() || seqno <= self.have.seqno {
            return false;
        }
        if self.history != Some(self.have.uuid) {
            let seen = self.history.map_or("none".into(), |h| h.to_string());
            self.give_up(format!(
                "the group log belongs to history {seen}, this node to {}",
                self.have.uuid
            ));
            return false;
        }
        if seqno != self.next {
            self.give_up(format!(
                "the group log starts at seqno {seqno}, after this node's {} \
                 (gcache.size on the members is too small for this gap)",
                self.have.seqno
            ));
            return false;
        }
        self.next += 1;
        true
    }

    /// The events come from a donor's cache of `history` rather than from
    /// a log replay that starts with a view.
    pub fn start_history(&mut self, history: Uuid) {
        self.history = Some(history);
    }

    /// A view replayed before the one that adds this node; `view`, the
    /// server's form of it, when its members are known.
    pub fn view(&mut self, history: Uuid, seqno: i64, members: u32, view: Option<View>) {
        self.history = Some(history);
        if self.take_place(seqno) {
            self.events
                .push_back(Event::PastView(seqno, members, view.map(Box::new)));
        }
    }

    /// A writeset replayed before the view that adds this node.
    pub fn writeset(&mut self, ws: RemoteWs) {
        if !self.take_place(ws.seqno) {
            return;
        }
        self.bytes += writeset_bytes(&ws);
        self.writesets += 1;
        self.events.push_back(Event::Apply(ws));
        if self.bytes > self.limit {
            let limit = self.limit;
            self.give_up(format!(
                "the missing writesets exceed {limit} bytes (gcache.size)"
            ));
        }
    }

    /// An event read back from a writeset cache (a donor's stream, or this
    /// node's own at a re-formation): its views the server sees with
    /// their members when the record kept them.
    pub fn cached(&mut self, seqno: i64, kind: CachedKind, proto_ver: i32) {
        let history = self.have.uuid;
        match kind {
            CachedKind::View { members, who } => {
                let view = who.map(|w| past_view(history, seqno, &w, proto_ver));
                self.view(history, seqno, members, view)
            }
            CachedKind::Writeset { ws, outcome } => {
                self.writeset(RemoteWs::new(seqno, ws, outcome))
            }
            CachedKind::End => {}
        }
    }

    /// Whether the buffer holds every event between this node's position
    /// and the view at `join` that added it, on the same history.
    pub fn covers(&self, join: Gtid) -> Result<(), String> {
        if let Some(why) = &self.broken {
            return Err(why.clone());
        }
        if join.uuid != self.have.uuid {
            return Err(format!(
                "the group's history is {}, this node's {}",
                join.uuid, self.have.uuid
            ));
        }
        if join.seqno <= self.have.seqno {
            return Err(format!(
                "this node is ahead of the group: it has seqno {}, the group is at {}",
                self.have.seqno, join.seqno
            ));
        }
        if self.next != join.seqno {
            return Err(format!(
                "the replay reached seqno {} only, the join view is {}",
                self.next - 1,
                join.seqno
            ));
        }
        Ok(())
    }

    /// The byte bound given at creation.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Writesets held (for the log line).
    pub fn writesets(&self) -> usize {
        self.writesets
    }

    /// The events after `seqno`, in order, if the buffer has all of them
    /// up to its end; empties the buffer either way.
    pub fn take_after(&mut self, seqno: i64) -> Result<Vec<Event>, String> {
        self.covers(Gtid {
            uuid: self.have.uuid,
            seqno: self.next,
        })?;
        if seqno < self.have.seqno {
            return Err(format!(
                "the state received is at seqno {seqno}, before this node's {} \
                 where the incremental transfer starts",
                self.have.seqno
            ));
        }
        let events: Vec<Event> = std::mem::take(&mut self.events)
            .into_iter()
            .filter(|e| e.seqno().is_some_and(|s| s > seqno))
            .collect();
        self.clear();
        Ok(events)
    }

    /// Drops what is held (an SST made it unnecessary).
    pub fn clear(&mut self) {
        self.events.clear();
        self.bytes = 0;
        self.writesets = 0;
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use lockstep_core::certification::CertOutcome;
    use lockstep_core::group::Writeset;
    use std::sync::Arc;

    const H: Uuid = Uuid::from_bytes([7; 16]);

    /// A passed writeset at `seqno` with `data` bytes (also used by the
    /// writeset cache's tests).
    pub(crate) fn ws(seqno: i64, data: usize) -> RemoteWs {
        let ws = Arc::new(Writeset {
            source: [1; 16],
            trx_id: seqno as u64,
            conn_id: 1,
            last_seen: seqno - 1,
            flags: 3,
            keys: vec![],
            data: vec![seqno as u8; data].into(),
        });
        let outcome = CertOutcome::Pass {
            depends_on: seqno - 1,
        };
        RemoteWs::new(seqno, ws, outcome)
    }

    /// [`ws`] as a writeset cache record's kind (the cache's, the
    /// writer's and the Galera export's tests).
    pub(crate) fn ws_kind(seqno: i64, data: usize) -> lockstep_core::writeset_cache::CachedKind {
        ws(seqno, data).cached_kind()
    }

    fn at(seqno: i64) -> Gtid {
        Gtid { uuid: H, seqno }
    }

    fn seqnos(events: &[Event]) -> Vec<i64> {
        events.iter().filter_map(Event::seqno).collect()
    }

    #[test]
    fn a_replay_from_before_the_position_serves_every_missing_event() {
        let mut b = IstBuffer::new(at(5), 1 << 20);
        b.view(H, 1, 0, None);
        for s in 2..=7 {
            b.writeset(ws(s, 10));
        }
        b.view(H, 8, 0, None);
        b.writeset(ws(9, 10));
        assert_eq!(b.covers(at(10)), Ok(()));
        assert_eq!(b.writesets(), 3);
        let events = b.take_after(5).expect("covered");
        assert_eq!(seqnos(&events), vec![6, 7, 8, 9]);
        assert!(matches!(events[2], Event::PastView(8, 0, None)));
    }

    #[test]
    fn a_log_that_starts_after_the_position_is_a_gap() {
        let mut b = IstBuffer::new(at(5), 1 << 20);
        // Restored from a snapshot whose last view is 3 and last seqno 8.
        b.view(H, 3, 0, None);
        b.writeset(ws(9, 10));
        let err = b.covers(at(10)).expect_err("gap");
        assert!(err.contains("starts at seqno 9"), "{err}");
        assert!(b.take_after(5).is_err());
    }

    #[test]
    fn another_history_or_no_position_means_sst() {
        let mut b = IstBuffer::new(at(5), 1 << 20);
        b.view(Uuid::from_bytes([9; 16]), 1, 0, None);
        b.writeset(ws(6, 1));
        assert!(b.covers(at(7)).unwrap_err().contains("history"));

        let b = IstBuffer::new(Gtid { uuid: H, seqno: -1 }, 1 << 20);
        assert!(b.covers(at(7)).unwrap_err().contains("no known position"));
        let b = IstBuffer::new(at(5), 1 << 20);
        let err = b.covers(Gtid {
            uuid: Uuid::from_bytes([9; 16]),
            seqno: 7,
        });
        assert!(err.unwrap_err().contains("history"));
    }

    #[test]
    fn a_node_ahead_of_the_group_is_told_so() {
        let mut b = IstBuffer::new(at(20), 1 << 20);
        b.view(H, 1, 0, None);
        let err = b.covers(at(15)).unwrap_err();
        assert!(err.contains("ahead of the group"), "{err}");
    }

    #[test]
    fn the_buffer_gives_up_past_its_limit_and_frees_what_it_held() {
        let mut b = IstBuffer::new(at(0), 1000);
        b.view(H, 1, 0, None);
        for s in 2..=20 {
            b.writeset(ws(s, 100));
        }
        assert!(b.covers(at(21)).unwrap_err().contains("exceed 1000 bytes"));
        assert_eq!(b.writesets(), 0);
        assert!(b.events.is_empty());
    }

    #[test]
    fn a_received_state_inside_the_window_skips_what_it_contains() {
        let mut b = IstBuffer::new(at(5), 1 << 20);
        b.view(H, 1, 0, None);
        for s in 6..=9 {
            b.writeset(ws(s, 1));
        }
        let events = b.take_after(7).expect("inside the window");
        assert_eq!(seqnos(&events), vec![8, 9]);
        let mut b = IstBuffer::new(at(5), 1 << 20);
        b.view(H, 1, 0, None);
        b.writeset(ws(6, 1));
        let err = b.take_after(4).err().expect("before the window");
        assert!(err.contains("before this node's 5"), "{err}");
    }
}
