//! What travels through the total order: batches of proposals, each an
//! [`Action`] from one member, and the member descriptions carried by
//! membership changes. The encoding is versioned and bounds-checked; a
//! log entry that does not decode is a fatal inconsistency for the node
//! (every node decodes the same bytes), never a panic.

use crate::certification::{Key, KeyType};
use crate::wire::codec::{DecodeError, Reader, Writer};
use bytes::Bytes;

use super::payload::Payload;

/// Version byte at the start of every batch and member description.
/// 2: members carry a quorum weight (`Action::Weight`, snapshots).
/// 3: flow control (`Action::FlowControl`) and fragments of big actions
/// (`Action::Fragment`; snapshots carry the partly received ones).
pub const ACTION_VERSION: u8 = 3;

/// The SHA-256 digest of a certificate (DER), which binds a member's
/// Raft id to the certificate it presents (`Action::Bind`).
pub type CertFingerprint = [u8; 32];

/// The first cluster version whose members are bound to their
/// certificates (`Action::Bind`, the binding in a joiner's configuration
/// change, the snapshot's binding table).
pub const BINDING_VERSION: u32 = 11;

/// The first cluster version whose members can say they keep no state
/// to donate (`Action::Stateless`, the snapshot's member flag).
pub const STATELESS_VERSION: u32 = 12;

/// A cluster member as the group knows it: what goes into the wsrep view
/// (`uuid`, `name`, `incoming`) and how peers reach it (`peer_addr`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberInfo {
    /// Raft node id, unique per process start (never reused).
    pub raft_id: u64,
    /// wsrep member id, new on every connect.
    pub uuid: [u8; 16],
    /// `wsrep_node_name`.
    pub name: String,
    /// `wsrep_node_incoming_address` (clients' address), may be empty.
    pub incoming: String,
    /// `host:port` where the group channel listens.
    pub peer_addr: String,
    /// `gmcast.segment`: the member's site (0-255); a joiner's donor is
    /// chosen in its own segment when one can serve.
    pub segment: u8,
}

impl MemberInfo {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u8(ACTION_VERSION);
        self.write(&mut w);
        w.finish()
    }

    pub fn decode(bytes: &[u8]) -> Result<MemberInfo, DecodeError> {
        let mut r = Reader::new(bytes);
        check_version(&mut r)?;
        let m = MemberInfo::read(&mut r)?;
        r.end()?;
        Ok(m)
    }

    /// The description a joiner's configuration change carries, with the
    /// fingerprint of the certificate it joined with (only once the
    /// cluster runs at [`BINDING_VERSION`]): the description as
    /// [`MemberInfo::encode`], then u8 1 and the 32-byte fingerprint.
    pub fn encode_admission(&self, cert: Option<&CertFingerprint>) -> Vec<u8> {
        let mut w = Writer::new();
        w.u8(ACTION_VERSION);
        self.write(&mut w);
        if let Some(fp) = cert {
            w.u8(1).digest(fp);
        }
        w.finish()
    }

    /// Reads [`MemberInfo::encode_admission`] bytes (or plain
    /// [`MemberInfo::encode`] ones, which bind nothing).
    pub fn decode_admission(
        bytes: &[u8],
    ) -> Result<(MemberInfo, Option<CertFingerprint>), DecodeError> {
        let mut r = Reader::new(bytes);
        check_version(&mut r)?;
        let m = MemberInfo::read(&mut r)?;
        let cert = if r.remaining() > 0 {
            match r.u8("admission.binding")? {
                1 => Some(r.digest("admission.fingerprint")?),
                other => {
                    return Err(DecodeError::Invalid {
                        field: "admission.binding",
                        value: u64::from(other),
                    })
                }
            }
        } else {
            None
        };
        r.end()?;
        Ok((m, cert))
    }

    fn write(&self, w: &mut Writer) {
        w.u64(self.raft_id).uuid(&self.uuid);
        w.str(&self.name).str(&self.incoming).str(&self.peer_addr);
        w.u8(self.segment);
    }

    fn read(r: &mut Reader<'_>) -> Result<MemberInfo, DecodeError> {
        Ok(MemberInfo {
            raft_id: r.u64("member.raft_id")?,
            uuid: r.uuid("member.uuid")?,
            name: r.string("member.name")?,
            incoming: r.string("member.incoming")?,
            peer_addr: r.string("member.peer_addr")?,
            segment: r.u8("member.segment")?,
        })
    }
}

