//! `bat checkout REV --to DIR`

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::ledger_common::{display_path, lerr, open, resolve, Bars, NEVER_CANCEL};
use super::{print_json, CliResult, Globals};

/// Write a commit's files into DIR (new or empty), verifying every byte.
/// Nothing appears in DIR unless the whole tree verified.
#[derive(Debug, Args)]
pub struct CheckoutArgs {
    /// The commit.
    pub rev: String,
    /// Destination directory (must not exist, or be empty).
    #[arg(long = "to", value_name = "DIR")]
    pub to: PathBuf,
}

/// Run `bat checkout`.
pub fn run(args: CheckoutArgs, g: &Globals) -> CliResult {
    let l = open(g)?;
    let id = resolve(&l, &args.rev)?;
    let bars = Bars::new(g);
    let st = l
        .checkout(&id, &args.to, &bars, &NEVER_CANCEL)
        .map_err(lerr)?;
    if g.json {
        print_json(&serde_json::json!({"commit": id, "to": display_path(&args.to), "stats": st}))?;
    } else {
        println!(
            "Checked out {id} into {} ({} files, {} bytes)",
            args.to.display(),
            st.files,
            st.bytes
        );
    }
    Ok(ExitCode::SUCCESS)
}
