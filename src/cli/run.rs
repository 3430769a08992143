//! `bat run`: drive the BaT loop (contract §H) with external trainer and
//! evaluator commands, committing every finished round; `bat run --resume`
//! continues an interrupted campaign from the ledger.
//!
//! Files: the work dir (`--work-dir W`, else `.bat/runs/<run-id>/work`) is
//! exactly the reference loop's; child output logs go to
//! `.bat/runs/<run-id>/logs/<round>/{trainer,evaluator}.{stdout,stderr}`
//! (outside W) and their paths and digests are recorded with each round.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::ledger_common::open;
use super::{CliError, CliResult, Globals};
use crate::contract::json;
use crate::contract::pack::Pack;
use crate::engine::command::{parse_template, Stream};
use crate::engine::r#loop::{
    prepare_fresh, run_loop, Campaign, LedgerSink, LoopEvent, Observer, RunOptions, Start,
};
use crate::engine::resume::{find_last_round, prepare_resume_with, ResumeOptions};
use crate::round::meta::LoopMeta;
use crate::round::CommitRoundOptions;
use crate::sim;

/// Run the evaluate → train → evaluate → gate loop and commit each round.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The source grid (source.jsonl).
    #[arg(long, value_name = "F")]
    pub source: Option<PathBuf>,
    /// The starting model folder.
    #[arg(long, value_name = "D")]
    pub initial_checkpoint: Option<PathBuf>,
    /// Trainer argv template (JSON array of strings; placeholders
    /// {checkpoint} {dataset} {manifest} {output} {health} {round_id}
    /// {target_stage} {runtime_tool_format}).
    #[arg(long, alias = "trainer-command", value_name = "T.json")]
    pub trainer: Option<PathBuf>,
    /// Evaluator argv template (JSON array of strings; placeholders
    /// {checkpoint} {output} {request}).
    #[arg(long, alias = "evaluator-command", value_name = "E.json")]
    pub evaluator: Option<PathBuf>,
    /// Evaluation protocol id.
    #[arg(long, value_name = "P")]
    pub protocol_id: Option<String>,
    /// Runtime tool format of the serving runtime (passed to the trainer).
    #[arg(long, value_name = "F")]
    pub runtime_tool_format: Option<String>,
    /// Number of rounds.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 10,
        allow_negative_numbers = true
    )]
    pub rounds: i64,
    /// Batches (of 8 rows) per round [default: 378; with --backend sim: 50].
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub batches: Option<i64>,
    /// The benchmark pack (default: the embedded one).
    #[arg(long, value_name = "F")]
    pub pack: Option<PathBuf>,
    /// The work dir; must not exist (default: .bat/runs/<run-id>/work).
    #[arg(long, value_name = "W")]
    pub work_dir: Option<PathBuf>,
    /// Commit rounds to this branch (default: the current branch).
    #[arg(long, value_name = "B")]
    pub branch: Option<String>,
    /// `command`: the --trainer/--evaluator templates; `sim`: the embedded
    /// simulator (source grid, initial policy and templates are made for you).
    #[arg(long, value_enum, default_value_t = Backend::Command)]
    pub backend: Backend,
    /// Campaign seed of the simulator backend (initial policy, rollouts,
    /// held-out draws) [default: 0].
    #[arg(long, value_name = "S")]
    pub seed: Option<u64>,
    /// Reward mode: `stage` (BaT) or `terminal` (every row rewarded only by
    /// the end-to-end outcome) [default: stage]. The simulator uses it
    /// directly; a --trainer template receives it as `{reward_mode}`.
    #[arg(long, value_name = "M")]
    pub reward_mode: Option<String>,
    /// Continue the campaign of the last round committed by `bat run` on the
    /// branch (--branch, else HEAD); other arguments are taken from the ledger.
    #[arg(
        long,
        conflicts_with_all = [
            "source",
            "initial_checkpoint",
            "trainer",
            "evaluator",
            "protocol_id",
            "runtime_tool_format",
            "pack",
            "work_dir",
            "seed",
            "reward_mode",
        ]
    )]
    pub resume: bool,
}

