//! `bat firewall scan`: the leakage scanner (contract §F). Stdout is exactly
//! the reference scanner's; exit 1 when anything is found.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::files_common::resolve_existing;
use super::{CliError, CliResult, Session};
use bat_contract::firewall::{parse_markers, report_text, scan_bytes, LeakageRules};
use bat_contract::pack::Pack;

/// Firewall verbs.
#[derive(Debug, Args)]
pub struct FirewallArgs {
    /// The firewall verb.
    #[command(subcommand)]
    pub command: FirewallCommand,
}

/// `bat firewall …`
#[derive(Debug, Subcommand)]
pub enum FirewallCommand {
    /// Scan a JSONL training artifact for held-out evidence; exit 1 on violations.
    Scan(ScanArgs),
}

/// `bat firewall scan` arguments.
#[derive(Debug, Args)]
pub struct ScanArgs {
    /// The JSONL file to scan.
    pub file: PathBuf,
    /// A JSON array of held-out marker strings (each at least 4 characters after stripping).
    #[arg(long = "heldout-markers", value_name = "FILE")]
    pub heldout_markers: Option<PathBuf>,
    /// Benchmark pack (default: the embedded pack).
    #[arg(long, value_name = "FILE")]
    pub pack: Option<PathBuf>,
}

/// Run `bat firewall …`.
pub fn run(args: FirewallArgs, _g: &Session) -> CliResult {
    let FirewallCommand::Scan(a) = args.command;
    let pack = Pack::load_or_default(a.pack.as_deref())?;
    let rules = LeakageRules::from_pack(&pack)?;
    let path = resolve_existing(&a.file)?;
    let markers = match &a.heldout_markers {
        Some(m) => {
            let bytes = bat_contract::fsutil::read_json_input(m)
                .map_err(|e| CliError::new(format!("cannot read {}: {e}", m.display())))?;
            parse_markers(&bytes)?
        }
        None => Vec::new(),
    };
    let bytes = bat_contract::fsutil::read_json_input(&path)
        .map_err(|e| CliError::new(format!("cannot read {}: {e}", path.display())))?;
    let violations = scan_bytes(&bytes, &markers, &rules)?;
    out!("{}", report_text(&violations));
    Ok(if violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
