//! The pack's `prompt.user_template`, parsed once into [`TemplateEntry`]s
//! (contract §C.5); rendering them is [`super::prompt`].

use super::json::{Map, Value};
use super::pack_reader::{prose_marker, Reader};

/// A placeholder the renderer knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Var {
    /// `{state_id}`
    StateId,
    /// `{track}` (lowercase)
    Track,
    /// `{task_id}`
    TaskId,
    /// `{task_name}`
    TaskName,
    /// `{objective}`
    Objective,
    /// `{stage}` (uppercase)
    Stage,
    /// `{stage_display_name}`
    StageDisplayName,
    /// `{required_output}`
    RequiredOutput,
    /// `{id_column}`
    IdColumn,
    /// `{output_kind}`
    OutputKind,
    /// `{required_columns_joined_comma_space}`
    RequiredColumnsJoined,
    /// `{provided_joined_comma_space}`
    ProvidedJoined,
    /// `{max_*}`: a number from the pack's `agentic_budget`.
    Budget(String),
    /// `{item}`: only inside an `each` line.
    Item,
}

/// A piece of a template line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    /// Literal text.
    Lit(String),
    /// A placeholder.
    Var(Var),
}

/// Which list an `each` entry walks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EachList {
    /// The task's inventory.
    Inventory,
    /// The stage's required artifacts.
    CurrentRequiredArtifacts,
    /// The handoff artifacts.
    ProvidedHandoffArtifacts,
    /// The submission's columns.
    RequiredColumns,
    /// The expected ids.
    ExpectedIds,
}

/// One entry of the user template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateEntry {
    /// One line.
    Line(Vec<Seg>),
    /// One line per element of a list.
    Each {
        /// The list.
        list: EachList,
        /// The line, with `{item}`.
        line: Vec<Seg>,
    },
    /// The handoff sentence: one line when nothing is handed over, another otherwise.
    Handoff {
        /// Used when the target stage starts with nothing handed over.
        none: Vec<Seg>,
        /// Used otherwise.
        some: Vec<Seg>,
    },
    /// The scope sentence: one line for E2E, another for a single stage.
    Scope {
        /// Used for E2E.
        e2e: Vec<Seg>,
        /// Used for a single stage.
        stage: Vec<Seg>,
    },
}

fn var_named(name: &str, budget: &Value, in_each: bool) -> Option<Var> {
    Some(match name {
        "state_id" => Var::StateId,
        "track" => Var::Track,
        "task_id" => Var::TaskId,
        "task_name" => Var::TaskName,
        "objective" => Var::Objective,
        "stage" => Var::Stage,
        "stage_display_name" => Var::StageDisplayName,
        "required_output" => Var::RequiredOutput,
        "id_column" => Var::IdColumn,
        "output_kind" => Var::OutputKind,
        "required_columns_joined_comma_space" => Var::RequiredColumnsJoined,
        "provided_joined_comma_space" => Var::ProvidedJoined,
        "item" if in_each => Var::Item,
        n if n.starts_with("max_") && matches!(budget.get(n), Some(Value::Int(_))) => {
            Var::Budget(n.to_string())
        }
        _ => return None,
    })
}

/// Parse one template line. `{{` and `}}` are literal braces (Python
/// `str.format` rules), so packs can still write a brace.
pub(crate) fn parse_line(
    text: &str,
    budget: &Value,
    in_each: bool,
    path: &str,
    r: &mut Reader<'_>,
) -> Vec<Seg> {
    prose_marker(r, path, text);
    let mut segs = Vec::new();
    let mut lit = String::new();
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '{' if matches!(chars.peek(), Some((_, '{'))) => {
                chars.next();
                lit.push('{');
            }
            '}' if matches!(chars.peek(), Some((_, '}'))) => {
                chars.next();
                lit.push('}');
            }
            '{' => {
                let rest = &text[i + 1..];
                let Some(end) = rest.find('}') else {
                    r.issue(path, "unclosed '{' in template line");
                    return segs;
                };
                let name = &rest[..end];
                match var_named(name, budget, in_each) {
                    Some(v) => {
                        if !lit.is_empty() {
                            segs.push(Seg::Lit(std::mem::take(&mut lit)));
                        }
                        segs.push(Seg::Var(v));
                    }
                    None => r.issue(
                        path,
                        format!("placeholder {{{name}}} is not known to the renderer"),
                    ),
                }
                for _ in 0..=end {
                    chars.next();
                }
            }
            '}' => r.issue(
                path,
                "unmatched '}' in template line (write '}}' for a brace)",
            ),
            c => lit.push(c),
        }
    }
    if !lit.is_empty() {
        segs.push(Seg::Lit(lit));
    }
    segs
}

