//! One cached event: a writeset with its certification outcome, or the
//! seqno of a view. The frame:
//!
//! ```text
//! offset  size  field
//!      0     4  payload length n, little endian, <= the reader's bound
//!      4     4  CRC-32 (IEEE) of the payload, little endian
//!      8     n  payload:
//!                 u8    kind: 1 writeset, 2 view, 3 end of an IST stream,
//!                       4 view with its members
//!                 [16]  history UUID
//!                 i64   seqno
//!                 view only: u32 membership digest (below)
//!                 view with members: u32 membership digest, i64 conf_id,
//!                   u32 count (<= 256), then per member: [16] UUID,
//!                   name and incoming address (u32 length + UTF-8 each)
//!                 writeset only:
//!                   u8  outcome: 0 pass (then i64 depends_on),
//!                                1 fail (then the reason, below)
//!                   the writeset's fields as in a log entry (`action`)
//! ```
//!
//! A failure reason is a u8 tag and its fields: 1 conflict (key, u8 key
//! type of the earlier reference, i64 seqno), 2 too old (i64, i64),
//! 3 interval too long (i64, i64, u64), 4 invalid last_seen (i64, i64),
//! 5 failed in Galera (no fields: read back from Galera's cache).

use crate::certification::{CertFailure, CertOutcome, KeyType};
use crate::group::action::{read_key, read_writeset, write_key, write_writeset_before_data};
use crate::group::payload::Payload;
use crate::group::Writeset;
use crate::wire::codec::{DecodeError, Reader, Writer};
use std::fmt;
use std::sync::Arc;

/// Length and checksum before each payload.
pub const RECORD_HEADER_LEN: usize = 8;

const K_WRITESET: u8 = 1;
const K_VIEW: u8 = 2;
const K_END: u8 = 3;
const K_VIEW_MEMBERS: u8 = 4;

/// A member of a cached view, as the server is shown it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedMember {
    pub uuid: [u8; 16],
    pub name: String,
    pub incoming: String,
}

/// Who was in a cached view: what IST needs to show the view to a joiner
/// (streaming transactions of members that left are rolled back there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedMembers {
    pub conf_id: i64,
    pub members: Vec<CachedMember>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CachedKind {
    /// A writeset (or TOI statement) and how certification decided it.
    Writeset {
        ws: Arc<Writeset>,
        outcome: CertOutcome,
    },
    /// A view took this seqno; `members` is its [`membership_digest`],
    /// so the same seqno on two forks of one history tells them apart.
    /// `who`: its members, when known (records of kind 2 have none).
    View {
        members: u32,
        who: Option<Arc<CachedMembers>>,
    },
    /// The last record of an IST stream (`seqno` = the stream's last).
    End,
}

/// An ordered event at `seqno` of `history`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedEvent {
    pub history: [u8; 16],
    pub seqno: i64,
    pub kind: CachedKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordError {
    TooLarge { len: usize, max: usize },
    Checksum { stored: u32, computed: u32 },
    Decode(DecodeError),
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordError::TooLarge { len, max } => {
                write!(f, "record of {len} bytes exceeds the limit of {max}")
            }
            RecordError::Checksum { stored, computed } => write!(
                f,
                "record checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
            RecordError::Decode(e) => write!(f, "malformed record: {e}"),
        }
    }
}

impl std::error::Error for RecordError {}

impl From<DecodeError> for RecordError {
    fn from(e: DecodeError) -> Self {
        RecordError::Decode(e)
    }
}

/// What [`decode_record`] found at the start of the buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded {
    /// A whole record, and the bytes it took.
    Record(CachedEvent, usize),
    /// The buffer ends inside a record that needs this many bytes in all.
    NeedMore(usize),
    /// A header of zeros (a length of 0, which no record has: its payload
    /// holds at least a kind, a history and a seqno): space a synced cache
    /// reserved ahead of its records and has not written yet. No record
    /// follows it.
    Unwritten,
}

