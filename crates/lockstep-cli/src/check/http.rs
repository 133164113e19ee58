//! The HTTP/1.x protocol of the health service, without I/O: parsing a
//! request head from a byte buffer and rendering responses. The connection
//! loop (`server.rs`) feeds bytes in and writes what comes out.

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

/// Largest request head accepted (request line + headers), in bytes.
/// HAProxy's checks are under 100 bytes; browsers and curl under 1 KiB.
pub const MAX_HEAD: usize = 8 * 1024;
/// Most headers accepted in one request.
pub const MAX_HEADERS: usize = 48;
/// Largest request body we read (and discard); bigger ones get 413.
pub const MAX_BODY: usize = 64 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Options,
    /// Anything else: answered 405.
    Other,
}

/// Body format a client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    /// `GET /metrics`: Prometheus' text format (ADR 0019).
    Metrics,
}

/// A parsed request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: Method,
    pub format: Format,
    /// Whether the connection stays open after the response.
    pub keep_alive: bool,
    /// Bytes of body following the head (to be read and discarded).
    pub body_len: usize,
}

/// A request the service refuses; the connection closes after the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reject {
    /// 400: not HTTP/1.x.
    Malformed,
    /// 431: head larger than [`MAX_HEAD`] or more than [`MAX_HEADERS`].
    HeadTooLarge,
    /// 413: body larger than [`MAX_BODY`].
    BodyTooLarge,
    /// 501: a transfer coding (chunked) we do not implement.
    TransferEncoding,
    /// 505: HTTP/2 preface or other version.
    Version,
}

impl Reject {
    pub fn status(self) -> u16 {
        match self {
            Reject::Malformed => 400,
            Reject::HeadTooLarge => 431,
            Reject::BodyTooLarge => 413,
            Reject::TransferEncoding => 501,
            Reject::Version => 505,
        }
    }

    pub fn message(self) -> &'static str {
        match self {
            Reject::Malformed => "Bad request: not an HTTP/1.x request.",
            Reject::HeadTooLarge => "Request header fields too large.",
            Reject::BodyTooLarge => "Request body too large.",
            Reject::TransferEncoding => "Transfer-Encoding is not supported; send Content-Length.",
            Reject::Version => "HTTP version not supported; use HTTP/1.0 or HTTP/1.1.",
        }
    }
}

/// The outcome of looking at the bytes received so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parse {
    /// More bytes needed (the buffer is within limits).
    Partial,
    /// A complete head of `head_len` bytes.
    Done {
        request: Request,
        head_len: usize,
    },
    Rejected(Reject),
}

/// Parses one request head at the start of `buf`.
pub fn parse(buf: &[u8]) -> Parse {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD => {
            return Parse::Rejected(Reject::HeadTooLarge)
        }
        Ok(httparse::Status::Partial) => return Parse::Partial,
        Err(httparse::Error::TooManyHeaders) => return Parse::Rejected(Reject::HeadTooLarge),
        Err(httparse::Error::Version) => return Parse::Rejected(Reject::Version),
        Err(_) => return Parse::Rejected(Reject::Malformed),
    };
    if head_len > MAX_HEAD {
        return Parse::Rejected(Reject::HeadTooLarge);
    }
    let version = req.version.unwrap_or(0);
    let method = match req.method.unwrap_or("") {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "OPTIONS" => Method::Options,
        _ => Method::Other,
    };
    // HTTP/1.1 keeps the connection by default, HTTP/1.0 closes it.
    let mut keep_alive = version == 1;
    let mut body_len: Option<usize> = None;
    let mut wants_json_header = false;
    for h in req.headers.iter() {
        let value = String::from_utf8_lossy(h.value);
        if h.name.eq_ignore_ascii_case("connection") {
            for token in value.split(',').map(str::trim) {
                if token.eq_ignore_ascii_case("close") {
                    keep_alive = false;
                } else if token.eq_ignore_ascii_case("keep-alive") {
                    keep_alive = true;
                }
            }
        } else if h.name.eq_ignore_ascii_case("content-length") {
            let Ok(n) = value.trim().parse::<usize>() else {
                return Parse::Rejected(Reject::Malformed);
            };
            // Conflicting lengths are a request-smuggling vector: refuse.
            if body_len.is_some_and(|old| old != n) {
                return Parse::Rejected(Reject::Malformed);
            }
            body_len = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Parse::Rejected(Reject::TransferEncoding);
        } else if h.name.eq_ignore_ascii_case("accept") {
            wants_json_header = value.to_ascii_lowercase().contains("application/json");
        }
    }
    let body_len = body_len.unwrap_or(0);
    if body_len > MAX_BODY {
        return Parse::Rejected(Reject::BodyTooLarge);
    }
    let path = req.path.unwrap_or("/");
    let format = match query_format(path) {
        _ if path.split('?').next() == Some("/metrics") => Format::Metrics,
        Some(f) => f,
        None if wants_json_header => Format::Json,
        None => Format::Text,
    };
    Parse::Done {
        request: Request {
            method,
            format,
            keep_alive,
            body_len,
        },
        head_len,
    }
}

