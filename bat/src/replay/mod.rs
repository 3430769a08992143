//! `bat replay`: run recorded rounds again from the ledger's own inputs
//! (`docs/ARCHITECTURE.md`), as a reproducibility check (`--verify`) or
//! as a fixed-compute ablation recorded on a replay branch.
//!
//! # Inputs, all from the ledger
//!
//! For each round commit replayed: the campaign (argv templates, protocol,
//! runtime format, batches, extra placeholders such as `{seed}` and
//! `{reward_mode}`) from its `"loop"` metadata; the source grid (the
//! recorded file when its sha256 still matches the manifest, else rebuilt
//! from the pack and checked against that digest); the round view
//! re-materialized from the source and the recorded recipe (round id,
//! target, batches) and checked against the manifest's `train.sha256`
//! before anything runs; the gate baseline (`baseline-summary.json`); and
//! the starting checkpoint (the round in history whose candidate has the
//! identity the round trained from, checked out of the ledger; or the
//! campaign's initial checkpoint when it still has that identity).
//!
//! # A chain `A..B`
//!
//! Every round commit on the first-parent path from B back to A (both
//! included) is replayed oldest first. The first starts where A started;
//! each later one starts from the replay arm's own inherited checkpoint and
//! gate baseline, and targets the arm's own prescription (unless
//! `target=` fixes it), so an ablation arm evolves on its own.
//!
//! # Verify
//!
//! Without overrides, `verify` compares every artifact the replayed round
//! wrote with the original commit's tree by object id (BLAKE3 of the
//! bytes): `data/`, `candidate/`, `candidate-eval/` (binding, request,
//! summary, receipt), `gate.json`, `prescription.json` and
//! `training-health.json`. `round.json`, `provenance.json`,
//! `firewall.json` and `baseline-summary.json` are bat's records (time
//! stamps, wall-clock figures, or inputs), and the child logs under
//! `logs/` are the run's output, not its results: neither are artifacts.
//! By default, whatever the backend, every artifact must be identical
//! ([`VerifyMode::Exact`]): the first differing one (in pipeline order)
//! fails the round. Accepting differences is explicit: with a tolerance
//! ([`ReplayRequest::tolerance`], [`VerifyMode::Tolerance`]) a round whose
//! candidate scores (overall, task, agentic, S1–S5) all agree within it
//! passes, and its result says it is NOT bit-identical
//! ([`RoundVerify::note`]). Nothing is committed by a verify.
//!
//! # Reverts
//!
//! A chain follows the promoted chain of its history: a `bat revert`
//! commit between two replayed rounds puts the arm back where the reverted
//! round started (checkpoint and gate baseline), as the original campaign
//! continued from there; the next target stays the one prescribed last.
//!
//! # Scratch
//!
//! The work folder (`<ledger>/replays/<id>/` unless named) holds the
//! restored starting checkpoint, the rebuilt inputs, every replayed
//! round's folder (data, candidate checkpoint, evaluation) and the child
//! logs: about one checkpoint per round plus one. While the replay runs it
//! holds a marker ([`crate::retention::REPLAY_MARKER`]) naming this
//! process, so `bat gc` leaves it alone. A folder bat chose is removed when
//! the replay succeeds; after a failure it is kept for inspection (and a
//! later `bat gc` removes it).
//!
//! # Fixed compute
//!
//! Each round's budget is [`crate::round::provenance::round_budget`]: the
//! manifest's data budget plus the trainer's declared `"budget"`. An
//! override that changes it (`batches=N`) is refused unless
//! `allow_compute_change`; after training, the replay's budget must equal
//! the original's (same condition). Measured compute (the health file's
//! `"compute"` and the trainer wall time bat measured) is reported for both.

mod arm;
pub mod code;
pub mod compare;
mod inputs;
mod plan;
mod verify;

pub use plan::{default_branch, default_work_dir, parse_ablations, replay_branch, Ablation};
pub use verify::{is_simulator, summary_scores};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::engine::rounds::{LoopError, Observer};
use crate::round::RoundError;
use bat_contract::pack::PackError;
use bat_contract::vocabulary::GateStatus;

