//! IST from a donor's writeset cache, over one TCP connection from the
//! donor to the joiner's `ist.recv_addr` (Galera's IST port, `base_port +
//! 1` by default). Used when the group log the joiner replayed does not
//! reach back to its position (`ist_replay.rs` covers the other case).
//!
//! The donor sends a stream header, the records `after + 1 ..= last` and
//! an end record (`lockstep_core::writeset_cache`); the joiner checks the
//! header is addressed to it, checks every record, keeps the events before
//! its join view in an [`IstBuffer`], and answers one byte when it has
//! them all. The connection itself (TLS, deadlines on every read and
//! write) is `lockstep_net::stream`; the joiner's wait for
//! the donor's connection ends when the transfer is settled otherwise
//! (full SST, session closed).

use crate::ist_replay::IstBuffer;
use crate::log::{info, warn};
use crate::writeset_cache::{read_record, CacheReader};
use lockstep_core::writeset_cache::{
    decode_stream_header, encode_record, encode_stream_header, event_digest, CachedEvent,
    CachedKind, StreamHeader, STREAM_HEADER_LEN,
};
use lockstep_net::secure::PeerSecurity;
use lockstep_net::stream::{self, Next, StreamListener};
use std::io::{BufReader, BufWriter, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use wsrep_abi::{Gtid, Uuid};

/// The joiner's answer once it has every event.
const ACK: u8 = b'K';

/// `host:port` from an `ist.recv_addr`-style value (`tcp://host:port`,
/// `host`, `host:port`, `[v6]:port`), with `port` when none is given.
pub fn socket_addr(value: &str, port: i64) -> String {
    let v = value
        .trim()
        .trim_start_matches("tcp://")
        .trim_start_matches("ssl://")
        .trim_end_matches('/');
    let has_port = match v.rfind(']') {
        Some(close) => v[close..].contains(':'),
        None => v.matches(':').count() == 1,
    };
    if has_port {
        v.to_string()
    } else if v.contains(':') && !v.starts_with('[') {
        format!("[{v}]:{port}")
    } else {
        format!("{v}:{port}")
    }
}

/// Donor side: sends `events` (`header.after + 1 ..= header.last`, and
/// first the joiner's `check` seqno if asked) to `addr`. Returns the
/// number of events sent.
pub fn send(
    addr: &str,
    header: StreamHeader,
    check: &[i64],
    events: CacheReader,
    security: &PeerSecurity,
    stop: &AtomicBool,
) -> Result<u64, String> {
    let (mut reader, mut writer) = stream::open(addr, security)
        .map_err(|why| format!("IST connection to the joiner: {why}"))?;
    let mut w = BufWriter::with_capacity(1 << 20, &mut writer);
    w.write_all(&encode_stream_header(&header))
        .map_err(|e| format!("sending the IST header: {e}"))?;
    let mut buf = Vec::new();
    let mut sent = 0u64;
    for ev in events {
        if stop.load(Ordering::SeqCst) {
            return Err("this node shuts down".into());
        }
        let ev = ev?;
        if ev.seqno <= header.after && !check.contains(&ev.seqno) {
            continue;
        }
        buf.clear();
        encode_record(&ev, &mut buf);
        w.write_all(&buf)
            .map_err(|e| format!("sending seqno {}: {e}", ev.seqno))?;
        sent += 1;
    }
    let end = CachedEvent {
        history: header.history,
        seqno: header.last,
        kind: CachedKind::End,
    };
    buf.clear();
    encode_record(&end, &mut buf);
    w.write_all(&buf)
        .and_then(|()| w.flush())
        .map_err(|e| format!("finishing the IST stream: {e}"))?;
    drop(w);
    let mut ack = [0u8; 1];
    reader
        .read_exact(&mut ack)
        .map_err(|e| format!("waiting for the joiner's acknowledgement: {e}"))?;
    if ack[0] != ACK {
        return Err(format!("the joiner answered {:#04x}", ack[0]));
    }
    Ok(sent)
}

/// What the joiner expects of the stream.
#[derive(Clone)]
pub struct Expect {
    pub have: Gtid,
    pub joiner: u64,
    /// The seqno of the view that added the joiner: events from it on
    /// reach the joiner through the group.
    pub join_seqno: i64,
    /// Bytes the joiner buffers at most (`IstBuffer`).
    pub limit: usize,
    pub max_payload: usize,
    /// The joiner's own newest writeset at or before its position (seqno,
    /// `event_digest`): the donor's record for it must match.
    pub check: Vec<(i64, u32)>,
    /// For the views shown to the server (`View::proto_ver`).
    pub proto_ver: i32,
}

/// Joiner side: a listener that takes one IST stream.
pub struct IstReceiver {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl IstReceiver {
    /// Listens on `bind`; `done` gets the filled buffer or why it failed.
    /// Nothing is reported if the receiver is stopped before a donor
    /// connects (the transfer was settled otherwise).
    pub fn start(
        bind: &str,
        expect: Expect,
        security: Arc<PeerSecurity>,
        done: impl FnOnce(Result<IstBuffer, IstFailure>) + Send + 'static,
    ) -> Result<IstReceiver, String> {
        let listener = StreamListener::bind(bind).map_err(|e| format!("IST receiver: {e}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("lockstep-ist".into())
            .spawn(move || {
                // A bug must not leave the joiner waiting for a report.
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    accept_stream(&listener, &flag, expect, &security)
                }))
                .unwrap_or_else(|_| {
                    Some(Err(IstFailure::failed("the IST receiver panicked (a bug)")))
                });
                if let Some(result) = result {
                    done(result);
                }
            })
            .map_err(|e| format!("starting the IST receiver: {e}"))?;
        Ok(IstReceiver {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for IstReceiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Waits for the donor; a connection that is not a valid stream for this
/// joiner is logged and dropped, and the wait goes on.
fn accept_stream(
    listener: &StreamListener,
    stop: &AtomicBool,
    expect: Expect,
    security: &PeerSecurity,
) -> Option<Result<IstBuffer, IstFailure>> {
    let served = listener.serve(stop, |conn, peer| {
        Next::Done(match receive(conn, &expect, security) {
            Err(Refused(why)) => {
                warn!("IST connection from {peer} refused: {why}");
                return Next::KeepWaiting;
            }
            Ok(buffer) => Ok(buffer),
            Err(Failed(why)) => Err(IstFailure::failed(format!("IST from {peer} failed: {why}"))),
            Err(Forked(why)) => Err(IstFailure {
                why: format!("IST from {peer}: {why}"),
                fork: true,
            }),
        })
    })?;
    Some(served.unwrap_or_else(|e| Err(IstFailure::failed(format!("IST receiver: {e}")))))
}

/// Why the stream did not serve as IST.
#[derive(Debug, Clone)]
pub struct IstFailure {
    pub why: String,
    /// The donor's history differs from this node's under the same UUID
    /// (a check record did not match): refuse to join, do not retry.
    pub fork: bool,
}

impl IstFailure {
    fn failed(why: impl Into<String>) -> IstFailure {
        IstFailure {
            why: why.into(),
            fork: false,
        }
    }
}

/// Not a stream for this joiner (keep waiting), a broken one (give up), or
/// one from another history under the same UUID (give up, refuse to join).
enum ReceiveError {
    Refused(String),
    Failed(String),
    Forked(String),
}
use ReceiveError::{Failed, Forked, Refused};

fn receive(
    conn: TcpStream,
    expect: &Expect,
    security: &PeerSecurity,
) -> Result<IstBuffer, ReceiveError> {
    // The same rules as the group channel: TLS when configured.
    let (reader, mut writer) = stream::accept(conn, security).map_err(|why| Refused(why.why))?;
    let mut r = BufReader::with_capacity(1 << 20, reader);
    let mut head = [0u8; STREAM_HEADER_LEN];
    r.read_exact(&mut head)
        .map_err(|e| Refused(format!("no header: {e}")))?;
    let h = decode_stream_header(&head).map_err(|e| Refused(e.to_string()))?;
    if h.joiner != expect.joiner
        || Uuid::from_bytes(h.history) != expect.have.uuid
        || h.after != expect.have.seqno
    {
        return Err(Refused(format!(
            "it is for joiner {:#x} at {}:{}, this is {:#x} at {}",
            h.joiner,
            Uuid::from_bytes(h.history),
            h.after,
            expect.joiner,
            expect.have
        )));
    }
    if h.last + 1 < expect.join_seqno {
        return Err(Failed(format!(
            "it ends at seqno {}, before the join view {}",
            h.last, expect.join_seqno
        )));
    }
    let mut buffer = IstBuffer::new(expect.have, expect.limit);
    buffer.start_history(expect.have.uuid);
    let mut buf = Vec::new();
    let mut next = h.after + 1;
    loop {
        let ev = match read_record(&mut r, &mut buf, expect.max_payload) {
            Ok(Some(ev)) => ev,
            Ok(None) => return Err(Failed(format!("the stream ended before seqno {next}"))),
            Err(e) => return Err(Failed(e)),
        };
        if ev.history != h.history {
            return Err(Failed(format!(
                "seqno {} belongs to another history",
                ev.seqno
            )));
        }
        // Only the check record, which precedes the events proper.
        let digest = (ev.seqno <= h.after).then(|| event_digest(&ev));
        let kind = match ev.kind {
            CachedKind::End => {
                if ev.seqno != h.last || next != h.last + 1 {
                    return Err(Failed(format!(
                        "the stream ended at {} after seqno {}; it announced {}",
                        ev.seqno,
                        next - 1,
                        h.last
                    )));
                }
                break;
            }
            kind => kind,
        };
        if ev.seqno <= h.after {
            // The check record, before the events proper.
            let theirs = digest.unwrap_or_default();
            match expect.check.iter().find(|(at, _)| *at == ev.seqno) {
                Some((_, own)) if *own == theirs => continue,
                Some((at, own)) => {
                    return Err(Forked(format!(
                        "history fork: the donor's event at seqno {at} of {} is not the one \
                         this node committed there (digests {theirs:#010x} and {own:#010x})",
                        expect.have.uuid
                    )))
                }
                _ => return Err(Failed(format!("unexpected seqno {}", ev.seqno))),
            }
        }
        if ev.seqno != next {
            return Err(Failed(format!(
                "seqno {} where {next} was expected",
                ev.seqno
            )));
        }
        next += 1;
        if ev.seqno >= expect.join_seqno {
            continue;
        }
        buffer.cached(ev.seqno, kind, expect.proto_ver);
    }
    let join = Gtid {
        uuid: expect.have.uuid,
        seqno: expect.join_seqno,
    };
    buffer.covers(join).map_err(Failed)?;
    writer
        .write_all(&[ACK])
        .and_then(|()| writer.flush())
        .map_err(|e| Failed(format!("acknowledging: {e}")))?;
    info!(
        "IST stream received: {} writesets {}..={} from the donor's writeset cache",
        buffer.writesets(),
        h.after + 1,
        expect.join_seqno - 1
    );
    Ok(buffer)
}
