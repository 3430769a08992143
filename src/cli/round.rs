//! `bat round build|verify`: materialize and check three-pool round views.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::{CliError, CliResult, Session};
use bat_contract::pack::Pack;
use bat_contract::prompt::Prompter;
use bat_contract::{json, round};

/// Arguments of `bat round`.
#[derive(Debug, Args)]
pub struct RoundArgs {
    /// The round verb.
    #[command(subcommand)]
    pub command: RoundCommand,
}

/// The `bat round` verbs.
#[derive(Debug, Subcommand)]
pub enum RoundCommand {
    /// Build one deterministic three-pool round into D/train.jsonl and
    /// D/manifest.json (immutable writes); print the manifest.
    Build(BuildArgs),
    /// Verify a round's digests, schema, prompts, rewards and pool composition.
    Verify {
        /// The train.jsonl file.
        #[arg(long, value_name = "F")]
        train: PathBuf,
        /// The round's manifest.json.
        #[arg(long, value_name = "F")]
        manifest: PathBuf,
        /// The benchmark pack (default: the embedded one).
        #[arg(long, value_name = "F")]
        pack: Option<PathBuf>,
    },
}

/// Arguments of `bat round build`.
#[derive(Debug, Args)]
pub struct BuildArgs {
    /// The source grid (source.jsonl).
    #[arg(long, value_name = "F")]
    pub source: PathBuf,
    /// The expected sha256 of the source file.
    #[arg(long, value_name = "H")]
    pub source_sha256: String,
    /// The round id (e.g. r01).
    #[arg(long, value_name = "R")]
    pub round_id: String,
    /// The stage to train (one of the pack's stages).
    #[arg(long, value_name = "S")]
    pub target_stage: Option<String>,
    /// A prescription whose target_stage is used (must agree with --target-stage).
    #[arg(long, value_name = "F")]
    pub prescription: Option<PathBuf>,
    /// Number of 8-row batches.
    #[arg(long, value_name = "N", default_value_t = round::DEFAULT_BATCHES, allow_negative_numbers = true)]
    pub batches: i64,
    /// Seed string (default "{round_id}:{target}:bat-core-v1").
    #[arg(long, value_name = "S")]
    pub seed: Option<String>,
    /// The output folder (created if missing).
    #[arg(long, value_name = "D")]
    pub output_dir: PathBuf,
    /// The benchmark pack (default: the embedded one).
    #[arg(long, value_name = "F")]
    pub pack: Option<PathBuf>,
}

fn read(path: &Path) -> Result<Vec<u8>, CliError> {
    bat_contract::fsutil::read_json_input(path)
        .map_err(|e| CliError::new(format!("cannot read {}: {e}", path.display())))
}

/// Build a round as the CLI does (files written, manifest returned as PJ text).
pub fn build(args: &BuildArgs) -> Result<String, CliError> {
    super::output_path::refuse_inside_ledger(&args.output_dir, "--output-dir")?;
    let pack = Pack::load_or_default(args.pack.as_deref())?;
    let k = pack.contract()?;
    if let Some(t) = &args.target_stage {
        // The reference's argument parser rejects an unknown choice (exit 2).
        if !k.stages.contains(t) {
            return Err(CliError::new(format!(
                "invalid choice for --target-stage: {t:?} (choose from {})",
                k.stages.join(", ")
            ))
            .usage());
        }
    }
    let source = std::fs::canonicalize(&args.source)
        .map_err(|e| CliError::new(format!("cannot open source {}: {e}", args.source.display())))?;
    let source_bytes = read(&source)?;
    let prescription = match &args.prescription {
        Some(p) => Some(read(p)?),
        None => None,
    };
    let name = source
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let prompter = Prompter::new(&k);
    let inputs = round::BuildInputs {
        source_bytes: &source_bytes,
        source_file_name: &name,
        source_sha256: &args.source_sha256,
        round_id: &args.round_id,
        target_stage: args.target_stage.as_deref(),
        prescription: prescription.as_deref(),
        batches: args.batches,
        seed: args.seed.as_deref(),
    };
    let built = round::materialize(&k, &prompter, &inputs)?;
    std::fs::create_dir_all(&args.output_dir)
        .map_err(|e| CliError::new(format!("cannot create {}: {e}", args.output_dir.display())))?;
    let dir = std::fs::canonicalize(&args.output_dir)
        .map_err(|e| CliError::new(format!("cannot resolve {}: {e}", args.output_dir.display())))?;
    round::write_immutable(&dir.join(round::TRAIN_FILE), &built.train)?;
    let text = json::pretty_json_file(&built.manifest);
    round::write_immutable(&dir.join(round::MANIFEST_FILE), text.as_bytes())?;
    Ok(text)
}

/// Run `bat round …`.
pub fn run(args: RoundArgs, _g: &Session) -> CliResult {
    match args.command {
        RoundCommand::Build(b) => {
            let text = build(&b)?;
            out!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        RoundCommand::Verify {
            train,
            manifest,
            pack,
        } => {
            let pack = Pack::load_or_default(pack.as_deref())?;
            let k = pack.contract()?;
            let prompter = Prompter::new(&k);
            let result = round::verify_dataset(&k, &prompter, &read(&train)?, &read(&manifest)?)?;
            out!("{}", json::pretty_json_file(&result));
            Ok(ExitCode::SUCCESS)
        }
    }
}
