//! `bat bind`: write the immutable gate-model binding of an exported model
//! folder (contract §G.1–G.2).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};

use super::files_common::write_checked;
use super::{CliError, CliResult, Session};
use bat_contract::binding::{binder_stdout, build_binding, Arm};
use bat_contract::json::{self, Value};

/// The evaluation arm.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ArmArg {
    /// The baseline arm.
    Baseline,
    /// The candidate arm.
    Candidate,
}

/// `bat bind` arguments (the reference binder's flags).
#[derive(Debug, Args)]
pub struct BindArgs {
    /// The exported Hugging Face model folder (must not be a symlink).
    #[arg(long = "model-path", value_name = "DIR")]
    pub model_path: PathBuf,
    /// The experiment name recorded in the binding.
    #[arg(long = "experiment-name", value_name = "NAME")]
    pub experiment_name: String,
    /// The gate step (≥ 0).
    #[arg(long = "gate-step", value_name = "K", allow_negative_numbers = true)]
    pub gate_step: i64,
    /// The evaluation arm.
    #[arg(long, value_enum)]
    pub arm: ArmArg,
    /// Where to write the binding; an existing file must have identical bytes.
    #[arg(long, value_name = "FILE")]
    pub output: PathBuf,
}

/// Run `bat bind`.
pub fn run(a: BindArgs, _g: &Session) -> CliResult {
    super::output_path::refuse_inside_ledger(&a.output, "--output")?;
    let step = u64::try_from(a.gate_step)
        .map_err(|_| CliError::new("--gate-step must be non-negative").usage())?;
    let arm = match a.arm {
        ArmArg::Baseline => Arm::Baseline,
        ArmArg::Candidate => Arm::Candidate,
    };
    let binding = build_binding(&a.model_path, &a.experiment_name, step, arm)?;
    // The contract's checks first (their errors are specified); then refuse
    // a checkpoint that is not well-formed safetensors before binding it.
    bat::checkpoint::check_model_dir(&a.model_path)?;
    let refusal = format!(
        "gate model binding differs from requested model: {}",
        a.output.display()
    );
    write_checked(
        &a.output,
        json::pretty_json_file(&binding).as_bytes(),
        &refusal,
    )?;
    let id = binding
        .get("model_identity_sha256")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let output = a
        .output
        .to_str()
        .ok_or_else(|| CliError::new("--output must be valid UTF-8"))?;
    outln!("{}", binder_stdout(id, output));
    Ok(ExitCode::SUCCESS)
}
