//! Group state: the total order and what it means for wsrep.
//!
//! - `action`: what is ordered (writesets, state-transfer messages, …) and
//!   its encoding;
//! - `reassembly`: a fragmented action's parts joined as they arrive;
//! - `fragments`: a big writeset's encoding cut into fragment parts, done
//!   by the replicating thread;
//! - `sequencer`: seqnos, views, member states, donor choice and
//!   certification as a deterministic function of the ordered log;
//! - `follower_commit`: when a follower may commit what it stores without
//!   waiting for the leader's word (ADR 0017);
//! - `node`: the Raft driver around tikv/raft-rs (ADR 0004), with batching,
//!   retries and the leader's membership duties; sans-IO, driven by the
//!   provider's rounds or by the simulation tests;
//! - `echo`: a follower's own entries come back from the leader without
//!   their data, which the follower still holds (ADR 0020);
//! - `relay`: the leader's appends to a remote segment as one bundle that
//!   a member there passes on (`gmcast.segment`, ADR 0020);
//! - `beats`: the heartbeats an idle leader spares its settled followers;
//! - `read_fence`, `read_grants`: causal reads answered from a lease, on
//!   the leader (ADR 0016) and on followers (ADR 0022);
//! - `member_state`: this node's own member status and desync counting;
//! - `recovery`: who re-forms the primary component after a crash of the
//!   whole cluster (`pc.recovery`);
//! - `peer`: the messages members send each other, framed by `wire`.

pub mod action;
mod beats;
pub mod echo;
mod follower_commit;
pub mod fragments;
mod log_store;
mod member_state;
pub mod node;
pub mod payload;
pub mod peer;
pub mod read_fence;
pub mod read_grants;
mod reassembly;
pub mod recovery;
pub mod relay;
pub mod sequencer;
mod snapshot;
pub mod vote;

pub use action::{Action, CacheIst, MemberInfo, Proposal, Writeset};
pub use fragments::EncodedBody;
pub use member_state::{LocalState, MemberState, Notify};
pub use node::{Group, GroupConfig, Output};
pub use read_grants::LeaseMsg;
pub use sequencer::{
    Delivery, GroupView, Member, Membership, OrderedWriteset, Sequencer, SequencerError,
};
