//! `socket.ssl_cipher`: Galera hands it to OpenSSL's cipher list, which
//! governs TLS 1.2 and below; TLS 1.3 suites are always on. We do the
//! same with rustls's suites: the list picks among the TLS 1.2 suites by
//! their OpenSSL names, and TLS 1.3 stays on whatever it says. A list
//! that names no suite rustls has (`AES256-SHA`, as in MariaDB's
//! `galera_ssl_cipher` test) leaves TLS 1.3 only, as OpenSSL 3 does when
//! the list matches nothing it will negotiate.

use super::base_provider;
use rustls::crypto::CryptoProvider;
use rustls::{CipherSuite, ProtocolVersion};

/// OpenSSL's names for the TLS 1.2 suites rustls offers.
const TLS12_NAMES: &[(&str, CipherSuite)] = &[
    (
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "ECDHE-RSA-AES128-GCM-SHA256",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "ECDHE-RSA-AES256-GCM-SHA384",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "ECDHE-RSA-CHACHA20-POLY1305",
        CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
];

/// Words of an OpenSSL cipher list that keep every suite.
const EVERYTHING: &[&str] = &["ALL", "DEFAULT", "HIGH", "ECDHE", "AESGCM", "EECDH"];

/// The crypto provider for `socket.ssl_cipher` (none: every suite), and
/// the OpenSSL names of the TLS 1.2 suites it kept.
pub(super) fn provider(list: Option<&str>) -> Result<(CryptoProvider, Vec<&'static str>), String> {
    let mut p = base_provider();
    let keep = tls12_kept(list);
    p.cipher_suites
        .retain(|s| s.version().version != ProtocolVersion::TLSv1_2 || keep.contains(&s.suite()));
    if p.cipher_suites.is_empty() {
        return Err(format!("socket.ssl_cipher={list:?} leaves no cipher suite"));
    }
    let names = TLS12_NAMES
        .iter()
        .filter(|(_, s)| keep.contains(s))
        .map(|(n, _)| *n)
        .collect();
    Ok((p, names))
}

fn tls12_kept(list: Option<&str>) -> Vec<CipherSuite> {
    let Some(list) = list.map(str::trim).filter(|l| !l.is_empty()) else {
        return TLS12_NAMES.iter().map(|(_, s)| *s).collect();
    };
    let words: Vec<&str> = list
        .split([':', ',', ' '])
        .map(str::trim)
        // `!X`, `-X` and `+X` remove or reorder: they never add a suite.
        .filter(|w| !w.is_empty() && !w.starts_with(['!', '-', '+']))
        .collect();
    if words
        .iter()
        .any(|w| EVERYTHING.contains(&w.to_ascii_uppercase().as_str()))
    {
        return TLS12_NAMES.iter().map(|(_, s)| *s).collect();
    }
    TLS12_NAMES
        .iter()
        .filter(|(n, _)| words.iter().any(|w| w.eq_ignore_ascii_case(n)))
        .map(|(_, s)| *s)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tls13_count(p: &CryptoProvider) -> usize {
        p.cipher_suites
            .iter()
            .filter(|s| s.version().version == ProtocolVersion::TLSv1_3)
            .count()
    }

    #[test]
    fn no_list_keeps_every_suite() {
        let (p, names) = provider(None).unwrap();
        assert_eq!(p.cipher_suites.len(), base_provider().cipher_suites.len());
        assert_eq!(names.len(), TLS12_NAMES.len());
    }

    #[test]
    fn named_tls12_suites_are_kept_and_tls13_stays() {
        let (p, names) = provider(Some(
            "ECDHE-RSA-AES256-GCM-SHA384:!aNULL:ecdhe-ecdsa-aes128-gcm-sha256",
        ))
        .unwrap();
        assert_eq!(
            names,
            vec![
                "ECDHE-ECDSA-AES128-GCM-SHA256",
                "ECDHE-RSA-AES256-GCM-SHA384"
            ]
        );
        assert_eq!(tls13_count(&p), 3);
        assert_eq!(p.cipher_suites.len(), 5);
    }

    #[test]
    fn a_list_of_suites_rustls_lacks_leaves_tls13_only() {
        let (p, names) = provider(Some("AES256-SHA")).unwrap();
        assert!(names.is_empty());
        assert_eq!(p.cipher_suites.len(), 3);
        assert_eq!(tls13_count(&p), 3);
    }

    #[test]
    fn openssl_keywords_keep_everything() {
        for list in ["HIGH:!aNULL:!MD5", "DEFAULT", "ALL:!EXPORT"] {
            let (_, names) = provider(Some(list)).unwrap();
            assert_eq!(names.len(), TLS12_NAMES.len(), "{list}");
        }
    }
}