/// `?format=json` / `?format=text` in the target, if present.
fn query_format(target: &str) -> Option<Format> {
    let (_, query) = target.split_once('?')?;
    query
        .split('&')
        .find_map(|pair| match pair.split_once('=') {
            Some(("format", v)) if v.eq_ignore_ascii_case("json") => Some(Format::Json),
            Some(("format", v)) if v.eq_ignore_ascii_case("text") => Some(Format::Text),
            _ => None,
        })
}

pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Unknown",
    }
}

/// What to send back.
#[derive(Debug, Clone, Copy)]
pub struct Response<'a> {
    pub status: u16,
    pub content_type: &'static str,
    pub body: &'a str,
    /// HEAD: headers (with the body's Content-Length) but no body.
    pub head_only: bool,
    pub keep_alive: bool,
    /// `Allow` header value (for 405 and OPTIONS).
    pub allow: Option<&'static str>,
}

pub const TEXT: &str = "text/plain; charset=utf-8";
pub const JSON: &str = "application/json";
pub const ALLOW: &str = "GET, HEAD, OPTIONS";

/// Renders the response bytes into `out` (cleared first).
pub fn render(r: &Response<'_>, now: SystemTime, out: &mut Vec<u8>) {
    out.clear();
    let mut head = String::with_capacity(192);
    let _ = write!(
        head,
        "HTTP/1.1 {} {}\r\nDate: {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nConnection: {}\r\n",
        r.status,
        reason_phrase(r.status),
        http_date(now),
        r.content_type,
        r.body.len(),
        if r.keep_alive { "keep-alive" } else { "close" }
    );
    if let Some(allow) = r.allow {
        let _ = write!(head, "Allow: {allow}\r\n");
    }
    head.push_str("\r\n");
    out.extend_from_slice(head.as_bytes());
    if !r.head_only {
        out.extend_from_slice(r.body.as_bytes());
    }
}

