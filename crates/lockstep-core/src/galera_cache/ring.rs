//! The ring buffer file: a 1024-byte text preamble, 256 unused bytes, then
//! buffers back to back from offset 1280, each a 24-byte header (host
//! order, little endian on x86_64: i64 seqno_g, u64 ctx, u32 size with the
//! header and padding to 8, u16 flags, i8 store, i8 type) and its payload.
//! An all-zero header ends a segment. After a wrap the live buffers are
//! two segments: from the preamble's `offset` to the end, then from the
//! start; stale bytes lie between, so a walk only starts at a known
//! segment start (as Galera's own recovery does).

use std::fmt;

/// Text preamble, NUL-padded.
pub const PREAMBLE_LEN: u64 = 1024;
/// Where the first buffer starts (preamble and an unused header area).
pub const RING_START: u64 = 1280;
/// A buffer's header.
pub const HEADER_LEN: u64 = 24;
/// The only preamble version of Galera 4 (buffers aligned to 8).
pub const SUPPORTED_VERSION: u32 = 2;
/// `flags` bits.
pub const BUFFER_RELEASED: u16 = 1;
pub const BUFFER_SKIPPED: u16 = 2;
/// `store` of a buffer in the ring file.
const STORE_RING: i8 = 1;
/// `type`: the GCS action types that get a seqno.
pub const TYPE_WRITESET: i8 = 0;
pub const TYPE_CCHANGE: i8 = 3;
/// Buffers the scan remembers at most (24 bytes of memory each, so about
/// 100 MiB): a bound a file of any size cannot pass. A ring with more
/// ordered buffers (over a gigabyte of the smallest writesets) ends the
/// scan early; the run then rarely reaches the node's position and the
/// cache is not used.
pub const MAX_BUFFERS: usize = 1 << 22;
/// The crash-path probe reads the file in windows of this size.
const PROBE_WINDOW: u64 = 1 << 20;

/// Positional reads of the cache file: the provider gives a file, tests a
/// byte slice. Errors are the reader's own words.
pub trait ReadAt {
    /// Fills `buf` from `offset`, or fails (also when the file ends first).
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), String>;
    /// The file's length.
    fn file_len(&self) -> u64;
}

impl ReadAt for [u8] {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), String> {
        let start = usize::try_from(offset).map_err(|_| "offset too large".to_string())?;
        let end = start
            .checked_add(buf.len())
            .filter(|&e| e <= <[u8]>::len(self))
            .ok_or_else(|| format!("read of {} bytes at {offset} past the end", buf.len()))?;
        buf.copy_from_slice(&self[start..end]);
        Ok(())
    }
    fn file_len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }
}

/// Why a file is not a Galera cache Lockstep can read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RingError {
    /// No `Version:` preamble: another format (Lockstep's own, or none).
    NotGalera,
    Unsupported(String),
    Read(String),
}

impl fmt::Display for RingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RingError::NotGalera => f.write_str("not a Galera ring buffer (no preamble)"),
            RingError::Unsupported(why) => write!(f, "unsupported Galera cache: {why}"),
            RingError::Read(why) => write!(f, "reading the Galera cache: {why}"),
        }
    }
}

impl std::error::Error for RingError {}

/// The preamble's fields Lockstep uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preamble {
    pub version: u32,
    /// The history (cluster state UUID) of every seqno in the file.
    pub gid: [u8; 16],
    /// Absolute file offset of the oldest buffer; written only at a clean
    /// shutdown (`synced: 1`).
    pub offset: Option<u64>,
    pub synced: bool,
}

/// One ordered buffer found by the scan (its payload is read later).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferInfo {
    pub seqno: i64,
    /// Absolute file offset of the payload.
    pub payload_at: u64,
    /// Payload bytes, padding included (at most 7 bytes of it).
    pub payload_len: u32,
    pub flags: u16,
    pub kind: i8,
}

impl BufferInfo {
    /// Galera skipped it: failed certification, or an IST skip.
    pub fn skipped(&self) -> bool {
        self.flags & BUFFER_SKIPPED != 0
    }
}

