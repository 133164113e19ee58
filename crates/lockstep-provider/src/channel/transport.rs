//! TCP between group members: one listener, one reader thread and one
//! writer thread per connection. Every connection starts with a hello
//! (protocol version, cluster name, Raft id); after that each frame is
//! handed to the group thread as an [`Input::Peer`]. Any decoding error
//! drops the connection with a log line; Raft retransmits what was lost.

use super::Input;
use crate::log::{info, warn};
use lockstep_core::wire::frame::FrameDecoder;
use lockstep_core::wire::peer::{check_hello, PeerMsg, MAX_PEER_FRAME, PROTOCOL_VERSION};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// Do not redial one address more often than this.
const REDIAL_EVERY: Duration = Duration::from_millis(500);

/// Who we are on the wire.
#[derive(Clone)]
pub struct Identity {
    pub cluster: String,
    pub raft_id: u64,
    /// Address peers use to reach us (`base_host:base_port`).
    pub peer_addr: String,
}

struct Conn {
    id: u64,
    tx: Sender<Vec<u8>>,
    stream: TcpStream,
}

#[derive(Default)]
struct Table {
    by_peer: HashMap<u64, Vec<Conn>>,
    dialing: HashMap<String, Instant>,
    /// Addresses of connected peers, for dialing after a drop.
    unidentified: Vec<TcpStream>,
}

pub struct Transport {
    me: Identity,
    table: Arc<Mutex<Table>>,
    inputs: Sender<Input>,
    stop: Arc<AtomicBool>,
    next_conn: Arc<AtomicU64>,
    listener: Option<thread::JoinHandle<()>>,
}

