//! `wsrep_cluster_address`: `gcomm://host[:port][,host[:port]...][?key=value&...]`.
//!
//! Galera's rules: an empty peer list (`gcomm://`) means "bootstrap a new
//! cluster"; a peer without a port uses the default group port 4567; options
//! after `?` override provider options for this connection.

use std::fmt;

pub const DEFAULT_GROUP_PORT: u16 = 4567;
/// A cluster address longer than this is not a mistake we try to parse.
pub const MAX_ADDRESS_LEN: usize = 8192;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub host: String,
    pub port: u16,
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterAddress {
    pub peers: Vec<Peer>,
    pub options: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressError {
    pub address: String,
    pub reason: String,
}

impl fmt::Display for AddressError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid wsrep_cluster_address '{}': {}; expected gcomm://host[:port][,host[:port]...]",
            self.address, self.reason
        )
    }
}

impl std::error::Error for AddressError {}

impl ClusterAddress {
    /// `gcomm://` with no peers: form a new cluster.
    pub fn is_bootstrap(&self) -> bool {
        self.peers.is_empty()
    }

    pub fn parse(url: &str) -> Result<ClusterAddress, AddressError> {
        let fail = |reason: String| AddressError {
            address: url.chars().take(200).collect(),
            reason,
        };
        if url.len() > MAX_ADDRESS_LEN {
            return Err(fail(format!("longer than {MAX_ADDRESS_LEN} bytes")));
        }
        let rest = url
            .trim()
            .strip_prefix("gcomm://")
            .ok_or_else(|| fail("only the gcomm:// scheme is supported".into()))?;
        let (list, query) = match rest.split_once('?') {
            Some((l, q)) => (l, Some(q)),
            None => (rest, None),
        };
        let mut peers = Vec::new();
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            peers.push(parse_peer(item).map_err(&fail)?);
        }
        let mut options = Vec::new();
        if let Some(q) = query {
            for pair in q.split('&').filter(|s| !s.is_empty()) {
                let (k, v) = pair
                    .split_once('=')
                    .ok_or_else(|| fail(format!("option '{pair}' has no '='")))?;
                if k.trim().is_empty() {
                    return Err(fail(format!("option '{pair}' has an empty name")));
                }
                options.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
        Ok(ClusterAddress { peers, options })
    }
}

fn parse_peer(item: &str) -> Result<Peer, String> {
    let (host, port) = if let Some(bracketed) = item.strip_prefix('[') {
        // [v6addr] or [v6addr]:port
        let (host, after) = bracketed
            .split_once(']')
            .ok_or_else(|| format!("'{item}' has an unclosed '['"))?;
        match after {
            "" => (host, None),
            p => (
                host,
                Some(
                    p.strip_prefix(':')
                        .ok_or_else(|| format!("'{item}': expected ':' after ']'"))?,
                ),
            ),
        }
    } else {
        match item.rsplit_once(':') {
            Some((h, _)) if h.contains(':') => {
                return Err(format!("'{item}': write IPv6 addresses as [addr]:port"))
            }
            Some((h, p)) => (h, Some(p)),
            None => (item, None),
        }
    };
    if host.is_empty() {
        return Err(format!("'{item}' has an empty host"));
    }
    let valid_host = host
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '%'));
    if !valid_host {
        return Err(format!("'{host}' is not a host name or address"));
    }
    let port = match port {
        None => DEFAULT_GROUP_PORT,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 => n,
            _ => return Err(format!("'{p}' is not a port number (1-65535)")),
        },
    };
    Ok(Peer {
        host: host.to_string(),
        port,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn empty_gcomm_bootstraps() {
        assert!(ClusterAddress::parse("gcomm://").unwrap().is_bootstrap());
    }

    #[test]
    fn peers_with_and_without_ports_and_ipv6() {
        let a = ClusterAddress::parse("gcomm://10.0.0.1:4568,db2,[::1]:5000,[fe80::1]").unwrap();
        let shown: Vec<String> = a.peers.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            ["10.0.0.1:4568", "db2:4567", "[::1]:5000", "[fe80::1]:4567"]
        );
    }

    #[test]
    fn options_after_the_question_mark() {
        let a = ClusterAddress::parse("gcomm://h1?pc.wait_prim=no&gmcast.segment=1").unwrap();
        assert_eq!(a.options[0], ("pc.wait_prim".into(), "no".into()));
        assert_eq!(a.options.len(), 2);
    }

    #[test]
    fn malformed_addresses_are_explained() {
        for bad in [
            "127.0.0.1:4567",
            "gcomm://host:99999",
            "gcomm://host:abc",
            "gcomm://::1:4567",
            "gcomm://[::1",
            "gcomm://a b",
            "gcomm://h?novalue",
        ] {
            let err = ClusterAddress::parse(bad).unwrap_err();
            assert!(
                err.to_string().contains("invalid wsrep_cluster_address"),
                "{bad}: {err}"
            );
        }
    }

    proptest! {
        #[test]
        fn parser_never_panics(s in ".{0,300}") {
            let _ = ClusterAddress::parse(&s);
            let _ = ClusterAddress::parse(&format!("gcomm://{s}"));
        }
    }
}
