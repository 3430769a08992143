//! Resuming an interrupted campaign from the ledger: the last round commit
//! on the branch carries the campaign and the loop state in its `"loop"`
//! metadata; rounds after it are run again from scratch, rounds up to it
//! never are.

use std::path::{Path, PathBuf};

use bat_ledger::{CommitId, Ledger};

use super::rounds::{prune_round_dirs, remove_committed_logs, round_id, LoopError, LoopState};
use crate::round::campaign::Campaign;
use crate::round::meta::{self, LoopMeta};
use crate::Ctx;
use bat_contract::binding::model_identity;

/// A resume failure.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    /// The branch has no round commit made by `bat run`.
    #[error("no round committed by `bat run` on {branch}; nothing to resume")]
    NothingToResume {
        /// The branch or revision searched.
        branch: String,
    },
    /// A ledger operation failed.
    #[error(transparent)]
    Ledger(#[from] bat_ledger::Error),
    /// The recorded loop metadata is unusable.
    #[error("round commit {commit} has unusable loop metadata: {reason}")]
    BadMetadata {
        /// The commit.
        commit: String,
        /// What is wrong.
        reason: String,
    },
    /// The checkpoint to continue from is neither on disk nor recoverable.
    #[error("cannot restore the checkpoint of {which} (sha256 {sha256}): {reason}")]
    CheckpointUnavailable {
        /// `initial` or the round id.
        which: String,
        /// The expected identity.
        sha256: String,
        /// Why.
        reason: String,
    },
    /// Preparing the work dir failed.
    #[error(transparent)]
    Loop(#[from] LoopError),
    /// `--rounds N` below the rounds already completed.
    #[error(
        "the campaign already completed {completed} rounds; --rounds {requested} cannot shrink it"
    )]
    RoundsBelowCompleted {
        /// Rounds committed.
        completed: i64,
        /// Rounds asked for.
        requested: i64,
    },
    /// The promoted state of the branch could not be read.
    #[error(transparent)]
    Round(#[from] Box<crate::round::RoundError>),
    /// A file operation failed.
    #[error("cannot prepare {}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

impl bat_ledger::Diagnostic for ResumeError {
    fn kind(&self) -> bat_ledger::ErrorKind {
        match self {
            ResumeError::Ledger(e) => e.kind(),
            ResumeError::Loop(e) => e.kind(),
            ResumeError::Round(e) => e.kind(),
            _ => bat_ledger::ErrorKind::User,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            ResumeError::Ledger(e) => e.hint(),
            ResumeError::Loop(e) => e.hint(),
            ResumeError::Round(e) => e.hint(),
            ResumeError::NothingToResume { .. } => {
                Some("start the campaign with `bat run` (without --resume)".to_string())
            }
            _ => None,
        }
    }

    fn code(&self) -> Option<String> {
        match self {
            ResumeError::Ledger(e) => e.code(),
            ResumeError::Loop(e) => e.code(),
            ResumeError::Round(e) => e.code(),
            _ => None,
        }
    }
}

/// A round commit found on the branch.
#[derive(Debug, Clone)]
pub struct RecordedRound {
    /// The commit.
    pub commit: CommitId,
    /// Its `"loop"` record, read once from the stored metadata.
    pub loop_meta: LoopMeta,
}

/// The loop record of a round commit made by the loop (`None` for other
/// commits; an unreadable round record is an error, not a skip).
fn loop_record(
    commit: &CommitId,
    meta: &serde_json::Value,
) -> Result<Option<LoopMeta>, ResumeError> {
    Ok(meta::read(meta)
        .map_err(|e| bad(commit, e.to_string()))?
        .and_then(|m| m.loop_meta))
}

/// Walk the first-parent chain from `rev` and return the newest round commit
/// made by the loop (metadata kind `bat_round` with a `"loop"` object).
pub fn find_last_round(ledger: &Ledger, rev: &str) -> Result<Option<RecordedRound>, ResumeError> {
    let Ok(mut id) = ledger.resolve(rev) else {
        return Ok(None);
    };
    loop {
        let c = ledger.read_commit(&id)?;
        if let Some(loop_meta) = loop_record(&id, &c.metadata)? {
            return Ok(Some(RecordedRound {
                commit: id,
                loop_meta,
            }));
        }
        match c.parents.first() {
            Some(p) => id = *p,
            None => return Ok(None),
        }
    }
}

/// Find the commit of round `rid` of run `run_id` on the first-parent chain.
pub fn find_round_commit(
    ledger: &Ledger,
    start: CommitId,
    run_id: &str,
    rid: &str,
) -> Result<Option<CommitId>, ResumeError> {
    let mut id = start;
    loop {
        let c = ledger.read_commit(&id)?;
        if meta::round_id_of(&c.metadata) == Some(rid)
            && loop_record(&id, &c.metadata)?.is_some_and(|l| l.run_id == run_id)
        {
            return Ok(Some(id));
        }
        match c.parents.first() {
            Some(p) => id = *p,
            None => return Ok(None),
        }
    }
}

/// What `bat run --resume` continues with.
#[derive(Debug, Clone)]
pub struct ResumePoint {
    /// The campaign as recorded.
    pub campaign: Campaign,
    /// The run id as recorded.
    pub run_id: String,
    /// The state after the last committed round.
    pub state: LoopState,
    /// Set when the branch's promoted state was followed instead of the
    /// recorded current checkpoint (a `bat revert` after the last round):
    /// what the next round starts from.
    pub followed_promoted: Option<String>,
}

fn bad(commit: &CommitId, reason: impl Into<String>) -> ResumeError {
    ResumeError::BadMetadata {
        commit: commit.to_string(),
        reason: reason.into(),
    }
}

fn identity_matches(path: &Path, sha: &str) -> bool {
    path.is_dir() && model_identity(path).is_ok_and(|id| id.model_identity_sha256 == sha)
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ResumeError + '_ {
    move |source| ResumeError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// How [`prepare_resume_with`] treats the work dir.
#[derive(Debug, Clone)]
pub struct ResumeOptions<'a> {
    /// The work dir is bat's own and keeps only the current checkpoint's
    /// round folder (see [`super::rounds::RunOptions::prune_round_dirs`]):
    /// a lost work dir is rebuilt with that folder only, and round folders
    /// left by an interruption after their commit are removed.
    pub prune_round_dirs: bool,
    /// Run the campaign to this many rounds instead of the recorded number
    /// (extends a finished campaign; may not be below the rounds done).
    pub rounds: Option<i64>,
    /// The branch whose promoted state (`refs/promoted/<branch>`) the next
    /// round starts from when a `bat revert` was committed after the last
    /// round; `None` keeps the recorded current checkpoint.
    pub follow_promoted: Option<String>,
    /// Progress of the checkouts (a lost work dir's rounds, the promoted
    /// candidate) and the flag that stops them.
    pub ctx: Ctx<'a>,
}

impl Default for ResumeOptions<'static> {
    /// Keep every round folder, the recorded rounds and checkpoint, quietly.
    fn default() -> Self {
        ResumeOptions {
            prune_round_dirs: false,
            rounds: None,
            follow_promoted: None,
            ctx: Ctx::quiet(),
        }
    }
}

