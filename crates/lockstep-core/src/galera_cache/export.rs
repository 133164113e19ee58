//! Lockstep's cache records written in Galera 26.4's ring buffer format,
//! the reverse of `to_cached`, for a switch back to Galera: Galera started
//! on the file (with `gcache.recover=yes`, its default) serves IST from it
//! to the nodes that stopped behind, instead of a full SST.
//!
//! What is written: a writeset as WriteSetNG version 6 (what Galera
//! 26.4.23 writes; the header is that of versions 3-5), certified (flags
//! with `F_CERTIFIED`, the seqno and `pa_range = seqno - depends_on`, at
//! most 0xFFFF, which only makes the dependency stricter), with no key set
//! (IST does not certify what it applies) and its data as one data-set
//! record; a failed writeset as Galera keeps one (`pa_range` 0, the buffer
//! marked skipped); a view with its members as a configuration change.
//! A view recorded without its members, or one whose change would need
//! SpookyHash (512 bytes or more), cannot be written: the run starts after
//! it.

use super::murmur::{mmh128, mmh32, SEED128, SEED32};
use super::ring::{self, HEADER_LEN, RING_START};
use crate::certification::CertOutcome;
use crate::writeset_cache::{CachedEvent, CachedKind};

/// The WriteSetNG versions byte written: 6, readable from 3 on, as Galera
/// 26.4.23 writes it.
const WS_VERSION_BYTE: u8 = 0x63;
const WS_HEADER: usize = 64;
/// Key set EMPTY (0), data set VER1 (1 << 2).
const SETS_DATA_ONLY: u8 = 0x04;
/// Record set VER2, checksum MMH128; with the short-header bit.
const RSET_VER2_MMH128: u8 = 0x23;
const RSET_SHORT: u8 = 0x08;
/// What a configuration change says of the protocols: Galera 26.4.23 with
/// MariaDB 10.11 writes replication protocol 11 and application protocol 4
/// (read off its own cache).
const CC_REPL_PROTO: i32 = 11;
const CC_APPL_PROTO: i32 = 4;
/// A member's state in a configuration change: SYNCED.
const CC_SYNCED: u8 = 5;
/// Longest change the 128-bit MurmurHash covers (Galera's rule).
const CC_MMH_LIMIT: usize = 512;

fn uleb(mut v: u64, out: &mut Vec<u8>) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// One record set (VER2, MMH128) holding `data` as its single record.
fn data_set(data: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    let short_size = 8 + 16 + data.len();
    let header: Vec<u8> = if short_size <= 16384 {
        let h = u32::from(RSET_VER2_MMH128 | RSET_SHORT) | ((short_size as u32 - 1) << 18);
        h.to_le_bytes().to_vec()
    } else {
        // Long header: version, ULEB size and count, zero padding so that
        // the CRC ends at a multiple of 8; the size counts the header.
        let mut hlen = 16;
        loop {
            let size = (hlen + 16 + data.len()) as u64;
            let mut h = vec![RSET_VER2_MMH128];
            uleb(size, &mut h);
            uleb(1, &mut h);
            let crc_at = (h.len() + 4).next_multiple_of(8) - 4;
            if crc_at + 4 == hlen {
                h.resize(crc_at, 0);
                break h;
            }
            hlen = crc_at + 4;
        }
    };
    out.extend_from_slice(&header);
    out.extend_from_slice(&mmh32(&header, SEED32).to_le_bytes());
    let head_end = out.len();
    let size = head_end - start + 16 + data.len();
    let mut records = data.to_vec();
    records.resize(size.next_multiple_of(8) - (head_end - start + 16), 0);
    let sum = mmh128(&[&records, &out[start..head_end]], SEED128);
    out.extend_from_slice(&sum);
    out.extend_from_slice(&records);
}

