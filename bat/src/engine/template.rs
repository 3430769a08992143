//! Argv templates: JSON arrays of non-empty strings, whole-element
//! placeholder substitution, and checking a template's placeholders before
//! anything runs (so a typo is refused, not passed to the trainer).
//!
//! A template file is either the plain array (`["python3", "train.py",
//! ...]`) or an object `{"argv": [...], "env": ["BAT_PYTHON", ...]}` whose
//! `env` declares the environment variables the command relies on. A
//! declared variable must be set when `bat run` or `bat replay` starts (it
//! is refused before any child runs otherwise) and its value is recorded
//! with every round (a BLAKE3 digest instead for names containing `TOKEN`,
//! `KEY`, `SECRET` or `PASSWORD`). Children still inherit bat's whole
//! environment: the declaration is what a replay checks, not a filter.
//!
//! Code files: argv\[0\] is resolved as the child's exec would (a name
//! without `/` is looked up on `PATH` by bat; one with `/` is taken relative
//! to the working directory), and every later element that is not a
//! placeholder and names an existing regular file, relative to the working
//! directory the children run in (bat's own), is a code file. Their BLAKE3
//! digests are recorded with each round
//! ([`crate::round::provenance::CodeFile`]).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use bat_contract::json::{self, Value};

use super::child::ChildError;
use crate::round::provenance::{CodeFile, DeclaredVar};

/// A template file that `bat run` refuses before anything runs.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// The template file is not valid JSON.
    #[error("command template {file}:{line}:{column} is not valid JSON: {reason}")]
    TemplateJson {
        /// The template file.
        file: String,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// The parser's message.
        reason: String,
    },
    /// The template file is JSON but not an array of non-empty strings.
    #[error("command template {file} is not valid: {reason}")]
    TemplateShape {
        /// The template file.
        file: String,
        /// What is wrong (with the argv position).
        reason: String,
    },
    /// An element looks like a placeholder but is not one of the template's.
    #[error(
        "{kind} template {file}: argv[{position}] is {element}, which is not a {kind} placeholder{}; known: {}",
        suggestion.as_ref().map(|s| format!(" (did you mean {s}?)")).unwrap_or_default(),
        known.join(" ")
    )]
    UnknownPlaceholder {
        /// `trainer` or `evaluator`.
        kind: &'static str,
        /// The template file.
        file: String,
        /// 0-based argv position.
        position: usize,
        /// The element.
        element: String,
        /// The closest known placeholder.
        suggestion: Option<String>,
        /// Every placeholder the template may use.
        known: Vec<String>,
    },
    /// A placeholder inside a longer element (substitution is whole-element
    /// only, so it would reach the child literally).
    #[error(
        "{kind} template {file}: argv[{position}] {element:?} contains {placeholder}, but placeholders are replaced only as whole elements; give it its own element (e.g. [\"--flag\", \"{placeholder}\"])"
    )]
    EmbeddedPlaceholder {
        /// `trainer` or `evaluator`.
        kind: &'static str,
        /// The template file.
        file: String,
        /// 0-based argv position.
        position: usize,
        /// The element.
        element: String,
        /// The placeholder found in it.
        placeholder: String,
    },
    /// A required placeholder is not used.
    #[error("{kind} template {file} lacks the required placeholder {placeholder} (required: {})", required.join(" "))]
    MissingPlaceholder {
        /// `trainer` or `evaluator`.
        kind: &'static str,
        /// The template file.
        file: String,
        /// The missing placeholder.
        placeholder: String,
        /// Every required placeholder.
        required: Vec<String>,
    },
    /// `--require-ablations`: a template lacks a placeholder the headline
    /// ablations need.
    #[error("{kind} template {file} lacks {placeholder}, so {consequence}")]
    AblationPlaceholder {
        /// `trainer` or `evaluator`.
        kind: &'static str,
        /// The template file.
        file: String,
        /// `{reward_mode}` or `{seed}`.
        placeholder: &'static str,
        /// What the campaign then cannot do.
        consequence: &'static str,
    },
    /// Environment variables a template declares are not set.
    #[error("{context} declares the environment variable{} {} in its {kind} template, but {} not set", if names.len() == 1 { "" } else { "s" }, names.join(", "), if names.len() == 1 { "it is" } else { "they are" })]
    DeclaredEnvUnset {
        /// `trainer` or `evaluator`.
        kind: String,
        /// The template file, or the recorded round (`round r02`).
        context: String,
        /// The unset variables.
        names: Vec<String>,
    },
}

