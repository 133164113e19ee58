//! Typed value parsers (contract §8.1 "Value syntax") and per-key validation.
//!
//! Each parser returns a short human-readable reason on failure; the caller
//! wraps it in [`OptionsError::BadValue`](super::OptionsError::BadValue).

use std::time::Duration;

use super::table::{Check, Kind, Spec};

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Parse a boolean: `yes/no/true/false/on/off/1/0`, case-insensitive.
pub fn parse_bool(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "yes" | "true" | "on" | "1" => Ok(true),
        "no" | "false" | "off" | "0" => Ok(false),
        _ => Err("expected a boolean (yes/no, true/false, on/off, 1/0)".to_string()),
    }
}

fn suffix_multiplier(c: char) -> Option<u64> {
    match c.to_ascii_uppercase() {
        'K' => Some(1 << 10),
        'M' => Some(1 << 20),
        'G' => Some(1 << 30),
        'T' => Some(1 << 40),
        _ => None,
    }
}

/// Magnitude of an unsigned number: decimal with optional `K/M/G/T` suffix
/// (powers of 1024), or `0x` hexadecimal.
fn parse_magnitude(s: &str) -> Result<u128, String> {
    if s.is_empty() {
        return Err("empty value".to_string());
    }
    if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        if hex.is_empty() || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err("malformed hexadecimal number".to_string());
        }
        return u128::from_str_radix(hex, 16).map_err(|_| "number too large".to_string());
    }
    let (digits, mult) = match s.chars().last().and_then(suffix_multiplier) {
        Some(m) => (&s[..s.len() - 1], m),
        None => (s, 1),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return Err("expected a number with optional K/M/G/T suffix".to_string());
    }
    let n: u128 = digits.parse().map_err(|_| "number too large".to_string())?;
    n.checked_mul(u128::from(mult))
        .ok_or_else(|| "number too large".to_string())
}

/// Parse a size in bytes: `128M`, `10M`, `1G`, `4096`. Suffixes `K/M/G/T`
/// (either case) are powers of 1024.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    if s.starts_with('-') {
        return Err("a size cannot be negative".to_string());
    }
    let n = parse_magnitude(s.strip_prefix('+').unwrap_or(s))?;
    u64::try_from(n).map_err(|_| "size too large".to_string())
}

/// Parse an integer: optional sign, decimal (optional `K/M/G/T` suffix) or
/// `0x` hexadecimal.
pub fn parse_int(s: &str) -> Result<i64, String> {
    let s = s.trim();
    let (neg, body) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let out_of_range = || "integer out of range".to_string();
    let n = i128::try_from(parse_magnitude(body)?).map_err(|_| out_of_range())?;
    i64::try_from(if neg { -n } else { n }).map_err(|_| out_of_range())
}

/// Parse a finite floating-point number (`0.25`, `1.0`, `1`).
pub fn parse_float(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err("expected a decimal number".to_string()),
    }
}