/// Which trainer/evaluator pair drives the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// External argv templates (--trainer, --evaluator).
    Command,
    /// The embedded simulator (`bat sim train|evaluate` children).
    Sim,
}

/// Progress lines and child output on stderr (stdout carries the result).
struct CliObserver;

impl Observer for CliObserver {
    fn event(&mut self, e: &LoopEvent<'_>) {
        let line = match e {
            LoopEvent::Evaluating { context } => format!("evaluating {context}"),
            LoopEvent::Baseline {
                checkpoint_sha256,
                target_stage,
            } => format!(
                "baseline {} → first target {target_stage}",
                &checkpoint_sha256.get(..12).unwrap_or(checkpoint_sha256)
            ),
            LoopEvent::RoundStart {
                round_id,
                target_stage,
            } => format!("{round_id}: target {target_stage}"),
            LoopEvent::Training { round_id, argv } => {
                format!("{round_id}: training: {}", argv.join(" "))
            }
            LoopEvent::Gated {
                round_id,
                gate_status,
                next_target_stage,
            } => format!("{round_id}: gate {gate_status}, next target {next_target_stage}"),
            LoopEvent::Recorded { round_id, note } => format!("{round_id}: {note}"),
        };
        eprintln!("bat run: {line}");
    }

    fn child_output(&mut self, _label: &str, _stream: Stream, bytes: &[u8]) {
        // Both child streams go to our stderr; stdout stays for the result.
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(bytes);
        let _ = err.flush();
    }
}

fn need<T>(v: Option<T>, flag: &str) -> Result<T, CliError> {
    v.ok_or_else(|| {
        CliError::new(format!("missing required argument {flag}"))
            .with_hint("give all campaign arguments, or --resume to continue one")
            .with_code(2)
    })
}

fn read_template(p: &std::path::Path) -> Result<Vec<String>, CliError> {
    let bytes = crate::fsutil::read_json_input(p)
        .map_err(|e| CliError::new(format!("cannot read {}: {e}", p.display())).with_code(2))?;
    Ok(parse_template(&bytes)?)
}

/// The default batches of the command backend (the contract's).
const DEFAULT_BATCHES: i64 = 378;

fn current_exe() -> Result<PathBuf, CliError> {
    std::env::current_exe().map_err(|e| {
        CliError::new(format!(
            "cannot find the bat binary to run the simulator: {e}"
        ))
    })
}

/// A resumed simulator campaign runs this binary, wherever it is now.
fn refresh_bat_placeholder(campaign: &mut Campaign) -> Result<(), CliError> {
    if let Some(entry) = campaign
        .extra_placeholders
        .iter_mut()
        .find(|(k, _)| k == sim::BAT_PLACEHOLDER)
    {
        entry.1 = current_exe()?.to_string_lossy().into_owned();
    }
    Ok(())
}

/// The simulator campaign of `bat run --backend sim`, set up under `run_dir`.
fn sim_campaign(a: &RunArgs, run_dir: &std::path::Path) -> Result<Campaign, CliError> {
    let given = [
        (a.source.is_some(), "--source"),
        (a.initial_checkpoint.is_some(), "--initial-checkpoint"),
        (a.trainer.is_some(), "--trainer"),
        (a.evaluator.is_some(), "--evaluator"),
        (a.protocol_id.is_some(), "--protocol-id"),
        (a.runtime_tool_format.is_some(), "--runtime-tool-format"),
        (a.pack.is_some(), "--pack"),
    ];
    if let Some((_, flag)) = given.iter().find(|(set, _)| *set) {
        return Err(CliError::new(format!("{flag} cannot be used with --backend sim"))
            .with_hint("the simulator makes its own source grid, initial policy and templates from the embedded pack")
            .with_code(2));
    }
    let reward_mode = sim::RewardMode::parse(a.reward_mode.as_deref().unwrap_or("stage"))
        .map_err(|e| CliError::new(e.to_string()).with_code(2))?;
    Ok(sim::prepare_campaign(&sim::SimCampaign {
        setup_dir: run_dir.join("sim-setup"),
        work_dir: a.work_dir.clone().unwrap_or_else(|| run_dir.join("work")),
        bat: current_exe()?,
        rounds: a.rounds,
        batches: a.batches.unwrap_or(sim::DEFAULT_BATCHES),
        seed: a.seed.unwrap_or(sim::DEFAULT_SEED),
        reward_mode,
        learning_rate: sim::policy::DEFAULT_LEARNING_RATE,
        branch: a.branch.clone(),
    })?)
}

