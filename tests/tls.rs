//! Peer TLS on real mariadbd nodes (issue 13): a cluster set up with
//! Galera's `socket.ssl*` options replicates and no row is readable on
//! the wire; a node with a certificate of another CA and a node without
//! TLS are refused, say why in their logs, and learn nothing.
//!
//! The wire is tapped by relays: each node listens on a private port
//! (`gmcast.listen_addr`) and advertises its usual one, where a relay
//! forwards and records every byte. Peers dial advertised addresses only,
//! so every group connection crosses a relay. The same test on a plain
//! cluster finds the rows in the capture, which shows the tap works.

#[path = "support/multi_node.rs"]
mod multi_node;

use lockstep_net::pki::Authority;
use lockstep_testkit::Cluster;
use multi_node::{check, edit_cnf, fail, status_u64, OrLogs};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(60);
/// The tap keeps at most this much (the test writes far less).
const CAPTURE_LIMIT: usize = 256 << 20;
/// In every row; looked for in the capture.
const MARKER: &str = "CONFIDENTIAL-ROW-4e1c";

/// Forwards connections from `listen` to `target`, recording both ways.
struct Tap {
    seen: Arc<Mutex<Vec<u8>>>,
    stop: Arc<AtomicBool>,
}

impl Tap {
    fn start(listen: u16, target: u16) -> Tap {
        let l = TcpListener::bind(("127.0.0.1", listen)).expect("binding the tap");
        l.set_nonblocking(true).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (seen.clone(), stop.clone());
        thread::spawn(move || {
            while !st.load(Ordering::SeqCst) {
                match l.accept() {
                    Ok((from, _)) => {
                        let Ok(to) = TcpStream::connect(("127.0.0.1", target)) else {
                            continue;
                        };
                        for (a, b) in [
                            (from.try_clone().unwrap(), to.try_clone().unwrap()),
                            (to, from),
                        ] {
                            let s = s.clone();
                            thread::spawn(move || pump(a, b, &s));
                        }
                    }
                    Err(_) => thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Tap { seen, stop }
    }

    fn bytes(&self) -> Vec<u8> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn pump(mut from: TcpStream, mut to: TcpStream, seen: &Mutex<Vec<u8>>) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                {
                    let mut s = seen.lock().unwrap();
                    if s.len() + n <= CAPTURE_LIMIT {
                        s.extend_from_slice(&buf[..n]);
                    }
                }
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Builds three nodes whose group ports are tapped, starts them, writes
/// marked rows on every node and checks them everywhere. Returns the
/// cluster, everything the taps saw, and the taps (the only way to reach
/// the nodes' group ports).
fn tapped_cluster(name: &str, tls: bool) -> (Cluster, Vec<u8>, Vec<Tap>) {
    let mut cluster = Cluster::builder(3)
        .cluster_name(name)
        .tls(tls)
        .build()
        .unwrap_or_else(|e| panic!("building {name}: {e}"));
    let mut taps = Vec::new();
    for n in cluster.nodes() {
        let (advertised, private) = (n.base_port(), free_port());
        edit_cnf(n, |t| {
            t.replace(
                &format!("base_port={advertised};"),
                &format!("base_port={advertised}; gmcast.listen_addr=tcp://127.0.0.1:{private};"),
            )
        });
        taps.push(Tap::start(advertised, private));
    }
    cluster
        .start_all()
        .unwrap_or_else(|e| fail(&cluster, &format!("starting {name}: {e}")));
    let n1 = cluster.node(0);
    n1.sql("CREATE DATABASE IF NOT EXISTS test; CREATE TABLE test.secret (id INT PRIMARY KEY, v VARCHAR(200))")
        .or_logs(&cluster, "create");
    for (i, n) in cluster.nodes().iter().enumerate() {
        for k in 0..20 {
            let id = i * 100 + k;
            n.sql(&format!(
                "INSERT INTO test.secret VALUES ({id}, '{MARKER}-{id}')"
            ))
            .or_logs(&cluster, "insert");
        }
    }
    for n in cluster.nodes() {
        n.wait_until("all 60 rows", WAIT, |n| {
            let c = n.query_rows("SELECT COUNT(*) FROM test.secret")?[0][0].clone();
            Ok((c == "60", c))
        })
        .or_logs(&cluster, "replication");
    }
    let sums = cluster
        .checksums(&["test.secret"])
        .or_logs(&cluster, "checksum");
    check(&cluster, sums.is_consistent(), || {
        format!("nodes differ: {sums:?}")
    });
    let seen: Vec<u8> = taps.iter().flat_map(|t| t.bytes()).collect();
    check(&cluster, seen.len() > 10_000, || {
        format!(
            "the taps saw only {} bytes: the relays are not in the path",
            seen.len()
        )
    });
    (cluster, seen, taps)
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[test]
fn a_plain_cluster_shows_its_rows_on_the_wire() {
    // The control: without TLS the tap reads the rows, so the TLS test
    // below would see them too if they were sent in clear.
    let (_cluster, seen, _taps) = tapped_cluster("tls_control", false);
    assert!(contains(&seen, MARKER), "the tap missed plain rows");
    assert!(
        contains(&seen, "tls_control"),
        "the tap missed the plain hello"
    );
}

#[test]
fn a_tls_cluster_replicates_and_no_row_is_readable_on_the_wire() {
    let (mut cluster, seen, _taps) = tapped_cluster("tls_on", true);
    check(&cluster, !contains(&seen, MARKER), || {
        "a row is readable on the wire of a TLS cluster".into()
    });
    check(&cluster, !contains(&seen, "tls_on"), || {
        "the cluster name is readable on the wire".into()
    });
    for n in cluster.nodes() {
        let log = std::fs::read_to_string(n.error_log_path()).unwrap();
        check(
            &cluster,
            log.contains("peer connections: TLS, mutual"),
            || format!("{} does not log its TLS setup", n.name()),
        );
    }

    // A fourth node with a certificate of another CA: refused both ways.
    let stranger = cluster.add_node().or_logs(&cluster, "add node4");
    let dir = cluster.node(stranger).dir().join("tls");
    let other = Authority::generate("another CA").unwrap();
    std::fs::remove_file(dir.join("ca.pem")).unwrap();
    other
        .issue_into(&dir, "node4", &["127.0.0.1".into()])
        .unwrap();
    hand_to_server(&dir);
    // It rejects our certificate first (TLS 1.3: the dialer checks the
    // acceptor's before sending its own), so the members hear its alert.
    refused_joiner(
        &mut cluster,
        stranger,
        &["UnknownIssuer", "UnknownCA", "BadCertificate"],
        "cannot open a group connection",
    );

    // A fifth node without TLS, speaking the plain handshake: refused,
    // and told nothing (the TLS nodes close without a word).
    let plain = cluster.add_node().or_logs(&cluster, "add node5");
    edit_cnf(cluster.node(plain), |t| {
        t.lines()
            .map(|l| {
                if l.starts_with("wsrep_provider_options") {
                    l.replace("socket.ssl=YES", "socket.ssl=NO")
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    });
    // "ended before its hello": not one byte came back.
    refused_joiner(
        &mut cluster,
        plain,
        &["speaks plain text"],
        "ended before its hello",
    );

    // The three members never noticed: still three, still writing.
    cluster
        .node(1)
        .sql("INSERT INTO test.secret VALUES (999, 'after')")
        .or_logs(&cluster, "insert after");
    for i in 0..3 {
        let n = cluster.node(i);
        check(
            &cluster,
            status_u64(n, "wsrep_cluster_size").unwrap() == 3,
            || format!("{} sees another cluster size", n.name()),
        );
        n.wait_until("row 999", WAIT, |n| {
            let c = n.query_rows("SELECT COUNT(*) FROM test.secret WHERE id=999")?[0][0].clone();
            Ok((c == "1", c))
        })
        .or_logs(&cluster, "replication after the refusals");
    }
}

/// Files written by the test go to the server's user, as the testkit's are.
fn hand_to_server(dir: &Path) {
    let Some(u) = lockstep_testkit::user::server_user().unwrap() else {
        return;
    };
    for e in std::fs::read_dir(dir).unwrap() {
        std::os::unix::fs::chown(e.unwrap().path(), Some(u.uid), Some(u.gid)).unwrap();
    }
}

/// Starts node `i`, which must not get in: a member logs one of
/// `reasons` for refusing it, it logs `told`, and it never syncs.
fn refused_joiner(cluster: &mut Cluster, i: usize, reasons: &[&str], told: &str) {
    cluster
        .node_mut(i)
        .spawn(&[])
        .or_logs(cluster, "spawning the refused node");
    let name = cluster.node(i).name().to_string();
    let t0 = Instant::now();
    let members_refused = || {
        (0..3).any(|m| {
            std::fs::read_to_string(cluster.node(m).error_log_path())
                .unwrap_or_default()
                .lines()
                .any(|l| {
                    l.contains("refusing group connection") && reasons.iter().any(|r| l.contains(r))
                })
        })
    };
    let joiner_told = || {
        std::fs::read_to_string(cluster.node(i).error_log_path())
            .unwrap_or_default()
            .lines()
            .any(|l| l.contains(told))
    };
    while !(members_refused() && joiner_told()) {
        if t0.elapsed() > WAIT {
            fail(
                cluster,
                &format!(
                    "{name}: refusal not logged (members: {}, joiner: {})",
                    members_refused(),
                    joiner_told()
                ),
            );
        }
        thread::sleep(Duration::from_millis(200));
    }
    let synced = cluster
        .node(i)
        .status("wsrep_local_state_comment")
        .ok()
        .flatten();
    check(cluster, synced.as_deref() != Some("Synced"), || {
        format!("{name} got in: {synced:?}")
    });
    let _ = cluster.node_mut(i).kill();
}

/// A transport of our own, as an attacker would run it: the cluster's
/// name, the Raft id it claims, and a certificate the cluster's CA
/// signed for it (a stolen or mis-issued one).
fn impostor(
    cluster: &Cluster,
    raft_id: u64,
) -> (
    lockstep_net::transport::Transport,
    std::sync::mpsc::Receiver<lockstep_net::transport::Inbound>,
) {
    use lockstep_net::transport::{Identity, Transport};
    let dir = cluster.base_dir().join("mallory");
    let ca = Authority::load(&lockstep_testkit::tls::ca_dir(cluster.base_dir()))
        .unwrap_or_else(|e| fail(cluster, &format!("loading the cluster CA: {e}")));
    let f = ca
        .issue_into(&dir, "mallory", &["127.0.0.1".into()])
        .unwrap_or_else(|e| fail(cluster, &format!("issuing mallory's certificate: {e}")));
    let files = lockstep_net::tls::TlsFiles {
        cert: f.cert,
        key: f.key,
        ca: Some(f.ca),
        cipher: None,
        password_file: None,
    };
    let security = lockstep_net::secure::PeerSecurity::tls(files, false)
        .unwrap_or_else(|e| fail(cluster, &format!("mallory's TLS: {e}")));
    let (tx, rx) = std::sync::mpsc::channel();
    let me = Identity {
        cluster: cluster.name().to_string(),
        raft_id,
        peer_addr: "127.0.0.1:9".into(),
        bind_ip: None,
    };
    let t = Transport::start(
        me,
        "127.0.0.1:0",
        Arc::new(security),
        Arc::new(|_| true),
        Arc::new(move |ev| tx.send(ev).is_ok()),
    )
    .unwrap_or_else(|e| fail(cluster, &format!("mallory's transport: {e}")));
    (t, rx)
}

/// Issue 34 item 5 (ADR 0014): a member's Raft id is bound to the
/// certificate it joined with. A peer holding a certificate of the
/// cluster's own CA learns node1's Raft id from its hello, then claims
/// it towards node2: node2 refuses the connection and logs why, and the
/// cluster goes on, three members writing. Then node1's certificate is
/// rotated (`socket.ssl_reload`): it binds itself to the new one, its
/// open connections stay, and after a cut it reconnects with the new one
/// and the cluster replicates through it.
#[test]
fn a_certificate_of_the_cluster_s_ca_cannot_take_a_member_s_raft_id() {
    let cluster = Cluster::builder(3)
        .tls(true)
        .cluster_name("bound_ids")
        .start()
        .unwrap_or_else(|e| panic!("starting 3 TLS nodes: {e}"));
    for n in cluster.nodes() {
        n.wait_for_status("wsrep_lockstep_bound_members", "3", WAIT)
            .or_logs(&cluster, "every member bound to its certificate");
    }
    // A stranger's id: node1 answers the hello with its own.
    let (probe, rx) = impostor(&cluster, 0x5eed_0001);
    probe.dial(&format!("127.0.0.1:{}", cluster.node(0).base_port()));
    let deadline = Instant::now() + WAIT;
    let node1_id = loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(lockstep_net::transport::Inbound::PeerUp { raft_id, .. }) => break raft_id,
            _ if Instant::now() > deadline => fail(&cluster, "node1 never answered the probe"),
            _ => {}
        }
    };
    drop(probe);
    let (mallory, rx) = impostor(&cluster, node1_id);
    mallory.dial(&format!("127.0.0.1:{}", cluster.node(1).base_port()));
    let claim = format!("claims Raft id {node1_id:#x}, which the cluster bound to certificate");
    cluster
        .node(1)
        .wait_until("node2 to refuse the impostor", WAIT, |n| {
            let c = multi_node::log_count(n, &claim);
            Ok((c >= 1, c.to_string()))
        })
        .or_logs(&cluster, "the refusal in node2's log");
    let got_in = rx
        .try_iter()
        .any(|ev| matches!(ev, lockstep_net::transport::Inbound::PeerUp { .. }));
    check(&cluster, !got_in, || "node2 accepted the impostor".into());
    drop(mallory);

    // Rotation: node1 gets a new certificate of the same CA and reloads
    // it. It binds itself to the new one; its open connections stay (as
    // with Galera). Cut off and back (`gmcast.isolate`), it reconnects
    // with the new certificate only, and the others take it.
    let n1 = cluster.node(0);
    let files = lockstep_testkit::tls::node_files(n1.config());
    let dir = files
        .cert
        .parent()
        .expect("a certificate directory")
        .to_path_buf();
    Authority::load(&lockstep_testkit::tls::ca_dir(cluster.base_dir()))
        .and_then(|ca| ca.issue_into(&dir, n1.name(), &["127.0.0.1".into()]))
        .unwrap_or_else(|e| fail(&cluster, &format!("reissuing node1's certificate: {e}")));
    hand_to_server(&dir);
    n1.sql("SET GLOBAL wsrep_provider_options='socket.ssl_reload=1'")
        .or_logs(&cluster, "reload node1's certificate");
    n1.wait_until("node1 to bind its new certificate", WAIT, |n| {
        let c = multi_node::log_count(n, "binding this node to its new certificate");
        Ok((c >= 1, c.to_string()))
    })
    .or_logs(&cluster, "the new binding");
    // Once every member applied the new binding (a round trip: give it
    // a second), reconnect.
    std::thread::sleep(Duration::from_secs(1));
    for on in [1, 0] {
        n1.sql(&format!(
            "SET GLOBAL wsrep_provider_options='gmcast.isolate={on}'"
        ))
        .or_logs(&cluster, "cut node1 off and back");
    }
    for n in cluster.nodes() {
        n.wait_for_status("wsrep_cluster_size", "3", WAIT)
            .or_logs(&cluster, "node1 back with its new certificate");
    }
    check(
        &cluster,
        multi_node::log_count(cluster.node(1), &claim) == 1,
        || "node2 refused node1's new certificate".into(),
    );
    cluster
        .node(0)
        .sql("CREATE DATABASE b; CREATE TABLE b.after (id INT PRIMARY KEY); INSERT INTO b.after VALUES (1)")
        .or_logs(&cluster, "write after the impostor");
    for n in cluster.nodes() {
        check(
            &cluster,
            status_u64(n, "wsrep_cluster_size").unwrap_or(0) == 3,
            || format!("{} sees another cluster size", n.name()),
        );
        n.wait_until("the row", WAIT, |n| {
            let c = n.query_rows("SELECT COUNT(*) FROM b.after")?[0][0].clone();
            Ok((c == "1", c))
        })
        .or_logs(&cluster, "replication after the impostor");
    }
}

/// Issue 52 item 1 (ADR 0014, "Every message against its sender"): a peer
/// holding a certificate of the cluster's own CA, under a fresh Raft id
/// (the transport admits it: joiners look the same), sends node2 every
/// message kind that acts for someone else: a relayed append claiming to
/// be another member's (where peers are authenticated there are no relays,
/// so node2 refuses it), a Raft append claiming another member as its
/// sender, and a clock probe's answer (only members' clocks count for the
/// leases, ADR 0036). node2 refuses and logs each (the clock answer as a
/// note), `wsrep_lockstep_refused_messages`
/// counts them, and the cluster loses nothing: still three Synced members,
/// bound as before, replicating, identical. (Under a member's id the
/// connection itself is refused: the test above.)
#[test]
fn an_impostor_with_a_certificate_of_the_cluster_s_ca_is_refused_message_by_message() {
    use lockstep_core::group::peer::PeerMsg;
    use lockstep_net::transport::Inbound;
    use protobuf::Message as _;
    const MALLORY: u64 = 0x5eed_0002;
    let cluster = Cluster::builder(3)
        .tls(true)
        .cluster_name("impostor_msgs")
        .start()
        .unwrap_or_else(|e| panic!("starting 3 TLS nodes: {e}"));
    for n in cluster.nodes() {
        n.wait_for_status("wsrep_lockstep_bound_members", "3", WAIT)
            .or_logs(&cluster, "every member bound to its certificate");
    }
    cluster
        .node(0)
        .sql("CREATE DATABASE m; CREATE TABLE m.t (id INT PRIMARY KEY); INSERT INTO m.t VALUES (1)")
        .or_logs(&cluster, "write before the impostor");

    // Mallory dials node1 and node2 and learns their Raft ids.
    let (mallory, rx) = impostor(&cluster, MALLORY);
    let port_of = |i: usize| cluster.node(i).base_port();
    for i in [0, 1] {
        mallory.dial(&format!("127.0.0.1:{}", port_of(i)));
    }
    let mut ids = std::collections::HashMap::new();
    let deadline = Instant::now() + WAIT;
    while ids.len() < 2 {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(Inbound::PeerUp {
                raft_id, peer_addr, ..
            }) => {
                for i in [0, 1] {
                    if peer_addr.ends_with(&format!(":{}", port_of(i))) {
                        ids.insert(i, raft_id);
                    }
                }
            }
            _ if Instant::now() > deadline => fail(&cluster, "node1 and node2 never took mallory"),
            _ => {}
        }
    }
    let (node1_id, node2_id) = (ids[&0], ids[&1]);
    let forged = {
        let mut m = raft::eraftpb::Message::default();
        m.set_msg_type(raft::eraftpb::MessageType::MsgAppend);
        m.from = node1_id;
        m.to = node2_id;
        m.term = 1_000_000;
        m.log_term = 1_000_000;
        m.index = 1 << 40;
        m.commit = 1 << 40;
        m.entries = vec![raft::eraftpb::Entry {
            term: 1_000_000,
            index: (1 << 40) + 1,
            data: b"forged writeset".to_vec().into(),
            ..Default::default()
        }]
        .into();
        m.write_to_bytes().expect("encoding a raft message")
    };
    let node2 = cluster.node(1);
    let cases: [(&str, PeerMsg, String); 3] = [
        (
            "a relayed append",
            PeerMsg::Relayed(forged.clone()),
            format!("refused relayed MsgAppend (claims sender {node1_id:#x}) from peer {MALLORY:#x}: relays are off"),
        ),
        (
            "a Raft append claiming node1",
            PeerMsg::Raft(forged.clone()),
            format!("refused a Raft MsgAppend claiming sender {node1_id:#x} from peer {MALLORY:#x}"),
        ),
        // Unasked, a clock far ahead: would turn node2's leases off if a
        // stranger's clock counted (ADR 0036). Dropped with a note, not a
        // warning: a member evicted since the ping answers the same way.
        (
            "a clock probe's answer",
            PeerMsg::ClockPong {
                sent: 0,
                clock: u64::MAX / 2,
            },
            format!("dropped a clock probe's answer from peer {MALLORY:#x}"),
        ),
    ];
    for (what, msg, logged) in cases {
        let frame = msg.to_frame().expect("a frame");
        check(
            &cluster,
            mallory.sender().send_control(node2_id, frame),
            || format!("mallory could not send {what}"),
        );
        node2
            .wait_until(&format!("node2 to refuse {what}"), WAIT, |n| {
                let c = multi_node::log_count(n, &logged);
                Ok((c >= 1, c.to_string()))
            })
            .or_logs(&cluster, &format!("node2's refusal of {what}: {logged:?}"));
    }
    let refused = status_u64(node2, "wsrep_lockstep_refused_messages").unwrap_or(0);
    check(&cluster, refused >= 3, || {
        format!("wsrep_lockstep_refused_messages = {refused} on node2, 3 refusals logged")
    });
    let agree = node2.status("wsrep_lockstep_clocks_agree").ok().flatten();
    check(&cluster, agree.as_deref() == Some("ON"), || {
        format!("node2's leases stopped trusting the clocks: {agree:?}")
    });
    drop(mallory);

    // Nothing lost, nothing moved.
    cluster
        .node(1)
        .sql("INSERT INTO m.t VALUES (2)")
        .or_logs(&cluster, "write on node2 after the impostor");
    for n in cluster.nodes() {
        n.wait_for_status("wsrep_local_state_comment", "Synced", WAIT)
            .or_logs(&cluster, "Synced after the impostor");
        check(
            &cluster,
            status_u64(n, "wsrep_cluster_size").unwrap_or(0) == 3
                && status_u64(n, "wsrep_lockstep_bound_members").unwrap_or(0) == 3,
            || format!("{}: another cluster size or binding table", n.name()),
        );
        let rows = n
            .query_rows(
                "SET SESSION wsrep_sync_wait=1; SELECT GROUP_CONCAT(id ORDER BY id) FROM m.t",
            )
            .or_logs(&cluster, "a causal read after the impostor");
        check(&cluster, rows == vec![vec!["1,2".to_string()]], || {
            format!("{} holds {rows:?}", n.name())
        });
    }
}

/// Issue 52 item 1 (ADR 0014, "Every message against its sender"): after
/// a crash of the whole cluster, a `pc.recovery` vote counts only from a
/// peer presenting the certificate its member was bound to, which every
/// node keeps in `gvwstate.dat`. Two of three TLS nodes restart; a peer
/// with a certificate of the cluster's CA sends them votes for the third,
/// claiming it holds less than they do, which would let them re-form the
/// component without it. They refuse and log each vote, stay
/// non-Primary, and re-form only when the third is back, with every
/// acknowledged row.
#[test]
fn a_forged_pc_recovery_vote_cannot_make_the_others_found_without_a_member() {
    /// What a node that re-forms the component by `pc.recovery` logs.
    const FOUNDED: &str = "is back and this node is the most advanced";
    use lockstep_core::group::peer::PeerMsg;
    use lockstep_core::group::recovery::Vote;
    use lockstep_core::saved_view::SavedView;
    use lockstep_net::transport::Inbound;
    let mut cluster = Cluster::builder(3)
        .tls(true)
        .cluster_name("forged_votes")
        .start()
        .unwrap_or_else(|e| panic!("starting 3 TLS nodes: {e}"));
    cluster
        .node(0)
        .sql("CREATE DATABASE v; CREATE TABLE v.t (id INT PRIMARY KEY)")
        .or_logs(&cluster, "create the table");
    for i in 1..=50 {
        cluster
            .node(i % 3)
            .sql(&format!("INSERT INTO v.t VALUES ({i})"))
            .or_logs(&cluster, "an acknowledged insert");
    }
    // Every node's saved view names each member's certificate.
    let saved = |cluster: &Cluster, i: usize| {
        std::fs::read_to_string(cluster.node(i).datadir().join("gvwstate.dat"))
            .ok()
            .and_then(|t| SavedView::parse(&t).ok())
    };
    let t0 = Instant::now();
    while !(0..3).all(|i| {
        saved(&cluster, i)
            .is_some_and(|v| v.members.len() == 3 && v.members.iter().all(|m| m.cert.is_some()))
    }) {
        if t0.elapsed() > WAIT {
            fail(&cluster, "gvwstate.dat never named three bound members");
        }
        thread::sleep(Duration::from_millis(200));
    }
    let view = saved(&cluster, 0).expect("node1's saved view");
    let node3 = saved(&cluster, 2).expect("node3's saved view").me;

    cluster
        .kill_at_once(&[0, 1, 2])
        .or_logs(&cluster, "kill -9 of every node");
    let positions = multi_node::recover_positions(&mut cluster);
    multi_node::restart_at(&mut cluster, &positions[..2]);

    // Mallory votes for node3: at seqno 0, behind both of them.
    let forged = PeerMsg::Recovery(Vote {
        member: node3,
        history: view.history,
        seqno: 0,
        view_seqno: view.seqno,
        view: view.members.iter().map(|m| m.uuid).collect(),
        in_group: false,
    })
    .to_frame()
    .expect("a vote frame");
    let (mallory, rx) = impostor(&cluster, 0x5eed_0003);
    let logged = format!(
        "refused a pc.recovery vote for member {node3} from peer {:#x}",
        0x5eed_0003_u64
    );
    let refused_by_both =
        |cluster: &Cluster| (0..2).all(|i| multi_node::log_count(cluster.node(i), &logged) >= 1);
    let mut peers = std::collections::HashSet::new();
    let t0 = Instant::now();
    // Well past the time two nodes take to re-form a component when every
    // member's vote is in (about a second): keep voting for 15 s.
    while t0.elapsed() < Duration::from_secs(15) || !refused_by_both(&cluster) {
        if t0.elapsed() > WAIT {
            fail(
                &cluster,
                &format!("the forged vote was not refused and logged: {logged:?}"),
            );
        }
        for i in 0..2 {
            mallory.dial(&format!("127.0.0.1:{}", cluster.node(i).base_port()));
        }
        while let Ok(ev) = rx.try_recv() {
            if let Inbound::PeerUp { raft_id, .. } = ev {
                peers.insert(raft_id);
            }
        }
        for p in &peers {
            mallory.sender().send_control(*p, forged.clone());
        }
        for i in 0..2 {
            let st = cluster
                .node(i)
                .status("wsrep_cluster_status")
                .ok()
                .flatten()
                .unwrap_or_default();
            check(&cluster, st != "Primary", || {
                format!("node{} re-formed the component without node3: {st}", i + 1)
            });
        }
        thread::sleep(Duration::from_millis(500));
    }
    // A restarting node takes no SQL until it is in a primary component,
    // so its log says whether it founded one.
    for i in 0..2 {
        let founded = multi_node::log_count(cluster.node(i), FOUNDED);
        check(&cluster, founded == 0, || {
            format!("node{} re-formed the component without node3", i + 1)
        });
    }
    drop(mallory);

    // node3 comes back: the three re-form, every acknowledged row there.
    let arg = format!("--wsrep_start_position={}", positions[2]);
    let r = cluster.node_mut(2).spawn(&[&arg]);
    r.or_logs(&cluster, "restart node3");
    multi_node::all_three_synced(&cluster, WAIT, "Synced once node3 is back");
    for n in &cluster.nodes()[..2] {
        let refused = status_u64(n, "wsrep_lockstep_refused_messages").unwrap_or(0);
        check(&cluster, refused >= 1, || {
            format!("{}: wsrep_lockstep_refused_messages = {refused}", n.name())
        });
    }
    for n in cluster.nodes() {
        let rows = n
            .query_rows("SET SESSION wsrep_sync_wait=1; SELECT COUNT(*), SUM(id) FROM v.t")
            .or_logs(&cluster, "count the rows");
        check(
            &cluster,
            rows == vec![vec!["50".to_string(), "1275".to_string()]],
            || format!("{} holds {rows:?}", n.name()),
        );
    }
}
