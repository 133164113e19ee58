//! A small certificate authority for a cluster: one CA, one certificate
//! per node, ECDSA P-256, written as PEM files Galera's options can name.
//! `lockstep up` makes one for every local cluster; `lockstep cert` makes
//! them for real deployments.
//!
//! Node certificates carry both TLS usages (a node dials and accepts) and
//! the node's addresses as subject alternative names, so they also work
//! with tools that do check names. Lockstep itself checks only the CA
//! signature (see `tls`).

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// File names inside a CA directory.
pub const CA_CERT: &str = "ca.pem";
pub const CA_KEY: &str = "ca-key.pem";

/// How long generated certificates are valid.
const CA_VALIDITY: Duration = Duration::from_secs(20 * 365 * 24 * 3600);
const NODE_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// Clocks of a cluster's machines may disagree a little.
const BACKDATE: Duration = Duration::from_secs(24 * 3600);

/// A CA that can sign node certificates.
pub struct Authority {
    cert: rcgen::Certificate,
    key: KeyPair,
}

/// A node's certificate and key, PEM.
pub struct NodeCert {
    pub cert_pem: String,
    pub key_pem: String,
}

/// The files of one node's TLS material, as the options name them.
#[derive(Debug, Clone)]
pub struct NodeFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
}

impl NodeFiles {
    /// `socket.ssl_*` options for these files.
    pub fn provider_options(&self) -> String {
        format!(
            "socket.ssl=YES; socket.ssl_cert={}; socket.ssl_key={}; socket.ssl_ca={}",
            self.cert.display(),
            self.key.display(),
            self.ca.display()
        )
    }
}

fn validity(p: &mut CertificateParams, valid: Duration) {
    let now = SystemTime::now();
    p.not_before = (now - BACKDATE).into();
    p.not_after = (now + valid).into();
}

fn err(what: &str) -> impl Fn(rcgen::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

impl Authority {
    /// A new CA named `name`.
    pub fn generate(name: &str) -> Result<Authority, String> {
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        validity(&mut params, CA_VALIDITY);
        let key = KeyPair::generate().map_err(err("generating the CA key"))?;
        let cert = params
            .self_signed(&key)
            .map_err(err("signing the CA certificate"))?;
        Ok(Authority { cert, key })
    }

    /// The CA in `dir` (`ca.pem`, `ca-key.pem`).
    pub fn load(dir: &Path) -> Result<Authority, String> {
        let read = |name: &str| {
            let p = dir.join(name);
            std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))
        };
        let (cert_pem, key_pem) = (read(CA_CERT)?, read(CA_KEY)?);
        let key = KeyPair::from_pem(&key_pem).map_err(err(CA_KEY))?;
        let params = CertificateParams::from_ca_cert_pem(&cert_pem).map_err(err(CA_CERT))?;
        // Signing needs an rcgen certificate; re-signing the same subject
        // with the same key gives an issuer that verifies like the file.
        let cert = params.self_signed(&key).map_err(err("loading the CA"))?;
        Ok(Authority { cert, key })
    }

    /// Writes `ca.pem` and `ca-key.pem` (owner-only) into `dir`; refuses
    /// to overwrite an existing CA.
    pub fn save(&self, dir: &Path) -> Result<(), String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let cert = dir.join(CA_CERT);
        if cert.exists() {
            return Err(format!("{} exists; not overwriting a CA", cert.display()));
        }
        write_private(&dir.join(CA_KEY), &self.key.serialize_pem())?;
        write_public(&cert, &self.cert.pem())
    }

    pub fn cert_pem(&self) -> String {
        self.cert.pem()
    }

    /// A certificate for node `name`, valid for `hosts` (IP addresses or
    /// DNS names) as subject alternative names.
    pub fn issue(&self, name: &str, hosts: &[String]) -> Result<NodeCert, String> {
        let mut params = CertificateParams::new(hosts.to_vec())
            .map_err(err("node certificate subject alternative names"))?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        validity(&mut params, NODE_VALIDITY);
        let key = KeyPair::generate().map_err(err("generating a node key"))?;
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .map_err(err("signing a node certificate"))?;
        Ok(NodeCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// Issues a certificate for `name` and writes `<name>.pem` and
    /// `<name>-key.pem` (owner-only) into `dir`, next to a copy of the CA
    /// certificate if `dir` has none.
    pub fn issue_into(
        &self,
        dir: &Path,
        name: &str,
        hosts: &[String],
    ) -> Result<NodeFiles, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let issued = self.issue(name, hosts)?;
        let files = NodeFiles {
            cert: dir.join(format!("{name}.pem")),
            key: dir.join(format!("{name}-key.pem")),
            ca: dir.join(CA_CERT),
        };
        write_private(&files.key, &issued.key_pem)?;
        write_public(&files.cert, &issued.cert_pem)?;
        if !files.ca.exists() {
            write_public(&files.ca, &self.cert.pem())?;
        }
        Ok(files)
    }
}

fn write_public(path: &Path, pem: &str) -> Result<(), String> {
    std::fs::write(path, pem).map_err(|e| format!("{}: {e}", path.display()))
}

fn write_private(path: &Path, pem: &str) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    f.write_all(pem.as_bytes())
        .map_err(|e| format!("{}: {e}", path.display()))
}