/// What [`scan`] found: the gap-free run of ordered writesets and
/// configuration changes ending at the highest seqno, lowest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RingScan {
    pub preamble: Preamble,
    pub run: Vec<BufferInfo>,
    /// Ordered buffers seen that are not in the run (older than a gap, or
    /// conflicting copies).
    pub dropped: usize,
}

/// Parses the preamble: `key: value` lines up to the first NUL.
pub fn parse_preamble(bytes: &[u8]) -> Result<Preamble, RingError> {
    let text_len = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let text = std::str::from_utf8(&bytes[..text_len]).map_err(|_| RingError::NotGalera)?;
    if !text.starts_with("Version:") && !text.starts_with('#') {
        return Err(RingError::NotGalera);
    }
    let (mut version, mut gid, mut offset, mut synced) = (None, None, None, false);
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key.trim() {
            "Version" => version = value.parse::<u32>().ok(),
            "GID" => gid = parse_uuid(value),
            "offset" => offset = value.parse::<i64>().ok(),
            "synced" => synced = value == "1",
            _ => {}
        }
    }
    let version = version.ok_or_else(|| RingError::Unsupported("no Version".into()))?;
    if version != SUPPORTED_VERSION {
        return Err(RingError::Unsupported(format!(
            "preamble version {version} (Galera 4 writes {SUPPORTED_VERSION})"
        )));
    }
    let gid = gid.ok_or_else(|| RingError::Unsupported("no or a bad GID".into()))?;
    // Galera's own rule: an offset that is not a buffer start is unknown.
    let offset = offset
        .filter(|&o| o >= RING_START as i64 && o % 8 == 0)
        .map(|o| o as u64);
    Ok(Preamble {
        version,
        gid,
        offset,
        synced,
    })
}

/// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` to its 16 bytes
/// (`wsrep_abi::Uuid::parse`, strict as everywhere else).
pub fn parse_uuid(s: &str) -> Option<[u8; 16]> {
    wsrep_abi::Uuid::parse(s).ok().map(|u| *u.as_bytes())
}

#[derive(Debug, Clone, Copy)]
struct Header {
    seqno: i64,
    size: u32,
    flags: u16,
    store: i8,
    kind: i8,
}

impl Header {
    fn parse(b: &[u8; HEADER_LEN as usize]) -> Header {
        Header {
            seqno: i64::from_le_bytes(b[0..8].try_into().expect("8 bytes")),
            size: u32::from_le_bytes(b[16..20].try_into().expect("4 bytes")),
            flags: u16::from_le_bytes(b[20..22].try_into().expect("2 bytes")),
            store: b[22] as i8,
            kind: b[23] as i8,
        }
    }
    fn plausible(&self) -> bool {
        self.seqno >= -1
            && u64::from(self.size) >= HEADER_LEN
            && self.size.is_multiple_of(8)
            && self.flags <= (BUFFER_RELEASED | BUFFER_SKIPPED)
            && self.store == STORE_RING
    }
}

/// Reads a header; `None` for the all-zero end marker.
fn header_at(file: &(impl ReadAt + ?Sized), at: u64) -> Result<Option<Header>, RingError> {
    let mut b = [0u8; HEADER_LEN as usize];
    file.read_at(at, &mut b).map_err(RingError::Read)?;
    if b.iter().all(|&x| x == 0) {
        return Ok(None);
    }
    Ok(Some(Header::parse(&b)))
}

/// Whether a buffer that passes Galera's checks starts at `at` and ends
/// before `limit`, followed by an end marker or another such header.
fn buffer_at(
    file: &(impl ReadAt + ?Sized),
    at: u64,
    limit: u64,
) -> Result<Option<Header>, RingError> {
    if at + HEADER_LEN > limit {
        return Ok(None);
    }
    let Some(h) = header_at(file, at)? else {
        return Ok(None);
    };
    let end = at + u64::from(h.size);
    if !h.plausible() || end > limit {
        return Ok(None);
    }
    if end + HEADER_LEN <= file.file_len() {
        if let Some(next) = header_at(file, end)? {
            if !next.plausible() {
                return Ok(None);
            }
        }
    }
    Ok(Some(h))
}

