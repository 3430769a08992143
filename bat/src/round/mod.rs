//! The round record: a BaT round as a first-class ledger commit
//! (`docs/ARCHITECTURE.md`, step 3 of a round; the metadata schema is in
//! `docs/round-metadata.md`).
//!
//! [`commit_round`] validates a round directory and records it as one commit
//! on a branch, moving `refs/promoted/<branch>` when the gate promoted.
//!
//! # Layouts
//!
//! Two layouts are recognised ([`layout`]):
//!
//! - the reference loop's per-round work folder `W/rNN/`: `data/{train.jsonl,
//!   manifest.json}`, `candidate/` (the model folder), `candidate-eval/
//!   {checkpoint-binding.json, eval-request.json, raw-evaluation.json,
//!   summary.json, receipt.json}`, `gate.json`, `prescription.json`,
//!   `training-health.json`;
//! - bat's own layout, which is what a round commit's tree holds (so a
//!   checked-out round can be committed again): the same files without
//!   `candidate-eval/raw-evaluation.json`, plus `round.json`,
//!   `baseline-summary.json`, `firewall.json` and `provenance.json` (and,
//!   for rounds `bat run` or `bat replay` recorded, the child logs under
//!   `logs/`, which validation does not read and a re-commit leaves out).
//!
//! # What is validated (before anything is written)
//!
//! See [`validate`]: manifest digest, round verification (§C.8 and the
//! dataset verifier), evaluation summary recomputed from the raw evaluation
//! and bound to the recomputed identity of `candidate/`, the firewall scan of
//! `train.jsonl` with held-out markers derived from the evaluation's task
//! ids, and the gate and prescription recomputed byte for byte.
//!
//! # The baseline summary
//!
//! The gate of round n compares the candidate with the last *promoted*
//! summary (§H.5.8). [`commit_round`] takes it from, in order:
//! 1. [`CommitRoundOptions::baseline_summary`] when given;
//! 2. the promoted round of the target branch in the ledger
//!    ([`promoted_round`]): its `candidate-eval/summary.json`;
//! 3. after a revert back to the initial checkpoint, or for the first round:
//!    `ROUND_DIR/baseline-summary.json` (bat's layout), else
//!    `ROUND_DIR/../baseline-eval/summary.json` (the reference work dir).
//!
//! The baseline summary used is committed as `baseline-summary.json`.
//!
//! # Commit metadata (what `bat log --json` returns)
//!
//! `{"kind":"bat_round","round_id","target_stage","next_target_stage",
//! "gate_status","selection_reason","scores":{"overall","task","agentic",
//! "S1".."S5"},"candidate_checkpoint_sha256","starting_checkpoint_sha256",
//! "trained_from_checkpoint_sha256","raw_eval_sha256","raw_eval_blake3",
//! "raw_eval_kept","layout"}` plus [`CommitRoundOptions::loop_meta`]
//! under `"loop"`. `starting_checkpoint_sha256` is the prescription's (the
//! checkpoint the *next* round starts from, as in the reference's
//! `state.json` history); `trained_from_checkpoint_sha256` is the gate's
//! baseline. The scalar members are indexed fields of the catalog, scores as
//! `scores.overall`, `scores.S1`, ….

pub mod campaign;
pub mod check;
pub mod initial;
pub mod layout;
pub mod meta;
pub mod promote;
pub mod provenance;
pub mod record;
pub(crate) mod side;
pub mod steps;
pub mod unique;
pub mod validate;
pub mod view;

use std::path::{Path, PathBuf};

use bat_ledger::{CommitId, Ledger};

use bat_contract::pack::Pack;
use bat_contract::vocabulary::GateStatus;

use crate::Ctx;

pub use check::RoundCheck;
pub use promote::{
    next_starting_checkpoint, promoted_round, resolve_rev, revert_round, reverted_by,
    reverted_rounds, round_commits, PromotedRound, RevertOutcome, RoundInfo, StartingCheckpoint,
    PROMOTED_PREFIX,
};
pub use provenance::{code_provenance, measured_compute, CodeProvenance};

