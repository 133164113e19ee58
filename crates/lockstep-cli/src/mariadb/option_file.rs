//! MariaDB option files (`my.cnf` syntax): the credentials of `check` and
//! `probe` come from here, never from the command line, where `ps` and shell
//! history would show them.
//!
//! Supported: `[group]` headers, `key=value` and bare `key` lines, `#` and `;`
//! comment lines, `#` comments after unquoted values, single or double
//! quotes, the escapes `\n \t \r \b \s \\`, `!include FILE` and
//! `!includedir DIR` (its `*.cnf` files, in name order). Option names treat
//! `-` and `_` alike, as the server does.

use std::collections::BTreeMap;
use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Includes nest at most this deep (a loop of includes is an error, not a hang).
const MAX_INCLUDE_DEPTH: usize = 10;

/// Why an option file could not be used.
#[derive(Debug)]
pub enum OptionFileError {
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// MariaDB ignores world-writable option files; so do we, loudly.
    WorldWritable {
        path: PathBuf,
    },
    Syntax {
        path: PathBuf,
        line: usize,
        message: String,
    },
    IncludeTooDeep {
        path: PathBuf,
    },
}

impl fmt::Display for OptionFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OptionFileError::Read { path, source } => {
                write!(f, "cannot read option file {}: {source}", path.display())
            }
            OptionFileError::WorldWritable { path } => write!(
                f,
                "option file {} is world-writable, so anyone could change the credentials; \
                 run `chmod o-w {}` (MariaDB ignores such files too)",
                path.display(),
                path.display()
            ),
            OptionFileError::Syntax {
                path,
                line,
                message,
            } => write!(f, "{}:{line}: {message}", path.display()),
            OptionFileError::IncludeTooDeep { path } => write!(
                f,
                "{}: !include nested more than {MAX_INCLUDE_DEPTH} levels (an include loop?)",
                path.display()
            ),
        }
    }
}

impl std::error::Error for OptionFileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OptionFileError::Read { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The options of every group, in file order; later values win.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct OptionFile {
    /// group name → (normalised option name → value; `None` for a bare key).
    groups: BTreeMap<String, BTreeMap<String, Option<String>>>,
}

impl OptionFile {
    /// Reads `path` and what it includes.
    pub fn load(path: &Path) -> Result<OptionFile, OptionFileError> {
        let mut out = OptionFile::default();
        out.load_into(path, 0)?;
        Ok(out)
    }

    /// Parses text as if read from `path` (includes are resolved on disk).
    #[cfg(test)]
    pub fn parse(path: &Path, text: &str) -> Result<OptionFile, OptionFileError> {
        let mut out = OptionFile::default();
        out.parse_into(path, text, 0)?;
        Ok(out)
    }

