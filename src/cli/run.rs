//! `bat run`: drive the BaT loop (contract §H) with external trainer and
//! evaluator commands, committing every finished round; `bat run --resume`
//! continues an interrupted campaign from the ledger.
//!
//! Children: the trainer and evaluator run in a process group of their
//! own. SIGINT/SIGTERM received by `bat run` are forwarded to that group;
//! what still lives after `--grace-period` seconds (default 10) is killed
//! with SIGKILL, and bat exits 130 (SIGINT) or 143 (SIGTERM). The round in
//! progress is not committed; `bat run --resume` redoes it. A second signal
//! kills the group and exits at once.
//!
//! Lock: `.bat/run.lock` names the running `bat run` (pid, command, start
//! time, child process group, and a token every child carries in its
//! environment as `BAT_RUN_TOKEN`); a second `bat run` on the ledger
//! refuses while that process, its child group or any process carrying its
//! token lives (the token covers a child started by a `bat run` killed
//! before it recorded the group). A lock whose processes are all gone is
//! taken over with a note; `--break-lock` takes over a live one.
//!
//! Files: the work dir (`--work-dir W`, else `.bat/runs/<run-id>/work`) is
//! exactly the reference loop's; child output logs go to
//! `.bat/runs/<run-id>/logs/<round>/{trainer,evaluator}.{stdout,stderr}`
//! (outside W) while the round runs; the round commit stores them under
//! `logs/` of its tree (paths and digests in the metadata) and the files are
//! removed once it is durable (`bat cat REV:logs/trainer.stderr` reads one).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::interrupt::{GraceArgs, Supervised};
use super::ledger_common::{open, Bars};
use super::{print_json, CliError, CliResult, Session};
use bat::backend::{
    new_run_id, plan_fresh, plan_resume, round_commit_options, Backend, CampaignError,
    FreshRequest, PlannedRun, RunsLayout,
};
use bat::engine::arms::{check_fresh_arm, parse_seeds, seed_branch, ArmError};
use bat::engine::child::{OutputSink, Stream, Supervision};
use bat::engine::hook::{check_hook_template, HookSink, RoundHook};
use bat::engine::live::{FeedInfo, LiveFeed, LiveObserver, RunStatus};
use bat::engine::resume::find_last_round;
use bat::engine::rounds::{
    run_loop, LedgerSink, LoopEvent, LoopOutcome, Observer, RoundSink, RunOptions, Start,
};
use bat::engine::runlock::{Acquired, LockInfo, RunLock};
use bat::engine::template::{check_placeholders, parse_template_file, TemplateKind};
use bat::round::campaign::Campaign;
use bat_contract::json;
use bat_contract::pack::Pack;

