//! A TLS connection used by two parties at once, as the transport uses a
//! plain `TcpStream`: one reads, the other writes (a state transfer's two
//! threads; or the event loop reading and any sender writing).
//!
//! rustls keeps one state machine per connection, so both halves share it
//! behind a mutex, held only to hand bytes in or out, never across a
//! socket read or write. Only the writer puts TLS records on the socket,
//! so records never interleave; records the reader's side makes (alerts,
//! key-update answers) leave with the writer's next message. On a
//! non-blocking socket the reader's `read` returns `WouldBlock` until a
//! whole record has come.

use crate::Refused;
use rustls::Connection;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Raw bytes read from the socket at a time; with the TLS overhead this
/// bounds what one read can make the reader buffer in plain text.
const READ_CHUNK: usize = 64 * 1024;

struct Shared {
    conn: Mutex<Connection>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The reading half.
pub struct TlsReader {
    tcp: TcpStream,
    shared: Arc<Shared>,
    raw: Box<[u8]>,
    /// Decrypted bytes not handed out yet, from at most one raw chunk.
    plain: Vec<u8>,
    at: usize,
    /// The peer closed with close_notify.
    closed: bool,
    /// The last socket read took less than it asked for: the kernel had
    /// nothing more then.
    short_read: bool,
}

/// The writing half.
pub struct TlsWriter {
    tcp: TcpStream,
    shared: Arc<Shared>,
    records: Vec<u8>,
}

fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}"))
}

/// Whether a handshake error is the alert a plain node answers with
/// (`sniff::NO_TLS_ALERT`).
fn said_no_tls(e: &io::Error) -> bool {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .is_some_and(|r| {
            matches!(
                r,
                rustls::Error::AlertReceived(rustls::AlertDescription::ProtocolVersion)
            )
        })
}

/// Runs the handshake on `tcp` within `timeout` (every read and write has
/// that deadline), then splits the connection.
pub(super) fn handshake(
    mut conn: Connection,
    mut tcp: TcpStream,
    timeout: Duration,
) -> Result<(TlsReader, TlsWriter), Refused> {
    let io_err = |e: io::Error| match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Refused::broken(format!(
            "TLS handshake: no answer within {} s",
            timeout.as_secs()
        )),
        // rustls's own errors: a certificate refused, an alert received.
        io::ErrorKind::InvalidData if said_no_tls(&e) => Refused {
            plain_peer: true,
            ..Refused::mismatch(
                "the peer has no TLS configured (it answered TLS with a \
                                 protocol_version alert)",
            )
        },
        io::ErrorKind::InvalidData => Refused::mismatch(format!("TLS handshake failed: {e}")),
        _ => Refused::broken(format!("TLS handshake: {e}")),
    };
    tcp.set_read_timeout(Some(timeout)).map_err(io_err)?;
    tcp.set_write_timeout(Some(timeout)).map_err(io_err)?;
    while conn.is_handshaking() {
        conn.complete_io(&mut tcp).map_err(io_err)?;
    }
    while conn.wants_write() {
        conn.write_tls(&mut tcp).map_err(io_err)?;
    }
    // The last handshake read may have brought the peer's first message
    // along: it is decrypted already and waits inside the connection.
    let state = conn
        .process_new_packets()
        .map_err(|e| io_err(tls_error(e)))?;
    let mut plain = vec![0; state.plaintext_bytes_to_read()];
    conn.reader().read_exact(&mut plain).map_err(io_err)?;
    let closed = state.peer_has_closed();
    // The caller decides the timeouts from here on.
    tcp.set_read_timeout(None).map_err(io_err)?;
    tcp.set_write_timeout(None).map_err(io_err)?;
    let write_tcp = tcp.try_clone().map_err(io_err)?;
    let shared = Arc::new(Shared {
        conn: Mutex::new(conn),
    });
    Ok((
        TlsReader {
            tcp,
            shared: shared.clone(),
            raw: vec![0; READ_CHUNK].into_boxed_slice(),
            plain,
            at: 0,
            closed,
            short_read: false,
        },
        TlsWriter {
            tcp: write_tcp,
            shared,
            records: Vec::new(),
        },
    ))
}