impl bat_ledger::Diagnostic for TemplateError {
    fn kind(&self) -> bat_ledger::ErrorKind {
        bat_ledger::ErrorKind::Usage
    }

    fn hint(&self) -> Option<String> {
        match self {
            TemplateError::UnknownPlaceholder { .. } => {
                Some("fix the template; placeholders are listed in `bat run --help`".to_string())
            }
            TemplateError::EmbeddedPlaceholder { .. } => {
                Some("fix the template; placeholders are listed in `bat run --help`".to_string())
            }
            TemplateError::MissingPlaceholder { .. } => {
                Some("fix the template; placeholders are listed in `bat run --help`".to_string())
            }
            TemplateError::AblationPlaceholder { placeholder, .. } => Some(format!(
                "add \"{placeholder}\" as an argv element (the command must accept it), or run without --require-ablations"
            )),
            TemplateError::DeclaredEnvUnset { .. } => Some(
                "set the variables (the round's provenance.json records their values under \"environment\") and run again; nothing was started"
                    .to_string(),
            ),
            _ => None,
        }
    }

    fn code(&self) -> Option<String> {
        match self {
            TemplateError::TemplateJson { .. } | TemplateError::TemplateShape { .. } => {
                Some("command_template_invalid".to_string())
            }
            TemplateError::AblationPlaceholder { .. } => Some("ablation_impossible".to_string()),
            TemplateError::DeclaredEnvUnset { .. } => Some("declared_env_unset".to_string()),
            _ => None,
        }
    }
}

/// Parse a command template file's bytes: a non-empty JSON array of
/// non-empty strings, otherwise `command_template_invalid`.
pub fn parse_template(bytes: &[u8]) -> Result<Vec<String>, ChildError> {
    let v = json::parse_bytes(bytes).map_err(|_| ChildError::TemplateInvalid)?;
    let items = v.as_array().ok_or(ChildError::TemplateInvalid)?;
    if items.is_empty() {
        return Err(ChildError::TemplateInvalid);
    }
    items
        .iter()
        .map(|item| match item {
            Value::Str(s) if !s.is_empty() => Ok(s.clone()),
            _ => Err(ChildError::TemplateInvalid),
        })
        .collect()
}

/// A template file's contents: the argv and the environment variables it
/// declares (empty for the plain-array form).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TemplateSpec {
    /// The argv template.
    pub argv: Vec<String>,
    /// Declared environment variable names, in the order given.
    pub env: Vec<String>,
}

