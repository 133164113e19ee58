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
    /// `socket.ssl_key`: its private key, PEM; encrypted (PKCS#8) only with
    /// `password_file`.
    pub key: PathBuf,
    /// `socket.ssl_ca`: the CA certificates peers must be signed by;
    /// Galera falls back to the node certificate itself (a self-signed
    /// certificate shared by all nodes), and so do we.
    pub ca: Option<PathBuf>,
    /// `socket.ssl_cipher`, OpenSSL syntax.
    pub cipher: Option<String>,
    /// `socket.ssl_password_file`: the passphrase of an encrypted key, on
    /// the file's first line (as Galera reads it).
    pub password_file: Option<PathBuf>,
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
        let key = if key_pem.windows(9).any(|w| w == b"ENCRYPTED") {
            self.decrypt_key(&key_pem)?
        } else {
            PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
                format!(
                    "socket.ssl_key {}: no private key in it ({e})",
                    self.key.display()
                )
            })?
        };
        Ok(Loaded { chain, key, ca })
    }
}

impl TlsFiles {
    /// An encrypted key, opened with the passphrase in the password file.
    /// PKCS#8 (`BEGIN ENCRYPTED PRIVATE KEY`, PBES2 with PBKDF2 or scrypt
    /// and AES-CBC) is what OpenSSL writes today; the older PEM encryption
    /// (`Proc-Type: 4,ENCRYPTED`) is refused with the command that converts
    /// it.
    fn decrypt_key(&self, key_pem: &[u8]) -> Result<PrivateKeyDer<'static>, String> {
        let key = self.key.display();
        let Some(password_file) = &self.password_file else {
            return Err(format!(
                "socket.ssl_key {key}: the key is encrypted; name the file that holds its \
                 passphrase in socket.ssl_password_file"
            ));
        };
        let text = String::from_utf8_lossy(key_pem);
        if !text.contains("BEGIN ENCRYPTED PRIVATE KEY") {
            return Err(format!(
                "socket.ssl_key {key}: the key is encrypted in the old PEM way \
                 (Proc-Type: 4,ENCRYPTED), which Lockstep does not read; convert it with \
                 `openssl pkcs8 -topk8 -v2 aes-256-cbc -in KEY -out NEW_KEY`"
            ));
        }
        let secret = read_bounded(password_file, "socket.ssl_password_file")?;
        let first_line = secret.split(|b| *b == b'\n').next().unwrap_or_default();
        let passphrase = first_line.strip_suffix(b"\r").unwrap_or(first_line);
        use pkcs8::der::pem::PemLabel;
        let (label, der) = pkcs8::der::pem::decode_vec(text.trim().as_bytes())
            .map_err(|e| format!("socket.ssl_key {key}: not a PEM key ({e})"))?;
        if label != pkcs8::EncryptedPrivateKeyInfo::PEM_LABEL {
            return Err(format!("socket.ssl_key {key}: a PEM {label}, not a key"));
        }
        let info = pkcs8::EncryptedPrivateKeyInfo::try_from(der.as_slice())
            .map_err(|e| format!("socket.ssl_key {key}: not an encrypted PKCS#8 key ({e})"))?;
        let plain = info.decrypt(passphrase).map_err(|e| {
            format!(
                "socket.ssl_key {key}: cannot decrypt it with the passphrase in \
                 socket.ssl_password_file {} ({e})",
                password_file.display()
            )
        })?;
        Ok(PrivateKeyDer::Pkcs8(plain.as_bytes().to_vec().into()))
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