/// Walks one segment from `from`; returns where it stopped.
fn walk(
    file: &(impl ReadAt + ?Sized),
    from: u64,
    limit: u64,
    out: &mut Vec<BufferInfo>,
) -> Result<u64, RingError> {
    let mut at = from;
    while out.len() < MAX_BUFFERS {
        let Some(h) = buffer_at(file, at, limit)? else {
            break;
        };
        if h.seqno > 0 && (h.kind == TYPE_WRITESET || h.kind == TYPE_CCHANGE) {
            out.push(BufferInfo {
                seqno: h.seqno,
                payload_at: at + HEADER_LEN,
                payload_len: h.size - HEADER_LEN as u32,
                flags: h.flags,
                kind: h.kind,
            });
        }
        at += u64::from(h.size);
    }
    Ok(at)
}

/// Scans the file: the preamble, then every segment, then keeps the run.
pub fn scan(file: &(impl ReadAt + ?Sized)) -> Result<RingScan, RingError> {
    scan_up_to(file, i64::MAX)
}

/// [`scan`], keeping the run that ends at the highest seqno at most
/// `last` (a node's position: what lies above it, or a gap above it, does
/// not cost the events below).
pub fn scan_up_to(file: &(impl ReadAt + ?Sized), last: i64) -> Result<RingScan, RingError> {
    if file.file_len() < RING_START + HEADER_LEN {
        return Err(RingError::NotGalera);
    }
    let mut pre = [0u8; PREAMBLE_LEN as usize];
    file.read_at(0, &mut pre).map_err(RingError::Read)?;
    let preamble = parse_preamble(&pre)?;
    let seg_end = file.file_len() - HEADER_LEN;
    let mut found = Vec::new();
    match preamble.offset.filter(|&o| o < seg_end) {
        Some(first) => {
            walk(file, first, seg_end, &mut found)?;
            if first > RING_START {
                walk(file, RING_START, first - HEADER_LEN, &mut found)?;
            }
        }
        None => {
            // A crash: the segment at the start ends where writing was;
            // the older one, if the ring wrapped, starts at the first
            // plausible buffer after it (Galera probes in steps of 8).
            let next = walk(file, RING_START, seg_end, &mut found)?;
            if let Some(older) = probe(file, next + HEADER_LEN, seg_end)? {
                walk(file, older, seg_end, &mut found)?;
            }
        }
    }
    let seen = found.len();
    found.retain(|b| b.seqno <= last);
    let run = gap_free_run(found);
    Ok(RingScan {
        preamble,
        dropped: seen - run.len(),
        run,
    })
}

/// The first offset from `from` (a multiple of 8 from the ring's start)
/// where a plausible buffer starts, read a window at a time: a ring that
/// never wrapped is zeros from its write position on, and one read per
/// window skips them.
fn probe(file: &(impl ReadAt + ?Sized), from: u64, seg_end: u64) -> Result<Option<u64>, RingError> {
    let mut at = from;
    let mut window = Vec::new();
    while at + HEADER_LEN <= seg_end {
        let len = PROBE_WINDOW.min(seg_end - at);
        window.resize(len as usize, 0);
        file.read_at(at, &mut window).map_err(RingError::Read)?;
        let mut off = 0usize;
        while off as u64 + HEADER_LEN <= len {
            let head: &[u8; HEADER_LEN as usize] = window[off..off + HEADER_LEN as usize]
                .try_into()
                .expect("24 bytes");
            if head.iter().any(|&b| b != 0)
                && Header::parse(head).plausible()
                && buffer_at(file, at + off as u64, seg_end)?.is_some()
            {
                return Ok(Some(at + off as u64));
            }
            off += 8;
        }
        // The next window starts at the first position this one could
        // not test whole.
        at += off as u64;
    }
    Ok(None)
}