/// Whether the recorded campaign's work dir is bat's own
/// (`.bat/runs/<run-id>/work`), whose committed round folders are removed.
fn owns_work_dir(runs: &std::path::Path, loop_metadata: &serde_json::Value) -> bool {
    let Ok(l) = LoopMeta::from_value(loop_metadata) else {
        return false;
    };
    let runs = std::fs::canonicalize(runs).unwrap_or_else(|_| runs.to_path_buf());
    l.campaign.work_dir == runs.join(&l.run_id).join("work")
}

/// `{reward_mode}` of a command campaign: recorded (default `stage`) when
/// the trainer template uses it, so that `bat replay --ablate
/// reward=terminal` has a value to override and a verify re-runs the same
/// one; `--reward-mode` without the placeholder would be silently ignored,
/// so it is refused.
fn reward_mode_placeholder(
    trainer: &[String],
    mode: Option<&str>,
) -> Result<Vec<(String, String)>, CliError> {
    let mode = sim::RewardMode::parse(mode.unwrap_or("stage"))
        .map_err(|e| CliError::new(e.to_string()).with_code(2))?;
    if trainer.iter().any(|t| t == "{reward_mode}") {
        return Ok(vec![("{reward_mode}".into(), mode.as_str().into())]);
    }
    if mode != sim::RewardMode::Stage {
        return Err(CliError::new(
            "--reward-mode needs a {reward_mode} element in the --trainer template",
        )
        .with_code(2));
    }
    Ok(Vec::new())
}

