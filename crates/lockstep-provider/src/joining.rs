//! A joiner's state transfer as the provider's state holds it: what the
//! group and the server reported so far (the donor chosen, none found,
//! the donor's result, `sst_received`, the cache IST stream), the events
//! buffered for IST, and the donors it asks for (`wsrep_sst_donor`).
//!
//! One owner, two sides: the rounds and the server's callbacks report
//! into it; the joining applier thread waits until [`Joining::outcome`]
//! has one (`state_transfer/mod.rs`). Each request starts from no
//! reports, so a report of an earlier request cannot end a later wait.

use crate::ist_replay::IstBuffer;
use wsrep_abi::Gtid;

pub struct Joining {
    reports: Reports,
    /// Events after this node's position, replayed from the group log or
    /// streamed from a donor's cache, for IST. Bounded by `ist_limit`
    /// (`gcache.size`).
    ist: IstBuffer,
    /// `wsrep_sst_donor`: the donors to ask for, in order; empty for any.
    donors: String,
}

#[derive(Debug, Default, Clone)]
struct Reports {
    /// The group found no donor (asked again after a second).
    no_donor: bool,
    /// The donor's result (`sst_sent`), a negative errno on failure.
    donor_rcode: Option<i32>,
    /// `sst_received` from the server.
    received: Option<(Gtid, i32)>,
    /// IST from a donor's writeset cache: its writesets are in `ist` (how
    /// many), or why the stream failed.
    streamed: Option<Result<usize, String>>,
    /// The donor the group chose for this node.
    donor: Option<u64>,
    /// The donor left the group before the transfer ended.
    donor_left: bool,
}

/// What one wait for a state asks for.
#[derive(Debug, Clone, Copy)]
pub struct Asked {
    /// A cache IST stream was asked for too.
    pub streaming: bool,
    /// Only the stream: the server is running and takes no SST.
    pub stream_only: bool,
    /// The seqno of the view this node joins at.
    pub join_seqno: i64,
}

/// How a wait for a state ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    DonorLeft,
    StreamFailed(String),
    /// The stream alone was asked for, and it came.
    Streamed,
    /// `sst_received`: the server's position, and its script's code.
    Received(Gtid, i32),
    /// The donor's script failed (a negative errno).
    DonorFailed(i32),
    /// No donor could be chosen: ask again.
    NoDonor,
}

impl Joining {
    /// Nothing to join yet: `have` is this node's position.
    pub fn new(have: Gtid) -> Joining {
        Joining {
            reports: Reports::default(),
            ist: IstBuffer::new(have, 0),
            donors: String::new(),
        }
    }

    /// A new session joins from `have`, buffering at most `ist_limit`
    /// bytes of events for IST.
    pub fn start(&mut self, have: Gtid, ist_limit: usize, donors: &str) {
        self.reports = Reports::default();
        self.ist = IstBuffer::new(have, ist_limit);
        self.donors = donors.to_string();
    }

    /// A new request for a state: forgets what was reported for the one
    /// before; the donors to ask for.
    pub fn new_request(&mut self) -> String {
        self.reports = Reports::default();
        self.donors.clone()
    }

    pub fn donors(&self) -> &str {
        &self.donors
    }

    pub fn donor_chosen(&mut self, donor: u64) {
        self.reports.donor = Some(donor);
    }

    pub fn no_donor(&mut self) {
        self.reports.no_donor = true;
    }

    pub fn donor_result(&mut self, rcode: i32) {
        self.reports.donor_rcode = Some(rcode);
    }

    pub fn state_received(&mut self, gtid: Gtid, rcode: i32) {
        self.reports.received = Some((gtid, rcode));
    }

    /// The cache IST stream ended: its events replace the buffer, or why
    /// it failed.
    pub fn streamed(&mut self, result: Result<IstBuffer, String>) {
        self.reports.streamed = Some(result.map(|buffer| {
            let n = buffer.writesets();
            self.ist = buffer;
            n
        }));
    }

    /// A new primary view with these members: if the chosen donor is not
    /// among them while its transfer still waits, nothing else would end
    /// the wait, so it ends as [`Outcome::DonorLeft`].
    pub fn members_now(&mut self, mut is_member: impl FnMut(u64) -> bool) {
        let r = &mut self.reports;
        let waiting = r.received.is_none() && r.donor_rcode.is_none();
        if r.donor.is_some_and(|d| waiting && !is_member(d)) {
            r.donor_left = true;
        }
    }

