//! `bat demo`: a first session on a fresh machine, using only what is
//! embedded in the binary (the default benchmark pack and the simulator).
//!
//! It creates a ledger, runs a BaT campaign with the simulator backend on
//! branch `main` (every round committed), replays the whole chain as a
//! terminal-reward GRPO ablation at the same compute on a replay branch,
//! and compares the two arms (base → final Overall, task, agentic, S1–S5,
//! measured compute). The CLI prints the comparison, the ledger's location
//! and the commands to try next.

use std::path::{Path, PathBuf};

use bat_ledger::Ledger;

use crate::engine::rounds::{prepare_fresh, run_loop, LedgerSink, LoopError, RunOptions, Start};
use crate::replay::compare::{compare, Comparison};
use crate::replay::{replay, Ablation, ReplayError, ReplayObserver, ReplayReport, ReplayRequest};
use crate::round::{round_commits, CommitRoundOptions, RoundError};
use crate::sim;
use bat_contract::pack::Pack;

/// The branch the campaign is committed to.
pub const DEMO_BRANCH: &str = "main";
/// Rounds of the demo campaign.
pub const DEMO_ROUNDS: i64 = 10;
/// The commit author of the demo.
pub const DEMO_AUTHOR: &str = "bat demo";

/// How to run the demo.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Rounds of the campaign (and of its replay).
    pub rounds: i64,
    /// Batches per round.
    pub batches: i64,
    /// Campaign seed.
    pub seed: u64,
    /// The bat binary the simulator children run.
    pub bat: PathBuf,
}

/// What the demo did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DemoReport {
    /// The directory holding the ledger (`DIR/.bat`) and the work files.
    pub dir: PathBuf,
    /// The campaign's branch.
    pub campaign_branch: String,
    /// The replay branch.
    pub replay_branch: String,
    /// The replayed range (`<first>..<last>` commit ids).
    pub replayed_range: String,
    /// Rounds per arm.
    pub rounds: i64,
    /// Campaign seed.
    pub seed: u64,
    /// The replay (terminal reward, same compute).
    pub replay: ReplayReport,
    /// The two arms compared.
    pub comparison: Comparison,
}