/// How to commit a round directory.
#[derive(Debug, Clone)]
pub struct CommitRoundOptions {
    /// Commit message (default: derived from the round id and gate status).
    pub message: Option<String>,
    /// Branch to commit on (default: the current branch).
    pub branch: Option<String>,
    /// Training-code git repository for provenance (default: none given,
    /// provenance then records `"code": null`).
    pub code_repo: Option<PathBuf>,
    /// Extra held-out markers file for the firewall scan (a JSON array of
    /// strings, as for `bat firewall scan --heldout-markers`).
    pub heldout_markers: Option<PathBuf>,
    /// Keep the raw evaluator output in the private area
    /// (`.bat/private/raw-eval/<blake3>`), never part of a commit tree.
    pub keep_raw_eval: bool,
    /// The benchmark pack.
    pub pack: Pack,
    /// Trainer/evaluator argv templates, recorded in provenance.
    pub command_templates: Option<CommandTemplates>,
    /// What `bat run` and `bat replay` need to continue the campaign,
    /// stored under `"loop"` in the commit metadata.
    pub loop_meta: Option<meta::LoopMeta>,
    /// The baseline summary to gate against (default: see the module docs).
    pub baseline_summary: Option<PathBuf>,
    /// Commit author (default `"unknown"`).
    pub author: Option<String>,
    /// When the round replays another one: the link and the ablation,
    /// recorded in `round.json` (kind `replay`) and the commit metadata.
    pub replay: Option<ReplayLink>,
    /// Wall-clock seconds of the trainer child measured by bat, recorded in
    /// `provenance.json` next to the trainer's own measured compute.
    pub trainer_wall_seconds: Option<f64>,
    /// When `branch` does not exist yet, start it with a root commit
    /// instead of forking from HEAD (a replay of a campaign's first round).
    pub orphan_branch: bool,
    /// The templates' code files and declared environment, recorded in
    /// `provenance.json` (`"code_files"`, `"environment"`).
    pub code_inputs: Option<provenance::CodeInputs>,
}

/// The argv templates a round was trained and evaluated with (recorded in
/// `provenance.json` for replays).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CommandTemplates {
    /// The evaluator's.
    pub evaluator: Vec<String>,
    /// The trainer's.
    pub trainer: Vec<String>,
}

/// What a replayed round records about its original.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ReplayLink {
    /// The replayed round commit (full hex id).
    pub replay_of: String,
    /// Its round id.
    pub replay_of_round_id: String,
    /// The overrides, `KEY=VALUE` in the order given (empty: a plain
    /// reproduction).
    pub ablation: Vec<(String, String)>,
    /// Whether the candidate became the next round's starting checkpoint
    /// (a promotion, or any candidate with `gate=off`).
    pub inherited: bool,
}

