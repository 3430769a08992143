//! `bat push [REMOTE] [BRANCH] [--force]`

use bat_ledger::refs::HEADS as HEADS_PREFIX;
use bat_ledger::Head;
use clap::Args;

use super::ledger_common::{lerr, open};
use super::transfer_common::{ok, open_named, rerr, TransferProgress};
use super::{print_json, CliError, CliResult, Session};
use bat::remote::{dir_remote_ledger, RemoteOptions};

/// Send a branch to a remote: only objects the remote lacks cross; every
/// object is verified and durable there before the remote branch moves by
/// compare-and-swap. A push that would drop remote commits is refused
/// unless --force; if someone pushed meanwhile you are told to pull.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// The remote (default: origin).
    #[arg(default_value = "origin")]
    pub remote: String,
    /// The branch (default: the current branch).
    pub branch: Option<String>,
    /// Overwrite the remote branch even if it is not an ancestor.
    #[arg(long)]
    pub force: bool,
    /// Also copy private raw evaluations (`.bat/private/raw-eval`) to a
    /// directory remote. Without it, nothing private is ever sent.
    #[arg(long)]
    pub include_private: bool,
}

/// Run `bat push`.
pub fn run(args: PushArgs, g: &Session) -> CliResult {
    let mut l = open(g)?;
    let branch = match (&args.branch, l.head().map_err(lerr)?) {
        (Some(b), _) => b.clone(),
        (None, Head::Branch { name, .. }) => name.trim_start_matches(HEADS_PREFIX).to_string(),
        (None, Head::Detached { .. }) => {
            return Err(CliError::new("HEAD is detached; name the branch to push").usage())
        }
    };
    let opts = RemoteOptions {
        include_private: args.include_private,
        net: g.net.clone(),
    };
    let (cfg, mut remote) = open_named(&l, &args.remote, &opts)?;
    let private_dest = if args.include_private {
        Some(dir_remote_ledger(&cfg.url).ok_or_else(|| {
            CliError::new(format!(
                "--include-private works only with directory remotes; {} cannot hold private data",
                cfg.url
            ))
            .usage()
        })?)
    } else {
        None
    };
    let full = format!("{HEADS_PREFIX}{branch}");
    let p = TransferProgress::new(g);
    let out = bat_ledger::remote::transfer::push(
        &l,
        remote.as_mut(),
        &full,
        &full,
        args.force,
        &p,
        g.cancel(),
    )
    .map_err(rerr)?;
    drop(remote);
    let mut private = 0;
    if let Some(dest) = private_dest {
        private = bat::remote::private::copy_raw_evals(l.dir(), &dest).map_err(CliError::new)?;
    }
    let tracking = format!("refs/remotes/{}/{branch}", args.remote);
    let cur = l
        .all_refs()
        .map_err(lerr)?
        .into_iter()
        .find(|(n, _)| *n == tracking)
        .map(|x| x.1);
    if let Some(new) = out.new {
        if cur != Some(new) {
            l.update_ref(&tracking, cur, Some(new), "push")
                .map_err(lerr)?;
        }
    }
    if g.json {
        print_json(&serde_json::json!({"push": out, "private_files": private}))?;
    } else if out.up_to_date {
        outln!("{branch}: everything up to date on {}", args.remote);
    } else {
        outln!(
            "Pushed {branch} to {}: {} objects, {} payload bytes{}{}",
            args.remote,
            out.objects_sent,
            out.payload_bytes,
            if out.forced { " (forced)" } else { "" },
            if private > 0 {
                format!(", {private} private files")
            } else {
                String::new()
            }
        );
    }
    ok()
}
