//! JSON with the reference's exact semantics (contract §A).
//!
//! The reference is Python, so the value model keeps ints and floats apart,
//! objects keep document order (duplicate keys: the last value wins at the
//! first key's position), and the parser accepts `NaN`/`Infinity`. Three
//! encoders cover every byte the contract writes: canonical compact (CJ),
//! pretty (PJ) and ASCII compact (AJ). Floats are printed like Python's
//! `repr`.

use std::fmt::Write as _;

use sha2::{Digest, Sha256};

/// A JSON value with Python's distinctions.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `null`
    Null,
    /// `true` / `false`
    Bool(bool),
    /// An integer (Python `int`). Ints outside `i64` are kept as [`Value::BigInt`].
    Int(i64),
    /// An integer too large for `i64`, kept as its decimal text (optional `-`).
    BigInt(String),
    /// A binary64 float (Python `float`), possibly NaN or infinite after parsing.
    Float(f64),
    /// A string.
    Str(String),
    /// An array.
    Array(Vec<Value>),
    /// An object in document order.
    Object(Map),
}

/// An insertion-ordered JSON object.
///
/// Objects in the contract are small (at most a few dozen members), so a
/// vector with linear lookup is both the simplest and the fastest choice.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Map {
    entries: Vec<(String, Value)>,
}

impl Map {
    /// An empty object.
    pub fn new() -> Self {
        Map {
            entries: Vec::new(),
        }
    }

    /// Insert or replace; a replaced key keeps its first position.
    pub fn insert(&mut self, key: impl Into<String>, value: Value) {
        let key = key.into();
        if let Some(slot) = self.entries.iter_mut().find(|(k, _)| *k == key) {
            slot.1 = value;
        } else {
            self.entries.push((key, value));
        }
    }

    /// Builder form of [`Map::insert`].
    pub fn with(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.insert(key, value.into());
        self
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Mutable access to the value of `key`.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Value> {
        self.entries
            .iter_mut()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    /// Remove `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let pos = self.entries.iter().position(|(k, _)| k == key)?;
        Some(self.entries.remove(pos).1)
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Members in document order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// Keys in document order.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.entries.iter().map(|(k, _)| k)
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the object has no members.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Members sorted by key (code point order == UTF-8 byte order).
    fn sorted(&self) -> Vec<&(String, Value)> {
        let mut v: Vec<&(String, Value)> = self.entries.iter().collect();
        v.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        v
    }
}

impl FromIterator<(String, Value)> for Map {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Self {
        let mut m = Map::new();
        for (k, v) in iter {
            m.insert(k, v);
        }
        m
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}
impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}
impl From<i32> for Value {
    fn from(i: i32) -> Self {
        Value::Int(i64::from(i))
    }
}
impl From<usize> for Value {
    fn from(i: usize) -> Self {
        Value::Int(i64::try_from(i).expect("sizes in the contract fit in i64"))
    }
}
impl From<u64> for Value {
    fn from(i: u64) -> Self {
        match i64::try_from(i) {
            Ok(v) => Value::Int(v),
            Err(_) => Value::BigInt(i.to_string()),
        }
    }
}
impl From<f64> for Value {
    fn from(f: f64) -> Self {
        Value::Float(f)
    }
}
impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(s.to_string())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(s)
    }
}
impl From<&String> for Value {
    fn from(s: &String) -> Self {
        Value::Str(s.clone())
    }
}
impl From<Map> for Value {
    fn from(m: Map) -> Self {
        Value::Object(m)
    }
}
impl<T: Into<Value>> From<Vec<T>> for Value {
    fn from(v: Vec<T>) -> Self {
        Value::Array(v.into_iter().map(Into::into).collect())
    }
}

impl Value {
    /// The object, if this is one.
    pub fn as_object(&self) -> Option<&Map> {
        match self {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }
    /// The array, if this is one.
    pub fn as_array(&self) -> Option<&Vec<Value>> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
    /// Member `key` of an object (None for non-objects).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.as_object().and_then(|m| m.get(key))
    }
    /// Whether this is exactly `true` (Python `is True`).
    pub fn is_true(&self) -> bool {
        matches!(self, Value::Bool(true))
    }
    /// Whether this is exactly `false` (Python `is False`).
    pub fn is_false(&self) -> bool {
        matches!(self, Value::Bool(false))
    }
}

/// An encoding error: the only one is a non-finite float in CJ/AJ.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EncodeError {
    /// Python: "Out of range float values are not JSON compliant".
    #[error("Out of range float values are not JSON compliant: {value}")]
    NonFiniteFloat {
        /// The offending value as text (`nan`, `inf`, `-inf`).
        value: String,
    },
}