impl Transport {
    /// Binds the listener (`host:port`) and starts accepting peers.
    pub fn start(me: Identity, listen: &str, inputs: Sender<Input>) -> Result<Transport, String> {
        let listener =
            TcpListener::bind(listen).map_err(|e| format!("cannot listen on {listen}: {e}"))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("listener on {listen}: {e}"))?;
        info!(
            "group channel listening on {listen}, advertised as {}",
            me.peer_addr
        );
        let mut t = Transport {
            me,
            table: Arc::default(),
            inputs,
            stop: Arc::default(),
            next_conn: Arc::new(AtomicU64::new(1)),
            listener: None,
        };
        let ctx = t.context();
        t.listener = Some(
            thread::Builder::new()
                .name("lockstep-accept".into())
                .spawn(move || accept_loop(listener, ctx))
                .map_err(|e| format!("cannot start the listener thread: {e}"))?,
        );
        Ok(t)
    }

    fn context(&self) -> Ctx {
        Ctx {
            me: self.me.clone(),
            table: self.table.clone(),
            inputs: self.inputs.clone(),
            stop: self.stop.clone(),
            next_conn: self.next_conn.clone(),
        }
    }

    /// Sends to a peer; if there is no connection, dials `addr` (rate
    /// limited) and drops the message: Raft resends.
    pub fn send(&self, to: u64, bytes: Vec<u8>, addr: Option<&str>) {
        let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(conns) = t.by_peer.get(&to) {
            if let Some(c) = conns.first() {
                let _ = c.tx.send(bytes);
                return;
            }
        }
        if let Some(addr) = addr {
            self.dial_locked(&mut t, addr);
        }
    }

    /// Sends to every identified peer.
    pub fn broadcast(&self, bytes: &[u8]) {
        let t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        for conns in t.by_peer.values() {
            if let Some(c) = conns.first() {
                let _ = c.tx.send(bytes.to_vec());
            }
        }
    }

    /// Dials `addr` unless dialed recently.
    pub fn dial(&self, addr: &str) {
        let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        self.dial_locked(&mut t, addr);
    }

    fn dial_locked(&self, t: &mut Table, addr: &str) {
        if addr == self.me.peer_addr || self.stop.load(Ordering::Relaxed) {
            return;
        }
        let now = Instant::now();
        if t.dialing
            .get(addr)
            .is_some_and(|at| now < *at + REDIAL_EVERY)
        {
            return;
        }
        t.dialing.insert(addr.to_string(), now);
        let ctx = self.context();
        let addr = addr.to_string();
        let _ = thread::Builder::new()
            .name("lockstep-dial".into())
            .spawn(move || {
                let Some(stream) = dial(&addr) else {
                    return;
                };
                run_connection(stream, ctx);
            });
    }

    /// Closes every connection and the listener.
    pub fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        {
            let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
            for conns in t.by_peer.values() {
                for c in conns {
                    let _ = c.stream.shutdown(Shutdown::Both);
                }
            }
            for s in &t.unidentified {
                let _ = s.shutdown(Shutdown::Both);
            }
            t.by_peer.clear();
            t.unidentified.clear();
        }
        if let Some(h) = self.listener.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Transport {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[derive(Clone)]
struct Ctx {
    me: Identity,
    table: Arc<Mutex<Table>>,
    inputs: Sender<Input>,
    stop: Arc<AtomicBool>,
    next_conn: Arc<AtomicU64>,
}

fn dial(addr: &str) -> Option<TcpStream> {
    let addrs: Vec<SocketAddr> = addr.to_socket_addrs().ok()?.collect();
    for a in addrs {
        if let Ok(s) = TcpStream::connect_timeout(&a, CONNECT_TIMEOUT) {
            return Some(s);
        }
    }
    None
}

fn accept_loop(listener: TcpListener, ctx: Ctx) {
    while !ctx.stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                let c = ctx.clone();
                let _ = thread::Builder::new()
                    .name("lockstep-peer".into())
                    .spawn(move || run_connection(stream, c));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                warn!("group channel accept failed: {e}");
                thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// Reads one frame (blocking), or `None` on EOF/error (logged).
fn read_msg(stream: &mut TcpStream, dec: &mut FrameDecoder, peer: &str) -> Option<PeerMsg> {
    let mut buf = [0u8; 64 * 1024];
    loop {
        match dec.next_frame() {
            Ok(Some(f)) => {
                return match PeerMsg::from_frame(f) {
                    Ok(m) => Some(m),
                    Err(e) => {
                        warn!("dropping connection to {peer}: bad message: {e}");
                        None
                    }
                }
            }
            Ok(None) => {}
            Err(e) => {
                warn!("dropping connection to {peer}: {e}");
                return None;
            }
        }
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => dec.push(&buf[..n]),
        }
    }
}

fn run_connection(mut stream: TcpStream, ctx: Ctx) {
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    let _ = stream.set_nodelay(true);
    let _ = stream.set_nonblocking(false);
    let hello = PeerMsg::Hello {
        version: PROTOCOL_VERSION,
        cluster: ctx.me.cluster.clone(),
        raft_id: ctx.me.raft_id,
        peer_addr: ctx.me.peer_addr.clone(),
    };
    let Ok(bytes) = hello.to_frame() else { return };
    if stream.write_all(&bytes).is_err() {
        return;
    }
    if let Ok(s) = stream.try_clone() {
        ctx.table
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .unidentified
            .push(s);
    }
    let _ = stream.set_read_timeout(Some(HELLO_TIMEOUT));
    let mut dec = FrameDecoder::new(MAX_PEER_FRAME);
    let Some(first) = read_msg(&mut stream, &mut dec, &peer) else {
        return;
    };
    let (raft_id, peer_addr) = match first {
        PeerMsg::Hello {
            version,
            cluster,
            raft_id,
            peer_addr,
        } => match check_hello(&ctx.me.cluster, version, &cluster) {
            Ok(()) => (raft_id, peer_addr),
            Err(reason) => {
                warn!("refusing group connection from {peer} ({peer_addr}): {reason}");
                if let Ok(b) = (PeerMsg::Refuse { reason }).to_frame() {
                    let _ = stream.write_all(&b);
                }
                return;
            }
        },
        PeerMsg::Refuse { reason } => {
            warn!("peer {peer} refused the group connection: {reason}");
            return;
        }
        _ => {
            warn!("dropping connection to {peer}: it did not start with a hello");
            return;
        }
    };
    if raft_id == ctx.me.raft_id {
        return; // dialed ourselves through a listed address
    }
    let _ = stream.set_read_timeout(None);
    let Ok(write_half) = stream.try_clone() else {
        return;
    };
    let Ok(registered) = stream.try_clone() else {
        return;
    };
    let conn_id = ctx.next_conn.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = channel::<Vec<u8>>();
    {
        let mut t = ctx.table.lock().unwrap_or_else(|p| p.into_inner());
        if ctx.stop.load(Ordering::Relaxed) {
            return;
        }
        t.by_peer.entry(raft_id).or_default().push(Conn {
            id: conn_id,
            tx,
            stream: registered,
        });
    }
    let _ = ctx.inputs.send(Input::PeerUp { raft_id, peer_addr });
    let writer = thread::Builder::new()
        .name("lockstep-peer-tx".into())
        .spawn(move || {
            let mut w = write_half;
            for bytes in rx {
                if w.write_all(&bytes).is_err() {
                    let _ = w.shutdown(Shutdown::Both);
                    return;
                }
            }
        });
    while let Some(msg) = read_msg(&mut stream, &mut dec, &peer) {
        if let PeerMsg::Refuse { reason } = &msg {
            warn!("peer {peer} refused the group connection: {reason}");
            break;
        }
        if ctx.inputs.send(Input::Peer { from: raft_id, msg }).is_err() {
            break;
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
    {
        let mut t = ctx.table.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(conns) = t.by_peer.get_mut(&raft_id) {
            conns.retain(|c| c.id != conn_id);
            if conns.is_empty() {
                t.by_peer.remove(&raft_id);
            }
        }
    }
    if let Ok(w) = writer {
        let _ = w.join();
    }
}
