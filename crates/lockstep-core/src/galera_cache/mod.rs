//! Galera's on-disk writeset cache (`galera.cache`, the 26.4 ring buffer)
//! read back, so that a cluster switched from Galera to Lockstep serves
//! IST from what Galera cached and no node that stopped behind the others
//! needs a full SST (issue 36); the provider converts the usable run into
//! its own cache. `export` writes the reverse, for a switch back.
//!
//! Layers: `murmur` (Galera's checksums), `ring` (preamble, buffer
//! headers, the gap-free run of ordered buffers), `writeset` (a WriteSetNG
//! buffer: header, record sets, the data the server applies), `cchange`
//! (a configuration change: its members). Every length is checked against
//! the bytes present, every checksum Galera keeps is verified, and a bad
//! buffer ends the run at it instead of being trusted.

pub mod cchange;
pub mod export;
pub mod murmur;
pub mod ring;
pub mod writeset;

pub use ring::{scan, scan_up_to, BufferInfo, ReadAt, RingScan};

use std::sync::Arc;

use crate::certification::{CertFailure, CertOutcome};
use crate::group::Writeset;
use crate::writeset_cache::{membership_digest, CachedEvent, CachedKind, CachedMembers};
use writeset::WsError;

/// The cache record of Lockstep's for one ordered Galera buffer of the run
/// (`payload`: its bytes, padding included) on `history`.
///
/// - A configuration change becomes a view with its members.
/// - A writeset Galera certified becomes a passed writeset depending on
///   what Galera computed (seqno minus pa_range), with its data and no
///   keys (IST applies; it does not certify again). Galera keeps no
///   last_seen once certified (the seqno overwrites it), so the record's
///   is `seqno - 1` on every node. Not the dependency: Galera's pa_range
///   for one writeset differs between the node that sent it and the others
///   (seen on 26.4.23), and last_seen is part of the event's digest, which
///   must be the same on every node or IST between two converted caches
///   reports a history fork.
/// - A writeset Galera failed or skipped becomes a failed one
///   ([`CertFailure::FailedInGalera`]) in one canonical, empty form: a
///   skipped buffer's bytes are not read (Galera leaves them undefined),
///   and one node may have skipped what another kept with its failure.
pub fn to_cached(
    info: &BufferInfo,
    payload: &[u8],
    history: [u8; 16],
) -> Result<CachedEvent, WsError> {
    let kind = match info.kind {
        ring::TYPE_CCHANGE => {
            let v = cchange::parse(payload)?;
            if v.seqno != info.seqno || v.history != history {
                return Err(WsError(format!(
                    "configuration change for seqno {} of another history in the buffer of {}",
                    v.seqno, info.seqno
                )));
            }
            // A change too large for the checksum Lockstep computes keeps
            // its seqno but shows no members (never an empty member list,
            // which a joiner's server would take for its own final view).
            let digest = membership_digest(v.conf_id, v.members.iter().flatten().map(|m| m.uuid));
            CachedKind::View {
                members: digest,
                who: v.members.map(|members| {
                    Arc::new(CachedMembers {
                        conf_id: v.conf_id,
                        members,
                    })
                }),
            }
        }
        _ if info.skipped() => failed_in_galera(info.seqno),
        _ => {
            let g = writeset::parse(payload)?;
            if g.certified_seqno != Some(info.seqno) {
                return Err(WsError(format!(
                    "seqno {} is not certified in its buffer (header says {:?})",
                    info.seqno, g.certified_seqno
                )));
            }
            match g.depends_on() {
                Some(depends_on) => CachedKind::Writeset {
                    ws: Arc::new(Writeset {
                        source: g.source,
                        trx_id: g.trx_id,
                        conn_id: g.conn_id,
                        last_seen: info.seqno - 1,
                        flags: g.wsrep_flags,
                        keys: Vec::new(),
                        data: payload[g.data].to_vec().into(),
                    }),
                    outcome: CertOutcome::Pass { depends_on },
                },
                None => failed_in_galera(info.seqno),
            }
        }
    };
    Ok(CachedEvent {
        history,
        seqno: info.seqno,
        kind,
    })
}