/// Ablation keys `bat replay --ablate KEY=VALUE` understands.
pub const ABLATION_KEYS: [&str; 5] = ["reward", "target", "mixture", "gate", "batches"];
/// A customary per-score tolerance for `--tolerance` with GPU backends
/// (nothing applies it unless asked: a verify is bit-exact by default).
pub const DEFAULT_TOLERANCE: f64 = 0.02;
/// The score keys compared by a tolerance verify (`scores` of a summary).
pub const SCORE_KEYS: [&str; 8] = ["overall", "task", "agentic", "S1", "S2", "S3", "S4", "S5"];

/// A replay failure.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// `--ablate` was not `KEY=VALUE`.
    #[error("ablation `{given}` is not KEY=VALUE")]
    AblationSyntax {
        /// The argument.
        given: String,
    },
    /// An unknown ablation key.
    #[error("unknown ablation key `{key}` (known: reward, target, mixture, gate, batches, seed)")]
    UnknownAblation {
        /// The key.
        key: String,
    },
    /// A value the key does not accept.
    #[error("ablation {key}={value} is not valid: {expected}")]
    BadAblationValue {
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// What is accepted.
        expected: String,
    },
    /// The same key twice.
    #[error("ablation key `{key}` given twice")]
    DuplicateAblation {
        /// The key.
        key: String,
    },
    /// `--verify` with overrides.
    #[error("--verify reproduces a round as recorded; it takes no --ablate overrides")]
    VerifyWithAblation,
    /// A budget-changing override without permission.
    #[error("ablation {key}={value} changes the compute budget ({what}); arms must match")]
    ComputeChange {
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// What changes.
        what: String,
    },
    /// The replayed round's budget differs from the original's.
    #[error(
        "round {round_id}: the replay's budget {replay} differs from the original's {original}"
    )]
    BudgetMismatch {
        /// The round.
        round_id: String,
        /// The original budget (JSON).
        original: String,
        /// The replay's budget (JSON).
        replay: String,
    },
    /// The trainer template cannot take the override.
    #[error("round {round_id}: the recorded trainer template has no {placeholder} placeholder, so {key}={value} cannot be applied")]
    TemplateLacks {
        /// The round.
        round_id: String,
        /// The placeholder needed.
        placeholder: String,
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// REV does not resolve, or is not a round commit.
    #[error("{rev} is not a round commit")]
    NotARound {
        /// The revision.
        rev: String,
    },
    /// A range whose start is not on the first-parent path of its end.
    #[error("{from} is not an ancestor (first parent) of {to}")]
    NotAncestor {
        /// Start.
        from: String,
        /// End.
        to: String,
    },
    /// The round was not recorded by `bat run` (no campaign metadata).
    #[error("round {round_id} ({commit}) was not recorded by `bat run`: its trainer and evaluator templates are unknown")]
    NotReplayable {
        /// The round.
        round_id: String,
        /// The commit.
        commit: String,
    },
    /// The recorded metadata is unusable.
    #[error("round commit {commit}: {reason}")]
    BadRecord {
        /// The commit.
        commit: String,
        /// What is wrong.
        reason: String,
    },
    /// The source grid is neither on disk nor rebuildable with that digest.
    #[error("round {round_id}: the source grid with sha256 {sha256} is not available: {reason}")]
    SourceUnavailable {
        /// The round.
        round_id: String,
        /// The recorded digest.
        sha256: String,
        /// Why.
        reason: String,
    },
    /// The re-materialized view does not have the recorded digest.
    #[error("round {round_id}: the re-materialized round view has sha256 {rebuilt}, the ledger recorded {recorded}")]
    ViewMismatch {
        /// The round.
        round_id: String,
        /// Recorded digest.
        recorded: String,
        /// Rebuilt digest.
        rebuilt: String,
    },
    /// The starting checkpoint cannot be found.
    #[error("round {round_id}: no checkpoint with identity {sha256} in the ledger history or at the campaign's initial checkpoint")]
    CheckpointUnavailable {
        /// The round.
        round_id: String,
        /// The identity.
        sha256: String,
    },
    /// The replay branch exists.
    #[error("branch {branch} already exists")]
    BranchExists {
        /// The branch.
        branch: String,
    },
    /// The work dir exists.
    #[error("replay work dir {} already exists", path.display())]
    WorkExists {
        /// The folder.
        path: PathBuf,
    },
    /// A file operation failed.
    #[error("cannot write or read {}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The pack is unusable.
    #[error(transparent)]
    Pack(#[from] PackError),
    /// Running the round failed.
    #[error(transparent)]
    Loop(#[from] LoopError),
    /// Committing the replayed round failed.
    #[error(transparent)]
    Round(#[from] RoundError),
    /// The ledger failed.
    #[error(transparent)]
    Ledger(#[from] bat_ledger::Error),
    /// The trainer or evaluator of a replayed round failed.
    #[error("round {round_id}: {source}{}", stderr_tail_text(log, tail))]
    ChildFailed {
        /// The round.
        round_id: String,
        /// `trainer` or `evaluator`.
        child: String,
        /// The child's stderr log (kept in the replay's work folder).
        log: PathBuf,
        /// The last lines of that log (empty when it wrote nothing).
        tail: String,
        /// The loop's error (boxed: it is large).
        source: Box<LoopError>,
    },
    /// The tolerance is not a finite number ≥ 0.
    #[error("--tolerance {given} is not a number ≥ 0")]
    BadTolerance {
        /// The value.
        given: f64,
    },
}

/// `; the last lines of its stderr (LOG):\n  …` or a pointer to the log.
fn stderr_tail_text(log: &Path, tail: &str) -> String {
    if tail.trim().is_empty() {
        format!("; it wrote nothing on stderr ({})", log.display())
    } else {
        let body: Vec<String> = tail.lines().map(|l| format!("  | {l}")).collect();
        format!(
            "; the last lines of its stderr ({}):\n{}",
            log.display(),
            body.join("\n")
        )
    }
}

/// The lines of a child's stderr shown when it failed.
pub const STDERR_TAIL_LINES: usize = 20;

/// The last `n` lines of a log file (at most 64 KiB read from its end).
pub(crate) fn tail_of(path: &Path, n: usize) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(64 * 1024);
    if f.seek(SeekFrom::Start(start)).is_err() {
        return String::new();
    }
    let mut buf = Vec::new();
    if f.read_to_end(&mut buf).is_err() {
        return String::new();
    }
    let text = String::from_utf8_lossy(&buf);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

impl bat_ledger::Diagnostic for ReplayError {
    fn kind(&self) -> bat_ledger::ErrorKind {
        use bat_ledger::ErrorKind;
        match self {
            ReplayError::AblationSyntax { .. }
            | ReplayError::UnknownAblation { .. }
            | ReplayError::BadAblationValue { .. }
            | ReplayError::DuplicateAblation { .. }
            | ReplayError::VerifyWithAblation
            | ReplayError::NotARound { .. }
            | ReplayError::NotAncestor { .. }
            | ReplayError::BranchExists { .. }
            | ReplayError::BadTolerance { .. }
            | ReplayError::WorkExists { .. } => ErrorKind::Usage,
            ReplayError::Ledger(bat_ledger::Error::Cancelled) => ErrorKind::Interrupted,
            _ => ErrorKind::User,
        }
    }

    fn hint(&self) -> Option<String> {
        let hint = match self {
            ReplayError::ComputeChange { .. } | ReplayError::BudgetMismatch { .. } => {
                "arms must run at the same compute; pass --allow-compute-change to run it anyway"
            }
            ReplayError::BranchExists { .. } => "name another one with --branch",
            ReplayError::UnknownAblation { .. } | ReplayError::BadAblationValue { .. } => {
                "e.g. --ablate reward=terminal, --ablate target=S3, --ablate mixture=uniform, --ablate gate=off, --ablate seed=1"
            }
            ReplayError::Loop(e) => return e.hint(),
            ReplayError::ChildFailed { log, child, .. } => {
                return Some(format!(
                    "the {child}'s whole output is in {} (stdout beside it)",
                    log.display()
                ))
            }
            ReplayError::Round(e) => return e.hint(),
            ReplayError::Ledger(e) => return e.hint(),
            _ => return None,
        };
        Some(hint.to_string())
    }

    fn code(&self) -> Option<String> {
        match self {
            ReplayError::Loop(e) => e.code(),
            ReplayError::ChildFailed { source, .. } => source.code(),
            ReplayError::Pack(e) => e.code(),
            _ => None,
        }
    }
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ReplayError + '_ {
    move |source| ReplayError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What `bat replay` does.
#[derive(Debug, Clone)]
pub struct ReplayRequest {
    /// `REV` or `A..B`.
    pub rev: String,
    /// The overrides.
    pub ablations: Vec<Ablation>,
    /// Reproduce and compare instead of recording.
    pub verify: bool,
    /// The replay branch (default: [`default_branch`]).
    pub branch: Option<String>,
    /// Allow overrides that change the compute budget.
    pub allow_compute_change: bool,
    /// Accept a verified round that is not bit-identical when every score
    /// is within this of the record (`--tolerance X`). `None`: a verify is
    /// bit-exact, whatever the backend.
    pub tolerance: Option<f64>,
    /// Placeholder values to use instead of the recorded ones, applied only
    /// to placeholders the recorded campaign has (for example `{bat}`, the
    /// path of the running binary).
    pub placeholder_overrides: Vec<(String, String)>,
    /// A new folder for the replay's work files (round folders, inputs,
    /// child logs).
    pub work_dir: PathBuf,
    /// The work folder is bat's own: remove each committed round's folder
    /// once the next round no longer trains from it (its files are in the
    /// replay commit), and the whole work folder once the replay
    /// succeeded. A folder the user named is kept whole.
    pub prune_round_dirs: bool,
    /// Author of the replay commits.
    pub author: String,
}

/// How a verify compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VerifyMode {
    /// Every artifact bit for bit (the default, every backend).
    Exact,
    /// Scores within an explicit tolerance (`--tolerance X`); differing
    /// artifacts are listed and the result says NOT bit-identical.
    Tolerance,
}

/// The wording of a round accepted within a tolerance though its
/// artifacts differ.
pub fn tolerance_note(tolerance: f64) -> String {
    format!("NOT bit-identical; within tolerance {tolerance}")
}

/// A verify's result for one round.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RoundVerify {
    /// How it compared.
    pub mode: VerifyMode,
    /// Artifacts compared.
    pub compared: usize,
    /// Of which identical.
    pub identical: usize,
    /// Paths that differ (or exist on one side only), in pipeline order (data, training health,
    /// candidate, its evaluation, gate, prescription).
    pub differing: Vec<String>,
    /// The largest |Δ| over the compared scores.
    pub max_score_delta: f64,
    /// The tolerance applied (`0` in exact mode).
    pub tolerance: f64,
    /// Whether every artifact is identical.
    pub bit_identical: bool,
    /// Whether the round reproduced (bit for bit, or within the tolerance
    /// asked for).
    pub passed: bool,
    /// Set when the round passed only within the tolerance:
    /// `NOT bit-identical; within tolerance X` ([`tolerance_note`]).
    pub note: Option<String>,
}

/// Compute figures of one round, side by side.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ComputeSide {
    /// The budget ([`round_budget`]).
    pub budget: serde_json::Value,
    /// The trainer's measured compute (`steps`, `rollouts`,
    /// `generated_tokens`, …), `null` when it reported none.
    pub measured: serde_json::Value,
    /// Trainer wall seconds measured by bat (`null` when not recorded).
    pub trainer_wall_seconds: Option<f64>,
}

/// One replayed round.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RoundReplay {
    /// The round id.
    pub round_id: String,
    /// The original commit.
    pub original: String,
    /// The replay commit (`None` for a verify).
    pub commit: Option<String>,
    /// The original's target stage.
    pub original_target_stage: String,
    /// The replay's target stage.
    pub target_stage: String,
    /// The original's gate status.
    pub original_gate_status: GateStatus,
    /// The replay's gate status.
    pub gate_status: GateStatus,
    /// Whether the replay's candidate is the arm's next starting point.
    pub inherited: bool,
    /// The original candidate's scores.
    pub original_scores: BTreeMap<String, f64>,
    /// The replay candidate's scores.
    pub scores: BTreeMap<String, f64>,
    /// The original's compute.
    pub original_compute: ComputeSide,
    /// The replay's compute.
    pub compute: ComputeSide,
    /// Whether the budgets are equal.
    pub same_budget: bool,
    /// The verify result.
    pub verify: Option<RoundVerify>,
    /// The round folder of the replay. With
    /// [`ReplayRequest::prune_round_dirs`] it is removed once committed and
    /// no longer trained from (the commit holds its files).
    pub work_dir: PathBuf,
}

/// What a replay did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReplayReport {
    /// The replay branch (`None` for a verify).
    pub branch: Option<String>,
    /// The overrides as `KEY=VALUE`.
    pub ablation: Vec<String>,
    /// Whether this was a verify.
    pub verify: bool,
    /// The rounds, oldest first.
    pub rounds: Vec<RoundReplay>,
    /// For a verify: every round reproduced.
    pub reproduced: Option<bool>,
    /// For a verify: every round bit for bit.
    pub bit_identical: Option<bool>,
    /// For a verify that passed though some round is not bit-identical:
    /// `NOT bit-identical; within tolerance X`.
    pub note: Option<String>,
    /// The work folder: `None` once removed (a successful replay in a
    /// folder bat chose).
    pub work_dir: Option<PathBuf>,
}

