//! Commit bypass (ADR 0011): a local transaction that does not depend on a
//! large remote writeset still being applied may commit before it, so a
//! 300 MB `UPDATE` elsewhere does not stop this node's clients for the
//! seconds its apply takes. Everything else keeps the total commit order.
//!
//! The storage engine's recovered position is the highest seqno committed,
//! so a crash inside a bypass could leave it above the large writeset that
//! never committed (or, once InnoDB's per-segment checkpoint is
//! overwritten by the late writeset, below a transaction that did). While
//! that can be, a marker file sits in the data directory; a node that finds
//! it after a crash does not trust its position and takes a full state
//! transfer. The marker goes once a later seqno has committed in order and
//! the storage engine has had time to write its log.

use crate::log::{info, warn};
use crate::storage::marker::{Marker, MarkerJob, Wish};
use crate::storage::{self, Disk, Fs};
use lockstep_core::gates::Watermark;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub const MARKER_FILE: &str = "lockstep_commit_bypass.dat";

/// How long after the bypass closed the marker stays: InnoDB writes and
/// flushes its redo log at least once a second by default
/// (`innodb_flush_log_at_timeout`), so the in-order commit that closed the
/// window is on disk by then.
pub const SETTLE: Duration = Duration::from_secs(3);

/// Writesets queued behind a large writeset that has not committed, which
/// flow control does not count (ADR 0011): at most this many, of at most
/// [`BEHIND_LARGE_BYTES`] in all. Waiting behind a large writeset is a
/// bounded lag (its apply time), not a node falling behind; counting it
/// would stop every writer of the cluster for that time (Galera's stall).
pub const BEHIND_LARGE_EVENTS: usize = 65_536;
pub const BEHIND_LARGE_BYTES: u64 = 64 << 20;

/// Once the large writeset has committed, the backlog its apply left may
/// drain for at most this long before flow control counts all of it again
/// (the allowance shrinks to nothing over this time).
pub const BACKLOG_DRAIN: Duration = Duration::from_secs(10);

/// What flow control leaves out while the backlog of a large apply drains
/// (`Bypass::counted`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backlog {
    /// Events exempt when the large writeset committed.
    initial: u64,
    /// Events exempt now: never more than the queue has held since, so
    /// the lag can shrink but not grow back.
    allowance: u64,
    /// When the large writeset left commit order (first seen).
    since: Option<Instant>,
}

/// The bypass bookkeeping, in `Inner`.
#[derive(Default)]
pub struct Bypass {
    /// `lockstep.commit_bypass`, bytes; 0: never (mirrored from the
    /// provider's tunables).
    pub threshold: u64,
    /// Remote writesets of at least `lockstep.commit_bypass` bytes that
    /// have not left commit order. Bound: the applier queue (flow
    /// control), entries leave at commit order.
    pub large: BTreeSet<i64>,
    /// The highest seqno that committed ahead of an earlier one, while the
    /// window is open.
    pub highest: Option<i64>,
    /// When `last_committed` first passed `highest`.
    pub settled_since: Option<Instant>,
    /// The marker file: wished there or gone under the state lock,
    /// written or removed outside it (`storage::marker`, ADR 0038).
    marker: Marker,
    /// The marker is on disk for the window now open.
    pub marker_written: bool,
    /// The window closed: a round removes the marker (`take_removal`),
    /// unless a new window wished it there again meanwhile.
    removal_due: bool,
    /// Transactions that committed ahead (unit tests; the log says when a
    /// window opens).
    pub count: u64,
    /// What each local transaction waiting for commit order depends on
    /// (`Certifier::last_related`), by seqno, while the bypass is on.
    /// Bound: the local transactions in flight (one per client thread);
    /// entries leave with commit order (`forget_upto`).
    pub related: BTreeMap<i64, Vec<i64>>,
    /// The backlog a large writeset's apply left, while it drains
    /// (`counted`).
    pub backlog: Option<Backlog>,
}

impl Bypass {
    /// The data directory, where the marker lives.
    pub fn set_marker_dir(&mut self, dir: PathBuf) {
        self.marker = Marker::at(dir.join(MARKER_FILE), MARKER_TEXT);
    }

    /// A remote writeset was ordered at `seqno`: remembered if it is large.
    /// Whether it is large (it then holds back what follows it).
    pub fn ordered(&mut self, seqno: i64, bytes: usize) -> bool {
        let large = self.threshold > 0 && bytes as u64 >= self.threshold;
        if large {
            self.large.insert(seqno);
        }
        large
    }