/// A replicated transaction or TOI action (flag `ISOLATION`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Writeset {
    /// Originating member's wsrep id.
    pub source: [u8; 16],
    pub trx_id: u64,
    pub conn_id: u64,
    /// The originator's `last_committed` when it certified.
    pub last_seen: i64,
    /// wsrep writeset flags.
    pub flags: u32,
    pub keys: Vec<Key>,
    /// Concatenated data buffers (binlog events).
    pub data: Payload,
}

impl Writeset {
    /// Bytes this writeset accounts for (keys and data).
    pub fn size(&self) -> usize {
        self.data.len() + self.keys.iter().map(Key::part_bytes).sum::<usize>()
    }
}

/// One ordered action. Only writesets (and views, which are Raft
/// membership changes, not actions) consume wsrep seqnos.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// First entry of a cluster's log: the history and where it continues.
    Genesis {
        history: [u8; 16],
        /// Seqno before the first view (0 for a new history).
        last_seqno: i64,
        founder: MemberInfo,
    },
    Writeset(Writeset),
    /// A member's `last_committed`, so the index can be purged below the
    /// cluster-wide committed cut at the same log position everywhere, and
    /// the Raft index it has applied, so logs can be compacted below what
    /// every member has.
    Committed {
        raft_id: u64,
        seqno: i64,
        applied: u64,
    },
    /// A joiner asks for a state transfer (`request` from `sst_request_cb`).
    StateRequest {
        joiner: u64,
        /// `wsrep_sst_donor`: comma-separated names; trailing comma = any.
        donors: String,
        request: Vec<u8>,
        /// IST offer: the joiner has the group's history up to this seqno
        /// and every event after it from the log it replayed, so the donor
        /// only has to release the server's SST script (bypass) instead of
        /// copying data. `None`: a full SST.
        ist_after: Option<i64>,
        /// With `ist_after`: the joiner's log replay does not reach back to
        /// its position, so the donor must send the events after
        /// `ist_after` from its writeset cache, or do a full SST if its
        /// cache does not hold them all.
        from_cache: Option<CacheIst>,
    },
    /// The donor finished (`sst_sent`), `rcode` 0 or a negative errno.
    StateTransferred {
        donor: u64,
        joiner: u64,
        seqno: i64,
        rcode: i32,
    },
    /// A joiner installed its state at `seqno`.
    Joined {
        raft_id: u64,
        seqno: i64,
    },
    /// A member caught up with the group.
    Synced {
        raft_id: u64,
    },
    /// The member is an arbitrator (`lockstep arbitrator`, Galera's
    /// `garbd`): it votes and holds the log, but has no database, so it is
    /// never a donor and takes no part in consistency votes. Proposed by
    /// the arbitrator itself instead of a state request.
    Arbitrator {
        raft_id: u64,
    },
    /// The member runs with `gcs.stateless` (Galera 26.4.23): it holds a
    /// database and applies everything, but is never chosen as a donor
    /// of a state transfer, even when a joiner names it in
    /// `wsrep_sst_donor`. Proposed by the member itself once the cluster
    /// runs at [`STATELESS_VERSION`].
    Stateless {
        raft_id: u64,
    },
    /// The newest group protocol version a member speaks, proposed by the
    /// member itself once it is one (rolling upgrades, docs/formats.md).
    Supports {
        raft_id: u64,
        max_version: u32,
    },
    /// The leader saw every member support `version`: from this entry on
    /// the cluster runs at it (never lower than before).
    ClusterVersion {
        version: u32,
    },
    /// Causal-read fence: its position tells the waiter which seqnos
    /// were ordered before the read.
    Barrier {
        raft_id: u64,
        id: u64,
    },
    /// A member that was cut off from the majority is back: a new primary
    /// view (same members) marks where it resumes.
    Remerge {
        raft_id: u64,
    },
    /// A member's outcome for `seqno` in a consistency vote: 0 applied,
    /// otherwise a digest of the error it got (Galera 4's vote).
    Vote {
        raft_id: u64,
        seqno: i64,
        digest: u64,
    },
    /// A member's `pc.weight` (weighted quorum): the leader derives the
    /// Raft voters from the members' weights.
    Weight {
        raft_id: u64,
        weight: u32,
    },
    /// A member's identity on the wire (ADR 0014, issue 34 item 5): its
    /// Raft id is bound to the SHA-256 fingerprint of the certificate it
    /// presents, and every transport refuses that id with another one.
    /// Proposed by the member itself (origin = `raft_id`): when it
    /// becomes a member unbound (joined before the cluster ran at
    /// [`BINDING_VERSION`], or founded it), and after `socket.ssl_reload`
    /// gave it another certificate. Joiners are bound by the member that
    /// admits them, in the configuration change itself.
    Bind {
        raft_id: u64,
        fingerprint: CertFingerprint,
    },
    /// A member's flow-control level (`crate::flow_control`): 0 none,
    /// 1..=4 throttle, 255 stop (Galera's FC_STOP).
    FlowControl {
        raft_id: u64,
        level: u8,
    },
    /// Part `index` of `count` of a big action (a writeset above
    /// `GroupConfig::fragment_bytes`), which is delivered under proposal
    /// id `of` once every part is ordered. Each part is one log entry of
    /// bounded size: a 300 MB writeset never makes one Raft round (or one
    /// message) that long.
    Fragment {
        of: u64,
        index: u32,
        count: u32,
        /// Shared with the log entry it was decoded from
        /// ([`decode_batch_shared`]), so reassembly copies nothing.
        bytes: Bytes,
    },
}

