//! `bat reward score`: score rollouts the way a trainer's reward function
//! does (contract §C.6 runtime scoring), one payload per input line. The
//! Python port (`examples/backends/bat_reward.py`) prints the same bytes for
//! the same input; `tests/reward_cross.rs` holds both to it.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::{CliError, CliResult, Session};
use bat_contract::json;
use bat_contract::pack::Pack;
use bat_contract::reward_score::{self, ScoreMode};

/// Reward verbs.
#[derive(Debug, Args)]
pub struct RewardArgs {
    /// The reward verb.
    #[command(subcommand)]
    pub command: RewardCommand,
}

/// `bat reward …`
#[derive(Debug, Subcommand)]
pub enum RewardCommand {
    /// Score rollouts: each line of FILE is a row's `extra_info` carrying
    /// `bat_agentic_summary` and `bat_sandbox_evidence`; prints one
    /// canonical-JSON payload per line (errors are payloads with `error`).
    Score(ScoreArgs),
}

/// `bat reward score FILE [--mode stage|terminal] [--pack F]`
#[derive(Debug, Args)]
pub struct ScoreArgs {
    /// JSONL input, one `extra_info` value per line (`-` reads stdin).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// `stage` (the BaT rubric) or `terminal` (final outcome only).
    #[arg(long, value_name = "M", default_value = "stage")]
    pub mode: String,
    /// Benchmark pack (default: the embedded pack).
    #[arg(long, value_name = "F")]
    pub pack: Option<PathBuf>,
}

/// Run `bat reward …`.
pub fn run(args: RewardArgs, _g: &Session) -> CliResult {
    let RewardCommand::Score(a) = args.command;
    let mode = ScoreMode::parse(&a.mode).ok_or_else(|| {
        CliError::new(format!("unknown reward mode {:?}", a.mode))
            .with_hint("use --mode stage or --mode terminal")
            .usage()
    })?;
    let pack = Pack::load_or_default(a.pack.as_deref())?;
    let k = pack.contract()?;
    // Untrusted input: at most the JSON limit (512 MiB) is read, so an
    // endless stream (`/dev/zero`, a runaway pipe) is refused, not buffered.
    let bytes = if a.file.as_os_str() == "-" {
        bat_contract::fsutil::read_json_stdin()
            .map_err(|e| CliError::new(format!("cannot read stdin: {e}")))?
    } else {
        bat_contract::fsutil::read_json_input(&a.file)
            .map_err(|e| CliError::new(format!("cannot read {}: {e}", a.file.display())))?
    };
    let text = String::from_utf8(bytes).map_err(|e| {
        CliError::new(format!(
            "cannot read {}: not UTF-8 text (byte {})",
            a.file.display(),
            e.utf8_error().valid_up_to()
        ))
    })?;
    let mut out = std::io::stdout().lock();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let extra = json::parse(line)
            .map_err(|e| CliError::new(format!("{}:{}: {e}", a.file.display(), n + 1)))?;
        let payload = reward_score::score(&k, &extra, mode);
        // Payload floats are finite by construction (scores in [0, 1]).
        let cj = json::canonical_json(&payload)
            .map_err(|e| CliError::new(format!("line {}: {e}", n + 1)))?;
        writeln!(out, "{cj}").map_err(super::error::stdout_error)?;
    }
    Ok(ExitCode::SUCCESS)
}
