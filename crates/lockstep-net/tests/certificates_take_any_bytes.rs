//! The `peer_certificate` fuzz target's body on a stable toolchain, as
//! part of `make test`: MariaDB's v1 and v3 test certificates, cut,
//! flipped and grown, go through the v1 checks, which must answer and
//! never panic. Coverage-guided fuzzing of the same body is `make fuzz`.

use lockstep_net::tls::fuzz_peer_certificate;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;

const CERTS: &[&str] = &[
    "/usr/share/mysql/mysql-test/std_data/galera_certs/galera.1.crt",
    "/usr/share/mysql/mysql-test/std_data/galera_certs/galera.root.crt",
    "/usr/share/mysql/mysql-test/std_data/cacert.pem",
];

#[test]
fn mutated_certificates_never_panic() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let cases: usize = std::env::var("FUZZ_SMOKE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    for path in CERTS {
        let seed = CertificateDer::from_pem_file(path).unwrap().to_vec();
        fuzz_peer_certificate(&seed);
        for _ in 0..cases {
            let mut v = seed.clone();
            for _ in 0..1 + next() % 4 {
                let i = (next() as usize) % (v.len() + 1);
                match next() % 3 {
                    0 if i < v.len() => v[i] ^= 1 << (next() % 8),
                    1 => v.truncate(i),
                    _ => v.insert(i, next() as u8),
                }
            }
            fuzz_peer_certificate(&v);
        }
    }
}