impl TlsReader {
    /// The socket, for timeouts and shutdown.
    pub fn tcp(&self) -> &TcpStream {
        &self.tcp
    }

    /// The fingerprint of the certificate the peer presented (every
    /// peer presents one: TLS here is mutual).
    pub fn peer_fingerprint(&self) -> Option<crate::identity::CertFingerprint> {
        let conn = self.shared.lock();
        conn.peer_certificates()
            .and_then(|chain| chain.first())
            .map(|der| crate::identity::fingerprint(der.as_ref()))
    }

    /// Whether everything read so far is handed out and the last socket
    /// read was short: on a non-blocking socket under edge-triggered
    /// epoll, reading again would only return `WouldBlock` (bytes that
    /// come later raise a new edge).
    pub fn drained(&self) -> bool {
        self.short_read && self.at == self.plain.len()
    }

    /// Reads one raw chunk and decrypts all of it into `plain`.
    /// `Ok(false)` at the end of the stream.
    fn fill(&mut self) -> io::Result<bool> {
        let n = self.tcp.read(&mut self.raw)?;
        if n == 0 {
            return Ok(false);
        }
        self.short_read = n < self.raw.len();
        self.plain.clear();
        self.at = 0;
        let mut rest = &self.raw[..n];
        let mut conn = self.shared.lock();
        while !rest.is_empty() {
            conn.read_tls(&mut rest)?;
            let state = conn.process_new_packets().map_err(tls_error)?;
            let ready = state.plaintext_bytes_to_read();
            if ready > 0 {
                let start = self.plain.len();
                self.plain.resize(start + ready, 0);
                conn.reader().read_exact(&mut self.plain[start..])?;
            }
            if state.peer_has_closed() {
                self.closed = true;
            }
        }
        Ok(true)
    }
}

impl Read for TlsReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.at < self.plain.len() {
                let n = buf.len().min(self.plain.len() - self.at);
                buf[..n].copy_from_slice(&self.plain[self.at..self.at + n]);
                self.at += n;
                return Ok(n);
            }
            if self.closed || !self.fill()? {
                return Ok(0);
            }
        }
    }
}

impl TlsWriter {
    /// The socket, for timeouts and shutdown.
    pub fn tcp(&self) -> &TcpStream {
        &self.tcp
    }

    /// Encrypts `data` and appends its records (and any the reading side
    /// left, such as alerts) to `out`, writing nothing: the caller puts
    /// them on a non-blocking socket as it has room (the event loop).
    pub fn seal(&mut self, data: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        let mut conn = self.shared.lock();
        let mut rest = data;
        loop {
            while conn.wants_write() {
                conn.write_tls(out)?;
            }
            if rest.is_empty() {
                return Ok(());
            }
            match conn.writer().write(rest)? {
                0 => return Err(io::ErrorKind::WriteZero.into()),
                n => rest = &rest[n..],
            }
        }
    }

    /// Sends close_notify (best effort) and shuts the socket down.
    pub fn close(&mut self) {
        self.shared.lock().send_close_notify();
        let _ = self.flush();
        let _ = self.tcp.shutdown(Shutdown::Both);
    }
}

impl Write for TlsWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.records.clear();
        let n = {
            let mut conn = self.shared.lock();
            let n = conn.writer().write(data)?;
            while conn.wants_write() {
                conn.write_tls(&mut self.records)?;
            }
            n
        };
        self.tcp.write_all(&self.records)?;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.records.clear();
        {
            let mut conn = self.shared.lock();
            while conn.wants_write() {
                conn.write_tls(&mut self.records)?;
            }
        }
        self.tcp.write_all(&self.records)?;
        self.tcp.flush()
    }
}