/// Appends `ev`'s frame to `out`.
pub fn encode_record(ev: &CachedEvent, out: &mut Vec<u8>) {
    let record = record_pieces(ev);
    out.reserve(record.len());
    for piece in record.pieces() {
        out.extend_from_slice(piece);
    }
}

/// A record as [`encode_record`] writes it, in pieces that leave a
/// writeset's data where it is: `head` is the frame header and every
/// payload byte before the data, then come the data's chunks. A 300 MB
/// writeset is thus written to the cache file without being copied into
/// a buffer first (twice, before), which held up every commit queued
/// behind it for as long.
pub struct RecordPieces<'a> {
    head: Vec<u8>,
    data: Option<&'a Payload>,
}

impl RecordPieces<'_> {
    /// The record's length in bytes, frame header included.
    pub fn len(&self) -> usize {
        self.head.len() + self.data.map_or(0, Payload::len)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The record's bytes, in order.
    pub fn pieces(&self) -> impl Iterator<Item = &[u8]> + '_ {
        std::iter::once(&self.head[..]).chain(self.data.into_iter().flat_map(Payload::chunks))
    }
}

/// [`encode_record`] of `ev`, in pieces (see [`RecordPieces`]).
pub fn record_pieces(ev: &CachedEvent) -> RecordPieces<'_> {
    let mut w = Writer::new();
    let mut data = None;
    match &ev.kind {
        CachedKind::Writeset { ws, outcome } => {
            w.u8(K_WRITESET).uuid(&ev.history).i64(ev.seqno);
            write_outcome(&mut w, outcome);
            write_writeset_before_data(&mut w, ws);
            data = Some(&ws.data);
        }
        CachedKind::View { members, who: None } => {
            w.u8(K_VIEW).uuid(&ev.history).i64(ev.seqno).u32(*members);
        }
        CachedKind::View {
            members,
            who: Some(who),
        } => {
            w.u8(K_VIEW_MEMBERS)
                .uuid(&ev.history)
                .i64(ev.seqno)
                .u32(*members)
                .i64(who.conf_id)
                .u32(who.members.len() as u32);
            for m in &who.members {
                w.uuid(&m.uuid).str(&m.name).str(&m.incoming);
            }
        }
        CachedKind::End => {
            w.u8(K_END).uuid(&ev.history).i64(ev.seqno);
        }
    }
    let before_data = w.finish();
    let payload_len = before_data.len() + data.map_or(0, Payload::len);
    let crc = crc_of(&before_data, data);
    let mut head = Vec::with_capacity(RECORD_HEADER_LEN + before_data.len());
    head.extend_from_slice(&(payload_len as u32).to_le_bytes());
    head.extend_from_slice(&crc.to_le_bytes());
    head.extend_from_slice(&before_data);
    RecordPieces { head, data }
}

/// CRC-32 of `before` followed by `data`'s chunks.
fn crc_of(before: &[u8], data: Option<&Payload>) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(before);
    for chunk in data.into_iter().flat_map(Payload::chunks) {
        h.update(chunk);
    }
    h.finalize()
}

/// CRC-32 of a view's `conf_id` (i64) and its member UUIDs in ascending
/// order: the same on every node for the same view.
pub fn membership_digest(conf_id: i64, members: impl Iterator<Item = [u8; 16]>) -> u32 {
    let mut uuids: Vec<[u8; 16]> = members.collect();
    uuids.sort_unstable();
    let mut h = crc32fast::Hasher::new();
    h.update(&conf_id.to_le_bytes());
    for u in &uuids {
        h.update(u);
    }
    h.finalize()
}

