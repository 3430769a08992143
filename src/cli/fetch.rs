//! `bat fetch [REMOTE]`

use clap::Args;

use super::ledger_common::open;
use super::transfer_common::{fetch_named, ok, print_fetch};
use super::{print_json, CliResult, Session};

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
pub fn run(args: FetchArgs, g: &Session) -> CliResult {
    let mut l = open(g)?;
    let out = fetch_named(&mut l, &args.remote, g)?;
    if g.json {
        print_json(&out)?;
    } else {
        print_fetch(&args.remote, &out)?;
    }
    ok()
}
