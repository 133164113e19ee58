//! What a connection's first byte says about how the peer talks: a TLS
//! record starts with content type 22 (handshake), a Lockstep frame with
//! its magic `LKST`. The acceptor peeks at it so that a TLS node and a
//! plaintext node never talk past each other: each side can name the
//! mismatch in its log instead of failing on garbage.

/// How a peer opened a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Greeting {
    /// A TLS ClientHello record.
    Tls,
    /// A Lockstep frame in clear text.
    Plain,
    /// Anything else (a port scanner, another protocol).
    Unknown,
}

/// TLS record content type `handshake`.
const TLS_HANDSHAKE: u8 = 0x16;

/// What a node without TLS answers a ClientHello with: one TLS record, a
/// fatal `protocol_version` alert (it speaks no version of TLS). The
/// dialer then knows the peer is a plain node instead of seeing a reset
/// it cannot tell from a restart (`tls::stream`), and words its log by
/// its own policy: `socket.dynamic` expects plain peers.
pub const NO_TLS_ALERT: [u8; 7] = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 70];

/// Classifies a connection by its first byte.
pub fn greeting(first: u8) -> Greeting {
    match first {
        TLS_HANDSHAKE => Greeting::Tls,
        b'L' => Greeting::Plain,
        _ => Greeting::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_hello_and_a_frame_are_told_apart() {
        assert_eq!(greeting(0x16), Greeting::Tls);
        assert_eq!(greeting(b'L'), Greeting::Plain);
        assert_eq!(greeting(b'G'), Greeting::Unknown, "an HTTP GET");
        assert_eq!(greeting(0), Greeting::Unknown);
    }
}