impl bat_error::Diagnostic for EncodeError {
    fn kind(&self) -> bat_error::ErrorKind {
        bat_error::ErrorKind::User
    }
}

/// A parse error with the byte offset where it happened.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid JSON at byte {offset}: {reason}")]
pub struct ParseError {
    /// Byte offset into the input.
    pub offset: usize,
    /// What was wrong.
    pub reason: String,
}

impl bat_error::Diagnostic for ParseError {
    fn kind(&self) -> bat_error::ErrorKind {
        bat_error::ErrorKind::User
    }
}

/// Python `==` on parsed JSON values: ints, floats and bools compare by
/// value (`1 == 1.0 == True`), objects by key set and values in any order,
/// arrays element-wise; NaN is unequal to everything.
pub fn python_eq(a: &Value, b: &Value) -> bool {
    fn num(v: &Value) -> Option<f64> {
        match v {
            Value::Bool(x) => Some(f64::from(u8::from(*x))),
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) => Some(*f),
            _ => None,
        }
    }
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::BigInt(x), Value::BigInt(y)) => x == y,
        (Value::Str(x), Value::Str(y)) => x == y,
        (Value::Null, Value::Null) => true,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| python_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| python_eq(v, w)))
        }
        _ => match (num(a), num(b)) {
            (Some(x), Some(y)) => x == y,
            _ => false,
        },
    }
}

// ---------------------------------------------------------------------------
// Float formatting (§A.5)

/// Python `repr(float)`. Non-finite values print as `NaN`, `Infinity`,
/// `-Infinity` (what Python's json module writes when not rejecting them).
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    if x == 0.0 {
        return if x.is_sign_negative() {
            "-0.0".into()
        } else {
            "0.0".into()
        };
    }
    // `{:e}` yields the shortest round-trip digits: "d[.ddd]e<exp>".
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').expect("{:e} always has an exponent");
    let exp: i32 = exp.parse().expect("{:e} exponent is an integer");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let n = digits.len() as i32;
    let mut out = String::with_capacity(24);
    if x < 0.0 {
        out.push('-');
    }
    if !(-4..16).contains(&exp) {
        out.push_str(&digits[..1]);
        if n > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        let _ = write!(out, "{:02}", exp.abs());
    } else if exp < 0 {
        out.push_str("0.");
        for _ in 0..(-exp - 1) {
            out.push('0');
        }
        out.push_str(&digits);
    } else if exp >= n - 1 {
        out.push_str(&digits);
        for _ in 0..(exp - n + 1) {
            out.push('0');
        }
        out.push_str(".0");
    } else {
        let split = (exp + 1) as usize;
        out.push_str(&digits[..split]);
        out.push('.');
        out.push_str(&digits[split..]);
    }
    out
}

// ---------------------------------------------------------------------------
// Encoders (§A.2-§A.4)

fn write_str(out: &mut String, s: &str, ascii: bool) {
    out.push('"');
    // Copy unescaped runs in one go: training rows are megabytes of mostly
    // plain text, and a per-character push dominated the round build.
    let bytes = s.as_bytes();
    let mut run = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let special = b == b'"' || b == b'\\' || b < 0x20 || (ascii && b >= 0x7f);
        if !special {
            i += 1;
            continue;
        }
        out.push_str(&s[run..i]);
        // `i` is a char boundary: every special byte is ASCII or a UTF-8 lead byte.
        let c = s[i..].chars().next().unwrap_or('\u{fffd}');
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{08}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{0c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{:04x}", unit);
                }
            }
        }
        i += c.len_utf8();
        run = i;
    }
    out.push_str(&s[run..]);
    out.push('"');
}

fn write_compact(out: &mut String, v: &Value, ascii: bool) -> Result<(), EncodeError> {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::BigInt(s) => out.push_str(s),
        Value::Float(f) => {
            if !f.is_finite() {
                return Err(EncodeError::NonFiniteFloat {
                    value: f.to_string(),
                });
            }
            out.push_str(&float_repr(*f));
        }
        Value::Str(s) => write_str(out, s, ascii),
        Value::Array(a) => {
            out.push('[');
            for (i, item) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_compact(out, item, ascii)?;
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, item)) in m.sorted().into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_str(out, k, ascii);
                out.push(':');
                write_compact(out, item, ascii)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

fn indent(out: &mut String, depth: usize) {
    for _ in 0..depth {
        out.push_str("  ");
    }
}

