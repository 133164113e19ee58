//! Raft messages a peer can craft that raft-rs itself would treat as a
//! fatal error: the group drops them instead of letting its thread die.
//! (Peers are authenticated by TLS, ADR 0014; this is the second line.)

use lockstep_core::group::{Group, GroupConfig, MemberInfo};
use raft::eraftpb::{Entry, Message, MessageType};

fn me() -> MemberInfo {
    MemberInfo {
        raft_id: 7,
        uuid: [7; 16],
        name: "node1".into(),
        incoming: "127.0.0.1:3306".into(),
        peer_addr: "127.0.0.1:4567".into(),
        segment: 0,
    }
}

#[test]
fn an_empty_proposal_is_dropped_not_fatal() {
    let mut g = Group::bootstrap(me(), GroupConfig::default(), [1; 16], 0, 0).unwrap();
    let mut m = Message::default();
    m.set_msg_type(MessageType::MsgPropose);
    m.from = 7;
    m.to = 7;
    g.step(m.clone());
    assert!(
        g.is_leader(),
        "the group still leads after the crafted message"
    );
    // A proposal with entries still goes through the same path.
    m.entries = vec![Entry::default()].into();
    g.step(m);
    assert!(g.is_leader());
}

#[test]
fn a_heartbeat_committing_past_the_log_is_dropped_not_fatal() {
    // A joiner hears from whoever leads (it knows no configuration yet);
    // a member can only be sent this by another member.
    let mut g = Group::join(me(), GroupConfig::default(), 0).unwrap();
    let mut m = Message::default();
    m.set_msg_type(MessageType::MsgHeartbeat);
    m.from = 9;
    m.to = 7;
    m.term = 5;
    m.commit = 1 << 40;
    g.step(m.clone());
    assert_eq!(g.term(), 0, "the crafted heartbeat was not dropped whole");
    // An honest one (nothing to commit) still goes through.
    m.commit = 0;
    g.step(m);
    assert_eq!((g.term(), g.leader()), (5, 9));
}