    /// The lowest large writeset above commit level `level`: the one that
    /// holds the commit order now, or will.
    pub fn holding(&self, level: i64) -> Option<i64> {
        self.large.range(level + 1..).next().copied()
    }

    /// Of `queued` (seqno, bytes) events, how many flow control counts at
    /// `now`: those behind the large writeset that holds commit order are
    /// left out, up to [`BEHIND_LARGE_EVENTS`] and [`BEHIND_LARGE_BYTES`].
    ///
    /// Once it has committed, that many events stay out while the backlog
    /// drains: the allowance follows the queue down (the lag may shrink,
    /// never grow back) and falls to nothing over [`BACKLOG_DRAIN`]. So a
    /// node that applies faster than the cluster writes catches up without
    /// stopping anyone; one that does not is throttled to its pace, with
    /// the lag bounded by what the big apply left. Counting the backlog at
    /// once stopped every writer for a second or two after the apply; so
    /// did exempting only the writesets that had queued behind it, since
    /// those ordered after them then counted against `gcs.fc_limit` until
    /// the whole backlog was applied.
    pub fn counted(
        &mut self,
        level: i64,
        queued: impl Iterator<Item = (Option<i64>, usize)>,
        now: Instant,
    ) -> u64 {
        let large = self.holding(level);
        let (mut total, mut behind, mut bytes) = (0u64, 0u64, 0u64);
        for (seqno, size) in queued {
            total += 1;
            let exempt = matches!((seqno, large), (Some(s), Some(l)) if s > l);
            if exempt
                && behind < BEHIND_LARGE_EVENTS as u64
                && bytes + size as u64 <= BEHIND_LARGE_BYTES
            {
                behind += 1;
                bytes += size as u64;
            }
        }
        if large.is_some() {
            self.backlog = (behind > 0).then_some(Backlog {
                initial: behind,
                allowance: behind,
                since: None,
            });
            return total - behind;
        }
        let Some(b) = self.backlog.as_mut() else {
            return total;
        };
        let since = *b.since.get_or_insert(now);
        let left = BACKLOG_DRAIN.saturating_sub(now.saturating_duration_since(since));
        let decayed =
            (b.initial as u128 * left.as_millis() / BACKLOG_DRAIN.as_millis().max(1)) as u64;
        b.allowance = b.allowance.min(total).min(decayed);
        let allowance = b.allowance;
        if allowance == 0 {
            self.backlog = None;
        }
        total - allowance
    }

    /// Whether a local transaction at `seqno` whose dependencies end at
    /// `depends_on` may enter commit order now, given what has passed
    /// commit order (`commit`): a large writeset is what holds it back, and
    /// everything it depends on has committed. That is everything up to
    /// `depends_on`, or, when certification listed its dependencies
    /// (`related`), just those: a transaction that depends on one that
    /// itself committed ahead of the large writeset may follow it (without
    /// the list, the first such dependency stopped every client thread of
    /// the node in turn until the large writeset had committed).
    pub fn allows(&self, seqno: i64, depends_on: i64, commit: &Watermark) -> bool {
        // No marker, no bypass: a crash inside the window must be seen at
        // the next start (issue 34).
        if !self.marker_written {
            return false;
        }
        let level = commit.level();
        if !self.holds_back(seqno, level) {
            return false;
        }
        if depends_on <= level {
            return true;
        }
        self.related
            .get(&seqno)
            .is_some_and(|deps| deps.iter().all(|&d| d < seqno && commit.has_passed(d)))
    }

    /// Whether a large writeset between commit level `level` and `seqno`
    /// holds the transaction at `seqno` back (it may then pass it).
    pub fn holds_back(&self, seqno: i64, level: i64) -> bool {
        self.large.range(level + 1..seqno).next().is_some()
    }

    /// A local transaction ordered at `seqno` depends on `related`
    /// (`None`: on everything before it). Kept only while the bypass is on.
    pub fn note_related(&mut self, seqno: i64, related: Option<Vec<i64>>) {
        if let (true, Some(deps)) = (self.threshold > 0, related) {
            self.related.insert(seqno, deps);
        }
    }

    /// Commit order passed `level`: what waited below it is done.
    pub fn forget_upto(&mut self, level: i64) {
        while self
            .related
            .first_key_value()
            .is_some_and(|(s, _)| *s <= level)
        {
            self.related.pop_first();
        }
    }

