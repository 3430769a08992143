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
    #[error("source_digest_mismatch")]
    SourceDigestMismatch,
    /// The prescription is not a JSON object.
    #[error("prescription_invalid")]
    PrescriptionInvalid,
    /// `--target-stage` and the prescription disagree.
    #[error("target_disagrees_with_prescription")]
    TargetDisagrees,
    /// No usable target stage.
    #[error("target_stage_required")]
    TargetStageRequired,
    /// Bad round id, stage or batch count.
    #[error("round_arguments_invalid")]
    ArgumentsInvalid,
    /// A cycle over an empty subset or a negative count.
    #[error("selection_invalid")]
    SelectionInvalid,
    /// The row count is not 8 × batches.
    #[error("round_row_count_invalid")]
    RowCountInvalid,
    /// A batch does not hold 4/2/2 pool rows.
    #[error("round_pool_composition_invalid")]
    PoolCompositionInvalid,
    /// An `s_target` row has another stage.
    #[error("round_target_stage_invalid")]
    TargetStageInvalid,
    /// An `s_mix` row has the target stage or E2E.
    #[error("round_mix_stage_invalid")]
    MixStageInvalid,
    /// An `e2e` row is not E2E.
    #[error("round_e2e_stage_invalid")]
    E2eStageInvalid,
    /// Two rows share a state id.
    #[error("round_state_id_duplicate")]
    StateIdDuplicate,
    /// A row lacks the fields the round checks index (the reference crashes
    /// with a `KeyError` here).
    #[error("round_row_{row}_malformed")]
    RowMalformed {
        /// 0-based row index.
        row: usize,
    },
    /// The manifest is not a round manifest.
    #[error("manifest_invalid")]
    ManifestInvalid,
    /// The train file's sha differs from the manifest's.
    #[error("train_digest_mismatch")]
    TrainDigestMismatch,
    /// A train line is not JSON (the reference crashes with a decode error).
    #[error("line_{line}_invalid_json")]
    LineInvalidJson {
        /// 1-based line number.
        line: usize,
    },
    /// A train line is not an object.
    #[error("line_{line}_not_object")]
    LineNotObject {
        /// 1-based line number.
        line: usize,
    },
    /// A row's extra_info or task-definition version is wrong.
    #[error("row_task_contract_invalid")]
    RowTaskContractInvalid,
    /// A row's reward contract is not the expected one.
    #[error("row_reward_contract_invalid")]
    RowRewardContractInvalid,
    /// A row's stage is not allowed.
    #[error("row_stage_invalid")]
    RowStageInvalid,
    /// A row cannot be encoded as CJ (a non-finite float).
    #[error("task_contract_not_stable_json")]
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