/// Whether `name` is a portable environment variable name
/// (`[A-Za-z_][A-Za-z0-9_]*`).
fn env_name_ok(name: &str) -> bool {
    let mut b = name.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// [`parse_template`] with the file named in every error, JSON syntax
/// errors located by line and column and shape errors by argv position.
/// Accepts both forms (see the module docs) and returns the argv.
pub fn parse_template_file(file: &str, bytes: &[u8]) -> Result<Vec<String>, TemplateError> {
    parse_template_spec_file(file, bytes).map(|s| s.argv)
}

/// Parse a template file of either form (see the module docs).
pub fn parse_template_spec_file(file: &str, bytes: &[u8]) -> Result<TemplateSpec, TemplateError> {
    let v: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| TemplateError::TemplateJson {
            file: file.to_string(),
            line: e.line(),
            column: e.column(),
            reason: e.to_string(),
        })?;
    let shape = |reason: String| TemplateError::TemplateShape {
        file: file.to_string(),
        reason,
    };
    let (argv, env) = match &v {
        serde_json::Value::Object(o) => {
            if let Some(k) = o.keys().find(|k| !matches!(k.as_str(), "argv" | "env")) {
                return Err(shape(format!(
                    "unknown member {k:?} (an object template has \"argv\" and optionally \"env\")"
                )));
            }
            let argv = o
                .get("argv")
                .ok_or_else(|| shape("the object has no \"argv\" array".into()))?;
            (argv, o.get("env"))
        }
        other => (other, None),
    };
    let items = argv
        .as_array()
        .ok_or_else(|| shape("not a JSON array of strings".into()))?;
    if items.is_empty() {
        return Err(shape("the array is empty (argv[0] is the program)".into()));
    }
    let argv = items
        .iter()
        .enumerate()
        .map(|(i, item)| match item {
            serde_json::Value::String(s) if !s.is_empty() => Ok(s.clone()),
            serde_json::Value::String(_) => Err(shape(format!("argv[{i}] is an empty string"))),
            other => Err(shape(format!("argv[{i}] is {other}, not a string"))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut names = Vec::new();
    if let Some(env) = env {
        let list = env
            .as_array()
            .ok_or_else(|| shape("\"env\" is not an array of variable names".into()))?;
        for (i, n) in list.iter().enumerate() {
            match n.as_str() {
                Some(n) if env_name_ok(n) => {
                    if !names.iter().any(|m| m == n) {
                        names.push(n.to_string());
                    }
                }
                _ => {
                    return Err(shape(format!(
                        "env[{i}] is {n}, not a variable name ([A-Za-z_][A-Za-z0-9_]*)"
                    )))
                }
            }
        }
    }
    Ok(TemplateSpec { argv, env: names })
}

/// Which template a placeholder check is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TemplateKind {
    /// `--trainer`.
    Trainer,
    /// `--evaluator`.
    Evaluator,
}

/// The trainer's placeholders (`{reward_mode}` is `stage` or `terminal`;
/// `{seed}` the campaign seed, `bat run --seed`; `{metrics}` the optional
/// step metrics file, [`crate::round::steps`]).
pub const TRAINER_PLACEHOLDERS: [&str; 11] = [
    "{checkpoint}",
    "{dataset}",
    "{manifest}",
    "{output}",
    "{health}",
    "{round_id}",
    "{target_stage}",
    "{runtime_tool_format}",
    "{reward_mode}",
    "{seed}",
    "{metrics}",
];
/// The evaluator's placeholders.
pub const EVALUATOR_PLACEHOLDERS: [&str; 5] = [
    "{checkpoint}",
    "{output}",
    "{request}",
    "{reward_mode}",
    "{seed}",
];
/// Placeholders the trainer template must use.
pub const TRAINER_REQUIRED: [&str; 5] = [
    "{checkpoint}",
    "{dataset}",
    "{output}",
    "{health}",
    "{runtime_tool_format}",
];
/// Placeholders the evaluator template must use.
pub const EVALUATOR_REQUIRED: [&str; 3] = ["{checkpoint}", "{output}", "{request}"];

impl TemplateKind {
    /// `trainer` or `evaluator`.
    pub fn as_str(self) -> &'static str {
        match self {
            TemplateKind::Trainer => "trainer",
            TemplateKind::Evaluator => "evaluator",
        }
    }

    /// The placeholders the loop substitutes.
    pub fn placeholders(self) -> &'static [&'static str] {
        match self {
            TemplateKind::Trainer => &TRAINER_PLACEHOLDERS,
            TemplateKind::Evaluator => &EVALUATOR_PLACEHOLDERS,
        }
    }

    /// The placeholders the template must use.
    pub fn required(self) -> &'static [&'static str] {
        match self {
            TemplateKind::Trainer => &TRAINER_REQUIRED,
            TemplateKind::Evaluator => &EVALUATOR_REQUIRED,
        }
    }
}

