//! Messages between Lockstep nodes on the group channel, one per frame
//! (the frame's `kind` byte is the message type). They carry the group's
//! own types (members, votes, leases), so they live here, above `wire`,
//! which knows only frames and field codecs.
//!
//! A connection starts with each side sending [`PeerMsg::Hello`]; the
//! receiver checks the protocol version and the cluster name before it
//! accepts anything else, and answers a mismatch with
//! [`PeerMsg::Refuse`] and a closed connection.

use super::recovery::Vote;
use super::{LeaseMsg, MemberInfo};
use crate::saved_view::MAX_MEMBERS;
use crate::wire::codec::{DecodeError, Reader, Writer};
use crate::wire::frame::{self, Frame, FrameError};
use wsrep_abi::Uuid;

/// Group-channel protocol version; peers must match exactly. 2: log
/// entries and member descriptions of action version 2 (member weights),
/// action tags 12 (IST from a writeset cache) and 13 (weight); a node of
/// version 1 is refused at the hello rather than failing on an entry.
/// 3: two lanes, messages over 64 KiB in chunks (`wire::lanes`).
/// 4: the certification purge cut leaves joiners waiting for their state
/// out (the same log purges differently, so versions must not mix).
/// 5: writesets of more than 131 072 keys enter their rows at table
/// level (`certification::coarse`): the same log certifies differently.
/// 6: causal reads ask the leader directly (`ReadAsk`, `ReadAnswer`).
/// 7: followers of three voters commit on arrival (ADR 0017), so reads
/// are answered with the leader's last log index, which a ReadIndex
/// answer carries in `commit`: a version-6 leader would answer reads
/// with its commit index, stale against such commits.
/// 8: arbitrators (action tag 16; snapshot member flags), and a Raft
/// election priority that keeps an arbitrator from leading; round-trip
/// probes (`Ping`, `Pong`).
/// 9: the leader relays appends to a remote segment through one member
/// there (`Relay`, `Relayed`; ADR 0020) and moves to the segment with the
/// most voters; both only once the cluster runs at 9.
/// 10: followers answer causal reads from leases granted by every member
/// (`Lease`: ping, grant, stored; ADR 0022), once the cluster runs at 10.
/// 11: members are bound to their certificates (action tag 19, a
/// joiner's fingerprint in its configuration change, the snapshot's
/// binding table; ADR 0014), once the cluster runs at 11.
/// 12: a member with `gcs.stateless` says so (action tag 20, a member
/// flag in snapshots) and is never chosen as a donor, once the cluster
/// runs at 12.
/// 13: round-trip probes carry the answerer's clock (`ClockPing`,
/// `ClockPong`), so each node measures the others' clock rates and stops
/// using leases while one is off (ADR 0036), once the cluster runs at 13.
pub const PROTOCOL_VERSION: u32 = 13;
/// The first version whose probes carry the answerer's clock.
pub const CLOCK_VERSION: u32 = 13;
/// The oldest version this build speaks: peers whose range overlaps ours
/// connect, and the cluster runs at the newest version every member
/// speaks (`Action::ClusterVersion`, docs/formats.md). 8 is the first
/// with ranges; older nodes expected an exact match.
pub const MIN_PROTOCOL_VERSION: u32 = 8;
/// Bound on one message on the group channel: the largest Raft message
/// (one writeset up to `repl.max_ws_size` travels in one log entry). On
/// the wire it travels in chunks (`wire::lanes`).
pub const MAX_PEER_MESSAGE: usize = crate::wire::lanes::MAX_MESSAGE_BYTES;