fn write_pretty(out: &mut String, v: &Value, depth: usize) {
    match v {
        Value::Float(f) => out.push_str(&float_repr(*f)),
        Value::Array(a) if !a.is_empty() => {
            out.push_str("[\n");
            for (i, item) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n");
                }
                indent(out, depth + 1);
                write_pretty(out, item, depth + 1);
            }
            out.push('\n');
            indent(out, depth);
            out.push(']');
        }
        Value::Object(m) if !m.is_empty() => {
            out.push_str("{\n");
            for (i, (k, item)) in m.sorted().into_iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n");
                }
                indent(out, depth + 1);
                write_str(out, k, true);
                out.push_str(": ");
                write_pretty(out, item, depth + 1);
            }
            out.push('\n');
            indent(out, depth);
            out.push('}');
        }
        other => {
            // Scalars and empty containers: the compact form is the same, and
            // PJ never rejects floats (handled above), so this cannot fail.
            write_compact(out, other, true).expect("non-float scalars always encode");
        }
    }
}

/// CJ: canonical compact JSON, sorted keys, raw UTF-8 (§A.2).
pub fn canonical_json(v: &Value) -> Result<String, EncodeError> {
    let mut out = String::new();
    write_compact(&mut out, v, false)?;
    Ok(out)
}

/// AJ: CJ layout with ASCII escaping (§A.4).
pub fn ascii_json(v: &Value) -> Result<String, EncodeError> {
    let mut out = String::new();
    write_compact(&mut out, v, true)?;
    Ok(out)
}

/// PJ: `indent=2, sort_keys=True`, ASCII, **without** the trailing LF (§A.3).
pub fn pretty_json(v: &Value) -> String {
    let mut out = String::new();
    write_pretty(&mut out, v, 0);
    out
}

/// PJ followed by one LF: the bytes of every PJ file the reference writes.
pub fn pretty_json_file(v: &Value) -> String {
    let mut s = pretty_json(v);
    s.push('\n');
    s
}

/// Lowercase hex SHA-256 of bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// `digest(v)` = sha256hex(utf8(CJ(v))).
pub fn digest(v: &Value) -> Result<String, EncodeError> {
    Ok(sha256_hex(canonical_json(v)?.as_bytes()))
}

// ---------------------------------------------------------------------------
// Parser (§A.1): Python `json.loads` semantics.

/// Parse one JSON document (any top-level value, surrounding whitespace allowed).
pub fn parse(text: &str) -> Result<Value, ParseError> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
        text,
    };
    p.ws();
    let v = p.value(0)?;
    p.ws();
    if p.i != p.s.len() {
        return Err(p.err("extra data after the document"));
    }
    Ok(v)
}

/// Parse bytes that must be UTF-8.
pub fn parse_bytes(bytes: &[u8]) -> Result<Value, ParseError> {
    let text = std::str::from_utf8(bytes).map_err(|e| ParseError {
        offset: e.valid_up_to(),
        reason: "input is not valid UTF-8".into(),
    })?;
    parse(text)
}

const MAX_DEPTH: usize = 512;

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    text: &'a str,
}

