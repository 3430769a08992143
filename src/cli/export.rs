//! `bat export [--format csv|jsonl] [BRANCH…] [-o FILE]`

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};

use super::error::stdout_error;
use super::ledger_common::open;
use super::{print_json, CliError, CliResult, Session};
use bat::experiment::stats::{Bootstrap, Scheme, DEFAULT_RESAMPLES, DEFAULT_SEED};
use bat::report::arm_scores::{arm_scores, ARM_SCORE_COLUMNS};
use bat::report::export::{export_rows, row_object, step_rows, table_bytes, Format, RowWriter};
use bat::report::html::ReportError;
use bat::report::sources;
use bat::report::tensorboard::export_tensorboard;

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
    /// Branches, revisions or arm groups to export (a glob such as
    /// 'bat/*' or a comma list stands for its branches; default: every
    /// local branch).
    pub branches: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ExportFormat::Csv)]
    pub format: ExportFormat,
    /// Write to FILE (atomically) instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Write arm scores with confidence intervals instead of round rows:
    /// each argument is one arm (a branch, a glob such as 'bat/*' or a
    /// comma list; its branches are the seeds), and each row is one score
    /// of one arm at one round or at the final checkpoint (every score;
    /// per round also the audit gap), or the audit gap's slope per round: arm,
    /// members, round, round_ids, score, mean, ci_low, ci_high, iqm, runs,
    /// and the bootstrap that made the interval (scheme, resamples, seed,
    /// level), the statistics of `bat compare`.
    #[arg(long)]
    pub ci: bool,
    /// Write the step metrics of every round instead of round rows: one
    /// row per trainer step (branch, round_id, round_number, commit, step,
    /// then every metric name the steps use, sorted). Rounds without a
    /// step metrics file have no rows.
    #[arg(long, conflicts_with = "ci")]
    pub steps: bool,
    /// The bootstrap of confidence intervals.
    #[command(flatten)]
    pub bootstrap: BootstrapArgs,
}

/// The bootstrap of confidence intervals (`export --ci`, `query`'s
/// `arm_scores`).
#[derive(Debug, Args)]
pub struct BootstrapArgs {
    /// Bootstrap resamples for confidence intervals.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_RESAMPLES)]
    pub resamples: usize,
    /// Bootstrap seed (the same seed and data give the same intervals).
    #[arg(long = "bootstrap-seed", value_name = "SEED", default_value_t = DEFAULT_SEED)]
    pub bootstrap_seed: u64,
    /// What a resample redraws: `runs` within each (track, task) stratum
    /// (rliable's default) or `tasks` within each track as well.
    #[arg(long, value_name = "SCHEME", default_value = "runs", value_parser = ["runs", "tasks"])]
    pub resample: String,
}

impl BootstrapArgs {
    /// The settings.
    pub fn bootstrap(&self) -> Bootstrap {
        Bootstrap {
            resamples: self.resamples.max(1),
            seed: self.bootstrap_seed,
            scheme: Scheme::parse(&self.resample).unwrap_or(Scheme::Runs),
            ..Bootstrap::default()
        }
    }
}

/// Every local branch when no arm is named (each its own arm).
pub fn arms_or_branches(l: &bat_ledger::Ledger, given: &[String]) -> Result<Vec<String>, CliError> {
    if !given.is_empty() {
        return Ok(given.to_vec());
    }
    Ok(sources(l, &[])
        .map_err(CliError::from)?
        .into_iter()
        .map(|s| s.name)
        .collect())
}

