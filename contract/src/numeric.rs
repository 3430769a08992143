//! CPython float semantics the evaluation side depends on (contract §A.6).
//!
//! The canonical runtime is CPython 3.11: `sum()` adds left to right with no
//! compensation ([`plain_sum`]). CPython 3.12 and later compensate
//! ([`neumaier_sum`]), which changes the last bits of some evaluation floats;
//! [`SumMode`] selects between them. `fsum`, `fmean` and `isclose` are the
//! same on every version. See `docs/cpython-3.12.md` for the difference.

use super::json::Value;
use super::unicode_tables::{DECIMAL_ZEROS, ISSPACE};

/// Which `sum()` of floats to reproduce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SumMode {
    /// CPython ≤ 3.11: plain left-to-right addition (canonical).
    #[default]
    Plain,
    /// CPython ≥ 3.12: Neumaier-compensated addition (informational).
    Neumaier,
}

impl SumMode {
    /// `sum(xs)` under this mode.
    pub fn sum(self, xs: &[f64]) -> f64 {
        match self {
            SumMode::Plain => plain_sum(xs),
            SumMode::Neumaier => neumaier_sum(xs),
        }
    }
}

/// CPython ≤ 3.11 `sum()` of floats: start from 0 and add left to right.
pub fn plain_sum(xs: &[f64]) -> f64 {
    // Python starts from the int 0; `0 + x` for a float x is `0.0 + x`, which
    // turns a leading -0.0 into +0.0 exactly like starting from +0.0.
    xs.iter().fold(0.0, |acc, &x| acc + x)
}

/// CPython ≥ 3.12 `sum()` of floats (Neumaier compensation).
pub fn neumaier_sum(xs: &[f64]) -> f64 {
    let Some((&first, rest)) = xs.split_first() else {
        // `sum([])` is the int 0; as a float that is 0.0.
        return 0.0;
    };
    // The int start 0 is added to the first float outside the compensated loop.
    let mut f = 0.0 + first;
    let mut c = 0.0_f64;
    for &x in rest {
        let t = f + x;
        if f.abs() >= x.abs() {
            c += (f - t) + x;
        } else {
            c += (x - t) + f;
        }
        f = t;
    }
    if c != 0.0 && c.is_finite() {
        f += c;
    }
    f
}

/// Errors of [`fsum`], with CPython's messages.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FsumError {
    /// Finite inputs whose partial sums overflow.
    #[error("intermediate overflow in fsum")]
    Overflow,
    /// Both +inf and -inf among the inputs.
    #[error("-inf + inf in fsum")]
    InfMinusInf,
}

impl bat_error::Diagnostic for FsumError {
    fn kind(&self) -> bat_error::ErrorKind {
        bat_error::ErrorKind::User
    }
}

/// CPython `math.fsum`: the correctly rounded sum (Shewchuk partials with
/// CPython's final half-even correction), ported step for step.
pub fn fsum(xs: &[f64]) -> Result<f64, FsumError> {
    let mut p: Vec<f64> = Vec::with_capacity(32);
    let mut special_sum = 0.0_f64;
    let mut inf_sum = 0.0_f64;
    for &xsave in xs {
        let mut x = xsave;
        let mut i = 0;
        for j in 0..p.len() {
            let mut y = p[j];
            if x.abs() < y.abs() {
                std::mem::swap(&mut x, &mut y);
            }
            let hi = x + y;
            let lo = y - (hi - x);
            if lo != 0.0 {
                p[i] = lo;
                i += 1;
            }
            x = hi;
        }
        p.truncate(i);
        if x != 0.0 {
            if !x.is_finite() {
                // Either an intermediate overflow or a nan/inf summand.
                if xsave.is_finite() {
                    return Err(FsumError::Overflow);
                }
                if xsave.is_infinite() {
                    inf_sum += xsave;
                }
                special_sum += xsave;
                p.clear();
            } else {
                p.push(x);
            }
        }
    }
    if special_sum != 0.0 || special_sum.is_nan() {
        if inf_sum.is_nan() {
            return Err(FsumError::InfMinusInf);
        }
        return Ok(special_sum);
    }
    let mut n = p.len();
    let mut hi = 0.0_f64;
    if n > 0 {
        n -= 1;
        hi = p[n];
        let mut lo = 0.0_f64;
        while n > 0 {
            let x = hi;
            n -= 1;
            let y = p[n];
            hi = x + y;
            let yr = hi - x;
            lo = y - yr;
            if lo != 0.0 {
                break;
            }
        }
        // Round half-even across partials: if the remainder and the next
        // partial point the same way, the true sum is past the halfway point.
        if n > 0 && ((lo < 0.0 && p[n - 1] < 0.0) || (lo > 0.0 && p[n - 1] > 0.0)) {
            let y = lo * 2.0;
            let x = hi + y;
            let yr = x - hi;
            if y == yr {
                hi = x;
            }
        }
    }
    Ok(hi)
}

