//! `bat checkout REV --to DIR`

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::ledger_common::{display_path, lerr, open, resolve, Bars};
use super::{print_json, CliError, CliResult, Session};

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
pub fn run(args: CheckoutArgs, g: &Session) -> CliResult {
    super::output_path::refuse_inside_ledger(&args.to, "--to")?;
    let l = open(g)?;
    let id = resolve(&l, &args.rev)?;
    let bars = Bars::new(g);
    // In a partial clone the checkout fetches the promised files (verified
    // on arrival) through the ledger's promisor layer.
    let st = l
        .checkout(&id, &args.to, &bars, g.cancel())
        .map_err(|e| match e {
            bat_ledger::Error::Cancelled => CliError::interrupted(format!(
                "checkout of {} stopped; nothing was written to {}",
                args.rev,
                args.to.display()
            )),
            other => lerr(other),
        })?;
    let fetched = l.fetched_on_demand();
    if g.json {
        print_json(
            &serde_json::json!({"commit": id, "to": display_path(&args.to), "stats": st, "fetched_on_demand": fetched}),
        )?;
    } else {
        if fetched > 0 {
            outln!("Fetched {fetched} promised files from the remote");
        }
        outln!(
            "Checked out {id} into {} ({} files, {} bytes)",
            args.to.display(),
            st.files,
            st.bytes
        );
    }
    Ok(ExitCode::SUCCESS)
}
