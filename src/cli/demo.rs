//! `bat demo`: a BaT campaign and its terminal-reward ablation in a new
//! ledger, compared.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::compare_text::render;
use super::ledger_common::display_path;
use super::round_progress::RoundProgress;
use super::{print_json, CliError, CliResult, Session};
use bat::demo::{self, DemoOptions, DEMO_ROUNDS};

/// Run a first session with the embedded simulator: create a ledger, run a
/// 10-round BaT campaign on branch `main` (one commit per round), replay
/// the whole chain as a terminal-reward GRPO ablation at the same compute
/// on a replay branch, and print the comparison (base → final Overall,
/// task, agentic and S1–S5 per arm, measured compute), the ledger's
/// location and the commands to try next.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where to create the ledger (new or empty). Default: a new directory
    /// under the system temporary directory, whose path is printed.
    pub dir: Option<PathBuf>,
    /// Campaign seed of the simulator.
    #[arg(long, value_name = "S", default_value_t = bat::sim::DEFAULT_SEED)]
    pub seed: u64,
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
        Some(d) => d,
        None => tempfile::Builder::new()
            .prefix("bat-demo-")
            .tempdir()
            .map_err(|e| CliError::new(format!("cannot create a temporary directory: {e}")))?
            .keep(),
    };
    let dir = display_path(&dir);
    let bat = std::env::current_exe()
        .map_err(|e| CliError::new(format!("cannot find the bat binary: {e}")))?;
    let (cmd, not_on_path) = command_name(&bat);
    let mut progress = RoundProgress::new("bat demo", g.json, false);
    let report = demo::run_demo(
        &dir,
        &DemoOptions {
            rounds: args.rounds,
            batches: args.batches,
            seed: args.seed,
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
        "BaT campaign ({} rounds, simulator seed {}) vs. terminal-reward GRPO replay at the same compute\n",
        report.rounds, report.seed
    );
    out!("{}", render(&report.comparison, g.paint));
    outln!();
    outln!("ledger      {d}/.bat");
    outln!(
        "arm A       branch {} (BaT: stage rewards, S-targets)",
        report.campaign_branch
    );
    outln!("arm B       branch {b} (replay of every round with reward=terminal)");
    outln!("took        {:.1} s", started.elapsed().as_secs_f64());
    outln!();
    outln!("next:");
    if not_on_path {
        outln!("  # `bat` on PATH is not this binary, so the commands name it by path;");
        outln!("  # `cargo install --path .` in the bat checkout puts it on PATH");
    }
    outln!("  {cmd} -C {d} log");
    outln!("  {cmd} -C {d} log {b}");
    outln!("  {cmd} -C {d} compare main {b}");
    let last = report
        .comparison
        .a
        .rounds
        .last()
        .map(|r| r.round_id.clone())
        .unwrap_or_else(|| "r01".into());
    outln!("  {cmd} -C {d} diff main {b}        # the two arms' last rounds, section by section");
    let verify_round = if report.rounds >= 3 {
        "r03"
    } else {
        last.as_str()
    };
    outln!(
        "  {cmd} -C {d} replay {verify_round} --verify  # re-run a round: bit-identical artifacts"
    );
    outln!("  {cmd} -C {d} replay r01..{last} --ablate target=S3");
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