/// An action stamped with its origin and the origin's proposal number,
/// so a retried proposal is delivered once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    pub origin: u64,
    pub id: u64,
    pub action: Action,
}

/// IST from a donor's writeset cache (`Action::StateRequest`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheIst {
    /// The joiner's IST receiver (`ist.recv_addr`).
    pub addr: String,
    /// Check points from the joiner's own cache, at or before its
    /// position (seqno, `writeset_cache::event_digest`; at most
    /// [`MAX_CHECK_POINTS`]): the donor sends its records for those seqnos
    /// first, so the joiner can tell a fork of the history with the same
    /// UUID from a prefix of it.
    pub check: Vec<(i64, u32)>,
}

/// Bound on [`CacheIst::check`] (the joiner sends its last event and its
/// last writeset).
pub const MAX_CHECK_POINTS: usize = 2;

const T_GENESIS: u8 = 1;
pub(super) const T_WRITESET: u8 = 2;
const T_COMMITTED: u8 = 3;
const T_STATE_REQUEST: u8 = 4;
const T_STATE_TRANSFERRED: u8 = 5;
const T_JOINED: u8 = 6;
const T_SYNCED: u8 = 7;
const T_BARRIER: u8 = 8;
const T_REMERGE: u8 = 9;
/// A state request with an IST offer (`ist_after`); without one the
/// request keeps its original tag and layout.
const T_IST_REQUEST: u8 = 10;
const T_VOTE: u8 = 11;
/// A state request whose events must come from a donor's writeset cache.
const T_CACHE_IST_REQUEST: u8 = 12;
const T_WEIGHT: u8 = 13;
const T_FLOW_CONTROL: u8 = 14;
const T_FRAGMENT: u8 = 15;
const T_ARBITRATOR: u8 = 16;
const T_SUPPORTS: u8 = 17;
const T_CLUSTER_VERSION: u8 = 18;
const T_BIND: u8 = 19;
const T_STATELESS: u8 = 20;

