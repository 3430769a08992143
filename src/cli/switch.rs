//! `bat switch BRANCH`

use std::process::ExitCode;

use clap::Args;

use super::ledger_common::{lerr, open};
use super::{print_json, CliResult, Session};

/// Attach HEAD to an existing branch.
#[derive(Debug, Args)]
pub struct SwitchArgs {
    /// Branch name.
    pub branch: String,
}

/// Run `bat switch`.
pub fn run(args: SwitchArgs, g: &Session) -> CliResult {
    let mut l = open(g)?;
    let at = l.switch(&args.branch).map_err(lerr)?;
    if g.json {
        print_json(&serde_json::json!({"branch": args.branch, "commit": at}))?;
    } else {
        outln!("Switched to branch {} ({})", args.branch, at);
    }
    Ok(ExitCode::SUCCESS)
}
