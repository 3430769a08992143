//! `bat replay`: run recorded rounds again from the ledger's own inputs
//! (`../shared/DESIGN.md` §6), as a reproducibility check (`--verify`) or
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
//! stamps, wall-clock figures, or inputs), not artifacts. With the built-in
//! simulator (both templates start with `{bat} sim`) every artifact must be
//! identical ([`VerifyMode::Exact`]); with external backends the
//! candidate's scores (overall, task, agentic, S1–S5) must agree within a
//! tolerance ([`VerifyMode::Tolerance`]) and differing files are listed.
//! Nothing is committed by a verify.
//!
//! # Fixed compute
//!
//! Each round's budget is [`crate::round::provenance::round_budget`]: the
//! manifest's data budget plus the trainer's declared `"budget"`. An
//! override that changes it (`batches=N`) is refused unless
//! `allow_compute_change`; after training, the replay's budget must equal
//! the original's (same condition). Measured compute (the health file's
//! `"compute"` and the trainer wall time bat measured) is reported for both.

pub mod compare;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use bat_ledger::{CommitId, Ledger, NoProgress, TreeId};

use crate::contract::binding::model_identity;
use crate::contract::json::{self, Value};
use crate::contract::pack::{Pack, PackError};
use crate::contract::prompt::Prompter;
use crate::contract::round::{self as cround, BuildInputs};
use crate::engine::r#loop::{
    loop_metadata, run_round, Campaign, LoopError, LoopState, Mixture, Observer, RoundInputs,
    RunOptions,
};
use crate::round::meta::{self, LoopMeta, RoundMeta};
use crate::round::provenance::{measured_compute, round_budget};
use crate::round::{commit_round, resolve_rev, CommitRoundOptions, ReplayLink, RoundError};

/// Ablation keys `bat replay --ablate KEY=VALUE` understands.
pub const ABLATION_KEYS: [&str; 5] = ["reward", "target", "mixture", "gate", "batches"];
/// Default tolerance of an external backend's verify, per score.
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
    #[error("unknown ablation key `{key}` (known: reward, target, mixture, gate, batches)")]
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
}

