//! Reading a pack's JSON while collecting every problem found ([`Reader`],
//! [`PackIssue`]). The lowest layer of the pack schema: the schema
//! ([`super::pack_schema`]) and the template parser ([`super::template`])
//! both read through it.

use std::collections::BTreeMap;

use super::json::{Map, Value};

/// One problem found in a pack: where and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackIssue {
    /// A JSON-pointer-like location, e.g. `tasks.vqa.id_column`.
    pub path: String,
    /// What is wrong there.
    pub problem: String,
}

impl std::fmt::Display for PackIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.problem)
    }
}

/// Collects issues while reading a pack.
pub(crate) struct Reader<'a> {
    pub(crate) issues: &'a mut Vec<PackIssue>,
}

impl Reader<'_> {
    pub(crate) fn issue(&mut self, path: &str, problem: impl Into<String>) {
        self.issues.push(PackIssue {
            path: path.to_string(),
            problem: problem.into(),
        });
    }

    pub(crate) fn member<'v>(
        &mut self,
        obj: &'v Value,
        path: &str,
        key: &str,
    ) -> Option<&'v Value> {
        let full = join(path, key);
        match obj.as_object() {
            Some(m) => {
                let v = m.get(key);
                if v.is_none() {
                    self.issue(&full, "missing key");
                }
                v
            }
            None => None,
        }
    }

    pub(crate) fn object<'v>(&mut self, obj: &'v Value, path: &str, key: &str) -> Option<&'v Map> {
        let v = self.member(obj, path, key)?;
        let m = v.as_object();
        if m.is_none() {
            self.issue(&join(path, key), "must be an object");
        }
        m
    }

    pub(crate) fn string(&mut self, obj: &Value, path: &str, key: &str) -> Option<String> {
        let v = self.member(obj, path, key)?;
        match v.as_str() {
            Some(s) => {
                prose_marker(self, &join(path, key), s);
                Some(s.to_string())
            }
            None => {
                self.issue(&join(path, key), "must be a string");
                None
            }
        }
    }

    pub(crate) fn nonempty_string(&mut self, obj: &Value, path: &str, key: &str) -> Option<String> {
        let s = self.string(obj, path, key)?;
        if s.trim().is_empty() {
            self.issue(&join(path, key), "must be a non-empty string");
            return None;
        }
        Some(s)
    }

    pub(crate) fn str_list(&mut self, obj: &Value, path: &str, key: &str) -> Option<Vec<String>> {
        let v = self.member(obj, path, key)?;
        self.str_list_value(v, &join(path, key))
    }

    pub(crate) fn str_list_value(&mut self, v: &Value, path: &str) -> Option<Vec<String>> {
        let Some(items) = v.as_array() else {
            self.issue(path, "must be a list of strings");
            return None;
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            match item.as_str() {
                Some(s) => out.push(s.to_string()),
                None => {
                    self.issue(&format!("{path}[{i}]"), "must be a string");
                    return None;
                }
            }
        }
        Some(out)
    }

    pub(crate) fn uint(&mut self, obj: &Value, path: &str, key: &str) -> Option<u64> {
        let v = self.member(obj, path, key)?;
        match v {
            Value::Int(i) if *i >= 0 => Some(*i as u64),
            _ => {
                self.issue(&join(path, key), "must be a non-negative integer");
                None
            }
        }
    }

    pub(crate) fn number(&mut self, v: &Value, path: &str) -> Option<f64> {
        match v {
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) if f.is_finite() => Some(*f),
            _ => {
                self.issue(path, "must be a finite number");
                None
            }
        }
    }
}

pub(crate) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// `bat-constants.json` marks prose it withholds as `<PROSE: …>`; a pack that
/// still carries such a marker would render it into training prompts.
pub(crate) fn prose_marker(r: &mut Reader<'_>, path: &str, s: &str) {
    if s.contains("<PROSE") {
        r.issue(
            path,
            "still carries a <PROSE: ...> placeholder; write the sentence",
        );
    }
}

pub(crate) fn unique(r: &mut Reader<'_>, path: &str, items: &[String]) {
    let mut seen = std::collections::BTreeSet::new();
    for it in items {
        if !seen.insert(it) {
            r.issue(path, format!("duplicate entry {it:?}"));
        }
    }
    if items.is_empty() {
        r.issue(path, "must not be empty");
    }
}

/// Check that `map`'s keys are exactly `expected` (in any order).
pub(crate) fn keyed_by<'m>(
    r: &mut Reader<'_>,
    path: &str,
    map: &'m Map,
    expected: &[String],
    what: &str,
) -> Vec<(&'m String, &'m Value)> {
    for k in map.keys() {
        if !expected.contains(k) {
            r.issue(&join(path, k), format!("unknown {what} {k:?}"));
        }
    }
    for e in expected {
        if !map.contains_key(e) {
            r.issue(path, format!("missing {what} {e:?}"));
        }
    }
    map.iter().filter(|(k, _)| expected.contains(k)).collect()
}

/// An accurately rounded sum (Neumaier); enough to decide "sums to 1" with a
/// relative tolerance, which is all the pack check needs.
pub(crate) fn accurate_sum(xs: &[f64]) -> f64 {
    let (mut s, mut c) = (0.0f64, 0.0f64);
    for &x in xs {
        let t = s + x;
        c += if s.abs() >= x.abs() {
            (s - t) + x
        } else {
            (x - t) + s
        };
        s = t;
    }
    s + c
}

pub(crate) fn set_equal(
    r: &mut Reader<'_>,
    path: &str,
    got: &[String],
    want: &[String],
    what: &str,
) {
    for g in got {
        if !want.contains(g) {
            r.issue(path, format!("unknown {what} {g:?}"));
        }
    }
    for w in want {
        if !got.contains(w) {
            r.issue(path, format!("missing {what} {w:?}"));
        }
    }
}

pub(crate) fn per_stage_lists(
    r: &mut Reader<'_>,
    root: &Value,
    key: &str,
    stages: &[String],
    need_unique: bool,
) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    if let Some(m) = r.object(root, "", key) {
        for (k, v) in keyed_by(r, key, m, stages, "stage") {
            let path = join(key, k);
            if let Some(list) = r.str_list_value(v, &path) {
                if need_unique {
                    unique(r, &path, &list);
                }
                out.insert(k.clone(), list);
            }
        }
    }
    out
}
