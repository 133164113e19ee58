//! The bodies of the fuzz targets (`fuzz/`), one per decoder of untrusted
//! input: each takes any bytes and must end in a value or an error, never
//! a panic, and where a value comes out it must encode back the same.
//!
//! They live here so that two drivers share them: libFuzzer through
//! `cargo fuzz` (`make fuzz`, which needs a nightly toolchain), and the
//! stable smoke test `tests/decoders_take_any_bytes.rs`, which `make test`
//! runs on seeded random and mutated inputs. Compiled only with the
//! `fuzzing` feature.

use crate::address::ClusterAddress;
use crate::group::action::{decode_batch, decode_batch_shared, encode_batch};
use crate::group::peer::PeerMsg;
use crate::group::{MemberInfo, Sequencer};
use crate::options::Options;
use crate::saved_state::SavedState;
use crate::saved_view::SavedView;
use crate::wire::frame::{encode, Frame, FrameDecoder, FrameRef};
use crate::wire::lanes::Inbox;
use crate::writeset_cache::{
    decode_file_header, decode_record, decode_stream_header, encode_record, Decoded,
};

/// A target's body: any bytes in, no panic out.
pub type Body = fn(&[u8]);

/// Every target, by name (the names of `fuzz/fuzz_targets/*.rs`).
pub const TARGETS: &[(&str, Body)] = &[
    ("cluster_address", cluster_address),
    ("forged_senders", forged_senders),
    ("frame", frame),
    ("galera_cache", galera_cache),
    ("lanes_inbox", lanes_inbox),
    ("log_entry", log_entry),
    ("peer_message", peer_message),
    ("provider_options", provider_options),
    ("raft_message", raft_message),
    ("relay_bundle", relay_bundle),
    ("saved_state", saved_state),
    ("saved_view", saved_view),
    ("sequencer_snapshot", sequencer_snapshot),
    ("writeset_cache", writeset_cache),
];

/// `wsrep_cluster_address`.
pub fn cluster_address(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = ClusterAddress::parse(text);
    }
}

/// The frame layer, fed in odd-sized pieces as a socket delivers them,
/// taken as the event loop takes it (frames borrowed from the decoder).
pub fn frame(data: &[u8]) {
    let mut d = FrameDecoder::new(1 << 16);
    for chunk in data.chunks(7) {
        d.push(chunk);
        while let Ok(Some(f)) = d.next_frame_ref() {
            let mut out = Vec::new();
            encode(f.kind, f.payload, 1 << 16, &mut out).expect("within bound");
        }
    }
}

/// Chunked messages: frames (kind byte, payload length byte, payload)
/// into one connection's inbox, bounded at 64 KiB per message, taken as
/// the event loop takes them (borrowed, `Inbox::accept_ref`).
pub fn lanes_inbox(data: &[u8]) {
    let mut inbox = Inbox::new(1 << 16);
    let mut rest = data;
    while let [kind, len, tail @ ..] = rest {
        let n = (*len as usize).min(tail.len());
        let f = FrameRef {
            kind: *kind,
            payload: &tail[..n],
        };
        if let Ok(Some(whole)) = inbox.accept_ref(f) {
            assert!(whole.payload.len() <= 1 << 16, "a message above the bound");
        }
        assert!(
            inbox.partial_bytes() <= 1 << 16,
            "a partial above the bound"
        );
        rest = &tail[n..];
    }
}

/// Raft log entries (batches of actions) and member descriptions.
pub fn log_entry(data: &[u8]) {
    let copied = decode_batch(data);
    if let Ok(batch) = &copied {
        assert_eq!(encode_batch(batch), data);
    }
    // The round's decoding, which shares the entry's bytes, says the
    // same.
    let shared = decode_batch_shared(&bytes::Bytes::copy_from_slice(data));
    assert_eq!(shared, copied);
    if let Ok(m) = MemberInfo::decode(data) {
        assert_eq!(m.encode(), data);
    }
    // A joiner's configuration-change context (with its certificate).
    if let Ok((m, cert)) = MemberInfo::decode_admission(data) {
        assert_eq!(m.encode_admission(cert.as_ref()), data);
    }
}

