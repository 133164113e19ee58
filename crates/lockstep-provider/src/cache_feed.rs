//! What feeds ordered events into this node's writeset cache, one owned
//! part: the cache file (`writeset_cache`), whether this node's state is
//! the group's yet (only then are the group's events its own to cache),
//! and how far back the group log itself reaches. The round decides what
//! is cached; the cache's own thread writes it (`cache_writer`, ADR 0032).
//!
//! A write error fails the cache there, in one place: the node then
//! commits nothing more and leaves the cluster (`cache_writer`).

use crate::cache_writer::{CacheWriter, Room, Written};
use crate::log::info;
use crate::writeset_cache::WritesetCache;
use lockstep_core::writeset_cache::{CachedEvent, CachedKind};

#[derive(Default)]
pub struct CacheFeed {
    /// The cache and its writer thread (`cache_writer`): `None` before the
    /// first connect, with `gcache.recover=no` on an arbitrator, or if no
    /// thread could start.
    writer: Option<CacheWriter>,
    /// This node's state is the group's (joined or founded): ordered
    /// events go to the cache. Before, a joiner that refuses to join (a
    /// fork, a node ahead) must not take the group's events for its own.
    live: bool,
    /// The seqno before the lowest the group log holds
    /// (`wsrep_local_cached_downto - 1` from the log), copied in the round.
    log_after: Option<i64>,
}

impl CacheFeed {
    /// The cache opened at connect, unless one is open already (one that
    /// a write error dropped is replaced).
    pub fn open_if_none(&mut self, opened: Option<WritesetCache>) {
        if self.is_open() {
            return;
        }
        if let Some(cache) = opened {
            self.writer = CacheWriter::start(cache);
        }
    }

    /// Whether a cache is open and written.
    pub fn is_open(&self) -> bool {
        self.writer.as_ref().is_some_and(CacheWriter::is_open)
    }

    /// Why the cache failed, if it did (ADR 0032): the node then commits
    /// nothing more and leaves the cluster.
    pub fn failure(&self) -> Option<String> {
        self.writer.as_ref().and_then(CacheWriter::failure)
    }

    /// Runs `f` on the cache once everything queued is written (IST, a
    /// founder's replay, checks); `None` without a cache.
    pub fn with_cache<R>(&self, f: impl FnOnce(&mut WritesetCache) -> R) -> Option<R> {
        self.writer.as_ref().and_then(|w| w.with_cache(f))
    }

    /// Takes the cache and its writer away (a clean stop that leaves the
    /// cache to Galera, or the end of the provider). The caller closes it
    /// (`CacheWriter::close`: what is queued is written) after letting go
    /// of the provider's lock: that may take a while on a slow disk.
    pub fn take_writer(&mut self) -> Option<CacheWriter> {
        self.writer.take()
    }

    /// From now on ordered events are this node's to cache.
    pub fn go_live(&mut self) {
        self.live = true;
    }

    /// A new session: nothing is cached until this node's state is the
    /// group's again.
    pub fn wait_for_state(&mut self) {
        self.live = false;
    }

    /// Whether a writeset of `bytes` ordered at `seqno` goes into the
    /// cache; if not (larger than half of `gcache.size`), the cache starts
    /// over after `seqno`, logged.
    pub fn takes(&mut self, seqno: i64, bytes: usize) -> bool {
        if !self.live {
            return false;
        }
        let Some(writer) = self.writer.as_ref().filter(|w| w.is_open()) else {
            return false;
        };
        if (bytes as u64) < writer.max_record() {
            return true;
        }
        info!(
            "writeset {seqno} ({} MiB) is larger than half of gcache.size: not cached; \
             IST from this node's cache starts after it",
            bytes >> 20
        );
        writer.skip_oversized();
        false
    }

    /// Keeps an ordered event of the group's `history`, `bytes` its
    /// writeset's size (0 for others), written by the first thread that
    /// waits for it or by the writer thread (`cache_writer`).
    pub fn append(&mut self, history: [u8; 16], seqno: i64, kind: CachedKind, bytes: usize) {
        if !self.live {
            return;
        }
        if let Some(writer) = self.writer.as_ref().filter(|w| w.is_open()) {
            let ev = CachedEvent {
                history,
                seqno,
                kind,
            };
            writer.append(ev, bytes);
        }
    }

    /// The round's batch is queued: written by its first waiter, or by
    /// the writer thread now if it is big (`CacheWriter::end_batch`).
    pub fn end_batch(&mut self) {
        if let Some(writer) = &self.writer {
            writer.end_batch();
        }
    }

    /// What a round waits on for room in the writer's queue, after it
    /// lets go of the provider's lock (`cache_writer::Room`); `None`
    /// without a writer.
    pub fn room(&self) -> Option<Room> {
        self.writer.as_ref().map(CacheWriter::room)
    }

    /// What committing the event at `seqno` of `history` waits for: that
    /// event in the cache file (ADR 0032).
    pub fn written(&self, history: [u8; 16], seqno: i64) -> Written {
        self.writer
            .as_ref()
            .map_or_else(Written::nothing, |w| w.written(history, seqno))
    }

    /// `CacheWriter::pause`, for tests.
    #[cfg(test)]
    pub fn pause_writer(&self, on: bool) {
        if let Some(w) = &self.writer {
            w.pause(on);
        }
    }

    pub fn set_log_after(&mut self, after: Option<i64>) {
        self.log_after = after;
    }

    /// The lowest seqno the group log holds, if it holds any.
    pub fn log_from(&self) -> Option<i64> {
        self.log_after.map(|s| s + 1)
    }

    /// `wsrep_local_cached_downto`: the lowest seqno this node can serve
    /// by IST, from its group log or its writeset cache (-1: none).
    pub fn cached_downto(&self) -> i64 {
        let disk = self.writer.as_ref().and_then(CacheWriter::first);
        match (self.log_from(), disk) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b).unwrap_or(-1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wsrep_abi::{Gtid, Uuid};

    const H: [u8; 16] = [4; 16];

    fn view() -> CachedKind {
        CachedKind::View {
            members: 0,
            who: None,
        }
    }

    #[test]
    fn nothing_is_cached_before_the_state_is_the_groups() {
        let dir = tempfile::tempdir().unwrap();
        let start = Gtid {
            uuid: Uuid::from_bytes(H),
            seqno: 0,
        };
        let cache = crate::writeset_cache::tests::open(dir.path(), 1 << 20, true, start);
        let mut feed = CacheFeed::default();
        feed.open_if_none(Some(cache));
        assert!(!feed.takes(1, 10), "not live yet");
        feed.append(H, 1, view(), 0);
        assert_eq!(feed.cached_downto(), -1);
        feed.go_live();
        assert!(feed.takes(2, 10));
        feed.append(H, 2, view(), 0);
        feed.end_batch();
        assert_eq!(
            feed.written(H, 2).wait(std::time::Duration::from_secs(5)),
            Ok(())
        );
        assert_eq!(feed.cached_downto(), 2);
        feed.set_log_after(Some(0));
        assert_eq!(feed.cached_downto(), 1, "the group log reaches further");
        feed.wait_for_state();
        feed.append(H, 3, view(), 0);
        feed.end_batch();
        let covers = |last| {
            feed.with_cache(|c| c.covers(Uuid::from_bytes(H), 1, last))
                .unwrap()
        };
        assert!(covers(2));
        assert!(!covers(3), "3 came while not live");
        assert!(feed.take_writer().and_then(CacheWriter::close).is_some());
        assert!(!feed.is_open());
    }
}