const K_HELLO: u8 = 1;
const K_REFUSE: u8 = 2;
const K_RAFT: u8 = 3;
const K_JOIN: u8 = 4;
const K_FAREWELL: u8 = 5;
const K_NOT_MEMBER: u8 = 6;
const K_RECOVERY: u8 = 7;
// 8 and 9 are the lanes' chunk kinds (`lanes::K_PART`, `lanes::K_END`).
const K_READ_ASK: u8 = 10;
const K_READ_ANSWER: u8 = 11;
const K_PING: u8 = 12;
const K_PONG: u8 = 13;
const K_RELAY: u8 = 14;
const K_RELAYED: u8 = 15;
const K_LEASE_PING: u8 = 16;
const K_LEASE_GRANT: u8 = 17;
const K_LEASE_STORED: u8 = 18;
const K_CLOCK_PING: u8 = 19;
const K_CLOCK_PONG: u8 = 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerMsg {
    Hello {
        /// The newest protocol version this node speaks.
        version: u32,
        cluster: String,
        raft_id: u64,
        peer_addr: String,
        /// The oldest it still speaks (from version 8 on; absent before,
        /// read as `version`).
        min_version: u32,
    },
    /// Why the connection is refused (logged by the receiver).
    Refuse {
        reason: String,
    },
    /// A Raft message (protobuf, from raft-rs).
    Raft(Vec<u8>),
    /// Please add this node to the cluster.
    Join(MemberInfo),
    /// Your removal is applied (you left the cluster).
    Farewell,
    /// From the leader to a node that speaks Raft to it but is not in its
    /// configuration: the primary component removed it (while it was cut
    /// off). The node rejoins as a new member.
    NotMember,
    /// A restarting node's `pc.recovery` vote (no primary component runs).
    Recovery(Vote),
    /// A causal read on a follower asks the leader for its read index
    /// (ADR 0016); `n` names the read on the asking node.
    ReadAsk {
        n: u64,
    },
    /// The leader's answer: its read index (last log index), taken under its lease, or
    /// `None` when it holds no lease (the reader then asks through Raft).
    ReadAnswer {
        n: u64,
        index: Option<u64>,
    },
    /// A round-trip probe (metrics, ADR 0019): `sent` is the sender's own
    /// clock, which the answer echoes, so the sender keeps no state.
    Ping {
        sent: u64,
    },
    Pong {
        sent: u64,
    },
    /// A round-trip probe whose answer carries the answerer's clock
    /// (version 13, ADR 0036).
    ClockPing {
        sent: u64,
    },
    /// The answer: `sent` echoed, and `clock`, the answerer's steady
    /// monotonic clock (ns, any origin) when it answered.
    ClockPong {
        sent: u64,
        clock: u64,
    },
    /// From the leader to a member of another segment: appends for it and
    /// others of its segment, each entry once (`group::relay`).
    Relay(Vec<u8>),
    /// A leader's Raft message (protobuf) passed on by a relay: its
    /// `from` is the leader, not the connection's peer.
    Relayed(Vec<u8>),
    /// Local causal reads (ADR 0022, `group::read_grants`).
    Lease(LeaseMsg),
}

impl PeerMsg {
    /// The framed bytes of this message, consuming it (a Raft message's
    /// bytes are not copied twice).
    pub fn into_frame(self) -> Result<Vec<u8>, FrameError> {
        match self {
            PeerMsg::Raft(bytes) => raw_frame(K_RAFT, &bytes),
            PeerMsg::Relay(bytes) => raw_frame(K_RELAY, &bytes),
            PeerMsg::Relayed(bytes) => raw_frame(K_RELAYED, &bytes),
            other => other.to_frame(),
        }
    }