/// Python `statistics.fmean(xs)`: `fsum(xs) / len(xs)`. `None` for an empty
/// list (Python raises StatisticsError) or an fsum error.
pub fn fmean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    fsum(xs).ok().map(|t| t / xs.len() as f64)
}

/// Python `math.isclose(a, b, rel_tol=1e-9, abs_tol=abs_tol)`, operation for
/// operation (the default relative tolerance is always active).
pub fn isclose(a: f64, b: f64, abs_tol: f64) -> bool {
    const REL_TOL: f64 = 1e-9;
    if a == b {
        return true;
    }
    if a.is_infinite() || b.is_infinite() {
        return false;
    }
    let diff = (b - a).abs();
    diff <= (REL_TOL * b).abs() || diff <= (REL_TOL * a).abs() || diff <= abs_tol
}

/// Why Python `float(v)` fails.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToFloatError {
    /// A type `float()` does not accept (null, list, object).
    #[error("float() argument must be a string or a real number")]
    Type,
    /// A string that is not a float literal.
    #[error("could not convert string to float")]
    Value,
    /// An int too large for binary64.
    #[error("int too large to convert to float")]
    Overflow,
}

impl bat_error::Diagnostic for ToFloatError {
    fn kind(&self) -> bat_error::ErrorKind {
        bat_error::ErrorKind::User
    }
}

/// Python `str.isspace()` for one character (Unicode 14, as CPython 3.11).
pub fn py_isspace(c: char) -> bool {
    ISSPACE.binary_search(&(c as u32)).is_ok()
}

/// Python `str.strip()` with no argument.
pub fn py_strip(s: &str) -> &str {
    s.trim_matches(py_isspace)
}

/// Python `float(v)` for a parsed JSON value: ints, floats, bools (0/1) and
/// strings following Python's float-literal rules.
pub fn to_float(v: &Value) -> Result<f64, ToFloatError> {
    match v {
        Value::Bool(b) => Ok(if *b { 1.0 } else { 0.0 }),
        // Rust's int → float conversion rounds to nearest, ties to even, like
        // Python's int.__float__.
        Value::Int(i) => Ok(*i as f64),
        Value::BigInt(text) => {
            let x: f64 = text.parse().map_err(|_| ToFloatError::Value)?;
            if x.is_finite() {
                Ok(x)
            } else {
                Err(ToFloatError::Overflow)
            }
        }
        Value::Float(x) => Ok(*x),
        Value::Str(s) => str_to_float(s),
        _ => Err(ToFloatError::Type),
    }
}

/// The ASCII digit for a Unicode decimal digit (Python accepts any Nd digit
/// in `float()`), or `None`.
fn decimal_digit(c: char) -> Option<char> {
    if c.is_ascii_digit() {
        return Some(c);
    }
    let cp = c as u32;
    let idx = DECIMAL_ZEROS.partition_point(|&z| z <= cp);
    let zero = *DECIMAL_ZEROS.get(idx.checked_sub(1)?)?;
    let d = cp - zero;
    if d < 10 {
        char::from_digit(d, 10)
    } else {
        None
    }
}