    fn load_into(&mut self, path: &Path, depth: usize) -> Result<(), OptionFileError> {
        if depth > MAX_INCLUDE_DEPTH {
            return Err(OptionFileError::IncludeTooDeep {
                path: path.to_path_buf(),
            });
        }
        let read_err = |source| OptionFileError::Read {
            path: path.to_path_buf(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(read_err)?;
        if meta.permissions().mode() & 0o002 != 0 {
            return Err(OptionFileError::WorldWritable {
                path: path.to_path_buf(),
            });
        }
        let text = std::fs::read_to_string(path).map_err(read_err)?;
        self.parse_into(path, &text, depth)
    }

    fn parse_into(&mut self, path: &Path, text: &str, depth: usize) -> Result<(), OptionFileError> {
        let mut group: Option<String> = None;
        for (i, raw) in text.lines().enumerate() {
            let syntax = |message: String| OptionFileError::Syntax {
                path: path.to_path_buf(),
                line: i + 1,
                message,
            };
            match Line::of(raw) {
                Line::Nothing => {}
                Line::Directive { word, arg } => {
                    let target = include_target(path, arg);
                    match word {
                        "include" => self.load_into(&target, depth + 1)?,
                        "includedir" => {
                            let files =
                                cnf_files_in(&target).map_err(|source| OptionFileError::Read {
                                    path: target.clone(),
                                    source,
                                })?;
                            for file in files {
                                self.load_into(&file, depth + 1)?;
                            }
                        }
                        _ => return Err(syntax(format!("unknown directive `!{word}`"))),
                    }
                }
                Line::Group(name) => group = Some(name.map_err(syntax)?),
                Line::Option { key, value } => {
                    let Some(g) = &group else {
                        return Err(syntax(format!(
                            "option `{}` before any [group] header",
                            raw.trim()
                        )));
                    };
                    let value = value.map_err(syntax)?;
                    self.groups.entry(g.clone()).or_default().insert(key, value);
                }
            }
        }
        Ok(())
    }

    /// The value of `option` from the last of `groups` that sets it
    /// (`groups` in increasing precedence). A bare key counts as empty.
    pub fn get(&self, groups: &[&str], option: &str) -> Option<String> {
        let key = normalise_name(option);
        groups
            .iter()
            .rev()
            .filter_map(|g| self.groups.get(*g))
            .find_map(|opts| opts.get(&key))
            .map(|v| v.clone().unwrap_or_default())
    }
}

/// One line of an option file, as both readers see it (this one, and
/// the configuration check's `ServerSettings`, which reads what the
/// server reads and keeps going where this one stops).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line<'a> {
    /// Empty, or a `#` or `;` comment.
    Nothing,
    /// `!word arg`: `!include FILE`, `!includedir DIR`, or an unknown one.
    Directive { word: &'a str, arg: &'a str },
    /// `[name]`, lowercased; why not, for a header without `]` or a name.
    Group(Result<String, String>),
    /// `key=value`, or a bare `key` (`None`); the key normalised
    /// ([`normalise_name`]); why not, for a value that does not parse or a
    /// line without a name.
    Option {
        key: String,
        value: Result<Option<String>, String>,
    },
}

impl Line<'_> {
    pub(crate) fn of(raw: &str) -> Line<'_> {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            return Line::Nothing;
        }
        if let Some(rest) = line.strip_prefix('!') {
            let (word, arg) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            return Line::Directive {
                word,
                arg: arg.trim(),
            };
        }
        if let Some(rest) = line.strip_prefix('[') {
            return Line::Group(match rest.split_once(']') {
                None => Err(format!("unterminated group header `{line}`")),
                Some((n, _)) if n.trim().is_empty() => Err("empty group name `[]`".into()),
                Some((n, _)) => Ok(n.trim().to_ascii_lowercase()),
            });
        }
        // An `=` after a `#` is inside the comment of a bare key
        // (`key  # why=x`).
        let (key, value) = match line.split_once('=') {
            Some((k, v)) if !k.contains('#') => (k, parse_value(v).map(Some)),
            _ => (strip_comment(line), Ok(None)),
        };
        let key = normalise_name(key);
        let value = if key.is_empty() {
            Err(format!("missing option name in `{line}`"))
        } else {
            value
        };
        Line::Option { key, value }
    }
}

/// An include's path: relative to the including file's directory, as the
/// server resolves it.
pub(crate) fn include_target(including: &Path, arg: &str) -> PathBuf {
    including.parent().unwrap_or(Path::new(".")).join(arg)
}

pub(crate) fn cnf_files_in(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "cnf") && p.is_file())
        .collect();
    files.sort();
    Ok(files)
}

pub(crate) fn normalise_name(name: &str) -> String {
    name.trim().to_ascii_lowercase().replace('-', "_")
}

/// Drops an unquoted `#` comment from a key.
pub(crate) fn strip_comment(s: &str) -> &str {
    s.split_once('#').map_or(s, |(k, _)| k)
}

