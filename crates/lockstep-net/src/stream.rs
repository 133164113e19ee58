//! State-transfer streams (IST): one connection from the donor to the
//! joiner's listener, under the same security rules as the group channel
//! (TLS when configured, a plain peer and a TLS peer never talk), with a
//! deadline on the connect and on every read and write. What travels on
//! it (the writeset cache's records) is the provider's business.

use crate::secure::{PeerSecurity, Reader, Writer};
use crate::Refused;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Connecting to the joiner.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Any one read or write on the stream (and the TLS handshake).
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a waiting listener looks at its stop flag.
const ACCEPT_POLL: Duration = Duration::from_millis(50);

/// Donor side: connects to `addr` and opens the stream.
pub fn open(addr: &str, security: &PeerSecurity) -> Result<(Reader, Writer), String> {
    let target = addr
        .to_socket_addrs()
        .map_err(|e| format!("address {addr}: {e}"))?
        .next()
        .ok_or_else(|| format!("address {addr} resolves to nothing"))?;
    let stream = TcpStream::connect_timeout(&target, CONNECT_TIMEOUT)
        .map_err(|e| format!("connecting to {addr}: {e}"))?;
    let _ = stream.set_nodelay(true);
    let (reader, writer) = security
        .dial(stream, IO_TIMEOUT)
        .map_err(|why| format!("connection to {addr}: {why}"))?;
    set_timeouts(writer.tcp()).map_err(|e| e.to_string())?;
    Ok((reader, writer))
}

/// Joiner side: opens a stream a donor connected with.
pub fn accept(stream: TcpStream, security: &PeerSecurity) -> Result<(Reader, Writer), Refused> {
    stream
        .set_nonblocking(false)
        .map_err(|e| Refused::broken(e.to_string()))?;
    let (reader, writer) = security.accept(stream, IO_TIMEOUT)?;
    set_timeouts(reader.tcp()).map_err(|e| Refused::broken(e.to_string()))?;
    Ok((reader, writer))
}

/// The halves share one socket: its timeouts are set once.
fn set_timeouts(tcp: &TcpStream) -> std::io::Result<()> {
    tcp.set_read_timeout(Some(IO_TIMEOUT))?;
    tcp.set_write_timeout(Some(IO_TIMEOUT))
}

/// A listener for one incoming stream, bound non-blocking so the wait
/// can end when its owner gives up.
pub struct StreamListener(TcpListener);

/// What the listener's owner does with one connection.
pub enum Next<T> {
    /// Not the stream we wait for: keep listening.
    KeepWaiting,
    /// Done, with this result.
    Done(T),
}

impl StreamListener {
    pub fn bind(addr: &str) -> Result<StreamListener, String> {
        TcpListener::bind(addr)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map(StreamListener)
            .map_err(|e| format!("cannot listen on {addr}: {e}"))
    }

    /// Hands each connection to `take` until it is done with one; `None`
    /// once `stop` is set, `Err` if the listener fails.
    pub fn serve<T>(
        &self,
        stop: &AtomicBool,
        mut take: impl FnMut(TcpStream, SocketAddr) -> Next<T>,
    ) -> Option<Result<T, String>> {
        loop {
            if stop.load(Ordering::SeqCst) {
                return None;
            }
            match self.0.accept() {
                Ok((stream, peer)) => {
                    if let Next::Done(t) = take(stream, peer) {
                        return Some(Ok(t));
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(ACCEPT_POLL);
                }
                Err(e) => return Some(Err(e.to_string())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn a_plain_stream_carries_bytes_and_a_tls_dialer_is_refused() {
        let listener = StreamListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.0.local_addr().unwrap().to_string();
        let stop = AtomicBool::new(false);
        let plain = PeerSecurity::plain();
        let dir = tempfile::tempdir().unwrap();
        let ca = crate::pki::Authority::generate("test CA").unwrap();
        let tls = crate::test_security(&ca, dir.path(), "donor", false);
        std::thread::scope(|s| {
            let donors = s.spawn(|| {
                // A TLS donor to a plain joiner: no stream.
                assert!(open(&addr, &tls).is_err());
                let (mut r, mut w) = open(&addr, &plain).unwrap();
                // A plain stream starts as a Lockstep frame does (`sniff`).
                w.write_all(b"LKSTrec").unwrap();
                w.flush().unwrap();
                let mut ack = [0u8; 1];
                r.read_exact(&mut ack).unwrap();
                ack[0]
            });
            let mut refused = 0;
            let got = listener.serve(&stop, |stream, _| match accept(stream, &plain) {
                Err(why) => {
                    assert!(why.mismatch, "{why}");
                    refused += 1;
                    Next::KeepWaiting
                }
                Ok((mut r, mut w)) => {
                    let mut buf = [0u8; 7];
                    r.read_exact(&mut buf).unwrap();
                    w.write_all(b"K").unwrap();
                    w.flush().unwrap();
                    Next::Done(buf)
                }
            });
            assert_eq!(got, Some(Ok(*b"LKSTrec")));
            assert_eq!(refused, 1);
            assert_eq!(donors.join().unwrap(), b'K');
        });
    }

    #[test]
    fn a_stopped_listener_returns_none() {
        let listener = StreamListener::bind("127.0.0.1:0").unwrap();
        let stop = AtomicBool::new(true);
        let got: Option<Result<(), String>> = listener.serve(&stop, |_, _| Next::KeepWaiting);
        assert!(got.is_none());
    }
}
