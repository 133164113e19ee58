//! Every rule of `check-config` on crafted option files.

use std::path::Path;

use super::option_files::ServerSettings;
use super::rules::{check, Finding, Level, Machine, PACKAGED_PROVIDER};

/// A machine with every program and the packaged provider, minus `missing`.
struct Fake {
    missing: &'static [&'static str],
}

impl Machine for Fake {
    fn has_program(&self, name: &str) -> bool {
        !self.missing.contains(&name)
    }
    fn has_file(&self, path: &str) -> bool {
        path == PACKAGED_PROVIDER
    }
}

const ALL_THERE: Fake = Fake { missing: &[] };

/// A node set up as README recommends: nothing to report.
const GOOD: &str = "[mysqld]
binlog_format=ROW
innodb_autoinc_lock_mode=2
default_storage_engine=InnoDB
innodb_snapshot_isolation=ON
[galera]
wsrep_on=ON
wsrep_provider=/usr/lib/lockstep/liblockstep.so
wsrep_cluster_address=gcomm://10.0.0.1,10.0.0.2,10.0.0.3
wsrep_sync_wait=1
wsrep_provider_options=\"socket.ssl_cert=/etc/mysql/tls/n.pem; socket.ssl_key=/etc/mysql/tls/n-key.pem; socket.ssl_ca=/etc/mysql/tls/ca.pem\"
";

fn findings_of(text: &str, machine: &Fake) -> Vec<Finding> {
    check(
        &ServerSettings::read_text(Path::new("my.cnf"), text),
        machine,
    )
}

/// The findings of GOOD with `lines` appended to `[galera]` (later values
/// win).
fn with(lines: &str) -> Vec<Finding> {
    findings_of(&format!("{GOOD}{lines}\n"), &ALL_THERE)
}

