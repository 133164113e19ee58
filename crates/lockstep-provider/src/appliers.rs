//! The server's applier threads as the provider counts them, one owned
//! part: how many sit in `recv()`, how many are inside `apply_cb`,
//! whether an isolating event (a view, a state transfer) runs, and where
//! the session's final view is (contract P19: one applier delivers it,
//! after the others have left `apply_cb`).

#[derive(Debug, Default)]
pub struct Appliers {
    /// Threads inside `recv()`.
    in_recv: usize,
    /// Threads inside `apply_cb`.
    applying: usize,
    /// An isolating event runs: no other event may start.
    isolating: bool,
    /// One applier is delivering the final view.
    ending: bool,
    final_delivered: bool,
}

impl Appliers {
    /// A new session: no final view yet, nothing isolating.
    pub fn new_session(&mut self) {
        self.final_delivered = false;
        self.ending = false;
        self.isolating = false;
    }

    pub fn enter_recv(&mut self) {
        self.in_recv += 1;
    }

    pub fn leave_recv(&mut self) {
        self.in_recv = self.in_recv.saturating_sub(1);
    }

    /// Threads inside `recv()`.
    pub fn in_recv(&self) -> usize {
        self.in_recv
    }

    /// Whether the calling applier is the last one in `recv()` (it may
    /// not leave its loop: the final view needs an applier).
    pub fn is_last(&self) -> bool {
        self.in_recv <= 1
    }

    pub fn start_apply(&mut self) {
        self.applying += 1;
    }

    /// An applier left `apply_cb`; `true` if a final view waits for it.
    pub fn end_apply(&mut self) -> bool {
        self.applying = self.applying.saturating_sub(1);
        self.ending
    }

    /// Whether an applier is inside `apply_cb`.
    pub fn any_applying(&self) -> bool {
        self.applying > 0
    }

    /// Whether a new event may start now (none isolating runs).
    pub fn may_start(&self) -> bool {
        !self.isolating
    }

    /// An event starts; an isolating one keeps the others out until
    /// [`Appliers::end_isolation`].
    pub fn start_event(&mut self, isolating: bool) {
        self.isolating |= isolating;
    }

    /// The isolating event is over (or the session ends under it).
    pub fn end_isolation(&mut self) {
        self.isolating = false;
    }

    /// This applier is to deliver the final view: `false` if another one
    /// does, or did.
    pub fn begin_ending(&mut self) -> bool {
        if self.final_delivered || self.ending {
            return false;
        }
        self.ending = true;
        true
    }

    /// The final view was delivered: the session is closed.
    pub fn ended(&mut self) {
        self.final_delivered = true;
    }

    pub fn final_delivered(&self) -> bool {
        self.final_delivered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_applier_delivers_the_final_view_once_per_session() {
        let mut a = Appliers::default();
        a.enter_recv();
        a.enter_recv();
        a.start_apply();
        assert!(a.begin_ending());
        assert!(!a.begin_ending(), "a second applier does not");
        assert!(
            a.end_apply(),
            "the applier inside apply_cb wakes the ending one"
        );
        assert!(!a.any_applying());
        a.ended();
        assert!(!a.begin_ending());
        a.new_session();
        assert!(!a.final_delivered() && a.begin_ending());
    }

    #[test]
    fn an_isolating_event_keeps_the_others_out() {
        let mut a = Appliers::default();
        a.start_event(false);
        assert!(a.may_start());
        a.start_event(true);
        assert!(!a.may_start());
        a.end_isolation();
        assert!(a.may_start());
        a.enter_recv();
        assert!(a.is_last());
        a.enter_recv();
        assert!(!a.is_last());
        a.leave_recv();
        assert_eq!(a.in_recv(), 1);
    }
}
