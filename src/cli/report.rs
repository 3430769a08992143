//! `bat report [REV|BRANCH…] -o report.html`

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use clap::Args;

use super::ledger_common::{fmt_time, open};
use super::{print_json, CliError, CliResult, Session};
use bat::report::html::{collect, render, ReportOptions};
use bat::report::sources;

/// Write one self-contained HTML page about a campaign and its replays:
/// per-round Overall, task, agentic and S1–S5 (arms overlaid), the
/// curriculum and gate decisions, the audit gap, compute per round and
/// cumulative, checkpoint drift between consecutive candidates, the table
/// of rounds and what a reviewer needs to reproduce it (source digest,
/// pack, reward version, bat version, clone and replay commands).
///
/// The page uses inline SVG and CSS only: no network, no external script
/// or font, so it opens offline and can go into a paper's supplement.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Branches, revisions or arm groups to show, overlaid (default: every
    /// local branch). An arm group (a glob such as 'bat/*' or a comma list)
    /// is one arm whose branches are its seeds: its curves show each
    /// branch, and the "Arms with confidence intervals" section shows the
    /// group's per-round scores (Overall first, then every other score)
    /// with bootstrap bands and flags an arm
    /// whose audit-gap slope lies above zero.
    pub revs: Vec<String>,
    /// The HTML file to write.
    #[arg(
        short = 'o',
        long = "output",
        value_name = "FILE",
        default_value = "report.html"
    )]
    pub output: PathBuf,
    /// Skip checkpoint drift (reading every candidate's safetensors is the
    /// slow part on real models).
    #[arg(long)]
    pub no_drift: bool,
    /// Add a plot of a custom metric per round, one curve per arm
    /// (repeatable): a number of the training-health file
    /// (`health.<key>`, nested keys joined with dots, e.g.
    /// `health.sim.kl_to_reference`), a track score (`eval.track.<name>`)
    /// or a stage score (`eval.stage.S1`). An unknown key is an error that
    /// lists the known ones; `bat query "SELECT DISTINCT key FROM metrics"`
    /// lists them too.
    #[arg(long = "metric", value_name = "KEY")]
    pub metrics: Vec<String>,
    /// The bootstrap of confidence intervals.
    #[command(flatten)]
    pub bootstrap: super::export::BootstrapArgs,
}

/// Run `bat report`.
pub fn run(args: ReportArgs, g: &Session) -> CliResult {
    let started = Instant::now();
    let l = open(g)?;
    let srcs = sources(&l, &args.revs)
        .map_err(CliError::from)
        .map_err(CliError::usage)?;
    if srcs.is_empty() {
        return Err(CliError::new("the ledger has no branches to report on").usage());
    }
    let location = l
        .dir()
        .parent()
        .filter(|_| l.dir().file_name().is_some_and(|n| n == ".bat"))
        .unwrap_or(l.dir());
    let location = std::path::absolute(location).unwrap_or_else(|_| location.to_path_buf());
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let opts = ReportOptions {
        drift: !args.no_drift,
        ledger_location: location.display().to_string(),
        generated: fmt_time(now),
        metrics: args.metrics.clone(),
        bootstrap: args.bootstrap.bootstrap(),
    };
    let data = collect(&l, &srcs, &opts)?;
    let html = render(&data);
    bat_contract::fsutil::write_atomic(&args.output, html.as_bytes())
        .map_err(|e| CliError::new(format!("cannot write {}: {e}", args.output.display())))?;
    let rounds: usize = data.arms.iter().map(|a| a.rows.len()).sum();
    let secs = started.elapsed().as_secs_f64();
    if g.json {
        print_json(&serde_json::json!({
            "output": args.output, "bytes": html.len(), "rounds": rounds,
            "branches": srcs.iter().map(|s| &s.name).collect::<Vec<_>>(),
            "arms": srcs.iter().map(|s| &s.name).collect::<Vec<_>>(),
            "drift": !args.no_drift, "metrics": args.metrics, "seconds": secs,
            "bootstrap": {"scheme": opts.bootstrap.scheme.as_str(), "resamples": opts.bootstrap.resamples,
                          "seed": opts.bootstrap.seed, "level": opts.bootstrap.level},
            "rising_audit_gap": data.arm_scores.as_ref().map(|rows| rows.iter()
                .filter(|r| r.score == "audit_gap_slope" && r.above_zero())
                .map(|r| serde_json::json!({"arm": r.arm, "slope": r.mean, "ci_low": r.ci_low, "ci_high": r.ci_high}))
                .collect::<Vec<_>>()).unwrap_or_default(),
        }))?;
    } else {
        outln!(
            "wrote {} ({} bytes, {rounds} rounds in {} arms, {secs:.2}s)",
            args.output.display(),
            html.len(),
            srcs.len()
        );
        if let Ok(rows) = &data.arm_scores {
            for r in rows
                .iter()
                .filter(|r| r.score == "audit_gap_slope" && r.above_zero())
            {
                outln!(
                    "audit gap rising in {}: slope {:+.4} per round, {:.0}% CI [{:+.4}, {:+.4}] (scorer overfitting)",
                    r.arm,
                    r.mean.unwrap_or(f64::NAN),
                    r.level * 100.0,
                    r.ci_low.unwrap_or(f64::NAN),
                    r.ci_high.unwrap_or(f64::NAN)
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
