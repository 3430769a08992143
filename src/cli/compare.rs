//! `bat compare ARM ARM [ARM…] [--json]`

use std::process::ExitCode;

use clap::Args;

use super::compare_text::{render, render_experiment};
use super::ledger_common::{open, Bars};
use super::{print_json, CliError, CliResult, Session};
use bat::experiment::arms::ArmSpec;
use bat::experiment::compare::{compare_arms, CompareRequest, Experiment, Field};
use bat::experiment::stats::{Bootstrap, Scheme, DEFAULT_RESAMPLES, DEFAULT_SEED};
use bat::replay::compare::{compare, Comparison};

/// Compare arms — each a branch, a comma list of branches or a quoted glob
/// (`'bat/*'`), whose branches are the arm's seeds — on their recorded
/// evaluation cells: for each score (Overall, task, agentic, S1–S5, every
/// track) the mean and the interquartile mean with 95% stratified
/// bootstrap intervals; for each pair of arms the difference of means, the
/// probability of improvement and a verdict ("A ahead", "B ahead", "not
/// distinguishable": the difference's interval excludes zero or not).
/// Exits 1 when the arms differ in protocol, pack, tasks, runtime tool
/// format, evaluator, base checkpoint or budget, unless every difference
/// is named with --allow-difference. Two single-branch arms also get the
/// round-by-round table (base → final per arm, compute, budget).
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The arms (two or more): `BRANCH`, `A,B,…` or `'GLOB'`.
    #[arg(required = true, num_args = 2.., value_name = "ARM")]
    pub arms: Vec<String>,
    /// Bootstrap resamples.
    #[arg(long, default_value_t = DEFAULT_RESAMPLES, value_name = "N")]
    pub resamples: usize,
    /// Seed of the bootstrap's generator (the same seed gives the same
    /// intervals).
    #[arg(long, default_value_t = DEFAULT_SEED, value_name = "S")]
    pub bootstrap_seed: u64,
    /// What a resample redraws: `runs` — within each (track, task), the
    /// arm's seeds with replacement, then each drawn seed's repeats
    /// (rliable's stratified bootstrap, with a seed as the run and its
    /// repeats kept together) — or `tasks`: first tasks within each track,
    /// then as `runs` (for claims meant to hold over other tasks).
    #[arg(long, default_value = "runs", value_name = "runs|tasks", value_parser = ["runs", "tasks"])]
    pub resample: String,
    /// Accept a difference between the arms (repeatable): protocol, pack,
    /// tasks, runtime-tool-format, evaluator, base-checkpoint, budget.
    #[arg(long = "allow-difference", value_name = "FIELD")]
    pub allow_difference: Vec<String>,
    /// Show the per-round table (every score is always in --json).
    #[arg(long)]
    pub per_round: bool,
    /// The score of the per-round table: overall, task, agentic, S1…S5 or
    /// track:NAME (implies --per-round).
    #[arg(long, value_name = "KEY")]
    pub score: Option<String>,
}

/// `bat compare --json`: the statistics, plus the round-by-round summary
/// of two single-branch arms (`a`, `b`, `same_budget`) as before.
#[derive(serde::Serialize)]
struct JsonOut<'a> {
    #[serde(flatten)]
    experiment: &'a Experiment,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    legacy: Option<&'a Comparison>,
}

/// The fields `--allow-difference` names (`bat compare`, `bat report`).
pub(super) fn allowed_fields(names: &[String]) -> Result<Vec<Field>, CliError> {
    let mut allow = Vec::new();
    for f in names {
        let field = Field::parse(f).ok_or_else(|| {
            CliError::usage_error(format!("--allow-difference {f}: not a comparability field"))
                .with_hint(format!(
                    "one of: {}",
                    Field::ALL.map(Field::as_str).join(", ")
                ))
        })?;
        allow.push(field);
    }
    Ok(allow)
}

/// Run `bat compare`.
pub fn run(args: CompareArgs, g: &Session) -> CliResult {
    let allow = allowed_fields(&args.allow_difference)?;
    if args.resamples == 0 {
        return Err(CliError::usage_error("--resamples must be at least 1"));
    }
    let l = open(g)?;
    let req = CompareRequest {
        arms: args.arms.clone(),
        bootstrap: Bootstrap {
            resamples: args.resamples,
            seed: args.bootstrap_seed,
            scheme: Scheme::parse(&args.resample).unwrap_or(Scheme::Runs),
            ..Bootstrap::default()
        },
        allow,
    };
    let bars = Bars::new(g);
    let ctx = bat::Ctx::new(&bars, g.cancel());
    let e = compare_arms(&l, &req, &ctx).map_err(CliError::from)?;
    if let Some(k) = &args.score {
        let known: Vec<String> = e
            .arms
            .first()
            .map(|a| a.scores.iter().map(|s| s.score.name()).collect())
            .unwrap_or_default();
        if !known.contains(k) {
            return Err(
                CliError::usage_error(format!("--score {k}: the arms have no such score"))
                    .with_hint(format!("one of: {}", known.join(", "))),
            );
        }
    }
    let per_round = args
        .score
        .as_deref()
        .or(args.per_round.then_some("overall"));
    let singles = args.arms.len() == 2
        && args
            .arms
            .iter()
            .all(|a| matches!(ArmSpec::parse(a), Ok(ArmSpec::One(_))));
    let legacy = if singles {
        Some(
            compare(&l, &args.arms[0], &args.arms[1])
                .map_err(CliError::from)
                .map_err(CliError::usage)?,
        )
    } else {
        None
    };
    if g.json {
        print_json(&JsonOut {
            experiment: &e,
            legacy: legacy.as_ref(),
        })?;
    } else {
        if let Some(c) = &legacy {
            out!("{}\n", render(c, g.paint));
        }
        out!("{}", render_experiment(&e, per_round, g.paint));
    }
    if e.comparable {
        Ok(ExitCode::SUCCESS)
    } else {
        Ok(ExitCode::from(super::error::EXIT_FAILURE))
    }
}
