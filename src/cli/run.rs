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
use super::{CliError, CliResult, Session};
use crate::contract::json;
use crate::contract::pack::Pack;
use crate::engine::campaign::{
    new_run_id, plan_fresh, plan_resume, round_commit_options, Backend, FreshRequest, PlannedRun,
    RunsLayout,
};
use crate::engine::command::{parse_template, Stream};
use crate::engine::r#loop::{run_loop, LedgerSink, LoopEvent, Observer, RunOptions, Start};

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
    /// Batches (of 8 rows) per round [default: 378 (the contract's); with
    /// --backend sim: 50].
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

fn read_template(p: &std::path::Path) -> Result<Vec<String>, CliError> {
    let bytes = crate::fsutil::read_json_input(p)
        .map_err(|e| CliError::new(format!("cannot read {}: {e}", p.display())).usage())?;
    Ok(parse_template(&bytes)?)
}

/// The typed inputs of a fresh campaign.
fn fresh_request(a: &RunArgs) -> Result<FreshRequest, CliError> {
    // The simulator refuses templates before anything is read.
    let template = |p: &Option<PathBuf>| match a.backend {
        Backend::Command => p.as_deref().map(read_template).transpose(),
        Backend::Sim => Ok(p.as_ref().map(|_| Vec::new())),
    };
    Ok(FreshRequest {
        backend: a.backend,
        source: a.source.clone(),
        initial_checkpoint: a.initial_checkpoint.clone(),
        trainer: template(&a.trainer)?,
        evaluator: template(&a.evaluator)?,
        protocol_id: a.protocol_id.clone(),
        runtime_tool_format: a.runtime_tool_format.clone(),
        rounds: a.rounds,
        batches: a.batches,
        pack: a.pack.clone(),
        work_dir: a.work_dir.clone(),
        branch: a.branch.clone(),
        seed: a.seed,
        reward_mode: a.reward_mode.clone(),
        // Only the simulator backend needs it; an error surfaces there.
        bat_exe: std::env::current_exe().ok(),
    })
}

/// Set up the campaign: resumed from the ledger, or fresh.
fn plan(
    a: &RunArgs,
    ledger: &bat_ledger::Ledger,
    layout: &RunsLayout,
) -> Result<PlannedRun, CliError> {
    if a.resume {
        let rev = a.branch.clone().unwrap_or_else(|| "HEAD".into());
        let exe = std::env::current_exe().ok();
        let planned = plan_resume(ledger, layout, &rev, a.branch.clone(), exe.as_deref())?;
        if let Start::Resume(state) = &planned.start {
            eprintln!(
                "bat run: resuming {} after round {} of {}",
                planned.run_id, state.completed_rounds, planned.campaign.rounds
            );
        }
        return Ok(planned);
    }
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let run_id = new_run_id(secs, std::process::id());
    let planned = plan_fresh(&fresh_request(a)?, layout, run_id)?;
    if a.backend == Backend::Sim {
        eprintln!(
            "bat run: simulator campaign {} (seed {}), work dir {}",
            planned.run_id,
            a.seed.unwrap_or(crate::sim::DEFAULT_SEED),
            planned.campaign.work_dir.display()
        );
    } else {
        eprintln!(
            "bat run: campaign {}, work dir {}",
            planned.run_id,
            planned.campaign.work_dir.display()
        );
    }
    Ok(planned)
}

/// Run `bat run`.
pub fn run(a: RunArgs, g: &Session) -> CliResult {
    let mut ledger = open(g)?;
    let layout = RunsLayout::new(ledger.dir());
    let PlannedRun {
        campaign,
        run_id,
        start,
        prune_round_dirs: prune,
    } = plan(&a, &ledger, &layout)?;
    let pack = Pack::load_or_default(campaign.pack.as_deref())?;
    let log_dir = layout.log_dir(&run_id);
    let options = round_commit_options(&campaign, &pack);
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
        out!("{}", json::to_pj_file(&outcome));
    } else {
        outln!(
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
            outln!(
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
        outln!(
            "current checkpoint {}, next target {}",
            s("current_checkpoint_sha256"),
            s("next_target_stage")
        );
    }
    Ok(ExitCode::SUCCESS)
}
