//! This node's place in the group as its server sees it, one owned part:
//! whether the session has reached a view that includes it, whether it
//! is cut off from the primary component (and which members it still
//! sees then), the members of the current view, and how many members the
//! last primary view it was in had (which decides `safe_to_bootstrap`).
//!
//! Invariant: `non_primary` means "a non-primary view was (or is about
//! to be) delivered in this session and no primary view since"; it is
//! set only for a node in the group, and a primary view that includes the
//! node clears it. Bounded by the members.

use lockstep_core::group::MemberInfo;

#[derive(Debug, Default)]
pub struct Membership {
    /// Members of the current view (name, peer address) for status.
    members: Vec<MemberInfo>,
    /// The session has delivered a view that includes this node.
    in_group: bool,
    /// Cut off from the majority (a non-primary view was delivered); the
    /// next primary view that includes this node ends it.
    non_primary: bool,
    /// The Raft ids of a non-primary node's component (itself and the
    /// members it has a connection with that answered a ping lately,
    /// `group_driver::Worker::component`), for its non-primary views.
    component: Vec<u64>,
    /// Size of the last primary view this node was in: it may bootstrap
    /// later only if it was alone (the last to leave).
    last_view_members: usize,
}

impl Membership {
    pub fn members(&self) -> &[MemberInfo] {
        &self.members
    }

    /// A view (primary or not, with this node or not) lists `members`.
    pub fn set_members(&mut self, members: Vec<MemberInfo>) {
        self.members = members;
    }

    pub fn in_group(&self) -> bool {
        self.in_group
    }

    pub fn non_primary(&self) -> bool {
        self.non_primary
    }

    /// The members a non-primary view lists.
    pub fn component(&self) -> &[u64] {
        &self.component
    }

    /// A new session, or a rejoin, or the end of one: not in the group
    /// until a view includes this node again.
    pub fn left_group(&mut self) {
        self.in_group = false;
    }

    /// The first view of the session that includes this node.
    pub fn joined(&mut self) {
        self.in_group = true;
    }

    /// This node is cut off (no leader for `evs.suspect_timeout`) and sees
    /// `component`; `true` when that starts a non-primary period (a
    /// non-primary view is to be delivered): only a node in the group
    /// has one.
    pub fn cut_off(&mut self, component: Vec<u64>) -> bool {
        self.component = component;
        let starts = self.in_group && !self.non_primary;
        if starts {
            self.non_primary = true;
        }
        starts
    }

    /// Non-primary from now on, whatever it was (a rejoin: clients get
    /// errors until it completes).
    pub fn mark_non_primary(&mut self) {
        self.non_primary = true;
    }

    /// While non-primary, the members seen changed to `component`; `true`
    /// when a new non-primary view is due.
    pub fn component_changed(&mut self, component: Vec<u64>) -> bool {
        if !self.in_group || !self.non_primary || self.component == component {
            return false;
        }
        self.component = component;
        true
    }

    /// A primary view that includes this node: `true` when it ends a
    /// non-primary period (the node is to announce SYNCED again).
    pub fn back_in_primary(&mut self) -> bool {
        std::mem::take(&mut self.non_primary)
    }

    /// The server took a primary view of `members` members.
    pub fn primary_view_size(&mut self, members: usize) {
        self.last_view_members = members;
    }

    /// `safe_to_bootstrap` in grastate.dat: this node was the last of its
    /// primary component (or never in a bigger one).
    pub fn was_last_to_leave(&self) -> bool {
        self.last_view_members <= 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_member_goes_non_primary_and_a_primary_view_ends_it() {
        let mut m = Membership::default();
        assert!(!m.cut_off(vec![1]), "not in the group: no non-primary view");
        assert!(!m.non_primary());
        m.joined();
        assert!(m.cut_off(vec![1, 2]), "a member cut off goes non-primary");
        assert!(!m.cut_off(vec![1, 2]), "once");
        assert_eq!(m.component(), &[1, 2]);
        assert!(!m.component_changed(vec![1, 2]), "same component");
        assert!(m.component_changed(vec![1]), "a peer went");
        assert!(m.back_in_primary());
        assert!(!m.back_in_primary(), "once");
        assert!(
            !m.component_changed(vec![1, 3]),
            "primary: no non-primary view"
        );
        m.left_group();
        assert!(!m.cut_off(vec![1]));
        m.mark_non_primary();
        assert!(m.non_primary(), "a rejoin marks it whatever it was");
    }

    #[test]
    fn safe_to_bootstrap_only_after_a_view_of_one() {
        let mut m = Membership::default();
        assert!(m.was_last_to_leave(), "never in a bigger component");
        m.primary_view_size(3);
        assert!(!m.was_last_to_leave());
        m.primary_view_size(1);
        assert!(m.was_last_to_leave());
    }
}