/// Progress of a replay.
pub trait ReplayObserver {
    /// The rounds that will be replayed, oldest first.
    fn planned(&mut self, round_ids: &[String]);
    /// A round finished (and was recorded unless verifying).
    fn round_replayed(&mut self, round: &RoundReplay);
    /// Where the loop's own progress events and child output go.
    fn loop_observer(&mut self) -> &mut dyn Observer;
}

/// Replay rounds (see the module docs). A verify commits nothing; otherwise
/// every replayed round is committed to the replay branch before the next
/// one starts. `ctx` reports the checkouts of starting checkpoints and the
/// round commits, and stops them at a safe point when its flag is set.
///
/// The work folder is marked as in progress while the replay runs; a
/// folder bat chose ([`ReplayRequest::prune_round_dirs`]) is removed when
/// the replay succeeds and kept (unmarked) when it fails.
pub fn replay(
    ledger: &mut bat_ledger::Ledger,
    req: &ReplayRequest,
    observer: &mut dyn ReplayObserver,
    ctx: &crate::Ctx<'_>,
) -> Result<ReplayReport, ReplayError> {
    if let Some(t) = req.tolerance {
        if !t.is_finite() || t < 0.0 {
            return Err(ReplayError::BadTolerance { given: t });
        }
    }
    let plan = plan::prepare(ledger, req)?;
    let work = plan
        .inputs
        .parent()
        .expect("the inputs folder is inside the work folder")
        .to_path_buf();
    let mut marker = crate::retention::ReplayMarker::for_current_process(&req.rev);
    marker.write(&work).map_err(io_err(&work))?;
    let result = replay_rounds(ledger, req, &plan, observer, ctx);
    // Ended either way: what is left is for inspection (`bat gc` may go).
    marker.ended = true;
    let _ = marker.write(&work);
    let mut report = result?;
    let success = report.reproduced != Some(false);
    if success && req.prune_round_dirs {
        std::fs::remove_dir_all(&work).map_err(io_err(&work))?;
    } else {
        report.work_dir = Some(work);
    }
    Ok(report)
}

