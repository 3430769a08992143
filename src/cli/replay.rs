//! `bat replay REV|A..B [--ablate KEY=VALUE]... [--verify] [--branch NAME]`

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::interrupt::{GraceArgs, Supervised};
use super::ledger_common::{open, short};
use super::round_progress::RoundProgress;
use super::{print_json, CliError, CliResult, Session};
use bat::replay::{
    default_work_dir, parse_ablations, replay, replay_branch, Ablation, ComputeSide, ReplayReport,
    ReplayRequest, RoundVerify, VerifyMode,
};

/// Run recorded rounds again from the ledger's own inputs (starting
/// checkpoint, the round view re-materialized and checked against its
/// digest, reward contracts, seeds, trainer and evaluator templates).
///
/// With --verify the rounds are reproduced and compared with the record,
/// every artifact bit for bit whatever the backend: the first differing
/// artifact fails (exit 1) and is named. --tolerance X accepts rounds whose
/// scores all agree within X, and says "NOT bit-identical; within tolerance
/// X" for each. Otherwise the replayed rounds are committed to a replay
/// branch, linked to the originals (`replay_of`), at the same compute
/// budget.
///
/// Work files (restored checkpoint, every round's data and checkpoint, the
/// child logs) go to .bat/replays/<id>/; that folder is removed when the
/// replay succeeds and kept, with its path printed, when it fails (`bat gc`
/// removes it later).
///
/// The trainer and evaluator run in a process group of their own, as with
/// `bat run`: SIGINT/SIGTERM are forwarded to it, what still lives after
/// --grace-period is killed, bat exits 130 (SIGINT) or 143 (SIGTERM), and
/// the round in progress is not committed.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// A round (commit, round id like r03, or branch), or a chain `A..B`
    /// (every round from A to B on B's first-parent history).
    pub rev: String,
    /// Override (repeatable): reward=terminal (terminal reward only, no
    /// stage targeting), target=S1..S5 (fixed S-target), mixture=uniform
    /// (no S-target pool: stage rows spread evenly over S1..S5), gate=off
    /// (always inherit the candidate), batches=N (changes compute),
    /// seed=N (another campaign seed for the {seed} placeholder; the same
    /// compute).
    #[arg(long = "ablate", value_name = "KEY=VALUE")]
    pub ablate: Vec<String>,
    /// Reproduce and compare with the record; commits nothing.
    #[arg(long, conflicts_with_all = ["ablate", "branch"])]
    pub verify: bool,
    /// The replay branch (default: replay/<short-id>[-<key>-<value>]).
    #[arg(long, value_name = "NAME")]
    pub branch: Option<String>,
    /// Allow an override that changes the compute budget.
    #[arg(long)]
    pub allow_compute_change: bool,
    /// With --verify: accept a round that is not bit-identical when each
    /// of its scores is within X of the record (e.g. 0.02 for GPU
    /// nondeterminism); the output then says "NOT bit-identical".
    #[arg(long, value_name = "X", requires = "verify")]
    pub tolerance: Option<f64>,
    /// Accepted for older scripts: a verify is bit-exact by default.
    #[arg(long, requires = "verify", conflicts_with = "tolerance")]
    pub strict: bool,
    /// Folder for the replay's work files; must not exist (default:
    /// .bat/replays/<id>, removed after success). A folder named here is
    /// kept.
    #[arg(long, value_name = "W")]
    pub work_dir: Option<PathBuf>,
    /// One replay branch per seed, one after another, at the same compute:
    /// `<replay-branch>/s<seed>`, each with `--ablate seed=<seed>` added. A
    /// half-open range `A..B` (`0..3` = 0, 1, 2) or a list `0,4,7`.
    #[arg(long, value_name = "A..B", conflicts_with = "verify")]
    pub seeds: Option<String>,
    /// `--grace-period SECS` (see [`GraceArgs`]).
    #[command(flatten)]
    pub grace: GraceArgs,
}

/// `steps 40  rollouts 2560  tokens 81920  wall 0.41s`
pub fn compute_text(c: &ComputeSide) -> String {
    let mut parts = Vec::new();
    if let Some(m) = c.measured.as_object() {
        for (k, label) in [
            ("steps", "steps"),
            ("rollouts", "rollouts"),
            ("generated_tokens", "tokens"),
        ] {
            if let Some(v) = m.get(k) {
                parts.push(format!("{label} {v}"));
            }
        }
    }
    if let Some(w) = c.trainer_wall_seconds {
        parts.push(format!("wall {w:.2}s"));
    }
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join("  ")
    }
}