/// Smallest encoding of one proposal (origin, id, tag): bounds counts.
const MIN_PROPOSAL: usize = 17;

/// A member description without its version byte (inside other records).
pub(super) fn write_member(w: &mut Writer, m: &MemberInfo) {
    m.write(w);
}

pub(super) fn read_member(r: &mut Reader<'_>) -> Result<MemberInfo, DecodeError> {
    MemberInfo::read(r)
}

/// One key: u8 type, u32 part count, parts as byte strings.
pub(crate) fn write_key(w: &mut Writer, k: &Key) {
    w.u8(k.kind.to_wsrep() as u8).u32(k.nparts() as u32);
    for p in k.parts() {
        w.bytes(p);
    }
}

pub(crate) fn read_key(r: &mut Reader<'_>) -> Result<Key, DecodeError> {
    let kind = r.u8("key.type")?;
    let kind = KeyType::from_wsrep(i32::from(kind)).ok_or(DecodeError::Invalid {
        field: "key.type",
        value: u64::from(kind),
    })?;
    let nparts = r.count("key.parts", 4)?;
    // Checked on a copy first, so that the key is built in one allocation
    // from parts known to be there.
    let mut parts = r.clone();
    for _ in 0..nparts {
        r.bytes("key.part")?;
    }
    let key = Key::from_slices(
        (0..nparts).map_while(move |_| parts.bytes("key.part").ok()),
        kind,
    );
    Ok(key)
}

pub(super) fn check_version(r: &mut Reader<'_>) -> Result<(), DecodeError> {
    let v = r.u8("version")?;
    if v != ACTION_VERSION {
        return Err(DecodeError::Invalid {
            field: "version",
            value: u64::from(v),
        });
    }
    Ok(())
}

/// Encodes a batch of proposals as one log entry.
pub fn encode_batch(batch: &[Proposal]) -> Vec<u8> {
    let mut w = Writer::new();
    w.u8(ACTION_VERSION).u32(batch.len() as u32);
    for p in batch {
        w.u64(p.origin).u64(p.id);
        write_action(&mut w, &p.action);
    }
    w.finish()
}

/// One action alone (versioned): what [`Action::Fragment`]s carry.
pub fn encode_action(a: &Action) -> Vec<u8> {
    let mut w = Writer::new();
    w.u8(ACTION_VERSION);
    write_action(&mut w, a);
    w.finish()
}

/// Decodes [`encode_action`] bytes (the parts of a fragmented action,
/// concatenated).
pub fn decode_action(bytes: &[u8]) -> Result<Action, DecodeError> {
    let mut r = Reader::new(bytes);
    check_version(&mut r)?;
    let a = read_action(&mut r, None)?;
    r.end()?;
    Ok(a)
}

/// [`decode_action`] of a buffer it may consume (a fragmented action
/// that decoding ahead could not take apart, `reassembly`): a writeset's
/// data is a slice of `bytes` instead of a copy.
pub fn decode_action_owned(bytes: Vec<u8>) -> Result<Action, DecodeError> {
    let (ws, data_at, data_len) = {
        let mut r = Reader::new(&bytes);
        check_version(&mut r)?;
        if r.u8("action.tag")? != T_WRITESET {
            return decode_action(&bytes);
        }
        let ws = read_writeset_header(&mut r)?;
        let data = r.bytes("ws.data")?;
        // Where the data starts in `bytes`: both point into one buffer.
        let at = data.as_ptr() as usize - bytes.as_ptr() as usize;
        let len = data.len();
        r.end()?;
        (ws, at, len)
    };
    let data = Bytes::from(bytes).slice(data_at..data_at + data_len);
    Ok(Action::Writeset(Writeset {
        data: Payload::from_chunks([data]),
        ..ws
    }))
}

/// Decodes a log entry written by [`encode_batch`].
pub fn decode_batch(bytes: &[u8]) -> Result<Vec<Proposal>, DecodeError> {
    read_batch(bytes, None)
}

