//! `bat replay REV|A..B [--ablate KEY=VALUE]... [--verify] [--branch NAME]`

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::interrupt::{GraceArgs, Supervised};
use super::ledger_common::{open, short};
use super::round_progress::RoundProgress;
use super::{print_json, CliError, CliResult, Session};
use bat::replay::{
    default_work_dir, parse_ablations, replay, ComputeSide, ReplayReport, ReplayRequest,
    DEFAULT_TOLERANCE,
};

/// Run recorded rounds again from the ledger's own inputs (starting
/// checkpoint, the round view re-materialized and checked against its
/// digest, reward contracts, seeds, trainer and evaluator templates).
///
/// With --verify the rounds are reproduced and compared with the record:
/// every artifact bit for bit for the built-in simulator, the candidate's
/// scores within --tolerance for external backends. Otherwise the replayed
/// rounds are committed to a replay branch, linked to the originals
/// (`replay_of`), at the same compute budget.
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
    /// (always inherit the candidate), batches=N (changes compute).
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
    /// Per-score tolerance of a verify with external backends.
    #[arg(long, value_name = "X", default_value_t = DEFAULT_TOLERANCE)]
    pub tolerance: f64,
    /// With --verify: fail (exit 1) on any difference, even one within
    /// --tolerance — a differing artifact or any score delta.
    #[arg(long, requires = "verify")]
    pub strict: bool,
    /// Folder for the replay's work files; must not exist (default:
    /// .bat/replays/<id>).
    #[arg(long, value_name = "W")]
    pub work_dir: Option<PathBuf>,
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
            if v.strict && !v.passed {
                outln!(
                    "     verify   DIFFERS (strict): max |Δscore| {:.6}; {} of {} artifacts differ{}",
                    v.max_score_delta,
                    v.differing.len(),
                    v.compared,
                    v.differing
                        .first()
                        .map(|p| format!(", first {p}"))
                        .unwrap_or_default()
                );
                continue;
            }
            match (v.passed, v.mode) {
                (true, bat::replay::VerifyMode::Exact) => outln!(
                    "     verify   reproduced bit for bit: {}/{} artifacts identical",
                    v.identical, v.compared
                ),
                (true, bat::replay::VerifyMode::Tolerance) => outln!(
                    "     verify   reproduced within tolerance {}: max |Δscore| {:.6}; {}/{} artifacts identical{}",
                    v.tolerance,
                    v.max_score_delta,
                    v.identical,
                    v.compared,
                    if v.differing.is_empty() {
                        String::new()
                    } else {
                        format!(" (differ: {})", v.differing.join(", "))
                    }
                ),
                (false, bat::replay::VerifyMode::Exact) => outln!(
                    "     verify   DIFFERS: first differing artifact {} ({} of {} differ)",
                    v.differing.first().map(String::as_str).unwrap_or("?"),
                    v.differing.len(),
                    v.compared
                ),
                (false, bat::replay::VerifyMode::Tolerance) => outln!(
                    "     verify   DIFFERS: max |Δscore| {:.6} > tolerance {}; first differing artifact {}",
                    v.max_score_delta,
                    v.tolerance,
                    v.differing.first().map(String::as_str).unwrap_or("-")
                ),
            }
        }
    }
    if let Some(b) = &r.branch {
        outln!("replay branch {b}");
    }
    Ok(())
}

/// Before anything runs: refuse when a variable a round's template
/// declared is unset (naming them); warn about declared variables set to
/// another value and, with --verify, about code files changed since their
/// round was recorded (a warning: the verdict comes from the artifacts).
fn check_recorded_inputs(a: &ReplayArgs, ledger: &bat_ledger::Ledger) -> Result<(), CliError> {
    let recorded = bat::replay::code::recorded_inputs(ledger, &a.rev)?;
    let lookup = |n: &str| std::env::var(n).ok();
    for d in bat::replay::code::check_environment(&recorded, &lookup)? {
        eprintln!(
            "bat replay: warning: {} is set to another value than {} recorded{}",
            d.name,
            d.round_id,
            d.recorded
                .map(|v| format!(" ({v:?})"))
                .unwrap_or_else(|| " (a digest)".into())
        );
    }
    if a.verify {
        let changes = bat::replay::code::code_changes(&recorded);
        for c in &changes {
            eprintln!("bat replay: warning: code {}", c.line());
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
    let mut overrides = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        overrides.push((
            bat::round::campaign::BAT_PLACEHOLDER.to_string(),
            exe.to_string_lossy().into_owned(),
        ));
    }
    let req = ReplayRequest {
        rev: a.rev.clone(),
        ablations,
        verify: a.verify,
        branch: a.branch.clone(),
        allow_compute_change: a.allow_compute_change,
        tolerance: a.tolerance,
        strict: a.strict,
        placeholder_overrides: overrides,
        work_dir,
        prune_round_dirs: a.work_dir.is_none(),
        author: "bat replay".into(),
    };
    // From here on SIGINT/SIGTERM are caught and forwarded to the child.
    super::interrupt::install();
    let mut observer = Supervised {
        inner: RoundProgress::new("bat replay", g.json, false),
        supervision,
    };
    // The rounds' bar is the progress shown; Ctrl-C also stops a checkout
    // or a round commit at a safe point.
    let ctx = bat::Ctx::new(&bat_ledger::NoProgress, g.cancel());
    let report = replay(&mut ledger, &req, &mut observer, &ctx);
    observer.inner.finish();
    let report = match report {
        Ok(r) => r,
        Err(e) => match super::interrupt::signal() {
            Some(sig) => {
                // Stopped before a round started: none was in progress.
                let between = matches!(
                    e,
                    bat::replay::ReplayError::Loop(
                        bat::engine::rounds::LoopError::Interrupted { .. }
                    )
                );
                let hint = if a.verify {
                    "a verify commits nothing; run it again to check the rounds".to_string()
                } else {
                    format!(
                        "rounds replayed before it stay committed on the replay branch; the work files are in {}",
                        req.work_dir.display()
                    )
                };
                return Ok(super::interrupt::report_stopped(sig, &e, between, hint));
            }
            None => return Err(e.into()),
        },
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
                format!(
                    "round {} did not reproduce: {}",
                    r.round_id,
                    v.differing
                        .first()
                        .map(|p| format!("first differing artifact {p}"))
                        .unwrap_or_else(|| format!(
                            "max |Δscore| {:.6} exceeds {}",
                            v.max_score_delta,
                            if v.strict { 0.0 } else { v.tolerance }
                        ))
                )
            })
            .unwrap_or_else(|| "the replay did not reproduce".into());
        return Err(CliError::new(what));
    }
    if report.reproduced == Some(true) && !g.json {
        outln!("reproduced: {} round(s)", report.rounds.len());
    }
    Ok(ExitCode::SUCCESS)
}
