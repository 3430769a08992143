//! `bat branch [NAME [REV]] [-d NAME]`

use std::process::ExitCode;

use bat_ledger::Head;
use clap::Args;

use super::ledger_common::{lerr, open, resolve};
use super::{print_json, CliResult, Session};

/// List branches, create one at REV (default HEAD), or delete one.
#[derive(Debug, Args)]
pub struct BranchArgs {
    /// Branch to create.
    pub name: Option<String>,
    /// Where to create it (default HEAD).
    pub rev: Option<String>,
    /// Delete this branch (its reflog is kept).
    #[arg(short = 'd', long = "delete", value_name = "NAME", conflicts_with_all = ["name", "rev"])]
    pub delete: Option<String>,
}

/// Run `bat branch`.
pub fn run(args: BranchArgs, g: &Session) -> CliResult {
    let mut l = open(g)?;
    if let Some(d) = args.delete {
        let was = l.delete_branch(&d).map_err(lerr)?;
        if g.json {
            print_json(&serde_json::json!({"deleted": d, "was": was}))?;
        } else {
            outln!("Deleted branch {d} (was {was})");
        }
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(name) = args.name {
        let at = resolve(&l, args.rev.as_deref().unwrap_or("HEAD"))?;
        l.create_branch(&name, at).map_err(lerr)?;
        if g.json {
            print_json(&serde_json::json!({"branch": name, "commit": at}))?;
        } else {
            outln!("Created branch {name} at {at}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let head = l.head().map_err(lerr)?;
    let current = match &head {
        Head::Branch { name, .. } => name.strip_prefix("refs/heads/").map(str::to_string),
        Head::Detached { .. } => None,
    };
    let list = l.list_refs("refs/heads/").map_err(lerr)?;
    if g.json {
        let arr: Vec<_> = list
            .iter()
            .map(|(n, c)| serde_json::json!({"name": n, "commit": c, "current": current.as_deref() == Some(n.as_str())}))
            .collect();
        print_json(&serde_json::json!({"head": head, "branches": arr}))?;
    } else {
        for (n, c) in list {
            let mark = if current.as_deref() == Some(n.as_str()) {
                "*"
            } else {
                " "
            };
            outln!("{mark} {n} {c}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