/// [`decode_batch`] of a log entry's shared bytes: fragments point into
/// `bytes` instead of copying out of it.
pub fn decode_batch_shared(bytes: &Bytes) -> Result<Vec<Proposal>, DecodeError> {
    read_batch(bytes, Some(bytes))
}

fn read_batch(bytes: &[u8], shared: Option<&Bytes>) -> Result<Vec<Proposal>, DecodeError> {
    let mut r = Reader::new(bytes);
    check_version(&mut r)?;
    let n = r.count("batch.len", MIN_PROPOSAL)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let origin = r.u64("proposal.origin")?;
        let id = r.u64("proposal.id")?;
        let action = read_action(&mut r, shared)?;
        out.push(Proposal { origin, id, action });
    }
    r.end()?;
    Ok(out)
}

fn write_action(w: &mut Writer, a: &Action) {
    match a {
        Action::Genesis {
            history,
            last_seqno,
            founder,
        } => {
            w.u8(T_GENESIS).uuid(history).i64(*last_seqno);
            founder.write(w);
        }
        Action::Writeset(ws) => {
            w.u8(T_WRITESET);
            write_writeset(w, ws);
        }
        Action::Committed {
            raft_id,
            seqno,
            applied,
        } => {
            w.u8(T_COMMITTED).u64(*raft_id).i64(*seqno).u64(*applied);
        }
        Action::StateRequest {
            joiner,
            donors,
            request,
            ist_after,
            from_cache,
        } => {
            let tag = match (ist_after, from_cache) {
                (Some(_), Some(_)) => T_CACHE_IST_REQUEST,
                (Some(_), None) => T_IST_REQUEST,
                (None, _) => T_STATE_REQUEST,
            };
            w.u8(tag).u64(*joiner).str(donors).bytes(request);
            if let Some(after) = ist_after {
                w.i64(*after);
                if let Some(c) = from_cache {
                    w.str(&c.addr).u8(c.check.len() as u8);
                    for (seqno, digest) in &c.check {
                        w.i64(*seqno).u32(*digest);
                    }
                }
            }
        }
        Action::StateTransferred {
            donor,
            joiner,
            seqno,
            rcode,
        } => {
            w.u8(T_STATE_TRANSFERRED).u64(*donor).u64(*joiner);
            w.i64(*seqno).i32(*rcode);
        }
        Action::Joined { raft_id, seqno } => {
            w.u8(T_JOINED).u64(*raft_id).i64(*seqno);
        }
        Action::Synced { raft_id } => {
            w.u8(T_SYNCED).u64(*raft_id);
        }
        Action::Arbitrator { raft_id } => {
            w.u8(T_ARBITRATOR).u64(*raft_id);
        }
        Action::Stateless { raft_id } => {
            w.u8(T_STATELESS).u64(*raft_id);
        }
        Action::Supports {
            raft_id,
            max_version,
        } => {
            w.u8(T_SUPPORTS).u64(*raft_id).u32(*max_version);
        }
        Action::ClusterVersion { version } => {
            w.u8(T_CLUSTER_VERSION).u32(*version);
        }
        Action::Barrier { raft_id, id } => {
            w.u8(T_BARRIER).u64(*raft_id).u64(*id);
        }
        Action::Remerge { raft_id } => {
            w.u8(T_REMERGE).u64(*raft_id);
        }
        Action::Vote {
            raft_id,
            seqno,
            digest,
        } => {
            w.u8(T_VOTE).u64(*raft_id).i64(*seqno).u64(*digest);
        }
        Action::Weight { raft_id, weight } => {
            w.u8(T_WEIGHT).u64(*raft_id).u32(*weight);
        }
        Action::Bind {
            raft_id,
            fingerprint,
        } => {
            w.u8(T_BIND).u64(*raft_id).digest(fingerprint);
        }
        Action::FlowControl { raft_id, level } => {
            w.u8(T_FLOW_CONTROL).u64(*raft_id).u8(*level);
        }
        Action::Fragment {
            of,
            index,
            count,
            bytes,
        } => {
            w.u8(T_FRAGMENT)
                .u64(*of)
                .u32(*index)
                .u32(*count)
                .bytes(bytes);
        }
    }
}