    /// How the wait for `asked` ends, once it does; `None` while it goes on.
    pub fn outcome(&self, asked: &Asked) -> Option<Outcome> {
        let r = &self.reports;
        let stream_done = r.streamed.is_some();
        let state_done = r.received.is_some_and(|(gtid, rcode)| {
            rcode != 0 || !asked.streaming || gtid.seqno >= asked.join_seqno - 1 || stream_done
        });
        let ended = state_done
            || (asked.stream_only && stream_done)
            || r.streamed.as_ref().is_some_and(Result::is_err)
            || r.donor_rcode.is_some_and(|rc| rc != 0)
            || r.donor_left
            || r.no_donor;
        if !ended {
            return None;
        }
        Some(if r.donor_left {
            Outcome::DonorLeft
        } else if let Some(Err(why)) = &r.streamed {
            Outcome::StreamFailed(why.clone())
        } else if asked.stream_only && stream_done {
            Outcome::Streamed
        } else if let Some((gtid, rcode)) = r.received {
            Outcome::Received(gtid, rcode)
        } else if let Some(rcode) = r.donor_rcode {
            Outcome::DonorFailed(rcode)
        } else {
            Outcome::NoDonor
        })
    }

    /// What the cache IST stream gave: how many writesets, or why it
    /// failed; `None` if it has not ended.
    pub fn stream_result(&self) -> Option<Result<usize, String>> {
        self.reports.streamed.clone()
    }

    pub fn ist(&self) -> &IstBuffer {
        &self.ist
    }

    pub fn ist_mut(&mut self) -> &mut IstBuffer {
        &mut self.ist
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wsrep_abi::Uuid;

    fn at(seqno: i64) -> Gtid {
        Gtid {
            uuid: Uuid::from_bytes([1; 16]),
            seqno,
        }
    }

    const SST: Asked = Asked {
        streaming: false,
        stream_only: false,
        join_seqno: 10,
    };
    const SST_AND_STREAM: Asked = Asked {
        streaming: true,
        stream_only: false,
        join_seqno: 10,
    };
    const STREAM_ONLY: Asked = Asked {
        streaming: true,
        stream_only: true,
        join_seqno: 10,
    };

    fn joining() -> Joining {
        let mut j = Joining::new(at(3));
        j.start(at(3), 1 << 20, "node2");
        j
    }

    #[test]
    fn an_sst_ends_when_the_state_arrives_and_a_new_request_forgets_it() {
        let mut j = joining();
        assert_eq!(j.new_request(), "node2");
        j.donor_chosen(2);
        assert_eq!(j.outcome(&SST), None, "a donor is no outcome");
        j.donor_result(0);
        assert_eq!(
            j.outcome(&SST),
            None,
            "the donor's success alone is none either"
        );
        j.state_received(at(9), 0);
        assert_eq!(j.outcome(&SST), Some(Outcome::Received(at(9), 0)));
        j.new_request();
        assert_eq!(
            j.outcome(&SST),
            None,
            "an earlier request's reports are gone"
        );
    }

    #[test]
    fn a_state_before_the_join_view_waits_for_the_stream_when_one_was_asked() {
        let mut j = joining();
        j.new_request();
        j.state_received(at(5), 0);
        assert_eq!(
            j.outcome(&SST_AND_STREAM),
            None,
            "5 < 9: the stream holds the rest"
        );
        j.streamed(Ok(IstBuffer::new(at(5), 1 << 20)));
        assert_eq!(
            j.outcome(&SST_AND_STREAM),
            Some(Outcome::Received(at(5), 0))
        );
        assert_eq!(j.stream_result(), Some(Ok(0)));
        // A whole state needs no stream.
        j.new_request();
        j.state_received(at(9), 0);
        assert_eq!(
            j.outcome(&SST_AND_STREAM),
            Some(Outcome::Received(at(9), 0))
        );
    }

    #[test]
    fn failures_end_the_wait_and_name_themselves_first() {
        let mut j = joining();
        j.new_request();
        j.streamed(Err("fork".into()));
        assert_eq!(
            j.outcome(&SST_AND_STREAM),
            Some(Outcome::StreamFailed("fork".into()))
        );
        j.new_request();
        j.donor_result(-5);
        assert_eq!(j.outcome(&SST), Some(Outcome::DonorFailed(-5)));
        j.new_request();
        j.no_donor();
        assert_eq!(j.outcome(&SST), Some(Outcome::NoDonor));
        // The donor leaving wins over everything else reported.
        j.new_request();
        j.donor_chosen(2);
        j.no_donor();
        j.members_now(|id| id == 3);
        assert_eq!(j.outcome(&SST), Some(Outcome::DonorLeft));
    }

    #[test]
    fn a_donor_that_leaves_after_its_transfer_ended_ends_nothing() {
        let mut j = joining();
        j.new_request();
        j.donor_chosen(2);
        j.members_now(|id| id == 2);
        assert_eq!(j.outcome(&SST), None, "still a member");
        j.donor_result(0);
        j.members_now(|_| false);
        assert_eq!(j.outcome(&SST), None, "its part was done");
    }

    #[test]
    fn the_stream_alone_ends_a_wait_for_the_stream_alone() {
        let mut j = joining();
        j.new_request();
        assert_eq!(j.outcome(&STREAM_ONLY), None);
        j.streamed(Ok(IstBuffer::new(at(3), 1 << 20)));
        assert_eq!(j.outcome(&STREAM_ONLY), Some(Outcome::Streamed));
    }
}
