//! The PEM files behind `socket.ssl_cert`, `socket.ssl_key` and
//! `socket.ssl_ca`, read with bounds and errors that name the option.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};

/// A PEM file bigger than this is not a certificate or a key.
const MAX_PEM_BYTES: u64 = 1 << 20;

/// Where the node's TLS material is, as the options name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// `socket.ssl_cert`: this node's certificate (chain), PEM.
    pub cert: PathBuf,
    /// `socket.ssl_key`: its private key, PEM, not encrypted.
    pub key: PathBuf,
    /// `socket.ssl_ca`: the CA certificates peers must be signed by;
    /// Galera falls back to the node certificate itself (a self-signed
    /// certificate shared by all nodes), and so do we.
    pub ca: Option<PathBuf>,
    /// `socket.ssl_cipher`, OpenSSL syntax.
    pub cipher: Option<String>,
}

pub(super) struct Loaded {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
    pub ca: Vec<CertificateDer<'static>>,
}

impl TlsFiles {
    pub fn ca_path(&self) -> &Path {
        self.ca.as_deref().unwrap_or(&self.cert)
    }

    pub(super) fn read(&self) -> Result<Loaded, String> {
        let chain = certificates(&self.cert, "socket.ssl_cert")?;
        let ca = certificates(self.ca_path(), "socket.ssl_ca")?;
        let key_pem = read_bounded(&self.key, "socket.ssl_key")?;
        if key_pem.windows(9).any(|w| w == b"ENCRYPTED") {
            return Err(format!(
                "socket.ssl_key {}: the key is encrypted; Lockstep reads unencrypted keys \
                 only and socket.ssl_password_file has no effect (decrypt the key with \
                 `openssl pkey -in KEY -out PLAIN_KEY` and protect the file with its \
                 permissions)",
                self.key.display(),
            ));
        }
        let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
            format!(
                "socket.ssl_key {}: no private key in it ({e})",
                self.key.display()
            )
        })?;
        Ok(Loaded { chain, key, ca })
    }
}

fn read_bounded(path: &Path, option: &str) -> Result<Vec<u8>, String> {
    let meta = std::fs::metadata(path)
        .map_err(|e| format!("{option} {}: cannot read it: {e}", path.display()))?;
    if meta.len() > MAX_PEM_BYTES {
        return Err(format!(
            "{option} {}: {} bytes is too big for a PEM file (at most {MAX_PEM_BYTES})",
            path.display(),
            meta.len()
        ));
    }
    std::fs::read(path).map_err(|e| format!("{option} {}: cannot read it: {e}", path.display()))
}

fn certificates(path: &Path, option: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read_bounded(path, option)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{option} {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{option} {}: no certificate in it", path.display()));
    }
    Ok(certs)
}
