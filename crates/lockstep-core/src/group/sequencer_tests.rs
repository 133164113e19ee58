//! The commit cut that purges the certification index.

use super::*;
use crate::certification::{Key, KeyType};

fn member(raft_id: u64) -> MemberInfo {
    MemberInfo {
        raft_id,
        uuid: [raft_id as u8; 16],
        name: format!("node{raft_id}"),
        incoming: String::new(),
        peer_addr: format!("127.0.0.1:{raft_id}"),
        segment: 0,
    }
}

/// A writeset of member 1 (wsrep id `[1; 16]`).
fn writeset_of(id: u64, last_seen: i64, keys: Vec<Key>) -> Writeset {
    Writeset {
        source: [1; 16],
        trx_id: id,
        conn_id: 1,
        last_seen,
        flags: flags::TRX_START | flags::TRX_END,
        keys,
        data: vec![1; 16].into(),
    }
}

fn one(seq: &mut Sequencer, origin: u64, id: u64, action: Action) -> Vec<Delivery> {
    let mut out = Vec::new();
    seq.entry(vec![Proposal { origin, id, action }], &mut out)
        .expect("sequencer accepts the entry");
    out
}

/// A sequencer whose history `founder` founded (proposal 1).
fn founded_by(founder: MemberInfo) -> Sequencer {
    let mut seq = Sequencer::new();
    let genesis = Action::Genesis {
        history: [7; 16],
        last_seqno: 0,
        founder,
    };
    one(&mut seq, 1, 1, genesis);
    seq
}

/// A founder (1) writes and reports its commits while member 2 has joined
/// but waits for its state transfer. Returns the sequencer and the next
/// proposal id.
fn founder_writes_while_2_joins(writesets: i64) -> (Sequencer, u64) {
    let mut seq = founded_by(member(1));
    let mut out = Vec::new();
    seq.membership(&Membership::Add(member(2)), &mut out)
        .expect("joiner added");
    assert_eq!(seq.member(2).map(|m| m.state), Some(MemberState::Joiner));
    let mut id: u64 = 2;
    for _ in 0..writesets {
        let key = Key::new(
            [b"db".to_vec(), id.to_be_bytes().to_vec()],
            KeyType::Exclusive,
        );
        let ws = writeset_of(id, seq.last_seqno(), vec![key]);
        one(&mut seq, 1, id, Action::Writeset(ws));
        id += 1;
        let committed = Action::Committed {
            raft_id: 1,
            seqno: seq.last_seqno(),
            applied: id,
        };
        one(&mut seq, 1, id, committed);
        id += 1;
    }
    (seq, id)
}

#[test]
fn a_joiner_waiting_for_its_state_does_not_hold_the_purge_back() {
    let (seq, _) = founder_writes_while_2_joins(3 * PURGE_STEP);
    assert!(
        seq.certifier().purged_upto() >= 2 * PURGE_STEP,
        "index purged up to {} only: the joiner held the cut back",
        seq.certifier().purged_upto()
    );
}

#[test]
fn a_joined_member_counts_again() {
    let (mut seq, id) = founder_writes_while_2_joins(PURGE_STEP);
    let joined = Action::Joined {
        raft_id: 2,
        seqno: 1,
    };
    one(&mut seq, 2, id, joined);
    assert_eq!(seq.member(2).map(|m| m.state), Some(MemberState::Joined));
    let before = seq.certifier().purged_upto();
    let last = seq.last_seqno();
    let report = Action::Committed {
        raft_id: 1,
        seqno: last + 10 * PURGE_STEP,
        applied: id + 1,
    };
    one(&mut seq, 1, id + 1, report);
    assert_eq!(
        seq.certifier().purged_upto(),
        before,
        "a joined member that has not reported must hold the cut"
    );
}