/// Python `float(str)`: optional surrounding whitespace, then a sign and
/// either `inf`/`infinity`/`nan` (any case) or a decimal literal with
/// optional single underscores between digits.
///
/// CPython first rewrites a non-ASCII string: each non-ASCII whitespace
/// character becomes a space, each Unicode decimal digit its ASCII digit,
/// and anything else non-ASCII ends the literal (invalid). ASCII characters
/// are kept as they are, and only ASCII whitespace (space, `\t`, `\n`, `\r`,
/// `\x0b`, `\x0c`) is then stripped, so `"7\x1f"` is invalid even though
/// `"\x1f".isspace()` is true.
pub fn str_to_float(s: &str) -> Result<f64, ToFloatError> {
    let mut ascii = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_ascii() {
            ascii.push(c);
        } else if py_isspace(c) {
            ascii.push(' ');
        } else if let Some(d) = decimal_digit(c) {
            ascii.push(d);
        } else {
            return Err(ToFloatError::Value);
        }
    }
    let trimmed =
        ascii.trim_matches(|c: char| matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c'));
    let b = trimmed.as_bytes();
    let (neg, body) = match b.first() {
        Some(b'-') => (true, &trimmed[1..]),
        Some(b'+') => (false, &trimmed[1..]),
        _ => (false, trimmed),
    };
    let lower = body.to_ascii_lowercase();
    let special = match lower.as_str() {
        "inf" | "infinity" => Some(f64::INFINITY),
        "nan" => Some(f64::NAN),
        _ => None,
    };
    if let Some(x) = special {
        return Ok(if neg { -x } else { x });
    }
    let lit = parse_decimal_literal(body).ok_or(ToFloatError::Value)?;
    let x: f64 = lit.parse().map_err(|_| ToFloatError::Value)?;
    Ok(if neg { -x } else { x })
}