/// Run the evaluate → train → evaluate → gate loop and commit each round.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The source grid (source.jsonl).
    #[arg(long, value_name = "F")]
    pub source: Option<PathBuf>,
    /// The starting model folder.
    #[arg(long, value_name = "D")]
    pub initial_checkpoint: Option<PathBuf>,
    /// Trainer argv template: a JSON array of strings, argv[0] the program
    /// (no shell). Elements equal to a placeholder are replaced whole:
    /// {checkpoint} (model folder to start from), {dataset} (train.jsonl),
    /// {manifest}, {output} (candidate folder to write), {health}
    /// (training-health.json to write), {round_id}, {target_stage},
    /// {runtime_tool_format}, {reward_mode} (`stage` or `terminal`),
    /// {seed} (the campaign seed, --seed), {metrics} (an optional JSON
    /// Lines file of step metrics, committed with the round; see
    /// docs/backends.md). Required: {checkpoint} {dataset} {output} {health}
    /// {runtime_tool_format}. Unknown or embedded placeholders are refused
    /// before anything runs.
    #[arg(long, alias = "trainer-command", value_name = "T.json")]
    pub trainer: Option<PathBuf>,
    /// Evaluator argv template (JSON array of strings; placeholders
    /// {checkpoint} {output} (raw-evaluation.json to write) {request}
    /// {reward_mode} {seed}; the first three are required).
    #[arg(long, alias = "evaluator-command", value_name = "E.json")]
    pub evaluator: Option<PathBuf>,
    /// Evaluation protocol id.
    #[arg(long, value_name = "P")]
    pub protocol_id: Option<String>,
    /// Runtime tool format of the serving runtime (passed to the trainer).
    #[arg(long, value_name = "F")]
    pub runtime_tool_format: Option<String>,
    /// Number of rounds [default: 10]. With --resume: run the campaign to
    /// N rounds in total (extends a finished campaign).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub rounds: Option<i64>,
    /// Batches (of 8 rows) per round [default: 378 (the contract's); with
    /// --backend sim: 50].
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub batches: Option<i64>,
    /// The benchmark pack (default: the embedded one).
    #[arg(long, value_name = "F")]
    pub pack: Option<PathBuf>,
    /// The work dir; must not exist (default: .bat/runs/<run-id>/work;
    /// with --seeds each seed works in W/s<seed>).
    #[arg(long, value_name = "W")]
    pub work_dir: Option<PathBuf>,
    /// Commit rounds to this branch (default: the current branch). A
    /// branch that holds rounds is continued only with --resume; a new
    /// branch forks from HEAD, which must hold no rounds (else use --new).
    #[arg(long, value_name = "B")]
    pub branch: Option<String>,
    /// Start an independent arm: the branch (which must not exist) begins
    /// with a root commit from the initial checkpoint instead of forking
    /// from HEAD, so several arms can live in one ledger.
    #[arg(long)]
    pub new: bool,
    /// `command`: the --trainer/--evaluator templates; `sim`: the embedded
    /// simulator (source grid, initial policy and templates are made for you).
    #[arg(long, value_enum, default_value_t = BackendArg::Command)]
    pub backend: BackendArg,
    /// Campaign seed [default: 0]: the simulator's initial policy,
    /// rollouts and held-out draws; a --trainer/--evaluator template
    /// receives it as `{seed}`. Recorded with every round; `bat replay`
    /// substitutes it again.
    #[arg(long, value_name = "S", conflicts_with = "seeds")]
    pub seed: Option<u64>,
    /// Run one independent arm per seed, one after another, on branches
    /// `NAME/s<seed>` (NAME from --branch, required), each as with --new:
    /// a half-open range `A..B` (`0..3` = 0, 1, 2) or a list `0,4,7`.
    /// With --resume: continue the seed arms that are unfinished.
    #[arg(long, value_name = "A..B")]
    pub seeds: Option<String>,
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
    /// `--grace-period SECS` (see [`GraceArgs`]).
    #[command(flatten)]
    pub grace: GraceArgs,
    /// Take over the run lock (.bat/run.lock) even though the `bat run` or
    /// child process group it names still lives. Stop those first: two runs
    /// would train the same round at once.
    #[arg(long)]
    pub break_lock: bool,
    /// Refuse, before anything runs, templates that would make the headline
    /// ablations impossible: a trainer without {reward_mode} (no `bat
    /// replay --ablate reward=terminal`) or a template without {seed}.
    /// Without it, `bat run` warns.
    #[arg(long)]
    pub require_ablations: bool,
    /// Run this argv template (JSON array of strings, no shell) after each
    /// round is durably committed, e.g. to mirror it to a tracker.
    /// Placeholders: {commit} (the round commit id), {round_id}, {branch},
    /// {ledger} (the directory holding the ledger, for `bat -C`). A hook
    /// that fails or times out is reported on the round's progress line and
    /// logged in .bat/runs/<run-id>/logs/<round>/on-round.{json,stdout,stderr};
    /// it never undoes or blocks the commit.
    #[arg(long, value_name = "H.json")]
    pub on_round: Option<PathBuf>,
    /// Seconds an --on-round hook may run before its process group is
    /// killed.
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 60.0,
        requires = "on_round"
    )]
    pub on_round_timeout: f64,
}