/// Group-channel messages: a frame's kind byte, then its payload.
pub fn peer_message(data: &[u8]) {
    let Some((&kind, payload)) = data.split_first() else {
        return;
    };
    let frame = Frame {
        kind,
        payload: payload.to_vec(),
    };
    if let Ok(msg) = PeerMsg::from_frame(frame) {
        msg.to_frame().expect("a decoded message fits a frame");
    }
}

/// `wsrep_provider_options`, at start and at runtime.
pub fn provider_options(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut opts = Options::new("127.0.0.1:4567", "/var/lib/mysql");
    if opts.apply_initial(text).is_ok() {
        let printed = opts.to_galera_string();
        let changed = opts
            .apply_runtime(&printed)
            .expect("printed options parse back");
        assert!(changed.is_empty(), "round trip changed {changed:?}");
    }
    let _ = opts.apply_runtime(text);
}

/// The Raft message inside a `PeerMsg::Raft` (protobuf, raft-rs's own
/// decoder): decodes or fails, and what decodes encodes and decodes again
/// to the same fields. Not to the same bytes or an `==` message: rust-
/// protobuf keeps unknown fields in a hash map (their order changes from
/// one encoding to the next) and remembers an empty sub-message that was
/// sent; its text form shows the known fields only.
pub fn raft_message(data: &[u8]) {
    use crate::group::peer::{decode_raft, raft_frame, PeerMsg, MAX_PEER_MESSAGE};
    use protobuf::Message as _;
    // The group's round decodes from shared bytes (entry data sliced, not
    // copied, `decode_raft`): it must take and refuse exactly what a
    // copying parse does.
    let shared = decode_raft(data.to_vec());
    let copied = raft::eraftpb::Message::parse_from_bytes(data);
    assert_eq!(
        shared.as_ref().map(|m| format!("{m:?}")).ok(),
        copied.as_ref().map(|m| format!("{m:?}")).ok()
    );
    if let Ok(m) = copied {
        // Encoded as the transport encodes it: in place, in its frame.
        let frame = raft_frame(&m).expect("a parsed message frames");
        let f = crate::wire::frame::decode_one(frame, MAX_PEER_MESSAGE).expect("one frame");
        let Ok(PeerMsg::Raft(bytes)) = PeerMsg::from_frame(f) else {
            panic!("a Raft frame decodes as a Raft message");
        };
        let back = decode_raft(bytes).expect("and parses again");
        assert_eq!(format!("{back:?}"), format!("{m:?}"));
    }
}

/// Raft and relayed messages with forged senders, stepped into a group of
/// one member that leads, as the group driver steps them (ADR 0014): a
/// Raft message whose `from` is not its connection's id is dropped first,
/// a relayed one goes through `Group::step_relayed`. Each input is a list
/// of (connection id, kind, length, message bytes); connection ids are the
/// member itself or strangers, and half of the inputs run with
/// authenticated peers. Whatever the messages say, the group must not
/// panic, and no stranger gets into its membership, its bindings or its
/// order: everything delivered is the member's own.
pub fn forged_senders(data: &[u8]) {
    use crate::group::node::{Group, GroupConfig, Output};
    use crate::group::{Delivery, OrderedWriteset};
    use protobuf::Message as _;
    const ME: u64 = 7;
    let Some((&flags, mut rest)) = data.split_first() else {
        return;
    };
    let me = MemberInfo {
        raft_id: ME,
        uuid: [7; 16],
        name: "fuzzed".into(),
        incoming: String::new(),
        peer_addr: "127.0.0.1:4567".into(),
        segment: 0,
    };
    let cfg = GroupConfig {
        randomized_election: false,
        checked_senders: flags & 1 == 1,
        ..GroupConfig::default()
    };
    let Ok(mut g) = Group::bootstrap(me, cfg, [9; 16], 0, 0) else {
        return;
    };
    let mut now = 0;
    let check = |g: &mut Group| {
        for out in g.poll() {
            if let Output::Deliver(Delivery::Writeset(OrderedWriteset { origin, .. })) = out {
                assert_eq!(origin, ME, "a stranger's writeset was ordered");
            }
        }
        let members: Vec<u64> = g
            .sequencer()
            .members()
            .iter()
            .map(|m| m.info.raft_id)
            .collect();
        assert!(members.iter().all(|id| *id == ME), "members {members:?}");
        assert!(
            g.sequencer().bindings().keys().all(|id| *id == ME),
            "a stranger bound"
        );
    };
    check(&mut g);
    while rest.len() >= 4 {
        let (head, tail) = rest.split_at(4);
        let from = match head[0] % 3 {
            0 => ME,
            1 => ME + 1,
            _ => u64::from(head[0]) << 32 | 0x5eed,
        };
        let relayed = head[1] & 1 == 1;
        let len = (usize::from(head[2]) << 8 | usize::from(head[3])).min(tail.len());
        let (bytes, tail) = tail.split_at(len);
        rest = tail;
        now += 10;
        g.tick(now);
        let Ok(msg) = raft::eraftpb::Message::parse_from_bytes(bytes) else {
            continue;
        };
        if relayed {
            g.step_relayed(from, msg);
        } else if msg.from == from {
            g.step(msg);
        }
        check(&mut g);
    }
}