/// A certified writeset in WriteSetNG 6 (`depends_on` `None`: it failed).
pub fn encode_writeset(
    seqno: i64,
    ws: &crate::group::Writeset,
    depends_on: Option<i64>,
) -> Vec<u8> {
    let data = ws.data.contiguous();
    let mut b = Vec::with_capacity(WS_HEADER + 48 + data.len());
    b.push(b'G');
    b.push(WS_VERSION_BYTE);
    b.push(WS_HEADER as u8);
    b.push(if data.is_empty() { 0 } else { SETS_DATA_ONLY });
    let flags = (ws.flags as u16 & super::writeset::WSREP_FLAGS) | super::writeset::F_CERTIFIED;
    b.extend_from_slice(&flags.to_le_bytes());
    let pa_range = depends_on.map_or(0, |d| seqno.saturating_sub(d).clamp(1, 0xFFFF) as u16);
    b.extend_from_slice(&pa_range.to_le_bytes());
    b.extend_from_slice(&seqno.to_le_bytes());
    b.extend_from_slice(&0i64.to_le_bytes()); // timestamp: not kept
    b.extend_from_slice(&ws.source);
    b.extend_from_slice(&ws.conn_id.to_le_bytes());
    b.extend_from_slice(&ws.trx_id.to_le_bytes());
    let sum = mmh128(&[&b], SEED128);
    b.extend_from_slice(&sum[..8]);
    if !data.is_empty() {
        data_set(&data, &mut b);
    }
    b
}

fn uuid_text(u: &[u8; 16]) -> String {
    wsrep_abi::Uuid::from_bytes(*u).to_string()
}

/// A configuration change, or `None` when it would need SpookyHash.
pub fn encode_cchange(
    history: &[u8; 16],
    seqno: i64,
    members: &crate::writeset_cache::CachedMembers,
) -> Option<Vec<u8>> {
    let mut b = vec![0u8];
    b.extend_from_slice(
        format!(
            "0,{CC_REPL_PROTO},{CC_APPL_PROTO},{}:{seqno},{},-1,0,{}",
            uuid_text(history),
            members.conf_id,
            members.members.len()
        )
        .as_bytes(),
    );
    b.push(0);
    for m in &members.members {
        for s in [uuid_text(&m.uuid).as_str(), &m.name, &m.incoming] {
            b.extend_from_slice(s.as_bytes());
            b.push(0);
        }
        b.extend_from_slice(&(-1i64).to_le_bytes());
        b.push(CC_SYNCED);
    }
    b.resize((b.len() + 8).next_multiple_of(8) - 8, 0);
    if b.len() + 8 >= CC_MMH_LIMIT {
        return None;
    }
    let sum = mmh128(&[&b], SEED128);
    b.extend_from_slice(&sum[..8]);
    Some(b)
}

/// A Galera buffer for `ev`: its type, flags and payload; `None` when it
/// cannot be written (see the module).
pub fn to_galera(ev: &CachedEvent) -> Option<(i8, u16, Vec<u8>)> {
    match &ev.kind {
        CachedKind::Writeset { ws, outcome } => {
            let depends_on = match outcome {
                CertOutcome::Pass { depends_on } => Some(*depends_on),
                CertOutcome::Fail { .. } => None,
            };
            let flags = ring::BUFFER_RELEASED
                | if depends_on.is_none() {
                    ring::BUFFER_SKIPPED
                } else {
                    0
                };
            Some((
                ring::TYPE_WRITESET,
                flags,
                encode_writeset(ev.seqno, ws, depends_on),
            ))
        }
        CachedKind::View { who: Some(w), .. } => encode_cchange(&ev.history, ev.seqno, w)
            .map(|p| (ring::TYPE_CCHANGE, ring::BUFFER_RELEASED, p)),
        CachedKind::View { who: None, .. } | CachedKind::End => None,
    }
}

/// A buffer header for a payload of `len` bytes; the buffer takes
/// `header[16..20]` bytes (padded to 8).
pub fn buffer_header(seqno: i64, kind: i8, flags: u16, len: usize) -> [u8; HEADER_LEN as usize] {
    let size = (HEADER_LEN as usize + len).next_multiple_of(8) as u32;
    let mut h = [0u8; HEADER_LEN as usize];
    h[0..8].copy_from_slice(&seqno.to_le_bytes());
    h[16..20].copy_from_slice(&size.to_le_bytes());
    h[20..22].copy_from_slice(&flags.to_le_bytes());
    h[22] = 1; // the ring buffer's store
    h[23] = kind as u8;
    h
}

