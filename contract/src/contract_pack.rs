//! The typed, validated view of the pack members the source grid, round
//! builder, prompt renderer and reward contracts read ([`ContractPack`]),
//! with the contract's fixed names. Reading it from a pack is
//! [`super::pack_schema`].

use std::collections::BTreeMap;

use super::json::Value;
use super::template::TemplateEntry;

/// The whole-workflow stage. It is not a pack value: the contract gives it
/// its own rules (no handoff, every artifact, the E2E reward rubric).
pub const E2E: &str = "E2E";

/// The single output path every task writes.
pub const REQUIRED_OUTPUT: &str = "outputs/submission.csv";

/// Prefix of every `task_id`.
pub const TASK_ID_PREFIX: &str = "bat-core-";

/// Schema version of the task contract object.
pub const TASK_CONTRACT_SCHEMA_VERSION: i64 = 3;

/// The training-contract flags that must be exactly `false`.
pub const CONTRACT_FALSE_FLAGS: [&str; 4] = [
    "assistant_target_included",
    "teacher_trajectory_included",
    "rollout_transcript_reuse_allowed",
    "model_specific_serialization",
];

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

impl ContractPack {
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