    /// A local transaction is held back by a large writeset: the marker
    /// must be on disk, durably, before any transaction may pass it
    /// ([`Bypass::allows`] says no until then). The job writes it, after
    /// the caller lets go of the state lock (`run_marker_job`); `None`
    /// when it is written. Its outcome goes to [`Bypass::marker_done`]. If
    /// it cannot be written, transactions wait for their turn in order;
    /// the next one held back tries again.
    pub fn prepare(&mut self) -> Option<MarkerJob> {
        (!self.marker_written).then(|| self.marker.want(true))
    }

    /// A marker job from [`Bypass::prepare`] ran: `written` tells whether
    /// the file is there. It counts only if its wish is still the newest
    /// (the window may have closed meanwhile).
    pub fn marker_done(&mut self, wish: Wish, written: bool) {
        if written && wish.present() && self.marker.is_current(wish) {
            self.marker_written = true;
        }
    }

    /// The marker removal a closed window left, for the round to run after
    /// it lets go of the state lock: none if a new window wished the marker
    /// there again meanwhile.
    pub fn take_removal(&mut self) -> Option<MarkerJob> {
        let due = std::mem::take(&mut self.removal_due);
        (due && !self.marker.wanted().present()).then(|| self.marker.job())
    }

    /// A whole state arrived by state transfer: whatever marker a crash
    /// inside a bypass left goes (run after the state lock is let go of).
    pub fn forget_marker(&mut self) -> MarkerJob {
        self.marker_written = false;
        self.removal_due = false;
        self.marker.want(false)
    }

    /// `seqno` commits ahead of an earlier seqno: opens (or widens) the
    /// window. The marker is on disk ([`Bypass::prepare`]).
    pub fn opened(&mut self, seqno: i64) {
        if self.highest.is_none() {
            info!(
                "seqno {seqno} commits ahead of large writeset {}, still being applied \
                 (lockstep.commit_bypass)",
                self.large.first().copied().unwrap_or(-1)
            );
        }
        self.highest = Some(self.highest.map_or(seqno, |h| h.max(seqno)));
        self.settled_since = None;
        self.count += 1;
    }

    /// Called as seqnos finish: closes the window once `last_committed`
    /// has passed every bypassing seqno for [`SETTLE`].
    pub fn settle(&mut self, last_committed: i64) {
        // Entries a state transfer jumped over never leave commit order.
        while self.large.first().is_some_and(|s| *s <= last_committed) {
            self.large.pop_first();
        }
        let Some(highest) = self.highest else {
            return;
        };
        if last_committed <= highest {
            self.settled_since = None;
            return;
        }
        let since = *self.settled_since.get_or_insert_with(Instant::now);
        if since.elapsed() >= SETTLE {
            // Wished gone now, so that a new window's wish is a newer
            // one; removed by the next round, outside the state lock
            // (`take_removal`); until then it errs on the safe side.
            self.marker.set(false);
            self.removal_due = true;
            self.highest = None;
            self.settled_since = None;
            self.marker_written = false;
        }
    }
}

/// Runs a marker job (`prepare`'s, `take_removal`'s, `forget_marker`'s)
/// under no lock; `true` when the file is as the job wishes. A failure is
/// logged: a marker not written keeps the strict commit order, one not
/// removed sends a crashed node to a full state transfer (the safe side).
pub fn run_marker_job(job: MarkerJob, fs: &dyn Fs) -> bool {
    let present = job.wish().present();
    job.run(fs).unwrap_or_else(|e| {
        if present {
            warn!(
                "cannot write the commit bypass marker ({e}); transactions wait for the large \
                 writeset in commit order (no commit bypass without its marker)"
            );
        } else {
            warn!("cannot remove the commit bypass marker ({e})");
        }
        false
    })
}

const MARKER_TEXT: &str = "# Lockstep: local transactions may commit ahead of a large writeset.\n\
                           # Present after a crash: the node takes a full state transfer.\n";

pub fn marker_present(dir: &Path) -> bool {
    marker_present_on(&Disk, dir)
}

fn marker_present_on(fs: &dyn Fs, dir: &Path) -> bool {
    storage::marker_present(fs, &dir.join(MARKER_FILE))
}

pub fn remove_marker(dir: &Path) {
    remove_marker_on(&Disk, dir);
}

