//! Accept loops and the per-connection HTTP state machine. Every wait is
//! bounded: idle keep-alive connections, slow request heads and clients that
//! stop reading are all cut off by timeouts, and the number of open
//! connections is capped.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::{timeout, timeout_at, Instant};

use super::cache::Cache;
use super::health::Policy;
use super::http::{self, Format, Method, Parse, Reject, Response};
use super::report;

/// Connection limits and timeouts.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// A keep-alive connection with no request in flight is closed after this.
    pub idle: Duration,
    /// From the first byte of a request until its head is complete.
    pub request: Duration,
    /// Writing one response (a client that does not read is dropped).
    pub write: Duration,
    /// Open connections at most; further ones wait in the kernel backlog.
    pub max_connections: usize,
}

/// Everything a connection needs to answer.
#[derive(Debug)]
pub struct Service {
    pub cache: Arc<Cache>,
    pub policy: Policy,
    pub maintenance_file: Option<PathBuf>,
    /// The MariaDB address, for the JSON report.
    pub server: String,
    pub limits: Limits,
}

/// Serves on every listener until the process ends.
pub async fn serve(listeners: Vec<TcpListener>, service: Arc<Service>) {
    let permits = Arc::new(Semaphore::new(service.limits.max_connections));
    let mut tasks = Vec::new();
    for l in listeners {
        tasks.push(tokio::spawn(accept_loop(
            l,
            Arc::clone(&service),
            Arc::clone(&permits),
        )));
    }
    for t in tasks {
        let _ = t.await;
    }
}