fn line_member(
    obj: &Map,
    key: &str,
    budget: &Value,
    in_each: bool,
    path: &str,
    r: &mut Reader<'_>,
) -> Vec<Seg> {
    let p = format!("{path}.{key}");
    match obj.get(key) {
        Some(Value::Str(s)) => parse_line(s, budget, in_each, &p, r),
        Some(_) => {
            r.issue(&p, "must be a string");
            Vec::new()
        }
        None => {
            r.issue(&p, "missing key");
            Vec::new()
        }
    }
}

fn known_keys(obj: &Map, allowed: &[&str], path: &str, r: &mut Reader<'_>) {
    for k in obj.keys() {
        if !allowed.contains(&k.as_str()) {
            r.issue(&format!("{path}.{k}"), "unknown key in template entry");
        }
    }
}

/// Parse `prompt.user_template`, reporting every problem to `r`.
pub(crate) fn parse_template(t: &Value, budget: &Value, r: &mut Reader<'_>) -> Vec<TemplateEntry> {
    let Some(items) = t.as_array() else {
        r.issue("prompt.user_template", "must be a list");
        return Vec::new();
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let path = format!("prompt.user_template[{i}]");
        match item {
            Value::Str(s) => out.push(TemplateEntry::Line(parse_line(s, budget, false, &path, r))),
            Value::Object(m) => {
                if let Some(each) = m.get("each") {
                    known_keys(m, &["each", "line"], &path, r);
                    let list = match each.as_str() {
                        Some("inventory") => EachList::Inventory,
                        Some("current_required_artifacts") => EachList::CurrentRequiredArtifacts,
                        Some("provided_handoff_artifacts") => EachList::ProvidedHandoffArtifacts,
                        Some("required_columns") => EachList::RequiredColumns,
                        Some("expected_ids") => EachList::ExpectedIds,
                        _ => {
                            r.issue(&format!("{path}.each"), format!("unknown list {each:?}"));
                            continue;
                        }
                    };
                    let line = line_member(m, "line", budget, true, &path, r);
                    out.push(TemplateEntry::Each { list, line });
                } else {
                    match m.get("choose").and_then(Value::as_str) {
                        Some("handoff") => {
                            known_keys(
                                m,
                                &["choose", "when_no_provided_artifacts", "otherwise"],
                                &path,
                                r,
                            );
                            let none = line_member(
                                m,
                                "when_no_provided_artifacts",
                                budget,
                                false,
                                &path,
                                r,
                            );
                            let some = line_member(m, "otherwise", budget, false, &path, r);
                            out.push(TemplateEntry::Handoff { none, some });
                        }
                        Some("scope") => {
                            known_keys(m, &["choose", "when_stage_is_E2E", "otherwise"], &path, r);
                            let e2e = line_member(m, "when_stage_is_E2E", budget, false, &path, r);
                            let stage = line_member(m, "otherwise", budget, false, &path, r);
                            out.push(TemplateEntry::Scope { e2e, stage });
                        }
                        _ => r.issue(
                            &path,
                            "an object entry needs \"each\" or \"choose\": \"handoff\"|\"scope\"",
                        ),
                    }
                }
            }
            _ => r.issue(&path, "must be a string or an object"),
        }
    }
    out
}