/// Whether `s` has a placeholder's shape: `{` lower-case letters, digits or
/// `_` `}`.
fn placeholder_shaped(s: &str) -> bool {
    s.len() > 2
        && s.starts_with('{')
        && s.ends_with('}')
        && s[1..s.len() - 1]
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// The known placeholder closest to `unknown` (shares the longest common
/// prefix or contains it), if any is plausibly meant.
fn closest<'a>(unknown: &str, known: &[&'a str]) -> Option<&'a str> {
    let inner = |s: &str| s.trim_matches(['{', '}']).to_string();
    let u = inner(unknown);
    known
        .iter()
        .map(|k| {
            let k_in = inner(k);
            let prefix = u
                .bytes()
                .zip(k_in.bytes())
                .take_while(|(a, b)| a == b)
                .count();
            let contains = k_in.contains(&u) || u.contains(&k_in);
            (
                if contains {
                    prefix.max(3) + 100
                } else {
                    prefix
                },
                *k,
            )
        })
        .filter(|(score, _)| *score >= 3)
        .max_by_key(|(score, _)| *score)
        .map(|(_, k)| k)
}

/// Check a template's placeholders before anything runs: every element of
/// placeholder shape must be one of `kind`'s or of `extra` (a campaign's own,
/// such as the simulator's `{bat}`), no known placeholder may hide inside a
/// longer element, and the required ones must all be there. `file` names the
/// template in the errors.
pub fn check_placeholders(
    kind: TemplateKind,
    file: &str,
    template: &[String],
    extra: &[&str],
) -> Result<(), TemplateError> {
    let known: Vec<&str> = kind
        .placeholders()
        .iter()
        .copied()
        .chain(extra.iter().copied())
        .collect();
    check_known(kind.as_str(), file, template, &known, kind.required())
}

/// [`check_placeholders`] for any template: `label` names the kind in the
/// errors, `known` are its placeholders and `required` those it must use.
pub fn check_known(
    label: &'static str,
    file: &str,
    template: &[String],
    known: &[&str],
    required: &[&str],
) -> Result<(), TemplateError> {
    for (position, element) in template.iter().enumerate() {
        if known.contains(&element.as_str()) {
            continue;
        }
        if placeholder_shaped(element) {
            return Err(TemplateError::UnknownPlaceholder {
                kind: label,
                file: file.to_string(),
                position,
                element: element.clone(),
                suggestion: closest(element, known).map(str::to_string),
                known: known.iter().map(|k| k.to_string()).collect(),
            });
        }
        if let Some(p) = known.iter().find(|k| element.contains(*k)) {
            return Err(TemplateError::EmbeddedPlaceholder {
                kind: label,
                file: file.to_string(),
                position,
                element: element.clone(),
                placeholder: p.to_string(),
            });
        }
    }
    if let Some(missing) = required.iter().find(|r| !template.iter().any(|t| t == *r)) {
        return Err(TemplateError::MissingPlaceholder {
            kind: label,
            file: file.to_string(),
            placeholder: missing.to_string(),
            required: required.iter().map(|r| r.to_string()).collect(),
        });
    }
    Ok(())
}

/// Replace every element that equals a placeholder (e.g. `{checkpoint}`) by
/// its value. There is no substring substitution.
pub fn expand(template: &[String], values: &[(&str, String)]) -> Vec<String> {
    template
        .iter()
        .map(|item| {
            values
                .iter()
                .find(|(k, _)| *k == item.as_str())
                .map_or_else(|| item.clone(), |(_, v)| v.clone())
        })
        .collect()
}

