//! Group state: what this node is in the cluster (member status, desyncs),
//! as a deterministic function of the events it has processed.

mod member_state;

pub use member_state::{LocalState, MemberState, Notify};
