//! The connections of one transport: by peer, still opening, and the
//! bounds on those that have not said hello yet.

use super::queue::Queue;
use std::collections::HashMap;
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Accepted connections still opening (TLS handshake, hello), at most,
/// and at most per peer host: a flood of idle connections from one host
/// cannot hold more than its share, nor memory beyond these times a
/// handshake's buffers. Beyond, a new connection is closed at once.
pub const MAX_OPENING: usize = 64;
pub const MAX_OPENING_PER_HOST: usize = 8;
pub(super) struct Conn {
    pub(super) id: u64,
    pub(super) out: Arc<Queue>,
    /// The address the peer advertised in its hello.
    pub(super) addr: String,
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
