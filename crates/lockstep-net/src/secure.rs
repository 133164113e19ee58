//! A node's policy for peer connections, and the two halves a connection
//! is used through once it is open, plain or TLS alike.
//!
//! * TLS configured: this node dials with TLS and accepts TLS only; with
//!   `socket.dynamic` it also accepts plain connections (Galera's rolling
//!   switch to TLS: first every node accepts both, then dials with TLS).
//! * No TLS: plain in both directions, and a TLS dialer is refused.
//!
//! The acceptor looks at the first byte before it says anything (see
//! [`crate::sniff`]), so a refused peer learns nothing about this node,
//! and both logs can name the mismatch.

use crate::sniff::{greeting, Greeting};
use crate::tls::{TlsContext, TlsFiles, TlsReader, TlsWriter};
use crate::Refused;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// The reading half of an open peer connection.
pub enum Reader {
    Plain(TcpStream),
    Tls(TlsReader),
}

/// The writing half of an open peer connection.
pub enum Writer {
    Plain(TcpStream),
    Tls(TlsWriter),
}

impl Read for Reader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Reader::Plain(s) => s.read(buf),
            Reader::Tls(t) => t.read(buf),
        }
    }
}

impl Reader {
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Reader::Plain(s) => s,
            Reader::Tls(t) => t.tcp(),
        }
    }

    /// Reads into `buf`, and says whether the socket is drained for now:
    /// a short read of a plain socket, or a TLS reader that handed out all
    /// it decrypted from a short read. The event loop then waits for
    /// epoll's next edge instead of reading once more for `WouldBlock` (a
    /// system call per message saved).
    pub fn read_draining(&mut self, buf: &mut [u8]) -> io::Result<(usize, bool)> {
        match self {
            Reader::Plain(s) => s.read(buf).map(|n| (n, n < buf.len())),
            Reader::Tls(t) => t.read(buf).map(|n| (n, t.drained())),
        }
    }

    /// The peer's certificate fingerprint; `None` on plain TCP.
    pub fn peer_fingerprint(&self) -> Option<crate::identity::CertFingerprint> {
        match self {
            Reader::Plain(_) => None,
            Reader::Tls(t) => t.peer_fingerprint(),
        }
    }
}

impl Write for Writer {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        match self {
            Writer::Plain(s) => s.write(data),
            Writer::Tls(t) => t.write(data),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Writer::Plain(s) => s.flush(),
            Writer::Tls(t) => t.flush(),
        }
    }
}

impl Writer {
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Writer::Plain(s) => s,
            Writer::Tls(t) => t.tcp(),
        }
    }

    /// Ends the connection (TLS: with close_notify).
    pub fn close(&mut self) {
        match self {
            Writer::Plain(s) => {
                let _ = s.shutdown(Shutdown::Both);
            }
            Writer::Tls(t) => t.close(),
        }
    }
}

/// How this node secures its peer connections.
pub struct PeerSecurity {
    files: Option<TlsFiles>,
    tls: RwLock<Option<Arc<TlsContext>>>,
    /// `socket.dynamic`: accept plain connections too.
    dynamic: bool,
}

impl std::fmt::Debug for PeerSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl PeerSecurity {
    /// Plain TCP in both directions.
    pub fn plain() -> PeerSecurity {
        PeerSecurity {
            files: None,
            tls: RwLock::new(None),
            dynamic: false,
        }
    }

    /// TLS with the material in `files`, read now.
    pub fn tls(files: TlsFiles, dynamic: bool) -> Result<PeerSecurity, String> {
        let ctx = TlsContext::load(&files)?;
        Ok(PeerSecurity {
            files: Some(files),
            tls: RwLock::new(Some(Arc::new(ctx))),
            dynamic,
        })
    }

    pub fn is_tls(&self) -> bool {
        self.files.is_some()
    }

    /// Whether this node refuses a peer whose certificate is not the one
    /// the cluster bound to its Raft id (ADR 0014). Only a node with TLS
    /// does: a plain node sees no certificate on any connection, so a
    /// binding would only shut out every TLS member that reaches it over
    /// plain TCP (`socket.dynamic`, the way from plain to TLS), and it
    /// could tell no impostor from a member anyway.
    pub fn enforces_bindings(&self) -> bool {
        self.is_tls()
    }

    /// One line for the log.
    pub fn describe(&self) -> String {
        match (&self.files, self.context()) {
            (Some(f), Some(ctx)) => format!(
                "TLS, mutual: certificate {}, peers must be signed by {}{}; TLS 1.2 suites {}",
                f.cert.display(),
                f.ca_path().display(),
                if self.dynamic {
                    " (socket.dynamic: plain peers accepted too)"
                } else {
                    ""
                },
                if ctx.tls12_suites.is_empty() {
                    "none (TLS 1.3 only)".to_string()
                } else {
                    ctx.tls12_suites.join(":")
                }
            ),
            _ => "plain TCP, unencrypted and unauthenticated".to_string(),
        }
    }

