//! A Galera writeset (WriteSetNG, versions 3 to 6) as Galera 26.4 keeps it
//! in its cache: a 64-byte header (little endian: 'G', versions, header
//! size, set versions, u16 flags, u16 pa_range, i64 last_seen or, once
//! certified, the seqno, i64 timestamp, [16] source, u64 conn, u64 trx,
//! u64 checksum), then record sets: keys, data, unordered, annotation.
//! The data set is one record: the concatenation of what the server
//! appended, which is what `apply_cb` gets.

use std::fmt;
use std::ops::Range;

use super::murmur::{mmh128, mmh32, SEED128, SEED32};

const MAGIC: u8 = b'G';
/// Header bytes of versions 3-6.
const MIN_HEADER: usize = 64;
/// Certification wrote seqno and pa_range into the header (version 5+).
pub const F_CERTIFIED: u16 = 0x4000;
/// The wsrep API flags are the low ten bits, bit for bit.
pub const WSREP_FLAGS: u16 = 0x03FF;
const F_COMMIT: u16 = 0x0001;
const F_BEGIN: u16 = 0x0040;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WsError(pub String);

impl fmt::Display for WsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Galera writeset: {}", self.0)
    }
}

impl std::error::Error for WsError {}

fn err<T>(what: impl Into<String>) -> Result<T, WsError> {
    Err(WsError(what.into()))
}

/// What Lockstep needs of a cached Galera writeset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GaleraWriteset {
    pub version: u8,
    /// The wsrep API flags (`WSREP_FLAG_*`).
    pub wsrep_flags: u32,
    /// The seqno certification wrote into the header, if it did.
    pub certified_seqno: Option<i64>,
    /// Seqno minus the seqno it depends on; 0 after certification means
    /// it failed.
    pub pa_range: u16,
    pub source: [u8; 16],
    pub conn_id: u64,
    pub trx_id: u64,
    /// Where the data set's bytes are in the buffer (empty: no data).
    pub data: Range<usize>,
}

impl GaleraWriteset {
    /// The seqno this one may be applied after, or `None` when
    /// certification failed (Galera does not apply it).
    pub fn depends_on(&self) -> Option<i64> {
        let seqno = self.certified_seqno?;
        (self.pa_range > 0).then(|| seqno - i64::from(self.pa_range))
    }
}

fn le_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().expect("2 bytes"))
}
fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Parses and checks `buf` (a cache buffer's payload, padding included).
pub fn parse(buf: &[u8]) -> Result<GaleraWriteset, WsError> {
    if buf.len() < MIN_HEADER {
        return err(format!("{} bytes, shorter than a header", buf.len()));
    }
    if buf[0] != MAGIC {
        return err(format!("magic {:#04x}, not 'G'", buf[0]));
    }
    let (max, min) = (buf[1] >> 4, buf[1] & 0x0f);
    if !(3..=6).contains(&min) || max < min {
        return err(format!("versions {max}/{min}: only 3 to 6 are known"));
    }
    let version = max.min(6);
    let hs = usize::from(buf[2]);
    if !(MIN_HEADER..=buf.len()).contains(&hs) {
        return err(format!("header size {hs}"));
    }
    let stored = le_u64(buf, hs - 8);
    let computed = le_u64(&mmh128(&[&buf[..hs - 8]], SEED128), 0);
    if stored != computed {
        return err(format!(
            "header checksum {stored:#018x}, computed {computed:#018x}"
        ));
    }
    let sets = buf[3];
    let (key_ver, data_ver) = (sets >> 4, (sets >> 2) & 3);
    let wire = le_u16(buf, 4);
    let pa_range = le_u16(buf, 6);
    let certified = if version >= 5 {
        wire & F_CERTIFIED != 0
    } else {
        pa_range != 0
    };
    let mut wsrep_flags = wire & WSREP_FLAGS;
    if version < 5 && wsrep_flags & F_COMMIT != 0 {
        // Galera 3 never set BEGIN; Galera adds it to every commit.
        wsrep_flags |= F_BEGIN;
    }
    let mut at = hs;
    if key_ver != 0 {
        at += record_set(buf, at, "key set")?.serial_size;
    }
    let data = if data_ver != 0 {
        let rs = record_set(buf, at, "data set")?;
        at + rs.begin..at + rs.size
    } else {
        at..at
    };
    Ok(GaleraWriteset {
        version,
        wsrep_flags: u32::from(wsrep_flags),
        certified_seqno: certified.then(|| le_u64(buf, 8) as i64),
        pa_range,
        source: buf[24..40].try_into().expect("16 bytes"),
        conn_id: le_u64(buf, 40),
        trx_id: le_u64(buf, 48),
        data,
    })
}

/// A record set's layout, relative to its first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RecordSet {
    /// First record byte.
    begin: usize,
    /// Header, checksum and records, without padding.
    size: usize,
    /// What it occupies: `size` padded to its alignment.
    serial_size: usize,
}

