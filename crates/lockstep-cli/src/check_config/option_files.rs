//! MariaDB option files as the server reads them: `[group]` headers,
//! `key=value` and bare `key` lines, `#` and `;` comments, quoted and
//! escaped values (parsed by the credential reader's helpers,
//! `mariadb::option_file`), `!include FILE` and `!includedir DIR` (its
//! `*.cnf` files, by name). Keys are normalized as the server does: `-`
//! and `_` are the same, a `loose-` prefix is dropped, `skip-key` means
//! `key=0`. The last value wins; each value remembers where it came from.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::mariadb::option_file::{cnf_files_in, include_target, normalise_name, Line};

/// Include depth at most: deeper nesting is a loop or a mistake.
const MAX_INCLUDE_DEPTH: usize = 10;
/// Bytes of one option file at most: a server option file is small, and
/// the check must not read a wrong path (a device, a log) to the end.
const MAX_FILE_BYTES: u64 = 4 << 20;

/// The groups `mariadbd` reads (MariaDB 10.11): what a node's settings can
/// be written under. `[galera]` is read only by a server built with wsrep,
/// which is every server that can load a provider.
pub const SERVER_GROUPS: &[&str] = &[
    "client-server",
    "mysqld",
    "server",
    "mariadb",
    "mariadbd",
    "galera",
    "mysqld-10.11",
    "mariadb-10.11",
    "mariadbd-10.11",
];

/// Where a value was set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub file: PathBuf,
    pub line: usize,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// One setting: its (unquoted) value and where it was set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    pub value: String,
    pub origin: Origin,
}

/// The server's settings after reading every file: normalized key → last
/// setting in one of [`SERVER_GROUPS`].
#[derive(Debug, Default, Clone)]
pub struct ServerSettings {
    settings: BTreeMap<String, Setting>,
    /// The files read, in order (includes too).
    pub files: Vec<PathBuf>,
    /// Problems the server would stop at (a line outside any group, an
    /// unknown `!` directive, includes nested too deep).
    pub problems: Vec<(Origin, String)>,
    /// What the server skips silently: an include it cannot read.
    pub skipped: Vec<(Origin, String)>,
    /// `--defaults-group-suffix`: the groups with this suffix are read too
    /// (mtr starts server N with `.N`).
    suffix: Option<String>,
}

impl ServerSettings {
    /// The setting of `key` (any spelling: `-` or `_`).
    pub fn get(&self, key: &str) -> Option<&Setting> {
        self.settings.get(&normalise_name(key))
    }

    /// The value of `key`, if set.
    pub fn value(&self, key: &str) -> Option<&str> {
        self.get(key).map(|s| s.value.as_str())
    }

    /// Reads `paths` in order (later files win), following includes.
    #[cfg(test)]
    pub fn read(paths: &[PathBuf]) -> ServerSettings {
        Self::read_with_suffix(paths, None)
    }

    /// As [`ServerSettings::read`], also reading the groups named with
    /// `suffix` appended (`[mysqld.1]` for `.1`), as the server's
    /// `--defaults-group-suffix` does.
    pub fn read_with_suffix(paths: &[PathBuf], suffix: Option<&str>) -> ServerSettings {
        let mut s = ServerSettings {
            suffix: suffix.map(str::to_ascii_lowercase),
            ..ServerSettings::default()
        };
        for p in paths {
            s.read_file(p, 0, None);
        }
        s
    }

    /// Reads option-file text as if it were the file `name`.
    #[cfg(test)]
    pub fn read_text(name: &Path, text: &str) -> ServerSettings {
        let mut s = ServerSettings::default();
        s.files.push(name.to_path_buf());
        s.parse(name, text, 0);
        s
    }

