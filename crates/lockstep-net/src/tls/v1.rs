//! X.509 v1 end-entity certificates, which webpki refuses.
//!
//! `openssl x509 -req` without `-extfile` writes a v1 certificate: no
//! extensions, so no key usage and no basic constraints. Galera's own
//! recipes and MariaDB's `std_data/galera_certs` make them, and OpenSSL
//! (Galera's TLS) takes them, so a drop-in replacement must too. webpki
//! parses v3 end-entity certificates only (it does take v1 CA
//! certificates as trust anchors), so for a v1 certificate this module does
//! the checks itself, with x509-parser and ring:
//! - the certificate is signed directly by one of the CA file's
//!   certificates (no intermediates: a v1 certificate cannot say it is a
//!   CA, so none may sit in the middle of a chain);
//! - it is within its validity period;
//! - the handshake is signed with its key (webpki's raw-key check).
//!
//! Everything else — a v3 certificate, any chain with intermediates — goes
//! through webpki as before; this path is taken only when webpki has
//! already refused the certificate and the certificate says it is v1.

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, SubjectPublicKeyInfoDer, UnixTime};
use rustls::{CertificateError, Error, PeerMisbehaved, SignatureScheme};
use x509_parser::certificate::X509Certificate;
use x509_parser::prelude::{FromDer, X509Version};

/// `der` parsed, when it is exactly one well-formed v1 certificate.
fn parse_v1(der: &[u8]) -> Option<X509Certificate<'_>> {
    match X509Certificate::from_der(der) {
        Ok((rest, cert)) if rest.is_empty() && cert.version() == X509Version::V1 => Some(cert),
        _ => None,
    }
}

/// The public key of a v1 certificate, to match it with the private key;
/// `None` for anything else.
pub(super) fn public_key(der: &[u8]) -> Option<SubjectPublicKeyInfoDer<'static>> {
    parse_v1(der).map(|c| SubjectPublicKeyInfoDer::from(c.public_key().raw.to_vec()))
}

fn refused(e: CertificateError) -> Error {
    Error::InvalidCertificate(e)
}