/// A leader's relay bundle (`group::relay`): decodes or fails, and what
/// decodes encodes and decodes again to the same messages.
pub fn relay_bundle(data: &[u8]) {
    use crate::group::relay;
    if let Ok(msgs) = relay::decode(&bytes::Bytes::copy_from_slice(data)) {
        let again = relay::encode(&msgs).expect("decoded messages encode");
        let back = relay::decode(&bytes::Bytes::from(again)).expect("and decode again");
        assert_eq!(format!("{back:?}"), format!("{msgs:?}"));
    }
}

/// `grastate.dat`.
pub fn saved_state(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(state) = SavedState::parse(&text) {
        assert_eq!(SavedState::parse(&state.render()), Ok(state));
    }
}

/// `gvwstate.dat`.
pub fn saved_view(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(view) = SavedView::parse(&text) {
        assert_eq!(SavedView::parse(&view.to_text()), Ok(view));
    }
}

/// A Raft snapshot's payload: the group state a joiner starts from.
pub fn sequencer_snapshot(data: &[u8]) {
    if let Ok(s) = Sequencer::restore(data) {
        let again = s.snapshot();
        Sequencer::restore(&again).expect("a snapshot of a restored sequencer restores");
    }
}

/// The writeset cache file and the IST stream (header and records).
pub fn writeset_cache(data: &[u8]) {
    let _ = decode_file_header(data);
    let _ = decode_stream_header(data);
    let mut rest = data;
    while let Ok(Decoded::Record(ev, used)) = decode_record(rest, 1 << 20) {
        let mut again = Vec::new();
        encode_record(&ev, &mut again);
        assert_eq!(&again[..], &rest[..used]);
        rest = &rest[used..];
    }
}

/// Galera's `galera.cache`, read at a switch from Galera: the ring buffer
/// (as given, and behind a valid preamble so the buffer walk is reached),
/// and each buffer's payload as a writeset and as a configuration change.
pub fn galera_cache(data: &[u8]) {
    use crate::galera_cache::{cchange, scan, to_cached, writeset};
    let _ = writeset::parse(data);
    let _ = cchange::parse(data);
    let mut file = b"Version: 2\nGID: 38a1b360-ea5c-11f1-9d53-2257cdddea97\nsynced: 0\n".to_vec();
    file.resize(1280, 0);
    file.extend_from_slice(data);
    for bytes in [data, &file[..]] {
        if let Ok(s) = scan(bytes) {
            for b in &s.run {
                let start = b.payload_at as usize;
                let payload = &bytes[start..start + b.payload_len as usize];
                let _ = to_cached(b, payload, s.preamble.gid);
            }
        }
    }
}