/// Whether every value occurs as a whole element of `argv`.
pub fn all_present(argv: &[String], required: &[&str]) -> bool {
    required.iter().all(|r| argv.iter().any(|a| a == r))
}

/// A placeholder the headline ablations need that a template lacks: the
/// trainer's `{reward_mode}` (`bat replay --ablate reward=terminal`) and
/// either template's `{seed}` (several seeds of one arm).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AblationGap {
    /// The template lacking it.
    pub kind: TemplateKind,
    /// `{reward_mode}` or `{seed}`.
    pub placeholder: &'static str,
}

impl AblationGap {
    /// What the campaign cannot do without it.
    pub fn consequence(&self) -> &'static str {
        match self.placeholder {
            "{reward_mode}" => "the campaign cannot be replayed with `--ablate reward=terminal` (the headline ablation)",
            _ => "its runs cannot be repeated under other seeds",
        }
    }

    /// The refusal of `--require-ablations` (`file`: the template file).
    pub fn into_error(self, file: &str) -> TemplateError {
        TemplateError::AblationPlaceholder {
            kind: self.kind.as_str(),
            file: file.to_string(),
            placeholder: self.placeholder,
            consequence: self.consequence(),
        }
    }
}

/// The ablation placeholders `trainer` and `evaluator` lack, trainer first.
pub fn ablation_gaps(trainer: &[String], evaluator: &[String]) -> Vec<AblationGap> {
    let has = |t: &[String], p: &str| t.iter().any(|e| e == p);
    let mut gaps = Vec::new();
    for (kind, t, needed) in [
        (
            TemplateKind::Trainer,
            trainer,
            &["{reward_mode}", "{seed}"][..],
        ),
        (TemplateKind::Evaluator, evaluator, &["{seed}"][..]),
    ] {
        for &p in needed {
            if !has(t, p) {
                gaps.push(AblationGap {
                    kind,
                    placeholder: p,
                });
            }
        }
    }
    gaps
}