/// IMF-fixdate (RFC 9110), e.g. `Sun, 06 Nov 1994 08:49:37 GMT`.
pub fn http_date(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days as i64);
    const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{}, {:02} {} {} {:02}:{:02}:{:02} GMT",
        WEEKDAYS[(days % 7) as usize],
        d,
        MONTHS[(m - 1) as usize],
        y,
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// (year, month 1-12, day 1-31) of a day count since 1970-01-01
/// (Howard Hinnant's algorithm for the proleptic Gregorian calendar).
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn done(buf: &[u8]) -> (Request, usize) {
        match parse(buf) {
            Parse::Done { request, head_len } => (request, head_len),
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(buf)),
        }
    }

    #[test]
    fn haproxy_checks_parse_with_their_connection_semantics() {
        let (r, n) = done(b"OPTIONS / HTTP/1.0\r\n\r\n");
        assert_eq!(r.method, Method::Options);
        assert!(!r.keep_alive, "HTTP/1.0 closes by default");
        assert_eq!(n, 22);
        let (r, _) = done(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(
            (r.method, r.keep_alive, r.format),
            (Method::Get, true, Format::Text)
        );
        let (r, _) = done(b"GET / HTTP/1.1\r\nConnection: Close\r\n\r\n");
        assert!(!r.keep_alive);
        let (r, _) = done(b"HEAD / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        assert_eq!((r.method, r.keep_alive), (Method::Head, true));
        let (r, _) = done(b"DELETE / HTTP/1.1\r\n\r\n");
        assert_eq!(r.method, Method::Other);
    }

    #[test]
    fn json_is_chosen_by_query_or_accept_and_the_query_wins() {
        let (r, _) = done(b"GET /?format=json HTTP/1.1\r\n\r\n");
        assert_eq!(r.format, Format::Json);
        let (r, _) = done(b"GET /health?x=1&format=JSON HTTP/1.1\r\n\r\n");
        assert_eq!(r.format, Format::Json);
        let (r, _) = done(b"GET / HTTP/1.1\r\nAccept: application/json\r\n\r\n");
        assert_eq!(r.format, Format::Json);
        let (r, _) = done(b"GET /?format=text HTTP/1.1\r\nAccept: application/json\r\n\r\n");
        assert_eq!(r.format, Format::Text);
    }

    #[test]
    fn incomplete_heads_wait_and_oversized_ones_are_rejected() {
        assert_eq!(parse(b"GET / HTTP/1.1\r\nHost: x\r\n"), Parse::Partial);
        assert_eq!(parse(b""), Parse::Partial);
        let mut big = b"GET / HTTP/1.1\r\nX-Pad: ".to_vec();
        big.resize(MAX_HEAD, b'a');
        assert_eq!(parse(&big), Parse::Rejected(Reject::HeadTooLarge));
        let mut many = b"GET / HTTP/1.1\r\n".to_vec();
        for i in 0..=MAX_HEADERS {
            many.extend_from_slice(format!("X-{i}: 1\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert_eq!(parse(&many), Parse::Rejected(Reject::HeadTooLarge));
    }

    #[test]
    fn bodies_are_bounded_and_never_chunked() {
        let (r, n) = done(b"POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc");
        assert_eq!((r.method, r.body_len, n), (Method::Other, 3, 38));
        let big = format!(
            "POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
            MAX_BODY + 1
        );
        assert_eq!(parse(big.as_bytes()), Parse::Rejected(Reject::BodyTooLarge));
        let chunked = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(parse(chunked), Parse::Rejected(Reject::TransferEncoding));
        let two = b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n";
        assert_eq!(parse(two), Parse::Rejected(Reject::Malformed));
        let bad = b"GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n";
        assert_eq!(parse(bad), Parse::Rejected(Reject::Malformed));
    }

    #[test]
    fn garbage_and_other_versions_are_rejected() {
        assert_eq!(
            parse(b"\x16\x03\x01\x02\x00"),
            Parse::Rejected(Reject::Malformed)
        );
        assert_eq!(
            parse(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
            Parse::Rejected(Reject::Version)
        );
    }

    #[test]
    fn responses_carry_the_exact_length_and_head_has_no_body() {
        let mut out = Vec::new();
        let t = UNIX_EPOCH + Duration::from_secs(784_111_777);
        let r = Response {
            status: 503,
            content_type: TEXT,
            body: "Node is not synced.\n",
            head_only: false,
            keep_alive: false,
            allow: None,
        };
        render(&r, t, &mut out);
        let s = String::from_utf8(out.clone()).unwrap();
        assert!(s.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{s}");
        assert!(
            s.contains("\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n"),
            "{s}"
        );
        assert!(s.contains("\r\nContent-Length: 20\r\n"), "{s}");
        assert!(s.contains("\r\nConnection: close\r\n"), "{s}");
        assert!(s.ends_with("\r\n\r\nNode is not synced.\n"), "{s}");
        render(
            &Response {
                head_only: true,
                keep_alive: true,
                ..r
            },
            t,
            &mut out,
        );
        let s = String::from_utf8(out).unwrap();
        assert!(s.contains("\r\nContent-Length: 20\r\n"), "{s}");
        assert!(s.ends_with("\r\n\r\n"), "{s}");
        assert!(s.contains("Connection: keep-alive"), "{s}");
    }

    #[test]
    fn dates_follow_the_gregorian_calendar() {
        let at = |s| http_date(UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(at(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
        // 2100 is not a leap year: the day after 28 Feb is 1 Mar.
        assert_eq!(at(4_107_542_399), "Sun, 28 Feb 2100 23:59:59 GMT");
        assert_eq!(at(4_107_542_400), "Mon, 01 Mar 2100 00:00:00 GMT");
    }
}