/// Check out `commit` into `dest`. In a partial clone the ledger's
/// promisor layer fetches (and verifies) the files its remote keeps.
fn checkout_hydrated(
    ledger: &mut Ledger,
    commit: &CommitId,
    dest: &Path,
) -> Result<(), ReplayError> {
    ledger.checkout(commit, dest, &NoProgress, &AtomicBool::new(false))?;
    Ok(())
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ReplayError + '_ {
    move |source| ReplayError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One override.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ablation {
    /// `reward=terminal`: E2E terminal reward only (`{reward_mode}` =
    /// `terminal` for the trainer); `reward=stage` is the recorded default.
    Reward(String),
    /// `target=S3`: the same S-target every round.
    Target(String),
    /// `mixture=uniform`: round views without an S-target pool
    /// ([`crate::engine::mixture`]).
    MixtureUniform,
    /// `gate=off`: every candidate becomes the next starting checkpoint.
    GateOff,
    /// `batches=N`: a different data budget (changes compute).
    Batches(i64),
}

impl Ablation {
    /// `KEY=VALUE` for records and branch names.
    pub fn pair(&self) -> (String, String) {
        match self {
            Ablation::Reward(v) => ("reward".into(), v.clone()),
            Ablation::Target(v) => ("target".into(), v.clone()),
            Ablation::MixtureUniform => ("mixture".into(), "uniform".into()),
            Ablation::GateOff => ("gate".into(), "off".into()),
            Ablation::Batches(n) => ("batches".into(), n.to_string()),
        }
    }
}

/// Parse `--ablate` arguments (stage names are checked against the pack).
pub fn parse_ablations(args: &[String], pack: &Pack) -> Result<Vec<Ablation>, ReplayError> {
    let k = pack.contract()?;
    let mut out: Vec<Ablation> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for a in args {
        let (key, value) = a
            .split_once('=')
            .ok_or_else(|| ReplayError::AblationSyntax { given: a.clone() })?;
        let bad = |expected: &str| ReplayError::BadAblationValue {
            key: key.to_string(),
            value: value.to_string(),
            expected: expected.to_string(),
        };
        let ab = match key {
            "reward" => match value {
                "terminal" | "stage" => Ablation::Reward(value.to_string()),
                _ => return Err(bad("reward=terminal or reward=stage")),
            },
            "target" => {
                if k.stages.iter().any(|s| s == value) {
                    Ablation::Target(value.to_string())
                } else {
                    return Err(bad(&format!("one of {}", k.stages.join(", "))));
                }
            }
            "mixture" => match value {
                "uniform" => Ablation::MixtureUniform,
                _ => return Err(bad("mixture=uniform")),
            },
            "gate" => match value {
                "off" => Ablation::GateOff,
                _ => return Err(bad("gate=off")),
            },
            "batches" => match value.parse::<i64>() {
                Ok(n) if n >= 1 => Ablation::Batches(n),
                _ => return Err(bad("a whole number ≥ 1")),
            },
            _ => {
                return Err(ReplayError::UnknownAblation {
                    key: key.to_string(),
                })
            }
        };
        if !seen.insert(key.to_string()) {
            return Err(ReplayError::DuplicateAblation {
                key: key.to_string(),
            });
        }
        out.push(ab);
    }
    Ok(out)
}

/// The default replay branch: `replay/<short-id>[-<key>-<value>…]`.
pub fn default_branch(first: &CommitId, ablations: &[Ablation]) -> String {
    let mut name = format!("replay/{}", first.0.short());
    for a in ablations {
        let (k, v) = a.pair();
        name.push_str(&format!("-{k}-{v}"));
    }
    name
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
    /// Per-score tolerance of an external backend's verify.
    pub tolerance: f64,
    /// Placeholder values to use instead of the recorded ones, applied only
    /// to placeholders the recorded campaign has (for example `{bat}`, the
    /// path of the running binary).
    pub placeholder_overrides: Vec<(String, String)>,
    /// A new folder for the replay's work files (round folders, inputs,
    /// child logs).
    pub work_dir: PathBuf,
    /// Author of the replay commits.
    pub author: String,
}

/// How a verify compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VerifyMode {
    /// Every artifact bit for bit (the built-in simulator).
    Exact,
    /// Scores within a tolerance (external backends).
    Tolerance,
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
    /// Whether the round reproduced.
    pub passed: bool,
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
    pub original_gate_status: String,
    /// The replay's gate status.
    pub gate_status: String,
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
    /// The round folder of the replay.
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

/// A round commit to replay, with what was read from it.
struct Original {
    commit: CommitId,
    parent: Option<CommitId>,
    tree: TreeId,
    meta: RoundMeta,
    round_id: String,
}

/// The round metadata of a commit, through the one reader.
fn round_meta(
    id: &CommitId,
    metadata: &serde_json::Value,
) -> Result<Option<RoundMeta>, ReplayError> {
    meta::read(metadata).map_err(|e| ReplayError::BadRecord {
        commit: id.to_string(),
        reason: e.to_string(),
    })
}

fn read_original(ledger: &Ledger, id: CommitId, rev: &str) -> Result<Original, ReplayError> {
    let c = ledger.read_commit(&id)?;
    let Some(m) = round_meta(&id, &c.metadata)? else {
        return Err(ReplayError::NotARound {
            rev: rev.to_string(),
        });
    };
    Ok(Original {
        commit: id,
        parent: c.parents.first().copied(),
        tree: c.tree,
        round_id: m.round_id.clone(),
        meta: m,
    })
}

/// Resolve `REV` or `A..B` to the round commits to replay, oldest first.
fn plan(ledger: &Ledger, rev: &str) -> Result<Vec<Original>, ReplayError> {
    let resolve =
        |r: &str| resolve_rev(ledger, r).map_err(|_| ReplayError::NotARound { rev: r.to_string() });
    let Some((from, to)) = rev.split_once("..") else {
        let id = resolve(rev)?;
        return Ok(vec![read_original(ledger, id, rev)?]);
    };
    let a = resolve(from)?;
    let b = resolve(to)?;
    read_original(ledger, a, from)?;
    read_original(ledger, b, to)?;
    let mut out = Vec::new();
    let mut cur = Some(b);
    while let Some(id) = cur {
        let c = ledger.read_commit(&id)?;
        if meta::round_id_of(&c.metadata).is_some() {
            out.push(read_original(ledger, id, &id.to_string())?);
        }
        if id == a {
            out.reverse();
            return Ok(out);
        }
        cur = c.parents.first().copied();
    }
    Err(ReplayError::NotAncestor {
        from: from.to_string(),
        to: to.to_string(),
    })
}

fn tree_file(ledger: &Ledger, tree: &TreeId, path: &str) -> Result<Option<Vec<u8>>, ReplayError> {
    match ledger.lookup_path(tree, path)? {
        Some(e) => Ok(Some(ledger.read_bytes(&e.id)?)),
        None => Ok(None),
    }
}

fn tree_json(ledger: &Ledger, o: &Original, path: &str) -> Result<Value, ReplayError> {
    let bytes = tree_file(ledger, &o.tree, path)?.ok_or_else(|| ReplayError::BadRecord {
        commit: o.commit.to_string(),
        reason: format!("{path} is missing from its tree"),
    })?;
    json::parse_bytes(&bytes).map_err(|e| ReplayError::BadRecord {
        commit: o.commit.to_string(),
        reason: format!("{path} is not valid JSON: {e}"),
    })
}

/// The scores of a summary: `overall`, `task`, `agentic` and the stages.
pub fn summary_scores(summary: &Value) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let num = |v: &Value| match v {
        Value::Int(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        _ => None,
    };
    if let Some(m) = summary.get("means").and_then(Value::as_object) {
        for k in ["overall", "task", "agentic"] {
            if let Some(x) = m.get(k).and_then(num) {
                out.insert(k.to_string(), x);
            }
        }
    }
    if let Some(s) = summary.get("stage_scores").and_then(Value::as_object) {
        for (k, v) in s.iter() {
            if let Some(x) = num(v) {
                out.insert(k.clone(), x);
            }
        }
    }
    out
}

/// Whether an argv template runs the built-in simulator (`{bat} sim …`).
pub fn is_simulator(template: &[String]) -> bool {
    template.first().map(String::as_str) == Some("{bat}")
        && template.get(1).map(String::as_str) == Some("sim")
}

fn campaign_of(o: &Original) -> Result<(Campaign, &LoopMeta), ReplayError> {
    let lm = o
        .meta
        .loop_meta
        .as_ref()
        .ok_or_else(|| ReplayError::NotReplayable {
            round_id: o.round_id.clone(),
            commit: o.commit.to_string(),
        })?;
    Ok((lm.campaign.clone(), lm))
}

/// The original's compute side, from its tree.
fn original_compute(ledger: &Ledger, o: &Original) -> Result<ComputeSide, ReplayError> {
    let manifest = tree_json(ledger, o, "data/manifest.json")?;
    let health = tree_json(ledger, o, "training-health.json")?;
    let prov = tree_file(ledger, &o.tree, "provenance.json")?
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .unwrap_or_default();
    Ok(ComputeSide {
        budget: round_budget(&manifest, &health),
        measured: measured_compute(&health)
            .ok()
            .flatten()
            .unwrap_or(serde_json::Value::Null),
        trainer_wall_seconds: prov
            .get("measured_by_bat")
            .and_then(|m| m.get("trainer_wall_seconds"))
            .and_then(serde_json::Value::as_f64),
    })
}

/// The arm's state between rounds of a chain.
struct Arm {
    checkpoint: PathBuf,
    checkpoint_round: Option<String>,
    baseline: Value,
    baseline_file: PathBuf,
    target: String,
}

/// Find a checkpoint folder with identity `sha`: the candidate of a round in
/// the first-parent history from `start`, checked out into `dest_root`, or
/// the campaign's initial checkpoint.
fn find_checkpoint(
    ledger: &mut Ledger,
    start: Option<CommitId>,
    sha: &str,
    initial: &Path,
    dest_root: &Path,
    round_id: &str,
) -> Result<(PathBuf, Option<String>), ReplayError> {
    let mut cur = start;
    while let Some(id) = cur {
        let c = ledger.read_commit(&id)?;
        let found = round_meta(&id, &c.metadata)?
            .filter(|m| m.candidate_checkpoint_sha256 == sha)
            .map(|m| m.round_id);
        if let Some(rid) = found {
            let dest = dest_root.join(format!("{rid}-{}", id.0.short()));
            if !dest.exists() {
                checkout_hydrated(ledger, &id, &dest)?;
            }
            let cand = dest.join("candidate");
            if model_identity(&cand).is_ok_and(|m| m.model_identity_sha256 == sha) {
                return Ok((cand, Some(rid)));
            }
        }
        cur = c.parents.first().copied();
    }
    if initial.is_dir() && model_identity(initial).is_ok_and(|m| m.model_identity_sha256 == sha) {
        return Ok((initial.to_path_buf(), None));
    }
    // The starting checkpoint recorded in the ledger by the campaign.
    if let Some(id) = crate::round::initial::recorded_checkpoint(ledger, sha)? {
        let dest = dest_root.join(format!("initial-{}", id.0.short()));
        if !dest.exists() {
            checkout_hydrated(ledger, &id, &dest)?;
        }
        if model_identity(&dest).is_ok_and(|m| m.model_identity_sha256 == sha) {
            return Ok((dest, None));
        }
    }
    Err(ReplayError::CheckpointUnavailable {
        round_id: round_id.to_string(),
        sha256: sha.to_string(),
    })
}

/// The source grid with the manifest's digest, as a file: the recorded one,
/// else rebuilt from the pack into `inputs`.
fn source_for(
    campaign: &Campaign,
    manifest: &Value,
    pack: &Pack,
    inputs: &Path,
    round_id: &str,
) -> Result<PathBuf, ReplayError> {
    let sha = manifest
        .get("source")
        .and_then(|s| s.get("sha256"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let unavailable = |reason: String| ReplayError::SourceUnavailable {
        round_id: round_id.to_string(),
        sha256: sha.clone(),
        reason,
    };
    if std::fs::read(&campaign.source).is_ok_and(|b| json::sha256_hex(&b) == sha) {
        return Ok(campaign.source.clone());
    }
    let k = pack.contract()?;
    let built =
        crate::contract::source::build_source(&k).map_err(|e| unavailable(e.to_string()))?;
    if json::sha256_hex(&built.jsonl) != sha {
        return Err(unavailable(format!(
            "{} is missing or changed, and the pack's source grid has another digest",
            campaign.source.display()
        )));
    }
    let name = campaign
        .source
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_else(|| crate::contract::source::SOURCE_FILE.into());
    let dir = inputs.join("source");
    std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
    let p = dir.join(name);
    std::fs::write(&p, &built.jsonl).map_err(io_err(&p))?;
    Ok(p)
}

/// Re-materialize the original view and check it against the manifest.
fn check_view(
    pack: &Pack,
    source: &Path,
    manifest: &Value,
    round_id: &str,
) -> Result<(), ReplayError> {
    let k = pack.contract()?;
    let prompter = Prompter::new(&k);
    let bytes = std::fs::read(source).map_err(io_err(source))?;
    let sha = json::sha256_hex(&bytes);
    let name = source
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let target = manifest.get("target_stage").and_then(Value::as_str);
    let batches = match manifest.get("batches") {
        Some(Value::Int(b)) => *b,
        _ => 0,
    };
    let recorded = manifest
        .get("train")
        .and_then(|t| t.get("sha256"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let inputs = BuildInputs {
        source_bytes: &bytes,
        source_file_name: &name,
        source_sha256: &sha,
        round_id,
        target_stage: target,
        prescription: None,
        batches,
        seed: None,
    };
    let built = if crate::engine::mixture::is_uniform_manifest(manifest) {
        crate::engine::mixture::uniform_view(&k, &prompter, &inputs)
    } else {
        cround::materialize(&k, &prompter, &inputs)
    }
    .map_err(LoopError::from)?;
    let rebuilt = json::sha256_hex(&built.train);
    if rebuilt != recorded {
        return Err(ReplayError::ViewMismatch {
            round_id: round_id.to_string(),
            recorded,
            rebuilt,
        });
    }
    Ok(())
}

/// Files of a round folder that are artifacts, relative (see the module
/// docs).
fn artifact_files(root: &Path) -> Result<BTreeMap<String, String>, ReplayError> {
    fn walk(base: &Path, d: &Path, out: &mut BTreeMap<String, String>) -> Result<(), ReplayError> {
        let rd = std::fs::read_dir(d).map_err(io_err(d))?;
        for e in rd {
            let e = e.map_err(io_err(d))?;
            let p = e.path();
            let ft = e.file_type().map_err(io_err(&p))?;
            if ft.is_dir() {
                walk(base, &p, out)?;
            } else if ft.is_file() {
                let rel = p
                    .strip_prefix(base)
                    .map(|r| r.to_string_lossy().replace('\\', "/"))
                    .unwrap_or_default();
                let bytes = std::fs::read(&p).map_err(io_err(&p))?;
                out.insert(rel, bat_ledger::ObjectId::of_bytes(&bytes).to_hex());
            }
        }
        Ok(())
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out)?;
    // The raw evaluator output never enters a commit (its digest does,
    // through the summary and receipt).
    out.remove("candidate-eval/raw-evaluation.json");
    Ok(out)
}

/// bat's own records in a round tree, which are not artifacts.
const NOT_ARTIFACTS: [&str; 4] = [
    "round.json",
    "provenance.json",
    "firewall.json",
    "baseline-summary.json",
];

fn verify_round(
    ledger: &Ledger,
    o: &Original,
    root: &Path,
    mode: VerifyMode,
    tolerance: f64,
    original_scores: &BTreeMap<String, f64>,
    scores: &BTreeMap<String, f64>,
) -> Result<RoundVerify, ReplayError> {
    let mut original = BTreeMap::new();
    for f in ledger.walk_files(&o.tree)? {
        if !NOT_ARTIFACTS.contains(&f.path.as_str()) {
            original.insert(f.path.clone(), f.id.to_hex());
        }
    }
    let replayed = artifact_files(root)?;
    let mut paths: Vec<&String> = original.keys().chain(replayed.keys()).collect();
    paths.sort();
    paths.dedup();
    // Pipeline order: the first difference is the earliest step that
    // diverged (data, training, candidate, its evaluation, the gate).
    let rank = |p: &str| {
        [
            "data/",
            "training-health.json",
            "candidate/",
            "candidate-eval/",
            "gate.json",
            "prescription.json",
        ]
        .iter()
        .position(|pre| p.starts_with(pre))
        .unwrap_or(6)
    };
    paths.sort_by_key(|p| (rank(p), p.to_string()));
    let mut identical = 0;
    let mut differing = Vec::new();
    for p in &paths {
        match (original.get(*p), replayed.get(*p)) {
            (Some(a), Some(b)) if a == b => identical += 1,
            _ => differing.push((*p).clone()),
        }
    }
    let mut max_delta: f64 = 0.0;
    let mut missing_score = false;
    for k in SCORE_KEYS {
        match (original_scores.get(k), scores.get(k)) {
            (Some(a), Some(b)) => max_delta = max_delta.max((a - b).abs()),
            (None, None) => {}
            _ => missing_score = true,
        }
    }
    let passed = match mode {
        VerifyMode::Exact => differing.is_empty(),
        VerifyMode::Tolerance => !missing_score && max_delta <= tolerance,
    };
    Ok(RoundVerify {
        mode,
        compared: paths.len(),
        identical,
        differing,
        max_score_delta: max_delta,
        tolerance: if mode == VerifyMode::Exact {
            0.0
        } else {
            tolerance
        },
        passed,
    })
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ReplayError> {
    crate::fsutil::write_atomic(path, bytes).map_err(io_err(path))
}

fn round_number(rid: &str) -> i64 {
    rid.trim_start_matches('r').parse().unwrap_or(0)
}

/// Replay rounds (see the module docs). A verify commits nothing; otherwise
/// every replayed round is committed to the replay branch before the next
/// one starts.
pub fn replay(
    ledger: &mut Ledger,
    req: &ReplayRequest,
    observer: &mut dyn ReplayObserver,
) -> Result<ReplayReport, ReplayError> {
    if req.verify && !req.ablations.is_empty() {
        return Err(ReplayError::VerifyWithAblation);
    }
    if !req.allow_compute_change {
        if let Some(Ablation::Batches(n)) = req
            .ablations
            .iter()
            .find(|a| matches!(a, Ablation::Batches(_)))
        {
            return Err(ReplayError::ComputeChange {
                key: "batches".into(),
                value: n.to_string(),
                what: "batches × rows per batch is the data budget".into(),
            });
        }
    }
    let originals = plan(ledger, &req.rev)?;
    let first = originals.first().ok_or_else(|| ReplayError::NotARound {
        rev: req.rev.clone(),
    })?;
    let branch = (!req.verify).then(|| {
        req.branch
            .clone()
            .unwrap_or_else(|| default_branch(&first.commit, &req.ablations))
    });
    if let Some(b) = &branch {
        bat_ledger::refs::validate_ref_name(b)?;
        if ledger.list_refs("refs/heads/")?.iter().any(|(n, _)| n == b) {
            return Err(ReplayError::BranchExists { branch: b.clone() });
        }
    }
    // Every round's record and templates are checked before anything runs;
    // each round's source and view are checked just before it runs.
    for o in &originals {
        let (campaign, _) = campaign_of(o)?;
        for a in &req.ablations {
            if let Ablation::Reward(v) = a {
                if !campaign.trainer.iter().any(|t| t == "{reward_mode}") {
                    return Err(ReplayError::TemplateLacks {
                        round_id: o.round_id.clone(),
                        placeholder: "{reward_mode}".into(),
                        key: "reward".into(),
                        value: v.clone(),
                    });
                }
            }
        }
    }
    let w = std::path::absolute(&req.work_dir).map_err(io_err(&req.work_dir))?;
    if w.exists() {
        return Err(ReplayError::WorkExists { path: w });
    }
    let inputs = w.join("inputs");
    let rounds_dir = w.join("rounds");
    let logs = w.join("logs");
    for d in [&inputs, &rounds_dir, &logs] {
        std::fs::create_dir_all(d).map_err(io_err(d))?;
    }
    observer.planned(
        &originals
            .iter()
            .map(|o| o.round_id.clone())
            .collect::<Vec<_>>(),
    );

    let fixed_target = req.ablations.iter().find_map(|a| match a {
        Ablation::Target(t) => Some(t.clone()),
        _ => None,
    });
    let gate_off = req.ablations.contains(&Ablation::GateOff);
    let mixture = if req.ablations.contains(&Ablation::MixtureUniform) {
        Mixture::Uniform
    } else {
        Mixture::ThreePool
    };
    let ablation_pairs: Vec<(String, String)> = req.ablations.iter().map(Ablation::pair).collect();
    let run_id = format!(
        "replay-{}{}",
        first.commit.0.short(),
        if req.verify { "-verify" } else { "" }
    );

    let mut arm: Option<Arm> = None;
    let mut history: Vec<Value> = Vec::new();
    let mut report = Vec::new();
    let mut first_commit = true;
    for o in &originals {
        let (mut campaign, lm) = campaign_of(o)?;
        let pack = Pack::load_or_default(campaign.pack.as_deref())?;
        let manifest = tree_json(ledger, o, "data/manifest.json")?;
        campaign.source = source_for(&campaign, &manifest, &pack, &inputs, &o.round_id)?;
        check_view(&pack, &campaign.source, &manifest, &o.round_id)?;
        // Overrides.
        for (k, v) in &req.placeholder_overrides {
            for (name, value) in campaign.extra_placeholders.iter_mut() {
                if name == k {
                    *value = v.clone();
                }
            }
        }
        for a in &req.ablations {
            match a {
                Ablation::Reward(v) => {
                    let key = "{reward_mode}".to_string();
                    match campaign
                        .extra_placeholders
                        .iter_mut()
                        .find(|(n, _)| *n == key)
                    {
                        Some(slot) => slot.1 = v.clone(),
                        None => campaign.extra_placeholders.push((key, v.clone())),
                    }
                }
                Ablation::Batches(n) => campaign.batches = *n,
                Ablation::Target(_) | Ablation::GateOff | Ablation::MixtureUniform => {}
            }
        }
        let original_summary = tree_json(ledger, o, "candidate-eval/summary.json")?;
        let original_scores = summary_scores(&original_summary);
        let original_compute = original_compute(ledger, o)?;
        // The arm's state: from the original's inputs for the first round.
        let current = match arm.take() {
            Some(a) => a,
            None => {
                let sha = o.meta.trained_from_checkpoint_sha256.clone();
                let (checkpoint, checkpoint_round) = find_checkpoint(
                    ledger,
                    o.parent,
                    &sha,
                    &campaign.initial_checkpoint,
                    &inputs.join("checkpoints"),
                    &o.round_id,
                )?;
                let bytes =
                    tree_file(ledger, &o.tree, "baseline-summary.json")?.ok_or_else(|| {
                        ReplayError::BadRecord {
                            commit: o.commit.to_string(),
                            reason: "baseline-summary.json is missing from its tree".into(),
                        }
                    })?;
                let baseline = json::parse_bytes(&bytes).map_err(|e| ReplayError::BadRecord {
                    commit: o.commit.to_string(),
                    reason: format!("baseline-summary.json: {e}"),
                })?;
                let baseline_file = inputs.join(format!("baseline-{}.summary.json", o.round_id));
                write_file(&baseline_file, &bytes)?;
                Arm {
                    checkpoint,
                    checkpoint_round,
                    baseline,
                    baseline_file,
                    target: o.meta.target_stage.clone(),
                }
            }
        };
        let target = fixed_target.clone().unwrap_or(current.target.clone());
        let root = rounds_dir.join(&o.round_id);
        let run_opts = RunOptions {
            pack: &pack,
            log_dir: Some(&logs),
            run_id: &run_id,
            prune_round_dirs: false,
        };
        let done = run_round(
            &campaign,
            &run_opts,
            &RoundInputs {
                round_id: &o.round_id,
                root: &root,
                starting_checkpoint: &current.checkpoint,
                baseline_summary: &current.baseline,
                target_stage: &target,
                // A round recorded with a uniform view is re-run with one.
                mixture: if crate::engine::mixture::is_uniform_manifest(&manifest) {
                    Mixture::Uniform
                } else {
                    mixture
                },
            },
            observer.loop_observer(),
        )?;
        let replay_manifest = json::parse_bytes(
            &std::fs::read(root.join("data").join(cround::MANIFEST_FILE)).map_err(io_err(&root))?,
        )
        .unwrap_or(Value::Null);
        let compute = ComputeSide {
            budget: round_budget(&replay_manifest, &done.health),
            measured: measured_compute(&done.health)
                .ok()
                .flatten()
                .unwrap_or(serde_json::Value::Null),
            trainer_wall_seconds: Some(done.trainer_wall_seconds),
        };
        let same_budget = compute.budget == original_compute.budget;
        if !same_budget && !req.allow_compute_change {
            return Err(ReplayError::BudgetMismatch {
                round_id: o.round_id.clone(),
                original: original_compute.budget.to_string(),
                replay: compute.budget.to_string(),
            });
        }
        let gate_status = done
            .outcome
            .gate
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        // A verify follows the record's inheritance (a `gate=off` arm
        // inherited held candidates too); a replay decides for itself.
        let recorded_inherited = o.meta.inherited();
        let inherited = if req.verify {
            recorded_inherited
        } else {
            done.outcome.promoted || gate_off
        };
        let scores = summary_scores(&done.candidate_summary);
        let verify = if req.verify {
            let mode = if is_simulator(&campaign.trainer) && is_simulator(&campaign.evaluator) {
                VerifyMode::Exact
            } else {
                VerifyMode::Tolerance
            };
            Some(verify_round(
                ledger,
                o,
                &root,
                mode,
                req.tolerance,
                &original_scores,
                &scores,
            )?)
        } else {
            None
        };
        // The arm after this round.
        let candidate = root.join("candidate");
        let cand_summary_file = root.join("candidate-eval").join("summary.json");
        let next = Arm {
            checkpoint: if inherited {
                candidate.clone()
            } else {
                current.checkpoint.clone()
            },
            checkpoint_round: if inherited {
                Some(o.round_id.clone())
            } else {
                current.checkpoint_round.clone()
            },
            baseline: if inherited {
                done.candidate_summary.clone()
            } else {
                current.baseline.clone()
            },
            baseline_file: if inherited {
                cand_summary_file
            } else {
                current.baseline_file.clone()
            },
            target: done.outcome.target_stage.clone(),
        };
        history.push(Value::Object(
            json::Map::new()
                .with("round_id", o.round_id.as_str())
                .with("target_stage", target.as_str())
                .with("gate_status", gate_status.as_str())
                .with(
                    "candidate_checkpoint_sha256",
                    done.outcome
                        .gate
                        .get("candidate_checkpoint_sha256")
                        .cloned()
                        .unwrap_or(Value::Null),
                ),
        ));
        let commit = match &branch {
            None => None,
            Some(b) => {
                let state = LoopState {
                    completed_rounds: round_number(&o.round_id),
                    current_checkpoint: next.checkpoint.clone(),
                    current_checkpoint_round: next.checkpoint_round.clone(),
                    baseline_summary: next.baseline.clone(),
                    baseline_summary_id: meta::file_object_id(&next.baseline_file)
                        .map_err(io_err(&next.baseline_file))?,
                    initial_summary_id: lm.initial_summary_id(ledger, o.commit).map_err(|e| {
                        ReplayError::BadRecord {
                            commit: o.commit.to_string(),
                            reason: e.to_string(),
                        }
                    })?,
                    target_stage: next.target.clone(),
                    history: history.clone(),
                };
                let meta = loop_metadata(&campaign, &run_id, &state, &[])?;
                let opts = CommitRoundOptions {
                    branch: Some(b.clone()),
                    pack: pack.clone(),
                    command_templates: Some(serde_json::json!({
                        "trainer": campaign.trainer,
                        "evaluator": campaign.evaluator,
                    })),
                    extra_metadata: Some(meta),
                    baseline_summary: Some(current.baseline_file.clone()),
                    author: Some(req.author.clone()),
                    replay: Some(ReplayLink {
                        replay_of: o.commit.to_string(),
                        replay_of_round_id: o.round_id.clone(),
                        ablation: ablation_pairs.clone(),
                        inherited,
                    }),
                    trainer_wall_seconds: Some(done.trainer_wall_seconds),
                    orphan_branch: first_commit && first.parent.is_none(),
                    message: Some(format!(
                        "Replay of round {} ({}){}: {gate_status}{}",
                        o.round_id,
                        target,
                        if ablation_pairs.is_empty() {
                            String::new()
                        } else {
                            format!(
                                " with {}",
                                ablation_pairs
                                    .iter()
                                    .map(|(k, v)| format!("{k}={v}"))
                                    .collect::<Vec<_>>()
                                    .join(",")
                            )
                        },
                        scores
                            .get("overall")
                            .map(|x| format!(" overall {x:.4}"))
                            .unwrap_or_default()
                    )),
                    ..Default::default()
                };
                if first_commit {
                    if let Some(p) = first.parent {
                        ledger.create_branch(b, p)?;
                    }
                }
                let rc = commit_round(ledger, &root, &opts)?;
                first_commit = false;
                Some(rc.commit.to_string())
            }
        };
        let r = RoundReplay {
            round_id: o.round_id.clone(),
            original: o.commit.to_string(),
            commit,
            original_target_stage: o.meta.target_stage.clone(),
            target_stage: target,
            original_gate_status: o.meta.gate_status.clone(),
            gate_status,
            inherited,
            original_scores,
            scores,
            original_compute,
            compute,
            same_budget,
            verify,
            work_dir: root.clone(),
        };
        observer.round_replayed(&r);
        report.push(r);
        arm = Some(next);
    }
    let reproduced = req.verify.then(|| {
        report
            .iter()
            .all(|r| r.verify.as_ref().is_some_and(|v| v.passed))
    });
    Ok(ReplayReport {
        branch,
        ablation: ablation_pairs
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect(),
        verify: req.verify,
        rounds: report,
        reproduced,
    })
}
