//! The network layer, with no dependency on the provider: the group
//! channel's connections (`transport`: dial, accept, admission, hello,
//! lanes, bounds), the state-transfer streams (`stream`), TLS for both
//! (`tls`, `secure`, `sniff`) and, behind the `pki` feature, the
//! certificate authority `lockstep up` and `lockstep cert` use (`pki`).
//!
//! [`secure::PeerSecurity`] turns an accepted or dialed `TcpStream` into a
//! reader half and a writer half that two threads can use at once, on TLS
//! or plain TCP alike. What the bytes mean (frames, Raft, writesets) is
//! sans-IO code in `lockstep-core`; this crate only moves them. It logs
//! through the `log` facade.

#![forbid(unsafe_code)]

pub mod identity;
pub mod secure;
pub mod sniff;
pub mod stream;
pub mod threads;
pub mod tls;
pub mod transport;

#[cfg(feature = "pki")]
pub mod pki;

/// Why a connection could not be opened, and whether that is worth a
/// warning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub why: String,
    /// The peer's set-up does not fit ours (TLS against plain, a
    /// certificate refused, a TLS alert, not a Lockstep peer): an
    /// operator should hear of it. Otherwise the connection broke or timed
    /// out, as it does whenever a peer restarts: a note is enough.
    pub mismatch: bool,
    /// A TLS end met a plain end and the TLS end learns it from
    /// `sniff::NO_TLS_ALERT`: set on the TLS dialer (its peer has no TLS)
    /// and on the plain acceptor (which sent the alert). The TLS end's
    /// policy decides whether it is worth a warning; the plain end leaves
    /// it to that end.
    pub plain_peer: bool,
}

impl Refused {
    pub fn mismatch(why: impl Into<String>) -> Refused {
        Refused {
            why: why.into(),
            mismatch: true,
            plain_peer: false,
        }
    }

    pub fn broken(why: impl Into<String>) -> Refused {
        Refused {
            why: why.into(),
            mismatch: false,
            plain_peer: false,
        }
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

/// Test certificates: a node's `PeerSecurity` with a certificate `ca`
/// issues into `dir`.
#[cfg(test)]
pub(crate) fn test_security(
    ca: &pki::Authority,
    dir: &std::path::Path,
    name: &str,
    dynamic: bool,
) -> secure::PeerSecurity {
    let f = ca.issue_into(dir, name, &[]).unwrap();
    let files = tls::TlsFiles {
        cert: f.cert,
        key: f.key,
        ca: Some(f.ca),
        cipher: None,
        password_file: None,
    };
    secure::PeerSecurity::tls(files, dynamic).unwrap()
}
