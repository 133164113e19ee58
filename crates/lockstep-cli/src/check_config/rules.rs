//! What `lockstep check-config` reports about a server's settings: a pure
//! function of the settings and of which programs are installed, so every
//! rule is tested without a server.

use std::fmt;

use lockstep_core::options::{self, table::Effect, value};

use super::option_files::{Origin, ServerSettings};

/// How bad a finding is. Errors make the command exit non-zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// The node will not work, or not as a cluster node.
    Error,
    /// It works, but safety or durability differs from what a DBA expects.
    Warning,
    /// Worth knowing; nothing to fix for most clusters.
    Note,
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad`, so the report's `{:<7}` lines the messages up.
        f.pad(match self {
            Level::Error => "error",
            Level::Warning => "warning",
            Level::Note => "note",
        })
    }
}

/// One thing found, about one setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub level: Level,
    /// The server variable or provider option it is about.
    pub key: String,
    /// Where it was set; `None` when the problem is that it is not set.
    pub origin: Option<Origin>,
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let place = self
            .origin
            .as_ref()
            .map_or_else(|| "(not set)".to_string(), Origin::to_string);
        write!(
            f,
            "{:<7} {place}: {}: {}",
            self.level, self.key, self.message
        )
    }
}

/// Where the package installs the provider (README "Install").
pub const PACKAGED_PROVIDER: &str = "/usr/lib/lockstep/liblockstep.so";

/// What the rules need to know about the machine.
pub trait Machine {
    /// Whether a program of this name is on the server's PATH.
    fn has_program(&self, name: &str) -> bool;
    /// Whether this file exists.
    fn has_file(&self, path: &str) -> bool;
}

/// Checks `s`; findings in the order of the rules, errors are not sorted
/// first so related findings stay together.
pub fn check(s: &ServerSettings, machine: &dyn Machine) -> Vec<Finding> {
    let mut out = Findings(Vec::new());
    for (origin, problem) in &s.problems {
        out.push(Level::Error, "option files", Some(origin), problem.clone());
    }
    for (origin, problem) in &s.skipped {
        out.push(
            Level::Warning,
            "option files",
            Some(origin),
            format!("{problem}; the server skips it without a word"),
        );
    }
    node_basics(s, machine, &mut out);
    provider_options(s, &mut out);
    durability(s, &mut out);
    reads(s, &mut out);
    state_transfer(s, machine, &mut out);
    out.0
}

struct Findings(Vec<Finding>);

impl Findings {
    fn push(&mut self, level: Level, key: &str, origin: Option<&Origin>, message: String) {
        self.0.push(Finding {
            level,
            key: key.to_string(),
            origin: origin.cloned(),
            message,
        });
    }
}

/// mtr's option files hold templates (`@ENV.WSREP_PROVIDER`,
/// `@mysqld.1.#galera_port`) that mtr fills in when it writes the real
/// file: such a value is not checked.
fn is_template(v: &str) -> bool {
    v.contains("@ENV.") || v.contains("@mysqld.") || v.contains("@OPT.")
}

fn truthy(v: &str) -> Option<bool> {
    // A bare `wsrep-on` line is ON, as the server reads it.
    if v.is_empty() {
        return Some(true);
    }
    value::parse_bool(v).ok()
}

