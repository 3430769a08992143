//! `bat gc`

use std::process::ExitCode;

use clap::Args;

use super::ledger_common::{lerr, open_exclusive, Bars};
use super::{print_json, CliResult, Session};

/// Remove objects unreachable from refs and the reflog; rewrite packs
/// crash-safely. Needs exclusive use of the ledger.
#[derive(Debug, Args)]
pub struct GcArgs {}

/// Run `bat gc`.
pub fn run(_args: GcArgs, g: &Session) -> CliResult {
    let mut l = open_exclusive(g)?;
    let bars = Bars::new(g);
    let rep = l.gc(&bars, g.cancel()).map_err(lerr)?;
    if g.json {
        print_json(&rep)?;
    } else {
        outln!(
            "gc: kept {} objects, removed {}, rewrote {} packs, deleted {} pack files; packs {} -> {} bytes",
            rep.kept_objects, rep.removed_objects, rep.rewritten_packs, rep.deleted_packs, rep.bytes_before, rep.bytes_after
        );
    }
    Ok(ExitCode::SUCCESS)
}
