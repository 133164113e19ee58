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