/// Run `bat run`.
pub fn run(a: RunArgs, g: &Globals) -> CliResult {
    let mut ledger = open(g)?;
    let runs = ledger.dir().join("runs");
    let mut prune = a.work_dir.is_none();
    let (campaign, run_id, start) = if a.resume {
        let rev = a.branch.clone().unwrap_or_else(|| "HEAD".into());
        let recorded = find_last_round(&ledger, &rev)?.ok_or_else(|| {
            CliError::new(format!(
                "no round committed by `bat run` on {rev}; nothing to resume"
            ))
            .with_hint("start the campaign with `bat run` (without --resume)")
        })?;
        let run_id = LoopMeta::from_value(&recorded.loop_metadata)
            .map(|l| l.run_id)
            .unwrap_or_else(|_| "unknown".into());
        let point = prepare_resume_with(
            &ledger,
            &recorded,
            &runs.join(&run_id).join("restore"),
            ResumeOptions {
                prune_round_dirs: owns_work_dir(&runs, &recorded.loop_metadata),
            },
        )?;
        prune = owns_work_dir(&runs, &recorded.loop_metadata);
        eprintln!(
            "bat run: resuming {} after round {} of {}",
            point.run_id, point.state.completed_rounds, point.campaign.rounds
        );
        let mut campaign = point.campaign;
        refresh_bat_placeholder(&mut campaign)?;
        if a.branch.is_some() {
            campaign.branch = a.branch.clone();
        }
        (campaign, point.run_id, Start::Resume(point.state))
    } else {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let run_id = format!("{secs}-{}", std::process::id());
        if a.backend == Backend::Sim {
            let campaign = prepare_fresh(&sim_campaign(&a, &runs.join(&run_id))?)?;
            eprintln!(
                "bat run: simulator campaign {run_id} (seed {}), work dir {}",
                a.seed.unwrap_or(sim::DEFAULT_SEED),
                campaign.work_dir.display()
            );
            (campaign, run_id, Start::Fresh)
        } else {
            let trainer = read_template(&need(a.trainer.clone(), "--trainer")?)?;
            let evaluator = read_template(&need(a.evaluator.clone(), "--evaluator")?)?;
            let extra_placeholders = reward_mode_placeholder(&trainer, a.reward_mode.as_deref())?;
            let work_dir = a
                .work_dir
                .clone()
                .unwrap_or_else(|| runs.join(&run_id).join("work"));
            let campaign = prepare_fresh(&Campaign {
                source: need(a.source.clone(), "--source")?,
                initial_checkpoint: need(a.initial_checkpoint.clone(), "--initial-checkpoint")?,
                work_dir,
                trainer,
                evaluator,
                protocol_id: need(a.protocol_id.clone(), "--protocol-id")?,
                runtime_tool_format: need(a.runtime_tool_format.clone(), "--runtime-tool-format")?,
                rounds: a.rounds,
                batches: a.batches.unwrap_or(DEFAULT_BATCHES),
                pack: a.pack.clone(),
                extra_placeholders,
                branch: a.branch.clone(),
            })?;
            eprintln!(
                "bat run: campaign {run_id}, work dir {}",
                campaign.work_dir.display()
            );
            (campaign, run_id, Start::Fresh)
        }
    };
    let pack = Pack::load_or_default(campaign.pack.as_deref())?;
    let log_dir = runs.join(&run_id).join("logs");
    let options = CommitRoundOptions {
        message: None,
        branch: campaign.branch.clone(),
        code_repo: None,
        heldout_markers: None,
        keep_raw_eval: false,
        pack: pack.clone(),
        command_templates: Some(serde_json::json!({
            "trainer": campaign.trainer,
            "evaluator": campaign.evaluator,
        })),
        extra_metadata: None,
        ..Default::default()
    };
    let mut sink = LedgerSink {
        ledger: &mut ledger,
        options,
    };
    let mut observer = CliObserver;
    let outcome = run_loop(
        &campaign,
        start,
        &RunOptions {
            pack: &pack,
            log_dir: Some(&log_dir),
            run_id: &run_id,
            prune_round_dirs: prune,
        },
        &mut observer,
        &mut sink,
    )
    .map_err(|e| {
        CliError::new(e.to_string()).with_hint(format!(
            "completed rounds stay committed; fix the cause and run `bat run --resume`{} (logs: {})",
            campaign
                .branch
                .as_ref()
                .map(|b| format!(" --branch {b}"))
                .unwrap_or_default(),
            log_dir.display()
        ))
    })?;
    if g.json {
        print!("{}", json::to_pj_file(&outcome));
    } else {
        println!(
            "campaign complete: {} rounds, work dir {}",
            campaign.rounds,
            campaign.work_dir.display()
        );
        for h in outcome
            .get("history")
            .and_then(|h| h.as_array())
            .into_iter()
            .flatten()
        {
            let f = |k: &str| h.get(k).and_then(|v| v.as_str()).unwrap_or("").to_string();
            println!(
                "  {}  {:<3} {:<8} candidate {}",
                f("round_id"),
                f("target_stage"),
                f("gate_status"),
                f("candidate_checkpoint_sha256").get(..12).unwrap_or("")
            );
        }
        let s = |k: &str| {
            outcome
                .get(k)
                .and_then(|v| v.as_str())
                .unwrap_or("")
                .to_string()
        };
        println!(
            "current checkpoint {}, next target {}",
            s("current_checkpoint_sha256"),
            s("next_target_stage")
        );
    }
    Ok(ExitCode::SUCCESS)
}