/// Errors of the demo.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The target directory already holds files.
    #[error("{path} is not empty; the demo needs a new or empty directory")]
    NotEmpty {
        /// The directory.
        path: PathBuf,
    },
    /// Listing or creating the directory failed.
    #[error("cannot {action} {path}: {source}")]
    Io {
        /// What was attempted.
        action: &'static str,
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The simulator could not be set up.
    #[error(transparent)]
    Sim(#[from] sim::SimError),
    /// The campaign failed.
    #[error(transparent)]
    Loop(#[from] LoopError),
    /// The replay or the comparison failed.
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// Reading the rounds back failed.
    #[error(transparent)]
    Round(#[from] RoundError),
    /// The ledger refused.
    #[error(transparent)]
    Ledger(#[from] bat_ledger::Error),
    /// The campaign committed no round.
    #[error("the campaign committed no round")]
    NoRounds,
}

impl bat_ledger::Diagnostic for DemoError {
    fn kind(&self) -> bat_ledger::ErrorKind {
        match self {
            DemoError::Sim(e) => e.kind(),
            DemoError::Loop(e) => e.kind(),
            DemoError::Replay(e) => e.kind(),
            DemoError::Round(e) => e.kind(),
            DemoError::Ledger(e) => e.kind(),
            _ => bat_ledger::ErrorKind::User,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            DemoError::Sim(e) => e.hint(),
            DemoError::Loop(e) => e.hint(),
            DemoError::Replay(e) => e.hint(),
            DemoError::Round(e) => e.hint(),
            DemoError::Ledger(e) => e.hint(),
            DemoError::NotEmpty { .. } => Some("name a new directory, or omit DIR".to_string()),
            _ => None,
        }
    }

    fn code(&self) -> Option<String> {
        match self {
            DemoError::Sim(e) => e.code(),
            DemoError::Loop(e) => e.code(),
            DemoError::Replay(e) => e.code(),
            DemoError::Round(e) => e.code(),
            DemoError::Ledger(e) => e.code(),
            _ => None,
        }
    }
}

/// Progress of the demo: the campaign's loop events, then the replay's.
pub trait DemoObserver {
    /// A phase starts (`campaign`, `replay`) with this many rounds.
    fn phase(&mut self, name: &str, rounds: u64);
    /// The observer of the replay phase (also the loop observer).
    fn replay_observer(&mut self) -> &mut dyn ReplayObserver;
}

fn ensure_empty(dir: &Path) -> Result<(), DemoError> {
    if dir.exists() {
        let mut entries = std::fs::read_dir(dir).map_err(|source| DemoError::Io {
            action: "list",
            path: dir.to_path_buf(),
            source,
        })?;
        if entries.next().is_some() {
            return Err(DemoError::NotEmpty {
                path: dir.to_path_buf(),
            });
        }
    }
    std::fs::create_dir_all(dir).map_err(|source| DemoError::Io {
        action: "create",
        path: dir.to_path_buf(),
        source,
    })
}

/// Run the demo in `dir` (created if missing; must be empty). `ctx`
/// reports the ledger's reads and writes and stops them.
pub fn run_demo(
    dir: &Path,
    opts: &DemoOptions,
    observer: &mut dyn DemoObserver,
    ctx: &crate::Ctx<'_>,
) -> Result<DemoReport, DemoError> {
    ensure_empty(dir)?;
    let mut ledger = Ledger::init(dir)?;
    let pack = Pack::default_pack();
    let work = dir.join("work");

    // Arm A: the BaT campaign, one commit per round on `main`.
    let campaign = prepare_fresh(&sim::prepare_campaign(&sim::SimCampaign {
        rounds: opts.rounds,
        batches: opts.batches,
        seed: opts.seed,
        reward_mode: bat_contract::vocabulary::RewardMode::Stage,
        branch: Some(DEMO_BRANCH.to_string()),
        ..sim::SimCampaign::new(dir.join("setup"), work.join("campaign"), opts.bat.clone())
    })?)?;
    observer.phase("BaT campaign", opts.rounds.max(0) as u64);
    let options = CommitRoundOptions {
        branch: Some(DEMO_BRANCH.to_string()),
        pack: pack.clone(),
        command_templates: Some(crate::round::CommandTemplates {
            trainer: campaign.trainer.clone(),
            evaluator: campaign.evaluator.clone(),
        }),
        author: Some(DEMO_AUTHOR.to_string()),
        ..Default::default()
    };
    let mut sink = LedgerSink {
        ledger: &mut ledger,
        options,
        ctx: *ctx,
    };
    let logs = work.join("campaign-logs");
    run_loop(
        &campaign,
        Start::Fresh,
        &RunOptions {
            pack: &pack,
            log_dir: Some(&logs),
            run_id: "demo",
            prune_round_dirs: false,
        },
        observer.replay_observer().loop_observer(),
        &mut sink,
    )?;

    // Arm B: the same chain replayed with terminal reward, same compute.
    let tip = ledger.resolve(DEMO_BRANCH)?;
    let rounds = round_commits(&ledger, tip)?;
    let (first, last) = match (rounds.last(), rounds.first()) {
        (Some(f), Some(l)) => (f.commit, l.commit),
        _ => return Err(DemoError::NoRounds),
    };
    let range = format!("{first}..{last}");
    let ablations = vec![Ablation::Reward("terminal".into())];
    let report = replay(
        &mut ledger,
        &ReplayRequest {
            rev: range.clone(),
            ablations,
            verify: false,
            branch: None,
            allow_compute_change: false,
            tolerance: None,
            placeholder_overrides: vec![(
                crate::round::campaign::BAT_PLACEHOLDER.to_string(),
                opts.bat.to_string_lossy().into_owned(),
            )],
            work_dir: work.join("replay"),
            prune_round_dirs: true,
            author: DEMO_AUTHOR.to_string(),
        },
        observer.replay_observer(),
        ctx,
    )?;
    let replay_branch = report
        .branch
        .clone()
        .expect("a replay that is not a verify records a branch");
    let comparison = compare(&ledger, DEMO_BRANCH, &replay_branch)?;
    Ok(DemoReport {
        dir: dir.to_path_buf(),
        campaign_branch: DEMO_BRANCH.to_string(),
        replay_branch,
        replayed_range: range,
        rounds: opts.rounds,
        seed: opts.seed,
        replay: report,
        comparison,
    })
}
