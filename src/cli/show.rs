//! `bat show REV`

use std::process::ExitCode;

use bat_ledger::Mode;
use clap::Args;

use super::ledger_common::{fmt_time, lerr, open, resolve};
use super::{print_json, CliResult, Session};

/// Show a commit: its header, metadata and files.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The commit (default HEAD).
    pub rev: Option<String>,
}

/// Run `bat show`.
pub fn run(args: ShowArgs, g: &Session) -> CliResult {
    let l = open(g)?;
    let id = resolve(&l, args.rev.as_deref().unwrap_or("HEAD"))?;
    let c = l.read_commit(&id).map_err(lerr)?;
    let entries = l.walk_files(&c.tree).map_err(lerr)?;
    let mut files = Vec::new();
    let mut links = Vec::new();
    for e in &entries {
        if e.mode == Mode::Symlink {
            let t = l.read_bytes(&e.id).map_err(lerr)?;
            links.push(serde_json::json!({"path": e.path, "target": String::from_utf8_lossy(&t)}));
        } else {
            files.push(serde_json::json!({
                "path": e.path, "size": e.size, "id": e.id, "executable": e.mode == Mode::Executable,
            }));
        }
    }
    if g.json {
        print_json(&serde_json::json!({
            "id": id, "parents": c.parents, "tree": c.tree, "author": c.author, "time": c.time,
            "message": c.message, "metadata": c.metadata, "fields": c.fields,
            "files": files, "symlinks": links,
        }))?;
    } else {
        outln!("commit {id}");
        for p in &c.parents {
            outln!("parent {p}");
        }
        outln!("tree   {}", c.tree);
        outln!("Author: {}", c.author);
        outln!("Date:   {}", fmt_time(c.time));
        outln!();
        for line in c.message.lines() {
            outln!("    {line}");
        }
        if !c.metadata.is_null() {
            outln!();
            outln!("metadata: {}", c.metadata);
        }
        outln!();
        for e in &entries {
            outln!("{:>12}  {}  {}", e.size, e.id, e.path);
        }
    }
    Ok(ExitCode::SUCCESS)
}
