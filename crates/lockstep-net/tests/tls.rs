//! TLS between two ends over loopback, with certificates from the crate's
//! own CA: what gets through, what is refused and what the wire shows.

use lockstep_net::pki::{Authority, NodeFiles};
use lockstep_net::tls::{TlsContext, TlsFiles, TlsReader, TlsWriter};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

const T: Duration = Duration::from_secs(5);

type Handshake = Result<(TlsReader, TlsWriter), String>;

fn files(f: &NodeFiles) -> TlsFiles {
    TlsFiles {
        cert: f.cert.clone(),
        key: f.key.clone(),
        ca: Some(f.ca.clone()),
        cipher: None,
        password_file: None,
    }
}

fn node(dir: &Path, ca: &Authority, name: &str) -> TlsContext {
    let f = ca
        .issue_into(&dir.join(name), name, &["127.0.0.1".into()])
        .unwrap();
    TlsContext::load(&files(&f)).unwrap()
}

/// Accepts one connection with `server` and dials it with `client`;
/// returns both handshake results.
fn pair(server: &TlsContext, client: &TlsContext) -> (Handshake, Handshake) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let s = server.clone();
    let acceptor = thread::spawn(move || s.accept(l.accept().unwrap().0, T));
    let c = client.connect(TcpStream::connect(addr).unwrap(), T);
    // A refusal for a set-up that does not fit is marked, so the tests can
    // see it would be logged as a warning.
    let text = |e: lockstep_net::Refused| {
        format!("{}{}", e.why, if e.mismatch { " [mismatch]" } else { "" })
    };
    (acceptor.join().unwrap().map_err(text), c.map_err(text))
}

/// Handshake succeeded on both ends, but in TLS 1.3 the dialer learns of
/// a refused certificate only when it reads: read once to find out.
fn dialer_refused(
    c: Result<(lockstep_net::tls::TlsReader, lockstep_net::tls::TlsWriter), String>,
) -> String {
    match c {
        Err(e) => e,
        Ok((mut r, _w)) => {
            let mut b = [0u8; 1];
            match r.read(&mut b) {
                Ok(n) => format!("read {n} bytes"),
                Err(e) => e.to_string(),
            }
        }
    }
}

#[test]
fn two_nodes_of_one_ca_talk_both_ways_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Authority::generate("test CA").unwrap();
    let (a, b) = (node(dir.path(), &ca, "a"), node(dir.path(), &ca, "b"));
    let (s, c) = pair(&a, &b);
    let ((mut sr, mut sw), (mut cr, mut cw)) = (s.unwrap(), c.unwrap());
    // 5 MB each way, written and read by four threads at once.
    let big: Vec<u8> = (0..5_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let (b1, b2) = (big.clone(), big.clone());
    let w1 = thread::spawn(move || sw.write_all(&b1).map(|_| sw));
    let w2 = thread::spawn(move || cw.write_all(&b2).map(|_| cw));
    let r1 = thread::spawn(move || {
        let mut got = vec![0u8; 5_000_000];
        sr.read_exact(&mut got).map(|_| got)
    });
    let mut got = vec![0u8; 5_000_000];
    cr.read_exact(&mut got).unwrap();
    assert!(got == big, "server to client bytes differ");
    assert!(
        r1.join().unwrap().unwrap() == big,
        "client to server bytes differ"
    );
    let mut sw = w1.join().unwrap().unwrap();
    w2.join().unwrap().unwrap();
    // An orderly close reads as the end of the stream.
    sw.close();
    assert_eq!(cr.read(&mut [0u8; 8]).unwrap(), 0);
}

#[test]
fn a_certificate_of_another_ca_is_refused_on_both_sides() {
    let dir = tempfile::tempdir().unwrap();
    let ours = Authority::generate("cluster CA").unwrap();
    let theirs = Authority::generate("another CA").unwrap();
    let a = node(dir.path(), &ours, "a");
    let stranger = node(&dir.path().join("x"), &theirs, "x");

    // The stranger dials us: it refuses our certificate first.
    let (s, c) = pair(&a, &stranger);
    let s = s.err().expect("the acceptor refuses");
    let c = c.err().expect("the dialer refuses");
    assert!(
        c.contains("UnknownIssuer") && c.ends_with("[mismatch]"),
        "{c}"
    );
    assert!(s.contains("alert") && s.ends_with("[mismatch]"), "{s}");

    // We dial the stranger: same in the other direction.
    let (s, c) = pair(&stranger, &a);
    assert!(s.is_err(), "the stranger refuses our certificate");
    assert!(c.err().unwrap().contains("UnknownIssuer"));
}

