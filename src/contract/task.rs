//! The task contract (contract §C.4) and the typed, validated view of the
//! pack members the source grid, round builder, prompt renderer and reward
//! contracts read ([`ContractPack`]).

use std::collections::BTreeMap;

use super::json::{self, Map, Value};
use super::pack::Pack;
use super::prompt::{self, TemplateEntry};

/// The whole-workflow stage. It is not a pack value: the contract gives it
/// its own rules (no handoff, every artifact, the E2E reward rubric).
pub const E2E: &str = "E2E";

/// The single output path every task writes.
pub const REQUIRED_OUTPUT: &str = "outputs/submission.csv";

/// Prefix of every `task_id`.
pub const TASK_ID_PREFIX: &str = "bat-core-";

/// Schema version of the task contract object.
pub const TASK_CONTRACT_SCHEMA_VERSION: i64 = 3;

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

/// A task definition of one track.
#[derive(Debug, Clone)]
pub struct TaskDef {
    /// Short task name (prose).
    pub task_name: String,
    /// One-clause objective without a final period (prose).
    pub objective: String,
    /// Files the sandbox provides.
    pub inventory: Vec<String>,
    /// The id column of the submission.
    pub id_column: String,
    /// The submission's columns, in order.
    pub required_columns: Vec<String>,
    /// What kind of output the task produces.
    pub output_kind: String,
    /// Allowed values per column, exactly as written in the pack.
    pub allowed_values: Value,
    /// `[rows, cols]` for image outputs, as written in the pack.
    pub output_shape: Option<Value>,
    /// Prefix of the expected ids (`test`, `report`, `question`, …).
    pub expected_id_prefix: String,
}