fn run_ci(args: &ExportArgs, g: &Session) -> CliResult {
    let l = open(g)?;
    let arms = arms_or_branches(&l, &args.branches)?;
    let cfg = args.bootstrap.bootstrap();
    let rows = arm_scores(&l, &arms, &cfg, &bat::Ctx::quiet())
        .map_err(|e| CliError::from(ReportError::from(e)))?;
    let objects: Vec<serde_json::Map<String, serde_json::Value>> = rows
        .iter()
        .map(|r| {
            ARM_SCORE_COLUMNS
                .iter()
                .map(|c| c.to_string())
                .zip(r.values())
                .collect()
        })
        .collect();
    let format = match args.format {
        ExportFormat::Csv => Format::Csv,
        ExportFormat::Jsonl => Format::Jsonl,
        ExportFormat::Tensorboard => {
            return Err(CliError::usage_error(
                "--ci writes a table: use --format csv or jsonl".to_string(),
            ))
        }
    };
    if args.output.is_none() && g.json {
        print_json(&objects)?;
        return Ok(ExitCode::SUCCESS);
    }
    let bytes = table_bytes(&ARM_SCORE_COLUMNS, &objects, format);
    if let Some(path) = write_table(args.output.as_deref(), &bytes)? {
        let what = path.display().to_string();
        if g.json {
            print_json(&serde_json::json!({
                "output": path, "rows": rows.len(), "arms": arms,
                "bootstrap": {"scheme": cfg.scheme.as_str(), "resamples": cfg.resamples, "seed": cfg.seed, "level": cfg.level},
            }))?;
        } else {
            eprintln!(
                "wrote {} arm-score rows of {} arms to {what} (bootstrap: {} scheme, {} resamples, seed {})",
                rows.len(),
                arms.len(),
                cfg.scheme.as_str(),
                cfg.resamples,
                cfg.seed
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `--format` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// Comma-separated values with a header line (RFC 4180).
    Csv,
    /// JSON Lines: one object per round.
    Jsonl,
    /// TensorBoard event files in the directory -o DIR: one run
    /// (sub-directory) per branch, step = round number; scalars for every
    /// numeric round column (Overall, task, agentic, S1–S5, audit gap,
    /// compute), every health-file number, track and stage score, and the
    /// step metrics at a global step. Deterministic: the events' wall time
    /// is the round's commit time.
    Tensorboard,
}

/// Write a finished table to stdout, or atomically to `output`; returns
/// the path written, for the caller's summary line.
fn write_table<'a>(
    output: Option<&'a std::path::Path>,
    bytes: &[u8],
) -> Result<Option<&'a std::path::Path>, CliError> {
    let Some(path) = output else {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        out.write_all(bytes).map_err(stdout_error)?;
        out.flush().map_err(stdout_error)?;
        return Ok(None);
    };
    let what = path.display().to_string();
    bat_contract::fsutil::write_atomic(path, bytes).map_err(io_err(&what))?;
    Ok(Some(path))
}

fn io_err(what: &str) -> impl Fn(std::io::Error) -> CliError + '_ {
    move |e| CliError::new(format!("cannot write {what}: {e}"))
}

/// Run `bat export`.
pub fn run(args: ExportArgs, g: &Session) -> CliResult {
    if let Some(o) = &args.output {
        super::output_path::refuse_inside_ledger(o, "-o")?;
    }
    if args.ci {
        return run_ci(&args, g);
    }
    let l = open(g)?;
    let srcs = sources(&l, &args.branches)
        .map_err(CliError::from)
        .map_err(CliError::usage)?;
    let format = match args.format {
        ExportFormat::Csv => Format::Csv,
        ExportFormat::Jsonl => Format::Jsonl,
        ExportFormat::Tensorboard => return run_tensorboard(&args, g, &l, &srcs),
    };
    if args.steps {
        return run_steps(&args, g, &l, &srcs, format);
    }
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

/// `--format tensorboard -o DIR`.
fn run_tensorboard(
    args: &ExportArgs,
    g: &Session,
    l: &bat_ledger::Ledger,
    srcs: &[bat::report::Source],
) -> CliResult {
    let Some(dir) = &args.output else {
        return Err(CliError::usage_error(
            "--format tensorboard writes a directory of event files: give it with -o DIR"
                .to_string(),
        ));
    };
    if args.steps {
        return Err(CliError::usage_error(
            "--format tensorboard already includes the step metrics; drop --steps".to_string(),
        ));
    }
    let runs = export_tensorboard(
        l,
        srcs,
        dir,
        &bat::Ctx::new(&bat_ledger::NoProgress, g.cancel()),
    )
    .map_err(|e| CliError::from_library(&e))?;
    if g.json {
        print_json(&serde_json::json!({ "output": dir, "runs": runs }))?;
    } else {
        for r in &runs {
            eprintln!(
                "wrote {} rounds ({} scalars) of {} to {}",
                r.rounds,
                r.scalars,
                r.branch,
                r.file.display()
            );
        }
        eprintln!("view with: tensorboard --logdir {}", dir.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// `--steps`: one row per trainer step.
fn run_steps(
    args: &ExportArgs,
    g: &Session,
    l: &bat_ledger::Ledger,
    srcs: &[bat::report::Source],
    format: Format,
) -> CliResult {
    let (columns, rows) = step_rows(l, srcs)?;
    if args.output.is_none() && g.json {
        print_json(&rows)?;
        return Ok(ExitCode::SUCCESS);
    }
    let cols: Vec<&str> = columns.iter().map(String::as_str).collect();
    let bytes = table_bytes(&cols, &rows, format);
    if let Some(path) = write_table(args.output.as_deref(), &bytes)? {
        let what = path.display().to_string();
        if g.json {
            print_json(
                &serde_json::json!({"output": path, "rows": rows.len(), "columns": columns}),
            )?;
        } else {
            eprintln!("wrote {} steps to {what}", rows.len());
        }
    }
    Ok(ExitCode::SUCCESS)
}
