//! `gvwstate.dat`: the last primary view this node was in, so that after
//! a crash of the whole cluster the nodes can re-form that primary
//! component by themselves (`pc.recovery`, `group::recovery`).
//!
//! The layout is Galera's, so operators recognise it (and may delete it
//! to prevent a recovery); each member line carries the member's group
//! address as a third field, which Galera's does not have, so the nodes
//! can find each other beyond `wsrep_cluster_address`, and where peers use
//! TLS the SHA-256 fingerprint of the certificate the member was bound to
//! as a fourth (`-` stands for an unknown address before it), so that a
//! restarted node takes a `pc.recovery` vote for a member only from a peer
//! presenting that member's certificate (ADR 0014). A clean shutdown removes
//! the file, so Galera, started after one, never reads them. No checksum, for the
//! same reason as `grastate.dat`: the reader is strict and bounded instead.
//!
//! ```text
//! my_uuid: 9b1a0c9e-...
//! #vwbeg
//! view_id: 3 6c21e1f0-... 5
//! bootstrap: 0
//! member: 6c21e1f0-... 0 127.0.0.1:4567 3f2a...(64 hex digits)
//! member: 9b1a0c9e-... 0 127.0.0.1:4577 c07e...
//! #vwend
//! ```
//!
//! `view_id` is `<type> <history uuid> <seqno>`; type 3 is Galera's
//! primary view, and the number is the seqno the view took in the
//! history (views are ordered by it, across restarts too, unlike
//! `wsrep_cluster_conf_id`, which starts again at 1 in a new cluster).

use std::fmt;
use wsrep_abi::Uuid;

/// Larger files are not ours.
pub const MAX_FILE_BYTES: usize = 64 * 1024;
/// More members than any cluster has: refuse.
pub const MAX_MEMBERS: usize = 256;
/// Galera's view type number of a primary view.
const VIEW_TYPE_PRIMARY: &str = "3";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedMember {
    pub uuid: Uuid,
    /// The member's group-channel address; empty if unknown.
    pub addr: String,
    /// The SHA-256 fingerprint of the certificate the member was bound to
    /// (TLS); `None` without TLS, or before its binding was ordered.
    pub cert: Option<[u8; 32]>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedView {
    /// This node's member id in that view.
    pub me: Uuid,
    /// The cluster's history.
    pub history: Uuid,
    /// The seqno of the view in the history.
    pub seqno: i64,
    pub members: Vec<SavedMember>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SavedViewError {
    TooLarge(usize),
    Malformed { line: usize, text: String },
    Missing(&'static str),
}

impl fmt::Display for SavedViewError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SavedViewError::TooLarge(n) => write!(
                f,
                "gvwstate.dat is {n} bytes (limit {MAX_FILE_BYTES}); not a saved view"
            ),
            SavedViewError::Malformed { line, text } => write!(
                f,
                "gvwstate.dat line {line} is malformed: '{text}'; delete the file to start \
                 without automatic recovery"
            ),
            SavedViewError::Missing(what) => write!(
                f,
                "gvwstate.dat has no {what}; delete the file to start without automatic recovery"
            ),
        }
    }
}

impl std::error::Error for SavedViewError {}

impl SavedView {
    pub fn to_text(&self) -> String {
        let mut s = format!(
            "my_uuid: {}\n#vwbeg\nview_id: {VIEW_TYPE_PRIMARY} {} {}\nbootstrap: 0\n",
            self.me, self.history, self.seqno
        );
        for m in &self.members {
            match &m.cert {
                None => s.push_str(&format!("member: {} 0 {}\n", m.uuid, m.addr)),
                Some(fp) => {
                    let addr = if m.addr.is_empty() { "-" } else { &m.addr };
                    s.push_str(&format!("member: {} 0 {addr} {}\n", m.uuid, hex(fp)));
                }
            }
        }
        s.push_str("#vwend\n");
        s
    }

    pub fn parse(text: &str) -> Result<SavedView, SavedViewError> {
        if text.len() > MAX_FILE_BYTES {
            return Err(SavedViewError::TooLarge(text.len()));
        }
        let mut me = None;
        let mut view = None;
        let mut members = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let bad = || SavedViewError::Malformed {
                line: i + 1,
                text: line.chars().take(120).collect(),
            };
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (key, value) = line.split_once(':').ok_or_else(bad)?;
            let fields: Vec<&str> = value.split_whitespace().collect();
            match key.trim() {
                "my_uuid" => me = Some(uuid_field(&fields, 0).ok_or_else(bad)?),
                "view_id" => {
                    if fields.len() != 3 || fields[0] != VIEW_TYPE_PRIMARY {
                        return Err(bad());
                    }
                    let history = uuid_field(&fields, 1).ok_or_else(bad)?;
                    let seqno: i64 = fields[2].parse().map_err(|_| bad())?;
                    view = Some((history, seqno));
                }
                "member" => {
                    if !(2..=4).contains(&fields.len()) || members.len() >= MAX_MEMBERS {
                        return Err(bad());
                    }
                    let cert = match fields.get(3) {
                        Some(f) => Some(unhex(f).ok_or_else(bad)?),
                        None => None,
                    };
                    let addr = match fields.get(2) {
                        Some(&"-") if cert.is_some() => String::new(),
                        Some(a) => a.to_string(),
                        None => String::new(),
                    };
                    members.push(SavedMember {
                        uuid: uuid_field(&fields, 0).ok_or_else(bad)?,
                        addr,
                        cert,
                    });
                }
                "bootstrap" => {}
                _ => return Err(bad()),
            }
        }
        let me = me.ok_or(SavedViewError::Missing("my_uuid"))?;
        let (history, seqno) = view.ok_or(SavedViewError::Missing("view_id"))?;
        if !members.iter().any(|m| m.uuid == me) {
            return Err(SavedViewError::Missing("member line for my_uuid"));
        }
        Ok(SavedView {
            me,
            history,
            seqno,
            members,
        })
    }
}