fn remove_marker_on(fs: &dyn Fs, dir: &Path) {
    storage::remove_marker(fs, &dir.join(MARKER_FILE));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `commit_order_enter` does: the marker's job, run, and its
    /// outcome told.
    fn prepare(b: &mut Bypass, fs: &dyn Fs) {
        if let Some(job) = b.prepare() {
            let wish = job.wish();
            let written = run_marker_job(job, fs);
            b.marker_done(wish, written);
        }
    }

    /// What a round does after `settle` closed the window.
    fn remove_if_due(b: &mut Bypass) {
        if let Some(job) = b.take_removal() {
            assert!(run_marker_job(job, &Disk));
        }
    }

    fn with_dir(dir: &Path) -> Bypass {
        let mut b = Bypass::default();
        b.set_marker_dir(dir.into());
        b
    }

    #[test]
    fn only_a_large_writeset_in_the_way_lets_a_transaction_pass() {
        let mut b = Bypass::default();
        let at = Watermark::new;
        // Nothing large pending: strict order.
        assert!(!b.allows(12, 5, &at(10)));
        b.large.insert(11);
        assert!(!b.allows(12, 10, &at(10)), "no marker yet");
        prepare(&mut b, &Disk); // no marker directory: nothing to write
        assert!(
            b.allows(12, 10, &at(10)),
            "independent of 11, which is large"
        );
        assert!(!b.allows(12, 11, &at(10)), "depends on the large one");
        assert!(!b.allows(11, 5, &at(10)), "the large one itself");
        assert!(
            !b.allows(15, 5, &at(11)),
            "11 has committed: nothing large below"
        );
        b.large.insert(20);
        assert!(
            !b.allows(15, 12, &at(11)),
            "a dependency (12) has not committed"
        );
        assert!(b.allows(21, 11, &at(11)));
    }

    #[test]
    fn a_transaction_may_follow_one_that_committed_ahead() {
        let mut b = Bypass {
            threshold: 1,
            ..Bypass::default()
        };
        b.large.insert(11);
        prepare(&mut b, &Disk);
        let mut commit = Watermark::new(10);
        commit.mark(12).unwrap(); // committed ahead of 11
                                  // 14 depends on 12 (committed) and 13 (not yet).
        b.note_related(14, Some(vec![12, 13]));
        assert!(!b.allows(14, 13, &commit));
        commit.mark(13).unwrap();
        assert!(b.allows(14, 13, &commit), "12 and 13 have committed");
        // 15 depends on the large writeset itself, and on 14.
        b.note_related(15, Some(vec![11, 14]));
        commit.mark(14).unwrap();
        assert!(!b.allows(15, 14, &commit));
        // Without the list: everything up to depends_on, 11 included.
        b.note_related(16, None);
        assert!(!b.allows(16, 14, &commit));
        commit.mark(11).unwrap();
        b.forget_upto(commit.level());
        assert_eq!(b.related.keys().copied().collect::<Vec<_>>(), vec![15]);
    }

    #[test]
    fn flow_control_leaves_out_what_waits_behind_a_large_writeset_up_to_a_bound() {
        let now = Instant::now();
        let mut b = Bypass::default();
        let queued = |n: i64| (20..20 + n).map(|s| (Some(s), 100usize));
        assert_eq!(
            b.counted(10, queued(50), now),
            50,
            "nothing large: all count"
        );
        b.large.insert(15);
        assert_eq!(b.counted(10, queued(50), now), 0, "all behind 15");
        // (A made-up change of the large writeset: a fresh bookkeeping.)
        let mut b = Bypass {
            large: BTreeSet::from([30]),
            ..Bypass::default()
        };
        assert_eq!(
            b.counted(10, queued(50), now),
            11,
            "20..=30 count, 31.. do not"
        );
        let many = (31..31 + BEHIND_LARGE_EVENTS as i64 + 7).map(|s| (Some(s), 10usize));
        assert_eq!(
            b.counted(10, many, now),
            7,
            "past the bound they count again"
        );
        let big = (31..41).map(|s| (Some(s), (BEHIND_LARGE_BYTES / 4) as usize));
        assert_eq!(b.counted(10, big, now), 6, "4 fit in the byte bound");
    }

    #[test]
    fn the_backlog_a_large_writeset_left_may_shrink_but_not_grow_back() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut b = Bypass::default();
        let queued = |from: i64, to: i64| (from..=to).map(|s| (Some(s), 100usize));
        b.large.insert(30);
        assert_eq!(b.counted(29, queued(31, 1030), at(0)), 0, "1000 behind 30");
        b.large.clear();
        // 30 committed: as many events stay out while the backlog drains,
        // whichever they are; new ones take the places of applied ones.
        assert_eq!(b.counted(30, queued(31, 1030), at(0)), 0);
        assert_eq!(b.counted(400, queued(401, 1200), at(1000)), 0, "800 queued");
        // The allowance followed the queue down to 800: growing back to 1000
        // counts the 200 above it.
        assert_eq!(b.counted(600, queued(601, 1600), at(2000)), 200);
        // Over BACKLOG_DRAIN it falls to nothing: at 9/10 of it, 100 of the
        // initial 1000 may stay out.
        assert_eq!(b.counted(700, queued(701, 1600), at(9000)), 800);
        assert_eq!(b.counted(700, queued(701, 1600), at(10_000)), 900);
        assert_eq!(b.backlog, None, "drained: the bookkeeping goes");
        assert_eq!(b.counted(700, queued(701, 1600), at(10_001)), 900);
    }

    #[test]
    fn the_marker_stays_until_a_later_seqno_committed_and_settled() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = with_dir(dir.path());
        prepare(&mut b, &Disk);
        b.opened(12);
        assert!(marker_present(dir.path()));
        b.settle(11);
        b.settle(12);
        remove_if_due(&mut b);
        assert!(marker_present(dir.path()), "nothing past 12 committed yet");
        b.settle(13);
        remove_if_due(&mut b);
        assert!(b.settled_since.is_some());
        assert!(marker_present(dir.path()), "not settled yet");
        b.settled_since = Some(Instant::now() - SETTLE);
        b.settle(13);
        assert!(marker_present(dir.path()), "removed by a round, not here");
        remove_if_due(&mut b);
        assert!(!marker_present(dir.path()));
        assert_eq!(b.highest, None);
        // A new window writes it again.
        assert!(!b.marker_written);
        prepare(&mut b, &Disk);
        b.opened(30);
        assert!(marker_present(dir.path()));
        assert_eq!(b.count, 2);
    }

    /// A window that opens after another closed, before a round removed
    /// the old marker: the removal must not take the new window's marker
    /// away (the closing is a wish of its own, older than the new one).
    #[test]
    fn a_new_window_keeps_its_marker_when_the_old_ones_removal_runs_late() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = with_dir(dir.path());
        prepare(&mut b, &Disk);
        b.opened(12);
        b.settle(13);
        b.settled_since = Some(Instant::now() - SETTLE);
        b.settle(13); // the first window closes; no round yet
        assert!(!b.marker_written);
        prepare(&mut b, &Disk); // a second window, held back
        assert!(b.marker_written);
        remove_if_due(&mut b); // the round comes late
        assert!(
            marker_present(dir.path()),
            "the second window's marker was removed"
        );
        assert!(b.marker_written);
        // And a removal job taken before the new wish, run after it.
        b.opened(20);
        b.settle(21);
        b.settled_since = Some(Instant::now() - SETTLE);
        b.settle(21);
        let late = b.take_removal().expect("the window closed");
        prepare(&mut b, &Disk);
        assert!(!run_marker_job(late, &Disk), "overtaken by the new write");
        assert!(marker_present(dir.path()));
        assert!(b.marker_written);
    }

    #[test]
    fn without_its_marker_on_disk_nothing_passes_a_large_writeset() {
        use crate::storage::power_loss::SimFs;
        let dir = Path::new("/data");
        let commit = Watermark::new(10);
        for cut in 0.. {
            let fs = SimFs::new();
            let mut b = with_dir(dir);
            b.threshold = 100;
            assert!(b.ordered(11, 1000), "11 is large");
            fs.cut_after(cut);
            prepare(&mut b, &fs);
            let passes = b.allows(12, 10, &commit);
            fs.power_loss();
            let on_disk = marker_present_on(&fs, dir);
            // Whatever step the power went at: a transaction passes only
            // if the marker survives it.
            assert!(
                !passes || on_disk,
                "cut {cut}: passed without a durable marker"
            );
            if passes {
                assert!(
                    cut >= 4,
                    "the marker took {cut} steps, fewer than a durable write"
                );
                break;
            }
            assert!(cut < 10, "the marker never got written");
        }
    }
}
