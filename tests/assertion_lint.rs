//! A lint over the workspace's test code: every `#[test]` function must
//! assert something, itself or through a helper that does. A test that
//! only runs code and asserts nothing passes whatever the code does.
//!
//! What counts as asserting: the `assert*!`/`prop_assert*!`/`panic!`/
//! `unreachable!` macros, and a call (`name(` or `.name(`, the whole name)
//! of any function in the scanned files that itself asserts, to a fixed
//! point: so the multi-node helpers `check`, `fail` and `or_logs`, which
//! panic with every node's log, count through their bodies. A bare
//! `.unwrap()` or `.expect(..)` does not count: it says nothing about the
//! behaviour under test.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const DIRECT: &[&str] = &[
    "assert!",
    "assert_eq!",
    "assert_ne!",
    "assert_matches!",
    "prop_assert!",
    "prop_assert_eq!",
    "prop_assert_ne!",
    "panic!",
    "unreachable!",
];

struct Function {
    file: PathBuf,
    name: String,
    is_test: bool,
    body: String,
}

#[test]
fn every_test_function_asserts_something() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    collect_rs(&root.join("tests"), &mut files);
    for krate in std::fs::read_dir(root.join("crates")).expect("crates/") {
        let krate = krate.expect("crates/ entry").path();
        collect_rs(&krate.join("tests"), &mut files);
        collect_rs(&krate.join("src"), &mut files);
    }
    assert!(files.len() > 20, "found only {} files", files.len());
    let mut functions = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("readable source");
        functions.extend(functions_of(f, &code_only(&text)));
    }
    let tests = functions.iter().filter(|f| f.is_test).count();
    assert!(tests > 100, "found only {tests} test functions");

    // Fixed point: a function asserts if its body asserts directly or calls
    // a function (by name) that asserts.
    let mut asserting: BTreeSet<String> = BTreeSet::new();
    loop {
        let before = asserting.len();
        for f in &functions {
            if asserting.contains(&f.name) && !f.is_test {
                continue;
            }
            if DIRECT.iter().any(|m| f.body.contains(m)) || calls_any(&f.body, &asserting) {
                asserting.insert(f.name.clone());
            }
        }
        if asserting.len() == before {
            break;
        }
    }
    let mut silent: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for f in functions.iter().filter(|f| f.is_test) {
        if !(DIRECT.iter().any(|m| f.body.contains(m)) || calls_any(&f.body, &asserting)) {
            silent
                .entry(f.file.display().to_string())
                .or_default()
                .push(f.name.clone());
        }
    }
    assert!(
        silent.is_empty(),
        "test functions that assert nothing (add an assertion of the behaviour \
         their name promises):\n{silent:#?}"
    );
}

#[test]
fn an_expect_or_a_name_that_merely_contains_check_is_no_assertion() {
    let src = code_only(
        "fn check(c: bool) { assert!(c) }\n\
         #[test]\nfn expects() { run().expect(\"x\"); }\n\
         #[test]\nfn checksums() { checksum(1); recheck(2); }\n\
         #[test]\nfn checks() { check(true); }\n",
    );
    let fns = functions_of(Path::new("x.rs"), &src);
    let asserting: BTreeSet<String> = ["check".to_string()].into();
    let asserts =
        |f: &Function| DIRECT.iter().any(|m| f.body.contains(m)) || calls_any(&f.body, &asserting);
    let verdicts: Vec<(&str, bool)> = fns[1..]
        .iter()
        .map(|f| (f.name.as_str(), asserts(f)))
        .collect();
    assert_eq!(
        verdicts,
        [("expects", false), ("checksums", false), ("checks", true)]
    );
}

