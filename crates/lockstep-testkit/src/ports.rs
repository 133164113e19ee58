//! Free loopback ports for nodes.
//!
//! Each node takes a block of four consecutive ports: client, group
//! (`base_port`), IST (`base_port + 1`, as Galera requires) and SST. Blocks
//! are taken below the kernel's ephemeral range so that outgoing connections
//! of running servers can never steal them, and are remembered process-wide
//! so that clusters started by parallel tests never share one.

use std::collections::HashSet;
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The ports of one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodePorts {
    /// MariaDB client port (TCP on 127.0.0.1).
    pub client: u16,
    /// Group communication port: `base_port` in `wsrep_provider_options`.
    pub base: u16,
    /// Port of the state-transfer receiver (`wsrep_sst_receive_address`).
    pub sst: u16,
}

impl NodePorts {
    /// Incremental state transfer port: `base_port + 1`.
    pub fn ist(&self) -> u16 {
        self.base + 1
    }
}

static TAKEN: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

const LOWEST: u32 = 10_000;
const BLOCK: u32 = 4;

/// Finds `n` blocks of free ports.
pub fn allocate(n: usize) -> Result<Vec<NodePorts>> {
    let mut taken = TAKEN.lock().unwrap_or_else(|p| p.into_inner());
    let taken = taken.get_or_insert_with(HashSet::new);
    let high = ephemeral_low().saturating_sub(BLOCK).max(LOWEST + 1000);
    let span = (high - LOWEST) / BLOCK;
    let mut next = LOWEST + (seed() % span) * BLOCK;
    let mut out = Vec::with_capacity(n);
    for _ in 0..span {
        if out.len() == n {
            break;
        }
        let start = next;
        next += BLOCK;
        if next + BLOCK > high {
            next = LOWEST;
        }
        let block: Vec<u16> = (start..start + BLOCK).map(|p| p as u16).collect();
        if block.iter().any(|p| taken.contains(p)) || !block.iter().all(|&p| is_free(p)) {
            continue;
        }
        taken.extend(block.iter().copied());
        out.push(NodePorts {
            client: block[0],
            base: block[1],
            sst: block[3],
        });
    }
    if out.len() < n {
        return Err(Error::config(format!(
            "found only {} of {n} free blocks of {BLOCK} loopback ports between {LOWEST} and {high}; \
             stop leftover servers (`pgrep -a mariadbd`)",
            out.len()
        )));
    }
    Ok(out)
}

/// Gives the ports of finished clusters back to this process's pool.
pub(crate) fn release(ports: &[NodePorts]) {
    let mut taken = TAKEN.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(taken) = taken.as_mut() {
        for p in ports {
            for port in p.client..p.client + BLOCK as u16 {
                taken.remove(&port);
            }
        }
    }
}

/// True when nothing listens on the port, on loopback or the wildcard address.
pub fn is_free(port: u16) -> bool {
    [Ipv4Addr::LOCALHOST, Ipv4Addr::UNSPECIFIED]
        .iter()
        .all(|ip| TcpListener::bind(SocketAddrV4::new(*ip, port)).is_ok())
}

fn ephemeral_low() -> u32 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(32_768)
}

fn seed() -> u32 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos() ^ (d.as_secs() as u32))
        .unwrap_or(0);
    let mut x = nanos ^ std::process::id().wrapping_mul(2_654_435_761);
    // xorshift to spread nearby seeds apart
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_distinct_and_free() {
        let a = allocate(3).unwrap();
        let b = allocate(2).unwrap();
        let mut all: Vec<u16> = a
            .iter()
            .chain(b.iter())
            .flat_map(|p| [p.client, p.base, p.ist(), p.sst])
            .collect();
        let len = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), len, "ports handed out twice: {a:?} {b:?}");
        assert!(a.iter().all(|p| p.ist() == p.base + 1));
        release(&a);
        release(&b);
    }
}
