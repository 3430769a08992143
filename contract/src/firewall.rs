//! The leakage scanner (contract §F): a fail-closed scan of a JSONL training
//! artifact for evaluation content, machine paths, held-out markers and
//! leakage flags. The rules come from the pack's `leakage` section.

use super::json::{self, Map, Value};
use super::numeric::{py_isspace, py_strip};
use super::pack::Pack;
use super::unicode_tables::CASEFOLD;

/// Why a scan could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FirewallError {
    /// The markers file is not a JSON array of strings of stripped length ≥ 4.
    #[error("the held-out markers file is not a JSON array of strings of at least 4 characters")]
    MarkersInvalid,
    /// The markers file is not JSON (the reference crashes with JSONDecodeError).
    #[error("JSONDecodeError: {reason}")]
    MarkersJson {
        /// The parser's message.
        reason: String,
    },
    /// The scanned file is not UTF-8 (the reference crashes with UnicodeDecodeError).
    #[error("UnicodeDecodeError: 'utf-8' codec can't decode byte at position {offset}")]
    NotUtf8 {
        /// Byte offset of the first invalid sequence.
        offset: usize,
    },
    /// The pack's leakage rules are missing or use an unsupported pattern.
    #[error("pack leakage rules are unusable: {reason}")]
    Pack {
        /// What is wrong.
        reason: String,
    },
}

impl bat_error::Diagnostic for FirewallError {
    fn kind(&self) -> bat_error::ErrorKind {
        bat_error::ErrorKind::User
    }

    fn code(&self) -> Option<String> {
        match self {
            FirewallError::MarkersInvalid => Some("heldout_markers_invalid".to_string()),
            _ => None,
        }
    }
}

/// Python `str.casefold()` (full case folding, Unicode 14 as CPython 3.11).
pub fn casefold(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_ascii() {
            out.push(c.to_ascii_lowercase());
            continue;
        }
        match CASEFOLD.binary_search_by_key(&(c as u32), |(cp, _)| *cp) {
            Ok(i) => out.push_str(CASEFOLD[i].1),
            Err(_) => out.push(c),
        }
    }
    out
}

/// A compiled absolute-path pattern of the shape the reference uses:
/// `(?:^|[CLASS])LIT(?:ALT|ALT|…)LIT`, searched anywhere in a string, where
/// `^` is the start of the string and `\s` in the class is Python's Unicode
/// whitespace (`str.isspace`).
#[derive(Debug, Clone)]
pub struct PathPattern {
    class_space: bool,
    class_chars: Vec<char>,
    prefix: String,
    alternatives: Vec<String>,
    suffix: String,
}

