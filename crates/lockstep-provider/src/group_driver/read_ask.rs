//! Causal reads between a follower and the leader, on the connection
//! threads (ADR 0016): a follower's reader asks the leader for its read
//! index (`PeerMsg::ReadAsk`, its last log index), and the leader's connection thread answers
//! from the lease the round published, so neither node's round stands
//! in the way. Without a lease the answer says so and the reader
//! asks through Raft (`Group::read_fence`).

use crate::shared::Shared;
use crate::state::Resolution;
use lockstep_core::group::peer::PeerMsg;
use lockstep_net::transport::{Handled, Quick};
use std::sync::Arc;
use std::time::Instant;

/// The connection threads' handler: answers asks, resolves answers, and
/// passes everything else on to the round (the transport's sink).
pub fn quick(shared: Arc<Shared>) -> Quick {
    Arc::new(move |from, msg| match msg {
        PeerMsg::ReadAsk { n } => {
            let mut g = shared.lock();
            let index = g.reads.lease_index(crate::state::mono_ns());
            // The rounds keep the lease renewed while reads come.
            g.reads.mark_asked();
            drop(g);
            Handled::Done(PeerMsg::ReadAnswer { n, index }.to_frame().ok())
        }
        PeerMsg::ReadAnswer { n, index } => {
            let mut g = shared.lock();
            // Only the leader that was asked answers (`ReadAsks`).
            let next_n = g.proposals.peek_id();
            let (reads, next) = g.reads.asks().answered(n, from, next_n, Instant::now());
            if next.is_some() {
                g.proposals.open(false);
            }
            let resolution =
                index.map_or(Resolution::NoLease, |index| Resolution::ReadIndex { index });
            let mut wake = Vec::with_capacity(reads.len());
            for (id, waiter) in reads {
                g.proposals.resolve_pending(id, resolution.clone());
                wake.extend(waiter);
            }
            drop(g);
            // Only the reads this answer resolves.
            for t in wake {
                t.unpark();
            }
            // The reads that began while this ask flew: their ask goes
            // back to the leader on this connection.
            Handled::Done(next.and_then(|n| PeerMsg::ReadAsk { n }.to_frame().ok()))
        }
        // Round-trip probes (ADR 0019), answered here so the time is the
        // network's and the transport's event loop's, not a busy round's.
        PeerMsg::Ping { sent } => Handled::Done(PeerMsg::Pong { sent }.to_frame().ok()),
        PeerMsg::Pong { sent } => {
            let now = crate::state::mono_ns();
            shared
                .lock()
                .peer_rtt
                .observe(from, now.saturating_sub(sent), now);
            Handled::Done(None)
        }
        // Probes that also measure the peer's clock rate (ADR 0036); the
        // clock is read as late as possible, the answer leaves at once.
        PeerMsg::ClockPing { sent } => {
            let clock = crate::state::mono_ns();
            Handled::Done(PeerMsg::ClockPong { sent, clock }.to_frame().ok())
        }
        PeerMsg::ClockPong { sent, clock } => {
            let now = crate::state::mono_ns();
            let g = shared.lock();
            // Only a member's clock counts: a stranger (any holder of a
            // certificate of the CA) must not turn this node's leases off
            // with made-up clocks. Members are the ones this node pings,
            // as the group lists them; the view's list, read here, lags
            // it (a joiner before its view, a member just added), so the
            // round looks again at what it pinged (`clock_pong`).
            let Some(name) = g
                .membership
                .members()
                .iter()
                .find(|m| m.raft_id == from)
                .map(|m| m.name.clone())
            else {
                return Handled::Pass(PeerMsg::ClockPong { sent, clock });
            };
            member_clock_answer(g, &name, from, sent, now, clock);
            Handled::Done(None)
        }
        other => Handled::Pass(other),
    })
}

/// A member's answer to this node's clock probe, received at `now`: its
/// round trip and its clock's rate (ADR 0036), a change of rate logged
/// after the lock is let go of. Here and in the round (`clock_pong`, for
/// a member not in the view yet).
pub(super) fn member_clock_answer(
    mut g: crate::shared::StateGuard<'_>,
    name: &str,
    from: u64,
    sent: u64,
    now: u64,
    clock: u64,
) {
    g.peer_rtt.observe(from, now.saturating_sub(sent), now);
    let change = g.clock_rates.sample(from, sent, now, clock);
    drop(g);
    if let Some(change) = change {
        crate::clock_log::rate_changed(name, change);
    }
}
