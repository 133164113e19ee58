//! A minimal HTTP/1.1 client for the load generator: one request, one
//! response, strictly checked (status line, exact Content-Length).

use std::fmt;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{timeout_at, Instant};

/// Largest response head we accept; the health service sends ~200 bytes.
const MAX_HEAD: usize = 8 * 1024;

/// Why a request did not get a well-formed answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Failure {
    Connect,
    Timeout,
    /// The server closed or reset the connection mid-exchange.
    Closed,
    /// Not a valid HTTP response, or the body does not match Content-Length.
    Malformed,
    /// A status other than 200 or 503.
    Status,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Failure::Connect => "connect",
            Failure::Timeout => "timeout",
            Failure::Closed => "closed",
            Failure::Malformed => "malformed",
            Failure::Status => "status",
        })
    }
}

/// A response's essentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    /// The server announced `Connection: close`.
    pub close: bool,
}

pub async fn connect(addr: std::net::SocketAddr, deadline: Instant) -> Result<TcpStream, Failure> {
    let stream = timeout_at(deadline, TcpStream::connect(addr))
        .await
        .map_err(|_| Failure::Timeout)?
        .map_err(|_| Failure::Connect)?;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

/// Sends `request` and reads one response; `buf` is scratch space.
pub async fn exchange(
    stream: &mut TcpStream,
    request: &[u8],
    buf: &mut Vec<u8>,
    deadline: Instant,
) -> Result<Answer, Failure> {
    timeout_at(deadline, stream.write_all(request))
        .await
        .map_err(|_| Failure::Timeout)?
        .map_err(|_| Failure::Closed)?;
    buf.clear();
    loop {
        if let Some((answer, head_len, body_len)) = parse_head(buf)? {
            while buf.len() < head_len + body_len {
                read_more(stream, buf, deadline).await?;
            }
            if buf.len() != head_len + body_len {
                // Extra bytes after the announced body: a length mismatch.
                return Err(Failure::Malformed);
            }
            if answer.status != 200 && answer.status != 503 {
                return Err(Failure::Status);
            }
            return Ok(answer);
        }
        if buf.len() > MAX_HEAD {
            return Err(Failure::Malformed);
        }
        read_more(stream, buf, deadline).await?;
    }
}

/// After a `Connection: close` answer: the server must end the stream.
pub async fn expect_eof(stream: &mut TcpStream, deadline: Instant) -> Result<(), Failure> {
    let mut one = [0u8; 1];
    match timeout_at(deadline, stream.read(&mut one)).await {
        Err(_) => Err(Failure::Timeout),
        Ok(Ok(0)) => Ok(()),
        Ok(Ok(_)) => Err(Failure::Malformed),
        Ok(Err(_)) => Err(Failure::Closed),
    }
}

async fn read_more(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    deadline: Instant,
) -> Result<(), Failure> {
    buf.reserve(1024);
    match timeout_at(deadline, stream.read_buf(buf)).await {
        Err(_) => Err(Failure::Timeout),
        Ok(Ok(0)) | Ok(Err(_)) => Err(Failure::Closed),
        Ok(Ok(_)) => Ok(()),
    }
}

/// `(answer, head length, body length)` once the head is complete.
fn parse_head(buf: &[u8]) -> Result<Option<(Answer, usize, usize)>, Failure> {
    let mut headers = [httparse::EMPTY_HEADER; 16];
    let mut resp = httparse::Response::new(&mut headers);
    let head_len = match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(Failure::Malformed),
    };
    let mut body_len = None;
    let mut close = false;
    for h in resp.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(h.value).map_err(|_| Failure::Malformed)?;
            body_len = Some(v.trim().parse::<usize>().map_err(|_| Failure::Malformed)?);
        } else if h.name.eq_ignore_ascii_case("connection") {
            close = h.value.eq_ignore_ascii_case(b"close");
        }
    }
    // The health service always sends a length; its absence is a bug.
    let body_len = body_len.ok_or(Failure::Malformed)?;
    let status = resp.code.ok_or(Failure::Malformed)?;
    Ok(Some((Answer { status, close }, head_len, body_len)))
}

/// A request timeout as a deadline from now.
pub fn deadline(timeout: Duration) -> Instant {
    Instant::now() + timeout
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_need_an_exact_content_length() {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc";
        let (a, head, body) = parse_head(ok).unwrap().unwrap();
        assert_eq!((a.status, a.close, head + body), (200, true, ok.len()));
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\n"), Ok(None));
        assert_eq!(
            parse_head(b"HTTP/1.1 200 OK\r\n\r\n"),
            Err(Failure::Malformed),
            "no Content-Length"
        );
        assert_eq!(parse_head(b"garbage\r\n\r\n"), Err(Failure::Malformed));
    }
}
