//! Which security the peer connections get, from Galera's options:
//!
//! * `socket.ssl=NO` turns TLS off whatever else is set;
//! * otherwise `socket.ssl_cert` and `socket.ssl_key` together turn it on
//!   (`socket.ssl=YES` without them is an error), with `socket.ssl_ca`
//!   defaulting to the certificate itself, as Galera does;
//! * `socket.dynamic=YES` accepts plain peers too.

use lockstep_core::options::Options;
use lockstep_net::secure::PeerSecurity;
use lockstep_net::tls::TlsFiles;
use std::path::PathBuf;

pub fn from_options(o: &Options) -> Result<PeerSecurity, String> {
    let set = |k: &str| {
        o.get(k)
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    let explicit = if o.is_explicit("socket.ssl") {
        Some(o.bool("socket.ssl").map_err(|e| e.to_string())?)
    } else {
        None
    };
    let (cert, key) = (set("socket.ssl_cert"), set("socket.ssl_key"));
    if explicit == Some(false) {
        return Ok(PeerSecurity::plain());
    }
    let (cert, key) = match (cert, key, explicit) {
        (Some(c), Some(k), _) => (c, k),
        (None, None, None) => return Ok(PeerSecurity::plain()),
        (c, k, _) => {
            return Err(format!(
                "TLS for peers needs both socket.ssl_cert and socket.ssl_key{}; {} missing",
                if explicit == Some(true) {
                    " (socket.ssl=YES)"
                } else {
                    ""
                },
                match (c, k) {
                    (None, None) => "both are",
                    (None, _) => "socket.ssl_cert is",
                    _ => "socket.ssl_key is",
                }
            ))
        }
    };
    let dynamic = o.is_explicit("socket.dynamic") && o.bool("socket.dynamic").unwrap_or(false);
    PeerSecurity::tls(
        TlsFiles {
            cert: PathBuf::from(cert),
            key: PathBuf::from(key),
            ca: set("socket.ssl_ca").map(PathBuf::from),
            cipher: set("socket.ssl_cipher"),
            password_file: set("socket.ssl_password_file").map(PathBuf::from),
        },
        dynamic,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(conf: &str) -> Options {
        let mut o = Options::new("127.0.0.1:4567", "/tmp");
        o.apply_initial(conf).unwrap();
        o
    }

    #[test]
    fn no_option_means_plain() {
        assert!(!from_options(&opts("")).unwrap().is_tls());
    }

    #[test]
    fn ssl_no_wins_over_files() {
        let o = opts("socket.ssl=NO; socket.ssl_cert=/nope.pem; socket.ssl_key=/nope-key.pem");
        assert!(!from_options(&o).unwrap().is_tls());
    }

    #[test]
    fn half_the_files_is_an_error_naming_the_missing_one() {
        let e = from_options(&opts("socket.ssl_cert=/a.pem")).unwrap_err();
        assert!(e.contains("socket.ssl_key is missing"), "{e}");
        let e = from_options(&opts("socket.ssl=YES")).unwrap_err();
        assert!(
            e.contains("socket.ssl=YES") && e.contains("both are"),
            "{e}"
        );
    }

    #[test]
    fn files_that_cannot_be_read_are_an_error() {
        let e = from_options(&opts(
            "socket.ssl_cert=/no/such.pem; socket.ssl_key=/no/key.pem",
        ))
        .unwrap_err();
        assert!(e.contains("/no/such.pem"), "{e}");
    }
}
