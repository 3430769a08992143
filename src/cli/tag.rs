//! `bat tag NAME [REV]`

use std::process::ExitCode;

use clap::Args;

use super::ledger_common::{lerr, open, resolve};
use super::{print_json, CliResult, Session};

/// Create a tag at REV (default HEAD); without NAME, list tags.
#[derive(Debug, Args)]
pub struct TagArgs {
    /// Tag name.
    pub name: Option<String>,
    /// Where to put it (default HEAD).
    pub rev: Option<String>,
}

/// Run `bat tag`.
pub fn run(args: TagArgs, g: &Session) -> CliResult {
    let mut l = open(g)?;
    match args.name {
        Some(name) => {
            let at = resolve(&l, args.rev.as_deref().unwrap_or("HEAD"))?;
            l.create_tag(&name, at).map_err(lerr)?;
            if g.json {
                print_json(&serde_json::json!({"tag": name, "commit": at}))?;
            } else {
                outln!("Tagged {at} as {name}");
            }
        }
        None => {
            let list = l.list_refs("refs/tags/").map_err(lerr)?;
            if g.json {
                let arr: Vec<_> = list
                    .iter()
                    .map(|(n, c)| serde_json::json!({"name": n, "commit": c}))
                    .collect();
                print_json(&arr)?;
            } else {
                for (n, c) in list {
                    outln!("{n} {c}");
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
