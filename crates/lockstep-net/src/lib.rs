//! The network layer's security pieces, with no dependency on the provider:
//! TLS for peer connections (`tls`) and, behind the `pki` feature, the
//! certificate authority `lockstep up` and `lockstep cert` use (`pki`).
//!
//! The provider's group channel and IST streams use [`tls::TlsContext`] to
//! turn an accepted or dialed `TcpStream` into a reader half and a writer
//! half that two threads can use at once, which is how the transport
//! works on plain TCP too.

pub mod secure;
pub mod sniff;
pub mod tls;

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
}

impl Refused {
    pub fn mismatch(why: impl Into<String>) -> Refused {
        Refused {
            why: why.into(),
            mismatch: true,
        }
    }

    pub fn broken(why: impl Into<String>) -> Refused {
        Refused {
            why: why.into(),
            mismatch: false,
        }
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}