/// The round-side members of a pack, typed and cross-checked.
#[derive(Debug, Clone)]
pub struct ContractPack {
    /// Focus values of the source grid, in order (E2E first in K).
    pub focus_values: Vec<String>,
    /// Tracks in code order.
    pub tracks: Vec<String>,
    /// Outcome buckets in order.
    pub outcomes: Vec<String>,
    /// The ordered stages S1..S5 (without E2E).
    pub stages: Vec<String>,
    /// Abstract condition sentence per outcome (prose).
    pub abstract_conditions: BTreeMap<String, String>,
    /// `source_row.provenance`, as written.
    pub source_provenance: Value,
    /// `source_row.training_contract`, as written.
    pub training_contract: Value,
    /// `source_row.source_state_id_prefix`.
    pub source_id_prefix: String,
    /// `source_row.source_state_id_hex_chars`.
    pub source_id_hex_chars: usize,
    /// Version identifier of the task definitions.
    pub task_definition_version: String,
    /// Version identifier of the prompt.
    pub prompt_version: String,
    /// Version identifier of the reward.
    pub reward_version: String,
    /// `agentic_budget`, as written (object).
    pub agentic_budget: Value,
    /// Task definition per track.
    pub tasks: BTreeMap<String, TaskDef>,
    /// How many expected ids each task lists.
    pub expected_id_count: usize,
    /// Artifacts each stage must produce.
    pub stage_artifacts: BTreeMap<String, Vec<String>>,
    /// Display name per stage, E2E included.
    pub stage_display_names: BTreeMap<String, String>,
    /// Reward rubric item ids per stage.
    pub reward_items: BTreeMap<String, Vec<String>>,
    /// E2E stage weight per stage, as written (floats in K).
    pub stage_weights: BTreeMap<String, Value>,
    /// The system prompt (prose).
    pub system_prompt: String,
    /// The parsed user template.
    pub user_template: Vec<TemplateEntry>,
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

fn unique(r: &mut Reader<'_>, path: &str, items: &[String]) {
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
fn keyed_by<'m>(
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
fn accurate_sum(xs: &[f64]) -> f64 {
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

impl ContractPack {
    /// Read and cross-check the round-side members of `pack`. Every problem
    /// found is returned, not just the first.
    pub fn from_pack(pack: &Pack) -> Result<ContractPack, Vec<PackIssue>> {
        let mut issues = Vec::new();
        let built = Self::read(
            pack.value(),
            &mut Reader {
                issues: &mut issues,
            },
        );
        match built {
            Some(k) if issues.is_empty() => Ok(k),
            _ => {
                if issues.is_empty() {
                    issues.push(PackIssue {
                        path: "<pack>".into(),
                        problem: "unreadable".into(),
                    });
                }
                Err(issues)
            }
        }
    }

    fn read(root: &Value, r: &mut Reader<'_>) -> Option<ContractPack> {
        let stages = r.str_list(root, "", "stages").unwrap_or_default();
        unique(r, "stages", &stages);
        if stages.iter().any(|s| s == E2E) {
            r.issue("stages", "must not contain E2E (it is implied)");
        }
        for s in &stages {
            if s.to_uppercase() != *s || s.trim().is_empty() {
                r.issue(
                    "stages",
                    format!("stage {s:?} must be non-blank and uppercase"),
                );
            }
        }
        let mut with_e2e = vec![E2E.to_string()];
        with_e2e.extend(stages.iter().cloned());

        let focus_values = r.str_list(root, "", "focus_values").unwrap_or_default();
        unique(r, "focus_values", &focus_values);
        set_equal(r, "focus_values", &focus_values, &with_e2e, "stage");
        if let Some(allowed) = r.str_list(root, "", "allowed_target_stages") {
            set_equal(r, "allowed_target_stages", &allowed, &with_e2e, "stage");
        }

        let tracks = r.str_list(root, "", "tracks").unwrap_or_default();
        unique(r, "tracks", &tracks);
        for t in &tracks {
            if t.to_lowercase() != *t || t.is_empty() {
                r.issue(
                    "tracks",
                    format!("track {t:?} must be non-empty and lowercase"),
                );
            }
        }
        let outcomes = r.str_list(root, "", "outcomes").unwrap_or_default();
        unique(r, "outcomes", &outcomes);

        // source_row
        let mut abstract_conditions = BTreeMap::new();
        let (mut source_provenance, mut training_contract) = (Value::Null, Value::Null);
        let (mut source_id_prefix, mut source_id_hex_chars) = (String::new(), 0usize);
        if let Some(sr) = r.object(root, "", "source_row") {
            let sr = Value::Object(sr.clone());
            if let Some(m) = r.object(&sr, "source_row", "abstract_condition_by_outcome") {
                let path = "source_row.abstract_condition_by_outcome";
                for (k, v) in keyed_by(r, path, m, &outcomes, "outcome") {
                    match v.as_str() {
                        Some(s) => {
                            prose_marker(r, &join(path, k), s);
                            abstract_conditions.insert(k.clone(), s.to_string());
                        }
                        None => r.issue(&join(path, k), "must be a string"),
                    }
                }
            }
            if let Some(m) = r.object(&sr, "source_row", "provenance") {
                if m.get("evaluation_content_used") != Some(&Value::Bool(false)) {
                    r.issue(
                        "source_row.provenance.evaluation_content_used",
                        "must be false",
                    );
                }
                source_provenance = Value::Object(m.clone());
            }
            if let Some(m) = r.object(&sr, "source_row", "training_contract") {
                if m.get("prompt_only") != Some(&Value::Bool(true)) {
                    r.issue("source_row.training_contract.prompt_only", "must be true");
                }
                for key in super::source::CONTRACT_FALSE_FLAGS {
                    if m.get(key) != Some(&Value::Bool(false)) {
                        r.issue(&join("source_row.training_contract", key), "must be false");
                    }
                }
                training_contract = Value::Object(m.clone());
            }
            source_id_prefix = r
                .string(&sr, "source_row", "source_state_id_prefix")
                .unwrap_or_default();
            if let Some(n) = r.uint(&sr, "source_row", "source_state_id_hex_chars") {
                if !(1..=64).contains(&n) {
                    r.issue(
                        "source_row.source_state_id_hex_chars",
                        "must be between 1 and 64",
                    );
                }
                source_id_hex_chars = n as usize;
            }
        }

        let task_definition_version = r
            .nonempty_string(root, "", "task_definition_version")
            .unwrap_or_default();
        let prompt_version = r
            .nonempty_string(root, "", "prompt_version")
            .unwrap_or_default();
        let reward_version = r
            .nonempty_string(root, "", "reward_version")
            .unwrap_or_default();

        let mut agentic_budget = Value::Null;
        if let Some(b) = r.object(root, "", "agentic_budget") {
            let bv = Value::Object(b.clone());
            r.nonempty_string(&bv, "agentic_budget", "version");
            for key in [
                "max_assistant_turns",
                "max_user_turns",
                "max_tool_calls",
                "max_response_tokens",
                "max_tool_response_chars",
                "max_prompt_tokens",
                "max_model_tokens",
            ] {
                r.uint(&bv, "agentic_budget", key);
            }
            agentic_budget = bv;
        }

        // tasks
        let prefixes = r
            .object(root, "", "expected_id_prefix_by_track")
            .cloned()
            .unwrap_or_default();
        keyed_by(
            r,
            "expected_id_prefix_by_track",
            &prefixes,
            &tracks,
            "track",
        );
        let expected_id_count = r.uint(root, "", "expected_id_count").unwrap_or(0) as usize;
        let mut tasks = BTreeMap::new();
        if let Some(tm) = r.object(root, "", "tasks") {
            for t in &tracks {
                if !tm.contains_key(t) {
                    r.issue("tasks", format!("track {t:?} has no task definition"));
                }
            }
            for (name, def) in tm.iter() {
                let path = join("tasks", name);
                if !tracks.contains(name) {
                    r.issue(&path, format!("task definition for unknown track {name:?}"));
                    continue;
                }
                if def.as_object().is_none() {
                    r.issue(&path, "must be an object");
                    continue;
                }
                let task_name = r.nonempty_string(def, &path, "task_name");
                let objective = r.nonempty_string(def, &path, "objective");
                let inventory = r.str_list(def, &path, "inventory");
                let id_column = r.nonempty_string(def, &path, "id_column");
                let required_columns = r.str_list(def, &path, "required_columns");
                let output_kind = r.nonempty_string(def, &path, "output_kind");
                let allowed = r.object(def, &path, "allowed_values").cloned();
                if let Some(a) = &allowed {
                    for (col, vals) in a.iter() {
                        r.str_list_value(vals, &join(&join(&path, "allowed_values"), col));
                    }
                }
                let output_shape = def.get("output_shape").cloned();
                if let Some(shape) = &output_shape {
                    let ok = shape.as_array().is_some_and(|a| {
                        !a.is_empty() && a.iter().all(|x| matches!(x, Value::Int(i) if *i > 0))
                    });
                    if !ok {
                        r.issue(
                            &join(&path, "output_shape"),
                            "must be a list of positive integers",
                        );
                    }
                }
                if let (Some(cols), Some(id)) = (&required_columns, &id_column) {
                    if !cols.contains(id) {
                        r.issue(&join(&path, "id_column"), "must be one of required_columns");
                    }
                }
                let prefix = match prefixes.get(name).map(Value::as_str) {
                    Some(Some(p)) => p.to_string(),
                    Some(None) => {
                        r.issue(
                            &join("expected_id_prefix_by_track", name),
                            "must be a string",
                        );
                        String::new()
                    }
                    None => String::new(),
                };
                if let (Some(task_name), Some(objective), Some(inventory), Some(id_column)) =
                    (task_name, objective, inventory, id_column)
                {
                    if let (Some(required_columns), Some(output_kind), Some(allowed)) =
                        (required_columns, output_kind, allowed)
                    {
                        tasks.insert(
                            name.clone(),
                            TaskDef {
                                task_name,
                                objective,
                                inventory,
                                id_column,
                                required_columns,
                                output_kind,
                                allowed_values: Value::Object(allowed),
                                output_shape,
                                expected_id_prefix: prefix,
                            },
                        );
                    }
                }
            }
        }

        let stage_artifacts = per_stage_lists(r, root, "stage_required_artifacts", &stages, false);
        let reward_items = per_stage_lists(r, root, "reward_items", &stages, true);

        let mut stage_display_names = BTreeMap::new();
        if let Some(m) = r.object(root, "", "stage_display_names") {
            for (k, v) in keyed_by(r, "stage_display_names", m, &with_e2e, "stage") {
                match v.as_str() {
                    Some(s) => {
                        stage_display_names.insert(k.clone(), s.to_string());
                    }
                    None => r.issue(&join("stage_display_names", k), "must be a string"),
                }
            }
        }

        let mut stage_weights = BTreeMap::new();
        if let Some(m) = r.object(root, "", "stage_weights") {
            let mut nums = Vec::new();
            for (k, v) in keyed_by(r, "stage_weights", m, &stages, "stage") {
                if let Some(x) = r.number(v, &join("stage_weights", k)) {
                    if x < 0.0 {
                        r.issue(&join("stage_weights", k), "must not be negative");
                    }
                    nums.push(x);
                }
                stage_weights.insert(k.clone(), v.clone());
            }
            let total = accurate_sum(&nums);
            // Same closeness rule the contract uses elsewhere (§A.6 isclose).
            if nums.len() == stages.len() && (total - 1.0).abs() > 1e-9f64.max(1e-12) {
                r.issue(
                    "stage_weights",
                    format!("weights sum to {}, not 1", json::float_repr(total)),
                );
            }
        }

        let mut system_prompt = String::new();
        let mut user_template = Vec::new();
        if let Some(p) = r.object(root, "", "prompt") {
            let pv = Value::Object(p.clone());
            system_prompt = r
                .nonempty_string(&pv, "prompt", "system")
                .unwrap_or_default();
            if let Some(t) = r.member(&pv, "prompt", "user_template") {
                user_template = prompt::parse_template(t, &agentic_budget, r);
            }
        }

        Some(ContractPack {
            focus_values,
            tracks,
            outcomes,
            stages,
            abstract_conditions,
            source_provenance,
            training_contract,
            source_id_prefix,
            source_id_hex_chars,
            task_definition_version,
            prompt_version,
            reward_version,
            agentic_budget,
            tasks,
            expected_id_count,
            stage_artifacts,
            stage_display_names,
            reward_items,
            stage_weights,
            system_prompt,
            user_template,
        })
    }

    /// Whether `stage` is E2E or one of the pack's stages.
    pub fn is_allowed_stage(&self, stage: &str) -> bool {
        stage == E2E || self.stages.iter().any(|s| s == stage)
    }

    /// Artifacts already present when a sandbox starts at `stage`.
    pub fn provided_handoff_artifacts(&self, stage: &str) -> Vec<String> {
        if stage == E2E {
            return Vec::new();
        }
        self.stages
            .iter()
            .take_while(|s| s.as_str() != stage)
            .flat_map(|s| self.stage_artifacts.get(s).cloned().unwrap_or_default())
            .collect()
    }

    /// Artifacts the `stage` target must produce.
    pub fn current_required_artifacts(&self, stage: &str) -> Vec<String> {
        if stage == E2E {
            return self
                .stages
                .iter()
                .flat_map(|s| self.stage_artifacts.get(s).cloned().unwrap_or_default())
                .collect();
        }
        self.stage_artifacts.get(stage).cloned().unwrap_or_default()
    }

    /// The expected ids of a track's task.
    pub fn expected_ids(&self, track: &str) -> Vec<String> {
        let prefix = self
            .tasks
            .get(track)
            .map(|t| t.expected_id_prefix.as_str())
            .unwrap_or("test");
        (0..self.expected_id_count)
            .map(|i| format!("{prefix}_{i:03}"))
            .collect()
    }
}

fn set_equal(r: &mut Reader<'_>, path: &str, got: &[String], want: &[String], what: &str) {
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

fn per_stage_lists(
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

/// A task-contract failure (contract §C.4/§C.5); the message is the code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaskError {
    /// The input is not an object.
    #[error("extra_info_invalid")]
    ExtraInfoInvalid,
    /// A bad `state_id`.
    #[error("state_id_invalid")]
    StateIdInvalid,
    /// A bad `source_state_id`.
    #[error("source_state_id_invalid")]
    SourceStateIdInvalid,
    /// The track is not a key of the pack's tasks.
    #[error("track_unsupported")]
    TrackUnsupported,
    /// The stage is neither E2E nor a pack stage.
    #[error("target_stage_unsupported")]
    TargetStageUnsupported,
    /// `view_index` is not an int ≥ 0.
    #[error("view_index_invalid")]
    ViewIndexInvalid,
    /// The row names another task-definition version.
    #[error("task_definition_version_unsupported")]
    TaskDefinitionVersionUnsupported,
    /// The contract cannot be encoded as CJ.
    #[error("task_contract_not_stable_json")]
    NotStableJson,
    /// The prompt is not a list.
    #[error("prompt_invalid")]
    PromptInvalid,
    /// A prompt message has the wrong shape.
    #[error("prompt_message_invalid")]
    PromptMessageInvalid,
    /// The prompt differs from the rendering.
    #[error("prompt_task_contract_mismatch")]
    PromptMismatch,
}

/// The validated identity fields of an `extra_info` object, normalized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskKey {
    /// The row's state id.
    pub state_id: String,
    /// The source row's id.
    pub source_state_id: String,
    /// The lowercase track.
    pub track: String,
    /// The uppercase stage.
    pub stage: String,
    /// The cycle pass the row came from (Python int; i64 is ample for a view count).
    pub view_index: i64,
}

/// Whether `s` fully matches `^[A-Za-z0-9][A-Za-z0-9_.:-]{0,255}$`, the
/// contract's id pattern (such ids never need JSON escaping).
pub fn is_safe_id(s: &str) -> bool {
    safe_id(s)
}

fn safe_id(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 256
        && b[0].is_ascii_alphanumeric()
        && b[1..]
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b':' | b'-'))
}

/// Validate an `extra_info`-like value in the contract's order (§C.4).
pub fn validate_extra(k: &ContractPack, extra: &Value) -> Result<TaskKey, TaskError> {
    let m = extra.as_object().ok_or(TaskError::ExtraInfoInvalid)?;
    let state_id = match m.get("state_id") {
        Some(Value::Str(s)) if safe_id(s) => s.clone(),
        _ => return Err(TaskError::StateIdInvalid),
    };
    let source_state_id = match m.get("source_state_id") {
        Some(Value::Str(s)) if safe_id(s) => s.clone(),
        _ => return Err(TaskError::SourceStateIdInvalid),
    };
    let track = match m.get("track") {
        Some(Value::Str(s)) => s.to_lowercase(),
        _ => return Err(TaskError::TrackUnsupported),
    };
    if !k.tasks.contains_key(&track) {
        return Err(TaskError::TrackUnsupported);
    }
    let stage = match m.get("target_stage") {
        Some(Value::Str(s)) => s.to_uppercase(),
        _ => return Err(TaskError::TargetStageUnsupported),
    };
    if !k.is_allowed_stage(&stage) {
        return Err(TaskError::TargetStageUnsupported);
    }
    let view_index = match m.get("view_index") {
        Some(Value::Int(i)) if *i >= 0 => *i,
        // A non-negative int beyond i64 is still a valid Python int, but no
        // round can have that many views; treat it as invalid.
        _ => return Err(TaskError::ViewIndexInvalid),
    };
    match m.get("task_definition_version") {
        Some(Value::Str(s)) if *s == k.task_definition_version => {}
        _ => return Err(TaskError::TaskDefinitionVersionUnsupported),
    }
    Ok(TaskKey {
        state_id,
        source_state_id,
        track,
        stage,
        view_index,
    })
}

fn str_array(items: &[String]) -> Value {
    Value::Array(items.iter().map(|s| Value::Str(s.clone())).collect())
}

/// The task contract of §C.4 for an `extra_info`-like value, with
/// `contract_sha256`.
pub fn task_contract(k: &ContractPack, extra: &Value) -> Result<Map, TaskError> {
    let key = validate_extra(k, extra)?;
    contract_for_key(k, &key)
}

/// The task contract for an already validated key.
pub fn contract_for_key(k: &ContractPack, key: &TaskKey) -> Result<Map, TaskError> {
    let def = k.tasks.get(&key.track).ok_or(TaskError::TrackUnsupported)?;
    let mut c = Map::new()
        .with("schema_version", TASK_CONTRACT_SCHEMA_VERSION)
        .with(
            "task_definition_version",
            k.task_definition_version.as_str(),
        )
        .with("prompt_version", k.prompt_version.as_str())
        .with("state_id", key.state_id.as_str())
        .with("source_state_id", key.source_state_id.as_str())
        .with("view_index", key.view_index)
        .with("task_id", format!("{TASK_ID_PREFIX}{}", key.track))
        .with("task_name", def.task_name.as_str())
        .with("track", key.track.as_str())
        .with("target_stage", key.stage.as_str())
        .with("objective", def.objective.as_str())
        .with("inventory", str_array(&def.inventory))
        .with("expected_ids", str_array(&k.expected_ids(&key.track)))
        .with("required_output", REQUIRED_OUTPUT)
        .with("id_column", def.id_column.as_str())
        .with("required_columns", str_array(&def.required_columns))
        .with("output_kind", def.output_kind.as_str())
        .with("allowed_values", def.allowed_values.clone())
        .with("agentic_budget", k.agentic_budget.clone())
        .with(
            "provided_handoff_artifacts",
            str_array(&k.provided_handoff_artifacts(&key.stage)),
        )
        .with(
            "current_required_artifacts",
            str_array(&k.current_required_artifacts(&key.stage)),
        );
    if let Some(shape) = &def.output_shape {
        c.insert("output_shape", shape.clone());
    }
    let sha = json::digest(&Value::Object(c.clone())).map_err(|_| TaskError::NotStableJson)?;
    c.insert("contract_sha256", Value::Str(sha));
    Ok(c)
}

/// Every problem in a pack: the round-side members (via
/// [`ContractPack::from_pack`]) and the shape of the members other parts of
/// bat read (gate thresholds, prescription optimizer, leakage rules, `pack`).
pub fn check_pack(pack: &Pack) -> Vec<PackIssue> {
    let mut issues = match ContractPack::from_pack(pack) {
        Ok(_) => Vec::new(),
        Err(v) => v,
    };
    let root = pack.value();
    let r = &mut Reader {
        issues: &mut issues,
    };
    if let Some(g) = r.object(root, "", "gate_thresholds") {
        for key in [
            "maximum_overall_drop",
            "maximum_task_drop",
            "maximum_per_track_drop",
            "maximum_late_stage_drop",
            "catastrophic_overall_drop",
        ] {
            let path = join("gate_thresholds", key);
            match g.get(key) {
                Some(v) => {
                    if let Some(x) = r.number(v, &path) {
                        if x < 0.0 {
                            r.issue(&path, "must not be negative");
                        }
                    }
                }
                None => r.issue(&path, "missing key"),
            }
        }
    }
    if let Some(o) = r.object(root, "", "prescription_optimizer") {
        let ov = Value::Object(o.clone());
        for key in ["learning_rate", "kl_loss_coefficient"] {
            if let Some(v) = r.member(&ov, "prescription_optimizer", key) {
                r.number(v, &join("prescription_optimizer", key));
            }
        }
        if let Some(v) = r.member(&ov, "prescription_optimizer", "normalize_advantage_by_std") {
            if !matches!(v, Value::Bool(_)) {
                r.issue(
                    "prescription_optimizer.normalize_advantage_by_std",
                    "must be a boolean",
                );
            }
        }
        r.nonempty_string(&ov, "prescription_optimizer", "loss_aggregation");
        r.uint(&ov, "prescription_optimizer", "steps");
        r.uint(&ov, "prescription_optimizer", "continuations_per_state");
    }
    if let Some(l) = r.object(root, "", "leakage") {
        let lv = Value::Object(l.clone());
        r.nonempty_string(&lv, "leakage", "absolute_path_regex");
        r.str_list(&lv, "leakage", "sensitive_field_substrings");
        r.str_list(&lv, "leakage", "training_flag_suffixes");
        r.nonempty_string(&lv, "leakage", "evaluation_flag_suffix");
    }
    // `pack` (name, description) is optional: bat-constants.json has none.
    if let Some(p) = root.get("pack") {
        if p.as_object().is_none() {
            r.issue("pack", "must be an object");
        } else {
            r.nonempty_string(p, "pack", "name");
            r.string(p, "pack", "description");
        }
    }
    issues
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k() -> ContractPack {
        Pack::default_pack().contract().expect("default pack valid")
    }

    fn extra(pairs: &[(&str, Value)]) -> Value {
        let mut m = Map::new()
            .with("state_id", "bat:abc")
            .with("source_state_id", "bat-safe:def")
            .with("track", "VQA")
            .with("target_stage", "s2")
            .with("view_index", 3i64)
            .with(
                "task_definition_version",
                k().task_definition_version.as_str(),
            );
        for (key, v) in pairs {
            m.insert(*key, v.clone());
        }
        Value::Object(m)
    }

    #[test]
    fn errors_come_in_the_contract_order() {
        let k = k();
        let cases: Vec<(Value, TaskError)> = vec![
            (Value::Array(vec![]), TaskError::ExtraInfoInvalid),
            (
                extra(&[("state_id", Value::Str("-bad".into()))]),
                TaskError::StateIdInvalid,
            ),
            (
                extra(&[("state_id", Value::Str("a".repeat(257)))]),
                TaskError::StateIdInvalid,
            ),
            (
                extra(&[("source_state_id", Value::Int(1))]),
                TaskError::SourceStateIdInvalid,
            ),
            (
                extra(&[("track", Value::Str("radiology".into()))]),
                TaskError::TrackUnsupported,
            ),
            (
                extra(&[("target_stage", Value::Str("S6".into()))]),
                TaskError::TargetStageUnsupported,
            ),
            (
                extra(&[("view_index", Value::Bool(true))]),
                TaskError::ViewIndexInvalid,
            ),
            (
                extra(&[("view_index", Value::Float(1.0))]),
                TaskError::ViewIndexInvalid,
            ),
            (
                extra(&[("view_index", Value::Int(-1))]),
                TaskError::ViewIndexInvalid,
            ),
            (
                extra(&[("task_definition_version", Value::Str("other".into()))]),
                TaskError::TaskDefinitionVersionUnsupported,
            ),
            // Two faults: the earlier check wins.
            (
                extra(&[("track", Value::Null), ("view_index", Value::Null)]),
                TaskError::TrackUnsupported,
            ),
        ];
        for (input, want) in cases {
            assert_eq!(
                task_contract(&k, &input).err(),
                Some(want.clone()),
                "{want}"
            );
        }
    }

    #[test]
    fn contract_normalizes_and_digests() {
        let k = k();
        let c = task_contract(&k, &extra(&[])).expect("valid");
        assert_eq!(c.get("track").and_then(Value::as_str), Some("vqa"));
        assert_eq!(c.get("target_stage").and_then(Value::as_str), Some("S2"));
        assert_eq!(
            c.get("task_id").and_then(Value::as_str),
            Some("bat-core-vqa")
        );
        assert!(c.get("output_shape").is_none(), "vqa has no output shape");
        let ids = c
            .get("expected_ids")
            .and_then(Value::as_array)
            .expect("ids");
        assert_eq!(ids.first().and_then(Value::as_str), Some("question_000"));
        assert_eq!(ids.len(), 6);
        // S2 gets S1's artifacts handed over and must produce its own.
        let provided = c
            .get("provided_handoff_artifacts")
            .and_then(Value::as_array)
            .expect("list");
        assert_eq!(provided, &vec![Value::Str("plan/plan.md".into())]);
        let mut without = c.clone();
        let sha = without.remove("contract_sha256").expect("sha");
        assert_eq!(
            sha,
            Value::Str(json::digest(&Value::Object(without)).expect("digest"))
        );
        let seg = task_contract(
            &k,
            &extra(&[
                ("track", Value::Str("segmentation".into())),
                ("target_stage", Value::Str("E2E".into())),
            ]),
        )
        .expect("valid");
        assert_eq!(
            seg.get("output_shape"),
            Some(&Value::Array(vec![Value::Int(8), Value::Int(8)]))
        );
        assert_eq!(
            seg.get("provided_handoff_artifacts"),
            Some(&Value::Array(vec![]))
        );
        assert_eq!(
            seg.get("current_required_artifacts")
                .and_then(Value::as_array)
                .map(Vec::len),
            Some(12)
        );
    }
}