#[test]
fn a_dialer_with_a_foreign_certificate_but_our_ca_is_refused_by_the_acceptor() {
    // It trusts our CA (so it accepts our certificate) but its own was
    // signed by another CA: only the acceptor's check stops it.
    let dir = tempfile::tempdir().unwrap();
    let ours = Authority::generate("cluster CA").unwrap();
    let theirs = Authority::generate("another CA").unwrap();
    let a = node(dir.path(), &ours, "a");
    let x = theirs
        .issue_into(&dir.path().join("x"), "x", &["127.0.0.1".into()])
        .unwrap();
    let ours_ca = dir.path().join("a").join("ca.pem");
    let mixed = TlsContext::load(&TlsFiles {
        ca: Some(ours_ca),
        ..files(&x)
    })
    .unwrap();
    let (s, c) = pair(&a, &mixed);
    let s = s.err().expect("the acceptor refuses");
    assert!(s.contains("UnknownIssuer"), "{s}");
    let c = dialer_refused(c);
    assert!(c.contains("alert"), "the dialer is told: {c}");
}

#[test]
fn a_shared_self_signed_certificate_works_without_a_ca_option() {
    // Galera's fallback: socket.ssl_ca unset means the certificate itself.
    let dir = tempfile::tempdir().unwrap();
    let ca = Authority::generate("shared").unwrap();
    ca.save(dir.path()).unwrap();
    let f = TlsFiles {
        cert: dir.path().join("ca.pem"),
        key: dir.path().join("ca-key.pem"),
        ca: None,
        cipher: None,
        password_file: None,
    };
    let ctx = TlsContext::load(&f).unwrap();
    let (s, c) = pair(&ctx, &ctx);
    let ((mut sr, mut sw), (mut cr, mut cw)) = (s.unwrap(), c.unwrap());
    cw.write_all(b"ping").unwrap();
    let mut b = [0u8; 4];
    sr.read_exact(&mut b).unwrap();
    sw.write_all(b"pong").unwrap();
    cr.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"pong");

    // A different self-signed certificate is not pinned.
    let other_dir = dir.path().join("other");
    Authority::generate("shared")
        .unwrap()
        .save(&other_dir)
        .unwrap();
    let other = TlsContext::load(&TlsFiles {
        cert: other_dir.join("ca.pem"),
        key: other_dir.join("ca-key.pem"),
        ..f
    })
    .unwrap();
    let (s, c) = pair(&ctx, &other);
    assert!(s.is_err() && c.is_err(), "same name, other key: refused");
}

#[test]
fn bad_files_are_named_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Authority::generate("cluster CA").unwrap();
    let f = files(&ca.issue_into(dir.path(), "a", &[]).unwrap());
    let missing = TlsFiles {
        cert: dir.path().join("nope.pem"),
        ..f.clone()
    };
    let e = TlsContext::load(&missing).unwrap_err();
    assert!(
        e.starts_with("socket.ssl_cert ") && e.contains("nope.pem"),
        "{e}"
    );

    let enc = dir.path().join("enc.pem");
    std::fs::write(
        &enc,
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n",
    )
    .unwrap();
    let e = TlsContext::load(&TlsFiles {
        key: enc,
        ..f.clone()
    })
    .unwrap_err();
    assert!(e.contains("encrypted"), "{e}");

    let wrong_key = dir.path().join("other-key.pem");
    let other = ca.issue("b", &[]).unwrap();
    std::fs::write(&wrong_key, other.key_pem).unwrap();
    let e = TlsContext::load(&TlsFiles {
        key: wrong_key,
        ..f.clone()
    })
    .unwrap_err();
    assert!(
        e.contains("socket.ssl_key"),
        "a key that does not match: {e}"
    );

    let not_pem = dir.path().join("garbage.pem");
    std::fs::write(&not_pem, b"\x00\x01 not a certificate").unwrap();
    let e = TlsContext::load(&TlsFiles {
        ca: Some(not_pem),
        ..f
    })
    .unwrap_err();
    assert!(e.contains("socket.ssl_ca"), "{e}");
}

