//! `bat fetch [REMOTE]`

use clap::Args;

use super::ledger_common::{open, NEVER_CANCEL};
use super::transfer_common::{ok, open_named, rerr, TransferProgress};
use super::{print_json, CliResult, Globals};
use crate::remote::{filter_by_name, RemoteOptions};

/// Download the objects a remote has and this ledger lacks (verified
/// before anything references them), then update the remote-tracking refs
/// `refs/remotes/REMOTE/BRANCH`. Interrupted fetches resume where they
/// stopped. A partial clone keeps its filter.
#[derive(Debug, Args)]
pub struct FetchArgs {
    /// The remote (default: origin).
    #[arg(default_value = "origin")]
    pub remote: String,
}

/// Run `bat fetch`.
pub fn run(args: FetchArgs, g: &Globals) -> CliResult {
    let mut l = open(g)?;
    let out = fetch_named(&mut l, &args.remote, g)?;
    if g.json {
        print_json(&out)?;
    } else {
        print_fetch(&args.remote, &out);
    }
    ok()
}

/// Fetch from the named remote, honouring a partial clone's filter.
pub fn fetch_named(
    l: &mut bat_ledger::Ledger,
    name: &str,
    g: &Globals,
) -> Result<bat_ledger::remote::FetchOutcome, super::CliError> {
    let (cfg, mut remote) = open_named(
        l,
        name,
        &RemoteOptions {
            net: g.net.clone(),
            ..RemoteOptions::default()
        },
    )?;
    let filter = match (&cfg.promisor, &cfg.filter) {
        (true, Some(f)) => Some(filter_by_name(f).map_err(super::CliError::new)?),
        _ => None,
    };
    let p = TransferProgress::new(g);
    bat_ledger::remote::transfer::fetch(l, remote.as_mut(), name, filter, &p, &NEVER_CANCEL)
        .map_err(rerr)
}

/// Text report of a fetch.
pub fn print_fetch(name: &str, out: &bat_ledger::remote::FetchOutcome) {
    println!(
        "Fetched from {name}: {} objects received, {} new, {} payload bytes{}",
        out.stats.objects_received,
        out.stats.objects_stored,
        out.stats.payload_bytes,
        if out.stats.files_promised > 0 {
            format!(", {} files left on the remote", out.stats.files_promised)
        } else {
            String::new()
        }
    );
    for r in &out.refs {
        if r.status != "up to date" {
            println!(
                "  {} -> {} ({}) {}",
                r.remote_ref,
                r.local_ref,
                r.status,
                &r.new.to_string()[..12]
            );
        }
    }
}
