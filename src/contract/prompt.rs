//! Prompt rendering (contract §C.5).
//!
//! The pack's `prompt.user_template` is parsed once into [`TemplateEntry`]s.
//! For a given (track, stage) every placeholder except `{state_id}` is fixed,
//! so [`Prompter`] pre-renders each of those combinations into literal pieces
//! and a round build only splices the state id in.

use std::collections::HashMap;

use super::json::{Map, Value};
use super::task::{self, ContractPack, Reader, TaskError, TaskKey, E2E, REQUIRED_OUTPUT};

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
    task::prose_marker(r, path, text);
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

/// A rendered user message for one (track, stage): literal text with the
/// places where the state id goes.
#[derive(Debug, Clone)]
pub struct UserPlan {
    pieces: Vec<Piece>,
    lit_len: usize,
}

#[derive(Debug, Clone)]
enum Piece {
    Lit(String),
    StateId,
}

impl UserPlan {
    /// The user message for `state_id`.
    pub fn render(&self, state_id: &str) -> String {
        let mut s = String::with_capacity(self.lit_len + 4 * state_id.len());
        for p in &self.pieces {
            match p {
                Piece::Lit(t) => s.push_str(t),
                Piece::StateId => s.push_str(state_id),
            }
        }
        s
    }
}

struct Ctx<'a> {
    k: &'a ContractPack,
    def: &'a task::TaskDef,
    track: &'a str,
    stage: &'a str,
    provided: Vec<String>,
    required: Vec<String>,
}

impl Ctx<'_> {
    fn push_var(&self, out: &mut Vec<Piece>, v: &Var, item: Option<&str>) {
        let text: String = match v {
            Var::StateId => {
                out.push(Piece::StateId);
                return;
            }
            Var::Track => self.track.to_string(),
            Var::TaskId => format!("{}{}", task::TASK_ID_PREFIX, self.track),
            Var::TaskName => self.def.task_name.clone(),
            Var::Objective => self.def.objective.clone(),
            Var::Stage => self.stage.to_string(),
            Var::StageDisplayName => self
                .k
                .stage_display_names
                .get(self.stage)
                .cloned()
                .unwrap_or_default(),
            Var::RequiredOutput => REQUIRED_OUTPUT.to_string(),
            Var::IdColumn => self.def.id_column.clone(),
            Var::OutputKind => self.def.output_kind.clone(),
            Var::RequiredColumnsJoined => self.def.required_columns.join(", "),
            Var::ProvidedJoined => self.provided.join(", "),
            Var::Budget(name) => match self.k.agentic_budget.get(name) {
                Some(Value::Int(i)) => i.to_string(),
                _ => String::new(),
            },
            Var::Item => item.unwrap_or_default().to_string(),
        };
        push_lit(out, &text);
    }

    fn line(&self, out: &mut Vec<Piece>, segs: &[Seg], item: Option<&str>) {
        for s in segs {
            match s {
                Seg::Lit(t) => push_lit(out, t),
                Seg::Var(v) => self.push_var(out, v, item),
            }
        }
    }
}

fn push_lit(out: &mut Vec<Piece>, text: &str) {
    if let Some(Piece::Lit(last)) = out.last_mut() {
        last.push_str(text);
    } else {
        out.push(Piece::Lit(text.to_string()));
    }
}

/// Pre-render the user message of (track, stage); both must be normalized
/// and known to the pack.
pub fn user_plan(k: &ContractPack, track: &str, stage: &str) -> Option<UserPlan> {
    let def = k.tasks.get(track)?;
    let ctx = Ctx {
        k,
        def,
        track,
        stage,
        provided: k.provided_handoff_artifacts(stage),
        required: k.current_required_artifacts(stage),
    };
    let mut pieces = Vec::new();
    let mut first = true;
    let mut newline = |out: &mut Vec<Piece>| {
        if !first {
            push_lit(out, "\n");
        }
        first = false;
    };
    for entry in &k.user_template {
        match entry {
            TemplateEntry::Line(segs) => {
                newline(&mut pieces);
                ctx.line(&mut pieces, segs, None);
            }
            TemplateEntry::Each { list, line } => {
                let items: Vec<String> = match list {
                    EachList::Inventory => def.inventory.clone(),
                    EachList::CurrentRequiredArtifacts => ctx.required.clone(),
                    EachList::ProvidedHandoffArtifacts => ctx.provided.clone(),
                    EachList::RequiredColumns => def.required_columns.clone(),
                    EachList::ExpectedIds => k.expected_ids(track),
                };
                for it in &items {
                    newline(&mut pieces);
                    ctx.line(&mut pieces, line, Some(it));
                }
            }
            TemplateEntry::Handoff { none, some } => {
                newline(&mut pieces);
                let segs = if ctx.provided.is_empty() { none } else { some };
                ctx.line(&mut pieces, segs, None);
            }
            TemplateEntry::Scope { e2e, stage: other } => {
                newline(&mut pieces);
                let segs = if stage == E2E { e2e } else { other };
                ctx.line(&mut pieces, segs, None);
            }
        }
    }
    let lit_len = pieces
        .iter()
        .map(|p| if let Piece::Lit(t) = p { t.len() } else { 0 })
        .sum();
    Some(UserPlan { pieces, lit_len })
}