/// A digest of what makes `ev` this event and not another: history,
/// seqno, kind, whether it passed certification and the writeset itself.
/// Equal on every node that ordered the same event; it leaves out the
/// dependency and failure details, which depend on how far back a node's
/// certification index reaches. Tells two histories with one UUID apart.
pub fn event_digest(ev: &CachedEvent) -> u32 {
    let mut w = Writer::new();
    w.uuid(&ev.history).i64(ev.seqno);
    let mut data = None;
    match &ev.kind {
        CachedKind::Writeset { ws, outcome } => {
            w.u8(K_WRITESET).u8(u8::from(outcome.is_pass()));
            // The data is hashed where it is, not copied first.
            write_writeset_before_data(&mut w, ws);
            data = Some(&ws.data);
        }
        // The member list is not part of the identity: a record with it
        // and one without describe the same view.
        CachedKind::View { members, .. } => {
            w.u8(K_VIEW).u32(*members);
        }
        CachedKind::End => {
            w.u8(K_END);
        }
    }
    crc_of(&w.finish(), data)
}

/// Decodes the record at the start of `buf`, refusing payloads over
/// `max_payload` bytes before waiting for them.
pub fn decode_record(buf: &[u8], max_payload: usize) -> Result<Decoded, RecordError> {
    if buf.len() < RECORD_HEADER_LEN {
        return Ok(Decoded::NeedMore(RECORD_HEADER_LEN));
    }
    let len = u32::from_le_bytes(buf[0..4].try_into().expect("4 bytes")) as usize;
    if len == 0 && buf[4..RECORD_HEADER_LEN] == [0; RECORD_HEADER_LEN - 4] {
        return Ok(Decoded::Unwritten);
    }
    if len > max_payload {
        return Err(RecordError::TooLarge {
            len,
            max: max_payload,
        });
    }
    let total = RECORD_HEADER_LEN + len;
    if buf.len() < total {
        return Ok(Decoded::NeedMore(total));
    }
    let stored = u32::from_le_bytes(buf[4..8].try_into().expect("4 bytes"));
    let payload = &buf[RECORD_HEADER_LEN..total];
    let computed = crc32fast::hash(payload);
    if stored != computed {
        return Err(RecordError::Checksum { stored, computed });
    }
    let mut r = Reader::new(payload);
    let kind = r.u8("record.kind")?;
    let history = r.uuid("record.history")?;
    let seqno = r.i64("record.seqno")?;
    let kind = match kind {
        K_WRITESET => {
            let outcome = read_outcome(&mut r)?;
            let ws = Arc::new(read_writeset(&mut r)?);
            CachedKind::Writeset { ws, outcome }
        }
        K_VIEW => CachedKind::View {
            members: r.u32("record.members")?,
            who: None,
        },
        K_VIEW_MEMBERS => {
            let members = r.u32("record.members")?;
            let conf_id = r.i64("record.conf_id")?;
            // Each member takes at least its UUID and two lengths.
            let n = r.count("record.member_count", 24)?;
            if n > crate::saved_view::MAX_MEMBERS {
                return Err(RecordError::Decode(DecodeError::Invalid {
                    field: "record.member_count",
                    value: n as u64,
                }));
            }
            let mut list = Vec::with_capacity(n);
            for _ in 0..n {
                list.push(CachedMember {
                    uuid: r.uuid("record.member.uuid")?,
                    name: r.string("record.member.name")?,
                    incoming: r.string("record.member.incoming")?,
                });
            }
            CachedKind::View {
                members,
                who: Some(Arc::new(CachedMembers {
                    conf_id,
                    members: list,
                })),
            }
        }
        K_END => CachedKind::End,
        other => {
            return Err(RecordError::Decode(DecodeError::Invalid {
                field: "record.kind",
                value: u64::from(other),
            }))
        }
    };
    r.end()?;
    Ok(Decoded::Record(
        CachedEvent {
            history,
            seqno,
            kind,
        },
        total,
    ))
}

