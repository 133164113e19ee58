//! The waits of a local transaction's path through the provider, by
//! name (issue 53 item 2, ADR 0039): what each waits for, which
//! notification wakes it, and why it always ends. A wait's condition
//! reads only the parts of the state it names; a thread waits on one with
//! [`Provider::wait_for`].

use crate::provider::{Provider, Until, IN_ORDER};
use crate::shared::{StateGuard, Wake};
use crate::state::{Conn, Inner};

/// Why a proposal's wait always ends.
const RESOLVES: &str = "the group resolves every proposal: ordered, settled as dropped, or \
                        abandoned when the node leaves the primary component or the session \
                        closes";
/// Why a writer's wait for flow control always ends.
const FLOW_LIFTS: &str = "flow control lifts when the slow member catches up or leaves the \
                          view; a BF abort, a lost primary component or the session's close \
                          end it too";
/// Why a wait while paused always ends.
const RESUMES: &str = "resume() follows every pause() (FTWRL, a donation)";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitWait {
    /// This node's proposal `id` has its place in the total order (or
    /// will not get one).
    Resolved(u64),
    /// No member asks the cluster to stop; or the local transaction
    /// (`Some`) was BF-aborted before it was replicated, or the node is
    /// out of the group.
    FlowOpen(Option<u64>),
    /// The provider is not paused (FTWRL, a donation).
    Unpaused,
    /// A remote writeset's turn in commit order: every seqno before it
    /// committed, and it may commit here.
    RemoteCommitTurn(i64),
    /// A local transaction's turn in commit order: in order, or ahead of
    /// a large writeset that its dependencies do not include (ADR 0011);
    /// or it was BF-aborted and must replay.
    LocalCommitTurn {
        trx: u64,
        seqno: i64,
        depends_on: i64,
    },
    /// A released transaction that never left commit order: every seqno
    /// before it committed.
    ReleaseTurn(i64),
    /// Every seqno a replay depends on committed.
    ReplayTurn(i64),
    /// Total order isolation: every seqno before the statement's applied
    /// and committed.
    IsolatedTurn(i64),
}

impl CommitWait {
    /// Which notification wakes it, chosen again before each sleep.
    fn wake(&self, s: &Inner) -> Wake {
        match *self {
            CommitWait::Resolved(id) => Wake::Resolved(crate::proposals::resolved_slot(id)),
            CommitWait::RemoteCommitTurn(seqno) => Wake::Turn(seqno - 1),
            // Held back by a large writeset, any commit may be its turn;
            // one ordered before it may be registered after the wait
            // began (by its own client thread), which wakes every turn.
            CommitWait::LocalCommitTurn { seqno, .. } => {
                if s.bypass.holds_back(seqno, s.gates.commit_level()) {
                    Wake::Changed
                } else {
                    Wake::Turn(seqno - 1)
                }
            }
            CommitWait::FlowOpen(_)
            | CommitWait::Unpaused
            | CommitWait::ReleaseTurn(_)
            | CommitWait::ReplayTurn(_)
            | CommitWait::IsolatedTurn(_) => Wake::Changed,
        }
    }

    /// Why it always ends (logged when it lasts).
    fn why(&self) -> &'static str {
        match self {
            CommitWait::Resolved(_) => RESOLVES,
            CommitWait::FlowOpen(_) => FLOW_LIFTS,
            CommitWait::Unpaused => RESUMES,
            CommitWait::RemoteCommitTurn(_)
            | CommitWait::LocalCommitTurn { .. }
            | CommitWait::ReleaseTurn(_)
            | CommitWait::ReplayTurn(_)
            | CommitWait::IsolatedTurn(_) => IN_ORDER,
        }
    }

    /// Whether it is over. Every turn also ends when the session closes,
    /// and the flow and pause waits when the node leaves.
    fn ready(&self, s: &Inner) -> bool {
        let closed = s.conn == Conn::Closed;
        match *self {
            CommitWait::Resolved(id) => !s.proposals.is_pending(id),
            CommitWait::FlowOpen(trx) => {
                let aborted = trx.is_some_and(|id| s.trxs.aborted_before_replicating(id));
                !s.flow.gate().stopped()
                    || s.conn != Conn::Open
                    || !s.membership.in_group()
                    || aborted
            }
            CommitWait::Unpaused => s.paused_at.is_none() || closed,
            CommitWait::RemoteCommitTurn(seqno) => s.remote_commit_turn(seqno) || closed,
            CommitWait::LocalCommitTurn {
                trx,
                seqno,
                depends_on,
            } => s.trxs.must_replay(trx) || s.local_commit_turn(seqno, depends_on) || closed,
            CommitWait::ReleaseTurn(seqno) => s.gates.commit_level() >= seqno - 1 || closed,
            CommitWait::ReplayTurn(depends_on) => s.last_committed() >= depends_on || closed,
            CommitWait::IsolatedTurn(seqno) => s.isolated_turn(seqno) || closed,
        }
    }
}

impl Inner {
    /// A remote writeset at `seqno` may enter commit order.
    pub fn remote_commit_turn(&self, seqno: i64) -> bool {
        self.gates.commit_level() >= seqno - 1 && self.may_commit(seqno)
    }

    /// A local transaction at `seqno` may enter commit order: in order, or
    /// past a large writeset it does not depend on (ADR 0011).
    pub fn local_commit_turn(&self, seqno: i64, depends_on: i64) -> bool {
        let turn = self.gates.commit_level() >= seqno - 1
            || self.bypass.allows(seqno, depends_on, self.gates.commit());
        turn && self.may_commit(seqno)
    }

    /// A total-order-isolated statement at `seqno` may run.
    pub fn isolated_turn(&self, seqno: i64) -> bool {
        self.last_committed() >= seqno - 1 && self.gates.commit_level() >= seqno - 1
    }
}

impl Provider {
    /// Waits until `wait` is over, without a deadline (each ends, see
    /// [`CommitWait::why`]); returns the guard.
    pub fn wait_for<'a>(&'a self, g: StateGuard<'a>, wait: CommitWait) -> StateGuard<'a> {
        self.wait_picking(
            |s| wait.wake(s),
            g,
            Until::Progress(wait.why()),
            |s| wait.ready(s),
        )
        .0
    }
}
