//! The pack schema: reading and cross-checking a pack's members into the
//! typed [`ContractPack`] ([`ContractPack::from_pack`]) and checking the
//! members other parts of bat read ([`check_pack`]). Every problem is
//! reported, not just the first.

use std::collections::BTreeMap;

use super::contract_pack::{ContractPack, TaskDef, CONTRACT_FALSE_FLAGS, E2E};
use super::json::{self, Value};
use super::pack::{Pack, PackError};
use super::pack_reader::{
    accurate_sum, join, keyed_by, per_stage_lists, prose_marker, set_equal, unique, PackIssue,
    Reader,
};
use super::template::{parse_template, TemplateEntry};

impl Pack {
    /// Every problem in the pack (empty when it is valid): unknown or
    /// missing stages, weights that do not sum to 1, placeholders the
    /// renderer does not know, tracks without a task definition, missing
    /// keys, wrong types.
    pub fn check(&self) -> Vec<PackIssue> {
        check_pack(self)
    }

    /// The typed round-side view of the pack, or every problem found.
    pub fn contract(&self) -> Result<ContractPack, PackError> {
        ContractPack::from_pack(self).map_err(|issues| PackError::Invalid {
            origin: self.origin().to_string(),
            reason: issues
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        })
    }
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
        let Axes {
            stages,
            with_e2e,
            focus_values,
            tracks,
            outcomes,
        } = read_axes(r, root);
        let SourceRow {
            abstract_conditions,
            source_provenance,
            training_contract,
            source_id_prefix,
            source_id_hex_chars,
        } = read_source_row(r, root, &outcomes);
        let task_definition_version = r
            .nonempty_string(root, "", "task_definition_version")
            .unwrap_or_default();
        let prompt_version = r
            .nonempty_string(root, "", "prompt_version")
            .unwrap_or_default();
        let reward_version = r
            .nonempty_string(root, "", "reward_version")
            .unwrap_or_default();
        let agentic_budget = read_agentic_budget(r, root);
        let (expected_id_count, tasks) = read_tasks(r, root, &tracks);
        let stage_artifacts = per_stage_lists(r, root, "stage_required_artifacts", &stages, false);
        let reward_items = per_stage_lists(r, root, "reward_items", &stages, true);
        let stage_display_names = read_stage_display_names(r, root, &with_e2e);
        let stage_weights = read_stage_weights(r, root, &stages);
        let (system_prompt, user_template) = read_prompt(r, root, &agentic_budget);

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
}

/// The pack's axes: stages (and with E2E first), focus values, tracks and
/// outcomes.
struct Axes {
    stages: Vec<String>,
    with_e2e: Vec<String>,
    focus_values: Vec<String>,
    tracks: Vec<String>,
    outcomes: Vec<String>,
}

fn read_axes(r: &mut Reader<'_>, root: &Value) -> Axes {
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
    Axes {
        stages,
        with_e2e,
        focus_values,
        tracks,
        outcomes,
    }
}

/// `source_row`: the members every source row carries.
struct SourceRow {
    abstract_conditions: BTreeMap<String, String>,
    source_provenance: Value,
    training_contract: Value,
    source_id_prefix: String,
    source_id_hex_chars: usize,
}

fn read_source_row(r: &mut Reader<'_>, root: &Value, outcomes: &[String]) -> SourceRow {
    // source_row
    let mut abstract_conditions = BTreeMap::new();
    let (mut source_provenance, mut training_contract) = (Value::Null, Value::Null);
    let (mut source_id_prefix, mut source_id_hex_chars) = (String::new(), 0usize);
    if let Some(sr) = r.object(root, "", "source_row") {
        let sr = Value::Object(sr.clone());
        if let Some(m) = r.object(&sr, "source_row", "abstract_condition_by_outcome") {
            let path = "source_row.abstract_condition_by_outcome";
            for (k, v) in keyed_by(r, path, m, outcomes, "outcome") {
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
            for key in CONTRACT_FALSE_FLAGS {
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
    SourceRow {
        abstract_conditions,
        source_provenance,
        training_contract,
        source_id_prefix,
        source_id_hex_chars,
    }
}

/// `agentic_budget`, as written (object), its members checked.
fn read_agentic_budget(r: &mut Reader<'_>, root: &Value) -> Value {
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
    agentic_budget
}

/// The task definition of every track, and `expected_id_count`.
fn read_tasks(
    r: &mut Reader<'_>,
    root: &Value,
    tracks: &[String],
) -> (usize, BTreeMap<String, TaskDef>) {
    // tasks
    let prefixes = r
        .object(root, "", "expected_id_prefix_by_track")
        .cloned()
        .unwrap_or_default();
    keyed_by(r, "expected_id_prefix_by_track", &prefixes, tracks, "track");
    let expected_id_count = r.uint(root, "", "expected_id_count").unwrap_or(0) as usize;
    let mut tasks = BTreeMap::new();
    if let Some(tm) = r.object(root, "", "tasks") {
        for t in tracks {
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
    (expected_id_count, tasks)
}

fn read_stage_display_names(
    r: &mut Reader<'_>,
    root: &Value,
    with_e2e: &[String],
) -> BTreeMap<String, String> {
    let mut stage_display_names = BTreeMap::new();
    if let Some(m) = r.object(root, "", "stage_display_names") {
        for (k, v) in keyed_by(r, "stage_display_names", m, with_e2e, "stage") {
            match v.as_str() {
                Some(s) => {
                    stage_display_names.insert(k.clone(), s.to_string());
                }
                None => r.issue(&join("stage_display_names", k), "must be a string"),
            }
        }
    }
    stage_display_names
}

/// `stage_weights`: non-negative, summing to 1.
fn read_stage_weights(
    r: &mut Reader<'_>,
    root: &Value,
    stages: &[String],
) -> BTreeMap<String, Value> {
    let mut stage_weights = BTreeMap::new();
    if let Some(m) = r.object(root, "", "stage_weights") {
        let mut nums = Vec::new();
        for (k, v) in keyed_by(r, "stage_weights", m, stages, "stage") {
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
    stage_weights
}

/// `prompt`: the system prompt and the parsed user template.
fn read_prompt(
    r: &mut Reader<'_>,
    root: &Value,
    agentic_budget: &Value,
) -> (String, Vec<TemplateEntry>) {
    let mut system_prompt = String::new();
    let mut user_template = Vec::new();
    if let Some(p) = r.object(root, "", "prompt") {
        let pv = Value::Object(p.clone());
        system_prompt = r
            .nonempty_string(&pv, "prompt", "system")
            .unwrap_or_default();
        if let Some(t) = r.member(&pv, "prompt", "user_template") {
            user_template = parse_template(t, agentic_budget, r);
        }
    }
    (system_prompt, user_template)
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