/// Progress lines and child output on stderr (stdout carries the result);
/// keeps the run lock naming the current child, and marks every child with
/// the lock's token. ([`Supervised`] around it supervises the children.)
struct CliObserver<'a> {
    lock: &'a mut RunLock,
    /// Rounds committed by this process.
    recorded: usize,
    /// Test hook (`BAT_TEST_CHILD_RECORD_DELAY`): sleep between the spawn
    /// of the child with this label and recording its group in the lock.
    record_delay: Option<(String, std::time::Duration)>,
    /// Why each round of this process's run held (closing summary).
    holds: Holds,
}

impl OutputSink for CliObserver<'_> {
    fn output(&mut self, _label: &str, _stream: Stream, bytes: &[u8]) {
        // Both child streams go to our stderr; stdout stays for the result.
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(bytes);
        let _ = err.flush();
    }

    fn child_env(&self) -> Vec<(String, String)> {
        // Set before the spawn, so a child is traceable to this run even if
        // bat dies before `child_started` records its group.
        self.lock
            .info()
            .child_env()
            .map(|(k, v)| (k.to_string(), v))
            .into_iter()
            .collect()
    }

    fn child_started(&mut self, label: &str, pgid: u32) {
        if let Some((_, d)) = self.record_delay.as_ref().filter(|(l, _)| l == label) {
            std::thread::sleep(*d);
        }
        if let Err(e) = self.lock.set_child(Some(pgid), Some(label)) {
            eprintln!("bat run: warning: cannot record child {label} in the run lock: {e}");
        }
    }

    fn child_ended(&mut self, _label: &str, _pgid: u32) {
        if let Err(e) = self.lock.set_child(None, None) {
            eprintln!("bat run: warning: cannot update the run lock: {e}");
        }
    }
}

impl Observer for CliObserver<'_> {
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
                hold_reasons,
            } => gated_line(
                &mut self.holds,
                round_id,
                *gate_status,
                next_target_stage,
                hold_reasons,
            ),
            LoopEvent::Recorded { round_id, note } => {
                self.recorded += 1;
                format!("{round_id}: {note}")
            }
        };
        eprintln!("bat run: {}", super::term::neutralize(&line, &[]));
    }
}

/// The progress line of a gate decision; a hold says why (and is kept for
/// the closing summary).
fn gated_line(
    holds: &mut Holds,
    round_id: &str,
    gate_status: bat_contract::vocabulary::GateStatus,
    next_target_stage: &str,
    hold_reasons: &[String],
) -> String {
    let mut line = format!("{round_id}: gate {gate_status}, next target {next_target_stage}");
    if !hold_reasons.is_empty() {
        let why = hold_reasons.join("; ");
        line.push_str(&format!(" (held: {why})"));
        holds.insert(round_id.to_string(), why);
    }
    line
}

/// `  held: WHY` after a held round of the closing summary, when this run
/// gated it.
fn hold_suffix(holds: &Holds, round_id: &str) -> String {
    holds
        .get(round_id)
        .map_or_else(String::new, |why| format!("  held: {why}"))
}

/// Read a template file and check its placeholders (`extra`: ones the
/// campaign adds) before anything runs.
fn read_template(
    p: &std::path::Path,
    kind: TemplateKind,
    extra: &[&str],
) -> Result<Vec<String>, CliError> {
    let bytes = bat_contract::fsutil::read_json_input(p)
        .map_err(|e| CliError::new(format!("cannot read {}: {e}", p.display())).usage())?;
    let file = p.display().to_string();
    let t = parse_template_file(&file, &bytes)?;
    check_placeholders(kind, &file, &t, extra)?;
    Ok(t)
}

