//! `bat eval summarize`: validate a raw evaluation and write its summary
//! (contract §D).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::files_common::{resolve_existing, write_refusing_overwrite};
use super::{CliError, CliResult, Session};
use bat_contract::json;
use bat_contract::numeric::SumMode;
use bat_contract::pack::Pack;
use bat_contract::summary::build_summary;

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
    /// Record the audit although the summary's `checkpoint_sha256` is not
    /// the round's candidate identity (refused otherwise); needs --reason,
    /// which is kept in the audit's metadata.
    #[arg(long, requires = "reason")]
    pub allow_mismatch: bool,
    /// Why a mismatching checkpoint identity is accepted (--allow-mismatch).
    #[arg(long, value_name = "TEXT", requires = "allow_mismatch")]
    pub reason: Option<String>,
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
pub fn run(args: EvalArgs, g: &Session) -> CliResult {
    match args.command {
        EvalCommand::Summarize(a) => summarize(a),
        EvalCommand::Attach(a) => attach(a, g),
    }
}

fn attach(a: AttachArgs, g: &Session) -> CliResult {
    use super::ledger_common::{open, resolve, short};
    use bat::inspect::audit::{attach_audit, AttachRequest};
    let pack = Pack::load_or_default(a.pack.as_deref())?;
    let bytes = bat_contract::fsutil::read_json_input(&a.summary)
        .map_err(|e| CliError::new(format!("cannot read {}: {e}", a.summary.display())).usage())?;
    let mut l = open(g)?;
    let rev = resolve(&l, &a.rev)?;
    let author = g.author(a.author.as_deref());
    let req = AttachRequest {
        rev,
        summary: &bytes,
        role: &a.role,
        protocol_id: &a.protocol_id,
        pack: &pack,
        author,
        time: None,
        allow_mismatch: a.reason.as_deref().filter(|_| a.allow_mismatch),
    };
    let out = attach_audit(&mut l, &req)?;
    if g.json {
        super::print_json(&out)?;
    } else {
        outln!(
            "audit {} of {} recorded as {} ({})",
            a.protocol_id,
            short(&out.audits),
            short(&out.audit_commit),
            out.tag
        );
        match out.checkpoint_check["status"].as_str() {
            Some("mismatch_allowed") => outln!(
                "checkpoint identity mismatch accepted: {}",
                out.checkpoint_check["reason"].as_str().unwrap_or("")
            ),
            Some("unchecked") => {
                outln!("checkpoint identity not checked: the round records no candidate identity")
            }
            _ => {}
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn summarize(a: SummarizeArgs) -> CliResult {
    super::output_path::refuse_inside_ledger(&a.output, "--output")?;
    let pack = Pack::load_or_default(a.pack.as_deref())?;
    let raw_path = resolve_existing(&a.raw)?;
    let raw = bat_contract::fsutil::read_json_input(&raw_path)
        .map_err(|e| CliError::new(format!("cannot read {}: {e}", raw_path.display())))?;
    let mode = if a.cpython312_sum {
        SumMode::Neumaier
    } else {
        SumMode::Plain
    };
    let summary = build_summary(&raw, &a.checkpoint_sha256, &pack, mode)?;
    write_refusing_overwrite(&a.output, json::pretty_json_file(&summary).as_bytes())?;
    out!("{}", json::pretty_json_file(&summary));
    Ok(ExitCode::SUCCESS)
}
