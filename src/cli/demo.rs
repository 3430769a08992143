//! `bat demo`: a small experiment in a new ledger — BaT campaigns and their
//! terminal-reward ablations over several seeds, compared with confidence
//! intervals.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::compare_text::render_experiment;
use super::ledger_common::display_path;
use super::round_progress::RoundProgress;
use super::{print_json, CliError, CliResult, Session};
use bat::demo::{self, DemoOptions, DEMO_ROUNDS, DEMO_SEEDS};

/// Run a first session with the embedded simulator: create a ledger; for
/// each of 3 seeds run a 10-round BaT campaign as its own arm `bat/s<seed>`
/// (one commit per round) and replay its whole chain as a terminal-reward
/// GRPO ablation at the same compute on `terminal/s<seed>`; then compare
/// the two arms with bootstrap confidence intervals (mean, IQM, the
/// difference, the probability of improvement and a verdict) and print the
/// ledger's location and the commands to try next. `main` names the first
/// seed's BaT arm.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where to create the ledger (new or empty). Default: a new directory
    /// under the system temporary directory, whose path is printed.
    pub dir: Option<PathBuf>,
    /// The first seed of the simulator; the others follow it.
    #[arg(long, value_name = "S", default_value_t = bat::sim::DEFAULT_SEED)]
    pub seed: u64,
    /// Seeds per arm.
    #[arg(long, value_name = "N", default_value_t = DEMO_SEEDS, value_parser = clap::value_parser!(u64).range(1..=20))]
    pub seeds: u64,
    /// Rounds per arm (for quick checks).
    #[arg(long, value_name = "N", default_value_t = DEMO_ROUNDS, hide = true)]
    pub rounds: i64,
    /// Batches per round (for quick checks).
    #[arg(long, value_name = "N", default_value_t = bat::sim::DEFAULT_BATCHES, hide = true)]
    pub batches: i64,
}

/// Run `bat demo`.
pub fn run(args: DemoArgs, g: &Session) -> CliResult {
    let started = std::time::Instant::now();
    let dir = match args.dir {
        Some(d) => {
            super::output_path::refuse_inside_ledger(&d, "the demo directory")?;
            d
        }
        None => tempfile::Builder::new()
            .prefix("bat-demo-")
            .tempdir()
            .map_err(|e| CliError::new(format!("cannot create a temporary directory: {e}")))?
            .keep(),
    };
    let dir = display_path(&dir);
    let bat =
        super::self_exe().map_err(|e| CliError::new(format!("cannot find the bat binary: {e}")))?;
    let (cmd, not_on_path) = command_name(&bat);
    let mut progress = RoundProgress::new("bat demo", g.json, false);
    let report = demo::run_demo(
        &dir,
        &DemoOptions {
            rounds: args.rounds,
            batches: args.batches,
            seed: args.seed,
            seeds: args.seeds,
            bat,
        },
        &mut progress,
        &bat::Ctx::new(&bat_ledger::NoProgress, g.cancel()),
    );
    progress.finish();
    let report = report?;
    if g.json {
        print_json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    let d = report.dir.display();
    let b = &report.replay_branch;
    outln!(
        "BaT vs. terminal-reward GRPO at the same compute: {} seeds x {} rounds per arm (simulator)\n",
        report.seeds.len(),
        report.rounds
    );
    out!("{}", render_experiment(&report.experiment, None, g.paint));
    outln!();
    outln!("ledger        {d}/.bat");
    outln!(
        "arm bat       {} (BaT: stage rewards, S-targets)",
        report.bat_branches.join(", ")
    );
    outln!(
        "arm terminal  {} (replays of every round with reward=terminal)",
        report.terminal_branches.join(", ")
    );
    outln!("main          = {} (HEAD)", report.bat_branches[0]);
    outln!("took          {:.1} s", started.elapsed().as_secs_f64());
    outln!();
    outln!("next:");
    if not_on_path {
        outln!("  # `bat` on PATH is not this binary, so the commands name it by path;");
        outln!("  # `cargo install --path .` in the bat checkout puts it on PATH");
    }
    outln!("  {cmd} -C {d} log --graph --all");
    outln!("  {cmd} -C {d} compare 'bat/*' 'terminal/*' --per-round");
    let last = report
        .comparison
        .a
        .rounds
        .last()
        .map(|r| r.round_id.clone())
        .unwrap_or_else(|| "r01".into());
    outln!(
        "  {cmd} -C {d} diff main {b}        # seed {}'s two arms, section by section",
        report.seed
    );
    let verify_round = if report.rounds >= 3 {
        "r03"
    } else {
        last.as_str()
    };
    outln!(
        "  {cmd} -C {d} replay {verify_round} --verify  # re-run a round: bit-identical artifacts"
    );
    outln!("  {cmd} -C {d} report 'bat/*' 'terminal/*' -o report.html");
    Ok(ExitCode::SUCCESS)
}

/// How the printed commands name bat: `bat` when the `bat` found on PATH is
/// this very binary, else this binary's path (shell-quoted), so that every
/// command the demo prints runs as printed. The flag says it was not on PATH.
fn command_name(exe: &std::path::Path) -> (String, bool) {
    let me = std::fs::canonicalize(exe).unwrap_or_else(|_| exe.to_path_buf());
    let on_path = std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path)
            .any(|dir| std::fs::canonicalize(dir.join("bat")).is_ok_and(|found| found == me))
    });
    if on_path {
        return ("bat".to_string(), false);
    }
    let text = exe.display().to_string();
    let plain = !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@+%".contains(&b));
    let quoted = if plain {
        text
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    };
    (quoted, true)
}
