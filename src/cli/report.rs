//! `bat report [REV|BRANCH…] -o report.html`

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use clap::Args;

use super::ledger_common::{fmt_time, open};
use super::term::{Paint, Role};
use super::{print_json, CliError, CliResult, Session};
use bat::experiment::compare::Difference;
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
    /// Accept a difference between the arms (repeatable): protocol, pack,
    /// tasks, runtime-tool-format, evaluator, base-checkpoint, budget. As
    /// with `bat compare`, arms that differ in any other of these are
    /// reported as not comparable and the exit code is 1 (the page is
    /// written either way). With no arms named, every branch is shown and
    /// differences are listed without failing.
    #[arg(long = "allow-difference", value_name = "FIELD")]
    pub allow_difference: Vec<String>,
}

/// Run `bat report`.
pub fn run(args: ReportArgs, g: &Session) -> CliResult {
    super::output_path::refuse_inside_ledger(&args.output, "-o")?;
    let started = Instant::now();
    let allow = super::compare::allowed_fields(&args.allow_difference)?;
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
        allow,
    };
    let data = collect(&l, &srcs, &opts)?;
    let html = render(&data);
    bat_contract::fsutil::write_atomic(&args.output, html.as_bytes())
        .map_err(|e| CliError::new(format!("cannot write {}: {e}", args.output.display())))?;
    let rounds: usize = data.arms.iter().map(|a| a.rows.len()).sum();
    let secs = started.elapsed().as_secs_f64();
    let differences: &[Difference] = data.differences.as_deref().unwrap_or(&[]);
    let comparable = differences.iter().all(|d| d.allowed);
    // With no arms named the page is an overview of every branch, not a
    // claim that they are comparable arms: the differences are listed but
    // do not fail the command (a fresh demo ledger's seeds differ in their
    // initial checkpoint by design).
    let judged = !args.revs.is_empty();
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
            "comparable": comparable, "differences": differences,
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
        out!("{}", render_differences(differences, judged, g.paint));
        if !comparable && !judged {
            outln!(
                "(with no arms named, every branch is an arm of its own; name arm groups such as 'bat/*' 'terminal/*' to pool each arm's seeds)"
            );
        }
    }
    if comparable || !judged {
        Ok(ExitCode::SUCCESS)
    } else {
        Ok(ExitCode::from(super::error::EXIT_FAILURE))
    }
}

/// The comparability lines (nothing when the arms share every field), in
/// `bat compare`'s words.
fn render_differences(diffs: &[Difference], judged: bool, paint: Paint) -> String {
    if diffs.is_empty() {
        return String::new();
    }
    let mut out = if diffs.iter().all(|d| d.allowed) {
        format!(
            "comparable only with allowed differences: {}\n",
            paint.paint(Role::Bad, "the arms differ as listed")
        )
    } else if judged {
        format!("{}\n", paint.paint(Role::Bad, "NOT COMPARABLE: the arms differ (exit 1); name each difference with --allow-difference FIELD to accept it"))
    } else {
        format!(
            "{}\n",
            paint.paint(
                Role::Bad,
                "the branches are not comparable arms as they stand: they differ as listed"
            )
        )
    };
    for d in diffs {
        out.push_str(&format!(
            "  {} differs{}\n",
            d.field.as_str(),
            if d.allowed { " (allowed)" } else { "" }
        ));
        for (label, vals) in &d.values {
            out.push_str(&format!("    {label}: {}\n", vals.join(" | ")));
        }
    }
    out
}
