//! `bat stats`

use std::process::ExitCode;

use clap::Args;

use super::ledger_common::{lerr, open};
use super::{print_json, CliResult, Session};

/// Object counts and sizes: logical (all versions of all files) vs stored.
#[derive(Debug, Args)]
pub struct StatsArgs {}

/// Run `bat stats`.
pub fn run(_args: StatsArgs, g: &Session) -> CliResult {
    let l = open(g)?;
    let s = l.stats().map_err(lerr)?;
    if g.json {
        print_json(&s)?;
    } else {
        outln!("objects        {}", s.objects);
        outln!("commits        {}", s.commits);
        outln!("packs          {}", s.packs);
        outln!("logical bytes  {}", s.logical_bytes);
        outln!("unique bytes   {}", s.unique_bytes);
        outln!("stored bytes   {}", s.stored_bytes);
        outln!(
            "delta objects  {} ({} logical bytes stored in {})",
            s.delta_objects,
            s.delta_logical_bytes,
            s.delta_stored_bytes
        );
        if s.logical_bytes > 0 {
            outln!(
                "ratio          {:.3}",
                s.stored_bytes as f64 / s.logical_bytes as f64
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
