//! What feeds ordered events into this node's writeset cache, one owned
//! part: the cache file (`writeset_cache`), whether this node's state is
//! the group's yet (only then are the group's events its own to cache),
//! and how far back the group log itself reaches.
//!
//! A write error disables the cache here, in one place: the node runs on
//! and joiners that need its events take a full SST.

use crate::log::info;
use crate::writeset_cache::WritesetCache;
use lockstep_core::writeset_cache::{CachedEvent, CachedKind};

#[derive(Default)]
pub struct CacheFeed {
    /// `None` before the first connect, with `gcache.recover=no` on an
    /// arbitrator, or after a write error.
    cache: Option<WritesetCache>,
    /// This node's state is the group's (joined or founded): ordered
    /// events go to the cache. Before, a joiner that refuses to join (a
    /// fork, a node ahead) must not take the group's events for its own.
    live: bool,
    /// The seqno before the lowest the group log holds
    /// (`wsrep_local_cached_downto - 1` from the log), copied in the round.
    log_after: Option<i64>,
}

impl CacheFeed {
    /// The cache opened at connect, unless one is open already.
    pub fn open_if_none(&mut self, opened: Option<WritesetCache>) {
        if self.cache.is_none() {
            self.cache = opened;
        }
    }

    /// The cache, to read from (IST, a founder's replay, checks).
    pub fn get(&self) -> Option<&WritesetCache> {
        self.cache.as_ref()
    }

    /// The cache, for a reader (its reads seek the file).
    pub fn get_mut(&mut self) -> Option<&mut WritesetCache> {
        self.cache.as_mut()
    }

    /// Takes the cache away (a clean stop that leaves it to Galera).
    pub fn take(&mut self) -> Option<WritesetCache> {
        self.cache.take()
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
        let Some(cache) = self.cache.as_mut() else {
            return false;
        };
        if (bytes as u64) < cache.max_record() {
            return true;
        }
        info!(
            "writeset {seqno} ({} MiB) is larger than half of gcache.size: not cached; \
             IST from this node's cache starts after it",
            bytes >> 20
        );
        if let Err(e) = cache.skip_oversized() {
            crate::writeset_cache::disable(&mut self.cache, &e);
        }
        false
    }

    /// Keeps an ordered event of the group's `history`.
    pub fn append(&mut self, history: [u8; 16], seqno: i64, kind: CachedKind) {
        if !self.live {
            return;
        }
        let Some(cache) = self.cache.as_mut() else {
            return;
        };
        let ev = CachedEvent {
            history,
            seqno,
            kind,
        };
        if let Err(e) = cache.append(&ev) {
            crate::writeset_cache::disable(&mut self.cache, &e);
        }
    }

    /// Hands the cache's buffered records to the OS (each round).
    pub fn flush(&mut self) {
        if let Some(Err(e)) = self.cache.as_mut().map(WritesetCache::flush) {
            crate::writeset_cache::disable(&mut self.cache, &e);
        }
    }

    /// A cache file the cache let go of, to delete outside the lock.
    pub fn take_doomed(&mut self) -> Option<std::path::PathBuf> {
        self.cache.as_mut().and_then(WritesetCache::take_doomed)
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
        let disk = self.cache.as_ref().and_then(WritesetCache::first);
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
        let cache =
            WritesetCache::open(dir.path(), "galera.cache", 1 << 20, 1 << 20, true, start).unwrap();
        let mut feed = CacheFeed::default();
        feed.open_if_none(Some(cache));
        assert!(!feed.takes(1, 10), "not live yet");
        feed.append(H, 1, view());
        assert_eq!(feed.cached_downto(), -1);
        feed.go_live();
        assert!(feed.takes(2, 10));
        feed.append(H, 2, view());
        feed.flush();
        assert_eq!(feed.cached_downto(), 2);
        feed.set_log_after(Some(0));
        assert_eq!(feed.cached_downto(), 1, "the group log reaches further");
        feed.wait_for_state();
        feed.append(H, 3, view());
        let cache = feed.get().unwrap();
        assert!(cache.covers(Uuid::from_bytes(H), 1, 2));
        assert!(
            !cache.covers(Uuid::from_bytes(H), 1, 3),
            "3 came while not live"
        );
    }
}
