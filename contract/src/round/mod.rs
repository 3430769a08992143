//! Round materialization (contract §C.2, §C.3, §C.7, §C.8) and the dataset
//! verifier (§I "Dataset verify").
//!
//! The build is planned sequentially (the RNG draws are cheap and fix the
//! order), then every batch is projected, shuffled and encoded in parallel;
//! results are collected in batch order, so the output never depends on
//! scheduling.

use super::reward::RewardError;
use super::source::SourceError;
use super::task::TaskError;

mod encode;
mod materialize;
mod plan;
mod verify;
mod write;

#[cfg(test)]
mod tests;

pub use encode::{build_round_jsonl, encode_jsonl};
pub use materialize::{
    materialize, prescribed_target, view_manifest, BuildInputs, BuiltRound, ManifestSpec,
    MANIFEST_FILE, THREE_POOL_ARTIFACT_KIND, TRAIN_FILE,
};
pub use plan::{build_round, RoundRequest};
pub use verify::{verify_dataset, verify_round_rows};
pub use write::{row_task_key, write_immutable, WriteError};

/// Batches in a default round.
pub const DEFAULT_BATCHES: i64 = 378;
/// Rows per batch.
pub const ROWS_PER_BATCH: usize = 8;
/// Target-stage rows per batch.
pub const TARGET_PER_BATCH: usize = 4;
/// Mix rows per batch.
pub const MIX_PER_BATCH: usize = 2;
/// E2E rows per batch.
pub const E2E_PER_BATCH: usize = 2;
/// Rollouts per state the trainer draws (recorded in the manifest).
pub const CONTINUATIONS_PER_STATE: i64 = 4;
/// `data_source` of every row.
pub const DATA_SOURCE: &str = "automedbench_clean_prompt";
/// Pool names.
pub const POOL_TARGET: &str = "s_target";
/// Pool names.
pub const POOL_MIX: &str = "s_mix";
/// Pool names.
pub const POOL_E2E: &str = "e2e";

