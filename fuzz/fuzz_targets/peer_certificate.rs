//! A peer's certificate bytes: the X.509 v1 checks never panic (the body
//! lives in lockstep-net, whose test runs it on mutated certificates).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| lockstep_net::tls::fuzz_peer_certificate(data));