fn unescape_char(it: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Option<char> {
    let c = it.next()?;
    if c != '\\' {
        return Some(c);
    }
    let e = it.next()?;
    // Only escapes of punctuation are literal; letters are classes or
    // unsupported constructs.
    if e.is_ascii_alphanumeric() {
        None
    } else {
        Some(e)
    }
}

fn literal_until(
    it: &mut std::iter::Peekable<std::str::Chars<'_>>,
    stops: &[char],
) -> Option<String> {
    let mut out = String::new();
    while let Some(&c) = it.peek() {
        if stops.contains(&c) {
            break;
        }
        if "()[]{}*+?.^$".contains(c) {
            return None;
        }
        out.push(unescape_char(it)?);
    }
    Some(out)
}

impl PathPattern {
    /// Compile the pattern; `None` if it is not of the supported shape.
    pub fn compile(pattern: &str) -> Option<PathPattern> {
        let rest = pattern.strip_prefix("(?:^|[")?;
        let mut it = rest.chars().peekable();
        let mut class_space = false;
        let mut class_chars = Vec::new();
        loop {
            match it.peek().copied()? {
                ']' => {
                    it.next();
                    break;
                }
                '\\' => {
                    it.next();
                    let e = it.next()?;
                    if e == 's' {
                        class_space = true;
                    } else if e.is_ascii_alphanumeric() {
                        return None;
                    } else {
                        class_chars.push(e);
                    }
                }
                '^' | '-' | '[' => return None,
                c => {
                    it.next();
                    class_chars.push(c);
                }
            }
        }
        if it.next()? != ')' {
            return None;
        }
        let prefix = literal_until(&mut it, &['('])?;
        for expect in ['(', '?', ':'] {
            if it.next()? != expect {
                return None;
            }
        }
        let mut alternatives = Vec::new();
        loop {
            alternatives.push(literal_until(&mut it, &['|', ')'])?);
            match it.next()? {
                '|' => continue,
                _ => break,
            }
        }
        let suffix = literal_until(&mut it, &[])?;
        if it.next().is_some() {
            return None;
        }
        Some(PathPattern {
            class_space,
            class_chars,
            prefix,
            alternatives,
            suffix,
        })
    }

    fn class_matches(&self, c: char) -> bool {
        (self.class_space && py_isspace(c)) || self.class_chars.contains(&c)
    }

    fn matches_at(&self, s: &str) -> bool {
        let Some(rest) = s.strip_prefix(self.prefix.as_str()) else {
            return false;
        };
        self.alternatives.iter().any(|alt| {
            rest.strip_prefix(alt.as_str())
                .is_some_and(|r| r.starts_with(&self.suffix))
        })
    }

    /// Python `re.search(pattern, s) is not None`.
    pub fn search(&self, s: &str) -> bool {
        if self.matches_at(s) {
            return true;
        }
        let mut chars = s.char_indices().peekable();
        while let Some((_, c)) = chars.next() {
            if self.class_matches(c) {
                let next = chars.peek().map_or(s.len(), |(i, _)| *i);
                if self.matches_at(&s[next..]) {
                    return true;
                }
            }
        }
        false
    }
}

/// The scanner's rules, from the pack's `leakage` section.
#[derive(Debug, Clone)]
pub struct LeakageRules {
    /// `absolute_path_regex`, compiled.
    pub path_pattern: PathPattern,
    /// `sensitive_field_substrings`.
    pub sensitive: Vec<String>,
    /// `training_flag_suffixes`.
    pub training_flag_suffixes: Vec<String>,
    /// `evaluation_flag_suffix`.
    pub evaluation_flag_suffix: String,
}

fn str_list(v: Option<&Value>) -> Option<Vec<String>> {
    v?.as_array()?
        .iter()
        .map(|x| x.as_str().map(str::to_string))
        .collect()
}

impl LeakageRules {
    /// Read the rules from a pack.
    pub fn from_pack(pack: &Pack) -> Result<LeakageRules, FirewallError> {
        let pack_err = |reason: &str| FirewallError::Pack {
            reason: reason.to_string(),
        };
        let l = pack
            .get("leakage")
            .and_then(Value::as_object)
            .ok_or_else(|| pack_err("`leakage` is missing"))?;
        let regex = l
            .get("absolute_path_regex")
            .and_then(Value::as_str)
            .ok_or_else(|| pack_err("`leakage.absolute_path_regex` is missing"))?;
        let path_pattern = PathPattern::compile(regex).ok_or_else(|| {
            pack_err(
                "`leakage.absolute_path_regex` is not of the supported shape (?:^|[…])…(?:a|b)…",
            )
        })?;
        Ok(LeakageRules {
            path_pattern,
            sensitive: str_list(l.get("sensitive_field_substrings")).ok_or_else(|| {
                pack_err("`leakage.sensitive_field_substrings` must be a list of strings")
            })?,
            training_flag_suffixes: str_list(l.get("training_flag_suffixes")).ok_or_else(|| {
                pack_err("`leakage.training_flag_suffixes` must be a list of strings")
            })?,
            evaluation_flag_suffix: l
                .get("evaluation_flag_suffix")
                .and_then(Value::as_str)
                .ok_or_else(|| pack_err("`leakage.evaluation_flag_suffix` is missing"))?
                .to_string(),
        })
    }
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// 1-based line number.
    pub line: usize,
    /// The JSON path (`$`, `$.a.b`, `$[0]`).
    pub field: String,
    /// The violation code.
    pub code: &'static str,
}

/// Parse a held-out markers file: a JSON array of strings, each with a
/// stripped length of at least 4. Returns the casefolded markers.
pub fn parse_markers(bytes: &[u8]) -> Result<Vec<String>, FirewallError> {
    let v = json::parse_bytes(bytes).map_err(|e| FirewallError::MarkersJson {
        reason: e.to_string(),
    })?;
    let arr = v.as_array().ok_or(FirewallError::MarkersInvalid)?;
    let mut out = Vec::with_capacity(arr.len());
    for item in arr {
        match item {
            Value::Str(s) if py_strip(s).chars().count() >= 4 => out.push(casefold(s)),
            _ => return Err(FirewallError::MarkersInvalid),
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// Split text into lines like Python's universal-newline reader: `\r\n`,
/// `\r` and `\n` end a line; the last line may lack a terminator.
fn universal_lines(text: &str) -> Vec<&str> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\n' => {
                out.push(&text[start..i]);
                i += 1;
                start = i;
            }
            b'\r' => {
                out.push(&text[start..i]);
                i += if b.get(i + 1) == Some(&b'\n') { 2 } else { 1 };
                start = i;
            }
            _ => i += 1,
        }
    }
    if start < b.len() {
        out.push(&text[start..]);
    }
    out
}