/// Checks a peer's v1 certificate: signed by one of `anchors`, valid at
/// `now`, sent without intermediates. `None` when `end_entity` is not a v1
/// certificate (webpki's answer stands).
pub(super) fn verify_peer(
    end_entity: &CertificateDer<'_>,
    intermediates: &[CertificateDer<'_>],
    anchors: &[CertificateDer<'static>],
    now: UnixTime,
) -> Option<Result<(), Error>> {
    parse_v1(end_entity).map(|cert| check_peer(&cert, intermediates, anchors, now))
}

fn check_peer(
    cert: &X509Certificate<'_>,
    intermediates: &[CertificateDer<'_>],
    anchors: &[CertificateDer<'static>],
    now: UnixTime,
) -> Result<(), Error> {
    if !intermediates.is_empty() {
        // A v1 certificate can only be checked against the CA file directly.
        return Err(refused(CertificateError::UnknownIssuer));
    }
    let secs = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
    let validity = cert.validity();
    if secs < validity.not_before.timestamp() {
        return Err(refused(CertificateError::NotValidYet));
    }
    if secs > validity.not_after.timestamp() {
        return Err(refused(CertificateError::Expired));
    }
    let issuer = cert.issuer().as_raw();
    let mut named = false;
    for anchor in anchors {
        let Ok((_, ca)) = X509Certificate::from_der(anchor) else {
            continue;
        };
        if ca.subject().as_raw() != issuer {
            continue;
        }
        named = true;
        if cert.verify_signature(Some(ca.public_key())).is_ok() {
            return Ok(());
        }
    }
    Err(refused(if named {
        CertificateError::BadSignature
    } else {
        CertificateError::UnknownIssuer
    }))
}

/// The schemes TLS 1.3 allows in a handshake signature (RFC 8446,
/// 4.2.3): no PKCS#1 v1.5, no SHA-1, ECDSA tied to its curve.
fn tls13_scheme(scheme: SignatureScheme) -> bool {
    use SignatureScheme::*;
    matches!(
        scheme,
        ECDSA_NISTP256_SHA256
            | ECDSA_NISTP384_SHA384
            | ECDSA_NISTP521_SHA512
            | RSA_PSS_SHA256
            | RSA_PSS_SHA384
            | RSA_PSS_SHA512
            | ED25519
            | ED448
    )
}

/// Checks a handshake signature (`scheme`, `signature` of a
/// `DigitallySignedStruct`) made with a v1 certificate's key, as rustls
/// checks one made with a v3 certificate's: TLS 1.3 allows only its own
/// schemes and takes the first algorithm of the scheme; TLS 1.2 names no
/// curve or key type in the scheme, so any of its algorithms may match.
/// `None` when `cert` is not a v1 certificate (webpki's answer stands).
pub(super) fn verify_handshake(
    message: &[u8],
    cert: &CertificateDer<'_>,
    scheme: SignatureScheme,
    signature: &[u8],
    algorithms: &WebPkiSupportedAlgorithms,
    tls13: bool,
) -> Option<Result<HandshakeSignatureValid, Error>> {
    let spki = public_key(cert)?;
    Some(check_handshake(
        message, &spki, scheme, signature, algorithms, tls13,
    ))
}

fn check_handshake(
    message: &[u8],
    spki: &SubjectPublicKeyInfoDer<'_>,
    scheme: SignatureScheme,
    signature: &[u8],
    algorithms: &WebPkiSupportedAlgorithms,
    tls13: bool,
) -> Result<HandshakeSignatureValid, Error> {
    let unadvertised = || Error::from(PeerMisbehaved::SignedHandshakeWithUnadvertisedSigScheme);
    if tls13 && !tls13_scheme(scheme) {
        return Err(unadvertised());
    }
    let candidates = algorithms
        .mapping
        .iter()
        .find(|(s, _)| *s == scheme)
        .map(|(_, algs)| *algs)
        .ok_or_else(unadvertised)?;
    let candidates = if tls13 {
        &candidates[..candidates.len().min(1)]
    } else {
        candidates
    };
    let key = webpki::RawPublicKeyEntity::try_from(spki)
        .map_err(|_| refused(CertificateError::BadEncoding))?;
    if candidates
        .iter()
        .any(|alg| key.verify_signature(*alg, message, signature).is_ok())
    {
        Ok(HandshakeSignatureValid::assertion())
    } else {
        Err(refused(CertificateError::BadSignature))
    }
}

#[cfg(test)]
mod tests {
    //! The parts the handshake tests cannot reach: the validity period and
    //! TLS 1.2 signatures (rustls peers agree on TLS 1.3). They read
    //! MariaDB's v1 test certificates, installed by `scripts/setup.sh`.
    use super::*;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::PrivateKeyDer;
    use std::time::Duration;

    const DIR: &str = "/usr/share/mysql/mysql-test/std_data/galera_certs";

    fn cert(name: &str) -> CertificateDer<'static> {
        CertificateDer::from_pem_file(format!("{DIR}/{name}")).unwrap()
    }

    fn at(unix: u64) -> UnixTime {
        UnixTime::since_unix_epoch(Duration::from_secs(unix))
    }

    #[test]
    fn a_v1_certificate_is_valid_only_within_its_dates() {
        // galera.1.crt: 2021-02-04 .. 2030-11-04.
        let (one, root) = (cert("galera.1.crt"), cert("galera.root.crt"));
        assert!(public_key(&one).is_some() && public_key(&root).is_none());
        assert_eq!(verify_peer(&root, &[], &[], at(1_800_000_000)), None, "v3");
        let anchors = [root];
        assert_eq!(
            verify_peer(&one, &[], &anchors, at(1_800_000_000)),
            Some(Ok(()))
        );
        assert_eq!(
            verify_peer(&one, &[], &anchors, at(1_500_000_000)),
            Some(Err(refused(CertificateError::NotValidYet)))
        );
        assert_eq!(
            verify_peer(&one, &[], &anchors, at(2_000_000_000)),
            Some(Err(refused(CertificateError::Expired)))
        );
        // Sent with an intermediate, it is not taken even when the
        // intermediate is the CA itself.
        let root = anchors[0].clone();
        assert_eq!(
            verify_peer(&one, &[root], &anchors, at(1_800_000_000)),
            Some(Err(refused(CertificateError::UnknownIssuer)))
        );
    }

    #[test]
    fn a_handshake_signature_is_checked_with_the_v1_certificates_key() {
        let provider = rustls::crypto::ring::default_provider();
        let key = PrivateKeyDer::from_pem_file(format!("{DIR}/galera.1.key")).unwrap();
        let signer = provider
            .key_provider
            .load_private_key(key)
            .unwrap()
            .choose_scheme(&[SignatureScheme::RSA_PKCS1_SHA256])
            .unwrap();
        let message = b"the handshake transcript";
        let scheme = SignatureScheme::RSA_PKCS1_SHA256;
        let sig = signer.sign(message).unwrap();
        let algs = &provider.signature_verification_algorithms;
        let (one, two) = (cert("galera.1.crt"), cert("galera.2.crt"));
        let check = |msg: &[u8], cert, tls13| {
            verify_handshake(msg, cert, scheme, &sig, algs, tls13).expect("a v1 certificate")
        };
        assert!(check(message, &one, false).is_ok());
        // Another message, another certificate's key: refused.
        assert!(check(b"something else", &one, false).is_err());
        assert!(check(message, &two, false).is_err());
        // PKCS#1 v1.5 is not a TLS 1.3 handshake scheme.
        assert!(check(message, &one, true).is_err());
    }
}
