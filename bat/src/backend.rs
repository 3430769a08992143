//! Setting up a `bat run` campaign from typed inputs: the backend choice
//! (external command templates or the embedded simulator, made into the
//! finished [`Campaign`] the engine runs; the engine knows neither),
//! run ids, the `.bat/runs/<run-id>/` layout, a fresh campaign (external
//! commands or the embedded simulator), a resumed one (from the ledger's
//! last round), and the options every round is committed with.
//!
//! Layout of one run under the ledger directory:
//! `runs/<run-id>/work` (the work dir unless `--work-dir` is given),
//! `runs/<run-id>/logs/<round>/{trainer,evaluator}.{stdout,stderr}` (until
//! the round's commit, which holds them under `logs/`, is durable),
//! `runs/<run-id>/restore` (a resume's restored files) and
//! `runs/<run-id>/sim-setup` (the simulator's generated inputs).

use std::path::{Path, PathBuf};

use bat_ledger::Ledger;

use crate::engine::resume::{find_last_round, prepare_resume_with, ResumeError, ResumeOptions};
use crate::engine::rounds::{prepare_fresh, LoopError, Start};
use crate::round::campaign::Campaign;
use crate::round::campaign::BAT_PLACEHOLDER;
use crate::round::meta::LoopMeta;
use crate::round::{CommandTemplates, CommitRoundOptions};
use crate::sim;
use crate::Ctx;
use bat_contract::pack::{Pack, PackError};
use bat_contract::vocabulary::RewardMode;

/// Batches (of 8 rows) per round of the command backend: the contract's.
pub use bat_contract::round::DEFAULT_BATCHES;

/// Which trainer/evaluator pair drives the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// External argv templates (--trainer, --evaluator).
    Command,
    /// The embedded simulator (`bat sim train|evaluate` children).
    Sim,
}

/// Where a ledger keeps its runs' files (`<ledger>/runs`).
#[derive(Debug, Clone)]
pub struct RunsLayout {
    root: PathBuf,
}

impl RunsLayout {
    /// The layout of the ledger whose `.bat` directory is `ledger_dir`.
    pub fn new(ledger_dir: &Path) -> Self {
        RunsLayout {
            root: ledger_dir.join("runs"),
        }
    }

    /// `runs/<run-id>`.
    pub fn run_dir(&self, run_id: &str) -> PathBuf {
        self.root.join(run_id)
    }

    /// The default work dir of a run.
    pub fn work_dir(&self, run_id: &str) -> PathBuf {
        self.run_dir(run_id).join("work")
    }

    /// Child output logs of a run.
    pub fn log_dir(&self, run_id: &str) -> PathBuf {
        self.run_dir(run_id).join("logs")
    }

    /// Where a resume restores the recorded inputs.
    pub fn restore_dir(&self, run_id: &str) -> PathBuf {
        self.run_dir(run_id).join("restore")
    }

    /// The simulator's generated inputs.
    pub fn sim_setup_dir(&self, run_id: &str) -> PathBuf {
        self.run_dir(run_id).join("sim-setup")
    }

    /// Whether the recorded campaign's work dir is bat's own
    /// (`runs/<run-id>/work`), whose committed round folders are removed.
    pub fn owns_work_dir(&self, l: &LoopMeta) -> bool {
        let root = std::fs::canonicalize(&self.root).unwrap_or_else(|_| self.root.clone());
        l.campaign.work_dir == root.join(&l.run_id).join("work")
    }
}

/// A new run id: Unix seconds and the process id (unique per ledger in
/// practice: two runs would need the same second and pid).
pub fn new_run_id(unix_secs: u64, pid: u32) -> String {
    format!("{unix_secs}-{pid}")
}