/// `shared`: the buffer `r` reads, when fragments may point into it.
fn read_action(r: &mut Reader<'_>, shared: Option<&Bytes>) -> Result<Action, DecodeError> {
    let tag = r.u8("action.tag")?;
    Ok(match tag {
        T_GENESIS => Action::Genesis {
            history: r.uuid("genesis.history")?,
            last_seqno: r.i64("genesis.last_seqno")?,
            founder: MemberInfo::read(r)?,
        },
        // Copied, unlike a fragment: a small writeset lives on in the
        // sequencer's window, and a slice would keep the whole received
        // message (up to a MiB, other writesets' fragments with it) alive
        // with it, out of every memory count.
        T_WRITESET => Action::Writeset(read_writeset(r)?),
        T_COMMITTED => Action::Committed {
            raft_id: r.u64("committed.raft_id")?,
            seqno: r.i64("committed.seqno")?,
            applied: r.u64("committed.applied")?,
        },
        T_STATE_REQUEST | T_IST_REQUEST | T_CACHE_IST_REQUEST => Action::StateRequest {
            joiner: r.u64("state_request.joiner")?,
            donors: r.string("state_request.donors")?,
            request: r.bytes("state_request.request")?.to_vec(),
            ist_after: if tag == T_STATE_REQUEST {
                None
            } else {
                Some(r.i64("state_request.ist_after")?)
            },
            from_cache: if tag == T_CACHE_IST_REQUEST {
                let addr = r.string("state_request.ist_addr")?;
                let n = r.u8("state_request.checks")?;
                if usize::from(n) > MAX_CHECK_POINTS {
                    return Err(DecodeError::Invalid {
                        field: "state_request.checks",
                        value: u64::from(n),
                    });
                }
                let mut check = Vec::with_capacity(usize::from(n));
                for _ in 0..n {
                    check.push((
                        r.i64("state_request.check_seqno")?,
                        r.u32("state_request.check_digest")?,
                    ));
                }
                Some(CacheIst { addr, check })
            } else {
                None
            },
        },
        T_STATE_TRANSFERRED => Action::StateTransferred {
            donor: r.u64("transferred.donor")?,
            joiner: r.u64("transferred.joiner")?,
            seqno: r.i64("transferred.seqno")?,
            rcode: r.i32("transferred.rcode")?,
        },
        T_JOINED => Action::Joined {
            raft_id: r.u64("joined.raft_id")?,
            seqno: r.i64("joined.seqno")?,
        },
        T_SYNCED => Action::Synced {
            raft_id: r.u64("synced.raft_id")?,
        },
        T_ARBITRATOR => Action::Arbitrator {
            raft_id: r.u64("arbitrator.raft_id")?,
        },
        T_SUPPORTS => Action::Supports {
            raft_id: r.u64("supports.raft_id")?,
            max_version: r.u32("supports.max_version")?,
        },
        T_CLUSTER_VERSION => Action::ClusterVersion {
            version: r.u32("cluster_version.version")?,
        },
        T_BARRIER => Action::Barrier {
            raft_id: r.u64("barrier.raft_id")?,
            id: r.u64("barrier.id")?,
        },
        T_REMERGE => Action::Remerge {
            raft_id: r.u64("remerge.raft_id")?,
        },
        T_VOTE => Action::Vote {
            raft_id: r.u64("vote.raft_id")?,
            seqno: r.i64("vote.seqno")?,
            digest: r.u64("vote.digest")?,
        },
        T_WEIGHT => Action::Weight {
            raft_id: r.u64("weight.raft_id")?,
            weight: r.u32("weight.weight")?,
        },
        T_STATELESS => Action::Stateless {
            raft_id: r.u64("stateless.raft_id")?,
        },
        T_BIND => Action::Bind {
            raft_id: r.u64("bind.raft_id")?,
            fingerprint: r.digest("bind.fingerprint")?,
        },
        T_FLOW_CONTROL => Action::FlowControl {
            raft_id: r.u64("flow_control.raft_id")?,
            level: r.u8("flow_control.level")?,
        },
        T_FRAGMENT => Action::Fragment {
            of: r.u64("fragment.of")?,
            index: r.u32("fragment.index")?,
            count: r.u32("fragment.count")?,
            bytes: match (r.bytes("fragment.bytes")?, shared) {
                (b, Some(whole)) => whole.slice_ref(b),
                (b, None) => Bytes::copy_from_slice(b),
            },
        },
        other => {
            return Err(DecodeError::Invalid {
                field: "action.tag",
                value: u64::from(other),
            })
        }
    })
}

