//! `bat source build`: write the safe source grid.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::{CliError, CliResult, Session};
use bat_contract::pack::Pack;
use bat_contract::{json, round, source};

/// Arguments of `bat source`.
#[derive(Debug, Args)]
pub struct SourceArgs {
    /// The source verb.
    #[command(subcommand)]
    pub command: SourceCommand,
}

/// The `bat source` verbs.
#[derive(Debug, Subcommand)]
pub enum SourceCommand {
    /// Build the focus × track × outcome grid into D/source.jsonl and
    /// D/manifest.json (immutable writes); print the manifest.
    Build {
        /// The output folder (created if missing).
        #[arg(long, value_name = "D")]
        output_dir: PathBuf,
        /// The benchmark pack (default: the embedded one).
        #[arg(long, value_name = "F")]
        pack: Option<PathBuf>,
    },
}

/// Run `bat source …`.
pub fn run(args: SourceArgs, _g: &Session) -> CliResult {
    match args.command {
        SourceCommand::Build { output_dir, pack } => {
            super::output_path::refuse_inside_ledger(&output_dir, "--output-dir")?;
            let pack = Pack::load_or_default(pack.as_deref())?;
            let k = pack.contract()?;
            let built = source::build_source(&k)?;
            std::fs::create_dir_all(&output_dir).map_err(|e| {
                CliError::new(format!("cannot create {}: {e}", output_dir.display()))
            })?;
            let dir = std::fs::canonicalize(&output_dir).map_err(|e| {
                CliError::new(format!("cannot resolve {}: {e}", output_dir.display()))
            })?;
            round::write_immutable(&dir.join(source::SOURCE_FILE), &built.jsonl)?;
            round::write_immutable(
                &dir.join("manifest.json"),
                json::pretty_json_file(&built.manifest).as_bytes(),
            )?;
            out!("{}", json::pretty_json_file(&built.manifest));
            Ok(ExitCode::SUCCESS)
        }
    }
}
