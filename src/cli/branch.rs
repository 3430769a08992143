//! `bat branch [NAME [REV]] [-d NAME] [-r | -a]`

use std::process::ExitCode;

use bat_ledger::refs::REMOTES;
use bat_ledger::{CommitId, Head};
use clap::Args;

use super::ledger_common::{lerr, open, resolve};
use super::table::{Align, Cell, Table};
use super::term::Role;
use super::{print_json, CliError, CliResult, Session};

/// List branches (-r: remote-tracking ones, -a: both), create one at REV
/// (default HEAD), or delete one.
#[derive(Debug, Args)]
pub struct BranchArgs {
    /// Branch to create.
    pub name: Option<String>,
    /// Where to create it (default HEAD).
    pub rev: Option<String>,
    /// Delete this branch (its reflog is kept).
    #[arg(short = 'd', long = "delete", value_name = "NAME", conflicts_with_all = ["name", "rev"])]
    pub delete: Option<String>,
    /// List the remote-tracking branches (`origin/main`, written by fetch
    /// and clone) instead of the local ones.
    #[arg(short = 'r', long = "remotes", conflicts_with_all = ["name", "rev", "delete", "all"])]
    pub remotes: bool,
    /// List local and remote-tracking branches.
    #[arg(short = 'a', long = "all", conflicts_with_all = ["name", "rev", "delete"])]
    pub all: bool,
}

/// Remote-tracking branches as (`remote/branch`, commit). Fetch also keeps
/// a remote's promoted-round refs below `refs/remotes/<remote>/promoted/`;
/// those are not branches.
fn remote_branches(l: &bat_ledger::Ledger) -> Result<Vec<(String, CommitId)>, CliError> {
    Ok(l.list_refs(REMOTES)
        .map_err(lerr)?
        .into_iter()
        .filter(|(n, _)| {
            !n.split_once('/')
                .is_some_and(|(_, rest)| rest.starts_with("promoted/"))
        })
        .collect())
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
    let local = if args.remotes {
        Vec::new()
    } else {
        l.list_refs("refs/heads/").map_err(lerr)?
    };
    let remote = if args.remotes || args.all {
        remote_branches(&l)?
    } else {
        Vec::new()
    };
    let is_current = |n: &str| current.as_deref() == Some(n);
    if g.json {
        let arr: Vec<_> = local
            .iter()
            .map(|(n, c)| serde_json::json!({"name": n, "commit": c, "current": is_current(n)}))
            .collect();
        let mut doc = serde_json::json!({"head": head, "branches": arr});
        if args.remotes || args.all {
            let rarr: Vec<_> = remote
                .iter()
                .map(|(n, c)| serde_json::json!({"name": n, "ref": format!("{REMOTES}{n}"), "commit": c}))
                .collect();
            doc["remote_branches"] = serde_json::Value::Array(rarr);
        }
        print_json(&doc)?;
    } else {
        // One table for local and remote branches, so long names do not
        // push the ids out of line.
        let mut t = Table::new(&[Align::Left, Align::Left, Align::Left]).gap(1);
        for (n, c) in &local {
            let (mark, role) = if is_current(n) {
                ("*", Some(Role::Ref))
            } else {
                (" ", None)
            };
            t.row(vec![
                mark.into(),
                Cell::styled(n.clone(), role),
                Cell::styled(c.to_string(), Some(Role::Id)),
            ]);
        }
        for (n, c) in &remote {
            // `-a` marks them as git does, so they cannot be mistaken for
            // local branches of the same name.
            let name = if args.all {
                format!("remotes/{n}")
            } else {
                n.clone()
            };
            t.row(vec![
                " ".into(),
                Cell::styled(name, Some(Role::Bad)),
                Cell::styled(c.to_string(), Some(Role::Id)),
            ]);
        }
        out!("{}", t.render(g.paint));
    }
    Ok(ExitCode::SUCCESS)
}
