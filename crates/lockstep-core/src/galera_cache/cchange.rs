//! A Galera 4 configuration change as cached (`gcs_act_cchange`, version
//! 0): a version byte, the text `<ver>,<repl_proto>,<appl_proto>,
//! <uuid>:<seqno>,<conf_id>,<vote_seqno>,<vote_res>,<members>` and a NUL,
//! then per member its UUID (36 characters), name and incoming address,
//! each NUL-terminated, an i64 lowest cached seqno and a u8 state; zero
//! padding to 8 and an 8-byte checksum (the first half of the 128-bit
//! hash of everything before it; SpookyHash from 512 bytes on, which
//! Lockstep does not compute: such a change keeps its seqno, not its
//! members).

use super::murmur::{mmh128, SEED128};
use super::ring::parse_uuid;
use super::writeset::WsError;
use crate::writeset_cache::CachedMember;

/// At most this many members (Galera's own limit is far lower).
const MAX_MEMBERS: usize = 256;
/// From this size on Galera checksums with SpookyHash.
const MMH_LIMIT: usize = 512;

/// What Lockstep keeps of a configuration change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GaleraView {
    pub history: [u8; 16],
    pub seqno: i64,
    pub conf_id: i64,
    /// `None` when the change is too large for the checksum Lockstep
    /// computes: its members are not trusted then.
    pub members: Option<Vec<CachedMember>>,
}

fn bad<T>(what: impl Into<String>) -> Result<T, WsError> {
    Err(WsError(format!("configuration change: {}", what.into())))
}

fn c_string<'a>(buf: &'a [u8], at: &mut usize, what: &str) -> Result<&'a str, WsError> {
    let rest = buf.get(*at..).unwrap_or(&[]);
    let Some(end) = rest.iter().position(|&b| b == 0) else {
        return bad(format!("{what} is not terminated"));
    };
    *at += end + 1;
    std::str::from_utf8(&rest[..end]).or_else(|_| bad(format!("{what} is not UTF-8")))
}

/// Parses and checks `buf` (the payload; its length is a multiple of 8).
pub fn parse(buf: &[u8]) -> Result<GaleraView, WsError> {
    if buf.len() < 16 || !buf.len().is_multiple_of(8) {
        return bad(format!("{} bytes", buf.len()));
    }
    if buf[0] != 0 {
        return bad(format!("version {}", buf[0]));
    }
    let checked = buf.len() < MMH_LIMIT;
    if checked {
        let (body, sum) = buf.split_at(buf.len() - 8);
        if mmh128(&[body], SEED128)[..8] != *sum {
            return bad("checksum mismatch");
        }
    }
    let mut at = 1;
    let head = c_string(buf, &mut at, "header")?;
    let fields: Vec<&str> = head.split(',').collect();
    if fields.len() != 8 {
        return bad(format!("header '{head}'"));
    }
    let Some((uuid, seqno)) = fields[3].split_once(':') else {
        return bad(format!("state '{}'", fields[3]));
    };
    let history = parse_uuid(uuid).map_or_else(|| bad(format!("uuid '{uuid}'")), Ok)?;
    let number = |s: &str| s.parse::<i64>().or_else(|_| bad(format!("number '{s}'")));
    let seqno = number(seqno)?;
    let conf_id = number(fields[4])?;
    let count = usize::try_from(number(fields[7])?).unwrap_or(usize::MAX);
    if count > MAX_MEMBERS {
        return bad(format!("{count} members"));
    }
    if !checked {
        return Ok(GaleraView {
            history,
            seqno,
            conf_id,
            members: None,
        });
    }
    let mut members = Vec::with_capacity(count);
    for _ in 0..count {
        let id = c_string(buf, &mut at, "member uuid")?;
        let uuid = parse_uuid(id).map_or_else(|| bad(format!("member uuid '{id}'")), Ok)?;
        let name = c_string(buf, &mut at, "member name")?.to_string();
        let incoming = c_string(buf, &mut at, "member address")?.to_string();
        // The lowest cached seqno and the state, which IST does not show.
        at += 9;
        if at > buf.len() - 8 {
            return bad("members run past the checksum");
        }
        members.push(CachedMember {
            uuid,
            name,
            incoming,
        });
    }
    Ok(GaleraView {
        history,
        seqno,
        conf_id,
        members: Some(members),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A configuration change as Galera writes it.
    pub(crate) fn encode(
        history: &str,
        seqno: i64,
        conf_id: i64,
        members: &[(&str, &str)],
    ) -> Vec<u8> {
        let mut b = vec![0u8];
        b.extend_from_slice(
            format!("0,10,4,{history}:{seqno},{conf_id},-1,0,{}", members.len()).as_bytes(),
        );
        b.push(0);
        for (i, (uuid, name)) in members.iter().enumerate() {
            for s in [*uuid, *name, &format!("127.0.0.1:{}", 3306 + i)] {
                b.extend_from_slice(s.as_bytes());
                b.push(0);
            }
            b.extend_from_slice(&(seqno - 5).to_le_bytes());
            b.push(5);
        }
        b.resize((b.len() + 8).next_multiple_of(8) - 8, 0);
        let sum = mmh128(&[&b], SEED128);
        b.extend_from_slice(&sum[..8]);
        b
    }

    const H: &str = "38a1b360-ea5c-11f1-9d53-2257cdddea97";

    #[test]
    fn members_and_conf_id_are_read_and_checked() {
        let buf = encode(
            H,
            1747,
            3,
            &[
                ("44adb613-ea5c-11f1-8bb4-ce665dc2cea1", "node1"),
                ("44d134c0-ea5c-11f1-955b-6a44bddf7de2", "node2"),
            ],
        );
        let v = parse(&buf).unwrap();
        assert_eq!((v.seqno, v.conf_id), (1747, 3));
        assert_eq!(v.history, parse_uuid(H).unwrap());
        let m = v.members.unwrap();
        assert_eq!(m[1].name, "node2");
        assert_eq!(m[1].incoming, "127.0.0.1:3307");
        for i in 0..buf.len() {
            let mut bad = buf.clone();
            bad[i] ^= 1;
            assert!(parse(&bad).is_err(), "byte {i} changed unnoticed");
        }
    }
}