impl Parser<'_> {
    fn err(&self, reason: &str) -> ParseError {
        ParseError {
            offset: self.i,
            reason: reason.to_string(),
        }
    }

    fn ws(&mut self) {
        // Python's json whitespace is exactly these four bytes.
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.s.get(self.i) {
            self.i += 1;
        }
    }

    fn eat(&mut self, lit: &str) -> bool {
        if self.s[self.i..].starts_with(lit.as_bytes()) {
            self.i += lit.len();
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, ParseError> {
        if depth > MAX_DEPTH {
            return Err(self.err("nesting too deep"));
        }
        match self.s.get(self.i) {
            None => Err(self.err("unexpected end of input")),
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => Ok(Value::Str(self.string()?)),
            Some(b'n') if self.eat("null") => Ok(Value::Null),
            Some(b't') if self.eat("true") => Ok(Value::Bool(true)),
            Some(b'f') if self.eat("false") => Ok(Value::Bool(false)),
            Some(b'N') if self.eat("NaN") => Ok(Value::Float(f64::NAN)),
            Some(b'I') if self.eat("Infinity") => Ok(Value::Float(f64::INFINITY)),
            Some(b'-') if self.s[self.i..].starts_with(b"-Infinity") => {
                self.i += "-Infinity".len();
                Ok(Value::Float(f64::NEG_INFINITY))
            }
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.err("expecting a value")),
        }
    }

    fn number(&mut self) -> Result<Value, ParseError> {
        let start = self.i;
        if self.s.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        match self.s.get(self.i) {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => {
                while matches!(self.s.get(self.i), Some(b'0'..=b'9')) {
                    self.i += 1;
                }
            }
            _ => return Err(self.err("expecting a value")),
        }
        let mut is_float = false;
        // Python's number regex takes the fraction/exponent only when digits follow.
        if self.s.get(self.i) == Some(&b'.') && matches!(self.s.get(self.i + 1), Some(b'0'..=b'9'))
        {
            is_float = true;
            self.i += 1;
            while matches!(self.s.get(self.i), Some(b'0'..=b'9')) {
                self.i += 1;
            }
        }
        if matches!(self.s.get(self.i), Some(b'e' | b'E')) {
            let mut j = self.i + 1;
            if matches!(self.s.get(j), Some(b'+' | b'-')) {
                j += 1;
            }
            if matches!(self.s.get(j), Some(b'0'..=b'9')) {
                is_float = true;
                self.i = j;
                while matches!(self.s.get(self.i), Some(b'0'..=b'9')) {
                    self.i += 1;
                }
            }
        }
        let lit = &self.text[start..self.i];
        if is_float {
            let f: f64 = lit.parse().map_err(|_| self.err("bad number"))?;
            Ok(Value::Float(f))
        } else {
            match lit.parse::<i64>() {
                Ok(v) => Ok(Value::Int(v)),
                Err(_) => {
                    let neg = lit.starts_with('-');
                    let digits = lit.trim_start_matches('-');
                    Ok(Value::BigInt(if neg {
                        format!("-{digits}")
                    } else {
                        digits.to_string()
                    }))
                }
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, ParseError> {
        let h = self
            .s
            .get(self.i..self.i + 4)
            .ok_or_else(|| self.err("invalid \\uXXXX escape"))?;
        let h = std::str::from_utf8(h).map_err(|_| self.err("invalid \\uXXXX escape"))?;
        if !h.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(self.err("invalid \\uXXXX escape"));
        }
        let v = u32::from_str_radix(h, 16).map_err(|_| self.err("invalid \\uXXXX escape"))?;
        self.i += 4;
        Ok(v)
    }

    fn string(&mut self) -> Result<String, ParseError> {
        self.i += 1; // opening quote
        let mut out = String::new();
        loop {
            let start = self.i;
            while let Some(&b) = self.s.get(self.i) {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.i += 1;
            }
            out.push_str(&self.text[start..self.i]);
            match self.s.get(self.i) {
                None => return Err(self.err("unterminated string")),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.i += 1;
                    let c = *self
                        .s
                        .get(self.i)
                        .ok_or_else(|| self.err("unterminated string"))?;
                    self.i += 1;
                    match c {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{08}'),
                        b'f' => out.push('\u{0c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let hi = self.hex4()?;
                            let cp = if (0xD800..0xDC00).contains(&hi)
                                && self.s[self.i..].starts_with(b"\\u")
                            {
                                let save = self.i;
                                self.i += 2;
                                let lo = self.hex4()?;
                                if (0xDC00..0xE000).contains(&lo) {
                                    0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                                } else {
                                    self.i = save;
                                    hi
                                }
                            } else {
                                hi
                            };
                            // Python keeps lone surrogates; Rust strings cannot
                            // hold them, so they are rejected (documented).
                            let ch = char::from_u32(cp).ok_or_else(|| {
                                self.err("lone surrogate in string (unsupported)")
                            })?;
                            out.push(ch);
                        }
                        _ => return Err(self.err("invalid escape")),
                    }
                }
                Some(_) => return Err(self.err("invalid control character in string")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, ParseError> {
        self.i += 1;
        let mut items = Vec::new();
        self.ws();
        if self.s.get(self.i) == Some(&b']') {
            self.i += 1;
            return Ok(Value::Array(items));
        }
        loop {
            self.ws();
            items.push(self.value(depth + 1)?);
            self.ws();
            match self.s.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(Value::Array(items));
                }
                _ => return Err(self.err("expecting ',' or ']'")),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, ParseError> {
        self.i += 1;
        let mut map = Map::new();
        self.ws();
        if self.s.get(self.i) == Some(&b'}') {
            self.i += 1;
            return Ok(Value::Object(map));
        }
        loop {
            self.ws();
            if self.s.get(self.i) != Some(&b'"') {
                return Err(self.err("expecting a property name in double quotes"));
            }
            let key = self.string()?;
            self.ws();
            if self.s.get(self.i) != Some(&b':') {
                return Err(self.err("expecting ':'"));
            }
            self.i += 1;
            self.ws();
            let v = self.value(depth + 1)?;
            map.insert(key, v);
            self.ws();
            match self.s.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(Value::Object(map));
                }
                _ => return Err(self.err("expecting ',' or '}'")),
            }
        }
    }
}

/// Convert a contract JSON value to a `serde_json` one (non-finite floats
/// become null; big ints become strings).
pub fn to_serde(v: &Value) -> serde_json::Value {
    match v {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => serde_json::json!(b),
        Value::Int(i) => serde_json::json!(i),
        Value::BigInt(s) => serde_json::json!(s),
        Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(serde_json::Value::Number)
            .unwrap_or(serde_json::Value::Null),
        Value::Str(s) => serde_json::json!(s),
        Value::Array(a) => serde_json::Value::Array(a.iter().map(to_serde).collect()),
        Value::Object(m) => {
            serde_json::Value::Object(m.iter().map(|(k, v)| (k.clone(), to_serde(v))).collect())
        }
    }
}

/// Convert serde JSON (ledger metadata) back to a contract value.
pub fn from_serde(v: &serde_json::Value) -> Result<Value, ParseError> {
    parse(&v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_repr_matches_python_table() {
        let table: &[(f64, &str)] = &[
            (0.1, "0.1"),
            (1e-07, "1e-07"),
            (2.5e-07, "2.5e-07"),
            (0.35000000000000003, "0.35000000000000003"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1.0, "1.0"),
            (100.0, "100.0"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.2345678901234568e17, "1.2345678901234568e+17"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (0.006, "0.006"),
            (2e-05, "2e-05"),
            (-0.0, "-0.0"),
            (0.0, "0.0"),
            (-1.5, "-1.5"),
            (123456.789, "123456.789"),
        ];
        for (x, want) in table {
            assert_eq!(float_repr(*x), *want, "repr({x:e})");
        }
    }

    #[test]
    fn parse_keeps_int_and_float_apart() {
        let v = parse(r#"{"a": 1, "b": 1.0, "c": -0, "d": -0.0, "e": 1e400, "f": NaN}"#).unwrap();
        let m = v.as_object().unwrap();
        assert_eq!(m.get("a"), Some(&Value::Int(1)));
        assert_eq!(m.get("b"), Some(&Value::Float(1.0)));
        assert_eq!(m.get("c"), Some(&Value::Int(0)));
        match m.get("d") {
            Some(Value::Float(f)) => assert!(*f == 0.0 && f.is_sign_negative()),
            other => panic!("{other:?}"),
        }
        assert_eq!(m.get("e"), Some(&Value::Float(f64::INFINITY)));
        assert!(matches!(m.get("f"), Some(Value::Float(f)) if f.is_nan()));
    }

    #[test]
    fn duplicate_keys_last_value_first_position() {
        let v = parse(r#"{"b": 1, "a": 2, "b": 3}"#).unwrap();
        let keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["b", "a"]);
        assert_eq!(v.get("b"), Some(&Value::Int(3)));
    }

    #[test]
    fn encoders_sort_and_escape() {
        let v = parse(r#"{"z": "é\u007f\ud83d\ude00", "a": [1, 2.0, {}, []], "m": "\u0001\n/"}"#)
            .unwrap();
        assert_eq!(
            canonical_json(&v).unwrap(),
            "{\"a\":[1,2.0,{},[]],\"m\":\"\\u0001\\n/\",\"z\":\"é\u{7f}😀\"}"
        );
        assert_eq!(
            ascii_json(&v).unwrap(),
            "{\"a\":[1,2.0,{},[]],\"m\":\"\\u0001\\n/\",\"z\":\"\\u00e9\\u007f\\ud83d\\ude00\"}"
        );
        assert_eq!(
            pretty_json(&v),
            "{\n  \"a\": [\n    1,\n    2.0,\n    {},\n    []\n  ],\n  \"m\": \"\\u0001\\n/\",\n  \"z\": \"\\u00e9\\u007f\\ud83d\\ude00\"\n}"
        );
    }

    #[test]
    fn cj_rejects_non_finite() {
        assert!(canonical_json(&Value::Float(f64::NAN)).is_err());
        assert!(ascii_json(&Value::Float(f64::INFINITY)).is_err());
        assert_eq!(pretty_json(&Value::Float(f64::NEG_INFINITY)), "-Infinity");
    }

    #[test]
    fn parse_rejects_garbage() {
        for bad in [
            "",
            "{",
            "[1,]",
            "{\"a\" 1}",
            "01",
            "1 2",
            "\"\\x\"",
            "\"a\u{1}\"",
            "\"\\ud800\"",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} should fail");
        }
        assert_eq!(parse(" 7 ").unwrap(), Value::Int(7));
        assert_eq!(
            parse("123456789012345678901234567890").unwrap(),
            Value::BigInt("123456789012345678901234567890".into())
        );
    }
}