/// A value after `=`: trimmed, unquoted, unescaped, comment removed.
pub(crate) fn parse_value(raw: &str) -> Result<String, String> {
    let s = raw.trim();
    let mut chars = s.chars();
    let quote = match s.chars().next() {
        Some(q @ ('\'' | '"')) => {
            chars.next();
            Some(q)
        }
        _ => None,
    };
    let mut out = String::new();
    let mut closed = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('r') => out.push('\r'),
                Some('b') => out.push('\u{8}'),
                Some('s') => out.push(' '),
                Some(other) => out.push(other),
                None => out.push('\\'),
            },
            c if Some(c) == quote => {
                closed = true;
                let rest = chars.as_str().trim();
                if !(rest.is_empty() || rest.starts_with('#')) {
                    return Err(format!("unexpected `{rest}` after a quoted value"));
                }
                break;
            }
            '#' if quote.is_none() => break,
            c => out.push(c),
        }
    }
    if quote.is_some() && !closed {
        return Err(format!("unterminated quote in value `{s}`"));
    }
    Ok(if quote.is_some() {
        out
    } else {
        out.trim_end().to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> OptionFile {
        OptionFile::parse(Path::new("/t.cnf"), text).unwrap()
    }

    #[test]
    fn later_groups_override_earlier_ones() {
        let f = parse(
            "[client]\nuser=app\npassword=one\nsocket=/run/a.sock\n\
             [clustercheck]\nuser = clustercheck\n",
        );
        let g = ["client", "clustercheck"];
        assert_eq!(f.get(&g, "user").as_deref(), Some("clustercheck"));
        assert_eq!(f.get(&g, "password").as_deref(), Some("one"));
        assert_eq!(f.get(&g, "socket").as_deref(), Some("/run/a.sock"));
        assert_eq!(f.get(&g, "host"), None);
        assert_eq!(f.get(&["mysqld"], "user"), None);
    }

    #[test]
    fn quotes_escapes_and_comments_follow_mariadb() {
        let f = parse(
            "# comment\n; other comment\n[Client]\n\
             password = \"p#ss w\\\"rd\"  # trailing\n\
             user = plain # comment after value\n\
             host='127.0.0.1'\n\
             socket=/tmp/a\\sb\n\
             skip-ssl\n",
        );
        let g = ["client"];
        assert_eq!(f.get(&g, "password").as_deref(), Some("p#ss w\"rd"));
        assert_eq!(f.get(&g, "user").as_deref(), Some("plain"));
        assert_eq!(f.get(&g, "host").as_deref(), Some("127.0.0.1"));
        assert_eq!(f.get(&g, "socket").as_deref(), Some("/tmp/a b"));
        assert_eq!(f.get(&g, "skip_ssl").as_deref(), Some(""));
    }

    #[test]
    fn dashes_and_underscores_are_the_same_option() {
        let f = parse("[client]\ndefault-character-set=utf8mb4\n");
        assert_eq!(
            f.get(&["client"], "default_character_set").as_deref(),
            Some("utf8mb4")
        );
    }

    #[test]
    fn malformed_files_name_the_line() {
        for (text, want) in [
            ("user=x\n", "before any [group]"),
            ("[client\n", "unterminated group"),
            ("[client]\npassword='abc\n", "unterminated quote"),
            ("[client]\npassword='a' b\n", "after a quoted value"),
        ] {
            let err = OptionFile::parse(Path::new("/t.cnf"), text).unwrap_err();
            let msg = err.to_string();
            assert!(msg.contains(want), "{text:?}: {msg}");
            assert!(msg.starts_with("/t.cnf:"), "{msg}");
        }
    }

    #[test]
    fn includes_are_followed_and_world_writable_files_refused() {
        let dir = tempfile::tempdir().unwrap();
        let inc = dir.path().join("conf.d");
        std::fs::create_dir(&inc).unwrap();
        std::fs::write(inc.join("b.cnf"), "[client]\nuser=from_dir\n").unwrap();
        std::fs::write(inc.join("ignored.txt"), "[client]\nuser=nope\n").unwrap();
        let pw = dir.path().join("pw.cnf");
        std::fs::write(&pw, "[clustercheck]\npassword=secret\n").unwrap();
        let main = dir.path().join("my.cnf");
        std::fs::write(
            &main,
            format!(
                "[client]\nuser=first\n!includedir {}\n!include {}\n",
                inc.display(),
                pw.display()
            ),
        )
        .unwrap();
        let f = OptionFile::load(&main).unwrap();
        let g = ["client", "clustercheck"];
        assert_eq!(f.get(&g, "user").as_deref(), Some("from_dir"));
        assert_eq!(f.get(&g, "password").as_deref(), Some("secret"));

        std::fs::set_permissions(&pw, std::fs::Permissions::from_mode(0o666)).unwrap();
        let err = OptionFile::load(&main).unwrap_err();
        assert!(
            matches!(err, OptionFileError::WorldWritable { .. }),
            "{err}"
        );

        let looped = dir.path().join("loop.cnf");
        std::fs::write(&looped, format!("!include {}\n", looped.display())).unwrap();
        let err = OptionFile::load(&looped).unwrap_err();
        assert!(
            matches!(err, OptionFileError::IncludeTooDeep { .. }),
            "{err}"
        );
    }
}
