//! `provenance.json` of a round commit: the training code's git state (read
//! with libgit2), bat's version, the command templates, timestamps and the
//! compute the trainer measured.
//!
//! Measured compute is read from `training-health.json`: the members
//! `steps`, `rollouts`, `generated_tokens`, `wall_seconds` and
//! `gpu_seconds`, either inside a `"compute"` object or at the top level
//! (the `"compute"` object wins). Each must be a non-negative finite number;
//! absent members are omitted, and with none present `measured_compute` is
//! `null`.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use git2::{DiffFormat, DiffOptions, Repository, StatusOptions};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::check::RoundCheck;
use super::layout::RoundLayout;
use super::validate::CheckedRound;
use super::{CommitRoundOptions, RoundError};
use bat_contract::json::Value;

/// The compute keys read from the health file, in output order.
pub const COMPUTE_KEYS: [&str; 5] = [
    "steps",
    "rollouts",
    "generated_tokens",
    "wall_seconds",
    "gpu_seconds",
];

/// The training-code repository's state.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CodeProvenance {
    /// HEAD's commit id (`None` on an unborn branch).
    pub head_commit: Option<String>,
    /// The branch HEAD is on (`None` when detached).
    pub branch: Option<String>,
    /// Whether tracked files differ from HEAD (index or work tree) or
    /// untracked files exist.
    pub dirty: bool,
    /// Number of untracked (not ignored) files.
    pub untracked_files: usize,
    /// sha256 of the patch text of HEAD → work tree (with the index) for
    /// tracked files; the digest of the empty string when clean.
    pub diff_sha256: String,
    /// Length of that patch text in bytes.
    pub diff_bytes: usize,
}

fn git_err(path: &Path) -> impl Fn(git2::Error) -> RoundError + '_ {
    move |e| RoundError::Provenance {
        path: path.to_path_buf(),
        reason: e.message().to_string(),
    }
}

/// Read the git state of the repository at or above `path`.
pub fn code_provenance(path: &Path) -> Result<CodeProvenance, RoundError> {
    let err = git_err(path);
    let repo = Repository::discover(path).map_err(&err)?;
    let (head_commit, branch, head_tree) = match repo.head() {
        Ok(h) => {
            let commit = h.peel_to_commit().map_err(&err)?;
            let branch = h
                .is_branch()
                .then(|| h.shorthand().ok().map(str::to_string))
                .flatten();
            (
                Some(commit.id().to_string()),
                branch,
                Some(commit.tree().map_err(&err)?),
            )
        }
        Err(e) if e.code() == git2::ErrorCode::UnbornBranch => {
            let branch = repo
                .find_reference("HEAD")
                .ok()
                .and_then(|r| r.symbolic_target().ok().flatten().map(str::to_string))
                .map(|t| t.trim_start_matches("refs/heads/").to_string());
            (None, branch, None)
        }
        Err(e) => return Err(err(e)),
    };
    let mut so = StatusOptions::new();
    so.include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(false);
    let statuses = repo.statuses(Some(&mut so)).map_err(&err)?;
    let mut untracked = 0;
    let mut changed = 0;
    for s in statuses.iter() {
        if s.status().contains(git2::Status::WT_NEW) {
            untracked += 1;
        } else if !s.status().is_empty() && !s.status().contains(git2::Status::IGNORED) {
            changed += 1;
        }
    }
    let mut dopts = DiffOptions::new();
    dopts.include_untracked(false);
    let diff = repo
        .diff_tree_to_workdir_with_index(head_tree.as_ref(), Some(&mut dopts))
        .map_err(&err)?;
    let mut patch = Vec::new();
    diff.print(DiffFormat::Patch, |_, _, line| {
        if matches!(line.origin(), '+' | '-' | ' ') {
            patch.push(line.origin() as u8);
        }
        patch.extend_from_slice(line.content());
        true
    })
    .map_err(&err)?;
    Ok(CodeProvenance {
        head_commit,
        branch,
        dirty: changed > 0 || untracked > 0,
        untracked_files: untracked,
        diff_sha256: hex::encode(Sha256::digest(&patch)),
        diff_bytes: patch.len(),
    })
}

/// The measured compute of a parsed health file (see the module docs).
/// `Err(reason)` when a member is present but not a non-negative finite
/// number.
pub fn measured_compute(health: &Value) -> Result<Option<serde_json::Value>, String> {
    let src = health
        .get("compute")
        .filter(|c| c.as_object().is_some())
        .unwrap_or(health);
    let mut out = serde_json::Map::new();
    for k in COMPUTE_KEYS {
        let Some(v) = src.get(k) else { continue };
        let n = match v {
            Value::Int(i) if *i >= 0 => json!(i),
            Value::Float(f) if f.is_finite() && *f >= 0.0 => json!(f),
            _ => return Err(format!("{k} must be a non-negative finite number")),
        };
        out.insert(k.to_string(), n);
    }
    Ok((!out.is_empty()).then_some(serde_json::Value::Object(out)))
}

/// The manifest members that make up a round's data budget.
pub const MANIFEST_BUDGET_KEYS: [&str; 4] = [
    "batches",
    "rows",
    "rows_per_batch",
    "continuations_per_state",
];

/// A round's compute budget: the data budget from the manifest (`batches`,
/// `rows`, `rows_per_batch`, `continuations_per_state`) plus the trainer's
/// declared budget, the health file's `"budget"` object (for the
/// simulator: `steps`, `groups_per_step`, `continuations_per_state`,
/// `max_response_tokens`), under `"trainer"` (`null` when absent).
/// Two rounds ran at the same compute when their budgets are equal.
pub fn round_budget(manifest: &Value, health: &Value) -> serde_json::Value {
    let mut data = serde_json::Map::new();
    for k in MANIFEST_BUDGET_KEYS {
        if let Some(v) = manifest.get(k) {
            data.insert(k.to_string(), bat_contract::json::to_serde(v));
        }
    }
    let trainer = health
        .get("budget")
        .filter(|b| b.as_object().is_some())
        .map(bat_contract::json::to_serde)
        .unwrap_or(serde_json::Value::Null);
    json!({"data": data, "trainer": trainer})
}

fn mtime(p: &Path) -> Option<i64> {
    let t = std::fs::metadata(p).ok()?.modified().ok()?;
    t.duration_since(UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs() as i64)
}

/// Build `provenance.json`'s document.
pub(crate) fn build(
    opts: &CommitRoundOptions,
    l: &RoundLayout,
    checked: &CheckedRound,
) -> Result<serde_json::Value, RoundError> {
    let code = match &opts.code_repo {
        Some(p) => Some(code_provenance(p)?),
        None => None,
    };
    let compute = measured_compute(&checked.health).map_err(|reason| {
        RoundError::from(RoundCheck::TrainingHealth {
            path: l.health.clone(),
            reason,
        })
    })?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    Ok(json!({
        "schema_version": 1,
        "artifact_kind": "bat_round_provenance",
        "bat_version": env!("CARGO_PKG_VERSION"),
        "code": code,
        "command_templates": opts.command_templates,
        "timestamps": {
            "recorded_unix": now,
            "training_health_mtime_unix": mtime(&l.health),
            "evaluation_summary_mtime_unix": mtime(&l.eval_dir.join("summary.json")),
        },
        "measured_compute": compute,
        "measured_by_bat": {
            "trainer_wall_seconds": opts.trainer_wall_seconds,
        },
    }))
}
