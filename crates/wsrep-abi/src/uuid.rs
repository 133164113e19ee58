//! `wsrep_uuid_t` and `wsrep_gtid_t`, with their text forms.

use core::fmt;
use core::str::FromStr;

use crate::consts::{SEQNO_UNDEFINED, UUID_STR_LEN};

/// `wsrep_uuid_t`: 16 raw bytes, 8-byte aligned (the C type is a union with a
/// `size_t`). All zero bytes is the undefined ("nil") UUID.
///
/// The text form is the usual 36-character `8-4-4-4-12` lowercase hex.
#[repr(C, align(8))]
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Uuid {
    /// The raw bytes, in text order.
    pub data: [u8; 16],
}

/// Byte offsets in the text form where a dash must appear.
const DASHES: [usize; 4] = [8, 13, 18, 23];

impl Uuid {
    /// The nil UUID (`WSREP_UUID_UNDEFINED`).
    pub const NIL: Uuid = Uuid { data: [0; 16] };

    /// Wraps raw bytes.
    pub const fn from_bytes(data: [u8; 16]) -> Uuid {
        Uuid { data }
    }

    /// The raw bytes.
    pub const fn as_bytes(&self) -> &[u8; 16] {
        &self.data
    }

    /// True if every byte is zero.
    pub const fn is_nil(&self) -> bool {
        let mut i = 0;
        while i < 16 {
            if self.data[i] != 0 {
                return false;
            }
            i += 1;
        }
        true
    }

    /// Parses the strict 36-character text form (`8-4-4-4-12` hex digits,
    /// either case). Equivalent to `s.parse::<Uuid>()`.
    pub fn parse(s: &str) -> Result<Uuid, UuidParseError> {
        let b = s.as_bytes();
        if b.len() != UUID_STR_LEN {
            return Err(UuidParseError::Length(b.len()));
        }
        let mut data = [0u8; 16];
        let mut nibble = 0usize;
        let mut high = None;
        for (pos, &c) in b.iter().enumerate() {
            if DASHES.contains(&pos) {
                if c != b'-' {
                    return Err(UuidParseError::Dash(pos));
                }
                continue;
            }
            let v = match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                b'A'..=b'F' => c - b'A' + 10,
                _ => return Err(UuidParseError::Digit(pos)),
            };
            match high.take() {
                None => high = Some(v),
                Some(h) => {
                    data[nibble] = (h << 4) | v;
                    nibble += 1;
                }
            }
        }
        debug_assert_eq!((nibble, high), (16, None));
        Ok(Uuid { data })
    }
}

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; UUID_STR_LEN];
        let mut pos = 0;
        for (i, byte) in self.data.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                out[pos] = b'-';
                pos += 1;
            }
            out[pos] = HEX[usize::from(byte >> 4)];
            out[pos + 1] = HEX[usize::from(byte & 0xF)];
            pos += 2;
        }
        // Only ASCII hex digits and dashes were written.
        let s = core::str::from_utf8(&out).map_err(|_| fmt::Error)?;
        f.pad(s)
    }
}

impl fmt::Debug for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for Uuid {
    type Err = UuidParseError;
    fn from_str(s: &str) -> Result<Uuid, UuidParseError> {
        Uuid::parse(s)
    }
}

/// Why a UUID text was rejected. Positions are byte offsets in the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UuidParseError {
    /// The text is not exactly 36 bytes long (the actual length is given).
    Length(usize),
    /// A dash was expected at this position.
    Dash(usize),
    /// A hex digit was expected at this position.
    Digit(usize),
}

impl fmt::Display for UuidParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UuidParseError::Length(n) => {
                write!(f, "UUID text must be {UUID_STR_LEN} characters, got {n}")
            }
            UuidParseError::Dash(p) => write!(f, "UUID text: expected '-' at position {p}"),
            UuidParseError::Digit(p) => {
                write!(f, "UUID text: expected a hex digit at position {p}")
            }
        }
    }
}

impl std::error::Error for UuidParseError {}

