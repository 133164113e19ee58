//! The fuzz targets' bodies (`lockstep_core::fuzzing`) on a stable
//! toolchain, as part of `make test`: each decoder of untrusted input gets
//! seeded random bytes and mutations of valid encodings, and must end in a
//! value or an error, never a panic. Coverage-guided fuzzing of the same
//! bodies is `make fuzz` (libFuzzer, nightly).
//!
//! `FUZZ_SMOKE_CASES=n` changes the number of cases per target.

use lockstep_core::fuzzing::TARGETS;
use lockstep_core::group::action::encode_batch;
use lockstep_core::group::peer::PeerMsg;
use lockstep_core::wire::frame::encode;

/// A small deterministic generator (xorshift): the same cases every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = self.below(max + 1);
        (0..n).map(|_| self.next() as u8).collect()
    }

    /// `seed` with a few bytes flipped, cut, duplicated or inserted.
    fn mutate(&mut self, seed: &[u8]) -> Vec<u8> {
        let mut v = seed.to_vec();
        for _ in 0..1 + self.below(4) {
            match self.below(4) {
                0 if !v.is_empty() => {
                    let i = self.below(v.len());
                    v[i] ^= 1 << self.below(8);
                }
                1 if !v.is_empty() => {
                    let cut = self.below(v.len());
                    v.truncate(cut);
                }
                2 if !v.is_empty() => {
                    let i = self.below(v.len());
                    let b = v[i];
                    v.insert(i, b);
                }
                _ => {
                    let i = self.below(v.len() + 1);
                    v.insert(i, self.next() as u8);
                }
            }
        }
        v
    }
}

/// A `forged_senders` input worth mutating: with authenticated peers, a
/// stranger's proposal binding the member to its certificate, a relayed
/// append claiming the member as its sender, and a stranger's vote
/// request a term ahead.
fn forged_senders_input() -> Vec<u8> {
    use lockstep_core::group::{Action, Proposal};
    use protobuf::Message as _;
    use raft::eraftpb::{Entry, Message, MessageType};
    let msg = |kind: MessageType, from: u64, entries: Vec<Entry>| {
        let mut m = Message::default();
        m.set_msg_type(kind);
        m.from = from;
        m.to = 7;
        m.term = 1_000;
        m.log_term = 1_000;
        m.index = 3;
        m.commit = 3;
        m.entries = entries.into();
        m.write_to_bytes().expect("a raft message encodes")
    };
    let bind = encode_batch(&[Proposal {
        origin: 7,
        id: 1,
        action: Action::Bind {
            raft_id: 7,
            fingerprint: [0xee; 32],
        },
    }]);
    let entry = Entry {
        data: bind.into(),
        ..Default::default()
    };
    let mut out = vec![1];
    for (from_sel, relayed, bytes) in [
        (
            1u8,
            0u8,
            msg(MessageType::MsgPropose, 8, vec![entry.clone()]),
        ),
        (1, 1, msg(MessageType::MsgAppend, 7, vec![entry])),
        (2, 0, msg(MessageType::MsgRequestVote, 0x5eed, vec![])),
    ] {
        out.extend_from_slice(&[from_sel, relayed]);
        out.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
        out.extend_from_slice(&bytes);
    }
    out
}