impl ReplayLink {
    /// The ablation as one indexed string: `reward=terminal,target=S3`
    /// (empty for none).
    pub fn ablation_text(&self) -> String {
        self.ablation
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl Default for CommitRoundOptions {
    /// Everything unset, with the embedded default pack.
    fn default() -> Self {
        CommitRoundOptions {
            message: None,
            branch: None,
            code_repo: None,
            heldout_markers: None,
            keep_raw_eval: false,
            pack: Pack::default_pack(),
            command_templates: None,
            loop_meta: None,
            baseline_summary: None,
            author: None,
            replay: None,
            trainer_wall_seconds: None,
            orphan_branch: false,
            code_inputs: None,
        }
    }
}

/// What [`commit_round`] recorded. Serialized (serde) as the `--json`
/// result of `bat commit` and the Python binding's: the metadata as
/// stored, and whether the raw evaluation was kept (not where).
#[derive(Debug, Clone, serde::Serialize)]
pub struct RoundCommit {
    /// The new commit.
    pub commit: CommitId,
    /// The round id (`r01`, ...).
    pub round_id: String,
    /// The gate's decision.
    pub gate_status: GateStatus,
    /// The branch ref the commit went to (`refs/heads/<b>`).
    pub refname: String,
    /// The commit metadata as recorded.
    pub metadata: meta::RoundMeta,
    /// Where the raw evaluation was kept (with `keep_raw_eval`).
    #[serde(serialize_with = "serialize_is_some")]
    pub raw_eval_kept: Option<PathBuf>,
    /// Things the caller should tell the user (the library prints nothing),
    /// e.g. a copy of the raw evaluation inside `candidate/`.
    pub warnings: Vec<String>,
}

/// An optional value as whether it is there.
fn serialize_is_some<T, S: serde::Serializer>(v: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_bool(v.is_some())
}

/// Errors of the round record. Validation failures name the check and the
/// file; nothing has been written when one is returned from [`commit_round`].
#[derive(Debug, thiserror::Error)]
pub enum RoundError {
    /// The directory is not a round directory.
    #[error("{dir} is not a round directory: {reason}")]
    NotARound {
        /// The directory.
        dir: PathBuf,
        /// What is missing.
        reason: String,
    },
    /// A file of the round could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A round check failed: the round is refused ([`RoundCheck`] names
    /// the check and the file, and has a hint).
    #[error(transparent)]
    Check(#[from] RoundCheck),
    /// No baseline summary to gate the round against.
    #[error("no baseline summary for round {round_id} in {dir}")]
    NoBaseline {
        /// The round.
        round_id: String,
        /// The round directory.
        dir: PathBuf,
    },
    /// The benchmark pack is unusable.
    #[error("the benchmark pack is unusable: {reason}")]
    Pack {
        /// Why.
        reason: String,
    },
    /// The training-code repository could not be read.
    #[error("cannot read the training-code repository {path}: {reason}")]
    Provenance {
        /// The repository path given.
        path: PathBuf,
        /// libgit2's message.
        reason: String,
    },
    /// A revision is not a round commit.
    #[error("{rev} is not a round commit")]
    NotARoundCommit {
        /// The revision.
        rev: String,
    },
    /// A revert is not possible.
    #[error("cannot revert {rev}: {reason}")]
    CannotRevert {
        /// The revision.
        rev: String,
        /// Why.
        reason: String,
    },
    /// Writing the private raw-evaluation copy or the staging area failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Round metadata (read or handed in) is not valid.
    #[error("{what}: the round metadata is not valid: {reason}")]
    Metadata {
        /// The round or commit.
        what: String,
        /// Why.
        reason: String,
    },
    /// A round id names more than one round commit in HEAD's history (a
    /// ledger that took such a history in before imports refused it).
    #[error(
        "round id {round_id} is ambiguous: HEAD's history holds {} round commits recording it: {}",
        commits.len(),
        short_ids(commits)
    )]
    AmbiguousRoundId {
        /// The round id.
        round_id: String,
        /// The candidates, newest first.
        commits: Vec<bat_ledger::CommitId>,
    },
    /// A fetched history records one round id in more than one round
    /// commit; the fetch was undone.
    #[error(
        "refused {reference}: its history records round {round_id} in {} commits ({}), \
         and a branch records each round id once; no ref was changed",
        commits.len(),
        short_ids(commits)
    )]
    DuplicateRoundId {
        /// The remote's ref that brought it.
        reference: String,
        /// The round id.
        round_id: String,
        /// The round commits recording it, newest first.
        commits: Vec<bat_ledger::CommitId>,
    },
    /// The ledger failed.
    #[error(transparent)]
    Ledger(#[from] bat_ledger::Error),
}

/// Commit ids as a comma list, each shortened to 12 hex digits.
fn short_ids(ids: &[bat_ledger::CommitId]) -> String {
    ids.iter()
        .map(|c| c.to_string().chars().take(12).collect::<String>())
        .collect::<Vec<_>>()
        .join(", ")
}

impl bat_ledger::Diagnostic for RoundError {
    /// Round failures end the command as failures; of a ledger error only
    /// a bad revision is the caller's input, and a cancel an interrupt.
    fn kind(&self) -> bat_ledger::ErrorKind {
        use bat_ledger::ErrorKind;
        match self {
            RoundError::Ledger(
                bat_ledger::Error::UnknownRevision { .. }
                | bat_ledger::Error::AmbiguousPrefix { .. },
            ) => ErrorKind::Usage,
            RoundError::Ledger(bat_ledger::Error::Cancelled) => ErrorKind::Interrupted,
            RoundError::AmbiguousRoundId { .. } => ErrorKind::Usage,
            _ => ErrorKind::User,
        }
    }

    fn hint(&self) -> Option<String> {
        let hint = match self {
            RoundError::Check(c) => return bat_ledger::Diagnostic::hint(c),
            RoundError::NoBaseline { .. } => {
                "pass --baseline-summary F, or keep the work dir's baseline-eval/ next to the round"
            }
            RoundError::NotARound { .. } => "use --plain to record it as a plain directory",
            RoundError::CannotRevert { .. } => {
                "only the branch's current promoted round can be reverted; see `bat log`"
            }
            RoundError::Ledger(bat_ledger::Error::BranchMoved { .. }) => {
                "another commit landed on the branch while the round was validated; commit the round again"
            }
            RoundError::AmbiguousRoundId { .. } => {
                "name the round by its commit id (one of those listed); `bat log` shows both"
            }
            RoundError::DuplicateRoundId { .. } => {
                "the remote's branch was not written by `bat commit` or `bat run`, which refuse a \
                 repeated round id; ask its owner to rewrite the branch"
            }
            RoundError::Ledger(e) => return e.hint(),
            _ => return None,
        };
        Some(hint.to_string())
    }
}