/// The verify line of a round.
pub fn verify_text(v: &RoundVerify) -> String {
    let first = v.differing.first().map(String::as_str).unwrap_or("-");
    match (v.passed, v.bit_identical, v.mode) {
        (true, true, _) => format!(
            "reproduced bit for bit: {}/{} artifacts identical",
            v.identical, v.compared
        ),
        (true, false, _) => format!(
            "{}: max |Δscore| {:.6}; {} of {} artifacts differ: {}",
            v.note.as_deref().unwrap_or("NOT bit-identical"),
            v.max_score_delta,
            v.differing.len(),
            v.compared,
            v.differing.join(", ")
        ),
        (false, _, VerifyMode::Exact) => format!(
            "DIFFERS: first differing artifact {first} ({} of {} differ; --tolerance X accepts score deltas up to X)",
            v.differing.len(),
            v.compared
        ),
        (false, _, VerifyMode::Tolerance) => format!(
            "DIFFERS: max |Δscore| {:.6} > tolerance {}; first differing artifact {first}",
            v.max_score_delta, v.tolerance
        ),
    }
}

/// Print a replay report as text.
pub fn print_report(r: &ReplayReport) -> Result<(), CliError> {
    for x in &r.rounds {
        let o = |k: &str, m: &std::collections::BTreeMap<String, f64>| {
            m.get(k)
                .map(|v| format!("{v:.4}"))
                .unwrap_or_else(|| "-".into())
        };
        outln!(
            "{}  original {}  {} {:<7} overall {}",
            x.round_id,
            short(&x.original),
            x.original_target_stage,
            x.original_gate_status,
            o("overall", &x.original_scores)
        );
        outln!(
            "     replay   {}  {} {:<7} overall {}{}",
            x.commit
                .as_deref()
                .map(|c| short(&c))
                .unwrap_or_else(|| "(verify)    ".into()),
            x.target_stage,
            x.gate_status,
            o("overall", &x.scores),
            if x.inherited && !x.gate_status.is_promote() {
                "  (inherited: gate off)"
            } else {
                ""
            }
        );
        outln!(
            "     budget   {}",
            if x.same_budget {
                "same as the original".to_string()
            } else {
                format!(
                    "CHANGED: {} → {}",
                    x.original_compute.budget, x.compute.budget
                )
            }
        );
        outln!(
            "     compute  original {}",
            compute_text(&x.original_compute)
        );
        outln!("              replay   {}", compute_text(&x.compute));
        if let Some(v) = &x.verify {
            outln!("     verify   {}", verify_text(v));
        }
    }
    if let Some(b) = &r.branch {
        outln!("replay branch {b}");
    }
    Ok(())
}