/// Valid encodings to mutate: frames, messages, a batch, option strings.
fn seeds() -> Vec<Vec<u8>> {
    let hello = PeerMsg::Hello {
        version: 5,
        cluster: "prod".into(),
        raft_id: 42,
        peer_addr: "10.0.0.1:4567".into(),
        min_version: 5,
    }
    .to_frame()
    .expect("a hello frames");
    let mut frame = Vec::new();
    encode(3, b"payload", 1 << 16, &mut frame).expect("small");
    let mut peer_msg = vec![hello[5]];
    peer_msg.extend_from_slice(&hello[12..hello.len() - 4]);
    // A Galera ring buffer's first buffer (the galera_cache target puts a
    // preamble before it): header, then a certified version-6 writeset.
    let ws = "4763401441400200ed0300000000000079df0d86487000005f0e3a2c9d1b11ee\
              8c6a7b3f2e1d0c4b0c000000000000005901000000000000720f4becf92cc0fd\
              2b019c001c743e30edb7dfb23cb2217e6a11fb4fe74174dba411223344556677\
              c78899aabbccddee2b00c000d367a824cc60f0224697e9b3d3074991a89bb82c\
              42494e4c4f472d4556454e542d313a0001020304455632212100000000000000";
    let mut galera_buffer = Vec::new();
    galera_buffer.extend_from_slice(&1005i64.to_le_bytes());
    galera_buffer.extend_from_slice(&0u64.to_le_bytes());
    galera_buffer.extend_from_slice(&(24u32 + 160).to_le_bytes());
    galera_buffer.extend_from_slice(&[1, 0, 1, 0]);
    galera_buffer
        .extend((0..ws.len() / 2).map(|i| u8::from_str_radix(&ws[2 * i..2 * i + 2], 16).unwrap()));
    galera_buffer.extend_from_slice(&[0; 24]);
    vec![
        galera_buffer,
        forged_senders_input(),
        hello,
        frame,
        peer_msg,
        encode_batch(&[]),
        b"gcache.size=128M; gcs.fc_limit=64; socket.ssl=YES".to_vec(),
        b"gcomm://10.0.0.1:4567,10.0.0.2?pc.wait_prim=no".to_vec(),
        b"# GALERA saved state\nversion: 2.1\nuuid: 6d2e0a62-7b2c-11ee-9c5a-0242ac120002\n\
          seqno: 12\nsafe_to_bootstrap: 0\n"
            .to_vec(),
    ]
}

#[test]
fn every_decoder_survives_random_and_mutated_bytes() {
    let cases: usize = std::env::var("FUZZ_SMOKE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let seeds = seeds();
    let mut ran = 0usize;
    for (name, body) in TARGETS {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ name.len() as u64);
        body(&[]);
        for i in 0..cases {
            let input = if i % 2 == 0 {
                rng.bytes(512)
            } else {
                let s = &seeds[rng.below(seeds.len())];
                rng.mutate(s)
            };
            // A panic here names the target and the input to replay it.
            let result = std::panic::catch_unwind(|| body(&input));
            assert!(
                result.is_ok(),
                "fuzz target {name} panicked on {} bytes: {input:02x?}",
                input.len()
            );
            ran += 1;
        }
    }
    assert_eq!(ran, TARGETS.len() * cases);
}

/// Inputs `make fuzz` found, kept so they run on every `make test`.
#[test]
fn inputs_libfuzzer_found_stay_fixed() {
    let found: &[(&str, &[u8])] = &[
        // An empty snapshot sub-message sent explicitly: parses into a
        // message whose encoding leaves it out (a harness assertion, no
        // decoder bug; 2026-11-25).
        (
            "raft_message",
            &[
                0xca, 0x3a, 0x00, 0xca, 0x00, 0x02, 0x4a, 0x00, 0x4a, 0x00, 0x4a, 0x00,
            ],
        ),
    ];
    for (target, input) in found {
        let body = TARGETS
            .iter()
            .find(|(name, _)| name == target)
            .map(|(_, body)| body)
            .unwrap_or_else(|| panic!("no fuzz target {target}"));
        body(input);
    }
    assert!(!found.is_empty());
}

#[test]
fn the_fuzz_directory_has_a_target_for_every_body() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/fuzz_targets");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .expect("fuzz/fuzz_targets")
        .map(|e| {
            e.unwrap()
                .path()
                .file_stem()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    files.sort();
    // Targets whose bodies live in other crates, each smoke-tested there:
    // lockstep-net's `tls::fuzz_peer_certificate`
    // (`crates/lockstep-net/tests/certificates_take_any_bytes.rs`).
    const ELSEWHERE: &[&str] = &["peer_certificate"];
    let mut names: Vec<String> = TARGETS.iter().map(|(n, _)| n.to_string()).collect();
    names.extend(ELSEWHERE.iter().map(|n| n.to_string()));
    names.sort();
    assert_eq!(
        files, names,
        "fuzz/fuzz_targets and fuzzing::TARGETS differ"
    );
    let manifest = std::fs::read_to_string(dir.join("../Cargo.toml")).unwrap();
    for n in &names {
        assert!(
            manifest.contains(&format!("name = \"{n}\"")),
            "fuzz/Cargo.toml has no [[bin]] {n}"
        );
    }
}
