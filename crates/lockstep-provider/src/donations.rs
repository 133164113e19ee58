//! The state transfers this node is donating: an SST script or a cache
//! IST for one joiner, bypass scripts for others, several at once.
//! Bounded by the joiners the group sends here (at most the group's
//! size); cleared with the session.

/// One transfer this node donates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Donation {
    pub joiner: u64,
    /// The seqno of the state handed to the server's script, which
    /// `sst_sent` reports back (the only way to tell scripts apart).
    pub seqno: i64,
    /// Whether it desynced this node (SST, cache IST); a bypass for an IST
    /// from the log does not.
    pub desynced: bool,
}

#[derive(Debug, Default)]
pub struct Donations(Vec<Donation>);

impl Donations {
    pub fn start(&mut self, d: Donation) {
        self.0.push(d);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// The donation that ended, taken out: the one for `joiner` when the
    /// caller knows it (an IST sender); else (`sst_sent`, which is told
    /// only a seqno) the one whose state has `seqno`, or the oldest.
    pub fn finish(&mut self, joiner: Option<u64>, seqno: i64) -> Option<Donation> {
        let found = match joiner {
            Some(j) => self.0.iter().position(|d| d.joiner == j),
            None => self
                .0
                .iter()
                .position(|d| d.seqno == seqno)
                .or((!self.0.is_empty()).then_some(0)),
        };
        found.map(|i| self.0.remove(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(joiner: u64, seqno: i64) -> Donation {
        Donation {
            joiner,
            seqno,
            desynced: true,
        }
    }

    #[test]
    fn a_finished_donation_is_found_by_joiner_then_seqno_then_age() {
        let mut ds = Donations::default();
        for x in [d(2, 10), d(3, 20), d(4, 30)] {
            ds.start(x);
        }
        assert_eq!(
            ds.finish(Some(3), 99),
            Some(d(3, 20)),
            "by joiner, whatever the seqno"
        );
        assert_eq!(ds.finish(Some(3), 20), None, "taken once");
        assert_eq!(ds.finish(None, 30), Some(d(4, 30)), "a script by its seqno");
        assert_eq!(ds.finish(None, 77), Some(d(2, 10)), "no match: the oldest");
        assert!(ds.is_empty());
        assert_eq!(ds.finish(None, 10), None);
    }
}
