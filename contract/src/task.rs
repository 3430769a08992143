//! The task contract (contract §C.4): validating a row's `extra_info` and
//! building the task contract object from the typed pack view
//! ([`ContractPack`], read by [`super::pack_schema`]).

use super::json::{self, Map, Value};

pub use super::contract_pack::{
    ContractPack, TaskDef, E2E, REQUIRED_OUTPUT, TASK_CONTRACT_SCHEMA_VERSION, TASK_ID_PREFIX,
};
pub use super::pack_reader::PackIssue;
pub use super::pack_schema::check_pack;

/// A task-contract failure (contract §C.4/§C.5); the message is the code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaskError {
    /// The input is not an object.
    #[error("the row's extra_info is not a JSON object")]
    ExtraInfoInvalid,
    /// A bad `state_id`.
    #[error("the row's state_id is missing or malformed")]
    StateIdInvalid,
    /// A bad `source_state_id`.
    #[error("the row's source_state_id is missing or malformed")]
    SourceStateIdInvalid,
    /// The track is not a key of the pack's tasks.
    #[error("the row's track is not one of the benchmark pack's tasks")]
    TrackUnsupported,
    /// The stage is neither E2E nor a pack stage.
    #[error("the row's target stage is neither E2E nor one of the pack's stages")]
    TargetStageUnsupported,
    /// `view_index` is not an int ≥ 0.
    #[error("the row's view_index is not a whole number of at least 0")]
    ViewIndexInvalid,
    /// The row names another task-definition version.
    #[error("the row names a task-definition version the pack does not define")]
    TaskDefinitionVersionUnsupported,
    /// The contract cannot be encoded as CJ.
    #[error(
        "the task contract cannot be encoded as canonical JSON (it holds a non-finite number)"
    )]
    NotStableJson,
    /// The prompt is not a list.
    #[error("the row's prompt is not a list of messages")]
    PromptInvalid,
    /// A prompt message has the wrong shape.
    #[error("a message of the row's prompt does not have the expected shape")]
    PromptMessageInvalid,
    /// The prompt differs from the rendering.
    #[error("the row's prompt differs from the one its task contract renders")]
    PromptMismatch,
}

impl bat_error::Diagnostic for TaskError {
    fn kind(&self) -> bat_error::ErrorKind {
        bat_error::ErrorKind::User
    }

    fn code(&self) -> Option<String> {
        match self {
            TaskError::PromptMismatch => Some("prompt_task_contract_mismatch".to_string()),
            TaskError::PromptMessageInvalid => Some("prompt_message_invalid".to_string()),
            TaskError::PromptInvalid => Some("prompt_invalid".to_string()),
            TaskError::NotStableJson => Some("task_contract_not_stable_json".to_string()),
            TaskError::TaskDefinitionVersionUnsupported => {
                Some("task_definition_version_unsupported".to_string())
            }
            TaskError::ViewIndexInvalid => Some("view_index_invalid".to_string()),
            TaskError::TargetStageUnsupported => Some("target_stage_unsupported".to_string()),
            TaskError::TrackUnsupported => Some("track_unsupported".to_string()),
            TaskError::SourceStateIdInvalid => Some("source_state_id_invalid".to_string()),
            TaskError::StateIdInvalid => Some("state_id_invalid".to_string()),
            TaskError::ExtraInfoInvalid => Some("extra_info_invalid".to_string()),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::Pack;

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
