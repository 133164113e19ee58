//! How each end checks the other's certificate: its chain must lead to the
//! cluster's CA (`socket.ssl_ca`), or it must be exactly one of the
//! certificates in that file (a self-signed certificate shared by all
//! nodes, Galera's simplest set-up, where `socket.ssl_ca` defaults to the
//! certificate itself). The name in it is not compared with the address
//! dialed (see the module docs of `tls`).

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, Error, RootCertStore,
    SignatureScheme,
};
use std::sync::Arc;

/// The certificates of the CA file, compared byte for byte with what a
/// peer presents: the handshake's signature proves the peer holds the key.
#[derive(Debug)]
struct Pinned(Vec<CertificateDer<'static>>);

impl Pinned {
    fn holds(&self, end_entity: &CertificateDer<'_>, intermediates: &[CertificateDer<'_>]) -> bool {
        intermediates.is_empty() && self.0.iter().any(|c| c.as_ref() == end_entity.as_ref())
    }
}

/// The dialing side's check of the acceptor.
#[derive(Debug)]
pub(super) struct ServerCheck {
    webpki: Arc<WebPkiServerVerifier>,
    pinned: Pinned,
}

impl ServerCheck {
    pub fn new(
        roots: Arc<RootCertStore>,
        anchors: Vec<CertificateDer<'static>>,
        provider: Arc<CryptoProvider>,
    ) -> Result<Self, String> {
        let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(ServerCheck {
            webpki,
            pinned: Pinned(anchors),
        })
    }
}

impl ServerCertVerifier for ServerCheck {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        if self.pinned.holds(end_entity, intermediates) {
            return Ok(ServerCertVerified::assertion());
        }
        // webpki checks the chain (signature, validity, usage) before the
        // name, so a name mismatch means the chain itself was accepted.
        match self.webpki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// The accepting side's check of the dialer: a certificate is required.
#[derive(Debug)]
pub(super) struct ClientCheck {
    webpki: Arc<dyn ClientCertVerifier>,
    pinned: Pinned,
}

impl ClientCheck {
    pub fn new(
        roots: Arc<RootCertStore>,
        anchors: Vec<CertificateDer<'static>>,
        provider: Arc<CryptoProvider>,
    ) -> Result<Self, String> {
        let webpki = WebPkiClientVerifier::builder_with_provider(roots, provider)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(ClientCheck {
            webpki,
            pinned: Pinned(anchors),
        })
    }
}

impl ClientCertVerifier for ClientCheck {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.webpki.root_hint_subjects()
    }

    fn client_auth_mandatory(&self) -> bool {
        true
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        if self.pinned.holds(end_entity, intermediates) {
            return Ok(ClientCertVerified::assertion());
        }
        self.webpki
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}
