//! Reward contracts (contract §C.6): the rubric each training row carries.
//! Runtime scoring of sandbox evidence is not part of the round side.

use super::json::{Map, Value};
use super::task::{ContractPack, E2E};

/// A reward-contract failure; the message is the contract's code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RewardError {
    /// The stage is not one of the pack's stages.
    #[error("the stage is not one of the benchmark pack's stages")]
    StageInvalid,
}

impl bat_error::Diagnostic for RewardError {
    fn kind(&self) -> bat_error::ErrorKind {
        bat_error::ErrorKind::User
    }

    fn code(&self) -> Option<String> {
        match self {
            RewardError::StageInvalid => Some("stage_invalid".to_string()),
        }
    }
}

fn items(k: &ContractPack, stage: &str) -> Value {
    let ids = k
        .reward_items
        .get(stage)
        .map(Vec::as_slice)
        .unwrap_or_default();
    Value::Array(
        ids.iter()
            .map(|id| Value::Object(Map::new().with("id", id.as_str()).with("weight", 1.0)))
            .collect(),
    )
}

/// The single-stage rubric of `stage` (one of the pack's stages).
pub fn stage_reward_contract(k: &ContractPack, stage: &str) -> Result<Value, RewardError> {
    if !k.stages.iter().any(|s| s == stage) {
        return Err(RewardError::StageInvalid);
    }
    Ok(Value::Object(
        Map::new()
            .with("schema_version", 1i64)
            .with("mode", "bat_stage_rubric")
            .with("target_stage", stage)
            .with("items", items(k, stage))
            .with("aggregation", "equal_weight_mean")
            .with("verified_tool_execution_required", true),
    ))
}

/// The whole-workflow rubric.
pub fn e2e_reward_contract(k: &ContractPack) -> Value {
    let stages = k
        .stages
        .iter()
        .map(|s| {
            Value::Object(
                Map::new()
                    .with("id", s.as_str())
                    .with(
                        "weight",
                        k.stage_weights.get(s).cloned().unwrap_or(Value::Null),
                    )
                    .with("items", items(k, s)),
            )
        })
        .collect();
    Value::Object(
        Map::new()
            .with("schema_version", 1i64)
            .with("mode", "bat_e2e_rubric")
            .with("target_stage", E2E)
            .with("stages", Value::Array(stages))
            .with("stage_mean_weight", 0.5)
            .with("final_outcome_weight", 0.5)
            .with("verified_tool_execution_required", true),
    )
}

/// The rubric a row of `stage` must carry: E2E or the stage's own.
pub fn expected_reward_contract(k: &ContractPack, stage: &str) -> Result<Value, RewardError> {
    if stage == E2E {
        Ok(e2e_reward_contract(k))
    } else {
        stage_reward_contract(k, stage)
    }
}
