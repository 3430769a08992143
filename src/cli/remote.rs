//! `bat remote add|remove|list`

use clap::{Args, Subcommand};

use super::ledger_common::{lerr, open};
use super::transfer_common::ok;
use super::{print_json, CliResult, Session};
use bat::remote::normalize_url;

/// Manage named remotes: ledger directories, bundle files, `http(s)://`
/// (`bat serve`) and `s3://bucket/prefix` endpoints.
#[derive(Debug, Args)]
pub struct RemoteArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: RemoteAction,
}

/// `bat remote` sub-verbs.
#[derive(Debug, Subcommand)]
pub enum RemoteAction {
    /// Register a remote under NAME.
    Add {
        /// Its name (e.g. origin).
        name: String,
        /// A ledger directory, a bundle file, http(s)://HOST/… or s3://BUCKET/PREFIX.
        url: String,
    },
    /// Forget a remote and its remote-tracking refs.
    Remove {
        /// Its name.
        name: String,
    },
    /// List remotes.
    List,
}

/// Run `bat remote`.
pub fn run(args: RemoteArgs, g: &Session) -> CliResult {
    let mut l = open(g)?;
    match args.action {
        RemoteAction::Add { name, url } => {
            let url = normalize_url(&url);
            l.add_remote(&name, &url).map_err(lerr)?;
            if g.json {
                print_json(&serde_json::json!({"added": name, "url": url}))?;
            } else {
                outln!("Added remote {name} -> {url}");
            }
        }
        RemoteAction::Remove { name } => {
            l.remove_remote(&name).map_err(lerr)?;
            if g.json {
                print_json(&serde_json::json!({"removed": name}))?;
            } else {
                outln!("Removed remote {name}");
            }
        }
        RemoteAction::List => {
            let rs = l.remotes().map_err(lerr)?;
            if g.json {
                print_json(&rs)?;
            } else {
                for r in rs {
                    let partial = match (&r.promisor, &r.filter) {
                        (true, Some(f)) => format!(" (partial clone, filter {f})"),
                        _ => String::new(),
                    };
                    outln!("{}\t{}{partial}", r.name, r.url);
                }
            }
        }
    }
    ok()
}