    /// The framed bytes of this message.
    pub fn to_frame(&self) -> Result<Vec<u8>, FrameError> {
        let (kind, payload) = match self {
            PeerMsg::Hello {
                version,
                cluster,
                raft_id,
                peer_addr,
                min_version,
            } => {
                let mut w = Writer::new();
                w.u32(*version).str(cluster).u64(*raft_id).str(peer_addr);
                // Last, so a node of version 7 still reads the fields it
                // knows and refuses with a clear version mismatch.
                w.u32(*min_version);
                (K_HELLO, w.finish())
            }
            PeerMsg::Refuse { reason } => {
                let mut w = Writer::new();
                w.str(reason);
                (K_REFUSE, w.finish())
            }
            PeerMsg::Raft(bytes) => (K_RAFT, bytes.clone()),
            PeerMsg::Relay(bytes) => (K_RELAY, bytes.clone()),
            PeerMsg::Relayed(bytes) => (K_RELAYED, bytes.clone()),
            PeerMsg::Join(info) => (K_JOIN, info.encode()),
            PeerMsg::Farewell => (K_FAREWELL, Vec::new()),
            PeerMsg::NotMember => (K_NOT_MEMBER, Vec::new()),
            PeerMsg::ReadAsk { n } => {
                let mut w = Writer::new();
                w.u64(*n);
                (K_READ_ASK, w.finish())
            }
            PeerMsg::Ping { sent } | PeerMsg::Pong { sent } => {
                let kind = if matches!(self, PeerMsg::Ping { .. }) {
                    K_PING
                } else {
                    K_PONG
                };
                let mut w = Writer::new();
                w.u64(*sent);
                (kind, w.finish())
            }
            PeerMsg::ClockPing { sent } => {
                let mut w = Writer::new();
                w.u64(*sent);
                (K_CLOCK_PING, w.finish())
            }
            PeerMsg::ClockPong { sent, clock } => {
                let mut w = Writer::new();
                w.u64(*sent).u64(*clock);
                (K_CLOCK_PONG, w.finish())
            }
            PeerMsg::ReadAnswer { n, index } => {
                // Raft indexes start at 1: 0 stands for "no lease".
                let mut w = Writer::new();
                w.u64(*n).u64(index.unwrap_or(0));
                (K_READ_ANSWER, w.finish())
            }
            PeerMsg::Lease(m) => {
                let mut w = Writer::new();
                let kind = match *m {
                    LeaseMsg::Ping { n, term, index } => {
                        w.u64(n).u64(term).u64(index);
                        K_LEASE_PING
                    }
                    LeaseMsg::Grant { n, released, conf } => {
                        w.u64(n).u64(released).u64(conf);
                        K_LEASE_GRANT
                    }
                    LeaseMsg::Stored { term, index } => {
                        w.u64(term).u64(index);
                        K_LEASE_STORED
                    }
                };
                (kind, w.finish())
            }
            PeerMsg::Recovery(v) => {
                let mut w = Writer::new();
                w.uuid(&v.member.data).uuid(&v.history.data);
                w.i64(v.seqno).i64(v.view_seqno);
                w.u32(v.view.len() as u32);
                for m in &v.view {
                    w.uuid(&m.data);
                }
                // Added after the view (issue 52): a vote without it (an
                // older node) reads as a restarted member.
                w.u8(u8::from(v.in_group));
                (K_RECOVERY, w.finish())
            }
        };
        let mut out = Vec::with_capacity(payload.len() + 16);
        frame::encode(kind, &payload, MAX_PEER_MESSAGE, &mut out)?;
        Ok(out)
    }