/// The rounds a revert commit on the first-parent path from `o`'s parent
/// down to (not including) `prev` undid, oldest revert first.
fn reverts_between(
    ledger: &bat_ledger::Ledger,
    o: &plan::Original,
    prev: bat_ledger::CommitId,
) -> Result<Vec<String>, ReplayError> {
    let mut out = Vec::new();
    let mut cur = o.parent;
    while let Some(id) = cur {
        if id == prev {
            break;
        }
        let c = ledger.read_commit(&id)?;
        if c.metadata.get("kind").and_then(serde_json::Value::as_str) == Some("bat_revert") {
            if let Some(r) = c
                .metadata
                .get("reverts")
                .and_then(serde_json::Value::as_str)
            {
                out.push(r.to_string());
            }
        }
        cur = c.parents.first().copied();
    }
    out.reverse();
    Ok(out)
}

fn replay_rounds(
    ledger: &mut bat_ledger::Ledger,
    req: &ReplayRequest,
    plan: &plan::ReplayPlan,
    observer: &mut dyn ReplayObserver,
    ctx: &crate::Ctx<'_>,
) -> Result<ReplayReport, ReplayError> {
    observer.planned(
        &plan
            .originals
            .iter()
            .map(|o| o.round_id.clone())
            .collect::<Vec<_>>(),
    );
    // The reverts before each round (by original commit), found up front:
    // with any, the arm may go back to an older round's folder, so none is
    // pruned before the end.
    let mut reverts = Vec::with_capacity(plan.originals.len());
    let mut prev: Option<bat_ledger::CommitId> = None;
    for o in &plan.originals {
        reverts.push(match prev {
            Some(p) => reverts_between(ledger, o, p)?,
            None => Vec::new(),
        });
        prev = Some(o.commit);
    }
    let prune = req.prune_round_dirs && reverts.iter().all(Vec::is_empty);
    let mut arm: Option<arm::Arm> = None;
    // Where each replayed round started, by original commit.
    let mut started: BTreeMap<String, arm::Arm> = BTreeMap::new();
    let mut history = Vec::new();
    let mut rounds = Vec::new();
    for (o, undone) in plan.originals.iter().zip(&reverts) {
        // A stop requested while the previous round was being recorded
        // ends the replay here, before anything of this round runs.
        if let Some(signal) = observer.loop_observer().stop_signal() {
            return Err(LoopError::Interrupted {
                round_id: o.round_id.clone(),
                signal,
            }
            .into());
        }
        for r in undone {
            arm = match (arm.take(), started.get(r)) {
                // Back where the reverted round started; the next target
                // is the one prescribed last, as in the original run.
                (Some(cur), Some(before)) => Some(before.clone().with_target(cur.target)),
                // A round outside the chain was reverted: start from the
                // checkpoint the original round recorded.
                _ => None,
            };
        }
        let out = arm::replay_round(
            ledger,
            req,
            plan,
            o,
            arm.take(),
            &mut history,
            observer,
            ctx,
        )?;
        observer.round_replayed(&out.round);
        if prune && out.round.commit.is_some() {
            crate::engine::rounds::prune_round_dirs(
                &plan.rounds_dir,
                out.next.checkpoint_round.as_deref(),
            )?;
        }
        started.insert(o.commit.to_string(), out.started);
        rounds.push(out.round);
        arm = Some(out.next);
    }
    let reproduced = req.verify.then(|| {
        rounds
            .iter()
            .all(|r| r.verify.as_ref().is_some_and(|v| v.passed))
    });
    let bit_identical = req.verify.then(|| {
        rounds
            .iter()
            .all(|r| r.verify.as_ref().is_some_and(|v| v.bit_identical))
    });
    let note = match (reproduced, bit_identical, req.tolerance) {
        (Some(true), Some(false), Some(t)) => Some(tolerance_note(t)),
        _ => None,
    };
    Ok(ReplayReport {
        branch: plan.branch.clone(),
        ablation: plan
            .ablation_pairs
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect(),
        verify: req.verify,
        rounds,
        reproduced,
        bit_identical,
        note,
        work_dir: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_failure_shows_the_tail_of_its_stderr_and_the_log() {
        let dir = tempfile::tempdir().expect("tmp");
        let log = dir.path().join("trainer.stderr");
        let lines: Vec<String> = (1..=30).map(|i| format!("line {i}")).collect();
        std::fs::write(&log, lines.join("\n")).expect("write");
        let tail = tail_of(&log, STDERR_TAIL_LINES);
        assert_eq!(tail.lines().count(), STDERR_TAIL_LINES);
        assert!(
            tail.starts_with("line 11\n") && tail.ends_with("line 30"),
            "{tail}"
        );
        let e = ReplayError::ChildFailed {
            round_id: "r02".into(),
            child: "trainer".into(),
            log: log.clone(),
            tail,
            source: Box::new(LoopError::TrainerFailed {
                round_id: "r02".into(),
                rc: 2,
            }),
        };
        let text = e.to_string();
        assert!(
            text.starts_with("round r02: the trainer exited with status 2"),
            "{text}"
        );
        assert!(text.contains(&log.display().to_string()), "{text}");
        assert!(text.contains("  | line 30"), "{text}");
        assert!(!text.contains("line 10\n"), "{text}");
        use bat_ledger::Diagnostic;
        assert_eq!(e.code().as_deref(), Some("trainer_failed:r02:2"));
        // Nothing on stderr: said so, with the path.
        let empty = stderr_tail_text(&log, "");
        assert!(empty.contains("wrote nothing on stderr"), "{empty}");
    }
}
