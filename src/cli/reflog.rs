//! `bat reflog [REF]`

use std::process::ExitCode;

use clap::Args;

use super::ledger_common::{lerr, open, short};
use super::{print_json, CliResult, Session};

/// Show how a ref moved, newest first.
#[derive(Debug, Args)]
pub struct ReflogArgs {
    /// HEAD (default), a branch, a tag, or a full ref name.
    #[arg(value_name = "REF")]
    pub refname: Option<String>,
}

/// Run `bat reflog`.
pub fn run(args: ReflogArgs, g: &Session) -> CliResult {
    let l = open(g)?;
    let entries = l
        .reflog(args.refname.as_deref().unwrap_or("HEAD"))
        .map_err(lerr)?;
    if g.json {
        print_json(&entries)?;
    } else {
        let s = |c: &Option<bat_ledger::CommitId>| {
            c.map(|c| short(&c)).unwrap_or_else(|| "(none)".into())
        };
        for e in entries {
            outln!(
                "{} {} -> {} {}: {}",
                e.seq,
                s(&e.old),
                s(&e.new),
                e.refname,
                e.message
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
