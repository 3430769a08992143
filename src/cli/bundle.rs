//! `bat bundle create FILE [REV…]`, `bat bundle verify FILE`

use std::path::PathBuf;

use bat_ledger::refs::{HEADS, TAGS};
use bat_ledger::remote::bundle::{create_bundle, verify_bundle};
use bat_ledger::Head;
use clap::{Args, Subcommand};

use super::ledger_common::{display_path, lerr, open};
use super::transfer_common::{ok, rerr, TransferProgress};
use super::{print_json, CliError, CliResult, Session};
use bat::round::promote::PROMOTED_PREFIX;

/// Single self-verifying files holding refs and everything they reach —
/// for attaching a campaign to a paper. `bat clone FILE` restores one.
/// Private raw evaluations are never written into a bundle.
#[derive(Debug, Args)]
pub struct BundleArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: BundleAction,
}

/// `bat bundle` sub-verbs.
#[derive(Debug, Subcommand)]
pub enum BundleAction {
    /// Write a bundle of branches/tags (default: every branch and tag).
    /// A bundled branch brings its promoted-round ref
    /// (`refs/promoted/<branch>`) along.
    Create {
        /// The bundle file to write.
        file: PathBuf,
        /// Branches, tags, full ref names or HEAD.
        revs: Vec<String>,
    },
    /// Check a bundle completely: checksums, framing, every object, and
    /// that every ref's history and files are inside.
    Verify {
        /// The bundle file.
        file: PathBuf,
    },
}

/// Run `bat bundle`.
pub fn run(args: BundleArgs, g: &Session) -> CliResult {
    match args.action {
        BundleAction::Create { file, revs } => create(file, revs, g),
        BundleAction::Verify { file } => verify(file, g),
    }
}

fn create(file: PathBuf, revs: Vec<String>, g: &Session) -> CliResult {
    super::output_path::refuse_inside_ledger(&file, "bundle file")?;
    let l = open(g)?;
    let all = l.all_refs().map_err(lerr)?;
    let mut refs: Vec<(String, bat_ledger::CommitId)> = Vec::new();
    if revs.is_empty() {
        refs = all
            .iter()
            .filter(|(n, _)| n.starts_with(HEADS) || n.starts_with(TAGS))
            .cloned()
            .collect();
    }
    for r in &revs {
        let full = if r == "HEAD" {
            match l.head().map_err(lerr)? {
                Head::Branch { name, .. } => name,
                Head::Detached { .. } => {
                    return Err(CliError::new("HEAD is detached; name a branch or tag").usage())
                }
            }
        } else if r.starts_with("refs/") {
            r.clone()
        } else {
            l.full_ref_name(r).map_err(lerr)?
        };
        let c = all
            .iter()
            .find(|(n, _)| *n == full)
            .map(|x| x.1)
            .ok_or_else(|| CliError::new(format!("{r} is not a branch, tag or ref")).usage())?;
        if !refs.iter().any(|(n, _)| *n == full) {
            refs.push((full, c));
        }
    }
    // A branch's promoted round (`refs/promoted/<branch>`) is part of the
    // branch's record: without it a clone would start the next round from
    // the wrong checkpoint.
    let promoted: Vec<(String, bat_ledger::CommitId)> = refs
        .iter()
        .filter_map(|(n, _)| n.strip_prefix(HEADS))
        .map(|b| format!("{PROMOTED_PREFIX}{b}"))
        .filter(|p| !refs.iter().any(|(n, _)| n == p))
        .filter_map(|p| all.iter().find(|(n, _)| *n == p).cloned())
        .collect();
    refs.extend(promoted);
    if refs.is_empty() {
        return Err(CliError::new("nothing to bundle: the ledger has no branches").usage());
    }
    let p = TransferProgress::new(g);
    let s = create_bundle(&l, &file, &refs, &p, g.cancel()).map_err(rerr)?;
    if g.json {
        print_json(&serde_json::json!({"file": display_path(&file), "summary": s}))?;
    } else {
        outln!(
            "Wrote {} ({} refs, {} objects, {} bytes{})",
            file.display(),
            s.refs.len(),
            s.objects,
            s.file_bytes,
            absent_note(s.absent)
        );
    }
    ok()
}

fn verify(file: PathBuf, g: &Session) -> CliResult {
    let scratch =
        tempfile::tempdir().map_err(|e| CliError::new(format!("temporary directory: {e}")))?;
    let p = TransferProgress::new(g);
    let s = verify_bundle(&file, &scratch.path().join("verify"), &p, g.cancel()).map_err(rerr)?;
    if g.json {
        print_json(&serde_json::json!({"file": display_path(&file), "ok": true, "summary": s}))?;
    } else {
        outln!(
            "{}: ok ({} refs, {} objects, {} bytes{}; every object verified, every ref complete)",
            file.display(),
            s.refs.len(),
            s.objects,
            s.file_bytes,
            absent_note(s.absent)
        );
        for (n, c) in &s.refs {
            outln!("  {n} {}", &c.to_string()[..12]);
        }
    }
    ok()
}

/// ", N files pruned (carried as absent)" when a bundle has absent entries.
fn absent_note(n: u64) -> String {
    if n == 0 {
        String::new()
    } else {
        format!(", {n} files pruned (carried as absent)")
    }
}