/// The preamble and header area (1280 bytes) of a ring whose buffers,
/// from offset 1280 on, hold `first..=last` of `history`, as Galera
/// writes it at a clean stop.
pub fn preamble(history: &[u8; 16], first: i64, last: i64) -> Vec<u8> {
    let text = format!(
        "Version: {}\nGID: {}\nseqno_min: {first}\nseqno_max: {last}\noffset: {RING_START}\nsynced: 1\n",
        ring::SUPPORTED_VERSION,
        uuid_text(history)
    );
    let mut b = text.into_bytes();
    b.resize(RING_START as usize, 0);
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certification::CertFailure;
    use crate::galera_cache::{scan, to_cached};
    use crate::group::Writeset;
    use crate::writeset_cache::{CachedMember, CachedMembers};
    use std::sync::Arc;

    const H: [u8; 16] = [7; 16];

    fn ws(data: usize) -> Arc<Writeset> {
        Arc::new(Writeset {
            source: [3; 16],
            trx_id: 99,
            conn_id: 5,
            last_seen: 8,
            flags: 0x41,
            keys: Vec::new(),
            data: (0..data).map(|i| i as u8).collect::<Vec<u8>>().into(),
        })
    }

    fn events() -> Vec<CachedEvent> {
        let view = CachedKind::View {
            members: 0,
            who: Some(Arc::new(CachedMembers {
                conf_id: 4,
                members: vec![CachedMember {
                    uuid: [9; 16],
                    name: "node1".into(),
                    incoming: "10.0.0.1:3306".into(),
                }],
            })),
        };
        let pass = |seqno, data, depends_on| CachedEvent {
            history: H,
            seqno,
            kind: CachedKind::Writeset {
                ws: ws(data),
                outcome: CertOutcome::Pass { depends_on },
            },
        };
        vec![
            CachedEvent {
                history: H,
                seqno: 10,
                kind: view,
            },
            pass(11, 100, 9),
            // Above the short record set (16 KiB): a long header.
            pass(12, 70_000, 11),
            CachedEvent {
                history: H,
                seqno: 13,
                kind: CachedKind::Writeset {
                    ws: ws(10),
                    outcome: CertOutcome::Fail {
                        reason: CertFailure::FailedInGalera,
                    },
                },
            },
            // 70 000 behind: the range is capped, the dependency stricter.
            pass(14, 1, -69_986),
        ]
    }

    /// Written as a ring and read back with the reader that checks every
    /// checksum: the same events, as far as Galera keeps them.
    #[test]
    fn a_written_ring_reads_back() {
        let evs = events();
        let mut f = preamble(&H, 10, 14);
        for ev in &evs {
            let (kind, flags, payload) = to_galera(ev).expect("writable");
            f.extend_from_slice(&buffer_header(ev.seqno, kind, flags, payload.len()));
            f.extend_from_slice(&payload);
            f.resize(f.len().next_multiple_of(8), 0);
        }
        f.extend_from_slice(&[0; 24]);
        let s = scan(&f[..]).unwrap();
        assert_eq!(s.preamble.gid, H);
        assert_eq!(s.run.len(), evs.len());
        for (b, want) in s.run.iter().zip(&evs) {
            let at = b.payload_at as usize;
            let got = to_cached(b, &f[at..at + b.payload_len as usize], H).unwrap();
            assert_eq!(got.seqno, want.seqno);
            match (&got.kind, &want.kind) {
                (
                    CachedKind::Writeset { ws: g, outcome: go },
                    CachedKind::Writeset { ws: w, outcome: wo },
                ) => {
                    match (go, wo) {
                        (
                            CertOutcome::Pass { depends_on: d },
                            CertOutcome::Pass { depends_on: e },
                        ) => {
                            assert_eq!(*d, (*e).max(want.seqno - 0xFFFF), "seqno {}", want.seqno)
                        }
                        (CertOutcome::Fail { .. }, CertOutcome::Fail { .. }) => continue,
                        other => panic!("{other:?}"),
                    }
                    assert_eq!(g.data.contiguous(), w.data.contiguous());
                    assert_eq!(
                        (g.source, g.conn_id, g.trx_id, g.flags),
                        (w.source, w.conn_id, w.trx_id, w.flags)
                    );
                }
                (CachedKind::View { who: Some(g), .. }, CachedKind::View { who: Some(w), .. }) => {
                    assert_eq!(g, w)
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn what_galera_cannot_take_is_not_written() {
        let no_members = CachedEvent {
            history: H,
            seqno: 3,
            kind: CachedKind::View {
                members: 1,
                who: None,
            },
        };
        assert!(to_galera(&no_members).is_none());
        let crowd = CachedMembers {
            conf_id: 1,
            members: (0..8)
                .map(|i| CachedMember {
                    uuid: [i; 16],
                    name: format!("a-rather-long-node-name-{i}"),
                    incoming: "10.0.0.1:3306".into(),
                })
                .collect(),
        };
        assert!(encode_cchange(&H, 3, &crowd).is_none(), "needs SpookyHash");
    }
}
