//! `bat mirror mlflow --tracking-uri URI [ARMS…]`

use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::ledger_common::{open, Bars};
use super::{print_json, CliError, CliResult, Session};
use bat::report::mlflow::{default_experiment, mirror_mlflow, MirrorOptions, MirrorReport};
use bat::report::sources;

/// Copy a ledger's rounds into an experiment tracker.
#[derive(Debug, Args)]
pub struct MirrorArgs {
    /// The tracker.
    #[command(subcommand)]
    pub target: MirrorTarget,
}

/// The trackers `bat mirror` writes to.
#[derive(Debug, Subcommand)]
pub enum MirrorTarget {
    /// Log every round to an MLflow tracking server (idempotent).
    ///
    /// One experiment per ledger, one run per branch (tagged
    /// `bat.branch`), one metric point per round scalar at step = the round
    /// number (the scalars of `bat export --format tensorboard`: Overall,
    /// task, agentic, S1–S5, tracks, audit gap, compute, health fields;
    /// step metrics at their global step). The campaign's facts are the
    /// run's params (protocol id, reward version, pack digest, seed, first
    /// commit); each round adds tags `bat.round.NNN.commit`, `.round_id`,
    /// `.gate`, `.bat_version`. A second call logs only the rounds after
    /// the run's `bat.last_commit` tag, so repeated calls, from any
    /// machine, never duplicate points. A branch reset behind that commit
    /// is refused unless --restart-diverged. The token comes from
    /// MLFLOW_TRACKING_TOKEN (sent as a bearer token).
    Mlflow(MlflowArgs),
}

/// `bat mirror mlflow`.
#[derive(Debug, Args)]
pub struct MlflowArgs {
    /// Branches, revisions or arm groups to mirror (a glob such as 'bat/*'
    /// or a comma list stands for its branches; default: every local
    /// branch).
    pub branches: Vec<String>,
    /// The tracking server, e.g. http://127.0.0.1:5000 (default: the
    /// MLFLOW_TRACKING_URI environment variable).
    #[arg(long, value_name = "URI")]
    pub tracking_uri: Option<String>,
    /// The experiment's name (default: `bat-` and the name of the folder
    /// holding the ledger).
    #[arg(long, value_name = "NAME")]
    pub experiment: Option<String>,
    /// Read the server's state and report what would be logged; write
    /// nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// When a branch no longer holds the last round its run has (it was
    /// reset), retire that run (its `bat.branch` tag becomes
    /// `bat.superseded_branch`) and mirror the branch into a new run.
    #[arg(long)]
    pub restart_diverged: bool,
}

/// Run `bat mirror`.
pub fn run(args: MirrorArgs, g: &Session) -> CliResult {
    match args.target {
        MirrorTarget::Mlflow(a) => run_mlflow(a, g),
    }
}

fn nonempty_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn run_mlflow(args: MlflowArgs, g: &Session) -> CliResult {
    let Some(uri) = args
        .tracking_uri
        .clone()
        .or_else(|| nonempty_env("MLFLOW_TRACKING_URI"))
    else {
        return Err(CliError::usage_error(
            "no MLflow server given: pass --tracking-uri http://HOST:PORT (or set MLFLOW_TRACKING_URI)"
                .to_string(),
        ));
    };
    let l = open(g)?;
    let srcs = sources(&l, &args.branches)
        .map_err(CliError::from)
        .map_err(CliError::usage)?;
    let opts = MirrorOptions {
        tracking_uri: uri,
        experiment: args
            .experiment
            .clone()
            .unwrap_or_else(|| default_experiment(&l)),
        token: nonempty_env("MLFLOW_TRACKING_TOKEN"),
        dry_run: args.dry_run,
        restart_diverged: args.restart_diverged,
    };
    let bars = Bars::new(g);
    let report = mirror_mlflow(&l, &srcs, &opts, &bat::Ctx::new(&bars, g.cancel()))
        .map_err(CliError::from)?;
    if g.json {
        print_json(&report)?;
    } else {
        print_text(&report);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_text(r: &MirrorReport) {
    let would = if r.dry_run { "would " } else { "" };
    if r.experiment_created {
        eprintln!("{would}create MLflow experiment {}", r.experiment);
    }
    for run in &r.runs {
        if let Some(old) = &run.superseded_run {
            eprintln!(
                "{}: {would}retire run {old} (the branch no longer holds its rounds)",
                run.branch
            );
        }
        let id = run.run_id.as_deref().unwrap_or("(new run)");
        if run.rounds_added.is_empty() {
            eprintln!(
                "{}: run {id} is up to date ({} rounds)",
                run.branch, run.rounds
            );
            continue;
        }
        let first = run.rounds_added.first().copied().unwrap_or_default();
        let last = run.rounds_added.last().copied().unwrap_or_default();
        eprintln!(
            "{}: {would}log {} rounds ({first}–{last}, {} metric points) to {}run {id}",
            run.branch,
            run.rounds_added.len(),
            run.metrics_added,
            if run.created { "new " } else { "" }
        );
    }
    if let Some(id) = &r.experiment_id {
        eprintln!("{}/#/experiments/{id}", r.tracking_uri);
    }
}
