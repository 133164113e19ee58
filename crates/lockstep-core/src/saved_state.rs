//! `grastate.dat`: the node's saved position, in Galera's text format.
//!
//! The format is Galera's so that operators' habits and tools keep working:
//! people edit `safe_to_bootstrap` by hand, `galera_new_cluster` docs point
//! at it, and MariaDB's tests grep it. That is also why it carries no
//! checksum: a hand edit must stay valid. Instead the reader is strict and
//! bounded: a size cap, a known version, and every field validated.
//!
//! ```text
//! # GALERA saved state
//! version: 2.1
//! uuid:    5f0e6c4a-...
//! seqno:   -1
//! safe_to_bootstrap: 1
//! ```

use std::fmt;
use wsrep_abi::Uuid;

/// Larger files are not ours: refuse before parsing.
pub const MAX_FILE_BYTES: usize = 4096;

/// The format version we write and accept.
pub const VERSION: &str = "2.1";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SavedState {
    /// History UUID; nil when the node has no usable state.
    pub uuid: Uuid,
    /// Last committed seqno, or -1 while running / unknown.
    pub seqno: i64,
    /// Whether bootstrapping a new cluster from this node is safe.
    pub safe_to_bootstrap: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SavedStateError {
    TooLarge(usize),
    UnsupportedVersion(String),
    BadField { line: usize, text: String },
}

impl fmt::Display for SavedStateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SavedStateError::TooLarge(n) => write!(
                f,
                "grastate.dat is {n} bytes (limit {MAX_FILE_BYTES}); it is not a saved state file"
            ),
            SavedStateError::UnsupportedVersion(v) => {
                write!(
                    f,
                    "grastate.dat has unsupported version '{v}' (expected {VERSION})"
                )
            }
            SavedStateError::BadField { line, text } => write!(
                f,
                "grastate.dat line {line} is malformed: '{text}'; fix or delete the file \
                 (deleting it forces a full state transfer)"
            ),
        }
    }
}

impl std::error::Error for SavedStateError {}

impl Default for SavedState {
    /// No position: a node in this state needs a full state transfer.
    fn default() -> Self {
        SavedState {
            uuid: Uuid::NIL,
            seqno: -1,
            safe_to_bootstrap: true,
        }
    }
}

impl SavedState {
    /// Whether the file names a complete position (history and seqno).
    pub fn has_position(&self) -> bool {
        !self.uuid.is_nil() && self.seqno >= 0
    }

    pub fn parse(text: &str) -> Result<SavedState, SavedStateError> {
        if text.len() > MAX_FILE_BYTES {
            return Err(SavedStateError::TooLarge(text.len()));
        }
        let mut state = SavedState::default();
        for (idx, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = || SavedStateError::BadField {
                line: idx + 1,
                text: raw.to_string(),
            };
            let (key, value) = line.split_once(':').ok_or_else(bad)?;
            let value = value.trim();
            match key.trim() {
                "version" if value != VERSION && value != "2.0" => {
                    return Err(SavedStateError::UnsupportedVersion(value.to_string()));
                }
                "version" => {}
                "uuid" => state.uuid = value.parse().map_err(|_| bad())?,
                "seqno" => {
                    state.seqno = value.parse().map_err(|_| bad())?;
                    if state.seqno < -1 {
                        return Err(bad());
                    }
                }
                "safe_to_bootstrap" => {
                    state.safe_to_bootstrap = match value {
                        "0" => false,
                        "1" => true,
                        _ => return Err(bad()),
                    }
                }
                // Galera skips fields it does not know; so do we, so that a
                // newer writer's extra lines do not brick an older reader.
                _ => {}
            }
        }
        Ok(state)
    }

    pub fn render(&self) -> String {
        format!(
            "# GALERA saved state\nversion: {VERSION}\nuuid:    {}\nseqno:   {}\nsafe_to_bootstrap: {}\n",
            self.uuid,
            self.seqno,
            u8::from(self.safe_to_bootstrap)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const GALERA_WRITTEN: &str = "# GALERA saved state\nversion: 2.1\nuuid:    6c5e3a2e-8d38-11ee-9a4f-0b3d4e5f6a7b\nseqno:   42\nsafe_to_bootstrap: 0\n          \n";

    #[test]
    fn reads_a_file_written_by_galera_including_its_space_padding() {
        let s = SavedState::parse(GALERA_WRITTEN).unwrap();
        assert_eq!(s.uuid.to_string(), "6c5e3a2e-8d38-11ee-9a4f-0b3d4e5f6a7b");
        assert_eq!(s.seqno, 42);
        assert!(!s.safe_to_bootstrap);
        assert!(s.has_position());
    }

    #[test]
    fn render_parse_round_trip() {
        let s = SavedState::parse(GALERA_WRITTEN).unwrap();
        assert_eq!(SavedState::parse(&s.render()).unwrap(), s);
        assert!(s.render().contains("safe_to_bootstrap: 0"));
    }

    #[test]
    fn rejects_garbage_with_the_line_number() {
        let err = SavedState::parse("version: 2.1\nseqno: twelve\n").unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
        assert!(SavedState::parse("version: 9.9\n").is_err());
        assert!(SavedState::parse("seqno: -5\n").is_err());
        assert!(SavedState::parse("safe_to_bootstrap: yes\n").is_err());
        assert!(SavedState::parse(&"#".repeat(MAX_FILE_BYTES + 1)).is_err());
    }

    #[test]
    fn an_empty_file_means_no_position() {
        let s = SavedState::parse("").unwrap();
        assert!(!s.has_position());
    }

    proptest! {
        #[test]
        fn parser_never_panics(text in ".{0,600}") {
            let _ = SavedState::parse(&text);
        }

        #[test]
        fn any_state_round_trips(bytes in any::<[u8; 16]>(), seqno in -1i64..i64::MAX, safe in any::<bool>()) {
            let s = SavedState { uuid: Uuid::from_bytes(bytes), seqno, safe_to_bootstrap: safe };
            prop_assert_eq!(SavedState::parse(&s.render()).unwrap(), s);
        }
    }
}
