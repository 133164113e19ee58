//! The node's own member status, the value behind `wsrep_local_state` and
//! `wsrep_local_state_comment`, and the rules for moving between them.

use std::collections::VecDeque;
use wsrep_abi::member_status;

/// Galera's member states (`wsrep_member_status_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// Closed, connecting, or in a non-primary component.
    Undefined,
    /// Waiting for or receiving a state transfer.
    Joiner,
    /// Donating a snapshot, or desynced on request.
    Donor,
    /// Has the state, catching up with the group.
    Joined,
    Synced,
    /// Found inconsistent: must not serve until a full state transfer.
    Error,
}

impl MemberState {
    /// The number shown as `wsrep_local_state`.
    pub fn wsrep_value(self) -> i64 {
        i64::from(match self {
            MemberState::Undefined => member_status::UNDEFINED,
            MemberState::Joiner => member_status::JOINER,
            MemberState::Donor => member_status::DONOR,
            MemberState::Joined => member_status::JOINED,
            MemberState::Synced => member_status::SYNCED,
            MemberState::Error => member_status::ERROR,
        })
    }

    /// Galera's name of the state in its "Shifting A -> B (TO: n)" log
    /// lines, which operators and MariaDB's tests grep for; `None` for
    /// the states Galera names otherwise (outside a primary component).
    pub fn shift_name(self) -> Option<&'static str> {
        match self {
            MemberState::Joiner => Some("JOINER"),
            MemberState::Donor => Some("DONOR/DESYNCED"),
            MemberState::Joined => Some("JOINED"),
            MemberState::Synced => Some("SYNCED"),
            MemberState::Undefined | MemberState::Error => None,
        }
    }

    /// Galera's wording for `wsrep_local_state_comment`; tests and health
    /// checks compare these strings.
    pub fn comment(self) -> &'static str {
        match self {
            MemberState::Undefined => "Initialized",
            MemberState::Joiner => "Joining",
            MemberState::Donor => "Donor/Desynced",
            MemberState::Joined => "Joined",
            MemberState::Synced => "Synced",
            MemberState::Error => "Inconsistent",
        }
    }
}

/// The local state with its desync counter.
///
/// Desyncs nest (`SET wsrep_desync`, FTWRL, BACKUP STAGE, an SST donation):
/// the node stays Donor/Desynced until the last one ends, then becomes
/// Joined and, once caught up, Synced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalState {
    state: MemberState,
    desyncs: u32,
    /// Transitions not yet taken (`take_shifts`), oldest first; at most
    /// [`MAX_SHIFTS`], the oldest dropped beyond.
    shifts: VecDeque<(MemberState, MemberState)>,
}

/// Bound on the transitions kept for the log between two takes.
pub const MAX_SHIFTS: usize = 32;

/// What the provider must do after a transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notify {
    Nothing,
    /// Tell the server it is synced (`synced_cb`).
    Synced,
}

impl Default for LocalState {
    fn default() -> Self {
        LocalState {
            state: MemberState::Undefined,
            desyncs: 0,
            shifts: VecDeque::new(),
        }
    }
}

impl LocalState {
    pub fn state(&self) -> MemberState {
        self.state
    }

    pub fn desync_count(&self) -> u32 {
        self.desyncs
    }

    /// The transitions since the last take, oldest first, for the log.
    pub fn take_shifts(&mut self) -> Vec<(MemberState, MemberState)> {
        self.shifts.drain(..).collect()
    }

    fn set(&mut self, to: MemberState) {
        if to != self.state {
            if self.shifts.len() == MAX_SHIFTS {
                self.shifts.pop_front();
            }
            self.shifts.push_back((self.state, to));
        }
        self.state = to;
    }

    /// Entered a primary component without the group's state: waiting for
    /// a state transfer.
    pub fn joining(&mut self) {
        self.set(MemberState::Joiner);
    }

