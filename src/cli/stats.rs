//! `bat stats`

use std::process::ExitCode;

use clap::Args;

use super::ledger_common::{lerr, open};
use super::{print_json, CliResult, Globals};

/// Object counts and sizes: logical (all versions of all files) vs stored.
#[derive(Debug, Args)]
pub struct StatsArgs {}

/// Run `bat stats`.
pub fn run(_args: StatsArgs, g: &Globals) -> CliResult {
    let l = open(g)?;
    let s = l.stats().map_err(lerr)?;
    if g.json {
        print_json(&s)?;
    } else {
        println!("objects        {}", s.objects);
        println!("commits        {}", s.commits);
        println!("packs          {}", s.packs);
        println!("logical bytes  {}", s.logical_bytes);
        println!("unique bytes   {}", s.unique_bytes);
        println!("stored bytes   {}", s.stored_bytes);
        println!(
            "delta objects  {} ({} logical bytes stored in {})",
            s.delta_objects, s.delta_logical_bytes, s.delta_stored_bytes
        );
        if s.logical_bytes > 0 {
            println!(
                "ratio          {:.3}",
                s.stored_bytes as f64 / s.logical_bytes as f64
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