fn uuid_field(fields: &[&str], i: usize) -> Option<Uuid> {
    fields.get(i).and_then(|f| Uuid::parse(f).ok())
}

fn hex(fp: &[u8; 32]) -> String {
    fp.iter().map(|b| format!("{b:02x}")).collect()
}

/// 64 hex digits, nothing else.
fn unhex(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(b: u8) -> Uuid {
        Uuid::from_bytes([b; 16])
    }

    fn sample() -> SavedView {
        SavedView {
            me: u(2),
            history: u(9),
            seqno: 5,
            members: vec![
                SavedMember {
                    uuid: u(1),
                    addr: "127.0.0.1:4567".into(),
                    cert: None,
                },
                SavedMember {
                    uuid: u(2),
                    addr: "[::1]:4577".into(),
                    cert: Some([0xab; 32]),
                },
            ],
        }
    }

    #[test]
    fn round_trips_in_galeras_layout() {
        let text = sample().to_text();
        assert!(text.starts_with("my_uuid: 02020202-0202-0202-0202-020202020202\n#vwbeg\n"));
        assert!(text.contains("view_id: 3 09090909-0909-0909-0909-090909090909 5\n"));
        assert!(text.contains(&format!(" 0 [::1]:4577 {}\n", "ab".repeat(32))));
        assert_eq!(SavedView::parse(&text), Ok(sample()));
    }

    #[test]
    fn a_certificate_without_an_address_round_trips() {
        let mut v = sample();
        v.members[1].addr.clear();
        let text = v.to_text();
        assert!(
            text.contains(&format!(" 0 - {}\n", "ab".repeat(32))),
            "{text}"
        );
        assert_eq!(SavedView::parse(&text), Ok(v));
    }

    #[test]
    fn a_bad_fingerprint_is_refused() {
        let good = sample().to_text();
        for bad in [
            "ab".repeat(31),
            "zz".repeat(32),
            format!("{}0", "ab".repeat(32)),
        ] {
            let text = good.replace(&"ab".repeat(32), &bad);
            assert!(SavedView::parse(&text).is_err(), "accepted:\n{text}");
        }
    }

    #[test]
    fn galeras_own_member_lines_parse_without_an_address() {
        let text = "my_uuid: 01010101-0101-0101-0101-010101010101\n#vwbeg\n\
                    view_id: 3 09090909-0909-0909-0909-090909090909 2\nbootstrap: 0\n\
                    member: 01010101-0101-0101-0101-010101010101 0\n#vwend\n";
        let v = SavedView::parse(text).expect("Galera's file");
        assert_eq!(v.members[0].addr, "");
    }

    proptest::proptest! {
        /// Any text (here: lines built from the file's own vocabulary)
        /// parses or fails cleanly; what parses round-trips. The fuzz
        /// target `saved_view` does the same with raw bytes.
        #[test]
        fn parse_never_panics_and_accepted_views_round_trip(
            lines in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::string::string_regex("my_uuid: [0-9a-f-]{0,40}").unwrap(),
                    proptest::string::string_regex("view_id: [0-9] [0-9a-f-]{36} -?[0-9]{1,3}").unwrap(),
                    proptest::string::string_regex("member: (01010101-0101-0101-0101-010101010101|[0-9a-f-]{36}) [0-9]( [a-z0-9.:-]{0,12}( [0-9a-f]{62,65})?)?").unwrap(),
                    proptest::string::string_regex("[#a-z_]{0,8}:? ?[ -~]{0,20}").unwrap(),
                ],
                0..8,
            )
        ) {
            let mut text = lines.join("\n");
            text.insert_str(0, "my_uuid: 01010101-0101-0101-0101-010101010101\n");
            if let Ok(v) = SavedView::parse(&text) {
                proptest::prop_assert_eq!(SavedView::parse(&v.to_text()), Ok(v));
            }
        }
    }

    #[test]
    fn malformed_files_are_clear_errors() {
        let good = sample().to_text();
        let cases = [
            good.replace("view_id: 3", "view_id: 2"),
            good.replace("member: 01010101", "member: zz"),
            good.replace("bootstrap: 0", "surprise: 1"),
            good.replace("my_uuid", "my_uid"),
        ];
        for text in cases {
            assert!(SavedView::parse(&text).is_err(), "accepted:\n{text}");
        }
        let no_me = good.replace(
            &format!(
                "member: 02020202-0202-0202-0202-020202020202 0 [::1]:4577 {}\n",
                "ab".repeat(32)
            ),
            "",
        );
        assert_eq!(
            SavedView::parse(&no_me),
            Err(SavedViewError::Missing("member line for my_uuid"))
        );
        let big = "#".repeat(MAX_FILE_BYTES + 1);
        assert_eq!(
            SavedView::parse(&big),
            Err(SavedViewError::TooLarge(MAX_FILE_BYTES + 1))
        );
    }
}