/// `bat replay --seeds`: one replay branch per seed, every branch checked
/// before the first replay runs.
fn run_seeds(a: &ReplayArgs, given: &str, g: &Session) -> CliResult {
    let supervision = a.grace.supervision()?;
    let mut ledger = open(g)?;
    let ablations = parse_ablations(&a.ablate)?;
    check_recorded_inputs(a, &ledger)?;
    if ablations.iter().any(|x| matches!(x, Ablation::Seed(_))) {
        return Err(
            CliError::new("--ablate seed=N cannot be combined with --seeds")
                .with_hint("--seeds gives each replay branch its own seed; drop --ablate seed=…")
                .usage(),
        );
    }
    let seeds = bat::engine::arms::parse_seeds(given)?;
    let base = replay_branch(&ledger, &a.rev, a.branch.as_deref(), &ablations)?;
    let existing: Vec<String> = ledger
        .list_refs("refs/heads/")
        .map_err(CliError::from)?
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    for s in &seeds {
        let b = bat::engine::arms::seed_branch(&base, *s);
        bat_ledger::refs::validate_ref_name(&b)?;
        if existing.contains(&b) {
            return Err(bat::replay::ReplayError::BranchExists { branch: b }.into());
        }
    }
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let work_root = a
        .work_dir
        .clone()
        .unwrap_or_else(|| default_work_dir(ledger.dir(), secs, std::process::id()));
    let overrides = bat_override();
    super::interrupt::install();
    let mut rows = Vec::new();
    for s in seeds {
        let branch = bat::engine::arms::seed_branch(&base, s);
        let mut with_seed = ablations.clone();
        with_seed.push(Ablation::Seed(s));
        let req = ReplayRequest {
            rev: a.rev.clone(),
            ablations: with_seed,
            verify: false,
            branch: Some(branch.clone()),
            allow_compute_change: a.allow_compute_change,
            tolerance: a.tolerance,
            placeholder_overrides: overrides.clone(),
            work_dir: work_root.join(format!("s{s}")),
            prune_round_dirs: a.work_dir.is_none(),
            author: "bat replay".into(),
        };
        eprintln!("bat replay: seed {s} on {branch}");
        let hint = || {
            format!(
                "seed branches replayed before it stay committed; the work files are in {}",
                req.work_dir.display()
            )
        };
        let report = match run_supervised(&mut ledger, &req, g, supervision, hint)? {
            Ended::Done(r) => r,
            Ended::Stopped(code) => return Ok(code),
        };
        let head = ledger
            .resolve(&format!("refs/heads/{branch}"))
            .map(|c| c.to_string())
            .unwrap_or_default();
        if !g.json {
            outln!("seed {s} on {branch} (head {head}):");
            print_report(&report)?;
        }
        rows.push(serde_json::json!({
            "seed": s, "branch": branch, "head": head, "report": report,
        }));
    }
    if a.work_dir.is_none() {
        // Each seed's folder went after its success; the folder that held
        // them is empty now (an error leaves it, and what failed, in place).
        let _ = std::fs::remove_dir(&work_root);
    }
    if g.json {
        print_json(&serde_json::json!({"replay_branch": base, "arms": rows}))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Before anything runs: refuse when a variable a round's template
/// declared is unset (naming them); warn about declared variables set to
/// another value and, with --verify, about code files changed since their
/// round was recorded (a warning: the verdict comes from the artifacts).
fn check_recorded_inputs(a: &ReplayArgs, ledger: &bat_ledger::Ledger) -> Result<(), CliError> {
    let recorded = bat::replay::code::recorded_inputs(ledger, &a.rev)?;
    let lookup = |n: &str| std::env::var(n).ok();
    // Names, round ids and paths come from the stored rounds: their
    // control characters are shown as escapes.
    let safe = |s: &str| super::term::neutralize(s, &[]).into_owned();
    for d in bat::replay::code::check_environment(&recorded, &lookup)? {
        eprintln!(
            "bat replay: warning: {} is set to another value than {} recorded{}",
            safe(&d.name),
            safe(&d.round_id),
            d.recorded
                .map(|v| format!(" ({v:?})"))
                .unwrap_or_else(|| " (a digest)".into())
        );
    }
    if a.verify {
        let changes = bat::replay::code::code_changes(&recorded);
        for c in &changes {
            eprintln!("bat replay: warning: code {}", safe(&c.line()));
        }
        if !changes.is_empty() {
            eprintln!(
                "bat replay: note: code changes are a warning only; the verdict comes from the replayed artifacts"
            );
        }
    }
    Ok(())
}

/// Run `bat replay`.
pub fn run(a: ReplayArgs, g: &Session) -> CliResult {
    if let Some(given) = &a.seeds {
        return run_seeds(&a, given, g);
    }
    let supervision = a.grace.supervision()?;
    let mut ledger = open(g)?;
    let ablations = parse_ablations(&a.ablate)?;
    check_recorded_inputs(&a, &ledger)?;
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let work_dir = a
        .work_dir
        .clone()
        .unwrap_or_else(|| default_work_dir(ledger.dir(), secs, std::process::id()));
    // A simulator campaign's children are this binary, wherever it is now.
    let overrides = bat_override();
    let req = ReplayRequest {
        rev: a.rev.clone(),
        ablations,
        verify: a.verify,
        branch: a.branch.clone(),
        allow_compute_change: a.allow_compute_change,
        tolerance: a.tolerance,
        placeholder_overrides: overrides,
        work_dir,
        prune_round_dirs: a.work_dir.is_none(),
        author: "bat replay".into(),
    };
    // From here on SIGINT/SIGTERM are caught and forwarded to the child.
    super::interrupt::install();
    let hint = || {
        if a.verify {
            "a verify commits nothing; run it again to check the rounds".to_string()
        } else {
            format!(
                "rounds replayed before it stay committed on the replay branch; the work files are in {}",
                req.work_dir.display()
            )
        }
    };
    let report = match run_supervised(&mut ledger, &req, g, supervision, hint) {
        Ok(Ended::Done(r)) => r,
        Ok(Ended::Stopped(code)) => return Ok(code),
        Err(e) => {
            let e = CliError::from(e);
            // The work files stay for inspection; say where.
            return Err(if req.work_dir.exists() {
                e.with_hint(format!(
                    "the replay's work files are kept in {} (`bat gc` removes them)",
                    req.work_dir.display()
                ))
            } else {
                e
            });
        }
    };
    if g.json {
        print_json(&report)?;
    } else {
        print_report(&report)?;
    }
    if report.reproduced == Some(false) {
        let first = report
            .rounds
            .iter()
            .find(|r| r.verify.as_ref().is_some_and(|v| !v.passed));
        let what = first
            .map(|r| {
                let v = r
                    .verify
                    .as_ref()
                    .expect("a failed round has a verify result");
                match v.mode {
                    VerifyMode::Exact => format!(
                        "round {} did not reproduce bit for bit: first differing artifact {}",
                        r.round_id,
                        v.differing.first().map(String::as_str).unwrap_or("-")
                    ),
                    VerifyMode::Tolerance => format!(
                        "round {} did not reproduce within tolerance {}: max |Δscore| {:.6}{}",
                        r.round_id,
                        v.tolerance,
                        v.max_score_delta,
                        v.differing
                            .first()
                            .map(|p| format!("; first differing artifact {p}"))
                            .unwrap_or_default()
                    ),
                }
            })
            .unwrap_or_else(|| "the replay did not reproduce".into());
        let mut err = CliError::new(what);
        if let Some(w) = &report.work_dir {
            err = err.with_hint(format!(
                "the replay's rounds are kept in {} for comparison",
                w.join("rounds").display()
            ));
        }
        return Err(err);
    }
    if report.reproduced == Some(true) && !g.json {
        match &report.note {
            Some(note) => outln!("reproduced: {} round(s); {note}", report.rounds.len()),
            None => outln!("reproduced: {} round(s) bit for bit", report.rounds.len()),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The simulator's `{bat}`: this binary, wherever it is now.
fn bat_override() -> Vec<(String, String)> {
    super::self_exe()
        .map(|exe| {
            vec![(
                bat::round::campaign::BAT_PLACEHOLDER.to_string(),
                exe.to_string_lossy().into_owned(),
            )]
        })
        .unwrap_or_default()
}

/// How a supervised replay ended without an error.
enum Ended {
    /// It finished.
    Done(ReplayReport),
    /// SIGINT/SIGTERM stopped it (reported): exit with this code.
    Stopped(ExitCode),
}

/// Run one replay with the rounds' progress on stderr and its children
/// supervised (the rounds' bar is the progress shown; Ctrl-C also stops a
/// checkout or a round commit at a safe point). A replay a signal stopped
/// is reported with `stopped_hint`.
fn run_supervised(
    ledger: &mut bat_ledger::Ledger,
    req: &ReplayRequest,
    g: &Session,
    supervision: bat::engine::child::Supervision,
    stopped_hint: impl FnOnce() -> String,
) -> Result<Ended, bat::replay::ReplayError> {
    let mut observer = Supervised {
        inner: RoundProgress::new("bat replay", g.json, false),
        supervision,
    };
    let ctx = bat::Ctx::new(&bat_ledger::NoProgress, g.cancel());
    let result = replay(ledger, req, &mut observer, &ctx);
    observer.inner.finish();
    match result {
        Ok(r) => Ok(Ended::Done(r)),
        Err(e) => match super::interrupt::signal() {
            Some(sig) => {
                // Stopped before a round started: none was in progress.
                let between = matches!(
                    e,
                    bat::replay::ReplayError::Loop(
                        bat::engine::rounds::LoopError::Interrupted { .. }
                    )
                );
                Ok(Ended::Stopped(super::interrupt::report_stopped(
                    sig,
                    &e,
                    between,
                    stopped_hint(),
                )))
            }
            None => Err(e),
        },
    }
}
