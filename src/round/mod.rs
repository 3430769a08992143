//! The round record: a BaT round as a first-class ledger commit
//! (`../shared/DESIGN.md` §5, issue 5).
//!
//! INTERFACE AGREED BETWEEN THE ROUND-RECORD AND LOOP WORK (to be replaced by
//! the implementation; never land this file as it is):
//!
//! - [`commit_round`] validates a round directory (reference layout
//!   `data/ candidate/ candidate-eval/ gate.json prescription.json
//!   training-health.json`, or bat's own layout) and records it as one commit
//!   on a branch, moving `refs/promoted/<branch>` when the gate promoted.
//! - Round commit metadata (what `bat log --json` returns):
//!   `{"kind":"bat_round","round_id","target_stage","gate_status",
//!   "scores":{"overall","task","agentic","S1".."S5"}, ...}` plus whatever
//!   the caller passes in [`CommitRoundOptions::extra_metadata`] under the key
//!   `"loop"` (the loop driver keeps its resume state there).

use std::path::{Path, PathBuf};

use bat_ledger::{CommitId, Ledger};

use crate::contract::pack::Pack;

/// How to commit a round directory.
#[derive(Debug, Clone)]
pub struct CommitRoundOptions {
    /// Commit message (default: derived from the round id and gate status).
    pub message: Option<String>,
    /// Branch to commit on (default: the current branch).
    pub branch: Option<String>,
    /// Training-code git repository for provenance (default: none given).
    pub code_repo: Option<PathBuf>,
    /// Extra held-out markers file for the firewall scan.
    pub heldout_markers: Option<PathBuf>,
    /// Keep the raw evaluator output in the private area.
    pub keep_raw_eval: bool,
    /// The benchmark pack.
    pub pack: Pack,
    /// Trainer/evaluator argv templates, recorded in provenance.
    pub command_templates: Option<serde_json::Value>,
    /// Stored under `"loop"` in the commit metadata.
    pub extra_metadata: Option<serde_json::Value>,
}

/// What [`commit_round`] recorded.
#[derive(Debug, Clone)]
pub struct RoundCommit {
    /// The new commit.
    pub commit: CommitId,
    /// The round id (`r01`, ...).
    pub round_id: String,
    /// `promote` or `hold`.
    pub gate_status: String,
}

/// Errors of the round record.
#[derive(Debug, thiserror::Error)]
pub enum RoundError {
    /// Placeholder until the implementation lands.
    #[error("round commits are not implemented yet ({dir})")]
    NotImplemented {
        /// The round directory.
        dir: PathBuf,
    },
}

/// Validate `dir` as a round and commit it. See the module docs.
pub fn commit_round(
    _ledger: &mut Ledger,
    dir: &Path,
    _opts: &CommitRoundOptions,
) -> Result<RoundCommit, RoundError> {
    Err(RoundError::NotImplemented { dir: dir.to_path_buf() })
}
