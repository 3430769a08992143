//! `bat demo`: a first session on a fresh machine, using only what is
//! embedded in the binary (the default benchmark pack and the simulator).
//!
//! It creates a ledger and runs a small experiment: a BaT campaign with the
//! simulator backend for each of several seeds (independent arms
//! `bat/s<seed>`, every round committed), each chain replayed as a
//! terminal-reward GRPO ablation at the same compute (`terminal/s<seed>`),
//! and the two arm groups compared with bootstrap confidence intervals
//! ([`crate::experiment`]). `main` names the first seed's BaT arm, so the
//! ledger verbs work on it without arguments. The CLI prints the
//! comparison, the ledger's location and the commands to try next.

use std::path::{Path, PathBuf};

use bat_ledger::Ledger;

use crate::engine::rounds::{prepare_fresh, run_loop, LedgerSink, LoopError, RunOptions, Start};
use crate::experiment::compare::{compare_arms, CompareRequest, Experiment};
use crate::experiment::stats::Bootstrap;
use crate::experiment::ExperimentError;
use crate::replay::compare::{compare, Comparison};
use crate::replay::{replay, Ablation, ReplayError, ReplayObserver, ReplayReport, ReplayRequest};
use crate::round::{round_commits, CommitRoundOptions, RoundError};
use crate::sim;
use bat_contract::pack::Pack;

/// The branch that names the first seed's BaT arm.
pub const DEMO_BRANCH: &str = "main";
/// The BaT arm's branch group (`bat/s<seed>`).
pub const BAT_ARM: &str = "bat";
/// The terminal-reward arm's branch group (`terminal/s<seed>`).
pub const TERMINAL_ARM: &str = "terminal";
/// Rounds of the demo campaign.
pub const DEMO_ROUNDS: i64 = 10;
/// Seeds per arm.
pub const DEMO_SEEDS: u64 = 3;
/// The commit author of the demo.
pub const DEMO_AUTHOR: &str = "bat demo";

/// How to run the demo.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Rounds of the campaign (and of its replay).
    pub rounds: i64,
    /// Batches per round.
    pub batches: i64,
    /// The first seed; the others follow it (`seed`, `seed + 1`, ...).
    pub seed: u64,
    /// Seeds per arm (at least 1).
    pub seeds: u64,
    /// The bat binary the simulator children run.
    pub bat: PathBuf,
}

/// What the demo did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DemoReport {
    /// The directory holding the ledger (`DIR/.bat`) and the work files.
    pub dir: PathBuf,
    /// The branch naming the first seed's BaT arm (`main`).
    pub campaign_branch: String,
    /// The first seed's terminal-reward replay branch.
    pub replay_branch: String,
    /// The first seed's replayed range (`<first>..<last>` commit ids).
    pub replayed_range: String,
    /// Rounds per arm.
    pub rounds: i64,
    /// The first seed.
    pub seed: u64,
    /// Every seed, in order.
    pub seeds: Vec<u64>,
    /// The BaT arm's branches, one per seed.
    pub bat_branches: Vec<String>,
    /// The terminal-reward arm's branches, one per seed.
    pub terminal_branches: Vec<String>,
    /// The first seed's replay (terminal reward, same compute).
    pub replay: ReplayReport,
    /// The first seed's two arms compared round by round.
    pub comparison: Comparison,
    /// The two arm groups compared with confidence intervals.
    pub experiment: Experiment,
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
    /// The comparison of the arm groups failed.
    #[error(transparent)]
    Experiment(#[from] ExperimentError),
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
            DemoError::Experiment(e) => e.kind(),
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
            DemoError::Experiment(e) => e.hint(),
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
            DemoError::Experiment(e) => e.code(),
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
    let seeds: Vec<u64> = (0..opts.seeds.max(1)).map(|k| opts.seed + k).collect();
    let mut bat_branches = Vec::new();
    let mut terminal_branches = Vec::new();
    let mut first = None;
    for &seed in &seeds {
        let branch = format!("{BAT_ARM}/s{seed}");
        run_campaign(&mut ledger, dir, opts, seed, &branch, observer, ctx)?;
        let replay_branch = format!("{TERMINAL_ARM}/s{seed}");
        let (range, report) = replay_terminal(
            &mut ledger,
            dir,
            opts,
            &branch,
            &replay_branch,
            observer,
            ctx,
        )?;
        if first.is_none() {
            let head = ledger.resolve(&branch)?;
            ledger.create_branch(DEMO_BRANCH, head)?;
            first = Some((range, report));
        }
        bat_branches.push(branch);
        terminal_branches.push(replay_branch);
    }
    let (replayed_range, replay) = first.expect("at least one seed ran");
    let replay_branch = terminal_branches[0].clone();
    let comparison = compare(&ledger, DEMO_BRANCH, &replay_branch)?;
    let experiment = compare_arms(
        &ledger,
        &CompareRequest {
            arms: vec![format!("{BAT_ARM}/*"), format!("{TERMINAL_ARM}/*")],
            bootstrap: Bootstrap::default(),
            allow: Vec::new(),
        },
        ctx,
    )?;
    Ok(DemoReport {
        dir: dir.to_path_buf(),
        campaign_branch: DEMO_BRANCH.to_string(),
        replay_branch,
        replayed_range,
        rounds: opts.rounds,
        seed: opts.seed,
        seeds,
        bat_branches,
        terminal_branches,
        replay,
        comparison,
        experiment,
    })
}