    /// Entered a primary component with the group's state: Joined.
    pub fn joined(&mut self) {
        self.set(if self.desyncs > 0 {
            MemberState::Donor
        } else {
            MemberState::Joined
        });
    }

    /// Caught up after joining. Returns whether `synced_cb` is due.
    pub fn caught_up(&mut self) -> Notify {
        if self.state == MemberState::Joined {
            self.set(MemberState::Synced);
            Notify::Synced
        } else {
            Notify::Nothing
        }
    }

    /// `desync()`: only a node in the primary component can desync.
    pub fn desync(&mut self) -> Result<(), MemberState> {
        match self.state {
            MemberState::Synced | MemberState::Joined | MemberState::Donor => {
                self.desyncs += 1;
                self.set(MemberState::Donor);
                Ok(())
            }
            other => Err(other),
        }
    }

    /// `resync()`: the last one returns the node to Joined.
    pub fn resync(&mut self) -> Result<(), MemberState> {
        if self.desyncs == 0 {
            return Err(self.state);
        }
        self.desyncs -= 1;
        if self.desyncs == 0 && self.state == MemberState::Donor {
            self.set(MemberState::Joined);
        }
        Ok(())
    }

    /// Left the primary component (non-primary view, or closed).
    pub fn left_primary(&mut self) {
        self.set(MemberState::Undefined);
    }

    /// Closed for good: forget desyncs too.
    pub fn closed(&mut self) {
        self.set(MemberState::Undefined);
        self.desyncs = 0;
    }

    pub fn inconsistent(&mut self) {
        self.set(MemberState::Error);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bootstrap_goes_joined_then_synced_once() {
        let mut s = LocalState::default();
        assert_eq!(s.state().comment(), "Initialized");
        s.joined();
        assert_eq!(s.state().wsrep_value(), 3);
        assert_eq!(s.caught_up(), Notify::Synced);
        assert_eq!(s.caught_up(), Notify::Nothing);
        assert_eq!(s.state().wsrep_value(), 4);
    }

    #[test]
    fn overlapping_desyncs_count_and_only_the_last_resync_rejoins() {
        let mut s = LocalState::default();
        s.joined();
        s.caught_up();
        s.desync().unwrap();
        s.desync().unwrap();
        assert_eq!(s.desync_count(), 2);
        assert_eq!(s.state().comment(), "Donor/Desynced");
        s.resync().unwrap();
        assert_eq!(s.state(), MemberState::Donor);
        s.resync().unwrap();
        assert_eq!(s.state(), MemberState::Joined);
        assert_eq!(s.caught_up(), Notify::Synced);
        assert!(s.resync().is_err());
    }

    #[test]
    fn each_transition_is_kept_once_for_the_log_and_the_kept_ones_are_bounded() {
        use MemberState::*;
        let mut s = LocalState::default();
        s.joining();
        s.joined();
        s.caught_up();
        s.desync().unwrap();
        s.desync().unwrap(); // no transition: already Donor
        s.resync().unwrap();
        s.resync().unwrap();
        assert_eq!(
            s.take_shifts(),
            [
                (Undefined, Joiner),
                (Joiner, Joined),
                (Joined, Synced),
                (Synced, Donor),
                (Donor, Joined)
            ]
        );
        assert!(s.take_shifts().is_empty(), "taken twice");
        for _ in 0..MAX_SHIFTS {
            s.desync().unwrap();
            s.resync().unwrap();
        }
        let kept = s.take_shifts();
        assert_eq!(kept.len(), MAX_SHIFTS);
        assert_eq!(kept.last(), Some(&(Donor, Joined)), "the newest is kept");
        assert_eq!(Donor.shift_name(), Some("DONOR/DESYNCED"));
        assert_eq!(Undefined.shift_name(), None);
    }

    #[test]
    fn a_node_outside_the_primary_component_cannot_desync() {
        let mut s = LocalState::default();
        assert_eq!(s.desync(), Err(MemberState::Undefined));
    }
}