fn write_outcome(w: &mut Writer, outcome: &CertOutcome) {
    match outcome {
        CertOutcome::Pass { depends_on } => {
            w.u8(0).i64(*depends_on);
        }
        CertOutcome::Fail { reason } => {
            w.u8(1);
            match reason {
                CertFailure::Conflict {
                    key,
                    earlier,
                    with_seqno,
                } => {
                    w.u8(1);
                    write_key(w, key);
                    w.u8(earlier.to_wsrep() as u8).i64(*with_seqno);
                }
                CertFailure::TooOld {
                    last_seen,
                    initial_position,
                } => {
                    w.u8(2).i64(*last_seen).i64(*initial_position);
                }
                CertFailure::IntervalTooLong {
                    seqno,
                    last_seen,
                    max_length,
                } => {
                    w.u8(3).i64(*seqno).i64(*last_seen).u64(*max_length);
                }
                CertFailure::InvalidLastSeen { seqno, last_seen } => {
                    w.u8(4).i64(*seqno).i64(*last_seen);
                }
                CertFailure::FailedInGalera => {
                    w.u8(5);
                }
            }
        }
    }
}

fn read_outcome(r: &mut Reader<'_>) -> Result<CertOutcome, DecodeError> {
    match r.u8("record.outcome")? {
        0 => Ok(CertOutcome::Pass {
            depends_on: r.i64("record.depends_on")?,
        }),
        1 => {
            let reason = match r.u8("record.failure")? {
                1 => {
                    let key = read_key(r)?;
                    let t = r.u8("record.earlier")?;
                    let earlier =
                        KeyType::from_wsrep(i32::from(t)).ok_or(DecodeError::Invalid {
                            field: "record.earlier",
                            value: u64::from(t),
                        })?;
                    CertFailure::Conflict {
                        key,
                        earlier,
                        with_seqno: r.i64("record.with_seqno")?,
                    }
                }
                2 => CertFailure::TooOld {
                    last_seen: r.i64("record.last_seen")?,
                    initial_position: r.i64("record.initial_position")?,
                },
                3 => CertFailure::IntervalTooLong {
                    seqno: r.i64("record.seqno")?,
                    last_seen: r.i64("record.last_seen")?,
                    max_length: r.u64("record.max_length")?,
                },
                4 => CertFailure::InvalidLastSeen {
                    seqno: r.i64("record.seqno")?,
                    last_seen: r.i64("record.last_seen")?,
                },
                5 => CertFailure::FailedInGalera,
                other => {
                    return Err(DecodeError::Invalid {
                        field: "record.failure",
                        value: u64::from(other),
                    })
                }
            };
            Ok(CertOutcome::Fail { reason })
        }
        other => Err(DecodeError::Invalid {
            field: "record.outcome",
            value: u64::from(other),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certification::Key;
    use proptest::prelude::*;

    const H: [u8; 16] = [3; 16];

    fn writeset(data: Vec<u8>) -> Arc<Writeset> {
        Arc::new(Writeset {
            source: [1; 16],
            trx_id: 7,
            conn_id: 9,
            last_seen: 4,
            flags: 3,
            keys: vec![Key::new(
                vec![b"db".to_vec(), b"t".to_vec(), vec![0, 1]],
                KeyType::Update,
            )],
            data: data.into(),
        })
    }

    fn samples() -> Vec<CachedEvent> {
        let fail = |reason| CachedEvent {
            history: H,
            seqno: 6,
            kind: CachedKind::Writeset {
                ws: writeset(vec![]),
                outcome: CertOutcome::Fail { reason },
            },
        };
        vec![
            CachedEvent {
                history: H,
                seqno: 5,
                kind: CachedKind::Writeset {
                    ws: writeset(b"row image".to_vec()),
                    outcome: CertOutcome::Pass { depends_on: 3 },
                },
            },
            fail(CertFailure::Conflict {
                key: Key::new(vec![b"k".to_vec()], KeyType::Exclusive),
                earlier: KeyType::Reference,
                with_seqno: 5,
            }),
            fail(CertFailure::TooOld {
                last_seen: 1,
                initial_position: 2,
            }),
            fail(CertFailure::IntervalTooLong {
                seqno: 9,
                last_seen: 1,
                max_length: 4,
            }),
            fail(CertFailure::InvalidLastSeen {
                seqno: 6,
                last_seen: 6,
            }),
            fail(CertFailure::FailedInGalera),
            CachedEvent {
                history: H,
                seqno: 7,
                kind: CachedKind::View {
                    members: 0x1234,
                    who: None,
                },
            },
            CachedEvent {
                history: H,
                seqno: 8,
                kind: CachedKind::View {
                    members: 0x5678,
                    who: Some(Arc::new(CachedMembers {
                        conf_id: 4,
                        members: vec![
                            CachedMember {
                                uuid: [1; 16],
                                name: "node1".into(),
                                incoming: "127.0.0.1:3306".into(),
                            },
                            CachedMember {
                                uuid: [2; 16],
                                name: "node2".into(),
                                incoming: String::new(),
                            },
                        ],
                    })),
                },
            },
            CachedEvent {
                history: H,
                seqno: 7,
                kind: CachedKind::End,
            },
        ]
    }

    #[test]
    fn every_kind_round_trips_and_records_follow_each_other() {
        let mut buf = Vec::new();
        for ev in samples() {
            encode_record(&ev, &mut buf);
        }
        let mut at = 0;
        for ev in samples() {
            match decode_record(&buf[at..], 1 << 20) {
                Ok(Decoded::Record(got, used)) => {
                    assert_eq!(got, ev);
                    at += used;
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(at, buf.len());
    }

    #[test]
    fn a_view_is_the_same_event_with_or_without_its_members() {
        let with = &samples()[7];
        let mut without = with.clone();
        if let CachedKind::View { who, .. } = &mut without.kind {
            assert!(who.is_some());
            *who = None;
        }
        assert_eq!(event_digest(with), event_digest(&without));
    }

    #[test]
    fn a_view_claiming_too_many_members_is_an_error() {
        let mut w = Writer::new();
        w.u8(K_VIEW_MEMBERS).uuid(&H).i64(1).u32(0).i64(1).u32(300);
        for i in 0..300u32 {
            w.uuid(&[i as u8; 16]).str("").str("");
        }
        let payload = w.finish();
        let mut buf = (payload.len() as u32).to_le_bytes().to_vec();
        buf.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        buf.extend_from_slice(&payload);
        assert!(matches!(
            decode_record(&buf, 1 << 20),
            Err(RecordError::Decode(DecodeError::Invalid {
                field: "record.member_count",
                ..
            }))
        ));
    }

    #[test]
    fn zeros_after_the_records_are_unwritten_space_not_a_record() {
        let mut buf = Vec::new();
        encode_record(&samples()[0], &mut buf);
        let used = buf.len();
        buf.resize(used + 4096, 0);
        assert!(matches!(
            decode_record(&buf, 1 << 20),
            Ok(Decoded::Record(_, n)) if n == used
        ));
        assert_eq!(decode_record(&buf[used..], 1 << 20), Ok(Decoded::Unwritten));
        // A length of 0 under a checksum is damage, not reserved space.
        let mut damaged = [0u8; RECORD_HEADER_LEN];
        damaged[5] = 1;
        assert!(decode_record(&damaged, 1 << 20).is_err());
    }

    #[test]
    fn a_partial_record_asks_for_the_rest() {
        let mut buf = Vec::new();
        encode_record(&samples()[0], &mut buf);
        assert_eq!(
            decode_record(&buf[..3], 1 << 20),
            Ok(Decoded::NeedMore(RECORD_HEADER_LEN))
        );
        assert_eq!(
            decode_record(&buf[..buf.len() - 1], 1 << 20),
            Ok(Decoded::NeedMore(buf.len()))
        );
    }

    #[test]
    fn a_flipped_bit_or_an_oversized_length_is_refused() {
        let mut buf = Vec::new();
        encode_record(&samples()[0], &mut buf);
        let mut bad = buf.clone();
        bad[20] ^= 0x10;
        assert!(matches!(
            decode_record(&bad, 1 << 20),
            Err(RecordError::Checksum { .. })
        ));
        // The bound is checked before waiting for the payload.
        assert!(matches!(
            decode_record(&buf[..RECORD_HEADER_LEN], 8),
            Err(RecordError::TooLarge { max: 8, .. })
        ));
    }

    /// The record and the digest as they were made before the data was
    /// left in its chunks: one buffer with everything copied into it.
    fn copied_record_and_digest(ev: &CachedEvent) -> (Vec<u8>, u32) {
        let CachedKind::Writeset { ws, outcome } = &ev.kind else {
            unreachable!("writesets only");
        };
        let mut w = Writer::new();
        w.u8(K_WRITESET).uuid(&ev.history).i64(ev.seqno);
        write_outcome(&mut w, outcome);
        crate::group::action::write_writeset(&mut w, ws);
        let payload = w.finish();
        let mut record = (payload.len() as u32).to_le_bytes().to_vec();
        record.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        record.extend_from_slice(&payload);
        let mut d = Writer::new();
        d.uuid(&ev.history).i64(ev.seqno);
        d.u8(K_WRITESET).u8(u8::from(outcome.is_pass()));
        crate::group::action::write_writeset(&mut d, ws);
        (record, crc32fast::hash(&d.finish()))
    }

    proptest! {
        /// A writeset's record in pieces (its data left in the chunks it
        /// arrived in) has the bytes and the digest of the copied one,
        /// however the data is cut.
        #[test]
        fn a_record_in_pieces_is_the_copied_record(
            data in proptest::collection::vec(any::<u8>(), 0..2048),
            cuts in proptest::collection::vec(0usize..2048, 0..6),
            pass in any::<bool>(),
        ) {
            let mut cuts: Vec<usize> = cuts.into_iter().filter(|c| *c < data.len()).collect();
            cuts.sort_unstable();
            let mut chunks = Vec::new();
            let mut at = 0;
            for c in cuts.into_iter().chain([data.len()]) {
                chunks.push(bytes::Bytes::copy_from_slice(&data[at..c.max(at)]));
                at = c.max(at);
            }
            let mut ws = (*writeset(Vec::new())).clone();
            ws.data = Payload::from_chunks(chunks);
            let outcome = if pass {
                CertOutcome::Pass { depends_on: 3 }
            } else {
                CertOutcome::Fail { reason: CertFailure::FailedInGalera }
            };
            let ev = CachedEvent {
                history: H,
                seqno: 12,
                kind: CachedKind::Writeset { ws: Arc::new(ws), outcome },
            };
            let (copied, digest) = copied_record_and_digest(&ev);
            let pieces = record_pieces(&ev);
            let joined: Vec<u8> = pieces.pieces().flat_map(|p| p.iter().copied()).collect();
            prop_assert_eq!(pieces.len(), copied.len());
            prop_assert_eq!(&joined, &copied);
            prop_assert_eq!(event_digest(&ev), digest);
            let mut encoded = Vec::new();
            encode_record(&ev, &mut encoded);
            prop_assert_eq!(encoded, copied);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode_record(&bytes, 1 << 16);
        }

        #[test]
        fn a_checksummed_payload_of_garbage_is_an_error_not_a_panic(
            payload in proptest::collection::vec(any::<u8>(), 0..128)
        ) {
            let mut buf = (payload.len() as u32).to_le_bytes().to_vec();
            buf.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
            buf.extend_from_slice(&payload);
            let _ = decode_record(&buf, 1 << 16);
        }

        #[test]
        fn writesets_of_any_content_round_trip(
            seqno in 0i64..1 << 40,
            depends in -1i64..100,
            data in proptest::collection::vec(any::<u8>(), 0..512),
        ) {
            let ev = CachedEvent {
                history: H,
                seqno,
                kind: CachedKind::Writeset {
                    ws: writeset(data),
                    outcome: CertOutcome::Pass { depends_on: depends },
                },
            };
            let mut buf = Vec::new();
            encode_record(&ev, &mut buf);
            prop_assert_eq!(decode_record(&buf, 1 << 20), Ok(Decoded::Record(ev, buf.len())));
        }
    }
}
