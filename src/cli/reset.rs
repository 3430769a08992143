//! `bat reset REV`

use std::process::ExitCode;

use clap::Args;

use super::ledger_common::{lerr, open, resolve};
use super::{print_json, CliResult, Session};

/// Move the current branch (or detached HEAD) to REV; the reflog keeps the
/// old tip.
#[derive(Debug, Args)]
pub struct ResetArgs {
    /// Where to move to.
    pub rev: String,
}

/// Run `bat reset`.
pub fn run(args: ResetArgs, g: &Session) -> CliResult {
    let mut l = open(g)?;
    let to = resolve(&l, &args.rev)?;
    let (name, old) = l.reset(to, None).map_err(lerr)?;
    if g.json {
        print_json(&serde_json::json!({"ref": name, "old": old, "new": to}))?;
    } else {
        let o = old
            .map(|c| c.to_string())
            .unwrap_or_else(|| "(none)".into());
        outln!("{name}: {o} -> {to}");
    }
    Ok(ExitCode::SUCCESS)
}