    fn read_file(&mut self, path: &Path, depth: usize, from: Option<&Origin>) {
        use std::os::unix::fs::PermissionsExt;
        if std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o002 != 0) {
            // The server's words: "World-writable config file ... is ignored".
            let origin = from.cloned().unwrap_or(Origin {
                file: path.to_path_buf(),
                line: 0,
            });
            self.skipped.push((
                origin,
                format!(
                    "{} is world-writable: the server ignores it (chmod o-w to have it read)",
                    path.display()
                ),
            ));
            return;
        }
        let text = match read_bounded(path) {
            Ok(t) => t,
            Err(e) => {
                let origin = from.cloned().unwrap_or(Origin {
                    file: path.to_path_buf(),
                    line: 0,
                });
                self.skipped
                    .push((origin, format!("cannot read {}: {e}", path.display())));
                return;
            }
        };
        self.files.push(path.to_path_buf());
        self.parse(path, &text, depth);
    }

    fn parse(&mut self, path: &Path, text: &str, depth: usize) {
        let mut group: Option<String> = None;
        for (i, raw) in text.lines().enumerate() {
            let origin = Origin {
                file: path.to_path_buf(),
                line: i + 1,
            };
            match Line::of(raw) {
                Line::Nothing => {}
                Line::Directive { word, arg } => self.directive(path, word, arg, depth, &origin),
                Line::Group(Ok(name)) => group = Some(name),
                Line::Group(Err(why)) => self.problems.push((origin, why)),
                Line::Option { key, value } => {
                    let Some(g) = &group else {
                        self.problems.push((
                            origin,
                            format!("an option before any [group]: {}", raw.trim()),
                        ));
                        continue;
                    };
                    if !self.is_server_group(g) {
                        continue;
                    }
                    match value {
                        Ok(value) => {
                            for (key, value) in server_spellings(&key, value.unwrap_or_default()) {
                                self.settings.insert(
                                    key,
                                    Setting {
                                        value,
                                        origin: origin.clone(),
                                    },
                                );
                            }
                        }
                        Err(why) => self.problems.push((origin, why)),
                    }
                }
            }
        }
    }

    fn is_server_group(&self, g: &str) -> bool {
        let base = match &self.suffix {
            Some(sfx) => g.strip_suffix(sfx.as_str()).unwrap_or(g),
            None => g,
        };
        SERVER_GROUPS.contains(&base)
    }

    fn directive(&mut self, path: &Path, word: &str, arg: &str, depth: usize, origin: &Origin) {
        if depth >= MAX_INCLUDE_DEPTH {
            self.problems.push((
                origin.clone(),
                format!("includes nested deeper than {MAX_INCLUDE_DEPTH}: !{word} {arg}"),
            ));
            return;
        }
        let target = include_target(path, arg);
        match word {
            "include" => self.read_file(&target, depth + 1, Some(origin)),
            "includedir" => match cnf_files_in(&target) {
                Ok(files) => {
                    for f in files {
                        self.read_file(&f, depth + 1, Some(origin));
                    }
                }
                Err(e) => self.problems.push((
                    origin.clone(),
                    format!("cannot read directory {}: {e}", target.display()),
                )),
            },
            _ => self
                .problems
                .push((origin.clone(), format!("unknown directive !{word}"))),
        }
    }
}

