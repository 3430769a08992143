//! `bat log [REV] [-n N]`

use std::process::ExitCode;

use clap::Args;

use super::ledger_common::{fmt_time, lerr, open, resolve};
use super::{print_json, CliResult, Globals};

/// Show history, newest first.
#[derive(Debug, Args)]
pub struct LogArgs {
    /// Where to start (default HEAD).
    pub rev: Option<String>,
    /// Show at most N commits.
    #[arg(short = 'n', value_name = "N")]
    pub n: Option<usize>,
}

/// Run `bat log`.
pub fn run(args: LogArgs, g: &Globals) -> CliResult {
    let l = open(g)?;
    let start = resolve(&l, args.rev.as_deref().unwrap_or("HEAD"))?;
    let log = l.log(start, args.n).map_err(lerr)?;
    if g.json {
        let arr: Vec<_> = log
            .iter()
            .map(|(id, c)| {
                serde_json::json!({
                    "id": id, "parents": c.parents, "tree": c.tree, "author": c.author,
                    "time": c.time, "message": c.message, "metadata": c.metadata, "fields": c.fields,
                })
            })
            .collect();
        print_json(&arr)?;
    } else {
        for (id, c) in log {
            println!("commit {id}");
            println!("Author: {}", c.author);
            println!("Date:   {}", fmt_time(c.time));
            println!();
            for line in c.message.lines() {
                println!("    {line}");
            }
            println!();
        }
    }
    Ok(ExitCode::SUCCESS)
}