/// The --on-round template, checked before anything runs.
fn read_hook(a: &RunArgs) -> Result<Option<Vec<String>>, CliError> {
    let Some(p) = &a.on_round else {
        return Ok(None);
    };
    if !a.on_round_timeout.is_finite() || a.on_round_timeout <= 0.0 {
        return Err(CliError::usage_error(format!(
            "--on-round-timeout must be a number of seconds > 0, not {}",
            a.on_round_timeout
        )));
    }
    let bytes = bat_contract::fsutil::read_json_input(p)
        .map_err(|e| CliError::new(format!("cannot read {}: {e}", p.display())).usage())?;
    let file = p.display().to_string();
    let t = parse_template_file(&file, &bytes)?;
    check_hook_template(&file, &t)?;
    Ok(Some(t))
}

/// One campaign of this `bat run`: the whole run, or one seed of `--seeds`.
#[derive(Debug, Clone)]
struct ArmSpec {
    /// The branch (`None`: the current one).
    branch: Option<String>,
    /// The seed (`None`: the default, or the recorded one on resume).
    seed: Option<u64>,
    /// Start the branch with a root commit.
    root: bool,
}

/// The typed inputs of a fresh campaign.
fn fresh_request(a: &RunArgs, arm: &ArmSpec) -> Result<FreshRequest, CliError> {
    // The simulator refuses templates before anything is read.
    let template = |p: &Option<PathBuf>, kind| match Backend::from(a.backend) {
        Backend::Command => p
            .as_deref()
            .map(|p| read_template(p, kind, &[]))
            .transpose(),
        Backend::Sim => Ok(p.as_ref().map(|_| Vec::new())),
    };
    Ok(FreshRequest {
        backend: a.backend.into(),
        source: a.source.clone(),
        initial_checkpoint: a.initial_checkpoint.clone(),
        trainer: template(&a.trainer, TemplateKind::Trainer)?,
        evaluator: template(&a.evaluator, TemplateKind::Evaluator)?,
        protocol_id: a.protocol_id.clone(),
        runtime_tool_format: a.runtime_tool_format.clone(),
        rounds: a.rounds.unwrap_or(10),
        batches: a.batches,
        pack: a.pack.clone(),
        // Seed arms of one --work-dir W work in W/s<seed>.
        work_dir: match (&a.seeds, arm.seed) {
            (Some(_), Some(s)) => a.work_dir.as_ref().map(|w| w.join(format!("s{s}"))),
            _ => a.work_dir.clone(),
        },
        branch: arm.branch.clone(),
        seed: arm.seed,
        reward_mode: a
            .reward_mode
            .as_deref()
            .map(str::parse)
            .transpose()
            .map_err(CampaignError::RewardMode)?,
        // Only the simulator backend needs it; an error surfaces there.
        bat_exe: super::self_exe().ok(),
    })
}

/// Set up the campaign: resumed from the ledger, or fresh.
fn plan(
    a: &RunArgs,
    arm: &ArmSpec,
    ledger: &bat_ledger::Ledger,
    layout: &RunsLayout,
    ctx: bat::Ctx<'_>,
) -> Result<PlannedRun, CliError> {
    if a.resume {
        let rev = arm.branch.clone().unwrap_or_else(|| "HEAD".into());
        let exe = super::self_exe().ok();
        let planned = plan_resume(
            ledger,
            layout,
            &rev,
            arm.branch.clone(),
            exe.as_deref(),
            a.rounds,
            ctx,
        )?;
        if let Start::Resume(state) = &planned.start {
            eprintln!(
                "bat run: resuming {} after round {} of {}",
                planned.run_id, state.completed_rounds, planned.campaign.rounds
            );
        }
        if let Some(from) = &planned.followed_promoted {
            eprintln!(
                "bat run: a revert moved the promoted ref after the last round; continuing from {from}"
            );
        }
        return Ok(planned);
    }
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let run_id = new_run_id(secs, std::process::id());
    // Two seed arms of one process start within a second: the branch keeps
    // their run ids (and work dirs) apart.
    let run_id = match (&a.seeds, arm.seed) {
        (Some(_), Some(s)) => format!("{run_id}-s{s}"),
        _ => run_id,
    };
    let planned = plan_fresh(&fresh_request(a, arm)?, layout, run_id)?;
    let seed = planned.campaign.seed();
    if Backend::from(a.backend) == Backend::Sim {
        eprintln!(
            "bat run: simulator campaign {} (seed {seed}), work dir {}",
            planned.run_id,
            planned.campaign.work_dir.display()
        );
    } else {
        eprintln!(
            "bat run: campaign {} (seed {seed}), work dir {}",
            planned.run_id,
            planned.campaign.work_dir.display()
        );
    }
    Ok(planned)
}