async fn accept_loop(listener: TcpListener, service: Arc<Service>, permits: Arc<Semaphore>) {
    loop {
        // At the cap, stop accepting: clients queue in the backlog instead
        // of being refused, and no memory is spent on them meanwhile.
        let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
            return;
        };
        match listener.accept().await {
            Ok((stream, _)) => {
                let service = Arc::clone(&service);
                tokio::spawn(async move {
                    handle(stream, &service).await;
                    drop(permit);
                });
            }
            Err(e) => {
                // EMFILE and friends: back off instead of spinning on the error.
                eprintln!("lockstep check: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// How a connection ended (for tests and reasoning; not logged per request).
#[derive(Debug, PartialEq, Eq)]
enum End {
    ClientClosed,
    Idle,
    /// We answered and close: the request was read completely.
    Close,
    /// We refused or timed out a request whose bytes may still be coming.
    Abort,
    Error,
}

async fn handle(mut stream: TcpStream, service: &Service) {
    let _ = stream.set_nodelay(true);
    match converse(&mut stream, service).await {
        // The client sent exactly one request and reads the answer: a FIN
        // after the response is enough (no data of theirs is pending).
        End::Close => {
            let _ = stream.shutdown().await;
        }
        End::Abort => linger_close(&mut stream).await,
        End::ClientClosed | End::Idle | End::Error => {}
    }
}

/// Reads requests and answers them until the connection should close.
async fn converse(stream: &mut TcpStream, service: &Service) -> End {
    let limits = service.limits;
    let mut buf: Vec<u8> = Vec::with_capacity(1024);
    let mut out: Vec<u8> = Vec::with_capacity(512);
    loop {
        // Wait for a complete head: the first byte within the idle timeout,
        // the rest within the request timeout from then.
        let mut deadline: Option<Instant> = None;
        let (request, head_len) = loop {
            match http::parse(&buf) {
                Parse::Done { request, head_len } => break (request, head_len),
                Parse::Rejected(r) => {
                    let _ = send_reject(stream, r, &mut out, limits).await;
                    return End::Abort;
                }
                Parse::Partial => {}
            }
            if deadline.is_none() && !buf.is_empty() {
                deadline = Some(Instant::now() + limits.request);
            }
            let wait = deadline.unwrap_or_else(|| Instant::now() + limits.idle);
            // Never buffer past the head limit (+1 so the parser sees "too large").
            let room = http::MAX_HEAD + 1 - buf.len();
            let mut chunk = (&mut *stream).take(room as u64);
            match timeout_at(wait, chunk.read_buf(&mut buf)).await {
                Ok(Ok(0)) => return End::ClientClosed,
                Ok(Ok(_)) => {}
                Ok(Err(_)) => return End::Error,
                Err(_) if deadline.is_some() => {
                    let _ = send_simple(stream, 408, "Request timeout.\n", &mut out, limits).await;
                    return End::Abort;
                }
                Err(_) => return End::Idle,
            }
        };
        buf.drain(..head_len);
        if discard_body(stream, &mut buf, request.body_len, limits)
            .await
            .is_err()
        {
            return End::Error;
        }
        if respond(stream, &request, service, &mut out).await.is_err() {
            return End::Error;
        }
        if !request.keep_alive {
            // Pipelined bytes after a closing request would be lost to an
            // RST without the lingering close.
            return if buf.is_empty() {
                End::Close
            } else {
                End::Abort
            };
        }
    }
}

/// Skips `len` body bytes, some of which may already be in `buf`.
async fn discard_body(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    len: usize,
    limits: Limits,
) -> std::io::Result<()> {
    let in_buf = len.min(buf.len());
    buf.drain(..in_buf);
    let mut left = (len - in_buf) as u64;
    let mut sink = [0u8; 4096];
    let deadline = Instant::now() + limits.request;
    while left > 0 {
        let want = sink.len().min(left as usize);
        let n = timeout_at(deadline, stream.read(&mut sink[..want]))
            .await
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        left -= n as u64;
    }
    Ok(())
}

async fn respond(
    stream: &mut TcpStream,
    req: &http::Request,
    service: &Service,
    out: &mut Vec<u8>,
) -> std::io::Result<()> {
    let snap = service.cache.get();
    let json_body;
    let (status, content_type, body, allow): (u16, &'static str, &str, Option<&'static str>) =
        match req.method {
            Method::Other => (405, http::TEXT, "Method not allowed.\n", Some(http::ALLOW)),
            // OPTIONS answers with the health status too: HAProxy's default
            // `option httpchk` probe is `OPTIONS / HTTP/1.0`.
            Method::Get | Method::Head | Method::Options => {
                let allow = (req.method == Method::Options).then_some(http::ALLOW);
                match req.format {
                    Format::Metrics => {
                        let rows = snap.state.as_ref().map_or(&[][..], |s| &s.wsrep[..]);
                        let up = snap.state.is_some();
                        json_body = super::metrics::render(rows, up);
                        (200, super::metrics::CONTENT_TYPE, json_body.as_str(), allow)
                    }
                    Format::Text => (
                        snap.verdict.http_status(),
                        http::TEXT,
                        &*snap.text_body,
                        allow,
                    ),
                    Format::Json => {
                        json_body = report::json(
                            &snap,
                            &service.policy,
                            service.maintenance_file.as_deref(),
                            &service.server,
                        );
                        (
                            snap.verdict.http_status(),
                            http::JSON,
                            json_body.as_str(),
                            allow,
                        )
                    }
                }
            }
        };
    let r = Response {
        status,
        content_type,
        body,
        head_only: req.method == Method::Head,
        keep_alive: req.keep_alive,
        allow,
    };
    http::render(&r, SystemTime::now(), out);
    write_all(stream, out, service.limits).await
}

async fn send_reject(
    stream: &mut TcpStream,
    r: Reject,
    out: &mut Vec<u8>,
    limits: Limits,
) -> std::io::Result<()> {
    let body = format!("{}\n", r.message());
    send_simple(stream, r.status(), &body, out, limits).await
}

async fn send_simple(
    stream: &mut TcpStream,
    status: u16,
    body: &str,
    out: &mut Vec<u8>,
    limits: Limits,
) -> std::io::Result<()> {
    let r = Response {
        status,
        content_type: http::TEXT,
        body,
        head_only: false,
        keep_alive: false,
        allow: None,
    };
    http::render(&r, SystemTime::now(), out);
    write_all(stream, out, limits).await
}

async fn write_all(stream: &mut TcpStream, bytes: &[u8], limits: Limits) -> std::io::Result<()> {
    timeout(limits.write, stream.write_all(bytes))
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))?
}

/// Closes politely: send FIN, then read and drop what the client still
/// sends for a moment, so that unread bytes do not make the kernel answer
/// with RST, which could destroy the response before the client reads it.
async fn linger_close(stream: &mut TcpStream) {
    let _ = stream.shutdown().await;
    let mut sink = [0u8; 1024];
    let deadline = Instant::now() + Duration::from_millis(500);
    let mut budget = 64 * 1024usize;
    while budget > 0 {
        match timeout_at(deadline, stream.read(&mut sink)).await {
            Ok(Ok(n)) if n > 0 => budget = budget.saturating_sub(n),
            _ => break,
        }
    }
}