/// `wsrep_gtid_t`: a history UUID and a sequence number.
///
/// The text form is `uuid:seqno`, e.g.
/// `6a2f1b0e-0000-4000-8000-00000000000a:42`. `Default` is
/// [`Gtid::UNDEFINED`].
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Gtid {
    /// History (state) UUID.
    pub uuid: Uuid,
    /// Sequence number, `-1` if undefined.
    pub seqno: i64,
}

impl Gtid {
    /// `WSREP_GTID_UNDEFINED`: nil UUID and seqno `-1`.
    pub const UNDEFINED: Gtid = Gtid {
        uuid: Uuid::NIL,
        seqno: SEQNO_UNDEFINED,
    };

    /// Builds a GTID.
    pub const fn new(uuid: Uuid, seqno: i64) -> Gtid {
        Gtid { uuid, seqno }
    }

    /// True if this is exactly [`Gtid::UNDEFINED`].
    pub const fn is_undefined(&self) -> bool {
        self.uuid.is_nil() && self.seqno == SEQNO_UNDEFINED
    }

    /// Parses `uuid:seqno`. The UUID part is strict (see [`Uuid::parse`]);
    /// the seqno is an optional `-` followed by decimal digits that fit in
    /// an `i64` (no `+`, no spaces). Equivalent to `s.parse::<Gtid>()`.
    pub fn parse(s: &str) -> Result<Gtid, GtidParseError> {
        let (u, n) = s.split_once(':').ok_or(GtidParseError::MissingSeparator)?;
        let uuid = Uuid::parse(u).map_err(GtidParseError::Uuid)?;
        let digits = n.strip_prefix('-').unwrap_or(n);
        if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
            return Err(GtidParseError::Seqno);
        }
        let seqno = n.parse::<i64>().map_err(|_| GtidParseError::Seqno)?;
        Ok(Gtid { uuid, seqno })
    }
}

impl Default for Gtid {
    fn default() -> Gtid {
        Gtid::UNDEFINED
    }
}

impl fmt::Display for Gtid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.uuid, self.seqno)
    }
}

impl fmt::Debug for Gtid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for Gtid {
    type Err = GtidParseError;
    fn from_str(s: &str) -> Result<Gtid, GtidParseError> {
        Gtid::parse(s)
    }
}

/// Why a GTID text was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GtidParseError {
    /// There is no `:` between the UUID and the seqno.
    MissingSeparator,
    /// The UUID part is malformed.
    Uuid(UuidParseError),
    /// The seqno part is not a decimal `i64`.
    Seqno,
}

impl fmt::Display for GtidParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GtidParseError::MissingSeparator => f.write_str("GTID text: missing ':'"),
            GtidParseError::Uuid(e) => write!(f, "GTID text: {e}"),
            GtidParseError::Seqno => f.write_str("GTID text: seqno is not a decimal i64"),
        }
    }
}