/// The inputs of a fresh campaign (`bat run` without `--resume`).
#[derive(Debug, Clone)]
pub struct FreshRequest {
    /// The backend.
    pub backend: Backend,
    /// The source grid (command backend).
    pub source: Option<PathBuf>,
    /// The starting model folder (command backend).
    pub initial_checkpoint: Option<PathBuf>,
    /// Trainer argv template (command backend).
    pub trainer: Option<Vec<String>>,
    /// Evaluator argv template (command backend).
    pub evaluator: Option<Vec<String>>,
    /// Evaluation protocol id (command backend).
    pub protocol_id: Option<String>,
    /// Runtime tool format (command backend).
    pub runtime_tool_format: Option<String>,
    /// Rounds.
    pub rounds: i64,
    /// Batches per round (default by backend).
    pub batches: Option<i64>,
    /// Benchmark pack file (command backend; default the embedded one).
    pub pack: Option<PathBuf>,
    /// The work dir (default `runs/<run-id>/work`).
    pub work_dir: Option<PathBuf>,
    /// The branch rounds are committed to.
    pub branch: Option<String>,
    /// The campaign seed (`{seed}` of the templates; the simulator's
    /// initial policy, rollouts and draws). `None`: 0.
    pub seed: Option<u64>,
    /// The reward mode (`None`: [`RewardMode::Stage`]).
    pub reward_mode: Option<RewardMode>,
    /// The bat binary the simulator backend runs as its children.
    pub bat_exe: Option<PathBuf>,
}

/// A campaign ready for [`crate::engine::rounds::run_loop`].
#[derive(Debug)]
pub struct PlannedRun {
    /// The campaign (paths absolute).
    pub campaign: Campaign,
    /// The run id.
    pub run_id: String,
    /// Fresh, or resumed after the recorded state.
    pub start: Start,
    /// Remove committed round folders from the work dir (bat owns it).
    pub prune_round_dirs: bool,
    /// A resume that follows the promoted ref after a revert: what the next
    /// round starts from (for the progress output).
    pub followed_promoted: Option<String>,
}