    /// Decodes the message in a frame that passed its checksum.
    pub fn from_frame(f: Frame) -> Result<PeerMsg, DecodeError> {
        match f.kind {
            K_HELLO => {
                let mut r = Reader::new(&f.payload);
                let version = r.u32("hello.version")?;
                let cluster = r.string("hello.cluster")?;
                let raft_id = r.u64("hello.raft_id")?;
                let peer_addr = r.string("hello.peer_addr")?;
                let min_version = if r.remaining() > 0 {
                    r.u32("hello.min_version")?
                } else {
                    version
                };
                r.end()?;
                Ok(PeerMsg::Hello {
                    version,
                    cluster,
                    raft_id,
                    peer_addr,
                    min_version,
                })
            }
            K_REFUSE => {
                let mut r = Reader::new(&f.payload);
                let reason = r.string("refuse.reason")?;
                r.end()?;
                Ok(PeerMsg::Refuse { reason })
            }
            K_RAFT => Ok(PeerMsg::Raft(f.payload)),
            K_RELAY => Ok(PeerMsg::Relay(f.payload)),
            K_RELAYED => Ok(PeerMsg::Relayed(f.payload)),
            K_JOIN => Ok(PeerMsg::Join(MemberInfo::decode(&f.payload)?)),
            K_FAREWELL if f.payload.is_empty() => Ok(PeerMsg::Farewell),
            K_NOT_MEMBER if f.payload.is_empty() => Ok(PeerMsg::NotMember),
            K_READ_ASK => {
                let mut r = Reader::new(&f.payload);
                let n = r.u64("read_ask.n")?;
                r.end()?;
                Ok(PeerMsg::ReadAsk { n })
            }
            K_PING | K_PONG => {
                let mut r = Reader::new(&f.payload);
                let sent = r.u64("ping.sent")?;
                r.end()?;
                Ok(if f.kind == K_PING {
                    PeerMsg::Ping { sent }
                } else {
                    PeerMsg::Pong { sent }
                })
            }
            K_CLOCK_PING => {
                let mut r = Reader::new(&f.payload);
                let sent = r.u64("clock_ping.sent")?;
                r.end()?;
                Ok(PeerMsg::ClockPing { sent })
            }
            K_CLOCK_PONG => {
                let mut r = Reader::new(&f.payload);
                let sent = r.u64("clock_pong.sent")?;
                let clock = r.u64("clock_pong.clock")?;
                r.end()?;
                Ok(PeerMsg::ClockPong { sent, clock })
            }
            K_READ_ANSWER => {
                let mut r = Reader::new(&f.payload);
                let n = r.u64("read_answer.n")?;
                let index = Some(r.u64("read_answer.index")?).filter(|i| *i > 0);
                r.end()?;
                Ok(PeerMsg::ReadAnswer { n, index })
            }
            K_LEASE_PING | K_LEASE_GRANT | K_LEASE_STORED => {
                let mut r = Reader::new(&f.payload);
                let a = r.u64("lease.a")?;
                let b = r.u64("lease.b")?;
                let msg = match f.kind {
                    K_LEASE_PING => LeaseMsg::Ping {
                        n: a,
                        term: b,
                        index: r.u64("lease.index")?,
                    },
                    K_LEASE_GRANT => LeaseMsg::Grant {
                        n: a,
                        released: b,
                        conf: r.u64("lease.conf")?,
                    },
                    _ => LeaseMsg::Stored { term: a, index: b },
                };
                r.end()?;
                Ok(PeerMsg::Lease(msg))
            }
            K_RECOVERY => {
                let mut r = Reader::new(&f.payload);
                let member = Uuid::from_bytes(r.uuid("recovery.member")?);
                let history = Uuid::from_bytes(r.uuid("recovery.history")?);
                let seqno = r.i64("recovery.seqno")?;
                let view_seqno = r.i64("recovery.view_seqno")?;
                let n = r.count("recovery.view", 16)?;
                if n > MAX_MEMBERS {
                    return Err(DecodeError::Invalid {
                        field: "recovery.view",
                        value: n as u64,
                    });
                }
                let view = (0..n)
                    .map(|_| r.uuid("recovery.view").map(Uuid::from_bytes))
                    .collect::<Result<Vec<_>, _>>()?;
                let in_group = if r.remaining() > 0 {
                    match r.u8("recovery.in_group")? {
                        0 => false,
                        1 => true,
                        other => {
                            return Err(DecodeError::Invalid {
                                field: "recovery.in_group",
                                value: u64::from(other),
                            })
                        }
                    }
                } else {
                    false
                };
                r.end()?;
                Ok(PeerMsg::Recovery(Vote {
                    member,
                    history,
                    seqno,
                    view_seqno,
                    view,
                    in_group,
                }))
            }
            K_FAREWELL | K_NOT_MEMBER => Err(DecodeError::Trailing(f.payload.len())),
            other => Err(DecodeError::Invalid {
                field: "frame.kind",
                value: u64::from(other),
            }),
        }
    }
}

/// The protobuf size of a Raft message (what its frame's payload will be).
pub fn raft_len(m: &raft::eraftpb::Message) -> usize {
    use protobuf::Message as _;
    m.compute_size() as usize
}

/// A Raft message framed as [`PeerMsg::Raft`], encoded straight into the
/// frame: its entries' data are copied once, not into a buffer first and
/// then into the frame. The Raft protobuf is encoded here and decoded in
/// [`decode_raft`], nowhere else.
pub fn raft_frame(m: &raft::eraftpb::Message) -> Result<Vec<u8>, FrameError> {
    protobuf_frame(K_RAFT, m)
}