fn ends_with_any(field: &str, suffixes: &[String]) -> bool {
    suffixes.iter().any(|s| field.ends_with(s.as_str()))
}

fn check_node(
    line: usize,
    field: &str,
    value: &Value,
    markers: &[String],
    rules: &LeakageRules,
    out: &mut Vec<Violation>,
) {
    let mut push = |code: &'static str| {
        out.push(Violation {
            line,
            field: field.to_string(),
            code,
        })
    };
    let is_flag = ends_with_any(field, &rules.training_flag_suffixes);
    let declared_safe = is_flag && value.is_false();
    if !declared_safe {
        let lowered = casefold(field);
        if rules.sensitive.iter().any(|p| lowered.contains(p.as_str())) {
            push("forbidden_evaluation_field");
        }
    }
    if let Value::Str(s) = value {
        if rules.path_pattern.search(s) {
            push("machine_specific_path");
        }
        if !markers.is_empty() {
            let lowered = casefold(s);
            if markers.iter().any(|m| lowered.contains(m.as_str())) {
                push("heldout_marker");
            }
        }
    }
    if field.ends_with(rules.evaluation_flag_suffix.as_str()) && !value.is_false() {
        push("evaluation_content_flag");
    }
    if is_flag && !value.is_false() {
        push("training_target_leakage_flag");
    }
}

fn walk(
    line: usize,
    field: &mut String,
    value: &Value,
    markers: &[String],
    rules: &LeakageRules,
    out: &mut Vec<Violation>,
) {
    check_node(line, field, value, markers, rules, out);
    let len = field.len();
    match value {
        Value::Object(m) => walk_object(line, field, m, markers, rules, out),
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                field.push('[');
                field.push_str(&i.to_string());
                field.push(']');
                walk(line, field, child, markers, rules, out);
                field.truncate(len);
            }
        }
        _ => {}
    }
}

fn walk_object(
    line: usize,
    field: &mut String,
    m: &Map,
    markers: &[String],
    rules: &LeakageRules,
    out: &mut Vec<Violation>,
) {
    let len = field.len();
    for (k, child) in m.iter() {
        field.push('.');
        field.push_str(k);
        walk(line, field, child, markers, rules, out);
        field.truncate(len);
    }
}