/// The two-message prompt value.
pub fn prompt_value(system: &str, user: String) -> Value {
    Value::Array(vec![
        Value::Object(Map::new().with("role", "system").with("content", system)),
        Value::Object(Map::new().with("role", "user").with("content", user)),
    ])
}

/// Every (track, stage) user plan of a pack, built once.
#[derive(Debug, Clone)]
pub struct Prompter<'k> {
    k: &'k ContractPack,
    plans: HashMap<(String, String), UserPlan>,
}

impl<'k> Prompter<'k> {
    /// Pre-render every track × (E2E + stages) combination.
    pub fn new(k: &'k ContractPack) -> Self {
        let mut plans = HashMap::new();
        for track in k.tasks.keys() {
            for stage in std::iter::once(E2E).chain(k.stages.iter().map(String::as_str)) {
                if let Some(p) = user_plan(k, track, stage) {
                    plans.insert((track.clone(), stage.to_string()), p);
                }
            }
        }
        Prompter { k, plans }
    }

    /// The pack this prompter renders.
    pub fn pack(&self) -> &'k ContractPack {
        self.k
    }

    /// Render the prompt of a validated key.
    pub fn render_key(&self, key: &TaskKey) -> Result<Value, TaskError> {
        let plan = self
            .plans
            .get(&(key.track.clone(), key.stage.clone()))
            .ok_or(TaskError::TrackUnsupported)?;
        Ok(prompt_value(
            &self.k.system_prompt,
            plan.render(&key.state_id),
        ))
    }

    /// `render_prompt(extra_info)`: validate, then render.
    pub fn render(&self, extra: &Value) -> Result<Value, TaskError> {
        let key = task::validate_extra(self.k, extra)?;
        self.render_key(&key)
    }

    /// `validate_prompt_binding(prompt, extra)`.
    pub fn validate_binding(&self, prompt: &Value, extra: &Value) -> Result<(), TaskError> {
        let msgs = prompt.as_array().ok_or(TaskError::PromptInvalid)?;
        for m in msgs {
            let obj = m.as_object().ok_or(TaskError::PromptMessageInvalid)?;
            if obj.len() != 2 || !obj.contains_key("role") || !obj.contains_key("content") {
                return Err(TaskError::PromptMessageInvalid);
            }
            let role_ok = matches!(
                obj.get("role").and_then(Value::as_str),
                Some("system" | "user")
            );
            if !role_ok || obj.get("content").and_then(Value::as_str).is_none() {
                return Err(TaskError::PromptMessageInvalid);
            }
        }
        let expected = self.render(extra)?;
        // Python compares lists of dicts; key order does not matter there,
        // and every message has exactly the two keys checked above.
        let same = expected.as_array().is_some_and(|exp| {
            exp.len() == msgs.len()
                && exp.iter().zip(msgs).all(|(e, o)| {
                    e.get("role") == o.get("role") && e.get("content") == o.get("content")
                })
        });
        if same {
            Ok(())
        } else {
            Err(TaskError::PromptMismatch)
        }
    }
}

/// `render_prompt(extra_info)` without a cache.
pub fn render_prompt(k: &ContractPack, extra: &Value) -> Result<Value, TaskError> {
    let key = task::validate_extra(k, extra)?;
    let plan = user_plan(k, &key.track, &key.stage).ok_or(TaskError::TrackUnsupported)?;
    Ok(prompt_value(&k.system_prompt, plan.render(&key.state_id)))
}
