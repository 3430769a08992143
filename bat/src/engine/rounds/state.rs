//! A campaign's recorded inputs and its state between rounds, and the JSON
//! documents made from them (`state.json`, the `"loop"` metadata of a round
//! commit, the stdout document of a finished run).

use super::*;

/// Where a campaign stands after some rounds.
#[derive(Debug, Clone)]
pub struct LoopState {
    /// Rounds completed (and committed).
    pub completed_rounds: i64,
    /// The folder the next round trains from.
    pub current_checkpoint: PathBuf,
    /// The round whose candidate that is (`None`: the initial checkpoint).
    pub current_checkpoint_round: Option<String>,
    /// The summary later candidates are gated against.
    pub baseline_summary: Value,
    /// The object id of that summary's file (a file of a round commit's
    /// tree once the round is recorded).
    pub baseline_summary_id: bat_ledger::ObjectId,
    /// The object id of the initial checkpoint's summary,
    /// `baseline-eval/summary.json` (the first round's
    /// `baseline-summary.json`).
    pub initial_summary_id: bat_ledger::ObjectId,
    /// The next round's target stage.
    pub target_stage: String,
    /// One entry per completed round.
    pub history: Vec<Value>,
}

/// How a run starts.
#[derive(Debug, Clone)]
pub enum Start {
    /// A new campaign: create the work dir and evaluate the baseline.
    Fresh,
    /// Continue after `completed_rounds` (see [`super::resume`]).
    Resume(LoopState),
}

/// Convert a contract value to serde JSON (for ledger metadata): through
/// its canonical text, which refuses what the contract cannot encode.
fn to_serde(v: &Value) -> Result<serde_json::Value, LoopError> {
    let text = json::canonical_json(v).map_err(|e| LoopError::Encode {
        reason: e.to_string(),
    })?;
    serde_json::from_str(&text).map_err(|e| LoopError::Encode {
        reason: e.to_string(),
    })
}

/// The round id of round `n` (`r01`…`r99`, `r100`…).
pub fn round_id(n: i64) -> String {
    format!("r{n:02}")
}

/// The PJ state document (`W/state.json`).
pub fn state_document(state: &LoopState) -> Value {
    Value::Object(
        Map::new()
            .with("schema_version", 1)
            .with("completed_rounds", state.completed_rounds)
            .with(
                "current_checkpoint_sha256",
                str_of(&state.baseline_summary, "checkpoint_sha256"),
            )
            .with("next_target_stage", state.target_stage.as_str())
            .with("history", Value::Array(state.history.clone())),
    )
}

/// The `"loop"` metadata recorded with a round commit: the campaign, the
/// run id, this round's history element, references to the summaries and
/// the round's child logs, which the round commit stores under `logs/`
/// (constant size; see [`crate::round::meta`]), and the digest of the pack
/// the round ran with ([`crate::round::meta::pack_blake3`]).
pub fn loop_metadata(
    campaign: &Campaign,
    run_id: &str,
    pack_blake3: &str,
    state: &LoopState,
    logs: &[(String, PathBuf)],
) -> Result<crate::round::meta::LoopMeta, LoopError> {
    use crate::round::meta::{CurrentCheckpoint, LogRef, LoopMeta, SummaryRef};
    let mut log_entries = std::collections::BTreeMap::new();
    for (name, path) in logs {
        // A log that cannot be read is named without bytes (and without a
        // tree path: the round commit could not hold it either).
        let (sha, tree) = match crate::round::meta::log_sha256(path) {
            Ok(sha) => (sha, LogRef::tree_path_for(path)),
            Err(_) => (String::new(), None),
        };
        log_entries.insert(
            name.clone(),
            LogRef {
                path: path.to_string_lossy().into_owned(),
                sha256: sha,
                tree,
            },
        );
    }
    let entry = match state.history.last() {
        Some(e) => to_serde(e)?,
        None => {
            return Err(LoopError::Encode {
                reason: "a round is recorded with an empty history".into(),
            })
        }
    };
    Ok(LoopMeta {
        schema_version: LOOP_METADATA_VERSION,
        run_id: run_id.to_string(),
        campaign: campaign.clone(),
        round_number: state.completed_rounds,
        current_checkpoint: CurrentCheckpoint {
            path: state.current_checkpoint.to_string_lossy().into_owned(),
            sha256: str_of(&state.baseline_summary, "checkpoint_sha256").to_string(),
            round_id: state.current_checkpoint_round.clone(),
        },
        baseline_summary: SummaryRef::Object(state.baseline_summary_id),
        initial_summary: SummaryRef::Object(state.initial_summary_id),
        history_entry: Some(entry),
        history_len: Some(state.history.len() as u64),
        next_target_stage: Some(state.target_stage.clone()),
        state: None,
        logs: log_entries,
        pack_blake3: Some(pack_blake3.to_string()),
    })
}

