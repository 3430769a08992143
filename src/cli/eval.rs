//! `bat eval summarize`: validate a raw evaluation and write its summary
//! (contract §D). Also home of the output-writing helper the evaluation
//! verbs share.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::{CliError, CliResult, Globals};
use crate::contract::json;
use crate::contract::numeric::SumMode;
use crate::contract::pack::Pack;
use crate::contract::summary::build_summary;

/// Evaluation verbs.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// The evaluation verb.
    #[command(subcommand)]
    pub command: EvalCommand,
}

/// `bat eval …`
#[derive(Debug, Subcommand)]
pub enum EvalCommand {
    /// Validate an external evaluator's raw JSON and write the BaT summary.
    Summarize(SummarizeArgs),
    /// Record an audit evaluation summary for a round; audits never drive
    /// gating or targeting.
    Attach(AttachArgs),
}

/// `bat eval attach REV --summary F --role audit --protocol-id P [--pack F]`
#[derive(Debug, Args)]
pub struct AttachArgs {
    /// The round commit being audited.
    #[arg(value_name = "REV")]
    pub rev: String,
    /// The audit's evaluation summary (contract §D output).
    #[arg(long, value_name = "F")]
    pub summary: PathBuf,
    /// Evaluation role; only `audit` is accepted.
    #[arg(long, value_name = "ROLE")]
    pub role: String,
    /// The audit's evaluation protocol id (names the audit).
    #[arg(long = "protocol-id", value_name = "P")]
    pub protocol_id: String,
    /// Benchmark pack giving the stage list (default: the embedded pack).
    #[arg(long, value_name = "F")]
    pub pack: Option<PathBuf>,
    /// Author (default: $BAT_AUTHOR, else $USER, else "unknown").
    #[arg(long)]
    pub author: Option<String>,
}

/// `bat eval summarize` arguments (the reference summarizer's flags).
#[derive(Debug, Args)]
pub struct SummarizeArgs {
    /// The raw evaluator output (JSON).
    #[arg(long, value_name = "FILE")]
    pub raw: PathBuf,
    /// The checkpoint identity recorded in the summary (passed through as given).
    #[arg(long = "checkpoint-sha256", value_name = "HEX")]
    pub checkpoint_sha256: String,
    /// Where to write the summary; an existing file must have identical bytes.
    #[arg(long, value_name = "FILE")]
    pub output: PathBuf,
    /// Benchmark pack (default: the embedded pack).
    #[arg(long, value_name = "FILE")]
    pub pack: Option<PathBuf>,
    /// Reproduce CPython ≥ 3.12's compensated `sum()` instead of the canonical
    /// 3.11 one (informational; last-bit differences only).
    #[arg(long)]
    pub cpython312_sum: bool,
}

/// Run `bat eval …`.
pub fn run(args: EvalArgs, g: &Globals) -> CliResult {
    match args.command {
        EvalCommand::Summarize(a) => summarize(a),
        EvalCommand::Attach(a) => attach(a, g),
    }
}

fn attach(a: AttachArgs, g: &Globals) -> CliResult {
    use super::ledger_common::{open, resolve, short};
    use crate::inspect::audit::{attach_audit, AttachRequest};
    use crate::inspect::InspectError;
    let pack = Pack::load_or_default(a.pack.as_deref())?;
    let bytes = crate::fsutil::read_json_input(&a.summary).map_err(|e| {
        CliError::new(format!("cannot read {}: {e}", a.summary.display())).with_code(2)
    })?;
    let mut l = open(g)?;
    let rev = resolve(&l, &a.rev)?;
    let author = a
        .author
        .or_else(|| std::env::var("BAT_AUTHOR").ok())
        .or_else(|| std::env::var("USER").ok())
        .unwrap_or_else(|| "unknown".into());
    let req = AttachRequest {
        rev,
        summary: &bytes,
        role: &a.role,
        protocol_id: &a.protocol_id,
        pack: &pack,
        author,
        time: None,
    };
    let out = attach_audit(&mut l, &req).map_err(|e| {
        let code = match e {
            InspectError::InvalidSummary { .. } | InspectError::InvalidAudit { .. } => 2,
            _ => 1,
        };
        CliError::new(e.to_string()).with_code(code)
    })?;
    if g.json {
        super::print_json(&out)?;
    } else {
        println!(
            "audit {} of {} recorded as {} ({})",
            a.protocol_id,
            short(&out.audits),
            short(&out.audit_commit),
            out.tag
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn summarize(a: SummarizeArgs) -> CliResult {
    let pack = Pack::load_or_default(a.pack.as_deref())?;
    let raw_path = resolve_existing(&a.raw)?;
    let raw = crate::fsutil::read_json_input(&raw_path)
        .map_err(|e| CliError::new(format!("cannot read {}: {e}", raw_path.display())))?;
    let mode = if a.cpython312_sum {
        SumMode::Neumaier
    } else {
        SumMode::Plain
    };
    let summary = build_summary(&raw, &a.checkpoint_sha256, &pack, mode)?;
    write_refusing_overwrite(&a.output, json::to_pj_file(&summary).as_bytes())?;
    print!("{}", json::to_pj_file(&summary));
    Ok(ExitCode::SUCCESS)
}

/// Python `Path.resolve(strict=True)`: the file must exist.
pub(crate) fn resolve_existing(p: &Path) -> Result<PathBuf, CliError> {
    std::fs::canonicalize(p).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            CliError::new(format!(
                "FileNotFoundError: [Errno 2] No such file or directory: '{}'",
                p.display()
            ))
        } else {
            CliError::new(format!("cannot resolve {}: {e}", p.display()))
        }
    })
}

/// Write `bytes` to `path` unless it already holds exactly them; refuse to
/// replace different content (`refusing to overwrite: <path>`). The write
/// goes to a temporary file in the same folder, is synced, then renamed.
pub(crate) fn write_refusing_overwrite(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    write_checked(
        path,
        bytes,
        &format!("refusing to overwrite: {}", path.display()),
    )
}

/// [`write_refusing_overwrite`] with a custom refusal message.
pub(crate) fn write_checked(path: &Path, bytes: &[u8], refusal: &str) -> Result<(), CliError> {
    match std::fs::read(path) {
        Ok(existing) if existing == bytes => return Ok(()),
        Ok(_) => return Err(CliError::new(refusal.to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(CliError::new(format!(
                "cannot read {}: {e}",
                path.display()
            )))
        }
    }
    crate::fsutil::write_atomic(path, bytes)
        .map_err(|e| CliError::new(format!("cannot write {}: {e}", path.display())))
}
