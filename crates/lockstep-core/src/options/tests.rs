use std::time::Duration;

use proptest::prelude::*;

use super::table::{Init, Kind, Mutability, TABLE};
use super::*;

fn node() -> Options {
    Options::new("127.0.0.1:16001", "/var/lib/mysql/")
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

// ---------------------------------------------------------------- table

/// README.md's option section is generated from the table; this fails when
/// they differ. `LOCKSTEP_BLESS=1` (what `make options-doc` sets) rewrites
/// the section instead.
#[test]
fn readme_lists_the_honoured_and_the_ignored_options_of_the_table() {
    const BEGIN: &str = "<!-- options:begin";
    const END: &str = "<!-- options:end -->";
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let readme = std::fs::read_to_string(&path).expect("README.md");
    let start = readme
        .find(BEGIN)
        .expect("README.md has an options:begin marker");
    let body = start + readme[start..].find("-->").expect("marker end") + 3;
    let end = readme
        .find(END)
        .expect("README.md has an options:end marker");
    let want = format!("\n{}", table::readme_section());
    if readme[body..end] == want {
        return;
    }
    if std::env::var("LOCKSTEP_BLESS").is_ok_and(|v| v == "1") {
        let updated = format!("{}{}{}", &readme[..body], want, &readme[end..]);
        std::fs::write(&path, updated).expect("writing README.md");
        return;
    }
    panic!("README.md's option section differs from the option table: run `make options-doc`");
}

#[test]
fn an_option_set_to_a_non_default_value_without_effect_is_reported_once() {
    let mut o = node();
    o.apply_initial(
        "gcs.max_throttle=0.5; pc.ignore_sb=false; gcache.size=1G; socket.ssl=yes; \
         socket.ssl_compression=yes",
    )
    .unwrap();
    // gcs.max_throttle and socket.ssl_compression do nothing; pc.ignore_sb
    // is at its default; gcache.size and socket.ssl are honoured.
    assert_eq!(
        o.ignored_settings(),
        vec!["gcs.max_throttle", "socket.ssl_compression"]
    );
    assert!(is_honoured("socket.ssl"));
    assert!(is_honoured("gcache.size"));
    assert!(is_honoured("gmcast.isolate"));
    assert!(is_honoured("gcs.fc_limit"));
    assert!(!is_honoured("gcs.max_throttle"));
    assert!(!is_honoured("no.such.key"));
    // The typed comparison: 16 == 0x10 is the default of gcs.fc_limit.
    let fc = table::lookup("gcs.fc_limit").unwrap();
    assert!(is_default(fc, "0x10"));
    assert!(!is_default(fc, "17"));
}

#[test]
fn table_sorted_unique_and_defaults_valid() {
    for w in TABLE.windows(2) {
        assert!(w[0].name < w[1].name, "{} !< {}", w[0].name, w[1].name);
    }
    for s in TABLE {
        if let Init::Fixed(v) = s.init {
            if !(s.kind == Kind::Str && v.is_empty()) {
                value::validate(s, v).unwrap_or_else(|e| panic!("{}: {e}", s.name));
            }
        }
    }
    for key in ["dbug", "signal", "lockstep.foo", "GCACHE.SIZE"] {
        assert!(table::lookup(key).is_none(), "{key}");
    }
}

#[test]
fn defaults_printed_like_galera() {
    let o = node();
    let s = o.to_galera_string();
    assert!(s.ends_with("; "));
    assert!(s.starts_with("base_dir = /var/lib/mysql/; base_host = 127.0.0.1; base_port = 16001; "));
    for frag in [
        "gcache.size = 128M; ",
        "gcache.dir = /var/lib/mysql/; ",
        "gcomm.thread_prio = ; ",
        "gmcast.listen_addr = tcp://0.0.0.0:16001; ",
        "gmcast.mcast_addr = ; ",
        "evs.debug_log_mask = 0x1; ",
        "evs.view_forget_timeout = P1D; ",
        "pc.weight = 1; ",
        "repl.max_ws_size = 2147483647; ",
        "repl.proto_max = 11; ",
        "socket.recv_buf_size = auto; ",
        "lockstep.raft_tick = PT0.05S; ",
    ] {
        assert!(s.contains(frag), "missing {frag:?} in {s}");
    }
    for absent in [
        "cert.max_length",
        "cert.length_check",
        "ist.keep_keys",
        "ist.recv_bind",
        "pc.bootstrap",
        "socket.ssl",
        "gmcast.group",
        "lockstep.secret",
    ] {
        assert!(!s.contains(absent), "{absent} printed: {s}");
    }
    // Sorted by name.
    let names: Vec<&str> = s
        .split("; ")
        .filter(|x| !x.is_empty())
        .map(|x| x.split(" = ").next().unwrap())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    // MariaDB's strstr/strtok parse of repl.max_ws_size.
    let at = s.find("repl.max_ws_size").unwrap();
    let tail = &s[at..];
    let v = tail.split('=').nth(1).unwrap().split(';').next().unwrap();
    assert_eq!(v.trim(), "2147483647");
}

// ---------------------------------------------------------------- syntax

#[test]
fn options_parse_basic_and_blank() {
    assert_eq!(parse_pairs("").unwrap(), vec![]);
    assert_eq!(parse_pairs(" ").unwrap(), vec![]);
    assert_eq!(parse_pairs(";;").unwrap(), vec![]);
    assert_eq!(parse_pairs(" ; ;\t").unwrap(), vec![]);
    assert_eq!(
        parse_pairs(" a = 1 ;b=2;").unwrap(),
        pairs(&[("a", "1"), ("b", "2")])
    );
    assert_eq!(parse_pairs("a=").unwrap(), pairs(&[("a", "")]));
    assert_eq!(
        parse_pairs("a = ; b = x").unwrap(),
        pairs(&[("a", ""), ("b", "x")])
    );
}

#[test]
fn options_parse_escapes() {
    assert_eq!(parse_pairs(r"a=x\;y").unwrap(), pairs(&[("a", "x;y")]));
    assert_eq!(parse_pairs(r"a=x\=y").unwrap(), pairs(&[("a", "x=y")]));
    assert_eq!(parse_pairs(r"a=x\\y").unwrap(), pairs(&[("a", r"x\y")]));
    assert_eq!(parse_pairs(r"a\=b=c").unwrap(), pairs(&[("a=b", "c")]));
    // Backslash before an ordinary character, or at the end, is literal.
    assert_eq!(
        parse_pairs(r"a=c:\dir").unwrap(),
        pairs(&[("a", r"c:\dir")])
    );
    assert_eq!(parse_pairs(r"a=x\").unwrap(), pairs(&[("a", r"x\")]));
    // Escaped backslash followed by a separator: the separator is real.
    assert_eq!(
        parse_pairs(r"a=x\\;b=y").unwrap(),
        pairs(&[("a", r"x\"), ("b", "y")])
    );
    assert_eq!(escape(r"a;b=c\d"), r"a\;b\=c\\d");
}

#[test]
fn options_parse_errors() {
    for bad in ["a", "a=1;b", "a=1=2", "=1", " = ", "a=1;=x", r"\;"] {
        assert!(
            matches!(parse_pairs(bad), Err(OptionsError::Syntax(_))),
            "{bad:?} accepted"
        );
    }
    // The value of a malformed pair is not echoed (might be the secret).
    let e = parse_pairs("lockstep.secret=ab=cd")
        .unwrap_err()
        .to_string();
    assert!(e.contains("lockstep.secret") && !e.contains("cd"), "{e}");
}

// ---------------------------------------------------------------- values

#[test]
fn options_durations() {
    let d = |s| parse_duration(s).unwrap();
    assert_eq!(d("PT30S"), Duration::from_secs(30));
    assert_eq!(d("PT0.5S"), Duration::from_millis(500));
    assert_eq!(d("PT7.5S"), Duration::from_millis(7500));
    assert_eq!(d("PT10M"), Duration::from_secs(600));
    assert_eq!(d("P1D"), Duration::from_secs(86_400));
    assert_eq!(d("PT1H30M5S"), Duration::from_secs(5405));
    assert_eq!(d("PT1M"), Duration::from_secs(60));
    assert_eq!(d("P1W"), Duration::from_secs(7 * 86_400));
    assert_eq!(d("P1DT1S"), Duration::from_secs(86_401));
    assert_eq!(d("pt0.1s"), Duration::from_millis(100));
    assert_eq!(d("PT1.5H"), Duration::from_secs(5400));
    assert_eq!(d("PT0.000001S"), Duration::from_micros(1));
    assert_eq!(d("5"), Duration::from_secs(5));
    assert_eq!(d("0.25"), Duration::from_millis(250));
    for bad in [
        "", "P", "PT", "P1DT", "PT5", "PTS", "PT1S1M", "PT1D", "P1H", "abc", "-PT1S", "PT-1S",
        "PT1.2.3S", "P1M1Y", "PT.S",
    ] {
        assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn options_sizes_ints_bools() {
    assert_eq!(parse_size("10M").unwrap(), 10_485_760);
    assert_eq!(parse_size("128M").unwrap(), 134_217_728);
    assert_eq!(parse_size("1G").unwrap(), 1 << 30);
    assert_eq!(parse_size("2k").unwrap(), 2048);
    assert_eq!(parse_size("1T").unwrap(), 1 << 40);
    assert_eq!(parse_size("4096").unwrap(), 4096);
    assert_eq!(parse_size("9223372036854775807").unwrap(), i64::MAX as u64);
    for bad in ["", "abc", "-1", "1.5M", "1X", "M", "99999999999T"] {
        assert!(parse_size(bad).is_err(), "{bad:?} accepted");
    }
    assert_eq!(parse_int("0x1").unwrap(), 1);
    assert_eq!(parse_int("-3").unwrap(), -3);
    assert_eq!(parse_int("2K").unwrap(), 2048);
    assert!(parse_int("9223372036854775808").is_err());
    assert_eq!(parse_int("-9223372036854775808").unwrap(), i64::MIN);
    for t in ["yes", "YES", "true", "True", "on", "ON", "1"] {
        assert!(parse_bool(t).unwrap(), "{t}");
    }
    for f in ["no", "No", "false", "FALSE", "off", "Off", "0"] {
        assert!(!parse_bool(f).unwrap(), "{f}");
    }
    assert!(parse_bool("2").is_err());
    assert!(parse_bool("").is_err());
}

#[test]
fn options_typed_getters() {
    let mut o = node();
    o.apply_initial("gcache.size=10M; repl.causal_read_timeout=PT90S; pc.ignore_sb=TRUE")
        .unwrap();
    assert_eq!(o.size("gcache.size").unwrap(), 10_485_760);
    assert_eq!(
        o.duration("repl.causal_read_timeout").unwrap(),
        Duration::from_secs(90)
    );
    assert_eq!(
        o.duration("evs.inactive_check_period").unwrap(),
        Duration::from_millis(500)
    );
    assert!(o.bool("pc.ignore_sb").unwrap());
    assert!(o.bool("gcache.recover").unwrap());
    assert_eq!(o.int("base_port").unwrap(), 16001);
    assert_eq!(o.int("evs.debug_log_mask").unwrap(), 1);
    assert_eq!(o.float("gcs.max_throttle").unwrap(), 0.25);
    assert_eq!(
        o.duration("lockstep.raft_tick").unwrap(),
        Duration::from_millis(50)
    );
    assert!(matches!(o.int("nope"), Err(OptionsError::Unknown(_))));
    assert!(matches!(
        o.bool("pc.bootstrap"),
        Err(OptionsError::BadValue { .. })
    ));
}

// ---------------------------------------------------------------- init

#[test]
fn options_node_address_derivation() {
    let o = Options::new("127.0.0.1:16001", "/data");
    assert_eq!(o.get("base_host"), Some("127.0.0.1"));
    assert_eq!(o.get("base_port"), Some("16001"));
    assert_eq!(o.get("base_dir"), Some("/data"));
    assert_eq!(o.get("gcache.dir"), Some("/data"));

    let o = Options::new("[::1]:5000", "");
    assert_eq!(o.get("base_host"), Some("[::1]"));
    assert_eq!(o.get("base_port"), Some("5000"));
    assert_eq!(o.get("base_dir"), Some("."));
    assert_eq!(o.get("gmcast.listen_addr"), Some("tcp://[::]:5000"));

    let o = Options::new("host", "/d");
    assert_eq!(o.get("base_host"), Some("host"));
    assert_eq!(o.get("base_port"), Some("4567"));
    assert_eq!(o.get("gmcast.listen_addr"), Some("tcp://0.0.0.0:4567"));

    let o = Options::new("", "/d");
    assert_eq!(o.get("base_host"), None);
    assert_eq!(o.get("base_port"), Some("4567"));

    let o = Options::new("fe80::1", "/d");
    assert_eq!(o.get("base_host"), Some("[fe80::1]"));
}

#[test]
fn options_explicit_base_port_wins() {
    let mut o = node();
    o.apply_initial("base_port=17000; gcache.size=10M").unwrap();
    assert_eq!(o.get("base_port"), Some("17000"));
    assert_eq!(o.get("gmcast.listen_addr"), Some("tcp://0.0.0.0:17000"));
    assert!(o.is_explicit("base_port"));
    assert!(!o.is_explicit("gcache.dir"));

    let mut o = node();
    o.apply_initial("base_port=17000; gmcast.listen_addr=tcp://[::]:18000; base_dir=/x")
        .unwrap();
    assert_eq!(o.get("gmcast.listen_addr"), Some("tcp://[::]:18000"));
    assert_eq!(o.get("gcache.dir"), Some("/x"));
    // mtr's galera_base_port.inc cut.
    let s = o.to_galera_string();
    let at = s.find("base_port = ").unwrap() + "base_port = ".len();
    assert_eq!(&s[at..at + s[at..].find(';').unwrap()], "17000");
}

#[test]
fn options_unknown_keys_all_reported_at_init() {
    let mut o = node();
    let before = o.clone();
    let e = o
        .apply_initial("gcache.size=10M; foo=1; evs.bar=2; foo=3; dbug=d,x; signal=s")
        .unwrap_err();
    assert_eq!(
        e,
        OptionsError::Unknown(vec![
            "foo".into(),
            "evs.bar".into(),
            "dbug".into(),
            "signal".into()
        ])
    );
    assert_eq!(
        e.unrecognized_messages(),
        vec![
            "Unrecognized parameter 'foo'",
            "Unrecognized parameter 'evs.bar'",
            "Unrecognized parameter 'dbug'",
            "Unrecognized parameter 'signal'",
        ]
    );
    assert_eq!(o, before, "failed init must not change anything");
}

#[test]
fn options_bad_values_rejected() {
    let mut o = node();
    let e = o.apply_initial("gcache.size=abc").unwrap_err();
    assert!(
        matches!(&e, OptionsError::BadValue { key, value, .. } if key == "gcache.size" && value == "abc")
    );
    assert!(e.to_string().contains("gcache.size"), "{e}");
    for bad in [
        "pc.weight=256",
        "pc.weight=x",
        "evs.suspect_timeout=5 seconds",
        "repl.key_format=FLAT4",
        "pc.ignore_sb=maybe",
        "gmcast.isolate=3",
        "gcs.fc_factor=1.5",
        "socket.recv_buf_size=lots",
        "base_port=70000",
        "repl.commit_order=4",
    ] {
        assert!(
            matches!(o.apply_initial(bad), Err(OptionsError::BadValue { .. })),
            "{bad} accepted"
        );
        assert!(
            matches!(o.apply_runtime(bad), Err(OptionsError::BadValue { .. })),
            "{bad} accepted at runtime"
        );
    }
}

#[test]
fn options_typical_mtr_config_accepted() {
    let mut o = Options::new("127.0.0.1", "/var/lib/mysql/");
    o.apply_initial(
        "repl.causal_read_timeout=PT90S;base_port=16002;evs.suspect_timeout=PT10S;\
         evs.inactive_timeout=PT30S;evs.install_timeout=PT15S;pc.wait_prim_timeout=PT60S;\
         gcache.size=10M;pc.ignore_sb=true;gmcast.segment=1;ist.recv_bind=127.0.0.1;\
         gcache.recover=yes;socket.ssl=yes;socket.ssl_key=/k.pem;gcs.stateless=1;\
         pc.recovery=false;pc.ignore_quorum=TRUE;pc.wait_prim=FALSE;\
         cert.max_length=1000;cert.length_check=1;ist.keep_keys=1;gcs.vote_policy=0;\
         gcomm.thread_prio=rr:2;lockstep.secret=s3cr3t;lockstep.raft_tick=PT0.05S",
    )
    .unwrap();
    let s = o.to_galera_string();
    assert!(s.contains("ist.recv_bind = 127.0.0.1; "), "{s}");
    assert!(s.contains("gcache.size = 10M; "), "user spelling kept: {s}");
    assert!(s.contains("cert.max_length = 1000; "));
    assert!(s.contains("gmcast.listen_addr = tcp://0.0.0.0:16002; "));
    assert!(!s.contains("s3cr3t") && !s.contains("lockstep.secret"));
    assert!(!format!("{o:?}").contains("s3cr3t"));
    assert_eq!(o.get("lockstep.secret"), Some("s3cr3t"));
    // Feeding the output back keeps the secret.
    assert_eq!(o.apply_runtime(&s).unwrap(), vec![]);
    assert_eq!(o.get("lockstep.secret"), Some("s3cr3t"));
}

// ---------------------------------------------------------------- runtime

#[test]
fn options_runtime_blank_is_noop() {
    let mut o = node();
    let before = o.clone();
    for blank in ["", " ", ";;", " ; "] {
        assert_eq!(o.apply_runtime(blank).unwrap(), vec![]);
    }
    assert_eq!(o, before);
}

#[test]
fn options_runtime_round_trip_defaults() {
    let mut o = node();
    let before = o.clone();
    let s = o.to_galera_string();
    assert_eq!(o.apply_runtime(&s).unwrap(), vec![]);
    assert_eq!(o, before);
}

#[test]
fn options_runtime_unknown() {
    let mut o = node();
    let e = o.apply_runtime("pc.weight=2; no.such.key=1").unwrap_err();
    assert_eq!(e, OptionsError::Unknown(vec!["no.such.key".into()]));
    assert!(e.to_string().contains("Unknown parameter 'no.such.key'"));
    assert_eq!(o.get("pc.weight"), Some("1"), "atomic: nothing applied");
    assert!(o.apply_runtime("dbug=d,foo").is_err());
    assert!(o.apply_runtime("signal=foo").is_err());
    assert!(
        o.apply_runtime("GCACHE.SIZE=128M").is_err(),
        "keys are case-sensitive"
    );
}

#[test]
fn options_runtime_read_only() {
    let mut o = node();
    for (key, same, changed) in [
        ("gcache.size", "128M", "256M"),
        ("gcache.name", "galera.cache", "other.cache"),
        ("gcache.dir", "/var/lib/mysql/", "/tmp"),
        ("repl.commit_order", "3", "2"),
        (
            "gmcast.listen_addr",
            "tcp://0.0.0.0:16001",
            "tcp://0.0.0.0:1",
        ),
        ("pc.wait_prim_timeout", "PT30S", "PT60S"),
    ] {
        assert_eq!(o.apply_runtime(&format!("{key}={same}")).unwrap(), vec![]);
        let e = o.apply_runtime(&format!("{key}={changed}")).unwrap_err();
        assert_eq!(e, OptionsError::ReadOnly(key.into()));
        assert!(e.to_string().contains(key));
        assert_eq!(o.get(key), Some(same));
    }
    // Same typed value, different spelling: accepted, spelling kept.
    assert_eq!(o.apply_runtime("gcache.size=134217728").unwrap(), vec![]);
    assert_eq!(o.get("gcache.size"), Some("128M"));
    // Unset static key: any value is a change.
    assert_eq!(
        o.apply_runtime("socket.ssl=yes").unwrap_err(),
        OptionsError::ReadOnly("socket.ssl".into())
    );
}

#[test]
fn options_runtime_stored_for_restart() {
    let mut o = node();
    let ch = o
        .apply_runtime("base_port=20000; base_host=10.0.0.1; base_dir=/d; repl.proto_max=10")
        .unwrap();
    assert_eq!(ch.len(), 4);
    assert_eq!(o.get("base_port"), Some("20000"));
    assert_eq!(o.get("repl.proto_max"), Some("10"));
    // Not re-derived at runtime: takes effect at the next start only.
    assert_eq!(o.get("gmcast.listen_addr"), Some("tcp://0.0.0.0:16001"));
    assert_eq!(o.get("gcache.dir"), Some("/var/lib/mysql/"));
}

#[test]
fn options_runtime_dynamic_changes() {
    let mut o = node();
    let ch = o
        .apply_runtime("repl.max_ws_size=1048576; repl.causal_read_timeout=PT1M")
        .unwrap();
    assert_eq!(
        ch,
        pairs(&[
            ("repl.max_ws_size", "1048576"),
            ("repl.causal_read_timeout", "PT1M")
        ])
    );
    assert_eq!(o.int("repl.max_ws_size").unwrap(), 1_048_576);
    assert_eq!(
        o.duration("repl.causal_read_timeout").unwrap(),
        Duration::from_secs(60)
    );
    assert!(o
        .to_galera_string()
        .contains("repl.max_ws_size = 1048576; "));
    // Same value again: no change reported.
    assert_eq!(
        o.apply_runtime("repl.causal_read_timeout=PT60S").unwrap(),
        vec![]
    );
    let ch = o
        .apply_runtime(
            "pc.weight=3; gmcast.isolate=1; pc.ignore_sb=1; gcs.fc_limit=100; \
                        repl.key_format=FLAT16; cert.log_conflicts=ON; evs.suspect_timeout=PT2S; \
                        evs.inactive_timeout=PT4S; pc.weight=4",
        )
        .unwrap();
    assert_eq!(ch.len(), 8);
    assert_eq!(
        ch[0],
        ("pc.weight".to_string(), "4".to_string()),
        "last value wins"
    );
    assert_eq!(o.get("pc.weight"), Some("4"));
    assert_eq!(o.int("gmcast.isolate").unwrap(), 1);
}

#[test]
fn options_runtime_triggers() {
    let mut o = node();
    // Always reported, even when repeated.
    for _ in 0..2 {
        assert_eq!(
            o.apply_runtime("socket.ssl_reload=1").unwrap(),
            pairs(&[("socket.ssl_reload", "1")])
        );
        assert_eq!(
            o.apply_runtime("pc.bootstrap=YES").unwrap(),
            pairs(&[("pc.bootstrap", "YES")])
        );
    }
    assert!(o
        .apply_runtime("evs.evict=6b2f0a5e-0000-11ee-8000-000000000001")
        .is_ok());
    assert!(o
        .apply_runtime("gmcast.peer_addr=tcp://127.0.0.1:16002")
        .is_ok());
    let s = o.to_galera_string();
    assert!(s.contains("socket.ssl_reload = 1; "), "{s}");
    assert!(!s.contains("pc.bootstrap") && !s.contains("evs.evict") && !s.contains("peer_addr"));
}

#[test]
fn options_provider_set() {
    let mut o = node();
    o.set("gmcast.group", "my_wsrep_cluster").unwrap();
    o.set("socket.ssl_reload", "1").unwrap();
    assert!(o
        .to_galera_string()
        .contains("gmcast.group = my_wsrep_cluster; "));
    assert!(!o.is_explicit("gmcast.group"));
    assert!(matches!(
        o.set("pc.weight", "x"),
        Err(OptionsError::BadValue { .. })
    ));
    assert!(matches!(o.set("nope", "x"), Err(OptionsError::Unknown(_))));
}

#[test]
fn options_error_display() {
    let u = OptionsError::Unknown(vec!["a".into(), "b".into()]);
    assert_eq!(
        u.to_string(),
        "Unknown parameter 'a'; Unknown parameter 'b'"
    );
    assert!(OptionsError::ReadOnly("x".into())
        .unrecognized_messages()
        .is_empty());
    let e: Box<dyn std::error::Error> = Box::new(u);
    assert!(e.to_string().contains("Unknown parameter"));
}

// ---------------------------------------------------------------- properties

/// Key or value text: anything, including separators, escapes and unicode,
/// but without leading/trailing white space (the parser trims it).
fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 ;=\\\\._:/\\[\\]\t\u{e9}\u{2028}-]{0,12}".prop_map(|s| s.trim().to_string())
}

proptest! {
    #[test]
    fn options_prop_render_parse_round_trip(
        kvs in proptest::collection::vec((text().prop_filter("non-empty key", |k| !k.is_empty()), text()), 0..6)
    ) {
        let rendered: String = kvs
            .iter()
            .map(|(k, v)| format!(" {} = {} ;", escape(k), escape(v)))
            .collect();
        prop_assert_eq!(parse_pairs(&rendered).unwrap(), kvs);
    }

    #[test]
    fn options_prop_parser_never_panics(s in any::<String>()) {
        let _ = parse_pairs(&s);
        let mut o = node();
        let _ = o.apply_runtime(&s);
        let _ = o.apply_initial(&s);
    }

    #[test]
    fn options_prop_parser_never_panics_on_syntaxy_input(s in "[a-z.=;\\\\ ]{0,40}") {
        let _ = parse_pairs(&s);
    }

    #[test]
    fn options_prop_value_parsers_never_panic(s in "[PTYMWDHS0-9.,xXkKgG+ -]{0,16}") {
        let _ = parse_duration(&s);
        let _ = parse_size(&s);
        let _ = parse_int(&s);
        let _ = parse_float(&s);
        let _ = parse_bool(&s);
    }

    #[test]
    fn options_prop_runtime_round_trip_after_changes(
        weight in 0u8..=255,
        ws in 1u32..,
        secs in 0u32..100_000,
        ignore_sb in any::<bool>(),
        prio in text(),
    ) {
        let mut o = node();
        o.apply_initial(&format!("gcomm.thread_prio={}; lockstep.secret={}", escape(&prio), escape(&prio)))
            .unwrap();
        o.apply_runtime(&format!(
            "pc.weight={weight}; repl.max_ws_size={ws}; repl.causal_read_timeout=PT{secs}S; pc.ignore_sb={ignore_sb}"
        ))
        .unwrap();
        let before = o.clone();
        let s = o.to_galera_string();
        prop_assert_eq!(o.apply_runtime(&s).unwrap(), vec![]);
        prop_assert_eq!(&o, &before);
        // Printed text re-applied on a fresh node reproduces the same output.
        let mut fresh = node();
        fresh.apply_initial(&s).unwrap();
        prop_assert_eq!(fresh.to_galera_string(), s);
    }

    #[test]
    fn options_prop_every_default_key_round_trips_static(
        idx in 0..TABLE.len()
    ) {
        // Re-setting any printed key to its current value is always accepted.
        let spec = &TABLE[idx];
        let mut o = node();
        if let (true, Some(v)) = (spec.printed, o.get(spec.name).map(str::to_string)) {
            let conf = format!("{}={}", spec.name, escape(&v));
            let expect: Vec<(String, String)> = if spec.mutability == Mutability::Trigger {
                vec![(spec.name.to_string(), v)]
            } else {
                vec![]
            };
            prop_assert_eq!(o.apply_runtime(&conf).unwrap(), expect);
        }
    }
}
