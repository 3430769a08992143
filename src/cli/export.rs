//! `bat export [--format csv|jsonl] [BRANCH…] [-o FILE]`

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};

use super::error::stdout_error;
use super::ledger_common::open;
use super::{print_json, CliError, CliResult, Session};
use bat::report::export::{export_rows, row_object, Format, RowWriter};
use bat::report::sources;

/// Write one row per round commit, per branch, oldest first: the columns
/// documented in docs/rounds.md (round id, commit, target stage, gate,
/// Overall, task, agentic, S1–S5, audit gap, reward mode, ablation,
/// compute, checkpoint, …), the same as `bat query`'s `rounds` table.
///
/// After those columns come the custom metrics, sorted: every number of
/// the round's training-health file (`health.<key>`, nested objects
/// flattened with dots), then the gating evaluation's per-track
/// (`eval.track.<name>`) and per-stage (`eval.stage.<S>`) scores. With
/// `--json` and no `-o`, stdout is one JSON array of row objects.
///
/// Parquet is not offered: the arrow/parquet crates would add minutes of
/// build time and dozens of dependencies for a format one pandas call makes
/// from the CSV or JSONL (`pd.read_csv(f).to_parquet(p)`).
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Branches or revisions to export (default: every local branch).
    pub branches: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ExportFormat::Csv)]
    pub format: ExportFormat,
    /// Write to FILE (atomically) instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// `--format` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// Comma-separated values with a header line (RFC 4180).
    Csv,
    /// JSON Lines: one object per round.
    Jsonl,
}

fn io_err(what: &str) -> impl Fn(std::io::Error) -> CliError + '_ {
    move |e| CliError::new(format!("cannot write {what}: {e}"))
}

/// Run `bat export`.
pub fn run(args: ExportArgs, g: &Session) -> CliResult {
    let l = open(g)?;
    let srcs = sources(&l, &args.branches)
        .map_err(CliError::from)
        .map_err(CliError::usage)?;
    let format = match args.format {
        ExportFormat::Csv => Format::Csv,
        ExportFormat::Jsonl => Format::Jsonl,
    };
    let (keys, rows) = export_rows(&l, &srcs)?;
    match &args.output {
        // `--json` asks for JSON on stdout: one array of row objects,
        // whatever `--format` says.
        None if g.json => {
            let objects: Vec<_> = rows.iter().map(|r| row_object(r, &keys)).collect();
            print_json(&objects)?;
        }
        None => {
            let out = std::io::BufWriter::new(std::io::stdout().lock());
            let mut w = RowWriter::new(out, format, keys);
            w.start().map_err(stdout_error)?;
            for row in &rows {
                w.row(row).map_err(stdout_error)?;
            }
            w.finish().map_err(stdout_error)?;
        }
        Some(path) => {
            let what = path.display().to_string();
            let n_metrics = keys.len();
            let mut w = RowWriter::new(Vec::new(), format, keys);
            for row in &rows {
                w.row(row).map_err(io_err(&what))?;
            }
            let bytes = w.finish().map_err(io_err(&what))?;
            bat_contract::fsutil::write_atomic(path, &bytes).map_err(io_err(&what))?;
            let n = rows.len();
            if g.json {
                print_json(&serde_json::json!({
                    "output": path, "rows": n, "metric_columns": n_metrics,
                    "branches": srcs.iter().map(|s| &s.name).collect::<Vec<_>>(),
                }))?;
            } else {
                eprintln!("wrote {n} rounds of {} branches to {what}", srcs.len());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
