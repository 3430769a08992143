//! The inputs of a campaign: what the loop runs and every round commit
//! records, so a run can be resumed or replayed. Plain data, below the
//! engine that runs it.

use std::path::PathBuf;

/// The placeholder a template uses for the path of the bat binary (the
/// simulator backend runs `bat sim` children through it). A resumed or
/// replayed campaign substitutes the bat that runs it now, wherever the
/// recorded one was.
pub const BAT_PLACEHOLDER: &str = "{bat}";

/// The inputs of a campaign, recorded with every round so it can be resumed.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Campaign {
    /// The source grid (absolute once started).
    pub source: PathBuf,
    /// The initial checkpoint (absolute once started).
    pub initial_checkpoint: PathBuf,
    /// The work dir (absolute once started).
    pub work_dir: PathBuf,
    /// Trainer argv template.
    pub trainer: Vec<String>,
    /// Evaluator argv template.
    pub evaluator: Vec<String>,
    /// The evaluation protocol id.
    pub protocol_id: String,
    /// The runtime tool format, as given.
    pub runtime_tool_format: String,
    /// Rounds to run in total.
    pub rounds: i64,
    /// Batches per round.
    pub batches: i64,
    /// The benchmark pack file (`None`: the embedded default pack).
    #[serde(default)]
    pub pack: Option<PathBuf>,
    /// The ledger branch rounds are committed to (`None`: the current one).
    #[serde(default)]
    pub branch: Option<String>,
    /// Extra trainer placeholders beyond the contract's, as
    /// `("{name}", value)` pairs (for example `{reward_mode}` and `{seed}`
    /// for the simulator and for ablations). Whole-element replacement like
    /// the others; none of them is required.
    #[serde(default)]
    pub extra_placeholders: Vec<(String, String)>,
}