/// Take the ledger's run lock, or refuse naming its holder.
fn take_lock(a: &RunArgs, g: &Session, dir: &std::path::Path) -> Result<RunLock, CliError> {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let info = LockInfo::for_current_process(g.argv.join(" "), secs);
    match RunLock::acquire(dir, info, a.break_lock) {
        Ok((lock, how)) => {
            match how {
                Acquired::Free => {}
                Acquired::Stale(old) => eprintln!(
                    "bat run: note: took over the stale run lock of pid {} ({}); none of its processes runs any more",
                    old.pid, old.command
                ),
                Acquired::Broken(old) => eprintln!(
                    "bat run: warning: broke the run lock of pid {} ({}), which still runs: {}",
                    old.pid,
                    old.command,
                    old.living().join(", ")
                ),
            }
            Ok(lock)
        }
        Err(e) => Err(e.into()),
    }
}

/// The hint after a failed or interrupted run: `--resume` only when there
/// is a committed round to resume from.
fn next_step(
    resumable: bool,
    campaign: &bat::round::campaign::Campaign,
    user_work_dir: bool,
) -> String {
    if resumable {
        format!(
            "completed rounds stay committed; fix the cause and run `bat run --resume`{}",
            campaign
                .branch
                .as_ref()
                .map(|b| format!(" --branch {b}"))
                .unwrap_or_default()
        )
    } else if user_work_dir {
        format!(
            "no round of this campaign was committed, so there is nothing to resume: fix the cause, remove {} (or pick another --work-dir) and start the campaign again",
            campaign.work_dir.display()
        )
    } else {
        "no round of this campaign was committed, so there is nothing to resume: fix the cause and start the campaign again".into()
    }
}

/// The campaigns of this `bat run`, every branch checked before anything
/// runs: one, or one per seed of `--seeds` (finished seed arms are left out
/// of a `--resume` and returned as the second value).
fn arms(a: &RunArgs, ledger: &bat_ledger::Ledger) -> Result<(Vec<ArmSpec>, Vec<u64>), CliError> {
    if a.new && a.resume {
        return Err(ArmError::NewWithResume.into());
    }
    let Some(given) = &a.seeds else {
        let root = if a.resume {
            false
        } else {
            check_fresh_arm(ledger, a.branch.as_deref(), a.new)?.root
        };
        let arm = ArmSpec {
            branch: a.branch.clone(),
            seed: a.seed,
            root,
        };
        return Ok((vec![arm], Vec::new()));
    };
    let name = a.branch.as_deref().ok_or(ArmError::SeedsNeedBranch)?;
    let seeds = parse_seeds(given)?;
    let mut out = Vec::new();
    let mut finished = Vec::new();
    for seed in seeds {
        let branch = seed_branch(name, seed);
        if !a.resume {
            check_fresh_arm(ledger, Some(&branch), true)?;
            out.push(ArmSpec {
                branch: Some(branch),
                seed: Some(seed),
                root: true,
            });
            continue;
        }
        let last = find_last_round(ledger, &format!("refs/heads/{branch}"))
            .map_err(CampaignError::from)?
            .ok_or_else(|| ArmError::SeedNotStarted {
                seed,
                branch: branch.clone(),
                name: name.to_string(),
            })?;
        let total = a.rounds.unwrap_or(last.loop_meta.campaign.rounds);
        if last.loop_meta.round_number >= total {
            finished.push(seed);
            continue;
        }
        out.push(ArmSpec {
            branch: Some(branch),
            seed: Some(seed),
            root: false,
        });
    }
    Ok((out, finished))
}

