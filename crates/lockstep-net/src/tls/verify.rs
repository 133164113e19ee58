//! How each end checks the other's certificate: its chain must lead to the
//! cluster's CA (`socket.ssl_ca`), or it must be exactly one of the
//! certificates in that file (a self-signed certificate shared by all
//! nodes, Galera's simplest set-up, where `socket.ssl_ca` defaults to the
//! certificate itself). The name in it is not compared with the address
//! dialed (see the module docs of `tls`). A v1 end-entity certificate,
//! which webpki refuses, is checked by [`super::v1`].

use super::v1;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, Error, RootCertStore,
    SignatureScheme,
};
use std::sync::Arc;

/// The certificates of the CA file, compared byte for byte with what a
/// peer presents (the handshake's signature proves the peer holds the
/// key), and the signers of v1 certificates.
#[derive(Debug)]
struct Pinned {
    anchors: Vec<CertificateDer<'static>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl Pinned {
    fn new(anchors: Vec<CertificateDer<'static>>, provider: &CryptoProvider) -> Self {
        Pinned {
            anchors,
            algorithms: provider.signature_verification_algorithms,
        }
    }

    fn holds(&self, end_entity: &CertificateDer<'_>, intermediates: &[CertificateDer<'_>]) -> bool {
        intermediates.is_empty()
            && self
                .anchors
                .iter()
                .any(|c| c.as_ref() == end_entity.as_ref())
    }

    /// webpki refused `end_entity`: a v1 certificate gets its own check,
    /// anything else keeps webpki's error.
    fn retry_v1(
        &self,
        refused: Error,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<(), Error> {
        v1::verify_peer(end_entity, intermediates, &self.anchors, now).unwrap_or(Err(refused))
    }

    /// A handshake signature: by webpki for v3 certificates, by
    /// [`v1::verify_handshake`] for v1 ones.
    fn signed(
        &self,
        webpki: Result<HandshakeSignatureValid, Error>,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
        tls13: bool,
    ) -> Result<HandshakeSignatureValid, Error> {
        let (scheme, signature) = (dss.scheme, dss.signature());
        match webpki {
            Err(e) => {
                v1::verify_handshake(message, cert, scheme, signature, &self.algorithms, tls13)
                    .unwrap_or(Err(e))
            }
            ok => ok,
        }
    }
}

/// The handshake-signature methods, the same in both verifier traits
/// (rustls declares them in each): webpki's check, then [`Pinned::signed`]
/// for a v1 certificate. The implementing type has `webpki` and `pinned`.
macro_rules! handshake_signatures {
    () => {
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, Error> {
            let webpki = self.webpki.verify_tls12_signature(message, cert, dss);
            self.pinned.signed(webpki, message, cert, dss, false)
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, Error> {
            let webpki = self.webpki.verify_tls13_signature(message, cert, dss);
            self.pinned.signed(webpki, message, cert, dss, true)
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.webpki.supported_verify_schemes()
        }
    };
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
        let pinned = Pinned::new(anchors, &provider);
        let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(ServerCheck { webpki, pinned })
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
            Err(e) => self
                .pinned
                .retry_v1(e, end_entity, intermediates, now)
                .map(|()| ServerCertVerified::assertion()),
            ok => ok,
        }
    }

    handshake_signatures!();
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
        let pinned = Pinned::new(anchors, &provider);
        let webpki = WebPkiClientVerifier::builder_with_provider(roots, provider)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(ClientCheck { webpki, pinned })
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
        match self
            .webpki
            .verify_client_cert(end_entity, intermediates, now)
        {
            Err(e) => self
                .pinned
                .retry_v1(e, end_entity, intermediates, now)
                .map(|()| ClientCertVerified::assertion()),
            ok => ok,
        }
    }

    handshake_signatures!();
}