#[test]
fn a_ca_saved_and_loaded_again_signs_certificates_its_file_verifies() {
    let dir = tempfile::tempdir().unwrap();
    Authority::generate("cluster CA")
        .unwrap()
        .save(dir.path())
        .unwrap();
    assert!(
        Authority::generate("again")
            .unwrap()
            .save(dir.path())
            .is_err(),
        "no overwrite"
    );
    let loaded = Authority::load(dir.path()).unwrap();
    // Node a's certificate from the loaded CA, node b's too, each checked
    // against the CA file written first.
    let a = loaded
        .issue_into(dir.path(), "a", &["127.0.0.1".into()])
        .unwrap();
    let b = loaded.issue_into(dir.path(), "b", &[]).unwrap();
    assert_eq!(a.ca, dir.path().join("ca.pem"));
    let (s, c) = pair(
        &TlsContext::load(&files(&a)).unwrap(),
        &TlsContext::load(&files(&b)).unwrap(),
    );
    s.unwrap();
    c.unwrap();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.path().join("ca-key.pem"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "the CA key is owner-only");
}

#[test]
fn the_wire_carries_no_plain_text() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Authority::generate("cluster CA").unwrap();
    let (a, b) = (node(dir.path(), &ca, "a"), node(dir.path(), &ca, "b"));
    let marker = b"ROW-DATA-MARKER-7f3a";

    // client -> tap -> server; the tap keeps every byte it relays.
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let tap = TcpListener::bind("127.0.0.1:0").unwrap();
    let (server_addr, tap_addr) = (server.local_addr().unwrap(), tap.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    thread::spawn(move || {
        let (mut from, _) = tap.accept().unwrap();
        let mut to = TcpStream::connect(server_addr).unwrap();
        let mut back_from = to.try_clone().unwrap();
        let mut back_to = from.try_clone().unwrap();
        thread::spawn(move || std::io::copy(&mut back_from, &mut back_to));
        let mut buf = [0u8; 4096];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    seen2.lock().unwrap().extend_from_slice(&buf[..n]);
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
    });
    let acceptor = thread::spawn(move || a.accept(server.accept().unwrap().0, T));
    let (_cr, mut cw) = b.connect(TcpStream::connect(tap_addr).unwrap(), T).unwrap();
    let (mut sr, _sw) = acceptor.join().unwrap().unwrap();
    let payload = marker.repeat(1000);
    cw.write_all(&payload).unwrap();
    let mut got = vec![0u8; payload.len()];
    sr.read_exact(&mut got).unwrap();
    assert_eq!(got, payload, "the server reads the plain text");
    let seen = seen.lock().unwrap();
    assert!(seen.len() >= payload.len(), "the tap saw the traffic");
    assert!(
        !seen.windows(marker.len()).any(|w| w == marker),
        "the marker is readable on the wire"
    );
}

/// MariaDB's test certificates include X.509 v1 ones (OpenSSL without
/// extensions), which webpki does not take; `scripts/setup.sh` installs them
/// with the mariadb-test package.
const V1_DIR: &str = "/usr/share/mysql/mysql-test/std_data/galera_certs";

fn v1_files(cert: &str, key: &str, ca: &Path) -> TlsFiles {
    let dir = Path::new(V1_DIR);
    TlsFiles {
        cert: dir.join(cert),
        key: dir.join(key),
        ca: Some(ca.to_path_buf()),
        cipher: None,
        password_file: None,
    }
}

/// `checker` refuses `presented`'s certificate for `why` both as the
/// acceptor and as the dialer.
fn refused_either_way(checker: &TlsContext, presented: &TlsContext, why: &str) {
    let (s, _c) = pair(checker, presented);
    let s = s
        .err()
        .expect("the acceptor refuses the dialer's certificate");
    assert!(s.contains(why), "{s}");
    let (_s, c) = pair(presented, checker);
    let c = dialer_refused(c);
    assert!(c.contains(why), "{c}");
}

/// Two nodes with v1 certificates of one CA (what `openssl x509 -req`
/// writes without `-extfile`, Galera's own recipe) load them, handshake in
/// both directions and carry data.
#[test]
fn v1_certificates_of_one_ca_talk_both_ways() {
    let root = Path::new(V1_DIR).join("galera.root.crt");
    let one = TlsContext::load(&v1_files("galera.1.crt", "galera.1.key", &root)).unwrap();
    let two = TlsContext::load(&v1_files("galera.2.crt", "galera.2.key", &root)).unwrap();
    for (server, client) in [(&one, &two), (&two, &one)] {
        let (s, c) = pair(server, client);
        let ((mut sr, _sw), (_cr, mut cw)) = (s.unwrap(), c.unwrap());
        cw.write_all(b"ping").unwrap();
        cw.flush().unwrap();
        let mut got = [0u8; 4];
        sr.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ping");
    }
}

