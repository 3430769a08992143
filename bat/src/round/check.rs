//! Typed round checks: every way a round directory is refused before it is
//! committed ([`RoundCheck`]), each naming the check and the file, with a
//! hint saying what to do about it. The messages are the ones `bat commit`
//! has always printed (`round check `NAME` failed for PATH: REASON`).

use std::path::{Path, PathBuf};

/// A round check that failed: the round is refused and nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoundCheck {
    /// The directory does not have a round's layout.
    #[error("round check `layout` failed for {path}: {reason}")]
    Layout {
        /// The missing or wrong file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// `manifest.json`'s `train.sha256` is not the digest of `train.jsonl`.
    #[error("round check `manifest_digest` failed for {path}: {reason}")]
    ManifestDigest {
        /// The manifest.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The round view's verifier refused the training data.
    #[error("round check `round_verify` failed for {path}: {reason}")]
    RoundVerify {
        /// `train.jsonl` or the manifest.
        path: PathBuf,
        /// The verifier's code.
        reason: String,
    },
    /// The candidate model folder is unusable or has no identity.
    #[error("round check `candidate` failed for {path}: {reason}")]
    Candidate {
        /// The model folder or the offending file in it.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A round with this id is already committed on the branch.
    #[error("round check `round_id` failed for {path}: round {round_id} is already committed on {branch} ({commit})")]
    RoundId {
        /// The round directory.
        path: PathBuf,
        /// The round id.
        round_id: String,
        /// The branch.
        branch: String,
        /// The commit that already records it.
        commit: String,
    },
    /// A model checkpoint (initial commit) has no identity.
    #[error("round check `checkpoint` failed for {path}: {reason}")]
    Checkpoint {
        /// The checkpoint folder.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// An evaluation file does not name the candidate's identity.
    #[error("round check `binding` failed for {path}: {reason}")]
    Binding {
        /// The binding, summary, request, receipt or gate file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The raw evaluation does not match what the summary or receipt name.
    #[error("round check `raw_evaluation` failed for {path}: {reason}")]
    RawEvaluation {
        /// The file naming the raw evaluation.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A summary is not the one recomputed or fails the gate's acceptance.
    #[error("round check `summary` failed for {path}: {reason}")]
    Summary {
        /// The summary (or the receipt naming it).
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// `training-health.json` is unusable.
    #[error("round check `training_health` failed for {path}: {reason}")]
    TrainingHealth {
        /// The health file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The held-out markers file is unusable.
    #[error("round check `markers` failed for {path}: {reason}")]
    Markers {
        /// The markers file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The firewall scan found held-out content in the training data.
    #[error("round check `firewall` failed for {path}: {reason}")]
    Firewall {
        /// `train.jsonl`.
        path: PathBuf,
        /// What leaked.
        reason: String,
    },
    /// `gate.json` is not the recomputed gate.
    #[error("round check `gate` failed for {path}: {reason}")]
    Gate {
        /// `gate.json`.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// `prescription.json` is not the recomputed prescription.
    #[error("round check `prescription` failed for {path}: {reason}")]
    Prescription {
        /// `prescription.json`.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

impl bat_ledger::Diagnostic for RoundCheck {
    fn kind(&self) -> bat_ledger::ErrorKind {
        bat_ledger::ErrorKind::User
    }

    fn hint(&self) -> Option<String> {
        Some(RoundCheck::hint(self).to_string())
    }
}

impl RoundCheck {
    /// The check's name (`manifest_digest`, `round_verify`, …).
    pub fn name(&self) -> &'static str {
        match self {
            RoundCheck::Layout { .. } => "layout",
            RoundCheck::ManifestDigest { .. } => "manifest_digest",
            RoundCheck::RoundVerify { .. } => "round_verify",
            RoundCheck::Candidate { .. } => "candidate",
            RoundCheck::RoundId { .. } => "round_id",
            RoundCheck::Checkpoint { .. } => "checkpoint",
            RoundCheck::Binding { .. } => "binding",
            RoundCheck::RawEvaluation { .. } => "raw_evaluation",
            RoundCheck::Summary { .. } => "summary",
            RoundCheck::TrainingHealth { .. } => "training_health",
            RoundCheck::Markers { .. } => "markers",
            RoundCheck::Firewall { .. } => "firewall",
            RoundCheck::Gate { .. } => "gate",
            RoundCheck::Prescription { .. } => "prescription",
        }
    }

    /// The file (or folder) that failed the check.
    pub fn path(&self) -> &Path {
        match self {
            RoundCheck::Layout { path, .. }
            | RoundCheck::ManifestDigest { path, .. }
            | RoundCheck::RoundVerify { path, .. }
            | RoundCheck::Candidate { path, .. }
            | RoundCheck::RoundId { path, .. }
            | RoundCheck::Checkpoint { path, .. }
            | RoundCheck::Binding { path, .. }
            | RoundCheck::RawEvaluation { path, .. }
            | RoundCheck::Summary { path, .. }
            | RoundCheck::TrainingHealth { path, .. }
            | RoundCheck::Markers { path, .. }
            | RoundCheck::Firewall { path, .. }
            | RoundCheck::Gate { path, .. }
            | RoundCheck::Prescription { path, .. } => path,
        }
    }

    /// What the user can do about it.
    pub fn hint(&self) -> &'static str {
        match self {
            RoundCheck::ManifestDigest { .. } => {
                "the training data changed after its manifest was written; rebuild the round data"
            }
            RoundCheck::RoundVerify { .. } => {
                "check the round with `bat round verify --train F --manifest F`"
            }
            RoundCheck::Firewall { .. } => {
                "held-out evaluation content reached train.jsonl; rebuild the round data without it"
            }
            RoundCheck::Gate { .. } | RoundCheck::Prescription { .. } => {
                "recompute with `bat gate` from the baseline and candidate summaries, or pass --baseline-summary if the round was gated against another baseline"
            }
            RoundCheck::Binding { .. } | RoundCheck::Candidate { .. } => {
                "the evaluation does not belong to this candidate model; re-run the evaluation on candidate/"
            }
            RoundCheck::Summary { .. } | RoundCheck::RawEvaluation { .. } => {
                "re-summarize the raw evaluation with `bat eval summarize`"
            }
            RoundCheck::RoundId { .. } => {
                "nothing to do: the round is recorded (`bat show` the named commit); \
                 commit it with --branch NAME to record it on another branch"
            }
            RoundCheck::Layout { .. }
            | RoundCheck::Checkpoint { .. }
            | RoundCheck::TrainingHealth { .. }
            | RoundCheck::Markers { .. } => "fix the named file and commit again",
        }
    }
}

/// How a check's failure is made from the file and the reason, for the
/// helpers that serve several checks (reading a JSON file).
pub(crate) type CheckCtor = fn(PathBuf, String) -> RoundCheck;