/// Validate `digitpart ["." [digitpart]] [exp] | "." digitpart [exp]` and
/// return it with underscores removed and empty parts filled with `0`, in a
/// form Rust's correctly rounded parser accepts.
fn parse_decimal_literal(body: &str) -> Option<String> {
    let b = body.as_bytes();
    let mut i = 0;
    let digits = |i: &mut usize, out: &mut String| -> bool {
        // digit (["_"] digit)*
        let start = *i;
        while *i < b.len() {
            if b[*i].is_ascii_digit() {
                out.push(b[*i] as char);
                *i += 1;
            } else if b[*i] == b'_'
                && *i > start
                && b[*i - 1].is_ascii_digit()
                && b.get(*i + 1).is_some_and(u8::is_ascii_digit)
            {
                *i += 1;
            } else {
                break;
            }
        }
        *i > start
    };
    let mut int_part = String::new();
    let mut frac_part = String::new();
    let has_int = digits(&mut i, &mut int_part);
    let mut has_frac = false;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        has_frac = digits(&mut i, &mut frac_part);
    }
    if !has_int && !has_frac {
        return None;
    }
    let mut exp = String::new();
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            exp.push(b[i] as char);
            i += 1;
        }
        if !digits(&mut i, &mut exp) {
            return None;
        }
    }
    if i != b.len() {
        return None;
    }
    let mut out = if has_int { int_part } else { "0".to_string() };
    out.push('.');
    out.push_str(if has_frac { &frac_part } else { "0" });
    if !exp.is_empty() {
        out.push('e');
        out.push_str(&exp);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(s: &str) -> Result<f64, ToFloatError> {
        str_to_float(s)
    }

    #[test]
    fn to_float_accepts_python_literals() {
        assert_eq!(f("0.75"), Ok(0.75));
        assert_eq!(f("1e-1"), Ok(0.1));
        assert_eq!(f("  \t1.5\n"), Ok(1.5));
        assert_eq!(f("\u{b}7\u{c}"), Ok(7.0));
        assert_eq!(f("\u{2003}2\u{3000}"), Ok(2.0));
        assert_eq!(f("1_000.000_1"), Ok(1000.0001));
        assert_eq!(f("-.5"), Ok(-0.5));
        assert_eq!(f("5."), Ok(5.0));
        assert_eq!(f("1.e2"), Ok(100.0));
        assert_eq!(f("+1E+2"), Ok(100.0));
        assert_eq!(f("1e1_0"), Ok(1e10));
        assert_eq!(f("InFiNiTy"), Ok(f64::INFINITY));
        assert_eq!(f("-inf"), Ok(f64::NEG_INFINITY));
        assert!(f("nan").unwrap().is_nan());
        assert!(f("-NaN").unwrap().is_nan());
        assert_eq!(f("1e400"), Ok(f64::INFINITY));
        assert_eq!(f("-0"), Ok(-0.0));
        assert!(f("-0").unwrap().is_sign_negative());
        // Arabic-Indic and fullwidth digits are decimal digits to Python.
        assert_eq!(f("\u{663}.\u{665}"), Ok(3.5));
        assert_eq!(f("\u{ff11}"), Ok(1.0));
    }

    #[test]
    fn to_float_rejects_what_python_rejects() {
        for bad in [
            "",
            " ",
            "_1",
            "1_",
            "1__0",
            "1._5",
            "1_.5",
            ".",
            "e5",
            "1e",
            "1e+",
            "0x10",
            "1.5f",
            "in f",
            "infinit",
            "nan1",
            "++1",
            "+-1",
            "1 2",
            "\u{200b}1",
            "١e",
            "1,5",
            "7\u{1f}",
            "\u{1c}7",
            "1\u{7f}",
            "1\u{a0}2",
        ] {
            assert_eq!(f(bad), Err(ToFloatError::Value), "{bad:?}");
        }
    }

    #[test]
    fn to_float_values() {
        assert_eq!(to_float(&Value::Bool(true)), Ok(1.0));
        assert_eq!(to_float(&Value::Int(3)), Ok(3.0));
        // 2^53 + 1 rounds half-even to 2^53.
        assert_eq!(
            to_float(&Value::Int(9_007_199_254_740_993)),
            Ok(9_007_199_254_740_992.0)
        );
        assert_eq!(
            to_float(&Value::BigInt("1".to_string() + &"0".repeat(400))),
            Err(ToFloatError::Overflow)
        );
        assert_eq!(
            to_float(&Value::BigInt("-".to_string() + &"9".repeat(30))),
            Ok(-1e30)
        );
        assert_eq!(to_float(&Value::Null), Err(ToFloatError::Type));
        assert_eq!(to_float(&Value::Array(vec![])), Err(ToFloatError::Type));
    }

    #[test]
    fn plain_and_neumaier_differ_like_cpython() {
        let xs = [0.7 * 0.25, 0.7 * 0.15, 0.7 * 0.35, 0.7 * 0.15, 0.7 * 0.1];
        assert_eq!(
            plain_sum(&xs),
            0.7 * 0.25 + 0.7 * 0.15 + 0.7 * 0.35 + 0.7 * 0.15 + 0.7 * 0.1
        );
        assert_eq!(plain_sum(&[0.1, 0.2, 0.3]), 0.6000000000000001);
        assert_eq!(neumaier_sum(&[0.1, 0.2, 0.3]), 0.6);
        assert_eq!(neumaier_sum(&[1e100, 1.0, -1e100]), 1.0);
        assert!(!plain_sum(&[-0.0]).is_sign_negative());
        assert!(!neumaier_sum(&[-0.0, -0.0]).is_sign_negative());
        assert_eq!(plain_sum(&[0.25, 0.15, 0.35, 0.15, 0.1]), 1.0);
    }

    #[test]
    fn fsum_matches_cpython_examples() {
        assert_eq!(fsum(&[0.1; 10]), Ok(1.0));
        assert_eq!(
            fsum(&[1e100, 1.0, -1e100, 1e-100, 1e50, -1.0, -1e50]),
            Ok(1e-100)
        );
        // Half-even across partials: 2^53 + 1 + tiny lands above the halfway point.
        assert_eq!(
            fsum(&[9007199254740992.0, 1.0, 1e-300]),
            Ok(9007199254740994.0)
        );
        assert_eq!(fsum(&[9007199254740992.0, 1.0]), Ok(9007199254740992.0));
        assert_eq!(fsum(&[]), Ok(0.0));
        assert_eq!(fsum(&[f64::MAX, f64::MAX]), Err(FsumError::Overflow));
        assert_eq!(
            fsum(&[f64::INFINITY, f64::NEG_INFINITY]),
            Err(FsumError::InfMinusInf)
        );
        assert_eq!(fsum(&[f64::INFINITY, 1.0]), Ok(f64::INFINITY));
        assert!(fsum(&[f64::NAN, 1.0]).unwrap().is_nan());
    }

    #[test]
    fn isclose_rel_tol_always_active() {
        assert!(isclose(0.6000000001, 0.6, 1e-12));
        assert!(!isclose(0.600001, 0.6, 1e-12));
        assert!(isclose(1e-13, 0.0, 1e-12));
        assert!(!isclose(f64::INFINITY, f64::MAX, 1e300));
        assert!(isclose(f64::INFINITY, f64::INFINITY, 0.0));
        assert!(!isclose(f64::NAN, f64::NAN, 1.0));
    }
}
