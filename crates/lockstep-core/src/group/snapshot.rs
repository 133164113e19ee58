//! The sequencer's complete state as bytes: what a Raft snapshot carries
//! when the log is compacted, so a node that joins after compaction starts
//! from exactly the state every member has at that log position.
//!
//! The certification index is not serialised as such: the snapshot holds
//! the writesets above the purge point (keys only, no data), and restoring
//! preloads them into a fresh certifier (contract §6.5), which rebuilds the
//! same index. Format: `docs/formats.md`.

use super::action::{
    read_key, read_member, write_key, write_member, Writeset, ACTION_VERSION, BINDING_VERSION,
};
use super::member_state::MemberState;
use super::payload::Payload;
use super::sequencer::{Member, Partial, Sequencer};
use crate::certification::{CertRequest, Certifier};
use crate::wire::codec::{DecodeError, Reader, Writer};
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use wsrep_abi::flags;

const MAGIC: u32 = 0x4c4b_5353; // "LKSS"

fn state_code(s: MemberState) -> u8 {
    match s {
        MemberState::Undefined => 0,
        MemberState::Joiner => 1,
        MemberState::Donor => 2,
        MemberState::Joined => 3,
        MemberState::Synced => 4,
        MemberState::Error => 5,
    }
}

fn state_from(code: u8) -> Result<MemberState, DecodeError> {
    Ok(match code {
        0 => MemberState::Undefined,
        1 => MemberState::Joiner,
        2 => MemberState::Donor,
        3 => MemberState::Joined,
        4 => MemberState::Synced,
        5 => MemberState::Error,
        v => {
            return Err(DecodeError::Invalid {
                field: "member.state",
                value: u64::from(v),
            })
        }
    })
}

/// A member's flag bits in a snapshot.
const VOTER: u8 = 1;
const ARBITRATOR: u8 = 2;
/// `gcs.stateless` (set only in a cluster at `STATELESS_VERSION`).
const STATELESS: u8 = 4;

fn member_flags(m: &Member) -> u8 {
    (if m.voter { VOTER } else { 0 })
        | (if m.arbitrator { ARBITRATOR } else { 0 })
        | if m.stateless { STATELESS } else { 0 }
}

impl Sequencer {
    /// Serialises the whole state.
    pub fn snapshot(&self) -> Vec<u8> {
        let s = self;
        let mut w = Writer::new();
        w.u32(MAGIC).u8(ACTION_VERSION);
        w.u8(u8::from(s.history.is_some()));
        w.uuid(&s.history.unwrap_or_default());
        w.i64(s.last_seqno).i64(s.conf_id).i64(s.last_view_seqno);
        w.i64(s.purged_upto);
        w.i64(s.certifier.initial_position())
            .i64(s.certifier.purged_upto());
        w.i64(s.certifier.last_pa_unsafe());
        w.u64(s.delivered).u32(s.cluster_version);
        w.u32(s.members.len() as u32);
        for m in &s.members {
            write_member(&mut w, &m.info);
            w.u8(state_code(m.state))
                .u8(member_flags(m))
                .u32(m.weight)
                .u32(m.max_version);
        }
        let mut committed: Vec<_> = s.committed.iter().collect();
        committed.sort();
        w.u32(committed.len() as u32);
        for (id, seqno) in committed {
            w.u64(*id).i64(*seqno);
        }
        let mut applied: Vec<_> = s.applied.iter().collect();
        applied.sort();
        w.u32(applied.len() as u32);
        for (id, index) in applied {
            w.u64(*id).u64(*index);
        }
        let mut seen: Vec<_> = s.seen.iter().collect();
        seen.sort_by_key(|(k, _)| **k);
        w.u32(seen.len() as u32);
        for (origin, ids) in seen {
            w.u64(*origin).u32(ids.len() as u32);
            for id in ids {
                w.u64(*id);
            }
        }
        w.u32(s.window.len() as u32);
        for (seqno, ws, passed) in &s.window {
            w.i64(*seqno).u8(u8::from(*passed));
            w.uuid(&ws.source).u32(ws.flags).i64(ws.last_seen);
            w.u32(ws.keys.len() as u32);
            for k in &ws.keys {
                write_key(&mut w, k);
            }
        }
        // Fragmented actions partly ordered before the snapshot point: a
        // joiner restored from it must complete them like every member.
        w.u32(s.partial.len() as u32);
        for ((origin, of), p) in &s.partial {
            w.u64(*origin)
                .u64(*of)
                .u32(p.count())
                .u32(p.received() as u32);
            for (index, bytes) in p.parts() {
                w.u32(index).bytes(bytes);
            }
        }
        // From the binding version on: each member's certificate.
        if s.cluster_version >= BINDING_VERSION {
            w.u32(s.bindings.len() as u32);
            for (id, fp) in &s.bindings {
                w.u64(*id).digest(fp);
            }
        }
        w.finish()
    }

