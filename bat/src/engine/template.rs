//! Argv templates: JSON arrays of non-empty strings, whole-element
//! placeholder substitution, and checking a template's placeholders before
//! anything runs (so a typo is refused, not passed to the trainer).

use bat_contract::json::{self, Value};

use super::child::ChildError;

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
            _ => None,
        }
    }

    fn code(&self) -> Option<String> {
        match self {
            TemplateError::TemplateJson { .. } | TemplateError::TemplateShape { .. } => {
                Some("command_template_invalid".to_string())
            }
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

/// [`parse_template`] with the file named in every error, JSON syntax
/// errors located by line and column and shape errors by argv position.
pub fn parse_template_file(file: &str, bytes: &[u8]) -> Result<Vec<String>, TemplateError> {
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
    let items = v
        .as_array()
        .ok_or_else(|| shape("not a JSON array of strings".into()))?;
    if items.is_empty() {
        return Err(shape("the array is empty (argv[0] is the program)".into()));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| match item {
            serde_json::Value::String(s) if !s.is_empty() => Ok(s.clone()),
            serde_json::Value::String(_) => Err(shape(format!("argv[{i}] is an empty string"))),
            other => Err(shape(format!("argv[{i}] is {other}, not a string"))),
        })
        .collect()
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
/// `{seed}` the campaign seed, `bat run --seed`).
pub const TRAINER_PLACEHOLDERS: [&str; 10] = [
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
    for (position, element) in template.iter().enumerate() {
        if known.contains(&element.as_str()) {
            continue;
        }
        if placeholder_shaped(element) {
            return Err(TemplateError::UnknownPlaceholder {
                kind: kind.as_str(),
                file: file.to_string(),
                position,
                element: element.clone(),
                suggestion: closest(element, &known).map(str::to_string),
                known: known.iter().map(|k| k.to_string()).collect(),
            });
        }
        if let Some(p) = known.iter().find(|k| element.contains(*k)) {
            return Err(TemplateError::EmbeddedPlaceholder {
                kind: kind.as_str(),
                file: file.to_string(),
                position,
                element: element.clone(),
                placeholder: p.to_string(),
            });
        }
    }
    if let Some(missing) = kind
        .required()
        .iter()
        .find(|r| !template.iter().any(|t| t == *r))
    {
        return Err(TemplateError::MissingPlaceholder {
            kind: kind.as_str(),
            file: file.to_string(),
            placeholder: missing.to_string(),
            required: kind.required().iter().map(|r| r.to_string()).collect(),
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
}