fn node_basics(s: &ServerSettings, machine: &dyn Machine, out: &mut Findings) {
    match s.get("wsrep_on") {
        None => out.push(
            Level::Error,
            "wsrep_on",
            None,
            "not set; it is OFF by default and the server does not replicate: set wsrep_on=ON"
                .into(),
        ),
        Some(set) if truthy(&set.value) == Some(false) => out.push(
            Level::Error,
            "wsrep_on",
            Some(&set.origin),
            format!(
                "{}: the server does not replicate; set wsrep_on=ON",
                set.value
            ),
        ),
        Some(_) => {}
    }
    match s.get("wsrep_provider") {
        None => out.push(
            Level::Error,
            "wsrep_provider",
            None,
            format!("not set (none): set wsrep_provider={PACKAGED_PROVIDER}"),
        ),
        Some(set) if is_template(&set.value) => {}
        Some(set) if set.value.eq_ignore_ascii_case("none") => out.push(
            Level::Error,
            "wsrep_provider",
            Some(&set.origin),
            format!("none: set wsrep_provider={PACKAGED_PROVIDER}"),
        ),
        Some(set) if set.value.contains("libgalera") => out.push(
            Level::Note,
            "wsrep_provider",
            Some(&set.origin),
            format!(
                "{} is Galera; to run Lockstep set {PACKAGED_PROVIDER} (README \"Switching \
                 from Galera\"); the rest of this report is what Lockstep would make of the file",
                set.value
            ),
        ),
        Some(set) if !machine.has_file(&set.value) => out.push(
            Level::Error,
            "wsrep_provider",
            Some(&set.origin),
            format!("{}: no such file on this machine", set.value),
        ),
        Some(_) => {}
    }
    match s.get("wsrep_cluster_address") {
        None => out.push(
            Level::Error,
            "wsrep_cluster_address",
            None,
            "not set: the node joins no cluster; list the members, \
             gcomm://host1,host2,host3"
                .into(),
        ),
        Some(set) if set.value.trim() == "gcomm://" => out.push(
            Level::Warning,
            "wsrep_cluster_address",
            Some(&set.origin),
            "gcomm:// (empty) founds a new cluster at every start of this server: after a \
             restart it would not rejoin but run alone beside the others (split brain). \
             List the members, and found the cluster once with galera_new_cluster"
                .into(),
        ),
        Some(_) => {}
    }
    match s.get("binlog_format") {
        None => out.push(
            Level::Error,
            "binlog_format",
            None,
            "not set; MariaDB's default is MIXED and wsrep replicates rows only: set \
             binlog_format=ROW"
                .into(),
        ),
        Some(set) if !set.value.eq_ignore_ascii_case("row") => out.push(
            Level::Error,
            "binlog_format",
            Some(&set.origin),
            format!(
                "{}: wsrep replicates rows only; set binlog_format=ROW",
                set.value
            ),
        ),
        Some(_) => {}
    }
    match s.get("innodb_autoinc_lock_mode") {
        Some(set) if set.value.trim() == "2" => {}
        other => out.push(
            Level::Error,
            "innodb_autoinc_lock_mode",
            other.map(|set| &set.origin),
            format!(
                "{}; appliers insert rows in parallel and need interleaved \
                 auto-increment locks: set innodb_autoinc_lock_mode=2",
                other.map_or("not set (1 by default)".to_string(), |set| set
                    .value
                    .clone())
            ),
        ),
    }
    if let Some(set) = s.get("default_storage_engine") {
        if !set.value.eq_ignore_ascii_case("innodb") {
            out.push(
                Level::Warning,
                "default_storage_engine",
                Some(&set.origin),
                format!(
                    "{}: tables created without ENGINE= are not replicated (only InnoDB is)",
                    set.value
                ),
            );
        }
    }
}

fn provider_options(s: &ServerSettings, out: &mut Findings) {
    let Some(set) = s.get("wsrep_provider_options") else {
        return tls(None, None, out);
    };
    // mtr's files: template parts are filled in when mtr writes the real
    // file; the rest is checked.
    let text: String = set
        .value
        .split(';')
        .filter(|part| !is_template(part))
        .collect::<Vec<_>>()
        .join(";");
    let pairs = match options::parse_pairs(&text) {
        Ok(p) => p,
        Err(e) => {
            return out.push(
                Level::Error,
                "wsrep_provider_options",
                Some(&set.origin),
                format!("{e}: the provider refuses to start"),
            )
        }
    };
    let origin = Some(&set.origin);
    let mut given = std::collections::BTreeMap::new();
    for (key, val) in &pairs {
        let Some(spec) = options::table::lookup(key) else {
            out.push(
                Level::Error,
                key,
                origin,
                "unknown provider option: Lockstep (as Galera) refuses to start with it".into(),
            );
            continue;
        };
        if let Err(why) = value::validate(spec, val) {
            out.push(
                Level::Error,
                key,
                origin,
                format!("'{val}' {why}: the provider refuses to start"),
            );
            continue;
        }
        if spec.effect == Effect::NoEffect && !options::is_default(spec, val) {
            out.push(
                Level::Warning,
                key,
                origin,
                format!("{val}: accepted for compatibility, with no effect in Lockstep"),
            );
        }
        given.insert(key.clone(), val.clone());
    }
    let on = |k: &str| given.get(k).and_then(|v| value::parse_bool(v).ok()) == Some(true);
    if on("pc.ignore_sb") {
        out.push(
            Level::Warning,
            "pc.ignore_sb",
            origin,
            "true: when a cut leaves two halves of equal weight, both keep taking writes and \
             their data may differ for good (Lockstep honours it only for an exact half); \
             prefer an arbitrator (lockstep arbitrator) as the odd vote"
                .into(),
        );
    }
    if on("pc.ignore_quorum") {
        out.push(
            Level::Warning,
            "pc.ignore_quorum",
            origin,
            "true: a minority keeps taking writes after any cut, so the sides may diverge \
             and acknowledged commits of one side be lost"
                .into(),
        );
    }
    if on("pc.bootstrap") {
        out.push(
            Level::Warning,
            "pc.bootstrap",
            origin,
            "true in the option file founds a primary component at every start; use it at \
             runtime (SET GLOBAL) only, to recover a cluster that lost its quorum"
                .into(),
        );
    }
    if given
        .get("gcache.recover")
        .and_then(|v| value::parse_bool(v).ok())
        == Some(false)
    {
        out.push(
            Level::Warning,
            "gcache.recover",
            origin,
            "no: the writeset cache starts empty at every start, so after a restart of the \
             whole cluster lagging nodes take a full SST, and a node whose engine lost \
             commits in a crash (innodb_flush_log_at_trx_commit=0 or 2) cannot replay them \
             (the default is yes)"
                .into(),
        );
    }
    tls(Some(&given), origin, out);
}