#[track_caller]
fn expect(findings: &[Finding], level: Level, key: &str, words: &str) {
    assert!(
        findings
            .iter()
            .any(|f| f.level == level && f.key == key && f.message.contains(words)),
        "no {level} about {key} saying '{words}' in:\n{}",
        findings
            .iter()
            .map(|f| f.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn a_good_node_has_nothing_to_report() {
    let f = findings_of(GOOD, &ALL_THERE);
    assert!(f.is_empty(), "{f:#?}");
}

#[test]
fn what_a_working_node_lacks_is_an_error() {
    let bare = findings_of("[mysqld]\nport=3306\n", &ALL_THERE);
    for key in [
        "wsrep_on",
        "wsrep_provider",
        "wsrep_cluster_address",
        "binlog_format",
        "innodb_autoinc_lock_mode",
    ] {
        expect(&bare, Level::Error, key, "not set");
    }
    expect(
        &with("binlog_format=MIXED"),
        Level::Error,
        "binlog_format",
        "MIXED",
    );
    expect(
        &with("innodb_autoinc_lock_mode=1"),
        Level::Error,
        "innodb_autoinc_lock_mode",
        "set innodb_autoinc_lock_mode=2",
    );
    expect(
        &with("wsrep_on=OFF"),
        Level::Error,
        "wsrep_on",
        "does not replicate",
    );
    expect(
        &with("wsrep_provider=none"),
        Level::Error,
        "wsrep_provider",
        "none",
    );
    expect(
        &with("wsrep_provider=/opt/x/liblockstep.so"),
        Level::Error,
        "wsrep_provider",
        "no such file",
    );
    expect(
        &with("wsrep_provider=/usr/lib/galera/libgalera_smm.so"),
        Level::Note,
        "wsrep_provider",
        "is Galera",
    );
    expect(
        &with("wsrep_cluster_address=gcomm://"),
        Level::Warning,
        "wsrep_cluster_address",
        "split brain",
    );
    expect(
        &with("default_storage_engine=MyISAM"),
        Level::Warning,
        "default_storage_engine",
        "not replicated",
    );
}

#[test]
fn unknown_bad_and_ignored_provider_options() {
    let opts = |o: &str| with(&format!("wsrep_provider_options=\"{o}\""));
    expect(
        &opts("gcs.fc_limt=10"),
        Level::Error,
        "gcs.fc_limt",
        "unknown",
    );
    expect(
        &opts("gcs.fc_limit=lots"),
        Level::Error,
        "gcs.fc_limit",
        "lots",
    );
    expect(
        &opts("gcache.size=1G;;="),
        Level::Error,
        "wsrep_provider_options",
        "refuses",
    );
    expect(
        &opts("gcache.page_size=1G"),
        Level::Warning,
        "gcache.page_size",
        "no effect in Lockstep",
    );
    let defaults =
        opts("gcache.page_size=128M; socket.ssl_cert=a; socket.ssl_key=b; socket.ssl_ca=c");
    assert!(
        !defaults.iter().any(|f| f.key == "gcache.page_size"),
        "a no-effect option at its default is not reported: {defaults:#?}"
    );
}

#[test]
fn unsafe_settings_are_warnings() {
    let opts = |o: &str| with(&format!("wsrep_provider_options=\"{o}\""));
    expect(
        &opts("pc.ignore_sb=true"),
        Level::Warning,
        "pc.ignore_sb",
        "both keep",
    );
    expect(
        &opts("pc.ignore_quorum=yes"),
        Level::Warning,
        "pc.ignore_quorum",
        "minority",
    );
    expect(
        &opts("pc.bootstrap=1"),
        Level::Warning,
        "pc.bootstrap",
        "every start",
    );
    expect(
        &opts("gcache.size=1G"),
        Level::Warning,
        "socket.ssl",
        "no TLS",
    );
    expect(
        &opts("socket.ssl=no; socket.ssl_cert=a; socket.ssl_key=b; socket.ssl_ca=c"),
        Level::Warning,
        "socket.ssl",
        "socket.ssl=no",
    );
    expect(
        &findings_of(&GOOD.replace("wsrep_provider_options", "#"), &ALL_THERE),
        Level::Warning,
        "socket.ssl",
        "no TLS",
    );
}

#[test]
fn durability_and_reads_that_differ_from_expectations() {
    expect(
        &with("innodb_flush_log_at_trx_commit=2"),
        Level::Note,
        "innodb_flush_log_at_trx_commit",
        "replays them",
    );
    let no_recover = with(
        "innodb_flush_log_at_trx_commit=0\nwsrep_provider_options=\"gcache.recover=no; \
         socket.ssl_cert=a; socket.ssl_key=b; socket.ssl_ca=c\"",
    );
    expect(
        &no_recover,
        Level::Warning,
        "innodb_flush_log_at_trx_commit",
        "acknowledged commits are lost",
    );
    expect(&no_recover, Level::Warning, "gcache.recover", "full SST");
    assert!(
        with("innodb_flush_log_at_trx_commit=1").is_empty(),
        "1 is the safe value"
    );
    expect(
        &with("wsrep_sync_wait=0"),
        Level::Note,
        "wsrep_sync_wait",
        "stale read",
    );
    expect(
        &findings_of(&GOOD.replace("wsrep_sync_wait=1", ""), &ALL_THERE),
        Level::Note,
        "wsrep_sync_wait",
        "stale read",
    );
    expect(
        &with("innodb_snapshot_isolation=OFF"),
        Level::Note,
        "innodb_snapshot_isolation",
        "lost update",
    );
    expect(
        &with("innodb_snapshot_isolation=OFF"),
        Level::Note,
        "innodb_snapshot_isolation",
        "retry error 1020 as they retry 1213",
    );
}

#[test]
fn state_transfer_tools_must_be_installed() {
    let no_rsync = findings_of(
        GOOD,
        &Fake {
            missing: &["rsync"],
        },
    );
    expect(&no_rsync, Level::Error, "wsrep_sst_method", "needs rsync");
    let backup = format!("{GOOD}wsrep_sst_method=mariabackup\n");
    let f = findings_of(
        &backup,
        &Fake {
            missing: &["socat", "mariabackup"],
        },
    );
    expect(&f, Level::Error, "wsrep_sst_method", "needs socat");
    assert!(
        !f.iter().any(|x| x.message.contains("mariabackup or")),
        "mariadb-backup stands in for mariabackup: {f:#?}"
    );
    expect(&f, Level::Warning, "wsrep_sst_auth", "user:password");
    let custom = findings_of(
        &format!("{GOOD}wsrep_sst_method=mine\n"),
        &Fake {
            missing: &["wsrep_sst_mine"],
        },
    );
    expect(
        &custom,
        Level::Error,
        "wsrep_sst_method",
        "wsrep_sst_mine is not installed",
    );
}

#[test]
fn unreadable_includes_are_warnings_and_stray_lines_errors() {
    let f = findings_of(&format!("!include /nonexistent/x.cnf\n{GOOD}"), &ALL_THERE);
    expect(&f, Level::Warning, "option files", "/nonexistent/x.cnf");
    let f = findings_of(&format!("port=1\n{GOOD}"), &ALL_THERE);
    expect(&f, Level::Error, "option files", "before any [group]");
    let f = findings_of(&format!("{GOOD}wsrep_node_name='db1\n"), &ALL_THERE);
    expect(&f, Level::Error, "option files", "unterminated quote");
}