/// Scan the bytes of a JSONL file (§F). `markers` are already casefolded
/// (see [`parse_markers`]).
pub fn scan_bytes(
    bytes: &[u8],
    markers: &[String],
    rules: &LeakageRules,
) -> Result<Vec<Violation>, FirewallError> {
    let text = std::str::from_utf8(bytes).map_err(|e| FirewallError::NotUtf8 {
        offset: e.valid_up_to(),
    })?;
    let mut out = Vec::new();
    for (i, line) in universal_lines(text).into_iter().enumerate() {
        let n = i + 1;
        match json::parse(line) {
            Ok(row) => {
                let mut field = String::from("$");
                walk(n, &mut field, &row, markers, rules, &mut out);
            }
            Err(_) => out.push(Violation {
                line: n,
                field: "$".into(),
                code: "invalid_json",
            }),
        }
    }
    Ok(out)
}

/// The scanner's report document `{"status", "violations"}`.
pub fn report(violations: &[Violation]) -> Value {
    let rows: Vec<Value> = violations
        .iter()
        .map(|v| {
            Value::Object(
                Map::new()
                    .with("code", v.code)
                    .with("field", v.field.as_str())
                    .with("line", v.line),
            )
        })
        .collect();
    Value::Object(
        Map::new()
            .with(
                "status",
                if violations.is_empty() {
                    "passed"
                } else {
                    "failed"
                },
            )
            .with("violations", Value::Array(rows)),
    )
}

/// The exact stdout of the reference scanner: the report as PJ plus one LF.
pub fn report_text(violations: &[Violation]) -> String {
    json::pretty_json_file(&report(violations))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> LeakageRules {
        LeakageRules::from_pack(&Pack::default_pack()).expect("default pack has leakage rules")
    }

    #[test]
    fn casefold_is_full_folding() {
        assert_eq!(casefold("Straße"), "strasse");
        assert_eq!(casefold("ΣΑΣ"), "σασ");
        assert_eq!(casefold("ς"), "σ");
        assert_eq!(casefold("ﬁ"), "fi");
        assert_eq!(casefold("İ"), "i\u{307}");
        assert_eq!(casefold("ABC"), "abc");
    }

    #[test]
    fn path_pattern_matches_python_re() {
        let p = rules().path_pattern;
        for yes in [
            "/home/u/",
            "x /tmp/y",
            "\"/mnt/",
            "'/root/",
            "a\u{1f}/workspace/",
            "\u{a0}/tmp/",
            "\u{2028}/tmp/",
            "\u{3000}/localhome/",
        ] {
            assert!(p.search(yes), "{yes:?}");
        }
        for no in [
            "x/home/u/",
            "/home",
            "/Home/x/",
            "\u{200b}/tmp/",
            "\u{feff}/tmp/",
            "=/tmp/",
            "`/tmp/",
            "/homes/",
            " /tmpx/",
        ] {
            assert!(!p.search(no), "{no:?}");
        }
    }

    #[test]
    fn unsupported_pattern_shapes_are_rejected() {
        assert!(PathPattern::compile("/(?:home)/").is_none());
        assert!(PathPattern::compile("(?:^|[\\s])/(?:a.*)/").is_none());
        assert!(PathPattern::compile("(?:^|[\\w])/(?:a)/").is_none());
    }

    #[test]
    fn lines_split_like_universal_newlines() {
        assert_eq!(universal_lines("a\r\nb\rc\nd"), vec!["a", "b", "c", "d"]);
        assert_eq!(universal_lines(""), Vec::<&str>::new());
        assert_eq!(
            universal_lines("a\u{2028}b\u{85}c\n"),
            vec!["a\u{2028}b\u{85}c"]
        );
        assert_eq!(universal_lines("\n\n"), vec!["", ""]);
    }

    #[test]
    fn markers_must_be_long_strings() {
        assert_eq!(
            parse_markers(b"[\"  abc  \"]"),
            Err(FirewallError::MarkersInvalid)
        );
        assert_eq!(parse_markers(b"[1]"), Err(FirewallError::MarkersInvalid));
        assert_eq!(parse_markers(b"{}"), Err(FirewallError::MarkersInvalid));
        assert_eq!(
            parse_markers("[\"STRAẞE\"]".as_bytes()),
            Ok(vec!["strasse".to_string()])
        );
    }
}
