//! Certificate fingerprints: what binds a member's Raft id to the
//! certificate it presents (ADR 0014, `Action::Bind`).

pub use lockstep_core::group::action::CertFingerprint;

/// The SHA-256 digest of a certificate's DER bytes.
pub fn fingerprint(der: &[u8]) -> CertFingerprint {
    let digest = ring::digest::digest(&ring::digest::SHA256, der);
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

/// A fingerprint for the log: `SHA256:` and its first eight bytes in hex
/// (enough to tell certificates apart; `openssl x509 -fingerprint
/// -sha256` prints the whole digest).
pub fn short(fp: &CertFingerprint) -> String {
    let hex: Vec<String> = fp[..8].iter().map(|b| format!("{b:02X}")).collect();
    format!("SHA256:{}…", hex.join(":"))
}

/// What a connection presented, for the log: [`short`], or that it
/// presented nothing (plain TCP).
pub fn describe(cert: Option<&CertFingerprint>) -> String {
    cert.map_or("none (plain TCP)".to_string(), short)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprint_is_sha256_of_the_der() {
        // SHA-256 of the empty input.
        let fp = fingerprint(b"");
        assert_eq!(short(&fp), "SHA256:E3:B0:C4:42:98:FC:1C:14…", "{fp:02x?}");
        assert_ne!(fingerprint(b"a"), fingerprint(b"b"));
    }
}