/// A leader's Raft message framed as [`PeerMsg::Relayed`] by a relay.
pub fn relayed_frame(m: &raft::eraftpb::Message) -> Result<Vec<u8>, FrameError> {
    protobuf_frame(K_RELAYED, m)
}

fn protobuf_frame(kind: u8, m: &raft::eraftpb::Message) -> Result<Vec<u8>, FrameError> {
    use protobuf::Message as _;
    let len = raft_len(m);
    let mut out = Vec::with_capacity(frame::HEADER_LEN + len + frame::TRAILER_LEN);
    frame::encode_with(kind, len, MAX_PEER_MESSAGE, &mut out, |out| {
        // `compute_size` above cached the sizes this encoder uses.
        let mut os = protobuf::CodedOutputStream::vec(out);
        m.write_to_with_cached_sizes(&mut os).is_ok() && os.flush().is_ok()
    })?;
    Ok(out)
}

/// Decodes the payload of a [`PeerMsg::Raft`] or [`PeerMsg::Relayed`]: the
/// entries' data are slices of `bytes`, not copies (a big writeset's
/// fragments then pass from the wire to the log without a copy).
pub fn decode_raft(bytes: Vec<u8>) -> Result<raft::eraftpb::Message, String> {
    use protobuf::Message as _;
    raft::eraftpb::Message::parse_from_carllerche_bytes(&bytes::Bytes::from(bytes))
        .map_err(|e| e.to_string())
}

/// A frame around bytes encoded elsewhere (a Raft message, a bundle).
fn raw_frame(kind: u8, bytes: &[u8]) -> Result<Vec<u8>, FrameError> {
    let mut out = Vec::with_capacity(bytes.len() + 16);
    frame::encode(kind, bytes, MAX_PEER_MESSAGE, &mut out)?;
    Ok(out)
}

/// Checks a peer's hello against ours: `Err` is the reason to refuse,
/// worded for the log of both sides.
pub fn check_hello(
    ours_cluster: &str,
    (min_version, version): (u32, u32),
    cluster: &str,
) -> Result<(), String> {
    if !versions_overlap(min_version, version) {
        return Err(format!(
            "protocol version mismatch: peer speaks group protocol {min_version}..={version}, \
             this node {MIN_PROTOCOL_VERSION}..={PROTOCOL_VERSION}"
        ));
    }
    if cluster != ours_cluster {
        return Err(format!(
            "cluster name mismatch: peer belongs to '{cluster}', this node to '{ours_cluster}' (wsrep_cluster_name)"
        ));
    }
    Ok(())
}

