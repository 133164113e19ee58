//! Ordered deliveries → provider state. Runs in a round, under the
//! provider's lock; everything that calls into the server is queued as an
//! [`Event`] for an applier thread (contract P20: callbacks with a
//! `recv_ctx` run inside `recv()`).

use crate::event::Event;
use crate::identity::CAPABILITIES;
use crate::ist_replay::IstBuffer;
use crate::log::info;
use crate::proposals::Mine;
use crate::remote_ws::RemoteWs;
use crate::server::{view_members, View};
use crate::state::{view_kind, Conn, Inner, Resolution};
use lockstep_core::group::{Delivery, GroupView, MemberState, OrderedWriteset};
use lockstep_core::writeset_cache::{membership_digest, CachedKind};
use wsrep_abi::{view_status, Gtid, Uuid};

/// The wsrep view of a group view, from `me`'s side (members in
/// member-UUID order, `server::view_members`).
pub fn wsrep_view(v: &GroupView, me: u64, proto_ver: i32) -> View {
    let (members, my_idx) = view_members(&v.members, me);
    View {
        state_id: Gtid {
            uuid: Uuid::from_bytes(v.history),
            seqno: v.seqno,
        },
        conf_id: v.conf_id,
        status: view_status::PRIMARY,
        capabilities: CAPABILITIES,
        my_idx: my_idx.map_or(-1, |i| i as i32),
        proto_ver,
        members,
    }
}

pub fn deliver(g: &mut Inner, me: u64, d: Delivery) {
    match d {
        Delivery::Writeset(OrderedWriteset {
            seqno,
            origin,
            proposal,
            ws,
            outcome,
            related,
        }) => {
            g.last_ordered = seqno;
            // Once: it walks every key.
            let size = ws.size();
            if size >= crate::remote_ws::LARGE_WRITESET && origin != me {
                info!(
                    "large writeset ordered as seqno {seqno}: {size} bytes, {} keys",
                    ws.keys.len()
                );
            }
            if g.membership.in_group() && g.cache.takes(seqno, size) {
                g.cache_event(
                    seqno,
                    CachedKind::Writeset {
                        ws: ws.clone(),
                        outcome: outcome.clone(),
                    },
                    size,
                );
            }
            let mine = (origin == me).then(|| g.proposals.ordered_mine(proposal));
            if mine == Some(Mine::Waited) {
                g.proposals.resolve(
                    proposal,
                    Resolution::Ordered {
                        seqno,
                        outcome,
                        related,
                    },
                );
            } else if g.membership.in_group() {
                if mine == Some(Mine::Abandoned) {
                    info!(
                        "seqno {seqno}: a local writeset whose client got an error when this \
                         node lost the primary component was ordered after all; applying it"
                    );
                }
                if ws.flags & wsrep_abi::flags::ISOLATION == 0 {
                    g.bypass.ordered(seqno, size);
                }
                g.enqueue(Event::Apply(RemoteWs {
                    seqno,
                    ws,
                    outcome,
                    size,
                }));
            } else {
                if !g.fork_check.is_done() {
                    let kind = CachedKind::Writeset {
                        ws: ws.clone(),
                        outcome: outcome.clone(),
                    };
                    g.check_fork(seqno, &kind);
                }
                g.joining.ist_mut().writeset(RemoteWs {
                    seqno,
                    ws,
                    outcome,
                    size,
                });
            }
        }
        Delivery::View(v) => view(g, me, v),
        Delivery::Donate {
            donor,
            joiner,
            request,
            seqno,
            ist_after,
            from_cache,
        } if donor == me && g.membership.in_group() => {
            g.enqueue(Event::Donate {
                request,
                seqno,
                joiner,
                ist_after,
                from_cache,
            });
        }
        Delivery::Donate { donor, joiner, .. } if joiner == me => g.joining.donor_chosen(donor),
        Delivery::NoDonor { joiner } if joiner == me => g.joining.no_donor(),
        Delivery::Transferred { joiner, rcode, .. } if joiner == me => {
            g.joining.donor_result(rcode);
        }
        Delivery::MemberState {
            raft_id,
            state: MemberState::Synced,
        } if raft_id == me && g.membership.in_group() => g.enqueue(Event::Synced),
        Delivery::VoteRequest { seqno } if g.membership.in_group() => g.vote_asked(seqno),
        Delivery::VoteResult { seqno, digest } if g.membership.in_group() => {
            g.vote_decided(seqno, digest)
        }
        Delivery::Inconsistent { raft_id, seqno } if raft_id == me && g.membership.in_group() => {
            g.found_inconsistent(seqno)
        }
        Delivery::Barrier { origin, id, seqno } if origin == me => {
            g.proposals.resolve(id, Resolution::Fence { seqno });
        }
        Delivery::FlowControl { raft_id, level } if g.membership.in_group() => {
            g.flow.announce(raft_id, level, crate::state::mono_ns());
        }
        Delivery::Settled { origin, proposal } if origin == me => {
            g.proposals.settled(proposal);
        }
        _ => {}
    }
}