/// ULEB128, at most 9 bytes (Galera's sizes and counts fit in 63 bits).
fn uleb(buf: &[u8], at: &mut usize, what: &str) -> Result<u64, WsError> {
    let mut v = 0u64;
    for i in 0..9 {
        let Some(&b) = buf.get(*at) else {
            return err(format!("{what} ends inside a number"));
        };
        *at += 1;
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    err(format!("{what}: a number longer than 9 bytes"))
}

/// Parses and checks the record set at `o`: its header CRC and its
/// payload checksum, over the records, the padding and the header.
fn record_set(buf: &[u8], o: usize, what: &str) -> Result<RecordSet, WsError> {
    let Some(&b0) = buf.get(o) else {
        return err(format!("{what} missing"));
    };
    let (ver, check) = (b0 >> 4, b0 & 7);
    let csize = match (ver, check) {
        (1 | 2, 0) => 0,
        (1, 1) => 4,
        (1 | 2, 2) => 8,
        (1 | 2, 3) => 16,
        _ => return err(format!("{what}: version {ver}, check type {check}")),
    };
    let align = if ver == 2 { 8 } else { 1 };
    let (size, crc_at) = if ver == 2 && b0 & 0x08 != 0 {
        if o + 8 > buf.len() {
            return err(format!("{what}: short header cut off"));
        }
        let h = le_u32(buf, o);
        (((h >> 18) & 0x3fff) as usize + 1, 4)
    } else {
        let mut p = o + 1;
        let size = uleb(buf, &mut p, what)?;
        let _count = uleb(buf, &mut p, what)?;
        let p = (p - o + 4).next_multiple_of(align) - 4;
        (usize::try_from(size).unwrap_or(usize::MAX), p)
    };
    let begin = crc_at + 4 + csize;
    if size < begin || size > buf.len() - o {
        return err(format!(
            "{what}: size {size} does not fit ({} bytes left)",
            buf.len() - o
        ));
    }
    let serial_size = size.next_multiple_of(align);
    if serial_size > buf.len() - o {
        return err(format!("{what}: padding cut off"));
    }
    let stored_crc = le_u32(buf, o + crc_at);
    let crc = mmh32(&buf[o..o + crc_at], SEED32);
    if stored_crc != crc {
        return err(format!(
            "{what}: header CRC {stored_crc:#010x}, computed {crc:#010x}"
        ));
    }
    if csize > 0 {
        let digest = mmh128(
            &[&buf[o + begin..o + serial_size], &buf[o..o + crc_at + 4]],
            SEED128,
        );
        if digest[..csize] != buf[o + crc_at + 4..o + begin] {
            return err(format!("{what}: payload checksum mismatch"));
        }
    }
    Ok(RecordSet {
        begin,
        size,
        serial_size,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The worked example of a version-6 writeset after certification
    /// (seqno 1005, depends on 1003): two key parts, and the data
    /// "BINLOG-EVENT-1:\0\1\2\3\4" then "EV2!!" as the server appended
    /// them. Built from the format description with its checksums.
    pub(crate) fn example() -> Vec<u8> {
        let hex = "4763401441400200ed0300000000000079df0d86487000005f0e3a2c9d1b11ee\
                   8c6a7b3f2e1d0c4b0c000000000000005901000000000000720f4becf92cc0fd\
                   2b019c001c743e30edb7dfb23cb2217e6a11fb4fe74174dba411223344556677\
                   c78899aabbccddee2b00c000d367a824cc60f0224697e9b3d3074991a89bb82c\
                   42494e4c4f472d4556454e542d313a0001020304455632212100000000000000";
        let clean: String = hex.chars().filter(|c| !c.is_whitespace()).collect();
        (0..clean.len() / 2)
            .map(|i| u8::from_str_radix(&clean[2 * i..2 * i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn a_certified_writeset_gives_its_data_and_dependency() {
        let buf = example();
        let ws = parse(&buf).unwrap();
        assert_eq!(ws.version, 6);
        assert_eq!(ws.certified_seqno, Some(1005));
        assert_eq!(ws.depends_on(), Some(1003));
        assert_eq!(ws.wsrep_flags, 0x41, "TRX_START | TRX_END");
        assert_eq!(ws.conn_id, 12);
        assert_eq!(ws.trx_id, 345);
        assert_eq!(
            &buf[ws.data.clone()],
            b"BINLOG-EVENT-1:\0\x01\x02\x03\x04EV2!!"
        );
    }

    #[test]
    fn every_corrupted_byte_is_caught() {
        // Header, sets and the data set's padding are all under a checksum.
        let buf = example();
        for i in 0..buf.len() {
            let mut bad = buf.clone();
            bad[i] ^= 0x10;
            assert!(parse(&bad).is_err(), "byte {i:#x} changed without an error");
        }
    }

    #[test]
    fn truncated_buffers_are_errors() {
        let buf = example();
        for len in 0..buf.len() - 7 {
            assert!(parse(&buf[..len]).is_err(), "{len} bytes accepted");
        }
    }
}