/// A v1 certificate is checked as strictly as a v3 one: a node that
/// trusts another CA refuses it; one made by an impostor CA that copies
/// the real CA's name is refused for its signature; a key that is not the
/// certificate's does not load.
#[test]
fn a_v1_certificate_not_signed_by_our_ca_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(V1_DIR).join("galera.root.crt");
    let one = TlsContext::load(&v1_files("galera.1.crt", "galera.1.key", &root)).unwrap();

    // Trusts MariaDB's test CA, not galera.root: each side refuses the
    // other's v1 certificate when it is the one checking.
    let other_ca = Path::new(V1_DIR).join("../cacert.pem");
    let other = TlsContext::load(&v1_files("galera.2.crt", "galera.2.key", &other_ca)).unwrap();
    refused_either_way(&other, &one, "UnknownIssuer");

    // An impostor CA with galera.root's exact name signs a v1 certificate
    // (openssl x509 -req without -extfile writes v1).
    let openssl = |args: &str| {
        let ok = std::process::Command::new("openssl")
            .args(args.split(' '))
            .current_dir(dir.path())
            .stderr(std::process::Stdio::null())
            .status()
            .expect("openssl is installed with MariaDB")
            .success();
        assert!(ok, "openssl {args}");
    };
    openssl(
        "req -x509 -newkey rsa:2048 -nodes -keyout fake-root.key -out fake-root.crt \
         -subj /C=FI/ST=Helsinki/L=Helsinki/O=Galera/CN=galera.root -days 2",
    );
    openssl("req -new -newkey rsa:2048 -nodes -keyout fake.key -out fake.csr -subj /CN=fake");
    openssl(
        "x509 -req -in fake.csr -CA fake-root.crt -CAkey fake-root.key -CAcreateserial \
         -out fake.crt -days 2",
    );
    // It trusts the real root, so only the real nodes' checks can stop it.
    let fake = TlsContext::load(&TlsFiles {
        cert: dir.path().join("fake.crt"),
        key: dir.path().join("fake.key"),
        ca: Some(root.clone()),
        cipher: None,
        password_file: None,
    })
    .expect("openssl's v1 certificate loads");
    refused_either_way(&one, &fake, "BadSignature");

    let e = TlsContext::load(&v1_files("galera.1.crt", "galera.2.key", &root)).unwrap_err();
    assert!(e.contains("the key is not the certificate's"), "{e}");
}

/// A key encrypted by OpenSSL (`openssl pkcs8 -topk8 -v2 aes-256-cbc`, as
/// a DBA protects a Galera key) opens with `socket.ssl_password_file` and
/// the node talks TLS with it; without the file, or with a wrong
/// passphrase, loading fails and says which option to look at.
#[test]
fn an_encrypted_key_opens_with_the_password_file() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Authority::generate("cluster CA").unwrap();
    let plain = ca
        .issue_into(&dir.path().join("a"), "a", &["127.0.0.1".into()])
        .unwrap();
    let password = dir.path().join("password.txt");
    std::fs::write(&password, "s3cret passphrase\n").unwrap();
    let encrypted = dir.path().join("a-key.enc.pem");
    let made = std::process::Command::new("openssl")
        .args(["pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in"])
        .arg(&plain.key)
        .arg("-out")
        .arg(&encrypted)
        .arg("-passout")
        .arg(format!("file:{}", password.display()))
        .status()
        .expect("openssl is installed with MariaDB");
    assert!(made.success(), "openssl pkcs8 failed");
    assert!(std::fs::read_to_string(&encrypted)
        .unwrap()
        .contains("BEGIN ENCRYPTED PRIVATE KEY"));

    let with_key = |password_file: Option<&Path>| TlsFiles {
        key: encrypted.clone(),
        password_file: password_file.map(Path::to_path_buf),
        ..files(&plain)
    };
    let opened = TlsContext::load(&with_key(Some(&password))).unwrap();
    let peer = node(dir.path(), &ca, "b");
    let (s, c) = pair(&opened, &peer);
    assert!(
        s.is_ok() && c.is_ok(),
        "handshake: {:?} {:?}",
        s.err(),
        c.err()
    );

    let e = TlsContext::load(&with_key(None)).unwrap_err();
    assert!(e.contains("socket.ssl_password_file"), "{e}");
    let wrong = dir.path().join("wrong.txt");
    std::fs::write(&wrong, "not it\n").unwrap();
    let e = TlsContext::load(&with_key(Some(&wrong))).unwrap_err();
    assert!(e.contains("cannot decrypt"), "{e}");
}