fn read_bounded(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let f = std::fs::File::open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::new();
    f.take(MAX_FILE_BYTES).read_to_end(&mut bytes)?;
    // The server reads bytes: a latin1 comment must not hide the file.
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The settings one line makes: `loose-` dropped; `skip-key`, `enable-key`
/// and `disable-key` also set `key` to 0, 1 and 0, as the server's option
/// parser does for a boolean `key`. The spelling as written stays too,
/// since some options have such names themselves (`skip-name-resolve`).
fn server_spellings(key: &str, value: String) -> Vec<(String, String)> {
    let mut k = normalise_name(key);
    if let Some(rest) = k.strip_prefix("loose_") {
        k = rest.to_string();
    }
    for (prefix, v) in [("skip_", "0"), ("disable_", "0"), ("enable_", "1")] {
        if let Some(rest) = k.strip_prefix(prefix) {
            return vec![(rest.to_string(), v.to_string()), (k.clone(), value)];
        }
    }
    vec![(k, value)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_spellings_quotes_and_comments() {
        let s = ServerSettings::read_text(
            Path::new("my.cnf"),
            "# top\n[client]\nport=1\n[mysqld]\nbinlog-format = row # why\n\
             loose-innodb_autoinc_lock_mode=2\nskip-name-resolve\n\
             wsrep_provider_options='a=1; b=2'\n[galera]\nwsrep-on  # replicate\n\
             [mysqldump]\nquick\n[client-server]\nsocket=/s\n",
        );
        assert_eq!(s.value("binlog_format"), Some("row"));
        assert_eq!(s.value("innodb-autoinc-lock-mode"), Some("2"));
        assert_eq!(s.value("name_resolve"), Some("0"));
        assert_eq!(s.value("skip_name_resolve"), Some(""), "its own name too");
        assert_eq!(s.value("wsrep_provider_options"), Some("a=1; b=2"));
        assert_eq!(
            s.value("wsrep_on"),
            Some(""),
            "a bare key, its comment left out"
        );
        assert_eq!(
            s.value("socket"),
            Some("/s"),
            "[client-server] is the server's too"
        );
        assert_eq!(s.value("port"), None, "[client] is not the server's");
        assert_eq!(s.value("quick"), None);
        assert_eq!(s.get("binlog_format").unwrap().origin.line, 5);
        assert!(s.problems.is_empty(), "{:?}", s.problems);
    }

    #[test]
    fn includes_are_followed_and_later_values_win() {
        let dir = tempfile::tempdir().unwrap();
        let conf_d = dir.path().join("conf.d");
        std::fs::create_dir(&conf_d).unwrap();
        std::fs::write(conf_d.join("b.cnf"), "[mysqld]\nx=from_b\n").unwrap();
        std::fs::write(conf_d.join("a.cnf"), "[mysqld]\nx=from_a\ny=1\n").unwrap();
        std::fs::write(conf_d.join("ignored.txt"), "[mysqld]\ny=2\n").unwrap();
        std::fs::write(dir.path().join("extra.cnf"), "[galera]\nz=3\n").unwrap();
        let main = dir.path().join("my.cnf");
        std::fs::write(
            &main,
            "[mysqld]\nx=first\n!includedir conf.d\n!include extra.cnf\n!include missing.cnf\n",
        )
        .unwrap();
        let s = ServerSettings::read(std::slice::from_ref(&main));
        assert_eq!(s.value("x"), Some("from_b"), "b.cnf is read after a.cnf");
        assert_eq!(s.value("y"), Some("1"), "only *.cnf files of the directory");
        assert_eq!(s.value("z"), Some("3"));
        assert_eq!(s.files.len(), 4, "{:?}", s.files);
        assert!(s.problems.is_empty(), "{:?}", s.problems);
        assert_eq!(s.skipped.len(), 1, "{:?}", s.skipped);
        assert_eq!(s.skipped[0].0.line, 5, "the include line is blamed");
    }

    #[test]
    fn a_group_suffix_adds_the_server_s_own_groups() {
        let dir = tempfile::tempdir().unwrap();
        let main = dir.path().join("my.cnf");
        std::fs::write(
            &main,
            "[mysqld]\nx=all\n[mysqld.1]\nx=one\n[mysqld.2]\nx=two\n",
        )
        .unwrap();
        let one = ServerSettings::read_with_suffix(std::slice::from_ref(&main), Some(".1"));
        assert_eq!(one.value("x"), Some("one"));
        assert_eq!(ServerSettings::read(&[main]).value("x"), Some("all"));
    }

    #[test]
    fn a_world_writable_file_is_skipped_as_the_server_does() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open.cnf");
        std::fs::write(&open, "[mysqld]\nx=ignored\n").unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o666)).unwrap();
        let main = dir.path().join("my.cnf");
        std::fs::write(&main, "[mysqld]\nx=kept\n!include open.cnf\n").unwrap();
        let s = ServerSettings::read(std::slice::from_ref(&main));
        assert_eq!(s.value("x"), Some("kept"));
        assert!(
            s.skipped
                .iter()
                .any(|(o, m)| o.line == 3 && m.contains("world-writable")),
            "{:?}",
            s.skipped
        );
    }

    #[test]
    fn an_include_loop_stops() {
        let dir = tempfile::tempdir().unwrap();
        let main = dir.path().join("my.cnf");
        std::fs::write(&main, "!include my.cnf\n[mysqld]\nx=1\n").unwrap();
        let s = ServerSettings::read(&[main]);
        assert_eq!(s.value("x"), Some("1"));
        assert!(
            s.problems.iter().any(|(_, m)| m.contains("nested deeper")),
            "{:?}",
            s.problems
        );
    }
}