/// Why a round's training view could not be built or verified; the message
/// is the contract's error code.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    /// The source file's sha differs from `--source-sha256`.
    #[error("the source file's sha256 differs from the expected source digest (--source-sha256)")]
    SourceDigestMismatch,
    /// The prescription is not a JSON object.
    #[error("the prescription is not a JSON object")]
    PrescriptionInvalid,
    /// `--target-stage` and the prescription disagree.
    #[error("the target stage disagrees with the prescription's target stage")]
    TargetDisagrees,
    /// No usable target stage.
    #[error("no usable target stage: give one, or a prescription that names one")]
    TargetStageRequired,
    /// Bad round id, stage or batch count.
    #[error("the round id, stage or batch count is not valid")]
    ArgumentsInvalid,
    /// A cycle over an empty subset or a negative count.
    #[error("the row selection is not valid (a cycle over an empty subset, or a negative count)")]
    SelectionInvalid,
    /// The row count is not 8 × batches.
    #[error("the round does not hold 8 rows per batch")]
    RowCountInvalid,
    /// A batch does not hold 4/2/2 pool rows.
    #[error("a batch does not hold 4 target, 2 mix and 2 end-to-end rows")]
    PoolCompositionInvalid,
    /// An `s_target` row has another stage.
    #[error("an s_target row has a stage other than the target stage")]
    TargetStageInvalid,
    /// An `s_mix` row has the target stage or E2E.
    #[error("an s_mix row has the target stage or E2E")]
    MixStageInvalid,
    /// An `e2e` row is not E2E.
    #[error("an e2e row is not an E2E row")]
    E2eStageInvalid,
    /// Two rows share a state id.
    #[error("two rows of the round share a state id")]
    StateIdDuplicate,
    /// A row lacks the fields the round checks index (the reference crashes
    /// with a `KeyError` here).
    #[error("row {row} of the round lacks the fields the round checks read")]
    RowMalformed {
        /// 0-based row index.
        row: usize,
    },
    /// The manifest is not a round manifest.
    #[error("the manifest is not a round manifest")]
    ManifestInvalid,
    /// The train file's sha differs from the manifest's.
    #[error("the train file's sha256 differs from the one its manifest records")]
    TrainDigestMismatch,
    /// A train line is not JSON (the reference crashes with a decode error).
    #[error("line {line} of the train file is not valid JSON")]
    LineInvalidJson {
        /// 1-based line number.
        line: usize,
    },
    /// A train line is not an object.
    #[error("line {line} of the train file is not a JSON object")]
    LineNotObject {
        /// 1-based line number.
        line: usize,
    },
    /// A row's extra_info or task-definition version is wrong.
    #[error("a row's extra_info or task-definition version is not valid")]
    RowTaskContractInvalid,
    /// A row's reward contract is not the expected one.
    #[error("a row's reward contract is not the expected one")]
    RowRewardContractInvalid,
    /// A row's stage is not allowed.
    #[error("a row's stage is not allowed in the round")]
    RowStageInvalid,
    /// A row cannot be encoded as CJ (a non-finite float).
    #[error("a row cannot be encoded as canonical JSON (it holds a non-finite number)")]
    NotStableJson,
    /// A source-file failure.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// A task-contract or prompt failure.
    #[error(transparent)]
    Task(#[from] TaskError),
    /// A reward-contract failure.
    #[error(transparent)]
    Reward(#[from] RewardError),
}

impl bat_error::Diagnostic for ViewError {
    fn kind(&self) -> bat_error::ErrorKind {
        match self {
            ViewError::Source(e) => e.kind(),
            ViewError::Task(e) => e.kind(),
            ViewError::Reward(e) => e.kind(),
            _ => bat_error::ErrorKind::User,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            ViewError::Source(e) => e.hint(),
            ViewError::Task(e) => e.hint(),
            ViewError::Reward(e) => e.hint(),
            _ => None,
        }
    }

    fn code(&self) -> Option<String> {
        match self {
            ViewError::Source(e) => e.code(),
            ViewError::Task(e) => e.code(),
            ViewError::Reward(e) => e.code(),
            ViewError::NotStableJson => Some("task_contract_not_stable_json".to_string()),
            ViewError::RowStageInvalid => Some("row_stage_invalid".to_string()),
            ViewError::RowRewardContractInvalid => Some("row_reward_contract_invalid".to_string()),
            ViewError::RowTaskContractInvalid => Some("row_task_contract_invalid".to_string()),
            ViewError::LineNotObject { line, .. } => Some(format!("line_{line}_not_object")),
            ViewError::LineInvalidJson { line, .. } => Some(format!("line_{line}_invalid_json")),
            ViewError::TrainDigestMismatch => Some("train_digest_mismatch".to_string()),
            ViewError::ManifestInvalid => Some("manifest_invalid".to_string()),
            ViewError::RowMalformed { row, .. } => Some(format!("round_row_{row}_malformed")),
            ViewError::StateIdDuplicate => Some("round_state_id_duplicate".to_string()),
            ViewError::E2eStageInvalid => Some("round_e2e_stage_invalid".to_string()),
            ViewError::MixStageInvalid => Some("round_mix_stage_invalid".to_string()),
            ViewError::TargetStageInvalid => Some("round_target_stage_invalid".to_string()),
            ViewError::PoolCompositionInvalid => Some("round_pool_composition_invalid".to_string()),
            ViewError::RowCountInvalid => Some("round_row_count_invalid".to_string()),
            ViewError::SelectionInvalid => Some("selection_invalid".to_string()),
            ViewError::ArgumentsInvalid => Some("round_arguments_invalid".to_string()),
            ViewError::TargetStageRequired => Some("target_stage_required".to_string()),
            ViewError::TargetDisagrees => Some("target_disagrees_with_prescription".to_string()),
            ViewError::PrescriptionInvalid => Some("prescription_invalid".to_string()),
            ViewError::SourceDigestMismatch => Some("source_digest_mismatch".to_string()),
        }
    }
}