/// One seed's BaT campaign, each round committed, as a new arm (a root
/// commit) on `branch`.
fn run_campaign(
    ledger: &mut Ledger,
    dir: &Path,
    opts: &DemoOptions,
    seed: u64,
    branch: &str,
    observer: &mut dyn DemoObserver,
    ctx: &crate::Ctx<'_>,
) -> Result<(), DemoError> {
    let pack = Pack::default_pack();
    let work = dir.join("work").join(format!("s{seed}"));
    let campaign = prepare_fresh(&sim::prepare_campaign(&sim::SimCampaign {
        rounds: opts.rounds,
        batches: opts.batches,
        seed,
        reward_mode: bat_contract::vocabulary::RewardMode::Stage,
        branch: Some(branch.to_string()),
        ..sim::SimCampaign::new(
            dir.join("setup").join(format!("s{seed}")),
            work.join("campaign"),
            opts.bat.clone(),
        )
    })?)?;
    observer.phase(
        &format!("BaT campaign, seed {seed}"),
        opts.rounds.max(0) as u64,
    );
    let options = CommitRoundOptions {
        branch: Some(branch.to_string()),
        orphan_branch: true,
        pack: pack.clone(),
        command_templates: Some(crate::round::CommandTemplates {
            trainer: campaign.trainer.clone(),
            evaluator: campaign.evaluator.clone(),
        }),
        author: Some(DEMO_AUTHOR.to_string()),
        ..Default::default()
    };
    let mut sink = LedgerSink {
        ledger,
        options,
        ctx: *ctx,
    };
    let logs = work.join("campaign-logs");
    let run_id = format!("demo-s{seed}");
    run_loop(
        &campaign,
        Start::Fresh,
        &RunOptions {
            pack: &pack,
            log_dir: Some(&logs),
            run_id: &run_id,
            prune_round_dirs: false,
        },
        observer.replay_observer().loop_observer(),
        &mut sink,
    )?;
    Ok(())
}

/// Replay `branch`'s whole chain with terminal reward at the same compute
/// onto `replay_branch`; the range replayed and the replay's report.
fn replay_terminal(
    ledger: &mut Ledger,
    dir: &Path,
    opts: &DemoOptions,
    branch: &str,
    replay_branch: &str,
    observer: &mut dyn DemoObserver,
    ctx: &crate::Ctx<'_>,
) -> Result<(String, ReplayReport), DemoError> {
    let tip = ledger.resolve(branch)?;
    let rounds = round_commits(ledger, tip)?;
    let (first, last) = match (rounds.last(), rounds.first()) {
        (Some(f), Some(l)) => (f.commit, l.commit),
        _ => return Err(DemoError::NoRounds),
    };
    let range = format!("{first}..{last}");
    let report = replay(
        ledger,
        &ReplayRequest {
            rev: range.clone(),
            ablations: vec![Ablation::Reward("terminal".into())],
            verify: false,
            branch: Some(replay_branch.to_string()),
            allow_compute_change: false,
            tolerance: None,
            placeholder_overrides: vec![(
                crate::round::campaign::BAT_PLACEHOLDER.to_string(),
                opts.bat.to_string_lossy().into_owned(),
            )],
            work_dir: dir.join("work").join(replay_branch.replace('/', "-")),
            prune_round_dirs: true,
            author: DEMO_AUTHOR.to_string(),
        },
        observer.replay_observer(),
        ctx,
    )?;
    Ok((range, report))
}