impl RoundError {
    pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RoundError + '_ {
        move |source| RoundError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Validate `dir` as a round and commit it. See the module docs.
///
/// Validation reads everything first; on any failure nothing is written.
/// When the gate promoted, `refs/promoted/<branch>` moves to the commit in
/// the same transaction (compare-and-swap). `ctx` reports the recording's
/// progress; setting its cancel flag stops it before anything is recorded
/// ([`bat_ledger::Error::Cancelled`]).
pub fn commit_round(
    ledger: &mut Ledger,
    dir: &Path,
    opts: &CommitRoundOptions,
    ctx: &Ctx<'_>,
) -> Result<RoundCommit, RoundError> {
    let lay = layout::detect(dir)?;
    let branch = match &opts.branch {
        Some(b) => b.clone(),
        None => current_branch(ledger)?,
    };
    // A round already on the branch is reported as such before validation:
    // validated against the branch's later promoted round, its gate would
    // look recomputed wrongly, which hides the real cause.
    if let Some(round_id) = manifest_round_id(&lay) {
        refuse_recorded_round(ledger, &lay, &branch, &round_id)?;
    }
    let promoted = promoted_round(ledger, &branch)?;
    let checked = validate::validate(ledger, &lay, opts, promoted.as_ref())?;
    refuse_hostile_round(ledger, &lay, &branch, &checked.round_id)?;
    let mut prov = serde_json::to_vec_pretty(&provenance::build(opts, &lay, &checked)?)
        .expect("a JSON value encodes");
    prov.push(b'\n');
    record::record(ledger, &lay, opts, &branch, checked, prov, ctx)
}

/// Refuse a candidate checkpoint that is not well-formed safetensors, and a
/// round id the branch already holds (a second commit of one round would
/// make its history ambiguous).
fn refuse_hostile_round(
    ledger: &Ledger,
    lay: &layout::RoundLayout,
    branch: &str,
    round_id: &str,
) -> Result<(), RoundError> {
    crate::checkpoint::check_model_dir(&lay.candidate).map_err(|e| RoundCheck::Candidate {
        path: e.path.clone(),
        reason: e.reason,
    })?;
    refuse_recorded_round(ledger, lay, branch, round_id)
}

/// The `round_id` of the round's manifest, if it can be read (validation
/// reports an unreadable manifest).
fn manifest_round_id(lay: &layout::RoundLayout) -> Option<String> {
    let bytes = std::fs::read(&lay.manifest).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    Some(v.get("round_id")?.as_str()?.to_string())
}

/// Refuse a round id that a commit on `branch` already records.
fn refuse_recorded_round(
    ledger: &Ledger,
    lay: &layout::RoundLayout,
    branch: &str,
    round_id: &str,
) -> Result<(), RoundError> {
    let Ok(tip) = ledger.resolve(&format!("refs/heads/{branch}")) else {
        return Ok(());
    };
    let same = ledger.commits_with_field(
        "round_id",
        &bat_ledger::FieldValue::Str(round_id.to_string()),
    )?;
    for c in same {
        let on_branch =
            c == tip || bat_ledger::remote::transfer::is_ancestor(ledger, c, tip).unwrap_or(false);
        if on_branch {
            return Err(RoundCheck::RoundId {
                path: lay.dir.clone(),
                round_id: round_id.to_string(),
                branch: branch.to_string(),
                commit: c.to_string(),
            }
            .into());
        }
    }
    Ok(())
}

/// The short name of the branch HEAD is attached to (`HEAD` when detached).
pub(crate) fn current_branch(ledger: &Ledger) -> Result<String, RoundError> {
    Ok(match ledger.head()? {
        bat_ledger::Head::Branch { name, .. } => name
            .strip_prefix("refs/heads/")
            .unwrap_or(&name)
            .to_string(),
        bat_ledger::Head::Detached { .. } => "HEAD".to_string(),
    })
}