/// The events between the server's position `have` and the founding view
/// `v`, read from this node's writeset cache (ADR 0026).
fn own_cache_replay(g: &mut Inner, have: Gtid, v: &GroupView) -> Result<Vec<Event>, String> {
    let history = Uuid::from_bytes(v.history);
    let proto_ver = g.proto_ver;
    let mut buffer = IstBuffer::new(have, g.joining.ist().limit());
    buffer.start_history(history);
    let reader = g
        .cache
        .with_cache(|c| c.reader(history, have.seqno, v.seqno - 1))
        .ok_or("this node keeps no writeset cache")??;
    for ev in reader {
        let ev = ev?;
        buffer.cached(ev.seqno, ev.kind, proto_ver);
    }
    buffer.covers(Gtid {
        uuid: history,
        seqno: v.seqno,
    })?;
    buffer.take_after(have.seqno)
}

fn view(g: &mut Inner, me: u64, v: GroupView) {
    g.last_ordered = v.seqno;
    let members = membership_digest(v.conf_id, v.members.iter().map(|m| m.uuid));
    let mine = wsrep_view(&v, me, g.proto_ver);
    let included = mine.my_idx >= 0;
    g.membership.set_members(v.members.clone());
    // A member that left takes its flow-control request with it.
    let ids: Vec<u64> = v.members.iter().map(|m| m.raft_id).collect();
    g.flow.retain(&ids, crate::state::mono_ns());
    if !g.membership.in_group() {
        if !included {
            // Still replaying the log from before this node joined.
            g.group_history = v.history;
            g.check_fork(v.seqno, &view_kind(&mine));
            g.joining
                .ist_mut()
                .view(Uuid::from_bytes(v.history), v.seqno, members, Some(mine));
            return;
        }
        g.membership.joined();
        g.group_history = v.history;
        if std::mem::take(&mut g.rejoining) {
            // The server's session never ended: no new connected_cb.
            g.membership.back_in_primary();
            g.enqueue(Event::JoinView(mine));
            return;
        }
        g.enqueue(Event::Connected(mine.clone()));
        let founder = v.conf_id == 1 && v.members.len() == 1;
        if founder {
            let have = g.join_position();
            let replay = (have.uuid.data == v.history && have.seqno + 1 < v.seqno)
                .then(|| own_cache_replay(g, have, &v));
            // Its state is the group's: the cache continues from it.
            g.cache.go_live();
            g.cache_event(v.seqno, view_kind(&mine), 0);
            match replay {
                None => {}
                Some(Ok(events)) => {
                    info!(
                        "founding at seqno {}: first replaying the {} events {}..={} that \
                         the group ordered before this node stopped and its storage engine \
                         lost, from its writeset cache",
                        v.seqno,
                        events.len(),
                        have.seqno + 1,
                        v.seqno - 1
                    );
                    // The server first sees the component at its own
                    // position, then the replay as IST, then the view.
                    let mut at_position = mine.clone();
                    at_position.state_id.seqno = have.seqno;
                    g.enqueue(Event::PrimaryView(at_position));
                    for e in events {
                        g.enqueue(e);
                    }
                }
                Some(Err(why)) => {
                    g.enqueue(Event::Inconsistent(format!(
                        "this node founded the cluster at seqno {} from its writeset \
                         cache, but cannot read back the events {}..={} its server lacks: \
                         {why}. Stop every node and bootstrap from another member",
                        v.seqno,
                        have.seqno + 1,
                        v.seqno - 1
                    )));
                    return;
                }
            }
            g.enqueue(Event::PrimaryView(mine));
            g.enqueue(Event::Synced);
        } else {
            g.enqueue(Event::JoinView(mine));
        }
        return;
    }
    if included {
        g.joining
            .members_now(|id| v.members.iter().any(|m| m.raft_id == id));
        g.group_history = v.history;
        g.cache_event(v.seqno, view_kind(&mine), 0);
        g.enqueue(Event::PrimaryView(mine));
        if g.membership.back_in_primary() {
            // Back in the primary component with every event in between
            // (the log is continuous): JOINED by the view, then SYNCED.
            g.enqueue(Event::Synced);
        }
    } else if g.conn == Conn::Open {
        // Removed by the primary component (evicted as silent): the
        // session goes on, the node joins again.
        g.enqueue(Event::Rejoin);
    } else {
        g.enqueue(Event::Removed);
    }
}