impl std::error::Error for GtidParseError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            GtidParseError::Uuid(e) => Some(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "6a2f1b0e-93c4-11ee-8a1b-0242ac12000a";

    #[test]
    fn uuid_round_trip() {
        let u: Uuid = TEXT.parse().unwrap();
        assert_eq!(
            u.data,
            [
                0x6a, 0x2f, 0x1b, 0x0e, 0x93, 0xc4, 0x11, 0xee, 0x8a, 0x1b, 0x02, 0x42, 0xac, 0x12,
                0x00, 0x0a
            ]
        );
        assert_eq!(u.to_string(), TEXT);
        assert_eq!(format!("{u:?}"), TEXT);
        assert!(!u.is_nil());
    }

    #[test]
    fn uuid_uppercase_accepted_printed_lowercase() {
        let u = Uuid::parse(&TEXT.to_uppercase()).unwrap();
        assert_eq!(u.to_string(), TEXT);
    }

    #[test]
    fn uuid_nil() {
        assert!(Uuid::NIL.is_nil());
        assert_eq!(Uuid::default(), Uuid::NIL);
        assert_eq!(
            Uuid::NIL.to_string(),
            "00000000-0000-0000-0000-000000000000"
        );
        assert_eq!(
            Uuid::parse("00000000-0000-0000-0000-000000000000").unwrap(),
            Uuid::NIL
        );
    }

    #[test]
    fn uuid_all_bytes_round_trip() {
        for b in 0..=255u8 {
            let mut d = [0u8; 16];
            for (i, x) in d.iter_mut().enumerate() {
                *x = b.wrapping_add(i as u8 * 17);
            }
            let u = Uuid::from_bytes(d);
            assert_eq!(Uuid::parse(&u.to_string()).unwrap(), u);
        }
    }

    #[test]
    fn uuid_rejects_malformed() {
        use UuidParseError::*;
        assert_eq!(Uuid::parse(""), Err(Length(0)));
        assert_eq!(Uuid::parse(&TEXT[..35]), Err(Length(35)));
        assert_eq!(Uuid::parse(&format!("{TEXT}0")), Err(Length(37)));
        // 32 hex digits without dashes.
        assert_eq!(
            Uuid::parse("6a2f1b0e93c411ee8a1b0242ac12000a"),
            Err(Length(32))
        );
        // Braced form.
        assert!(Uuid::parse(&format!("{{{TEXT}}}")).is_err());
        // Dash moved.
        assert_eq!(
            Uuid::parse("6a2f1b0-e93c4-11ee-8a1b-0242ac12000a"),
            Err(Digit(7))
        );
        assert_eq!(
            Uuid::parse("6a2f1b0e093c4-11ee-8a1b-0242ac12000a"),
            Err(Dash(8))
        );
        assert_eq!(
            Uuid::parse("6a2f1b0e-93c4-11ee-8a1b-0242ac12000g"),
            Err(Digit(35))
        );
        assert_eq!(
            Uuid::parse("6a2f1b0e-93c4-11ee-8a1b 0242ac12000a"),
            Err(Dash(23))
        );
        assert!(Uuid::parse(" 6a2f1b0e-93c4-11ee-8a1b-0242ac12000").is_err());
        // Non-ASCII of the right byte length.
        assert!(Uuid::parse("6a2f1b0e-93c4-11ee-8a1b-0242ac1200é").is_err());
    }

    #[test]
    fn gtid_round_trip() {
        for seqno in [-1i64, 0, 1, 42, i64::MAX, i64::MIN] {
            let g = Gtid::new(Uuid::parse(TEXT).unwrap(), seqno);
            let s = g.to_string();
            assert_eq!(s, format!("{TEXT}:{seqno}"));
            assert!(s.len() <= crate::GTID_STR_LEN);
            assert_eq!(s.parse::<Gtid>().unwrap(), g);
        }
        assert_eq!(
            Gtid::UNDEFINED.to_string(),
            "00000000-0000-0000-0000-000000000000:-1"
        );
        assert!(Gtid::parse("00000000-0000-0000-0000-000000000000:-1")
            .unwrap()
            .is_undefined());
        assert_eq!(Gtid::default(), Gtid::UNDEFINED);
    }

    #[test]
    fn gtid_rejects_malformed() {
        use GtidParseError::*;
        assert_eq!(Gtid::parse(TEXT), Err(MissingSeparator));
        assert_eq!(Gtid::parse(&format!("{TEXT}:")), Err(Seqno));
        assert_eq!(Gtid::parse(&format!("{TEXT}:-")), Err(Seqno));
        assert_eq!(Gtid::parse(&format!("{TEXT}:+1")), Err(Seqno));
        assert_eq!(Gtid::parse(&format!("{TEXT}: 1")), Err(Seqno));
        assert_eq!(Gtid::parse(&format!("{TEXT}:1 ")), Err(Seqno));
        assert_eq!(Gtid::parse(&format!("{TEXT}:1:2")), Err(Seqno));
        assert_eq!(Gtid::parse(&format!("{TEXT}:0x10")), Err(Seqno));
        assert_eq!(
            Gtid::parse(&format!("{TEXT}:9223372036854775808")),
            Err(Seqno)
        );
        assert_eq!(
            Gtid::parse(&format!("x{TEXT}:1")),
            Err(Uuid(UuidParseError::Length(37)))
        );
        assert!(matches!(Gtid::parse(":1"), Err(Uuid(_))));
    }
}