/// The one form of a writeset Galera failed or skipped at `seqno`.
fn failed_in_galera(seqno: i64) -> CachedKind {
    CachedKind::Writeset {
        ws: Arc::new(Writeset {
            source: [0; 16],
            trx_id: 0,
            conn_id: 0,
            last_seen: seqno - 1,
            flags: 0,
            keys: Vec::new(),
            data: Vec::new().into(),
        }),
        outcome: CertOutcome::Fail {
            reason: CertFailure::FailedInGalera,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::ring::tests::ring_file;
    use super::ring::{BUFFER_RELEASED, BUFFER_SKIPPED, TYPE_CCHANGE, TYPE_WRITESET};
    use super::*;

    const H: &str = "38a1b360-ea5c-11f1-9d53-2257cdddea97";

    #[test]
    fn a_ring_becomes_cache_records() {
        let cc = cchange::tests::encode(
            H,
            1004,
            7,
            &[("44adb613-ea5c-11f1-8bb4-ce665dc2cea1", "n1")],
        );
        let f = ring_file(
            H,
            Some(ring::RING_START),
            &[
                (
                    1003,
                    TYPE_WRITESET,
                    BUFFER_RELEASED | BUFFER_SKIPPED,
                    vec![0; 8],
                ),
                (1004, TYPE_CCHANGE, BUFFER_RELEASED, cc),
                (
                    1005,
                    TYPE_WRITESET,
                    BUFFER_RELEASED,
                    writeset::tests::example(),
                ),
            ],
            4096,
        );
        let s = scan(&f[..]).unwrap();
        let gid = s.preamble.gid;
        let events: Vec<CachedEvent> = s
            .run
            .iter()
            .map(|b| {
                let at = b.payload_at as usize;
                to_cached(b, &f[at..at + b.payload_len as usize], gid).unwrap()
            })
            .collect();
        assert_eq!(events.len(), 3);
        match &events[0].kind {
            CachedKind::Writeset { outcome, .. } => assert_eq!(
                *outcome,
                CertOutcome::Fail {
                    reason: CertFailure::FailedInGalera
                }
            ),
            other => panic!("{other:?}"),
        }
        match &events[1].kind {
            CachedKind::View { who: Some(w), .. } => {
                assert_eq!(w.conf_id, 7);
                assert_eq!(w.members[0].name, "n1");
            }
            other => panic!("{other:?}"),
        }
        match &events[2].kind {
            CachedKind::Writeset { ws, outcome } => {
                assert_eq!(*outcome, CertOutcome::Pass { depends_on: 1003 });
                assert_eq!(
                    &ws.data.contiguous()[..],
                    b"BINLOG-EVENT-1:\0\x01\x02\x03\x04EV2!!"
                );
                assert_eq!((ws.conn_id, ws.trx_id, ws.flags), (12, 345, 0x41));
            }
            other => panic!("{other:?}"),
        }
        // A buffer whose header names another seqno than the ring's is
        // refused, not trusted.
        let mut wrong = s.run[2];
        wrong.seqno = 1006;
        let at = wrong.payload_at as usize;
        assert!(to_cached(&wrong, &f[at..at + wrong.payload_len as usize], gid).is_err());
    }

    /// Galera 26.4.23 stored pa_range 3 for a writeset on the node that sent
    /// it and 4 on another (a real switch test, seqno 133): the two
    /// conversions must still be one event, or IST between them fails as a
    /// history fork. A failure kept by one node and skipped by another is
    /// one event too.
    #[test]
    fn every_node_converts_one_galera_event_to_the_same_digest() {
        use crate::writeset_cache::event_digest;
        let history = [7u8; 16];
        let ws = Writeset {
            source: [9; 16],
            trx_id: 182,
            conn_id: 9,
            last_seen: 0,
            flags: 0x41,
            keys: Vec::new(),
            data: b"INSERT".to_vec().into(),
        };
        let convert = |payload: Vec<u8>, flags: u16| {
            let info = BufferInfo {
                seqno: 133,
                payload_at: 0,
                payload_len: payload.len() as u32,
                flags,
                kind: TYPE_WRITESET,
            };
            to_cached(&info, &payload, history).unwrap()
        };
        let sender = convert(
            export::encode_writeset(133, &ws, Some(130)),
            BUFFER_RELEASED,
        );
        let other = convert(
            export::encode_writeset(133, &ws, Some(129)),
            BUFFER_RELEASED,
        );
        assert_eq!(event_digest(&sender), event_digest(&other));
        for (ev, depends_on) in [(&sender, 130), (&other, 129)] {
            match &ev.kind {
                CachedKind::Writeset { outcome, .. } => {
                    assert_eq!(*outcome, CertOutcome::Pass { depends_on })
                }
                k => panic!("{k:?}"),
            }
        }
        let failed = convert(export::encode_writeset(133, &ws, None), BUFFER_RELEASED);
        let skipped = convert(vec![0; 8], BUFFER_RELEASED | BUFFER_SKIPPED);
        assert_eq!(event_digest(&failed), event_digest(&skipped));
        assert_ne!(event_digest(&failed), event_digest(&sender));
    }
}
