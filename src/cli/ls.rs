//! `bat ls REV[:PATH]`

use std::process::ExitCode;

use bat_ledger::{Error, Mode, TreeId};
use clap::Args;

use super::ledger_common::{lerr, open, resolve, split_rev_path};
use super::{print_json, CliResult, Session};

/// List a directory (or one file) of a commit.
#[derive(Debug, Args)]
pub struct LsArgs {
    /// REV or REV:PATH (default HEAD).
    pub target: Option<String>,
}

fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::File => "file",
        Mode::Executable => "exec",
        Mode::Symlink => "link",
        Mode::Tree => "tree",
    }
}

/// Run `bat ls`.
pub fn run(args: LsArgs, g: &Session) -> CliResult {
    let l = open(g)?;
    let t = args.target.unwrap_or_else(|| "HEAD".into());
    let (rev, path) = split_rev_path(&t);
    let id = resolve(&l, rev)?;
    let c = l.read_commit(&id).map_err(lerr)?;
    let e = l.lookup_path(&c.tree, path).map_err(lerr)?.ok_or_else(|| {
        lerr(Error::PathNotFound {
            rev: rev.into(),
            path: path.into(),
        })
    })?;
    let entries = if e.mode == Mode::Tree {
        l.read_tree(&TreeId(e.id)).map_err(lerr)?.entries
    } else {
        vec![e]
    };
    if g.json {
        let arr: Vec<_> = entries
            .iter()
            .map(
                |e| serde_json::json!({"name": e.name, "mode": e.mode, "id": e.id, "size": e.size}),
            )
            .collect();
        print_json(&arr)?;
    } else {
        for e in entries {
            let suffix = if e.mode == Mode::Tree { "/" } else { "" };
            outln!(
                "{} {} {:>12}  {}{suffix}",
                mode_name(e.mode),
                e.id,
                e.size,
                e.name
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