/// Whether a `bat revert` commit lies on the first-parent chain from `rev`
/// down to (not including) the round commit `last`.
fn reverted_since(ledger: &Ledger, rev: &str, last: CommitId) -> Result<bool, ResumeError> {
    let Ok(mut id) = ledger.resolve(rev) else {
        return Ok(false);
    };
    while id != last {
        let c = ledger.read_commit(&id)?;
        if c.metadata.get("kind").and_then(serde_json::Value::as_str) == Some("bat_revert") {
            return Ok(true);
        }
        match c.parents.first() {
            Some(p) => id = *p,
            None => return Ok(false),
        }
    }
    Ok(false)
}

/// Where the next round starts when it is not the recorded current
/// checkpoint.
struct Override {
    sha256: String,
    round: Option<(String, CommitId)>,
    baseline: Option<meta::LoadedSummary>,
}

/// The branch's promoted state after a revert, when it differs from the
/// recorded current checkpoint (`initial_sha` is the campaign's initial
/// checkpoint identity).
fn promoted_override(
    ledger: &Ledger,
    branch: &str,
    recorded_sha: &str,
    initial_sha: &str,
) -> Result<Option<Override>, ResumeError> {
    use crate::round::StartingCheckpoint;
    let start = crate::round::next_starting_checkpoint(ledger, branch).map_err(Box::new)?;
    match start {
        StartingCheckpoint::Promoted(p) if p.candidate_checkpoint_sha256 != recorded_sha => {
            let tree = ledger.read_commit(&p.commit)?.tree;
            let path = "candidate-eval/summary.json";
            let entry = ledger
                .lookup_path(&tree, path)?
                .ok_or_else(|| bad(&p.commit, format!("the round commit has no {path}")))?;
            let bytes = ledger.read_bytes(&entry.id)?;
            let value = bat_contract::json::parse_bytes(&bytes)
                .map_err(|e| bad(&p.commit, format!("{path} is not valid JSON: {e}")))?;
            Ok(Some(Override {
                sha256: p.candidate_checkpoint_sha256,
                round: Some((p.round_id, p.commit)),
                baseline: Some(meta::LoadedSummary {
                    bytes,
                    value,
                    id: entry.id,
                }),
            }))
        }
        StartingCheckpoint::Initial { .. } if recorded_sha != initial_sha => Ok(Some(Override {
            sha256: initial_sha.to_string(),
            round: None,
            baseline: None,
        })),
        _ => Ok(None),
    }
}