/// A decimal number `123`, `0.5` or `0,5` as (integer part, fraction digits).
fn split_decimal(s: &str) -> Option<(u128, &str)> {
    let (int, frac) = match s.find(['.', ',']) {
        Some(i) => (&s[..i], &s[i + 1..]),
        None => (s, ""),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.chars().all(|c| c.is_ascii_digit()) || !frac.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let int = if int.is_empty() { 0 } else { int.parse().ok()? };
    Some((int, frac))
}

/// `number × unit_ns` in nanoseconds, exact for up to 18 fraction digits
/// (further digits are truncated).
fn scaled(int: u128, frac: &str, unit_ns: u128) -> Option<u128> {
    let mut total = int.checked_mul(unit_ns)?;
    let frac = &frac[..frac.len().min(18)];
    if !frac.is_empty() {
        let num: u128 = frac.parse().ok()?;
        let den = 10u128.pow(frac.len() as u32);
        total = total.checked_add(num.checked_mul(unit_ns)? / den)?;
    }
    Some(total)
}

/// Parse a duration: ISO-8601 `PnYnMnWnDTnHnMnS` (any subset of components
/// in that order, each possibly fractional: `PT30S`, `PT0.5S`, `PT10M`,
/// `P1D`, `PT1H30M5S`), or a plain non-negative number of seconds (`5`,
/// `0.5`). A year counts as 365 days and a month as 30 days. Designators are
/// case-insensitive.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    const SEC: u128 = NANOS_PER_SEC;
    const DAY: u128 = 86_400 * SEC;
    let bad = || "expected an ISO-8601 duration such as PT30S, PT0.5S or P1D".to_string();
    let s = s.trim().to_ascii_uppercase();
    let nanos = if let Some(rest) = s.strip_prefix('P') {
        // Designators in the order they must appear; `T` switches to time.
        const DATE: [(char, u128); 4] = [
            ('Y', 365 * DAY),
            ('M', 30 * DAY),
            ('W', 7 * DAY),
            ('D', DAY),
        ];
        const TIME: [(char, u128); 3] = [('H', 3600 * SEC), ('M', 60 * SEC), ('S', SEC)];
        let (date, time) = match rest.find('T') {
            Some(i) => (&rest[..i], Some(&rest[i + 1..])),
            None => (rest, None),
        };
        // `P`, `PT` and a dangling `T` (`P1DT`) carry no value.
        if time.is_some_and(str::is_empty) || (date.is_empty() && time.is_none()) {
            return Err(bad());
        }
        let mut total: u128 = 0;
        for (part, units) in [(date, &DATE[..]), (time.unwrap_or(""), &TIME[..])] {
            let mut next = 0; // index of the first designator still allowed
            let mut rest = part;
            while !rest.is_empty() {
                let end = rest
                    .find(|c: char| c.is_ascii_alphabetic())
                    .ok_or_else(bad)?;
                let (num, designator) = (&rest[..end], rest[end..].chars().next().ok_or_else(bad)?);
                let pos = units[next..]
                    .iter()
                    .position(|(d, _)| *d == designator)
                    .ok_or_else(bad)?
                    + next;
                next = pos + 1;
                let (int, frac) = split_decimal(num).ok_or_else(bad)?;
                let v = scaled(int, frac, units[pos].1)
                    .ok_or_else(|| "duration too long".to_string())?;
                total = total
                    .checked_add(v)
                    .ok_or_else(|| "duration too long".to_string())?;
                rest = &rest[end + 1..];
            }
        }
        total
    } else {
        let (int, frac) = split_decimal(&s).ok_or_else(bad)?;
        scaled(int, frac, SEC).ok_or_else(|| "duration too long".to_string())?
    };
    let secs = u64::try_from(nanos / NANOS_PER_SEC).map_err(|_| "duration too long".to_string())?;
    Ok(Duration::new(secs, (nanos % NANOS_PER_SEC) as u32))
}

/// Check `value` against the key's kind and extra check. Returns the reason
/// on failure.
pub fn validate(spec: &Spec, value: &str) -> Result<(), String> {
    match spec.kind {
        Kind::Duration => parse_duration(value).map(drop),
        Kind::Size => parse_size(value).map(drop),
        Kind::Bool => parse_bool(value).map(drop),
        Kind::Int => {
            let v = parse_int(value)?;
            match spec.check {
                Check::Range(lo, hi) if v < lo || v > hi => {
                    Err(format!("must be between {lo} and {hi}"))
                }
                _ => Ok(()),
            }
        }
        Kind::Float => {
            let v = parse_float(value)?;
            match spec.check {
                Check::FloatRange(lo, hi) if v < lo || v > hi => {
                    Err(format!("must be between {lo} and {hi}"))
                }
                _ => Ok(()),
            }
        }
        Kind::Str => match spec.check {
            Check::OneOf(words) if !words.iter().any(|w| w.eq_ignore_ascii_case(value)) => {
                Err(format!("must be one of {}", words.join(", ")))
            }
            Check::AutoOrSize if !value.eq_ignore_ascii_case("auto") => parse_size(value)
                .map(drop)
                .map_err(|_| "expected 'auto' or a size such as 212992 or 4M".to_string()),
            _ => Ok(()),
        },
    }
}

/// Whether two valid spellings mean the same value for this key (`128M` and
/// `134217728`, `yes` and `true`, `PT1M` and `PT60S`).
pub fn same_value(spec: &Spec, a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    fn eq<T: PartialEq, E>(x: Result<T, E>, y: Result<T, E>) -> bool {
        matches!((x, y), (Ok(x), Ok(y)) if x == y)
    }
    match spec.kind {
        Kind::Duration => eq(parse_duration(a), parse_duration(b)),
        Kind::Size => eq(parse_size(a), parse_size(b)),
        Kind::Bool => eq(parse_bool(a), parse_bool(b)),
        Kind::Int => eq(parse_int(a), parse_int(b)),
        Kind::Float => eq(parse_float(a), parse_float(b)),
        Kind::Str => match spec.check {
            Check::OneOf(_) => a.eq_ignore_ascii_case(b),
            Check::AutoOrSize => {
                (a.eq_ignore_ascii_case("auto") && b.eq_ignore_ascii_case("auto"))
                    || eq(parse_size(a), parse_size(b))
            }
            _ => false,
        },
    }
}