/// How one campaign of the run ended.
enum ArmEnd {
    /// All its rounds are committed (by the run with this id; why held
    /// rounds held, by round id).
    Complete(LoopOutcome, String, Holds),
    /// Stopped by a signal: exit with this code.
    Stopped(ExitCode),
}

/// Plan and run one campaign, committing its rounds.
#[allow(clippy::too_many_arguments)]
fn run_arm(
    a: &RunArgs,
    arm: &ArmSpec,
    g: &Session,
    ledger: &mut bat_ledger::Ledger,
    lock: &mut RunLock,
    supervision: Supervision,
    declared: &[bat::round::provenance::DeclaredVar],
    hook: Option<&Vec<String>>,
) -> Result<(Campaign, ArmEnd), CliError> {
    let layout = RunsLayout::new(ledger.dir());
    let live_dir = ledger.dir().to_path_buf();
    // Ledger reads and writes of the run (resume checkouts, round and
    // checkpoint commits) draw bars on a terminal and stop on Ctrl-C.
    let bars = Bars::new(g);
    let ctx = bat::Ctx::new(&bars, g.cancel());
    let PlannedRun {
        campaign,
        run_id,
        start,
        prune_round_dirs: prune,
        followed_promoted: _,
    } = plan(a, arm, ledger, &layout, ctx).map_err(|e| {
        // Ctrl-C during a resume's checkouts: nothing ran, nothing changed.
        if g.cancel().load(std::sync::atomic::Ordering::Relaxed) {
            CliError::interrupted(e.message)
        } else {
            e
        }
    })?;
    let pack = Pack::load_or_default(campaign.pack.as_deref())?;
    let log_dir = layout.log_dir(&run_id);
    let mut options = round_commit_options(&campaign, &pack);
    options.orphan_branch = arm.root;
    options.code_inputs = super::run_code::code_inputs(a, &campaign, declared.to_vec())?;
    let inner = LedgerSink {
        ledger,
        options,
        ctx,
    };
    let mut sink: Box<dyn RoundSink + '_> = match hook {
        Some(argv) => Box::new(HookSink {
            inner,
            hook: RoundHook {
                argv: argv.clone(),
                timeout: std::time::Duration::from_secs_f64(a.on_round_timeout),
                log_dir: Some(log_dir.clone()),
            },
            runs: Vec::new(),
        }),
        None => Box::new(inner),
    };
    let mut observer = Supervised {
        inner: CliObserver {
            lock,
            recorded: 0,
            record_delay: g.child_record_delay.clone(),
            holds: Default::default(),
        },
        supervision,
    };
    // The live file `bat serve --ui` shows (best effort: a failed write
    // is reported once and never stops the run).
    let feed = LiveFeed::start(FeedInfo {
        ledger_dir: live_dir,
        work_dir: campaign.work_dir.clone(),
        run_id: run_id.clone(),
        branch: campaign.branch.clone(),
        rounds_total: u32::try_from(campaign.rounds).unwrap_or(0),
    });
    let mut live = LiveObserver::new(&mut observer, feed);
    let result = run_loop(
        &campaign,
        start,
        &RunOptions {
            pack: &pack,
            log_dir: Some(&log_dir),
            run_id: &run_id,
            prune_round_dirs: prune,
        },
        &mut live,
        sink.as_mut(),
    );
    let ended = match &result {
        Ok(_) => RunStatus::Complete,
        Err(_) if super::interrupt::signal().is_some() => RunStatus::Stopped,
        Err(_) => RunStatus::Failed,
    };
    if let Some(e) = live.finish(ended) {
        eprintln!("bat run: warning: cannot write the live state for bat serve --ui: {e}");
    }
    drop(sink);
    let resumable = a.resume || observer.inner.recorded > 0;
    let user_work_dir = !a.resume && a.work_dir.is_some();
    match result {
        Ok(o) => Ok((campaign, ArmEnd::Complete(o, run_id, observer.inner.holds))),
        Err(e) => {
            let hint = format!(
                "{} (logs: {})",
                next_step(resumable, &campaign, user_work_dir),
                log_dir.display()
            );
            if let Some(sig) = super::interrupt::signal() {
                // Stopped between rounds: nothing was in progress.
                let between = matches!(e, bat::engine::rounds::LoopError::Interrupted { .. });
                let code = super::interrupt::report_stopped(sig, &e, between, hint);
                return Ok((campaign, ArmEnd::Stopped(code)));
            }
            Err(CliError::from(e).with_hint(hint))
        }
    }
}

