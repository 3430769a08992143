//! Resuming an interrupted campaign from the ledger: the last round commit
//! on the branch carries the campaign and the loop state in its `"loop"`
//! metadata; rounds after it are run again from scratch, rounds up to it
//! never are.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use bat_ledger::{CommitId, Ledger, NoProgress};

use super::r#loop::{from_serde, round_id, Campaign, LoopError, LoopState};
use crate::contract::binding::model_identity;
use crate::contract::json::Value;

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
    /// A file operation failed.
    #[error("cannot prepare {}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// A round commit found on the branch.
#[derive(Debug, Clone)]
pub struct RecordedRound {
    /// The commit.
    pub commit: CommitId,
    /// Its `"loop"` metadata.
    pub loop_metadata: serde_json::Value,
}

fn is_loop_round(meta: &serde_json::Value) -> bool {
    meta.get("kind").and_then(|k| k.as_str()) == Some("bat_round")
        && meta
            .get("loop")
            .and_then(|l| l.get("schema_version"))
            .is_some()
}

/// Walk the first-parent chain from `rev` and return the newest round commit
/// made by the loop (metadata kind `bat_round` with a `"loop"` object).
pub fn find_last_round(ledger: &Ledger, rev: &str) -> Result<Option<RecordedRound>, ResumeError> {
    let Ok(mut id) = ledger.resolve(rev) else {
        return Ok(None);
    };
    loop {
        let c = ledger.read_commit(&id)?;
        if is_loop_round(&c.metadata) {
            return Ok(Some(RecordedRound {
                commit: id,
                loop_metadata: c.metadata.get("loop").cloned().unwrap_or_default(),
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
        let m = &c.metadata;
        if is_loop_round(m)
            && m.get("round_id").and_then(|r| r.as_str()) == Some(rid)
            && m.get("loop")
                .and_then(|l| l.get("run_id"))
                .and_then(|r| r.as_str())
                == Some(run_id)
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

/// Rebuild the loop state from the last round commit and make the work dir
/// ready for the next round: an unfinished round folder left by the
/// interruption is removed; a lost work dir is rebuilt from the round commits
/// (plus `baseline-eval/summary.json` from the metadata). The current
/// checkpoint is the recorded folder if it still has the recorded identity,
/// else the promoted round's candidate checked out into `restore_dir`.
pub fn prepare_resume(
    ledger: &Ledger,
    recorded: &RecordedRound,
    restore_dir: &Path,
) -> Result<ResumePoint, ResumeError> {
    let m = &recorded.loop_metadata;
    let c = &recorded.commit;
    let campaign: Campaign = serde_json::from_value(m.get("campaign").cloned().unwrap_or_default())
        .map_err(|e| bad(c, format!("campaign: {e}")))?;
    let run_id = m
        .get("run_id")
        .and_then(|r| r.as_str())
        .ok_or_else(|| bad(c, "run_id missing"))?
        .to_string();
    let state_doc = from_serde(m.get("state").unwrap_or(&serde_json::Value::Null))?;
    let completed = match state_doc.get("completed_rounds") {
        Some(Value::Int(n)) => *n,
        _ => return Err(bad(c, "state.completed_rounds missing")),
    };
    let target = state_doc
        .get("next_target_stage")
        .and_then(Value::as_str)
        .ok_or_else(|| bad(c, "state.next_target_stage missing"))?
        .to_string();
    let history = state_doc
        .get("history")
        .and_then(Value::as_array)
        .cloned()
        .ok_or_else(|| bad(c, "state.history missing"))?;
    let baseline_summary = from_serde(
        m.get("baseline_summary")
            .unwrap_or(&serde_json::Value::Null),
    )?;
    let initial_summary = from_serde(m.get("initial_summary").unwrap_or(&serde_json::Value::Null))?;
    let cur = m
        .get("current_checkpoint")
        .ok_or_else(|| bad(c, "current_checkpoint missing"))?;
    let sha = cur
        .get("sha256")
        .and_then(|s| s.as_str())
        .ok_or_else(|| bad(c, "current_checkpoint.sha256 missing"))?
        .to_string();
    let cur_round = cur
        .get("round_id")
        .and_then(|r| r.as_str())
        .map(str::to_string);
    let recorded_path = PathBuf::from(
        cur.get("path")
            .and_then(|p| p.as_str())
            .ok_or_else(|| bad(c, "current_checkpoint.path missing"))?,
    );
    // A lost work dir is rebuilt from the ledger: every committed round of
    // this run is checked out into W/<round>, and the baseline summary is
    // written back, so the layout later round commits expect is there again.
    let w = &campaign.work_dir;
    if !w.exists() {
        let mut id = *c;
        loop {
            let commit = ledger.read_commit(&id)?;
            let meta = &commit.metadata;
            let same_run = is_loop_round(meta)
                && meta
                    .get("loop")
                    .and_then(|l| l.get("run_id"))
                    .and_then(|r| r.as_str())
                    == Some(run_id.as_str());
            if let (true, Some(rid)) = (same_run, meta.get("round_id").and_then(|r| r.as_str())) {
                let dest = w.join(rid);
                if !dest.exists() {
                    ledger.checkout(&id, &dest, &NoProgress, &AtomicBool::new(false))?;
                }
            }
            match commit.parents.first() {
                Some(p) => id = *p,
                None => break,
            }
        }
        let base = w.join("baseline-eval");
        std::fs::create_dir_all(&base).map_err(|source| ResumeError::Io {
            path: base.clone(),
            source,
        })?;
        let summary = base.join("summary.json");
        std::fs::write(
            &summary,
            crate::contract::json::to_pj_file(&initial_summary),
        )
        .map_err(|source| ResumeError::Io {
            path: summary.clone(),
            source,
        })?;
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
        let commit = find_round_commit(ledger, *c, &run_id, &rid)?
            .ok_or_else(|| unavailable("its round commit is not on this branch".into()))?;
        let dest = restore_dir.join(&rid);
        if dest.exists() {
            std::fs::remove_dir_all(&dest).map_err(|source| ResumeError::Io {
                path: dest.clone(),
                source,
            })?;
        }
        ledger.checkout(&commit, &dest, &NoProgress, &AtomicBool::new(false))?;
        let candidate = dest.join("candidate");
        if !identity_matches(&candidate, &sha) {
            return Err(unavailable(format!(
                "the checked-out {} does not have that identity",
                candidate.display()
            )));
        }
        candidate
    };
    // Drop the unfinished round.
    if completed < campaign.rounds {
        let partial = w.join(round_id(completed + 1));
        if partial.exists() {
            std::fs::remove_dir_all(&partial).map_err(|source| ResumeError::Io {
                path: partial.clone(),
                source,
            })?;
        }
    }
    std::fs::create_dir_all(w).map_err(|source| ResumeError::Io {
        path: w.clone(),
        source,
    })?;
    Ok(ResumePoint {
        campaign,
        run_id,
        state: LoopState {
            completed_rounds: completed,
            current_checkpoint: current,
            current_checkpoint_round: cur_round,
            baseline_summary,
            initial_summary,
            target_stage: target,
            history,
        },
    })
}
