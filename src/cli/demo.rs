//! `bat demo`: materialize, check and record a round view in a new ledger.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::ledger_common::{display_path, Bars};
use super::{print_json, CliError, CliResult, Globals};
use crate::contract::pack::Pack;
use crate::demo;

/// Run a first session with the embedded default pack: build the safe source
/// grid and the full 378-batch round view r01 (target S3), verify it, scan it
/// with the leakage firewall, and record it as the first commit of a new
/// ledger. Prints where everything is and the commands to try next.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where to create the ledger (new or empty). Default: a new directory
    /// under the system temporary directory, whose path is printed.
    pub dir: Option<PathBuf>,
    /// Use this benchmark pack instead of the embedded default.
    #[arg(long, value_name = "F")]
    pub pack: Option<PathBuf>,
}

/// Run `bat demo`.
pub fn run(args: DemoArgs, g: &Globals) -> CliResult {
    let dir = match args.dir {
        Some(d) => d,
        None => tempfile::Builder::new()
            .prefix("bat-demo-")
            .tempdir()
            .map_err(|e| CliError::new(format!("cannot create a temporary directory: {e}")))?
            .keep(),
    };
    let dir = display_path(&dir);
    let pack = Pack::load_or_default(args.pack.as_deref())?;
    let report = demo::run_demo(&dir, &pack, &Bars::new(g)).map_err(|e| {
        let hint = match e {
            demo::DemoError::NotEmpty { .. } => Some("name a new directory, or omit DIR"),
            _ => None,
        };
        let err = CliError::new(e.to_string());
        match hint {
            Some(h) => err.with_hint(h),
            None => err,
        }
    })?;
    if g.json {
        print_json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    let d = report.dir.display();
    println!("ledger      {d}/.bat");
    println!(
        "source      {d}/source/source.jsonl  sha256 {}",
        report.source_sha256
    );
    println!(
        "round view  {d}/{}/data/train.jsonl  {} rows, target {}, sha256 {}",
        report.round_id, report.rows, report.target_stage, report.train_sha256
    );
    println!(
        "checks      round verify passed; firewall: {} violations",
        report.firewall_violations
    );
    println!("commit      {}", report.commit);
    println!();
    println!("next:");
    println!("  bat -C {d} log");
    println!("  bat -C {d} show HEAD");
    println!(
        "  bat -C {d} cat HEAD:{}/data/manifest.json",
        report.round_id
    );
    println!("  bat -C {d} fsck");
    println!("  bat -C {d} stats");
    Ok(ExitCode::SUCCESS)
}
