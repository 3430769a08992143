//! `bat tag NAME [REV]`

use std::process::ExitCode;

use clap::Args;

use super::ledger_common::{lerr, open, resolve};
use super::{print_json, CliError, CliResult, Session};

/// Create a tag at REV (default HEAD); without NAME, list tags. `-f` moves
/// an existing tag, `-d` deletes one (both logged in the tag's reflog,
/// which keeps the old commit until `bat gc --expire-reflog`).
#[derive(Debug, Args)]
pub struct TagArgs {
    /// Tag name.
    pub name: Option<String>,
    /// Where to put it (default HEAD).
    pub rev: Option<String>,
    /// Move the tag if it exists.
    #[arg(short = 'f', long, conflicts_with = "delete")]
    pub force: bool,
    /// Delete the tag.
    #[arg(short = 'd', long, requires = "name", conflicts_with = "rev")]
    pub delete: bool,
}

/// Run `bat tag`.
pub fn run(args: TagArgs, g: &Session) -> CliResult {
    let mut l = open(g)?;
    match args.name {
        Some(name) if args.delete => {
            let was = l.delete_tag(&name).map_err(lerr)?;
            if g.json {
                print_json(&serde_json::json!({"tag": name, "deleted": was}))?;
            } else {
                outln!("Deleted tag {name} (was {was})");
            }
        }
        Some(name) => {
            let at = resolve(&l, args.rev.as_deref().unwrap_or("HEAD"))?;
            let old = if args.force {
                l.move_tag(&name, at).map_err(lerr)?
            } else {
                l.create_tag(&name, at).map_err(|e| match e {
                    bat_ledger::Error::RefExists { .. } => {
                        CliError::from(e).with_hint(format!("`bat tag -f {name} REV` moves it"))
                    }
                    other => lerr(other),
                })?;
                None
            };
            if g.json {
                print_json(&serde_json::json!({"tag": name, "commit": at, "previous": old}))?;
            } else if let Some(o) = old.filter(|o| *o != at) {
                outln!("Moved tag {name} from {o} to {at}");
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