/// One round of a finished run, as its history records it.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryLine {
    /// The round id.
    pub round_id: String,
    /// The stage it trained.
    pub target_stage: String,
    /// The gate's decision (`None`: the entry names none it knows).
    pub gate_status: Option<GateStatus>,
    /// The candidate's model identity ("" when not recorded).
    pub candidate_checkpoint_sha256: String,
}

impl HistoryLine {
    /// Read a history element (resumed histories come from the ledger, so
    /// a member may be missing).
    fn of(entry: &Value) -> HistoryLine {
        HistoryLine {
            round_id: str_of(entry, "round_id").to_string(),
            target_stage: str_of(entry, "target_stage").to_string(),
            gate_status: str_of(entry, "gate_status").parse().ok(),
            candidate_checkpoint_sha256: str_of(entry, "candidate_checkpoint_sha256").to_string(),
        }
    }
}

/// Where a finished run left the campaign.
#[derive(Debug, Clone)]
pub struct LoopOutcome {
    /// Rounds of the campaign.
    pub rounds: i64,
    /// The identity of the checkpoint the next round would start from.
    pub current_checkpoint_sha256: String,
    /// The stage the next round would target.
    pub next_target_stage: String,
    /// Every round of the campaign, oldest first.
    pub history: Vec<HistoryLine>,
    /// The history elements as recorded, for [`LoopOutcome::document`].
    entries: Vec<Value>,
}

impl LoopOutcome {
    /// The outcome of `campaign` after its last round.
    pub(crate) fn of(campaign: &Campaign, state: &LoopState) -> LoopOutcome {
        LoopOutcome {
            rounds: campaign.rounds,
            current_checkpoint_sha256: str_of(&state.baseline_summary, "checkpoint_sha256")
                .to_string(),
            next_target_stage: state.target_stage.clone(),
            history: state.history.iter().map(HistoryLine::of).collect(),
            entries: state.history.clone(),
        }
    }

    /// The run's stdout document (`bat run --json`, the reference loop's).
    pub fn document(&self) -> Value {
        Value::Object(
            Map::new()
                .with("status", "complete")
                .with("rounds", self.rounds)
                .with(
                    "current_checkpoint_sha256",
                    self.current_checkpoint_sha256.as_str(),
                )
                .with("next_target_stage", self.next_target_stage.as_str())
                .with("history", Value::Array(self.entries.clone())),
        )
    }
}

/// Validate sizes and the runtime format, resolve the inputs and create the
/// work dir; returns the campaign with absolute paths.
pub fn prepare_fresh(campaign: &Campaign) -> Result<Campaign, LoopError> {
    if campaign.rounds < 1 || campaign.batches < 1 {
        return Err(LoopError::SizeInvalid);
    }
    validate_runtime_protocol(Some(&campaign.runtime_tool_format))?;
    let resolve = |p: &Path| {
        std::fs::canonicalize(p).map_err(|source| LoopError::Missing {
            path: p.to_path_buf(),
            source,
        })
    };
    let source = resolve(&campaign.source)?;
    let initial = resolve(&campaign.initial_checkpoint)?;
    let w = std::path::absolute(&campaign.work_dir).map_err(io_err(&campaign.work_dir))?;
    if let Some(parent) = w.parent() {
        std::fs::create_dir_all(parent).map_err(io_err(parent))?;
    }
    match std::fs::create_dir(&w) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(LoopError::Exists { path: w })
        }
        Err(source) => return Err(LoopError::Io { path: w, source }),
    }
    let work_dir = std::fs::canonicalize(&w).map_err(io_err(&w))?;
    let pack = match &campaign.pack {
        Some(p) => Some(resolve(p)?),
        None => None,
    };
    Ok(Campaign {
        source,
        initial_checkpoint: initial,
        work_dir,
        pack,
        ..campaign.clone()
    })
}