    /// `socket.ssl_reload`: reads the files again; connections opened from
    /// now on use them. On error the material in use stays.
    pub fn reload(&self) -> Result<(), String> {
        let Some(files) = &self.files else {
            return Err("socket.ssl_reload: TLS is not configured on this node".into());
        };
        let ctx = TlsContext::load(files)?;
        *self.tls.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(ctx));
        Ok(())
    }

    /// The fingerprint of this node's own certificate (as loaded now:
    /// `socket.ssl_reload` may change it); `None` without TLS.
    pub fn own_fingerprint(&self) -> Option<crate::identity::CertFingerprint> {
        self.context().map(|c| c.own_fingerprint)
    }

    fn context(&self) -> Option<Arc<TlsContext>> {
        self.tls.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Opens a connection this node dialed. `timeout` bounds each step of
    /// the TLS handshake; the caller sets the socket's timeouts after.
    pub fn dial(&self, tcp: TcpStream, timeout: Duration) -> Result<(Reader, Writer), Refused> {
        match self.context() {
            Some(ctx) => {
                let (r, w) = ctx.connect(tcp, timeout).map_err(|e| Refused {
                    why: if e.plain_peer && self.dynamic {
                        format!(
                            "{e}; with socket.dynamic it reaches this node when it dials \
                             in plain TCP"
                        )
                    } else if e.plain_peer {
                        format!(
                            "{e}, and this node requires TLS (socket.ssl); socket.dynamic=YES \
                             on the TLS nodes lets plain nodes in while a cluster moves to TLS"
                        )
                    } else if e.mismatch {
                        format!(
                            "{e} (the peer must have TLS on, with a certificate of this \
                             cluster's CA)"
                        )
                    } else {
                        e.why
                    },
                    // A dynamic node expects plain peers: a note, not a warning.
                    mismatch: e.mismatch && !(e.plain_peer && self.dynamic),
                    ..e
                })?;
                Ok((Reader::Tls(r), Writer::Tls(w)))
            }
            None => plain(tcp),
        }
    }

    /// Opens a connection this node accepted, after looking at how the
    /// peer starts. Nothing is sent to a refused peer.
    pub fn accept(&self, tcp: TcpStream, timeout: Duration) -> Result<(Reader, Writer), Refused> {
        let mut first = [0u8; 1];
        tcp.set_read_timeout(Some(timeout))
            .map_err(|e| Refused::broken(e.to_string()))?;
        let said = match tcp.peek(&mut first) {
            Ok(0) => return Err(Refused::broken("it closed without saying anything")),
            Ok(_) => greeting(first[0]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(Refused::broken(format!(
                    "it said nothing within {} s",
                    timeout.as_secs()
                )))
            }
            Err(e) => return Err(Refused::broken(e.to_string())),
        };
        match (said, self.context()) {
            (Greeting::Tls, Some(ctx)) => {
                let (r, w) = ctx.accept(tcp, timeout)?;
                Ok((Reader::Tls(r), Writer::Tls(w)))
            }
            (Greeting::Tls, None) => {
                // Told so, the dialer logs it by its own policy: a warning
                // on a node that requires TLS, a note with socket.dynamic
                // (a cluster moving to TLS), which dials us in plain TCP.
                let _ = (&tcp).write_all(&crate::sniff::NO_TLS_ALERT);
                Err(Refused {
                    plain_peer: true,
                    ..Refused::mismatch(
                        "it speaks TLS and this node has no TLS configured (socket.ssl_cert, \
                         socket.ssl_key, socket.ssl_ca); told it so",
                    )
                })
            }
            (Greeting::Plain, Some(_)) if !self.dynamic => Err(Refused::mismatch(
                "it speaks plain text and this node requires TLS (socket.ssl); \
                 socket.dynamic=YES accepts both",
            )),
            (Greeting::Plain, _) => plain(tcp),
            (Greeting::Unknown, _) => Err(Refused::mismatch(format!(
                "not a Lockstep peer (first byte 0x{:02x})",
                first[0]
            ))),
        }
    }
}

fn plain(tcp: TcpStream) -> Result<(Reader, Writer), Refused> {
    let w = tcp
        .try_clone()
        .map_err(|e| Refused::broken(e.to_string()))?;
    Ok((Reader::Plain(tcp), Writer::Plain(w)))
}