/// Where a child's exec finds `program`: a name with a `/` relative to
/// `cwd`; otherwise the first executable regular file of that name in the
/// directories of `path_var` (the `PATH` bat runs children with).
pub fn resolve_program(program: &str, cwd: &Path, path_var: Option<&OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if program.contains('/') {
        let p = cwd.join(program);
        return p.is_file().then_some(p);
    }
    let dirs = path_var?;
    std::env::split_paths(dirs)
        .map(|d| cwd.join(d).join(program))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The code files of a template (see the module docs): argv\[0\] as
/// resolved, then every other non-placeholder element naming an existing
/// regular file relative to `cwd`. Paths are absolute (`cwd` is).
pub fn code_files(
    kind: TemplateKind,
    argv: &[String],
    cwd: &Path,
    path_var: Option<&OsStr>,
) -> Vec<CodeFile> {
    let mut out = Vec::new();
    for (i, element) in argv.iter().enumerate() {
        let found = if i == 0 {
            resolve_program(element, cwd, path_var)
        } else if placeholder_shaped(element) {
            None
        } else {
            let p = cwd.join(element);
            p.is_file().then_some(p)
        };
        if let Some(path) = found {
            out.push(CodeFile {
                role: kind.as_str().to_string(),
                argv_index: i,
                named: element.clone(),
                path,
            });
        }
    }
    out
}

/// The declared variables of a template with their values (`lookup`: the
/// environment children get), or the unset ones as an error naming
/// `context` (the template file, or `round r02`).
pub fn declared_vars(
    kind: TemplateKind,
    context: &str,
    names: &[String],
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<DeclaredVar>, TemplateError> {
    let mut missing = Vec::new();
    let mut out = Vec::new();
    for n in names {
        match lookup(n) {
            Some(value) => out.push(DeclaredVar {
                role: kind.as_str().to_string(),
                name: n.clone(),
                value,
            }),
            None => missing.push(n.clone()),
        }
    }
    if missing.is_empty() {
        Ok(out)
    } else {
        Err(TemplateError::DeclaredEnvUnset {
            kind: kind.as_str().to_string(),
            context: context.to_string(),
            names: missing,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_must_be_arrays_of_non_empty_strings() {
        assert_eq!(
            parse_template(br#"["a", "{x}"]"#).unwrap(),
            vec!["a".to_string(), "{x}".to_string()]
        );
        for bad in [&b"[]"[..], b"[\"\"]", b"[1]", b"{}", b"nope", b"\"a\""] {
            assert!(matches!(
                parse_template(bad),
                Err(ChildError::TemplateInvalid)
            ));
        }
    }

    #[test]
    fn expansion_is_whole_element_only() {
        let t: Vec<String> = ["x", "{a}", "pre{a}", "{b}"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let out = expand(&t, &[("{a}", "A".into()), ("{b}", "B".into())]);
        assert_eq!(out, vec!["x", "A", "pre{a}", "B"]);
        assert!(all_present(&out, &["A", "B"]));
        assert!(!all_present(&out, &["C"]));
    }

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn placeholders_are_checked_with_positions() {
        let ok = v(&[
            "t",
            "{checkpoint}",
            "{dataset}",
            "{output}",
            "{health}",
            "{runtime_tool_format}",
            "{reward_mode}",
            "{x}",
            "{\"json\": 1}",
        ]);
        check_placeholders(TemplateKind::Trainer, "t.json", &ok, &["{x}"]).unwrap();
        let mut bad = ok.clone();
        bad[6] = "{round}".into();
        let e = check_placeholders(TemplateKind::Trainer, "t.json", &bad, &[]).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("t.json: argv[6] is {round}"), "{msg}");
        assert!(msg.contains("did you mean {round_id}?"), "{msg}");
        // Nothing close: no suggestion.
        bad[6] = "{zzz}".into();
        let msg = check_placeholders(TemplateKind::Trainer, "t.json", &bad, &["{x}"])
            .unwrap_err()
            .to_string();
        assert!(!msg.contains("did you mean"), "{msg}");
        let mut emb = ok.clone();
        emb[3] = "--out={output}".into();
        assert!(matches!(
            check_placeholders(TemplateKind::Trainer, "t.json", &emb, &["{x}"]),
            Err(TemplateError::EmbeddedPlaceholder { position: 3, .. })
        ));
        let ev = v(&["e", "{checkpoint}", "{output}"]);
        assert!(matches!(
            check_placeholders(TemplateKind::Evaluator, "e.json", &ev, &[]),
            Err(TemplateError::MissingPlaceholder { ref placeholder, .. }) if placeholder == "{request}"
        ));
    }

    #[test]
    fn template_files_report_line_and_column() {
        let e = parse_template_file("t.json", b"[\"a\",\n  }").unwrap_err();
        assert!(
            matches!(
                e,
                TemplateError::TemplateJson {
                    line: 2,
                    column: 3,
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            e.to_string()
                .starts_with("command template t.json:2:3 is not valid JSON"),
            "{e}"
        );
        assert_eq!(
            bat_ledger::Diagnostic::code(&e).as_deref(),
            Some("command_template_invalid")
        );
        let e = parse_template_file("t.json", br#"["a", ""]"#).unwrap_err();
        assert!(e.to_string().contains("argv[1] is an empty string"), "{e}");
    }

    #[test]
    fn object_templates_declare_environment_variables() {
        let spec = parse_template_spec_file(
            "t.json",
            br#"{"argv": ["python3", "{checkpoint}"], "env": ["BAT_PYTHON", "HF_TOKEN", "BAT_PYTHON"]}"#,
        )
        .unwrap();
        assert_eq!(spec.argv, v(&["python3", "{checkpoint}"]));
        assert_eq!(spec.env, v(&["BAT_PYTHON", "HF_TOKEN"]));
        // The plain array declares nothing; both forms give the same argv.
        let plain = parse_template_spec_file("t.json", br#"["python3", "{checkpoint}"]"#).unwrap();
        assert!(plain.env.is_empty());
        assert_eq!(
            parse_template_file("t.json", br#"{"argv": ["a"]}"#).unwrap(),
            v(&["a"])
        );
        for (bad, says) in [
            (&br#"{"argv": ["a"], "env": ["1X"]}"#[..], "env[0]"),
            (br#"{"argv": ["a"], "env": "X"}"#, "not an array"),
            (br#"{"env": ["X"]}"#, "no \"argv\""),
            (br#"{"argv": ["a"], "cwd": "/"}"#, "unknown member \"cwd\""),
            (br#"{"argv": []}"#, "empty"),
        ] {
            let e = parse_template_spec_file("t.json", bad).unwrap_err();
            assert!(e.to_string().contains(says), "{e}");
            assert_eq!(
                bat_ledger::Diagnostic::code(&e).as_deref(),
                Some("command_template_invalid")
            );
        }
        let lookup = |n: &str| (n == "SET").then(|| "1".to_string());
        let got = declared_vars(TemplateKind::Trainer, "t.json", &v(&["SET"]), &lookup).unwrap();
        assert_eq!(got[0].value, "1");
        let e = declared_vars(
            TemplateKind::Trainer,
            "t.json",
            &v(&["SET", "A", "B"]),
            &lookup,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.json declares the environment variables A, B in its trainer template, but they are not set"
        );
    }

    #[test]
    fn ablation_gaps_name_the_template_and_placeholder() {
        let full_t = v(&["t", "{reward_mode}", "{seed}"]);
        let full_e = v(&["e", "{seed}"]);
        assert!(ablation_gaps(&full_t, &full_e).is_empty());
        let gaps = ablation_gaps(&v(&["t", "{seed}"]), &v(&["e"]));
        assert_eq!(
            gaps,
            vec![
                AblationGap {
                    kind: TemplateKind::Trainer,
                    placeholder: "{reward_mode}"
                },
                AblationGap {
                    kind: TemplateKind::Evaluator,
                    placeholder: "{seed}"
                }
            ]
        );
        let msg = gaps[0].into_error("t.json").to_string();
        assert!(
            msg.contains("trainer template t.json lacks {reward_mode}"),
            "{msg}"
        );
        // {seed} is a placeholder of both templates.
        check_placeholders(
            TemplateKind::Evaluator,
            "e.json",
            &v(&["e", "{checkpoint}", "{output}", "{request}", "{seed}"]),
            &[],
        )
        .unwrap();
    }

    #[test]
    fn code_files_are_existing_files_and_the_program_found_on_path() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let prog = bin.join("mytrainer");
        std::fs::write(&prog, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(dir.path().join("train.py"), "print(1)\n").unwrap();
        std::fs::create_dir(dir.path().join("cfg")).unwrap();
        let argv = v(&[
            "mytrainer",
            "train.py",
            "{checkpoint}",
            "cfg",
            "--lr",
            "missing.py",
        ]);
        let files = code_files(
            TemplateKind::Trainer,
            &argv,
            dir.path(),
            Some(bin.as_os_str()),
        );
        let got: Vec<(usize, PathBuf)> = files
            .iter()
            .map(|f| (f.argv_index, f.path.clone()))
            .collect();
        assert_eq!(
            got,
            vec![(0, prog.clone()), (1, dir.path().join("train.py"))]
        );
        // Not on PATH, not executable, or PATH unset: no program file.
        assert!(resolve_program("mytrainer", dir.path(), None).is_none());
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(resolve_program("mytrainer", dir.path(), Some(bin.as_os_str())).is_none());
        assert_eq!(
            resolve_program("bin/mytrainer", dir.path(), None),
            Some(dir.path().join("bin/mytrainer"))
        );
    }
}
