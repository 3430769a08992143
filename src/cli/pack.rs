//! `bat pack show|check`: print and validate benchmark packs.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::{CliError, CliResult, Session};
use bat_contract::json;
use bat_contract::pack::Pack;

/// Arguments of `bat pack`.
#[derive(Debug, Args)]
pub struct PackArgs {
    /// What to do with a pack.
    #[command(subcommand)]
    pub command: PackCommand,
}

/// The `bat pack` verbs.
#[derive(Debug, Subcommand)]
pub enum PackCommand {
    /// Print a pack as pretty JSON (the embedded default unless --pack is given).
    Show {
        /// The pack file to print instead of the default.
        #[arg(long, value_name = "FILE")]
        pack: Option<PathBuf>,
    },
    /// Validate a pack file; exit 1 and list every problem if it is invalid.
    Check {
        /// The pack file.
        file: PathBuf,
    },
}

/// Run `bat pack …`.
pub fn run(args: PackArgs, g: &Session) -> CliResult {
    match args.command {
        PackCommand::Show { pack } => {
            let p = Pack::load_or_default(pack.as_deref())?;
            out!("{}", json::pretty_json_file(p.value()));
            Ok(ExitCode::SUCCESS)
        }
        PackCommand::Check { file } => {
            let p = Pack::load(&file)?;
            let issues = p.check();
            if g.json {
                let list: Vec<serde_json::Value> = issues
                    .iter()
                    .map(|i| serde_json::json!({"path": i.path, "problem": i.problem}))
                    .collect();
                super::print_json(&serde_json::json!({
                    "pack": file.display().to_string(),
                    "valid": issues.is_empty(),
                    "issues": list,
                }))?;
            } else if issues.is_empty() {
                outln!("{}: valid pack", file.display());
            } else {
                for i in &issues {
                    outln!("{}: {i}", file.display());
                }
            }
            if issues.is_empty() {
                Ok(ExitCode::SUCCESS)
            } else if g.json {
                Ok(ExitCode::from(1))
            } else {
                Err(CliError::new(format!(
                    "the pack {} is invalid: {} problem(s)",
                    file.display(),
                    issues.len()
                )))
            }
        }
    }
}