fn tls(
    given: Option<&std::collections::BTreeMap<String, String>>,
    origin: Option<&Origin>,
    out: &mut Findings,
) {
    let has = |k: &str| given.is_some_and(|g| g.contains_key(k));
    let off = given
        .and_then(|g| g.get("socket.ssl"))
        .and_then(|v| value::parse_bool(v).ok())
        == Some(false);
    let files = has("socket.ssl_cert") && has("socket.ssl_key") && has("socket.ssl_ca");
    if off || !files {
        out.push(
            Level::Warning,
            "socket.ssl",
            origin,
            format!(
                "{}: peers are neither authenticated nor encrypted; anyone who reaches the \
                 group port can join the cluster and read every writeset. Set \
                 socket.ssl_cert, socket.ssl_key and socket.ssl_ca (`lockstep cert` makes \
                 them), or at least wsrep_allowlist",
                if off {
                    "socket.ssl=no"
                } else {
                    "no TLS between peers"
                }
            ),
        );
    }
}

fn durability(s: &ServerSettings, out: &mut Findings) {
    let recover_off = s
        .value("wsrep_provider_options")
        .and_then(|o| options::parse_pairs(o).ok())
        .and_then(|p| p.into_iter().rev().find(|(k, _)| k == "gcache.recover"))
        .and_then(|(_, v)| value::parse_bool(&v).ok())
        == Some(false);
    if let Some(set) = s.get("innodb_flush_log_at_trx_commit") {
        let v = set.value.trim();
        if v == "0" || v == "2" {
            let (level, message) = if recover_off {
                (
                    Level::Warning,
                    format!(
                        "{v}: InnoDB may lose its last second of commits in a crash, and with \
                         gcache.recover=no nothing replays them: if every node crashes at \
                         once, acknowledged commits are lost (as with Galera). Use 1, or \
                         gcache.recover=yes"
                    ),
                )
            } else {
                (
                    Level::Note,
                    format!(
                        "{v}: InnoDB may lose its last second of commits in a crash; Lockstep \
                         replays them from its writeset cache (gcache.recover=yes), which is \
                         not fsynced either: a power loss of every machine at once can still \
                         lose them. Use 1 where that matters"
                    ),
                )
            };
            out.push(
                level,
                "innodb_flush_log_at_trx_commit",
                Some(&set.origin),
                message,
            );
        }
    }
}

fn reads(s: &ServerSettings, out: &mut Findings) {
    let sync_wait = s.get("wsrep_sync_wait");
    let off = sync_wait.is_none_or(|set| set.value.trim() == "0");
    if off {
        out.push(
            Level::Note,
            "wsrep_sync_wait",
            sync_wait.map(|set| &set.origin),
            "0: a read on one node may not yet see a commit acknowledged on another (a stale \
             read). Set wsrep_sync_wait=1 (globally, or per session where it matters) for \
             causal reads"
                .into(),
        );
    }
    let snapshot = s.get("innodb_snapshot_isolation");
    if snapshot.is_none_or(|set| truthy(&set.value) == Some(false)) {
        out.push(
            Level::Note,
            "innodb_snapshot_isolation",
            snapshot.map(|set| &set.origin),
            "OFF: under REPEATABLE READ (the default) a read-modify-write may overwrite a row \
             changed since its snapshot, a lost update (about a fifth of a contended counter's \
             increments on Lockstep and Galera alike, README \"Conflicts and retries\"). Set \
             innodb_snapshot_isolation=ON and have applications retry error 1020 as they retry \
             1213"
                .into(),
        );
    }
}

/// The programs a state transfer method runs on donor and joiner.
fn sst_programs(method: &str) -> Vec<&'static [&'static str]> {
    match method {
        "rsync" => vec![&["rsync"]],
        "mariabackup" | "mariadb-backup" => {
            vec![&["mariabackup", "mariadb-backup"], &["socat"]]
        }
        "mysqldump" => vec![&["mysqldump", "mariadb-dump"], &["mysql", "mariadb"]],
        _ => vec![],
    }
}

fn state_transfer(s: &ServerSettings, machine: &dyn Machine, out: &mut Findings) {
    let set = s.get("wsrep_sst_method");
    let method = set.map_or("rsync", |set| set.value.trim());
    if is_template(method) {
        return;
    }
    let origin = set.map(|set| &set.origin);
    let script = format!("wsrep_sst_{method}");
    if !machine.has_program(&script) {
        out.push(
            Level::Error,
            "wsrep_sst_method",
            origin,
            format!("{method}: its script {script} is not installed, so no node can join by SST"),
        );
    }
    for alternatives in sst_programs(method) {
        if !alternatives.iter().any(|p| machine.has_program(p)) {
            out.push(
                Level::Error,
                "wsrep_sst_method",
                origin,
                format!(
                    "{method} needs {} (not found on PATH): install it on every node",
                    alternatives.join(" or ")
                ),
            );
        }
    }
    if matches!(method, "mariabackup" | "mariadb-backup" | "mysqldump")
        && s.get("wsrep_sst_auth").is_none()
    {
        out.push(
            Level::Warning,
            "wsrep_sst_auth",
            None,
            format!("not set: {method} logs in to the donor's server and needs user:password"),
        );
    }
}