#[test]
fn the_lint_finds_a_silent_test_and_accepts_one_that_asserts_through_a_helper() {
    let src = code_only(
        "fn helper() { assert!(true) }\n\
         #[test]\nfn silent() { let s = \"assert!(x)\"; run(); }\n\
         #[test]\nfn through_helper() { helper(); }\n",
    );
    let fns = functions_of(Path::new("x.rs"), &src);
    let names: Vec<(&str, bool)> = fns.iter().map(|f| (f.name.as_str(), f.is_test)).collect();
    assert_eq!(
        names,
        [
            ("helper", false),
            ("silent", true),
            ("through_helper", true)
        ]
    );
    // The string literal is blanked, so `silent` has no assertion.
    assert!(!fns[1].body.contains("assert!"));
    let asserting: BTreeSet<String> = ["helper".to_string()].into();
    assert!(calls_any(&fns[2].body, &asserting));
    assert!(!calls_any(&fns[1].body, &asserting));
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect_rs(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Whether `body` calls (`name(` or `.name(`) one of `names`.
fn calls_any(body: &str, names: &BTreeSet<String>) -> bool {
    let bytes = body.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if is_ident(bytes[i]) && (i == 0 || !is_ident(bytes[i - 1])) {
            let start = i;
            while i < bytes.len() && is_ident(bytes[i]) {
                i += 1;
            }
            let word = &body[start..i];
            let rest = body[i..].trim_start();
            if (rest.starts_with('(') || rest.starts_with("::<")) && names.contains(word) {
                return true;
            }
        } else {
            i += 1;
        }
    }
    false
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The source with comments removed and string/char literal contents
/// blanked, so braces and macro names inside them do not count.
fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        let rest = &src[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').unwrap_or(rest.len());
            i += end;
        } else if rest.starts_with("/*") {
            let end = rest.find("*/").map_or(rest.len(), |e| e + 2);
            i += end;
        } else if let Some(hashes) = raw_string_start(rest) {
            let open = 2 + hashes; // r + hashes + "
            let close = format!("\"{}", "#".repeat(hashes));
            let end = rest[open..]
                .find(&close)
                .map_or(rest.len(), |e| open + e + close.len());
            out.push_str("\"\"");
            i += end;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
            i = (j + 1).min(b.len());
        } else if b[i] == b'\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if let Some(len) = char_literal_len(rest) {
                out.push_str("' '");
                i += len;
            } else {
                out.push('\'');
                i += 1;
            }
        } else {
            let c = rest.chars().next().expect("non-empty");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// `r"`, `r#"`, `br##"` …: the number of hashes.
fn raw_string_start(s: &str) -> Option<usize> {
    let s = s.strip_prefix('b').unwrap_or(s);
    let s = s.strip_prefix('r')?;
    let hashes = s.bytes().take_while(|&c| c == b'#').count();
    (s.as_bytes().get(hashes) == Some(&b'"')).then_some(hashes)
}

fn char_literal_len(s: &str) -> Option<usize> {
    let mut chars = s.char_indices().skip(1);
    let (_, c) = chars.next()?;
    if c == '\\' {
        let close = s[2..].find('\'')?;
        return Some(2 + close + 1);
    }
    let (j, next) = chars.next()?;
    (next == '\'').then_some(j + 1)
}

/// Every `fn name(...) { body }` in `code`, with whether a `#[test]`
/// attribute (or proptest's `fn` inside `proptest!`) marks it a test.
fn functions_of(file: &Path, code: &str) -> Vec<Function> {
    let mut out = Vec::new();
    let mut search = 0;
    while let Some(pos) = code[search..].find("fn ") {
        let at = search + pos;
        search = at + 3;
        if at > 0 && is_ident(code.as_bytes()[at - 1]) {
            continue;
        }
        let name: String = code[at + 3..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue;
        }
        // The body starts at the first `{` after the signature, unless a
        // `;` ends a declaration first.
        let Some(open_rel) = code[at..].find(['{', ';']) else {
            break;
        };
        let open = at + open_rel;
        if code.as_bytes()[open] == b';' {
            continue;
        }
        let mut depth = 0usize;
        let mut end = open;
        for (k, ch) in code[open..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + k;
                        break;
                    }
                }
                _ => {}
            }
        }
        let before = &code[..at];
        let attrs_start = before.rfind(['}', ';']).map_or(0, |p| p + 1);
        let attrs = &before[attrs_start..];
        let is_test = attrs.contains("#[test]") || attrs.contains("#[tokio::test");
        out.push(Function {
            file: file.to_path_buf(),
            name,
            is_test,
            body: code[open..=end.min(code.len() - 1)].to_string(),
        });
    }
    out
}
