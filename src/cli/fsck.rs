//! `bat fsck`

use std::process::ExitCode;

use clap::Args;

use super::ledger_common::{lerr, open, Bars};
use super::{print_json, CliResult, Session};

/// Verify every object reachable from refs and the reflog (decompress +
/// digest) and the catalog's consistency; exit 1 listing each problem.
#[derive(Debug, Args)]
pub struct FsckArgs {}

/// Run `bat fsck`.
pub fn run(_args: FsckArgs, g: &Session) -> CliResult {
    let l = open(g)?;
    let bars = Bars::new(g);
    let rep = l.fsck(&bars, g.cancel()).map_err(lerr)?;
    if g.json {
        print_json(&serde_json::json!({
            "ok": rep.ok(), "objects_checked": rep.objects_checked, "objects_verified": rep.objects_verified,
            "commits_reachable": rep.commits_reachable, "unreferenced_packs": rep.unreferenced_packs,
            "promised_files": rep.promised_files, "promisor": rep.promisor,
            "pruned_files": rep.pruned_files,
            "problems": rep.problems.iter().map(|p| serde_json::json!({
                "object": p.object, "pack": p.pack, "offset": p.offset, "message": p.message, "text": p.to_string(),
            })).collect::<Vec<_>>(),
        }))?;
    } else {
        for p in &rep.problems {
            outln!("problem: {p}");
        }
        for p in &rep.unreferenced_packs {
            outln!("note: pack {p} is not referenced (left by an interrupted command; `bat gc` removes it)");
        }
        if let Some(r) = &rep.promisor {
            if rep.promised_files > 0 {
                outln!(
                    "note: {} files are promised by {r} (partial clone; fetched on demand)",
                    rep.promised_files
                );
            }
        }
        if rep.pruned_files > 0 {
            outln!(
                "note: {} files were pruned by a retention gc (recorded; `bat fetch REMOTE` from a remote that still has their bytes restores them)",
                rep.pruned_files
            );
        }
        outln!(
            "{} catalog rows checked, {} reachable objects verified, {} commits, {} problems",
            rep.objects_checked,
            rep.objects_verified,
            rep.commits_reachable,
            rep.problems.len()
        );
    }
    Ok(if rep.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