/// The promoted state of `branch` when a revert was committed after the
/// last round `last` and it differs from the recorded checkpoint `sha`.
fn follow_promoted(
    ledger: &Ledger,
    branch: &str,
    last: CommitId,
    sha: &str,
    initial: &meta::LoadedSummary,
) -> Result<Option<Override>, ResumeError> {
    if !reverted_since(ledger, branch, last)? {
        return Ok(None);
    }
    let initial_sha = initial
        .value
        .get("checkpoint_sha256")
        .and_then(bat_contract::json::Value::as_str)
        .unwrap_or_default();
    promoted_override(ledger, branch, sha, initial_sha)
}

/// [`prepare_resume_with`] for a work dir that keeps every round folder.
pub fn prepare_resume(
    ledger: &Ledger,
    recorded: &RecordedRound,
    restore_dir: &Path,
) -> Result<ResumePoint, ResumeError> {
    prepare_resume_with(ledger, recorded, restore_dir, ResumeOptions::default())
}

/// Rebuild the loop state from the last round commit and make the work dir
/// ready for the next round: an unfinished round folder left by the
/// interruption is removed; a lost work dir is rebuilt from the round commits
/// (plus `baseline-eval/summary.json`, the committed bytes). The current
/// checkpoint is the recorded folder if it still has the recorded identity,
/// else the promoted round's candidate checked out into `restore_dir`.
/// Checkouts read through the ledger's object layers: in a partial clone
/// whose handle has a remote opener ([`crate::remote::attach_promisor`]),
/// checkpoint files the remote keeps are fetched and verified on demand.
pub fn prepare_resume_with(
    ledger: &Ledger,
    recorded: &RecordedRound,
    restore_dir: &Path,
    opts: ResumeOptions<'_>,
) -> Result<ResumePoint, ResumeError> {
    let c = &recorded.commit;
    let lm = &recorded.loop_meta;
    let mut campaign: Campaign = lm.campaign.clone();
    let run_id = lm.run_id.clone();
    let completed = lm.completed_rounds();
    if let Some(n) = opts.rounds {
        if n < completed {
            return Err(ResumeError::RoundsBelowCompleted {
                completed,
                requested: n,
            });
        }
        campaign.rounds = n;
    }
    let target = lm.next_target_stage("").to_string();
    if target.is_empty() {
        return Err(bad(c, "next target stage missing"));
    }
    let history = lm.history(ledger, *c).map_err(|e| bad(c, e.to_string()))?;
    let w = &campaign.work_dir;
    let (mut baseline, initial) = lm
        .summaries(ledger, *c, w)
        .map_err(|e| bad(c, e.to_string()))?;
    let mut sha = lm.current_checkpoint.sha256.clone();
    let mut cur_round = lm.current_checkpoint.round_id.clone();
    let mut recorded_path = PathBuf::from(&lm.current_checkpoint.path);
    // A revert after the last round moved the promoted ref: the next round
    // starts from what it points at, not from the recorded checkpoint.
    let mut round_commit_override = None;
    let mut followed_promoted = None;
    if let Some(branch) = &opts.follow_promoted {
        if let Some(o) = follow_promoted(ledger, branch, *c, &sha, &initial)? {
            sha = o.sha256;
            match o.round {
                Some((rid, commit)) => {
                    recorded_path = w.join(&rid).join("candidate");
                    followed_promoted = Some(format!("the candidate of {rid} ({commit})"));
                    cur_round = Some(rid);
                    round_commit_override = Some(commit);
                }
                None => {
                    recorded_path = campaign.initial_checkpoint.clone();
                    followed_promoted = Some("the initial checkpoint".into());
                    cur_round = None;
                }
            }
            baseline = o.baseline.unwrap_or_else(|| initial.clone());
        }
    }
    // A lost work dir is rebuilt from the ledger: the committed rounds of
    // this run are checked out into W/<round> (only the current
    // checkpoint's when bat owns the work dir), and the baseline summary is
    // written back, so the layout later round commits expect is there again.
    if !w.exists() {
        let mut id = *c;
        loop {
            let commit = ledger.read_commit(&id)?;
            let same_run = loop_record(&id, &commit.metadata)?.is_some_and(|l| l.run_id == run_id);
            let rid = meta::round_id_of(&commit.metadata);
            let wanted = !opts.prune_round_dirs || (rid.is_some() && rid == cur_round.as_deref());
            if let (true, true, Some(rid)) = (same_run, wanted, rid) {
                let dest = w.join(rid);
                if !dest.exists() {
                    ledger.checkout(&id, &dest, opts.ctx.progress, opts.ctx.cancel)?;
                }
                if opts.prune_round_dirs {
                    break;
                }
            }
            match commit.parents.first() {
                Some(p) => id = *p,
                None => break,
            }
        }
        let base = w.join("baseline-eval");
        std::fs::create_dir_all(&base).map_err(io(&base))?;
        let summary = base.join("summary.json");
        std::fs::write(&summary, &initial.bytes).map_err(io(&summary))?;
    }
    let current = if identity_matches(&recorded_path, &sha) {
        recorded_path
    } else {
        let Some(rid) = cur_round.clone() else {
            return Err(ResumeError::CheckpointUnavailable {
                which: "initial".into(),
                sha256: sha,
                reason: format!("{} is missing or changed", recorded_path.display()),
            });
        };
        let unavailable = |reason: String| ResumeError::CheckpointUnavailable {
            which: rid.clone(),
            sha256: sha.clone(),
            reason,
        };
        let commit = match round_commit_override {
            Some(commit) => commit,
            None => find_round_commit(ledger, *c, &run_id, &rid)?
                .ok_or_else(|| unavailable("its round commit is not on this branch".into()))?,
        };
        let dest = restore_dir.join(&rid);
        if dest.exists() {
            std::fs::remove_dir_all(&dest).map_err(io(&dest))?;
        }
        ledger.checkout(&commit, &dest, opts.ctx.progress, opts.ctx.cancel)?;
        let candidate = dest.join("candidate");
        if !identity_matches(&candidate, &sha) {
            return Err(unavailable(format!(
                "the checked-out {} does not have that identity",
                candidate.display()
            )));
        }
        candidate
    };
    // Drop the unfinished round (and, in bat's own work dir, rounds left
    // behind by an interruption between their commit and their removal).
    if completed < campaign.rounds {
        let partial = w.join(round_id(completed + 1));
        if partial.exists() {
            std::fs::remove_dir_all(&partial).map_err(io(&partial))?;
        }
    }
    if opts.prune_round_dirs {
        prune_round_dirs(w, cur_round.as_deref())?;
    }
    // Logs of the last round left by an interruption between its commit and
    // their removal: the commit holds their bytes.
    remove_committed_logs(&lm.logs)?;
    std::fs::create_dir_all(w).map_err(io(w))?;
    Ok(ResumePoint {
        campaign,
        run_id,
        state: LoopState {
            completed_rounds: completed,
            current_checkpoint: current,
            current_checkpoint_round: cur_round,
            baseline_summary: baseline.value,
            baseline_summary_id: baseline.id,
            initial_summary_id: initial.id,
            target_stage: target,
            history,
        },
        followed_promoted,
    })
}
