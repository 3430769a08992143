//! `bat pull [REMOTE] [BRANCH]`

use bat_ledger::refs::HEADS as HEADS_PREFIX;
use bat_ledger::remote::transfer::is_ancestor;
use bat_ledger::Head;
use clap::Args;

use super::ledger_common::{lerr, open};
use super::transfer_common::{fetch_named, ok, print_fetch, rerr};
use super::{print_json, CliError, CliResult, Session};

/// Fetch from a remote, then fast-forward the local branch to the remote's
/// (bat does not merge: a diverged branch is reported, nothing moves).
#[derive(Debug, Args)]
pub struct PullArgs {
    /// The remote (default: origin).
    #[arg(default_value = "origin")]
    pub remote: String,
    /// The branch (default: the current branch).
    pub branch: Option<String>,
}

/// Run `bat pull`.
pub fn run(args: PullArgs, g: &Session) -> CliResult {
    let mut l = open(g)?;
    let fetched = fetch_named(&mut l, &args.remote, g)?;
    let head = l.head().map_err(lerr)?;
    let branch = match (&args.branch, &head) {
        (Some(b), _) => b.clone(),
        (None, Head::Branch { name, .. }) => name.trim_start_matches(HEADS_PREFIX).to_string(),
        (None, Head::Detached { .. }) => {
            return Err(CliError::new("HEAD is detached; name the branch to pull").usage())
        }
    };
    let tracking = format!("refs/remotes/{}/{branch}", args.remote);
    let theirs = l
        .resolve(&tracking)
        .map_err(|_| CliError::new(format!("{} has no branch {branch}", args.remote)).usage())?;
    let local_ref = format!("{HEADS_PREFIX}{branch}");
    let ours = l
        .all_refs()
        .map_err(lerr)?
        .into_iter()
        .find(|(n, _)| *n == local_ref)
        .map(|x| x.1);
    let status = match ours {
        Some(o) if o == theirs => "up to date",
        Some(o) if is_ancestor(&l, theirs, o).map_err(rerr)? => "ahead (nothing to pull)",
        Some(o) if !is_ancestor(&l, o, theirs).map_err(rerr)? => {
            return Err(CliError::new(format!(
                "{branch} and {tracking} have diverged; bat does not merge"
            ))
            .with_hint("keep yours and push --force, or `bat reset` to the remote's commit"))
        }
        _ => {
            l.update_ref(
                &local_ref,
                ours,
                Some(theirs),
                &format!("pull: fast-forward from {}", args.remote),
            )
            .map_err(lerr)?;
            "fast-forwarded"
        }
    };
    if g.json {
        print_json(
            &serde_json::json!({"fetch": fetched, "branch": branch, "old": ours, "new": theirs, "status": status}),
        )?;
    } else {
        print_fetch(&args.remote, &fetched)?;
        outln!("{branch}: {status} ({})", &theirs.to_string()[..12]);
    }
    ok()
}