/// A writeset's fields (also the body of a writeset cache record).
pub(crate) fn write_writeset(w: &mut Writer, ws: &Writeset) {
    write_writeset_before_data(w, ws);
    ws.data.append_to(&mut w.buf);
}

/// [`write_writeset`] up to the data's bytes (their length included): the
/// encoding is this followed by `ws.data`'s chunks, which a caller that
/// writes them elsewhere (the writeset cache's file) need not copy.
pub(crate) fn write_writeset_before_data(w: &mut Writer, ws: &Writeset) {
    write_writeset_head(w, ws, ws.keys.len() as u32);
    for k in &ws.keys {
        write_key(w, k);
    }
    w.u32(ws.data.len() as u32);
}

/// A writeset's fields before its keys, announcing `key_count` keys
/// (`fragments::EncodedBody` writes the keys apart).
pub(super) fn write_writeset_head(w: &mut Writer, ws: &Writeset, key_count: u32) {
    w.uuid(&ws.source).u64(ws.trx_id).u64(ws.conn_id);
    w.i64(ws.last_seen).u32(ws.flags).u32(key_count);
}

pub(crate) fn read_writeset(r: &mut Reader<'_>) -> Result<Writeset, DecodeError> {
    let mut ws = read_writeset_header(r)?;
    ws.data = Payload::from(r.bytes("ws.data")?);
    Ok(ws)
}

/// A writeset's fields before its data (left empty).
fn read_writeset_header(r: &mut Reader<'_>) -> Result<Writeset, DecodeError> {
    let mut ws = read_writeset_fields(r)?;
    let nkeys = r.count("ws.keys", 5)?;
    ws.keys.reserve_exact(nkeys);
    for _ in 0..nkeys {
        ws.keys.push(read_key(r)?);
    }
    Ok(ws)
}