#[test]
fn a_purged_big_writeset_is_handed_over_to_be_freed_elsewhere() {
    let mut seq = founded_by(member(1));
    let writeset = |id: u64, keys: usize| {
        let keys = (0..keys as u32)
            .map(|k| {
                Key::new(
                    [b"db".to_vec(), b"t".to_vec(), k.to_be_bytes().to_vec()],
                    KeyType::Exclusive,
                )
            })
            .collect();
        Action::Writeset(writeset_of(id, 0, keys))
    };
    one(&mut seq, 1, 2, writeset(2, REAP_KEYS));
    // The index is purged in steps of PURGE_STEP seqnos.
    let mut id = 3;
    while seq.last_seqno() < PURGE_STEP + 2 {
        one(&mut seq, 1, id, writeset(id, 1));
        id += 1;
    }
    let report = Action::Committed {
        raft_id: 1,
        seqno: seq.last_seqno(),
        applied: id,
    };
    one(&mut seq, 1, id, report);
    assert!(seq.certifier().purged_upto() > PURGE_STEP, "purged");
    let reaped = seq.take_reaped();
    assert_eq!(reaped.len(), 1, "the big one only");
    assert_eq!(reaped[0].keys.len(), REAP_KEYS);
    assert!(seq.take_reaped().is_empty());
}

/// `gcs.stateless`: member 2 says it keeps no state to donate; a joiner
/// that names it (with a trailing comma, any other allowed) gets member
/// 1, and one that names it alone gets no donor. Nobody else can make
/// member 2 stateless, and nothing changes below the stateless version.
#[test]
fn a_stateless_member_is_never_a_donor() {
    let mut seq = founded_by(member(1));
    let mut out = Vec::new();
    seq.membership(&Membership::Add(member(2)), &mut out)
        .expect("member 2 added");
    one(
        &mut seq,
        2,
        1,
        Action::Joined {
            raft_id: 2,
            seqno: 0,
        },
    );
    one(&mut seq, 2, 2, Action::Synced { raft_id: 2 });
    one(&mut seq, 2, 3, Action::Stateless { raft_id: 2 });
    assert!(
        !seq.member(2).unwrap().stateless,
        "below the stateless version"
    );
    seq.cluster_version = STATELESS_VERSION;
    one(&mut seq, 1, 4, Action::Stateless { raft_id: 2 });
    assert!(
        !seq.member(2).unwrap().stateless,
        "member 1 spoke for member 2"
    );
    one(&mut seq, 2, 5, Action::Stateless { raft_id: 2 });
    assert!(seq.member(2).unwrap().stateless);
    let again = Sequencer::restore(&seq.snapshot()).expect("snapshot decodes");
    assert!(
        again.member(2).unwrap().stateless,
        "the snapshot lost the flag"
    );
    seq.membership(&Membership::Add(member(3)), &mut out)
        .expect("joiner added");
    let donors = |seq: &mut Sequencer, seq_no, names: &str| -> (Vec<u64>, bool) {
        let out = one(
            seq,
            3,
            seq_no,
            Action::StateRequest {
                joiner: 3,
                donors: names.into(),
                request: b"rsync".to_vec(),
                ist_after: None,
                from_cache: None,
            },
        );
        let chosen = out
            .iter()
            .filter_map(|d| match d {
                Delivery::Donate { donor, .. } => Some(*donor),
                _ => None,
            })
            .collect();
        (
            chosen,
            out.iter().any(|d| matches!(d, Delivery::NoDonor { .. })),
        )
    };
    assert_eq!(donors(&mut seq, 6, "node2"), (vec![], true), "named alone");
    assert_eq!(donors(&mut seq, 7, "node2,"), (vec![1], false));
}