/// The head commit of a seed arm's branch, for the report.
fn head_of(ledger: &bat_ledger::Ledger, branch: &str) -> String {
    ledger
        .resolve(&format!("refs/heads/{branch}"))
        .map(|c| c.to_string())
        .unwrap_or_default()
}

/// Why each held round held, by round id.
type Holds = std::collections::BTreeMap<String, String>;

/// Run `bat run`.
pub fn run(a: RunArgs, g: &Session) -> CliResult {
    let code = run_arms(a, g)?;
    // After the ledger handle and the run lock are released: gc needs the
    // ledger to itself.
    if code == ExitCode::SUCCESS {
        super::gc::auto(g, "run")?;
    }
    Ok(code)
}

/// The run itself: every arm, then the report.
fn run_arms(a: RunArgs, g: &Session) -> CliResult {
    let supervision = a.grace.supervision()?;
    let hook = read_hook(&a)?;
    let mut ledger = open(g)?;
    let declared = super::run_code::preflight(&a, &ledger)?;
    let mut lock = take_lock(&a, g, ledger.dir())?;
    // Every branch is checked before the first child runs.
    let (specs, finished) = arms(&a, &ledger)?;
    // From here on SIGINT/SIGTERM are caught and forwarded to the child.
    super::interrupt::install();
    let mut seed_rows = Vec::new();
    for seed in &finished {
        let branch = seed_branch(a.branch.as_deref().unwrap_or_default(), *seed);
        eprintln!("bat run: {branch} is finished; nothing to resume");
        seed_rows.push(serde_json::json!({
            "seed": seed, "branch": branch, "head": head_of(&ledger, &branch),
            "status": "already complete",
        }));
    }
    for arm in &specs {
        if let (Some(_), Some(b)) = (&a.seeds, &arm.branch) {
            eprintln!("bat run: seed {} on {b}", arm.seed.unwrap_or_default());
        }
        let (campaign, end) = run_arm(
            &a,
            arm,
            g,
            &mut ledger,
            &mut lock,
            supervision,
            &declared,
            hook.as_ref(),
        )?;
        let (outcome, run_id, holds) = match end {
            ArmEnd::Complete(o, run_id, holds) => (o, run_id, holds),
            ArmEnd::Stopped(code) => return Ok(code),
        };
        // The arm's branch, or HEAD when the run committed to it.
        let rev = arm.branch.as_deref().unwrap_or("HEAD");
        let Some(branch) = arm.branch.as_deref().filter(|_| a.seeds.is_some()) else {
            if g.json {
                out!("{}", json::pretty_json_file(&outcome.document()));
            } else {
                print_summary(&ledger, &campaign, rev, &run_id, &outcome, &holds)?;
            }
            return Ok(ExitCode::SUCCESS);
        };
        let head = head_of(&ledger, branch);
        if !g.json {
            outln!("seed {} on {branch} (head {head}):", campaign.seed());
            print_summary(&ledger, &campaign, rev, &run_id, &outcome, &holds)?;
        }
        let run: serde_json::Value =
            serde_json::from_str(&json::pretty_json_file(&outcome.document()))
                .map_err(|e| CliError::new(format!("cannot encode the run report: {e}")))?;
        seed_rows.push(serde_json::json!({
            "seed": campaign.seed(), "branch": branch, "head": head,
            "status": "complete", "run": run,
        }));
    }
    if g.json {
        print_json(&serde_json::json!({
            "experiment": a.branch, "arms": seed_rows,
        }))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The closing summary: every round of the run, reverted promotions marked
/// as such, and the promoted round the next round starts from.
fn print_summary(
    ledger: &bat_ledger::Ledger,
    campaign: &bat::round::campaign::Campaign,
    rev: &str,
    run_id: &str,
    outcome: &bat::engine::rounds::LoopOutcome,
    holds: &Holds,
) -> Result<(), CliError> {
    // This run's round commits by round id, and the rounds reverted since.
    let mut commits = std::collections::BTreeMap::new();
    let mut reverted = std::collections::BTreeSet::new();
    if let Ok(head) = ledger.resolve(rev) {
        let mut cur = Some(head);
        while let Some(id) = cur {
            let c = ledger.read_commit(&id).map_err(CliError::from)?;
            let m = &c.metadata;
            let str_of = |k: &str| m.get(k).and_then(serde_json::Value::as_str);
            if str_of("kind") == Some("bat_revert") {
                reverted.extend(str_of("reverts").map(str::to_string));
            }
            let run = m.get("loop").and_then(|l| l.get("run_id"));
            if run.and_then(serde_json::Value::as_str) == Some(run_id) {
                if let Some(rid) = bat::round::meta::round_id_of(m) {
                    commits.entry(rid.to_string()).or_insert(id.to_string());
                }
            }
            cur = c.parents.first().copied();
        }
    }
    outln!(
        "campaign complete: {} rounds, work dir {}",
        campaign.rounds,
        campaign.work_dir.display()
    );
    for h in &outcome.history {
        let undone = commits
            .get(&h.round_id)
            .is_some_and(|c| reverted.contains(c));
        outln!(
            "  {}  {:<3} {:<8} candidate {}{}{}",
            h.round_id,
            h.target_stage,
            h.gate_status.map_or("", |s| s.as_str()),
            h.candidate_checkpoint_sha256.get(..12).unwrap_or(""),
            hold_suffix(holds, &h.round_id),
            if undone { "  (reverted)" } else { "" }
        );
    }
    let promoted = bat::round::promoted_round(ledger, rev).map_err(CliError::from)?;
    outln!(
        "promoted {}",
        promoted
            .map(|p| format!(
                "round {} ({}), candidate {}",
                p.round_id,
                p.commit.0.short(),
                p.candidate_checkpoint_sha256.get(..12).unwrap_or("")
            ))
            .unwrap_or_else(|| "none: the next round starts from the initial checkpoint".into())
    );
    outln!(
        "current checkpoint {}, next target {}",
        outcome.current_checkpoint_sha256,
        outcome.next_target_stage
    );
    Ok(())
}

/// `--backend`: the command line's spelling of [`Backend`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendArg {
    /// External argv templates (--trainer, --evaluator).
    Command,
    /// The embedded simulator (`bat sim train|evaluate` children).
    Sim,
}

impl From<BackendArg> for Backend {
    fn from(b: BackendArg) -> Self {
        match b {
            BackendArg::Command => Backend::Command,
            BackendArg::Sim => Backend::Sim,
        }
    }
}