/// A writeset's fields before its key count (keys and data left empty).
pub(super) fn read_writeset_fields(r: &mut Reader<'_>) -> Result<Writeset, DecodeError> {
    Ok(Writeset {
        source: r.uuid("ws.source")?,
        trx_id: r.u64("ws.trx_id")?,
        conn_id: r.u64("ws.conn_id")?,
        last_seen: r.i64("ws.last_seen")?,
        flags: r.u32("ws.flags")?,
        keys: Vec::new(),
        data: Payload::default(),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A member description for tests (also used by `snapshot`'s tests).
    pub(crate) fn member(id: u64) -> MemberInfo {
        MemberInfo {
            raft_id: id,
            uuid: [id as u8; 16],
            name: format!("node{id}"),
            incoming: "127.0.0.1:3306".into(),
            peer_addr: "127.0.0.1:4567".into(),
            segment: (id % 3) as u8,
        }
    }

    pub fn sample_batch() -> Vec<Proposal> {
        let ws = Writeset {
            source: [9; 16],
            trx_id: 77,
            conn_id: 5,
            last_seen: 41,
            flags: 3,
            keys: vec![Key::new(
                vec![b"db".to_vec(), b"t".to_vec(), vec![0, 1]],
                KeyType::Update,
            )],
            data: vec![1, 2, 3].into(),
        };
        let actions = vec![
            Action::Genesis {
                history: [1; 16],
                last_seqno: 10,
                founder: member(1),
            },
            Action::Writeset(ws),
            Action::Committed {
                raft_id: 2,
                seqno: 40,
                applied: 77,
            },
            Action::StateRequest {
                joiner: 3,
                donors: "node1,".into(),
                request: b"rsync\x00127.0.0.1:4444/rsync_sst\x00".to_vec(),
                ist_after: None,
                from_cache: None,
            },
            Action::StateRequest {
                joiner: 4,
                donors: String::new(),
                request: b"rsync\x00127.0.0.1:4454/rsync_sst\x00".to_vec(),
                ist_after: Some(48),
                from_cache: None,
            },
            Action::StateRequest {
                joiner: 9,
                donors: String::new(),
                request: b"rsync".to_vec(),
                ist_after: Some(48),
                from_cache: Some(CacheIst {
                    addr: "127.0.0.1:4568".into(),
                    check: vec![(40, 0xdead_beef), (47, 7)],
                }),
            },
            Action::StateTransferred {
                donor: 1,
                joiner: 3,
                seqno: 50,
                rcode: 0,
            },
            Action::Joined {
                raft_id: 3,
                seqno: 50,
            },
            Action::Synced { raft_id: 3 },
            Action::Arbitrator { raft_id: 5 },
            Action::Stateless { raft_id: 6 },
            Action::Supports {
                raft_id: 5,
                max_version: 9,
            },
            Action::ClusterVersion { version: 9 },
            Action::Barrier { raft_id: 2, id: 8 },
            Action::Vote {
                raft_id: 2,
                seqno: 45,
                digest: 0xfeed,
            },
            Action::Remerge { raft_id: 2 },
            Action::Weight {
                raft_id: 2,
                weight: 3,
            },
            Action::Bind {
                raft_id: 2,
                fingerprint: [7; 32],
            },
            Action::FlowControl {
                raft_id: 2,
                level: 255,
            },
            Action::Fragment {
                of: 1 << 63,
                index: 1,
                count: 3,
                bytes: vec![1, 2, 3].into(),
            },
        ];
        actions
            .into_iter()
            .enumerate()
            .map(|(i, action)| Proposal {
                origin: 2,
                id: i as u64,
                action,
            })
            .collect()
    }

    #[test]
    fn batch_round_trip() {
        let batch = sample_batch();
        assert_eq!(decode_batch(&encode_batch(&batch)).unwrap(), batch);
        let m = member(4);
        assert_eq!(MemberInfo::decode(&m.encode()).unwrap(), m);
    }

    #[test]
    fn owned_decoding_gives_what_borrowed_decoding_gives() {
        for p in sample_batch() {
            let bytes = encode_action(&p.action);
            assert_eq!(decode_action_owned(bytes.clone()).unwrap(), p.action);
            for cut in 0..bytes.len() {
                let short = bytes[..cut].to_vec();
                assert!(decode_action_owned(short).is_err(), "cut at {cut}");
            }
            let mut longer = bytes;
            longer.push(0);
            assert!(decode_action_owned(longer).is_err());
        }
    }

    #[test]
    fn every_truncation_is_an_error() {
        let bytes = encode_batch(&sample_batch());
        for cut in 0..bytes.len() {
            assert!(decode_batch(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode_batch(&longer).is_err());
    }

    #[test]
    fn unknown_version_and_tag_are_refused() {
        let mut bytes = encode_batch(&sample_batch());
        bytes[0] = 9;
        assert!(matches!(
            decode_batch(&bytes),
            Err(DecodeError::Invalid {
                field: "version",
                ..
            })
        ));
        let mut w = Writer::new();
        w.u8(ACTION_VERSION).u32(1).u64(1).u64(1).u8(200);
        assert!(decode_batch(&w.finish()).is_err());
    }

    proptest::proptest! {
        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            let _ = decode_batch(&bytes);
            let _ = MemberInfo::decode(&bytes);
        }
    }
}
