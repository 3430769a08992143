//! `bat init [PATH]`

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::ledger_common::{display_path, lerr};
use super::{print_json, CliResult, Session};

/// Create a new, empty ledger in PATH/.bat.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// Directory to create the ledger in (default: the current directory,
    /// or -C DIR).
    pub path: Option<PathBuf>,
}

/// Run `bat init`.
pub fn run(args: InitArgs, g: &Session) -> CliResult {
    let path = args.path.unwrap_or_else(|| g.start_dir());
    let l = bat_ledger::Ledger::init(&path).map_err(lerr)?;
    let dir = display_path(l.dir());
    if g.json {
        print_json(
            &serde_json::json!({ "ledger": dir, "format_version": bat_ledger::FORMAT_VERSION }),
        )?;
    } else {
        outln!("Initialized empty bat ledger in {}", dir.display());
    }
    Ok(ExitCode::SUCCESS)
}
