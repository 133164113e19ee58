//! TLS for peer connections, configured with Galera's option names.
//!
//! Both ends present a certificate and both check that the other's is
//! signed by the cluster's CA (`socket.ssl_ca`), or is one of the
//! certificates in that file: that is the whole authorisation, as with
//! Galera. Host names in certificates are not
//! compared with addresses, also as with Galera: clusters often share one
//! node certificate, and peers are dialed by IP address.
//!
//! rustls chooses among its own AEAD suites; `socket.ssl_cipher` narrows
//! the TLS 1.2 suites as OpenSSL's cipher list does (see [`ciphers`]).

mod ciphers;
mod files;
mod stream;
mod v1;
mod verify;

/// The body of the `peer_certificate` fuzz target: a peer's certificate
/// bytes through the v1 checks (webpki, which handles v3, has its own
/// fuzzing). Any bytes must end in an answer, never a panic.
#[cfg(feature = "fuzzing")]
pub fn fuzz_peer_certificate(data: &[u8]) {
    use rustls::pki_types::{CertificateDer, UnixTime};
    let cert = CertificateDer::from(data);
    // The bytes as their own CA too, so the anchor's parse runs on them.
    let anchors = [CertificateDer::from(data.to_vec())];
    let now = UnixTime::since_unix_epoch(std::time::Duration::from_secs(1_800_000_000));
    let checked = v1::verify_peer(&cert, &[], &anchors, now);
    assert_eq!(checked.is_some(), v1::public_key(data).is_some());
}

pub use files::TlsFiles;
pub use stream::{TlsReader, TlsWriter};

use crate::Refused;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::ServerName;
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

/// Everything needed to open TLS connections in both directions, loaded
/// once from the files named by the options (and again on
/// `socket.ssl_reload`).
#[derive(Clone)]
pub struct TlsContext {
    client: Arc<ClientConfig>,
    server: Arc<ServerConfig>,
    /// Which TLS 1.2 suites `socket.ssl_cipher` left, for the log.
    pub tls12_suites: Vec<&'static str>,
    /// SHA-256 of this node's certificate (the first of its chain).
    pub own_fingerprint: crate::identity::CertFingerprint,
}

impl std::fmt::Debug for TlsContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsContext")
            .field("tls12_suites", &self.tls12_suites)
            .finish_non_exhaustive()
    }
}

impl TlsContext {
    /// Reads and checks the certificate, key and CA files. Every error
    /// names the file and the option, for the server's error log.
    pub fn load(files: &TlsFiles) -> Result<TlsContext, String> {
        let loaded = files.read()?;
        let (provider, tls12_suites) = ciphers::provider(files.cipher.as_deref())?;
        let provider = Arc::new(provider);
        let ca_err = |e: String| format!("socket.ssl_ca {}: {e}", files.ca_path().display());
        let mut roots = RootCertStore::empty();
        for ca in &loaded.ca {
            roots.add(ca.clone()).map_err(|e| ca_err(e.to_string()))?;
        }
        let roots = Arc::new(roots);
        let own_fingerprint = loaded
            .chain
            .first()
            .map(|der| crate::identity::fingerprint(der.as_ref()))
            .ok_or_else(|| format!("socket.ssl_cert {}: no certificate", files.cert.display()))?;
        let certified = certified_key(files, loaded.chain, loaded.key, &provider)?;

        let client_check =
            verify::ClientCheck::new(roots.clone(), loaded.ca.clone(), provider.clone())
                .map_err(ca_err)?;
        let mut server = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS setup: {e}"))?
            .with_client_cert_verifier(Arc::new(client_check))
            .with_cert_resolver(Arc::new(SingleCertAndKey::from(certified.clone())));
        // Peers reconnect rarely and never resume: no tickets to keep.
        server.send_tls13_tickets = 0;

        let server_check =
            verify::ServerCheck::new(roots, loaded.ca, provider.clone()).map_err(ca_err)?;
        let mut client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS setup: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(server_check))
            .with_client_cert_resolver(Arc::new(SingleCertAndKey::from(certified)));
        // The peer's name is not checked (module docs); do not send it.
        client.enable_sni = false;
        client.resumption = rustls::client::Resumption::disabled();
        Ok(TlsContext {
            client: Arc::new(client),
            server: Arc::new(server),
            tls12_suites,
            own_fingerprint,
        })
    }

    /// The dialing side: handshakes over `tcp` within `timeout`.
    pub fn connect(
        &self,
        tcp: TcpStream,
        timeout: Duration,
    ) -> Result<(TlsReader, TlsWriter), Refused> {
        // Not checked (module docs); rustls wants some name.
        let name = ServerName::try_from("lockstep-peer").expect("a valid DNS name");
        let conn = ClientConnection::new(self.client.clone(), name)
            .map_err(|e| Refused::broken(format!("TLS setup: {e}")))?;
        stream::handshake(conn.into(), tcp, timeout)
    }

    /// The accepting side: handshakes over `tcp` within `timeout`.
    pub fn accept(
        &self,
        tcp: TcpStream,
        timeout: Duration,
    ) -> Result<(TlsReader, TlsWriter), Refused> {
        let conn = ServerConnection::new(self.server.clone())
            .map_err(|e| Refused::broken(format!("TLS setup: {e}")))?;
        stream::handshake(conn.into(), tcp, timeout)
    }
}

/// This node's certificate chain and key, checked to belong together.
/// rustls's check parses the certificate with webpki, which knows X.509
/// v3 only; for an OpenSSL-made v1 certificate (MariaDB's
/// `std_data/galera_certs`, old recipes without extensions) the public
/// keys are compared here instead (`v1`).
fn certified_key(
    files: &TlsFiles,
    chain: Vec<rustls::pki_types::CertificateDer<'static>>,
    key: rustls::pki_types::PrivateKeyDer<'static>,
    provider: &CryptoProvider,
) -> Result<Arc<CertifiedKey>, String> {
    let both = || {
        format!(
            "socket.ssl_cert {} and socket.ssl_key {}",
            files.cert.display(),
            files.key.display()
        )
    };
    let signing = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| format!("socket.ssl_key {}: {e}", files.key.display()))?;
    let certified = CertifiedKey::new(chain, signing);
    let mismatch =
        |e: &dyn std::fmt::Debug| format!("{}: the key is not the certificate's ({e:?})", both());
    let v1_key = || certified.cert.first().and_then(|c| v1::public_key(c));
    match certified.keys_match() {
        Ok(()) => Ok(Arc::new(certified)),
        Err(rustls::Error::InconsistentKeys(e)) => Err(mismatch(&e)),
        Err(e) => match v1_key() {
            Some(cert_key) => match certified.key.public_key() {
                Some(key) if key == cert_key => Ok(Arc::new(certified)),
                Some(_) => Err(mismatch(&"the public keys differ")),
                None => Err(mismatch(&"the key does not show its public half")),
            },
            None => Err(format!("socket.ssl_cert {}: {e}", files.cert.display())),
        },
    }
}

/// The crypto every config uses: ring, so the provider needs neither
/// OpenSSL nor a C++ toolchain beyond what `cc` builds.
fn base_provider() -> CryptoProvider {
    rustls::crypto::ring::default_provider()
}
