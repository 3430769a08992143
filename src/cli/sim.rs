//! `bat sim init|train|evaluate`: the simulator backend's child processes
//! (hidden from the main help; `bat run --backend sim` runs them).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::{print_json, CliError, CliResult, Session};
use bat::sim::{self, evaluate, train};
use bat_contract::pack::Pack;
use bat_contract::vocabulary::RewardMode;

/// Arguments of `bat sim`.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// The simulator verb.
    #[command(subcommand)]
    pub command: SimCommand,
}

/// The `bat sim` verbs.
#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// Write the initial simulator policy (a model folder) for a seed.
    Init(InitArgs),
    /// Train one round with GRPO and write the candidate folder and the
    /// training-health file (the trainer template's target).
    Train(TrainArgs),
    /// Evaluate a policy on the held-out tasks and write raw-evaluation.json
    /// (the evaluator template's target).
    Evaluate(EvaluateArgs),
}

/// Arguments of `bat sim init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// The model folder to create (must not exist or be empty).
    #[arg(long, value_name = "D")]
    pub output: PathBuf,
    /// The seed of the initial logits.
    #[arg(long, value_name = "S", default_value_t = sim::DEFAULT_SEED)]
    pub seed: u64,
    /// The simulator learning rate, kept in config.json and used by every
    /// round trained from this policy.
    #[arg(long, value_name = "LR", default_value_t = sim::policy::DEFAULT_LEARNING_RATE)]
    pub learning_rate: f64,
}

/// Arguments of `bat sim train`.
#[derive(Debug, Args)]
pub struct TrainArgs {
    /// The starting model folder (also the KL reference).
    #[arg(long, value_name = "D")]
    pub checkpoint: PathBuf,
    /// The round's train.jsonl.
    #[arg(long, value_name = "F")]
    pub dataset: PathBuf,
    /// The round's manifest.json.
    #[arg(long, value_name = "F")]
    pub manifest: PathBuf,
    /// The candidate model folder to write (must not exist).
    #[arg(long, value_name = "D")]
    pub output: PathBuf,
    /// The training-health file, written last.
    #[arg(long, value_name = "F")]
    pub health: PathBuf,
    /// Also write step metrics (JSON Lines: step, reward_mean, kl, tokens)
    /// to this file (the trainer template's {metrics}).
    #[arg(long, value_name = "F")]
    pub metrics: Option<PathBuf>,
    /// The round id (keys the rollout streams).
    #[arg(long, value_name = "R")]
    pub round_id: String,
    /// The round's target stage (recorded in the health file).
    #[arg(long, value_name = "S")]
    pub target_stage: String,
    /// The runtime tool format (recorded in the health file).
    #[arg(long, value_name = "F")]
    pub runtime_tool_format: String,
    /// `stage` (BaT: stage rows earn their stage's rubric score) or
    /// `terminal` (ablation: every row earns only the E2E reward).
    #[arg(long, value_name = "M", default_value = "stage")]
    pub reward_mode: String,
    /// The campaign seed.
    #[arg(long, value_name = "S", default_value_t = sim::DEFAULT_SEED)]
    pub seed: u64,
    /// Worker threads (0: one per core). Outputs do not depend on it.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub threads: usize,
}

/// Arguments of `bat sim evaluate`.
#[derive(Debug, Args)]
pub struct EvaluateArgs {
    /// The model folder to evaluate.
    #[arg(long, value_name = "D")]
    pub checkpoint: PathBuf,
    /// The raw-evaluation.json to write.
    #[arg(long, value_name = "F")]
    pub output: PathBuf,
    /// The evaluation request (eval-request.json).
    #[arg(long, value_name = "F")]
    pub request: PathBuf,
    /// The campaign seed (keys the held-out draws).
    #[arg(long, value_name = "S", default_value_t = sim::DEFAULT_SEED)]
    pub seed: u64,
    /// Worker threads (0: one per core). Outputs do not depend on it.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub threads: usize,
}

/// Run `bat sim`.
pub fn run(a: SimArgs, g: &Session) -> CliResult {
    match a.command {
        SimCommand::Init(a) => {
            super::output_path::refuse_inside_ledger(&a.output, "--output")?;
            let policy = sim::init_model_with(&a.output, a.seed, a.learning_rate)?;
            if g.json {
                print_json(&serde_json::json!({
                    "output": a.output,
                    "seed": a.seed,
                    "parameters": policy.len(),
                }))?;
            } else {
                outln!(
                    "wrote the initial simulator policy ({} logits, seed {}) to {}",
                    policy.len(),
                    a.seed,
                    a.output.display()
                );
            }
        }
        SimCommand::Train(a) => {
            end_with_parent();
            super::output_path::refuse_inside_ledger(&a.output, "--output")?;
            super::output_path::refuse_inside_ledger(&a.health, "--health")?;
            let mode = a
                .reward_mode
                .parse::<RewardMode>()
                .map_err(|e| CliError::new(e.to_string()).usage())?;
            let report = train::train(
                &train::TrainRequest {
                    checkpoint: &a.checkpoint,
                    dataset: &a.dataset,
                    manifest: &a.manifest,
                    output: &a.output,
                    health: &a.health,
                    round_id: &a.round_id,
                    target_stage: &a.target_stage,
                    runtime_tool_format: &a.runtime_tool_format,
                    reward_mode: mode,
                    seed: a.seed,
                    threads: a.threads,
                    metrics: a.metrics.as_deref(),
                },
                &Pack::default_pack(),
            )?;
            if g.json {
                print_json(&report)?;
            } else {
                outln!(
                    "bat sim train {}: {} steps, {} rollouts ({} reward), mean reward {:.4} → {:.4}, |Δθ| {:.4}",
                    a.round_id,
                    report.steps,
                    report.rollouts,
                    mode.as_str(),
                    report.mean_reward_first_step,
                    report.mean_reward_last_step,
                    report.update_l2
                );
            }
        }
        SimCommand::Evaluate(a) => {
            end_with_parent();
            super::output_path::refuse_inside_ledger(&a.output, "--output")?;
            let report = evaluate::evaluate(
                &evaluate::EvaluateRequest {
                    checkpoint: &a.checkpoint,
                    output: &a.output,
                    request: &a.request,
                    seed: a.seed,
                    threads: a.threads,
                },
                &Pack::default_pack(),
            )?;
            if g.json {
                print_json(&report)?;
            } else {
                let stages: Vec<String> = report
                    .mean_stages
                    .iter()
                    .map(|s| format!("{s:.3}"))
                    .collect();
                outln!(
                    "bat sim evaluate: {} cells ({} reruns), task {:.3}, stages [{}]",
                    report.cells,
                    report.reruns,
                    report.mean_task,
                    stages.join(", ")
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The simulator's trainer and evaluator are children of `bat run` or
/// `bat replay`. When that parent dies without stopping them (kill -9), an
/// orphan would go on writing into a round folder that a `--resume` is
/// about to redo. A watcher notices the re-parenting (checked every 20 ms)
/// and ends the process with the interrupted code.
fn end_with_parent() {
    let parent = std::os::unix::process::parent_id();
    std::thread::spawn(move || loop {
        std::thread::sleep(std::time::Duration::from_millis(20));
        if std::os::unix::process::parent_id() != parent {
            std::process::exit(i32::from(super::error::EXIT_INTERRUPTED));
        }
    });
}
