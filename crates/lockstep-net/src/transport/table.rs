//! The connections of one transport: by peer, still opening, and the
//! bounds on those that have not said hello yet.

use super::queue::Queue;
use crate::identity::CertFingerprint;
use std::collections::HashMap;
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Accepted connections still opening (TLS handshake, hello), at most,
/// and at most per peer host: a flood of idle connections from one host
/// cannot hold more than its share, nor memory beyond these times a
/// handshake's buffers. Beyond, a new connection is closed at once.
pub const MAX_OPENING: usize = 64;
pub const MAX_OPENING_PER_HOST: usize = 8;
/// New connections accepted per peer host and second, at most: each costs
/// a thread until its handshake fails, so a host that connects and drops
/// in a loop is held to this rate; beyond, a connection is closed unread.
/// (Members redial an address at most twice a second.)
pub const MAX_ACCEPTS_PER_HOST_PER_SEC: u32 = 32;
/// Hosts remembered for the accept rate and addresses for the refusal log
/// rate, at most: a flood from many addresses cannot grow them further
/// (the oldest entries go first).
const MAX_REMEMBERED: usize = 4096;

pub(super) struct Conn {
    pub(super) id: u64,
    pub(super) out: Arc<Queue>,
    /// The address the peer advertised in its hello.
    pub(super) addr: String,
    /// The address this node dialed to open it (none if accepted).
    pub(super) dialed: Option<String>,
    /// The certificate the peer presented (`None`: plain TCP).
    pub(super) cert: Option<CertFingerprint>,
}

#[derive(Default)]
pub(super) struct Table {
    pub(super) by_peer: HashMap<u64, Vec<Conn>>,
    pub(super) dialing: HashMap<String, Instant>,
    /// Every open connection (identified or not), to close them all on
    /// shutdown; each connection removes itself when it ends.
    pub(super) open: HashMap<u64, TcpStream>,
    /// When a refusal was last logged, per peer address: a peer that keeps
    /// redialing must not flood the error log.
    pub(super) refusals_logged: HashMap<String, Instant>,
    /// Accepted connections before their hello, per peer host (bounded by
    /// `MAX_OPENING`).
    pub(super) opening: HashMap<std::net::IpAddr, usize>,
    /// Connections accepted per peer host in the current second.
    accepts: HashMap<std::net::IpAddr, (Instant, u32)>,
    /// Connections closed unread for the accept rate.
    pub(super) rate_refused: u64,
}

impl Table {
    /// Whether a connection that said hello already reaches `addr` (as
    /// dialed, or as its peer advertises itself).
    pub(super) fn reaches(&self, addr: &str) -> bool {
        self.by_peer
            .values()
            .flatten()
            .any(|c| c.addr == addr || c.dialed.as_deref() == Some(addr))
    }

    /// Whether one more connection from `host` is within its rate now.
    pub(super) fn accept_allowed(&mut self, host: std::net::IpAddr, now: Instant) -> bool {
        let second = Duration::from_secs(1);
        if self.accepts.len() >= MAX_REMEMBERED {
            self.accepts.retain(|_, (since, _)| now < *since + second);
        }
        let (since, count) = self.accepts.entry(host).or_insert((now, 0));
        if now >= *since + second {
            *since = now;
            *count = 0;
        }
        if *count >= MAX_ACCEPTS_PER_HOST_PER_SEC {
            self.rate_refused += 1;
            return false;
        }
        *count += 1;
        true
    }

    #[cfg(test)]
    pub(super) fn accept_len(&self) -> usize {
        self.accepts.len()
    }

    /// Whether a refusal about `key` is due in the log now (at most once
    /// per `every`), remembering that it was.
    pub(super) fn refusal_due(&mut self, key: &str, now: Instant, every: Duration) -> bool {
        if self
            .refusals_logged
            .get(key)
            .is_some_and(|at| now < *at + every)
        {
            return false;
        }
        if self.refusals_logged.len() >= MAX_REMEMBERED {
            self.refusals_logged.retain(|_, at| now < *at + every);
            if self.refusals_logged.len() >= MAX_REMEMBERED {
                self.refusals_logged.clear();
            }
        }
        self.refusals_logged.insert(key.to_string(), now);
        true
    }
}

/// An accepted connection's place among those still opening; given back
/// when dropped (hello done, or the connection ended).
pub(super) struct OpeningSlot {
    table: Arc<Mutex<Table>>,
    host: std::net::IpAddr,
}

impl OpeningSlot {
    /// A place for a connection from `host`, if the bounds allow one.
    pub(super) fn take(table: &Arc<Mutex<Table>>, host: std::net::IpAddr) -> Option<OpeningSlot> {
        let mut t = table.lock().unwrap_or_else(|p| p.into_inner());
        let total: usize = t.opening.values().sum();
        let here = t.opening.get(&host).copied().unwrap_or(0);
        if total >= MAX_OPENING || here >= MAX_OPENING_PER_HOST {
            return None;
        }
        *t.opening.entry(host).or_default() += 1;
        Some(OpeningSlot {
            table: table.clone(),
            host,
        })
    }
}

impl Drop for OpeningSlot {
    fn drop(&mut self) {
        let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = t.opening.get_mut(&self.host) {
            *n -= 1;
            if *n == 0 {
                t.opening.remove(&self.host);
            }
        }
    }
}