/// The run of consecutive seqnos ending at the highest one. A seqno found
/// twice ends the run above it (Galera keeps identical copies; Lockstep,
/// reading without the payload, keeps neither).
fn gap_free_run(mut found: Vec<BufferInfo>) -> Vec<BufferInfo> {
    found.sort_by_key(|b| b.seqno);
    let mut start = found.len();
    while start > 0 {
        let i = start - 1;
        let continues = start == found.len() || found[i].seqno + 1 == found[start].seqno;
        if !continues {
            break;
        }
        start = i;
    }
    found.split_off(start)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A ring file as Galera 26.4 leaves it, built from buffers
    /// `(seqno, type, flags, payload)` written from the start.
    pub(crate) fn ring_file(
        gid: &str,
        offset: Option<u64>,
        buffers: &[(i64, i8, u16, Vec<u8>)],
        size: usize,
    ) -> Vec<u8> {
        let mut f = vec![0u8; size];
        let mut pre = format!("Version: 2\nGID: {gid}\n");
        if let Some(o) = offset {
            pre.push_str(&format!("seqno_min: 1\nseqno_max: 9\noffset: {o}\n"));
        }
        pre.push_str(&format!("synced: {}\n", u8::from(offset.is_some())));
        f[..pre.len()].copy_from_slice(pre.as_bytes());
        let mut at = RING_START as usize;
        for (seqno, kind, flags, payload) in buffers {
            let size = (HEADER_LEN as usize + payload.len()).next_multiple_of(8);
            f[at..at + 8].copy_from_slice(&seqno.to_le_bytes());
            f[at + 8..at + 16].copy_from_slice(&0xdead_beefu64.to_le_bytes());
            f[at + 16..at + 20].copy_from_slice(&(size as u32).to_le_bytes());
            f[at + 20..at + 22].copy_from_slice(&flags.to_le_bytes());
            f[at + 22] = 1;
            f[at + 23] = *kind as u8;
            f[at + 24..at + 24 + payload.len()].copy_from_slice(payload);
            at += size;
        }
        f
    }

    const GID: &str = "38a1b360-ea5c-11f1-9d53-2257cdddea97";

    #[test]
    fn the_run_ends_at_the_highest_seqno_without_gaps() {
        let bufs = vec![
            (3, TYPE_WRITESET, 1, vec![1; 10]),
            (5, TYPE_WRITESET, 1, vec![2; 30]),
            (0, TYPE_WRITESET, 0, vec![9; 5]), // never ordered
            (6, TYPE_CCHANGE, 1, vec![3; 16]),
            (7, TYPE_WRITESET, 3, vec![4; 8]),
            (-1, TYPE_WRITESET, 1, vec![5; 8]), // purged
        ];
        let f = ring_file(GID, Some(RING_START), &bufs, 4096);
        let s = scan(&f[..]).unwrap();
        assert_eq!(s.preamble.gid, parse_uuid(GID).unwrap());
        assert!(s.preamble.synced);
        let seqnos: Vec<i64> = s.run.iter().map(|b| b.seqno).collect();
        assert_eq!(seqnos, [5, 6, 7], "3 is before a gap");
        assert_eq!(s.dropped, 1);
        assert!(s.run[2].skipped());
        assert_eq!(s.run[1].kind, TYPE_CCHANGE);
        assert_eq!(s.run[0].payload_len, 32, "30 bytes padded to 8");
        // Without an offset (a crash) the walk from the start finds them too.
        let crashed = ring_file(GID, None, &bufs, 4096);
        assert_eq!(scan(&crashed[..]).unwrap().run, s.run);
    }

    #[test]
    fn a_wrapped_ring_is_read_from_the_offset_then_the_start() {
        // Written in order 1..=4, then 5 wrapped to the start over 1, with
        // its end marker over the head of 2: the oldest live buffer (3) is
        // at the offset.
        let first = ring_file(
            GID,
            None,
            &[
                (1, TYPE_WRITESET, 1, vec![1; 40]),
                (2, TYPE_WRITESET, 1, vec![1; 40]),
                (3, TYPE_WRITESET, 1, vec![1; 40]),
                (4, TYPE_WRITESET, 1, vec![1; 40]),
            ],
            1280 + 4 * 64 + 24,
        );
        let wrapped = ring_file(
            GID,
            Some(RING_START + 128),
            &[(5, TYPE_WRITESET, 1, vec![2; 40])],
            first.len(),
        );
        let mut f = first.clone();
        f[..RING_START as usize + 128].copy_from_slice(&wrapped[..RING_START as usize + 128]);
        let s = scan(&f[..]).unwrap();
        let seqnos: Vec<i64> = s.run.iter().map(|b| b.seqno).collect();
        assert_eq!(seqnos, [3, 4, 5]);
    }

    /// Writes one buffer at `at` of `f`; returns where the next goes.
    fn put(f: &mut [u8], at: usize, seqno: i64, len: usize) -> usize {
        let size = (HEADER_LEN as usize + len).next_multiple_of(8);
        f[at..at + 8].copy_from_slice(&seqno.to_le_bytes());
        f[at + 16..at + 20].copy_from_slice(&(size as u32).to_le_bytes());
        f[at + 20..at + 22].copy_from_slice(&BUFFER_RELEASED.to_le_bytes());
        f[at + 22] = 1;
        f[at + 23] = TYPE_WRITESET as u8;
        at + size
    }

    #[test]
    fn a_crashed_wrapped_ring_is_found_past_a_long_run_of_zeros() {
        // No offset (a crash): 5 and 6 at the start, then 2.5 MiB of zeros
        // (more than two probe windows), then 3 and 4, written before the
        // wrap, up to the end.
        let mut f = ring_file(GID, None, &[], 3 << 20);
        let mut at = put(&mut f, RING_START as usize, 5, 40);
        put(&mut f, at, 6, 40);
        at = (RING_START as usize + (5 << 19)).next_multiple_of(8);
        at = put(&mut f, at, 3, 40);
        put(&mut f, at, 4, 40);
        let s = scan(&f[..]).unwrap();
        let seqnos: Vec<i64> = s.run.iter().map(|b| b.seqno).collect();
        assert_eq!(seqnos, [3, 4, 5, 6]);
    }

    #[test]
    fn the_run_may_end_below_a_gap_above_the_position() {
        let f = ring_file(
            GID,
            Some(RING_START),
            &[
                (1, TYPE_WRITESET, 1, vec![1; 8]),
                (2, TYPE_WRITESET, 1, vec![1; 8]),
                (3, TYPE_WRITESET, 1, vec![1; 8]),
                (5, TYPE_WRITESET, 1, vec![1; 8]),
            ],
            4096,
        );
        let seqnos = |s: RingScan| s.run.iter().map(|b| b.seqno).collect::<Vec<_>>();
        assert_eq!(seqnos(scan(&f[..]).unwrap()), [5]);
        assert_eq!(seqnos(scan_up_to(&f[..], 3).unwrap()), [1, 2, 3]);
    }

    #[test]
    fn other_files_and_versions_are_refused() {
        let mut lockstep = vec![0u8; 4096];
        lockstep[..4].copy_from_slice(b"LSWC");
        assert_eq!(scan(&lockstep[..]), Err(RingError::NotGalera));
        assert_eq!(scan(&[0u8; 10][..]), Err(RingError::NotGalera));
        let mut v1 = ring_file(GID, None, &[], 4096);
        v1[9] = b'1';
        assert!(matches!(scan(&v1[..]), Err(RingError::Unsupported(_))));
        let mut no_gid = ring_file(GID, None, &[], 4096);
        no_gid[16] = b'z';
        assert!(matches!(scan(&no_gid[..]), Err(RingError::Unsupported(_))));
    }

    #[test]
    fn a_header_that_lies_about_its_size_ends_the_segment() {
        let mut f = ring_file(
            GID,
            None,
            &[
                (1, TYPE_WRITESET, 1, vec![1; 40]),
                (2, TYPE_WRITESET, 1, vec![1; 40]),
            ],
            4096,
        );
        // Buffer 2's size points past the file: the segment ends before it.
        let at = RING_START as usize + 64 + 16;
        f[at..at + 4].copy_from_slice(&100_000u32.to_le_bytes());
        let s = scan(&f[..]).unwrap();
        assert_eq!(s.run.iter().map(|b| b.seqno).collect::<Vec<_>>(), [1]);
        // A size that is no buffer size makes the one before it doubtful
        // too (Galera checks the header after each buffer).
        f[at..at + 4].copy_from_slice(&65u32.to_le_bytes());
        let s = scan(&f[..]).unwrap();
        assert!(s.run.is_empty(), "{s:?}");
    }
}
