//! Looking at recorded rounds: `bat diff` between two commits
//! ([`diff`]), per-tensor checkpoint comparison ([`tensors`], or from the
//! statistics stored with deltas: [`deltas`]) and audit evaluations
//! ([`audit`]).
//!
//! Everything here reads a commit's *tree layout* plus its metadata, so it
//! works on round commits (`"kind": "bat_round"`) as well as on round
//! directories recorded with a plain `bat commit DIR --meta META.json`.
//! The layout read is the reference loop's per-round directory at the root
//! of the commit:
//!
//! ```text
//! data/train.jsonl  data/manifest.json
//! candidate/…                       (model files, *.safetensors)
//! candidate-eval/summary.json       candidate-eval/checkpoint-binding.json
//! gate.json  prescription.json  training-health.json
//! ```
//!
//! Any part that is missing is reported as absent rather than as an error.
//! The module does no terminal I/O and reads no environment.

pub mod audit;
pub mod deltas;
pub mod diff;
pub mod drift;
pub mod files;
pub mod rounds;
mod side;
pub mod tensors;

use crate::round::meta::RoundMeta;
use bat_ledger::{Commit, CommitId, Ledger, Mode, ObjectId};

/// Errors of the inspection verbs.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    /// The ledger failed.
    #[error("{source}")]
    Ledger {
        /// The ledger error.
        #[from]
        source: bat_ledger::Error,
    },
    /// A file in a commit is not the JSON it should be.
    #[error("{path} in commit {commit} is not valid JSON: {reason}")]
    Json {
        /// Path inside the commit.
        path: String,
        /// The commit.
        commit: String,
        /// The parse error.
        reason: String,
    },
    /// A safetensors file could not be compared.
    #[error("{path}: {source}")]
    Tensors {
        /// Path inside the commit.
        path: String,
        /// The cause.
        source: tensors::TensorError,
    },
    /// A scratch file could not be written or read.
    #[error("scratch file for {path}: {source}")]
    Scratch {
        /// Path inside the commit.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// An audit summary failed validation.
    #[error("invalid evaluation summary: {reason}")]
    InvalidSummary {
        /// The first failed check.
        reason: String,
    },
    /// An audit request is malformed.
    #[error("{reason}")]
    InvalidAudit {
        /// What is wrong.
        reason: String,
    },
    /// The audit summary evaluated another checkpoint than the round's
    /// candidate.
    #[error(
        "the summary evaluated checkpoint {summary_identity}, but round {rev} recorded candidate \
         {round_identity} ({source_of}){}",
        belongs_to.as_ref().map(|c| format!("; {} is the candidate of commit {c}", summary_identity)).unwrap_or_default()
    )]
    CheckpointMismatch {
        /// The audited commit.
        rev: String,
        /// `checkpoint_sha256` of the summary.
        summary_identity: String,
        /// The round's candidate identity.
        round_identity: String,
        /// Where the round's identity was read.
        source_of: String,
        /// A round commit whose candidate has the summary's identity.
        belongs_to: Option<String>,
    },
}

impl bat_ledger::Diagnostic for InspectError {
    fn kind(&self) -> bat_ledger::ErrorKind {
        match self {
            InspectError::Ledger { source } => source.kind(),
            InspectError::InvalidSummary { .. }
            | InspectError::InvalidAudit { .. }
            | InspectError::CheckpointMismatch { .. } => bat_ledger::ErrorKind::Usage,
            _ => bat_ledger::ErrorKind::User,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            InspectError::Ledger { source } => source.hint(),
            InspectError::CheckpointMismatch { .. } => Some(
                "audit the round's own candidate checkpoint, or pass --allow-mismatch \
                 --reason TEXT to record it anyway (the reason is kept with the audit)"
                    .to_string(),
            ),
            _ => None,
        }
    }
}

/// A commit opened for reading its round layout.
pub struct RoundTree<'l> {
    ledger: &'l Ledger,
    /// The commit id.
    pub id: CommitId,
    /// The commit.
    pub commit: Commit,
    /// Its round metadata ([`crate::round::meta::read`]); `None` for other
    /// commits and for round metadata that cannot be read (inspection then
    /// relies on the tree's files alone).
    pub round: Option<RoundMeta>,
}

impl<'l> RoundTree<'l> {
    /// Open commit `id`.
    pub fn open(ledger: &'l Ledger, id: CommitId) -> Result<RoundTree<'l>, InspectError> {
        let commit = ledger.read_commit(&id)?;
        let round = crate::round::meta::read(&commit.metadata).ok().flatten();
        Ok(RoundTree {
            ledger,
            id,
            commit,
            round,
        })
    }

    /// The ledger the commit lives in.
    pub fn ledger(&self) -> &'l Ledger {
        self.ledger
    }

    /// The file at `path` (id and size), if it exists and is a regular file.
    pub fn file(&self, path: &str) -> Result<Option<(ObjectId, u64)>, InspectError> {
        Ok(self
            .ledger
            .lookup_path(&self.commit.tree, path)?
            .filter(|e| matches!(e.mode, Mode::File | Mode::Executable))
            .map(|e| (e.id, e.size)))
    }

    /// The bytes of the file at `path`, if present.
    pub fn bytes(&self, path: &str) -> Result<Option<Vec<u8>>, InspectError> {
        match self.file(path)? {
            Some((id, _)) => Ok(Some(self.ledger.read_bytes(&id)?)),
            None => Ok(None),
        }
    }

    /// The file at `path` parsed as JSON, if present.
    pub fn json(&self, path: &str) -> Result<Option<serde_json::Value>, InspectError> {
        match self.bytes(path)? {
            Some(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| InspectError::Json {
                    path: path.to_string(),
                    commit: self.id.to_string(),
                    reason: e.to_string(),
                }),
            None => Ok(None),
        }
    }

    /// Metadata member `key` of a commit that is not a round (audits);
    /// rounds are read through [`RoundTree::round`].
    pub fn meta(&self, key: &str) -> Option<&serde_json::Value> {
        self.commit.metadata.get(key)
    }

    /// A string member of the round metadata, `None` when not a round or
    /// when empty (absent in the document).
    pub fn round_str(&self, get: impl Fn(&RoundMeta) -> &str) -> Option<&str> {
        self.round.as_ref().map(get).filter(|s| !s.is_empty())
    }
}

/// Path of the gating evaluation summary inside a round commit.
pub const SUMMARY_PATH: &str = "candidate-eval/summary.json";
/// Path of the candidate's model binding inside a round commit.
pub const BINDING_PATH: &str = "candidate-eval/checkpoint-binding.json";
