//! `bat gate`: the paired promotion gate and next-round prescription
//! (contract §E).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::files_common::write_refusing_overwrite;
use super::{CliError, CliResult, Session};
use bat_contract::gate::{evaluate_gate, training_healthy, GateModel};
use bat_contract::json::{self, Value};
use bat_contract::pack::Pack;

/// `bat gate` arguments (the reference gate's flags).
#[derive(Debug, Args)]
pub struct GateArgs {
    /// The baseline evaluation summary.
    #[arg(long, value_name = "FILE")]
    pub baseline: PathBuf,
    /// The candidate evaluation summary.
    #[arg(long, value_name = "FILE")]
    pub candidate: PathBuf,
    /// Training health JSON; healthy only when it is an object with `"status": "passed"`.
    #[arg(long = "training-health", value_name = "FILE")]
    pub training_health: Option<PathBuf>,
    /// Where to write gate.json.
    #[arg(long = "gate-output", value_name = "FILE")]
    pub gate_output: PathBuf,
    /// Where to write prescription.json.
    #[arg(long = "prescription-output", value_name = "FILE")]
    pub prescription_output: PathBuf,
    /// Benchmark pack (default: the embedded pack).
    #[arg(long, value_name = "FILE")]
    pub pack: Option<PathBuf>,
}

fn read_json(p: &std::path::Path) -> Result<Value, CliError> {
    let bytes = bat_contract::fsutil::read_json_input(p)
        .map_err(|e| CliError::new(format!("cannot read {}: {e}", p.display())))?;
    json::parse_bytes(&bytes)
        .map_err(|e| CliError::new(format!("JSONDecodeError: {}: {e}", p.display())))
}

/// Run `bat gate`.
pub fn run(a: GateArgs, _g: &Session) -> CliResult {
    super::output_path::refuse_inside_ledger(&a.gate_output, "--gate-output")?;
    super::output_path::refuse_inside_ledger(&a.prescription_output, "--prescription-output")?;
    let pack = Pack::load_or_default(a.pack.as_deref())?;
    let model = GateModel::from_pack(&pack)?;
    let baseline = read_json(&a.baseline)?;
    let candidate = read_json(&a.candidate)?;
    let healthy = match &a.training_health {
        Some(h) => training_healthy(&read_json(h)?),
        None => true,
    };
    let outcome = evaluate_gate(&baseline, &candidate, healthy, &model)?;
    write_refusing_overwrite(
        &a.gate_output,
        json::pretty_json_file(&outcome.gate).as_bytes(),
    )?;
    write_refusing_overwrite(
        &a.prescription_output,
        json::pretty_json_file(&outcome.prescription).as_bytes(),
    )?;
    out!("{}", json::pretty_json_file(&outcome.stdout_document()));
    Ok(ExitCode::SUCCESS)
}
