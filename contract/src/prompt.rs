//! Prompt rendering (contract §C.5).
//!
//! The pack's `prompt.user_template` is parsed once into [`TemplateEntry`]s.
//! For a given (track, stage) every placeholder except `{state_id}` is fixed,
//! so [`Prompter`] pre-renders each of those combinations into literal pieces
//! and a round build only splices the state id in.

use std::collections::HashMap;

use super::contract_pack::{ContractPack, TaskDef, E2E, REQUIRED_OUTPUT, TASK_ID_PREFIX};
use super::json::{Map, Value};
use super::task::{self, TaskError, TaskKey};
pub use super::template::{EachList, Seg, TemplateEntry, Var};

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
    def: &'a TaskDef,
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
            Var::TaskId => format!("{}{}", TASK_ID_PREFIX, self.track),
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