    /// Rebuilds a sequencer from [`Sequencer::snapshot`] bytes.
    pub fn restore(bytes: &[u8]) -> Result<Sequencer, DecodeError> {
        let mut r = Reader::new(bytes);
        if r.u32("snapshot.magic")? != MAGIC {
            return Err(DecodeError::Invalid {
                field: "snapshot.magic",
                value: 0,
            });
        }
        let version = r.u8("snapshot.version")?;
        if version != ACTION_VERSION {
            return Err(DecodeError::Invalid {
                field: "snapshot.version",
                value: u64::from(version),
            });
        }
        let has_history = r.u8("snapshot.has_history")? != 0;
        let history = r.uuid("snapshot.history")?;
        let last_seqno = r.i64("snapshot.last_seqno")?;
        let conf_id = r.i64("snapshot.conf_id")?;
        let last_view_seqno = r.i64("snapshot.last_view_seqno")?;
        let purged_upto = r.i64("snapshot.purged_upto")?;
        let cert_initial = r.i64("snapshot.cert_initial")?;
        let cert_purged = r.i64("snapshot.cert_purged")?;
        let last_pa_unsafe = r.i64("snapshot.last_pa_unsafe")?;
        let delivered = r.u64("snapshot.delivered")?;
        let cluster_version = r.u32("snapshot.cluster_version")?;
        let n = r.count("snapshot.members", 34)?;
        let mut members = Vec::with_capacity(n);
        for _ in 0..n {
            let info = read_member(&mut r)?;
            let state = state_from(r.u8("member.state")?)?;
            let flags = r.u8("member.flags")?;
            if flags & !(VOTER | ARBITRATOR | STATELESS) != 0 {
                return Err(DecodeError::Invalid {
                    field: "member.flags",
                    value: u64::from(flags),
                });
            }
            let weight = r.u32("member.weight")?;
            let max_version = r.u32("member.max_version")?;
            members.push(Member {
                info,
                state,
                voter: flags & VOTER != 0,
                weight,
                arbitrator: flags & ARBITRATOR != 0,
                stateless: flags & STATELESS != 0,
                max_version,
            });
        }
        let n = r.count("snapshot.committed", 16)?;
        let mut committed = HashMap::with_capacity(n);
        for _ in 0..n {
            committed.insert(r.u64("committed.id")?, r.i64("committed.seqno")?);
        }
        let n = r.count("snapshot.applied", 16)?;
        let mut applied = HashMap::with_capacity(n);
        for _ in 0..n {
            applied.insert(r.u64("applied.id")?, r.u64("applied.index")?);
        }
        let n = r.count("snapshot.seen", 12)?;
        let mut seen = HashMap::with_capacity(n);
        for _ in 0..n {
            let origin = r.u64("seen.origin")?;
            let k = r.count("seen.ids", 8)?;
            let mut ids = BTreeSet::new();
            for _ in 0..k {
                ids.insert(r.u64("seen.id")?);
            }
            seen.insert(origin, ids);
        }
        let n = r.count("snapshot.window", 37)?;
        let mut window = VecDeque::with_capacity(n);
        let mut certifier = Certifier::new(cert_initial);
        for _ in 0..n {
            let seqno = r.i64("window.seqno")?;
            let passed = r.u8("window.passed")? != 0;
            let source = r.uuid("window.source")?;
            let wsflags = r.u32("window.flags")?;
            let ws_last_seen = r.i64("window.last_seen")?;
            let k = r.count("window.keys", 5)?;
            let mut keys = Vec::with_capacity(k);
            for _ in 0..k {
                keys.push(read_key(&mut r)?);
            }
            let req = CertRequest {
                seqno,
                last_seen: ws_last_seen,
                source,
                is_toi: wsflags & flags::ISOLATION != 0,
                pa_unsafe: wsflags & flags::PA_UNSAFE != 0,
                implicit_deps: wsflags & flags::IMPLICIT_DEPS != 0,
                keys: &keys,
            };
            certifier
                .preload(&req, passed)
                .map_err(|_| DecodeError::Invalid {
                    field: "window.seqno",
                    value: seqno as u64,
                })?;
            let ws = Writeset {
                source,
                trx_id: 0,
                conn_id: 0,
                last_seen: ws_last_seen,
                flags: wsflags,
                keys,
                data: Payload::default(),
            };
            window.push_back((seqno, Arc::new(ws), passed));
        }
        let n = r.count("snapshot.partial", 24)?;
        let mut partial = BTreeMap::new();
        for _ in 0..n {
            let origin = r.u64("partial.origin")?;
            let of = r.u64("partial.of")?;
            let count = r.u32("partial.count")?;
            let k = r.count("partial.parts", 8)?;
            let mut p = Partial::new(count);
            for _ in 0..k {
                let index = r.u32("partial.index")?;
                let part = Bytes::copy_from_slice(r.bytes("partial.bytes")?);
                p.insert(index, part);
            }
            partial.insert((origin, of), p);
        }
        let mut bindings = BTreeMap::new();
        if cluster_version >= BINDING_VERSION {
            let n = r.count("snapshot.bindings", 40)?;
            for _ in 0..n {
                let id = r.u64("binding.raft_id")?;
                bindings.insert(id, r.digest("binding.fingerprint")?);
            }
        }
        r.end()?;
        if last_seqno > certifier.position() {
            certifier
                .note_non_writeset(last_seqno)
                .map_err(|_| DecodeError::Invalid {
                    field: "snapshot.last_seqno",
                    value: last_seqno as u64,
                })?;
        }
        certifier.purge_upto(cert_purged);
        certifier.restore_last_pa_unsafe(last_pa_unsafe);
        Ok(Sequencer {
            history: has_history.then_some(history),
            last_seqno,
            conf_id,
            last_view_seqno,
            members,
            certifier,
            committed,
            purged_upto,
            seen,
            window_keys: window.iter().map(|(_, ws, _)| ws.keys.len()).sum(),
            window,
            reaped: Vec::new(),
            applied,
            delivered,
            votes: Default::default(),
            partial,
            cluster_version,
            bindings,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certification::{Key, KeyType};
    use crate::group::action::tests::member;
    use crate::group::action::{Action, Proposal};
    use crate::group::sequencer::{Delivery, Membership, OrderedWriteset};

    /// A deterministic stream of proposals from three members: writesets
    /// on a small key space (conflicts), commit reports (purges), state
    /// messages, fences.
    fn stream(seed: u64, n: usize) -> Vec<Proposal> {
        let mut x = seed | 1;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut last = 1i64;
        (0..n)
            .flat_map(|i| -> Vec<Proposal> {
                let origin = 1 + next() % 3;
                let action = match next() % 10 {
                    0 => Action::Committed {
                        raft_id: origin,
                        seqno: last - (next() % 5) as i64,
                        applied: i as u64,
                    },
                    1 => Action::Barrier {
                        raft_id: origin,
                        id: i as u64,
                    },
                    _ => {
                        last += 1;
                        let kind = KeyType::ALL[(next() % 4) as usize];
                        let row = (next() % 12).to_string();
                        Action::Writeset(Writeset {
                            source: [origin as u8; 16],
                            trx_id: i as u64,
                            conn_id: origin,
                            last_seen: last - 1 - (next() % 6) as i64,
                            flags: if next() % 17 == 0 {
                                flags::PA_UNSAFE
                            } else {
                                0
                            },
                            keys: vec![Key::new(
                                vec![b"db".to_vec(), b"t".to_vec(), row.into_bytes()],
                                kind,
                            )],
                            data: vec![1, 2, 3].into(),
                        })
                    }
                };
                let id = 1000 + i as u64;
                // Every fifth writeset travels as fragments of 16 bytes:
                // snapshots are then taken with fragments in flight.
                if matches!(action, Action::Writeset(_)) && next() % 5 == 0 {
                    return fragments(origin, id, &action, 16);
                }
                vec![Proposal { origin, id, action }]
            })
            .collect()
    }

    /// `action` as `Action::Fragment`s of `step` bytes, delivered as `of`.
    fn fragments(origin: u64, of: u64, action: &Action, step: usize) -> Vec<Proposal> {
        let bytes = crate::group::action::encode_action(action);
        let count = bytes.len().div_ceil(step) as u32;
        bytes
            .chunks(step)
            .enumerate()
            .map(|(k, part)| Proposal {
                origin,
                id: (of << 8) + k as u64,
                action: Action::Fragment {
                    of,
                    index: k as u32,
                    count,
                    bytes: Bytes::copy_from_slice(part),
                },
            })
            .collect()
    }

    fn big_writeset(origin: u64) -> Action {
        Action::Writeset(Writeset {
            source: [origin as u8; 16],
            trx_id: 9,
            conn_id: origin,
            last_seen: 0,
            flags: 0,
            keys: vec![Key::new(
                vec![b"db".to_vec(), b"t".to_vec(), b"1".to_vec()],
                KeyType::Exclusive,
            )],
            data: (0..5000u32).map(|i| i as u8).collect(),
        })
    }

    #[test]
    fn fragments_deliver_the_whole_writeset_once_in_any_order() {
        let (mut s, _) = founded();
        let action = big_writeset(2);
        let mut parts = fragments(2, 77, &action, 700);
        assert!(parts.len() > 5);
        parts.reverse();
        // A retried part is a duplicate proposal: settled, not used twice.
        parts.insert(2, parts[0].clone());
        let mut out = Vec::new();
        s.entry(parts, &mut out).unwrap();
        let delivered: Vec<&Delivery> = out
            .iter()
            .filter(|d| matches!(d, Delivery::Writeset(_)))
            .collect();
        assert_eq!(delivered.len(), 1);
        let Delivery::Writeset(OrderedWriteset { proposal, ws, .. }) = delivered[0] else {
            unreachable!()
        };
        assert_eq!(*proposal, 77);
        assert_eq!(Action::Writeset((**ws).clone()), action);
        assert!(s.partial.is_empty());
    }

    #[test]
    fn partly_received_fragments_are_bounded_and_leave_with_their_origin() {
        let (mut s, _) = founded();
        let mut out = Vec::new();
        // The first part of more actions than one member may have open.
        for of in 0..=super::super::sequencer::MAX_PARTIAL_PER_ORIGIN as u64 {
            let first = fragments(2, 100 + of, &big_writeset(2), 700).remove(0);
            s.entry(vec![first], &mut out).unwrap();
        }
        let last = 100 + super::super::sequencer::MAX_PARTIAL_PER_ORIGIN as u64;
        assert!(
            out.iter().any(|d| matches!(d,
                Delivery::Settled { origin: 2, proposal } if *proposal == last)),
            "the one over the bound is dropped, and its origin told"
        );
        assert_eq!(
            s.partial.len(),
            super::super::sequencer::MAX_PARTIAL_PER_ORIGIN
        );
        // A malformed part (index out of range) drops its action.
        let bad = Proposal {
            origin: 3,
            id: 5,
            action: Action::Fragment {
                of: 9,
                index: 4,
                count: 2,
                bytes: vec![0].into(),
            },
        };
        s.entry(vec![bad], &mut out).unwrap();
        assert!(!s.partial.keys().any(|(o, _)| *o == 3));
        // Member 2 leaves: what it had in flight goes with it.
        s.membership(&Membership::Remove(2), &mut out).unwrap();
        assert!(s.partial.is_empty());
        assert!(!s.seen.contains_key(&2));
    }

    fn founded() -> (Sequencer, Vec<Delivery>) {
        let mut s = Sequencer::new();
        let mut out = Vec::new();
        let genesis = Proposal {
            origin: 1,
            id: 1,
            action: Action::Genesis {
                history: [7; 16],
                last_seqno: 0,
                founder: member(1),
            },
        };
        s.entry(vec![genesis], &mut out).unwrap();
        for id in [2, 3] {
            s.membership(&Membership::Add(member(id)), &mut out)
                .unwrap();
            s.membership(&Membership::Promote(id), &mut out).unwrap();
        }
        (s, out)
    }

    /// Deliveries without writeset data (snapshots do not carry it).
    fn shape(d: &[Delivery]) -> Vec<String> {
        d.iter()
            .map(|d| match d {
                Delivery::Writeset(OrderedWriteset {
                    seqno,
                    origin,
                    proposal,
                    outcome,
                    ..
                }) => format!("ws {seqno} {origin} {proposal} {outcome:?}"),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_restored_sequencer_decides_exactly_like_the_original() {
        for seed in 1..40u64 {
            let all = stream(seed, 600);
            let cut = 100 + (seed as usize * 7) % 400;
            let (mut a, _) = founded();
            let mut out = Vec::new();
            a.entry(all[..cut].to_vec(), &mut out).unwrap();
            let bytes = a.snapshot();
            let mut b = Sequencer::restore(&bytes).expect("restore");
            assert_eq!(
                b.snapshot(),
                bytes,
                "seed {seed}: snapshot of a restore differs"
            );
            let (mut out_a, mut out_b) = (Vec::new(), Vec::new());
            // Retried proposals from before the snapshot must stay settled.
            let mut rest = all[cut - 20..cut].to_vec();
            rest.extend_from_slice(&all[cut..]);
            a.entry(rest.clone(), &mut out_a).unwrap();
            b.entry(rest, &mut out_b).unwrap();
            b.membership(&Membership::Remove(2), &mut out_b).unwrap();
            a.membership(&Membership::Remove(2), &mut out_a).unwrap();
            assert_eq!(shape(&out_a), shape(&out_b), "seed {seed}");
            assert_eq!(a.last_seqno(), b.last_seqno());
            assert_eq!(
                a.certifier().index_size(),
                b.certifier().index_size(),
                "seed {seed}"
            );
        }
    }

    #[test]
    fn damaged_snapshots_are_errors_not_panics() {
        let (mut s, _) = founded();
        let mut out = Vec::new();
        s.entry(stream(3, 200), &mut out).unwrap();
        let bytes = s.snapshot();
        for cut in (0..bytes.len()).step_by(7) {
            assert!(Sequencer::restore(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad = bytes.clone();
        bad[4] = 99;
        assert!(Sequencer::restore(&bad).is_err());
    }
}