/// Why a campaign could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum CampaignError {
    /// A command-backend argument is missing.
    #[error("missing required argument {flag}")]
    MissingArgument {
        /// The flag.
        flag: &'static str,
    },
    /// An argument the simulator makes itself was given.
    #[error("{flag} cannot be used with --backend sim")]
    NotWithSim {
        /// The flag.
        flag: &'static str,
    },
    /// `--reward-mode` is not `stage` or `terminal`.
    #[error("{0}")]
    RewardMode(bat_contract::vocabulary::UnknownWord),
    /// `--reward-mode` without a `{reward_mode}` in the trainer template.
    #[error("--reward-mode needs a {{reward_mode}} element in the --trainer template")]
    RewardModeUnused,
    /// The simulator needs the path of the bat binary.
    #[error("cannot find the bat binary to run the simulator")]
    NoBatBinary,
    /// The branch has no round committed by `bat run`.
    #[error("no round committed by `bat run` on {rev}; nothing to resume")]
    NothingToResume {
        /// The branch or revision.
        rev: String,
    },
    /// The loop refused the campaign.
    #[error(transparent)]
    Loop(#[from] LoopError),
    /// Resuming failed.
    #[error(transparent)]
    Resume(#[from] ResumeError),
    /// The simulator's setup failed.
    #[error(transparent)]
    Sim(#[from] sim::SimError),
    /// The benchmark pack does not load.
    #[error(transparent)]
    Pack(#[from] PackError),
}

impl bat_ledger::Diagnostic for CampaignError {
    fn kind(&self) -> bat_ledger::ErrorKind {
        match self {
            CampaignError::MissingArgument { .. }
            | CampaignError::NotWithSim { .. }
            | CampaignError::RewardMode(_)
            | CampaignError::RewardModeUnused => bat_ledger::ErrorKind::Usage,
            _ => bat_ledger::ErrorKind::User,
        }
    }

    fn hint(&self) -> Option<String> {
        let hint = match self {
            CampaignError::MissingArgument { .. } => {
                "give all campaign arguments, or --resume to continue one"
            }
            CampaignError::NotWithSim { .. } => {
                "the simulator makes its own source grid, initial policy and templates from the embedded pack"
            }
            CampaignError::NothingToResume { .. } => {
                "start the campaign with `bat run` (without --resume)"
            }
            CampaignError::Loop(e) => return e.hint(),
            CampaignError::Resume(e) => return e.hint(),
            _ => return None,
        };
        Some(hint.to_string())
    }

    fn code(&self) -> Option<String> {
        match self {
            CampaignError::Loop(e) => e.code(),
            CampaignError::Resume(e) => e.code(),
            CampaignError::Pack(e) => e.code(),
            _ => None,
        }
    }
}

fn need<T: Clone>(v: &Option<T>, flag: &'static str) -> Result<T, CampaignError> {
    v.clone().ok_or(CampaignError::MissingArgument { flag })
}

/// Set up a fresh campaign with run id `run_id`.
pub fn plan_fresh(
    req: &FreshRequest,
    layout: &RunsLayout,
    run_id: String,
) -> Result<PlannedRun, CampaignError> {
    let raw = match req.backend {
        Backend::Sim => sim_campaign(req, layout, &run_id)?,
        Backend::Command => command_campaign(req, layout, &run_id)?,
    };
    Ok(PlannedRun {
        campaign: prepare_fresh(&raw)?,
        run_id,
        start: Start::Fresh,
        prune_round_dirs: req.work_dir.is_none(),
        followed_promoted: None,
    })
}

fn command_campaign(
    req: &FreshRequest,
    layout: &RunsLayout,
    run_id: &str,
) -> Result<Campaign, CampaignError> {
    let trainer = need(&req.trainer, "--trainer")?;
    let evaluator = need(&req.evaluator, "--evaluator")?;
    // `{seed}` is the campaign's own field (`Campaign::seed`), substituted
    // through `Campaign::placeholder_values`.
    let extra_placeholders =
        reward_mode_placeholder(&trainer, &evaluator, req.reward_mode.unwrap_or_default())?;
    Ok(Campaign {
        source: need(&req.source, "--source")?,
        initial_checkpoint: need(&req.initial_checkpoint, "--initial-checkpoint")?,
        work_dir: req
            .work_dir
            .clone()
            .unwrap_or_else(|| layout.work_dir(run_id)),
        trainer,
        evaluator,
        protocol_id: need(&req.protocol_id, "--protocol-id")?,
        runtime_tool_format: need(&req.runtime_tool_format, "--runtime-tool-format")?,
        rounds: req.rounds,
        batches: req.batches.unwrap_or(DEFAULT_BATCHES),
        pack: req.pack.clone(),
        extra_placeholders,
        branch: req.branch.clone(),
        seed: Some(req.seed.unwrap_or(0)),
    })
}

/// The simulator campaign of `bat run --backend sim`.
fn sim_campaign(
    req: &FreshRequest,
    layout: &RunsLayout,
    run_id: &str,
) -> Result<Campaign, CampaignError> {
    let given = [
        (req.source.is_some(), "--source"),
        (req.initial_checkpoint.is_some(), "--initial-checkpoint"),
        (req.trainer.is_some(), "--trainer"),
        (req.evaluator.is_some(), "--evaluator"),
        (req.protocol_id.is_some(), "--protocol-id"),
        (req.runtime_tool_format.is_some(), "--runtime-tool-format"),
        (req.pack.is_some(), "--pack"),
    ];
    if let Some((_, flag)) = given.iter().find(|(set, _)| *set) {
        return Err(CampaignError::NotWithSim { flag });
    }
    let reward_mode = req.reward_mode.unwrap_or_default();
    Ok(sim::prepare_campaign(&sim::SimCampaign {
        setup_dir: layout.sim_setup_dir(run_id),
        work_dir: req
            .work_dir
            .clone()
            .unwrap_or_else(|| layout.work_dir(run_id)),
        bat: req.bat_exe.clone().ok_or(CampaignError::NoBatBinary)?,
        rounds: req.rounds,
        batches: req.batches.unwrap_or(sim::DEFAULT_BATCHES),
        seed: req.seed.unwrap_or(sim::DEFAULT_SEED),
        reward_mode,
        learning_rate: sim::policy::DEFAULT_LEARNING_RATE,
        branch: req.branch.clone(),
    })?)
}

/// `{reward_mode}` of a command campaign: recorded (default `stage`) when
/// the trainer (or evaluator) template uses it, and substituted in every
/// round of `bat run` as in replays, so that `bat replay --ablate
/// reward=terminal` has a value to override and a verify re-runs the same
/// one; `--reward-mode` without the placeholder would be silently ignored,
/// so it is refused.
fn reward_mode_placeholder(
    trainer: &[String],
    evaluator: &[String],
    mode: RewardMode,
) -> Result<Vec<(String, String)>, CampaignError> {
    if trainer
        .iter()
        .chain(evaluator)
        .any(|t| t == "{reward_mode}")
    {
        return Ok(vec![("{reward_mode}".into(), mode.as_str().into())]);
    }
    if mode != RewardMode::Stage {
        return Err(CampaignError::RewardModeUnused);
    }
    Ok(Vec::new())
}

/// Continue the campaign of the last round `bat run` committed on `rev`.
/// `bat_exe` replaces the recorded `{bat}` placeholder (a resumed
/// simulator campaign runs this binary, wherever it is now); `branch`, when
/// given, overrides the recorded branch; `rounds`, when given, replaces the
/// recorded number of rounds (extending a finished campaign). When a
/// `bat revert` was committed after the last round, the next round starts
/// from the branch's promoted checkpoint. `ctx` reports the checkouts a
/// resume may need and stops them.
pub fn plan_resume(
    ledger: &Ledger,
    layout: &RunsLayout,
    rev: &str,
    branch: Option<String>,
    bat_exe: Option<&Path>,
    rounds: Option<i64>,
    ctx: Ctx<'_>,
) -> Result<PlannedRun, CampaignError> {
    let recorded = find_last_round(ledger, rev)?.ok_or_else(|| CampaignError::NothingToResume {
        rev: rev.to_string(),
    })?;
    let run_id = recorded.loop_meta.run_id.clone();
    let prune_round_dirs = layout.owns_work_dir(&recorded.loop_meta);
    let follow = match &branch {
        Some(b) => b.clone(),
        None => crate::round::current_branch(ledger)
            .map_err(|e| CampaignError::Resume(ResumeError::Round(Box::new(e))))?,
    };
    let point = prepare_resume_with(
        ledger,
        &recorded,
        &layout.restore_dir(&run_id),
        ResumeOptions {
            prune_round_dirs,
            rounds,
            follow_promoted: Some(follow),
            ctx,
        },
    )?;
    let mut campaign = point.campaign;
    if let Some(entry) = campaign
        .extra_placeholders
        .iter_mut()
        .find(|(k, _)| k == BAT_PLACEHOLDER)
    {
        let exe = bat_exe.ok_or(CampaignError::NoBatBinary)?;
        entry.1 = exe.to_string_lossy().into_owned();
    }
    if branch.is_some() {
        campaign.branch = branch;
    }
    Ok(PlannedRun {
        campaign,
        run_id: point.run_id,
        start: Start::Resume(point.state),
        prune_round_dirs,
        followed_promoted: point.followed_promoted,
    })
}

/// The options every round of `campaign` is committed with: its branch,
/// its pack, and the trainer/evaluator templates for replays.
pub fn round_commit_options(campaign: &Campaign, pack: &Pack) -> CommitRoundOptions {
    CommitRoundOptions {
        message: None,
        branch: campaign.branch.clone(),
        code_repo: None,
        heldout_markers: None,
        keep_raw_eval: false,
        pack: pack.clone(),
        command_templates: Some(CommandTemplates {
            trainer: campaign.trainer.clone(),
            evaluator: campaign.evaluator.clone(),
        }),
        loop_meta: None,
        ..Default::default()
    }
}