/// Whether a peer speaking `min..=max` and this build share a version.
pub fn versions_overlap(min: u32, max: u32) -> bool {
    min <= PROTOCOL_VERSION && max >= MIN_PROTOCOL_VERSION && min <= max
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::frame::FrameDecoder;

    fn round_trip(m: PeerMsg) {
        let bytes = m.to_frame().unwrap();
        let mut d = FrameDecoder::new(MAX_PEER_MESSAGE);
        d.push(&bytes);
        let f = d.next_frame().unwrap().unwrap();
        // The lanes take their chunk kinds for themselves: a message of
        // such a kind would be swallowed as a chunk.
        assert!(
            ![crate::wire::lanes::K_PART, crate::wire::lanes::K_END].contains(&f.kind),
            "{m:?} uses a lane chunk kind"
        );
        assert_eq!(PeerMsg::from_frame(f).unwrap(), m);
    }

    #[test]
    fn a_raft_message_framed_in_place_decodes_to_itself() {
        use raft::eraftpb::{Entry, Message, MessageType};
        let mut m = Message::default();
        m.set_msg_type(MessageType::MsgAppend);
        m.from = 1;
        m.to = 2;
        m.term = 3;
        m.set_entries(
            (0..3u64)
                .map(|i| Entry {
                    index: 10 + i,
                    term: 3,
                    data: vec![i as u8; 1000 * i as usize].into(),
                    ..Default::default()
                })
                .collect(),
        );
        for (frame, relayed) in [(raft_frame(&m), false), (relayed_frame(&m), true)] {
            let frame = frame.unwrap();
            assert_eq!(frame.len(), raft_len(&m) + 16);
            let mut d = FrameDecoder::new(MAX_PEER_MESSAGE);
            d.push(&frame);
            let bytes = match PeerMsg::from_frame(d.next_frame().unwrap().unwrap()).unwrap() {
                PeerMsg::Raft(b) if !relayed => b,
                PeerMsg::Relayed(b) if relayed => b,
                other => panic!("framed as {other:?}"),
            };
            assert_eq!(decode_raft(bytes).unwrap(), m);
        }
        assert!(decode_raft(vec![0xff; 7]).is_err());
    }

    #[test]
    fn messages_round_trip() {
        round_trip(PeerMsg::Hello {
            version: PROTOCOL_VERSION,
            cluster: "my_wsrep_cluster".into(),
            raft_id: 42,
            peer_addr: "127.0.0.1:4567".into(),
            min_version: MIN_PROTOCOL_VERSION,
        });
        round_trip(PeerMsg::Refuse {
            reason: "no".into(),
        });
        round_trip(PeerMsg::Raft(vec![1, 2, 3]));
        round_trip(PeerMsg::Farewell);
        round_trip(PeerMsg::NotMember);
        round_trip(PeerMsg::ReadAsk { n: 1 << 63 });
        round_trip(PeerMsg::ReadAnswer {
            n: 5,
            index: Some(77),
        });
        round_trip(PeerMsg::ReadAnswer { n: 5, index: None });
        round_trip(PeerMsg::Ping { sent: 17 });
        round_trip(PeerMsg::Lease(LeaseMsg::Ping {
            n: 1,
            term: 2,
            index: u64::MAX,
        }));
        round_trip(PeerMsg::Lease(LeaseMsg::Grant {
            n: 4,
            released: 5,
            conf: 6,
        }));
        round_trip(PeerMsg::Lease(LeaseMsg::Stored { term: 7, index: 8 }));
        round_trip(PeerMsg::Pong { sent: u64::MAX });
        round_trip(PeerMsg::ClockPing { sent: 3 });
        round_trip(PeerMsg::ClockPong {
            sent: 3,
            clock: u64::MAX,
        });
        round_trip(PeerMsg::Recovery(Vote {
            member: Uuid::from_bytes([1; 16]),
            history: Uuid::from_bytes([2; 16]),
            seqno: 77,
            view_seqno: 70,
            view: vec![Uuid::from_bytes([1; 16]), Uuid::from_bytes([3; 16])],
            in_group: true,
        }));
        round_trip(PeerMsg::Join(MemberInfo {
            raft_id: 7,
            uuid: [1; 16],
            name: "n".into(),
            incoming: String::new(),
            peer_addr: "h:1".into(),
            segment: 0,
        }));
    }

    #[test]
    fn hello_mismatches_are_refused_with_reason() {
        let ours = (MIN_PROTOCOL_VERSION, PROTOCOL_VERSION);
        assert!(check_hello("a", ours, "a").is_ok());
        let e = check_hello("a", ours, "b").unwrap_err();
        assert!(e.contains("cluster name mismatch"), "{e}");
        // The next version that still speaks ours: accepted.
        assert!(check_hello("a", (PROTOCOL_VERSION, PROTOCOL_VERSION + 1), "a").is_ok());
        // One that no longer does, and one older than ours: refused.
        let e = check_hello("a", (PROTOCOL_VERSION + 1, PROTOCOL_VERSION + 2), "a").unwrap_err();
        assert!(e.contains("protocol version mismatch"), "{e}");
        let e = check_hello("a", (7, 7), "a").unwrap_err();
        assert!(e.contains("7..=7"), "{e}");
    }

    #[test]
    fn unknown_kinds_and_short_payloads_are_errors() {
        let f = Frame {
            kind: 99,
            payload: vec![],
        };
        assert!(PeerMsg::from_frame(f).is_err());
        let f = Frame {
            kind: K_HELLO,
            payload: vec![1, 0],
        };
        assert!(PeerMsg::from_frame(f).is_err());
    }
}