/// Member 2 is an arbitrator (synced, but with no data) and 3 joins: 2 is
/// never its donor; with only the arbitrator synced besides the joiner
/// there is no donor at all; and a consistency vote leaves it out.
#[test]
fn an_arbitrator_never_donates_nor_votes_on_consistency() {
    let mut seq = founded_by(member(1));
    let mut out = Vec::new();
    seq.membership(&Membership::Add(member(2)), &mut out)
        .expect("arbitrator added");
    // Someone else cannot make member 2 an arbitrator; it can.
    one(&mut seq, 1, 2, Action::Arbitrator { raft_id: 2 });
    assert!(!seq.member(2).expect("member 2").arbitrator);
    one(&mut seq, 2, 1, Action::Arbitrator { raft_id: 2 });
    one(
        &mut seq,
        2,
        2,
        Action::Joined {
            raft_id: 2,
            seqno: 1,
        },
    );
    one(&mut seq, 2, 3, Action::Synced { raft_id: 2 });
    let two = seq.member(2).expect("member 2");
    assert!(two.arbitrator && two.state == MemberState::Synced);
    // A second arbitrator, still joining.
    seq.membership(&Membership::Add(member(3)), &mut out)
        .expect("joiner added");
    one(&mut seq, 3, 1, Action::Arbitrator { raft_id: 3 });
    assert!(seq.member(3).expect("member 3").arbitrator);
    seq.membership(&Membership::Add(member(4)), &mut out)
        .expect("joiner added");
    let request = |donors: &str| Action::StateRequest {
        joiner: 4,
        donors: donors.into(),
        request: b"rsync".to_vec(),
        ist_after: None,
        from_cache: None,
    };
    // Named, the arbitrator is passed over for the data member.
    let out = one(&mut seq, 4, 1, request("node2,"));
    let donors: Vec<u64> = out
        .iter()
        .filter_map(|d| match d {
            Delivery::Donate { donor, .. } => Some(*donor),
            _ => None,
        })
        .collect();
    assert_eq!(donors, vec![1]);
    // Named alone: no donor, although it is synced.
    one(
        &mut seq,
        1,
        10,
        Action::StateTransferred {
            donor: 1,
            joiner: 4,
            seqno: 1,
            rcode: -1,
        },
    );
    let out = one(&mut seq, 4, 2, request("node2"));
    assert!(
        out.iter()
            .any(|d| matches!(d, Delivery::NoDonor { joiner: 4 })),
        "{out:?}"
    );
    // A vote: member 1 alone is the electorate, so its outcome decides
    // at once.
    let out = one(
        &mut seq,
        1,
        11,
        Action::Vote {
            raft_id: 1,
            seqno: 1,
            digest: 0,
        },
    );
    assert!(
        out.iter().any(|d| matches!(
            d,
            Delivery::VoteResult {
                seqno: 1,
                digest: 0
            }
        )),
        "{out:?}"
    );
}

/// The cluster version moves only to a version every member said it
/// speaks, never back; a member that speaks only older ones is told to
/// leave.
#[test]
fn the_cluster_version_follows_the_oldest_member() {
    let (mut seq, mut id) = founder_writes_while_2_joins(0);
    let base = seq.cluster_version();
    let supports = |raft_id, max_version| Action::Supports {
        raft_id,
        max_version,
    };
    one(&mut seq, 1, id, supports(1, base + 1));
    id += 1;
    assert_eq!(seq.upgradable_to(), None, "member 2 has not said");
    one(
        &mut seq,
        1,
        id,
        Action::ClusterVersion { version: base + 1 },
    );
    id += 1;
    assert_eq!(seq.cluster_version(), base, "not every member speaks it");
    // Member 1 cannot speak for member 2.
    one(&mut seq, 1, id, supports(2, base + 1));
    id += 1;
    assert_eq!(seq.upgradable_to(), None);
    one(&mut seq, 2, 1, supports(2, base + 2));
    assert_eq!(seq.upgradable_to(), Some(base + 1));
    let out = one(
        &mut seq,
        1,
        id,
        Action::ClusterVersion { version: base + 1 },
    );
    id += 1;
    assert!(out.contains(&Delivery::ClusterVersion { version: base + 1 }));
    assert_eq!(seq.cluster_version(), base + 1);
    one(&mut seq, 1, id, Action::ClusterVersion { version: base });
    assert_eq!(seq.cluster_version(), base + 1, "never back");
    // A member that speaks only the old version must leave.
    let mut out = Vec::new();
    seq.membership(&Membership::Add(member(3)), &mut out)
        .expect("joiner added");
    let out = one(&mut seq, 3, 1, supports(3, base));
    assert!(out.contains(&Delivery::TooOld {
        raft_id: 3,
        max_version: base,
        cluster_version: base + 1
    }));
    // It survives a snapshot.
    let restored = Sequencer::restore(&seq.snapshot()).expect("restores");
    assert_eq!(restored.cluster_version(), base + 1);
    assert_eq!(restored.member(2).map(|m| m.max_version), Some(base + 2));
}

