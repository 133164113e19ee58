//! The `key = value; key = value` syntax of `wsrep_provider_options`
//! (contract §8.1).
//!
//! * Pairs are separated by `;`, key and value by `=`.
//! * A backslash escapes `;`, `=` and itself. A backslash before any other
//!   character (or at the very end) is kept literally, so Windows-like paths
//!   and regular expressions survive unharmed.
//! * Leading and trailing white space of keys and values is trimmed.
//! * Segments that are empty or white space only are ignored (`''`, `' '`,
//!   `';;'`, a trailing `;`).
//! * Errors: a segment without `=`, a segment with more than one unescaped
//!   `=`, an empty key.
//! * An empty value (`key=`) is allowed: Galera prints some keys with an empty
//!   value (`gmcast.mcast_addr = ; `) and must accept them back.

use super::OptionsError;

/// One character of a segment, remembering whether it was escaped.
#[derive(Clone, Copy)]
struct Ch {
    c: char,
    escaped: bool,
}

/// Split `conf` into segments at unescaped `;`, resolving escapes.
fn segments(conf: &str) -> Vec<Vec<Ch>> {
    let mut out = Vec::new();
    let mut cur = Vec::new();
    let mut it = conf.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '\\' => match it.peek() {
                Some(&n @ (';' | '=' | '\\')) => {
                    it.next();
                    cur.push(Ch {
                        c: n,
                        escaped: true,
                    });
                }
                // Lone backslash: literal.
                _ => cur.push(Ch {
                    c: '\\',
                    escaped: true,
                }),
            },
            ';' => out.push(std::mem::take(&mut cur)),
            _ => cur.push(Ch { c, escaped: false }),
        }
    }
    out.push(cur);
    out
}

fn text(chars: &[Ch]) -> String {
    chars
        .iter()
        .map(|ch| ch.c)
        .collect::<String>()
        .trim()
        .to_string()
}

/// Parse the raw syntax into `(key, value)` pairs, in input order, without
/// looking at what the keys mean. Duplicate keys are kept (last one wins when
/// applied).
///
/// Error messages never quote a value (which might be `lockstep.secret`).
pub fn parse_pairs(conf: &str) -> Result<Vec<(String, String)>, OptionsError> {
    let mut pairs = Vec::new();
    for seg in segments(conf) {
        let eqs: Vec<usize> = seg
            .iter()
            .enumerate()
            .filter(|(_, ch)| ch.c == '=' && !ch.escaped)
            .map(|(i, _)| i)
            .collect();
        match eqs.as_slice() {
            [] => {
                let t = text(&seg);
                if t.is_empty() {
                    continue;
                }
                return Err(OptionsError::Syntax(format!(
                    "'{t}' has no value: expected 'key = value' (escape a literal ';' as '\\;')"
                )));
            }
            [at] => {
                let key = text(&seg[..*at]);
                let value = text(&seg[at + 1..]);
                if key.is_empty() {
                    return Err(OptionsError::Syntax(
                        "empty key before '=': expected 'key = value'".to_string(),
                    ));
                }
                pairs.push((key, value));
            }
            [first, ..] => {
                let key = text(&seg[..*first]);
                return Err(OptionsError::Syntax(format!(
                    "the value of '{key}' contains '=' more than once: \
                     escape a literal '=' as '\\=' (pairs are separated by ';')"
                )));
            }
        }
    }
    Ok(pairs)
}

/// Escape `s` so that [`parse_pairs`] reads it back as the same key or value:
/// backslash, `;` and `=` get a backslash in front. (Leading and trailing
/// white space cannot be preserved; the parser trims it.)
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | ';' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