/// Member 1 founds in segment 0; the others are added in theirs, and
/// member 2 is synced.
fn segmented(others: &[(u64, u8)]) -> Sequencer {
    let in_segment = |raft_id: u64, segment: u8| MemberInfo {
        segment,
        ..member(raft_id)
    };
    let mut seq = founded_by(in_segment(1, 0));
    let mut out = Vec::new();
    for (id, segment) in others {
        seq.membership(&Membership::Add(in_segment(*id, *segment)), &mut out)
            .expect("added");
    }
    one(
        &mut seq,
        2,
        1,
        Action::Joined {
            raft_id: 2,
            seqno: 1,
        },
    );
    one(&mut seq, 2, 2, Action::Synced { raft_id: 2 });
    seq
}

/// The donor a state request of `joiner` gets.
fn donor_for(seq: &mut Sequencer, joiner: u64, donors: &str, id: u64) -> Option<u64> {
    let request = Action::StateRequest {
        joiner,
        donors: donors.into(),
        request: b"rsync".to_vec(),
        ist_after: None,
        from_cache: None,
    };
    one(seq, joiner, id, request).iter().find_map(|d| match d {
        Delivery::Donate { donor, .. } => Some(*donor),
        _ => None,
    })
}

/// Any donor is chosen in the joiner's own segment when one can serve;
/// otherwise any other; a named donor wins over the segment.
#[test]
fn a_joiner_gets_a_donor_in_its_own_segment() {
    let mut seq = segmented(&[(2, 1), (3, 1), (4, 2)]);
    // Member 3 (segment 1): member 2, its segment's, not the founder.
    assert_eq!(donor_for(&mut seq, 3, "", 1), Some(2));
    // Member 4 (segment 2) has no synced neighbour: any (the founder;
    // member 2 is a donor now).
    assert_eq!(donor_for(&mut seq, 4, "", 1), Some(1));
    // Named, the founder is chosen although member 3's segment has one.
    let mut seq = segmented(&[(2, 1), (3, 1)]);
    assert_eq!(donor_for(&mut seq, 3, "node1,", 1), Some(1));
}

/// ADR 0014: a member binds itself only (first binding, or a new
/// certificate after `socket.ssl_reload`); another member's word for it
/// is ignored; nothing is bound before the cluster runs at the binding
/// version; the binding leaves with the member.
#[test]
fn a_member_binds_only_itself_and_its_binding_leaves_with_it() {
    let mut seq = founded_by(member(1));
    let mut out = Vec::new();
    seq.membership(&Membership::Add(member(2)), &mut out)
        .expect("joiner added");
    let bind = |raft_id, b: u8| Action::Bind {
        raft_id,
        fingerprint: [b; 32],
    };
    one(&mut seq, 2, 1, bind(2, 0xa));
    assert!(seq.bindings().is_empty(), "bound below the binding version");
    seq.cluster_version = BINDING_VERSION;
    one(&mut seq, 2, 2, bind(2, 0xa));
    assert_eq!(seq.bindings().get(&2), Some(&[0xa; 32]));
    one(&mut seq, 1, 3, bind(2, 0xb));
    assert_eq!(
        seq.bindings().get(&2),
        Some(&[0xa; 32]),
        "member 1 rebound 2"
    );
    one(&mut seq, 2, 4, bind(2, 0xc));
    assert_eq!(
        seq.bindings().get(&2),
        Some(&[0xc; 32]),
        "2's new certificate"
    );
    one(&mut seq, 9, 5, bind(9, 0xd));
    assert!(seq.bindings().get(&9).is_none(), "a stranger bound itself");
    seq.membership(&Membership::Remove(2), &mut out)
        .expect("member removed");
    assert!(
        seq.bindings().get(&2).is_none(),
        "the binding outlived its member"
    );
}
