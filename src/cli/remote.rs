//! `bat remote add|remove|list|credential`

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::ledger_common::{lerr, open};
use super::transfer_common::ok;
use super::{print_json, CliResult, Session};
use bat::remote::credentials::{read_token_file, set_credential, Credential};
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
        /// Where the remote's token comes from.
        #[command(flatten)]
        cred: CredentialArgs,
    },
    /// Store, replace or forget the credential of remote NAME (used by
    /// fetch, pull, push and a partial clone's on-demand reads when no
    /// --token is given).
    Credential {
        /// The remote.
        name: String,
        /// Where the remote's token comes from.
        #[command(flatten)]
        cred: CredentialArgs,
        /// Forget the stored credential.
        #[arg(long, conflicts_with_all = ["token_file", "credential_helper"])]
        clear: bool,
    },
    /// Forget a remote and its remote-tracking refs.
    Remove {
        /// Its name.
        name: String,
    },
    /// List remotes.
    List,
}

/// Where a remote's token comes from. It is kept in `.bat/credentials`
/// (mode 0600), never in the objects, so no push, bundle or clone carries
/// it, and it is never printed.
#[derive(Debug, Args)]
pub struct CredentialArgs {
    /// Read the token from the first line of FILE and store it for this
    /// remote (FILE itself is not needed afterwards).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// A command that prints the token on its first line, run (without a
    /// shell; split at spaces) whenever the remote is used.
    #[arg(long, value_name = "COMMAND", conflicts_with = "token_file")]
    pub credential_helper: Option<String>,
}

impl CredentialArgs {
    /// The credential these flags name, if any.
    pub fn credential(&self) -> Result<Option<Credential>, super::CliError> {
        if let Some(f) = &self.token_file {
            return Ok(Some(Credential::Token(read_token_file(f)?)));
        }
        if let Some(h) = &self.credential_helper {
            let argv: Vec<String> = h.split_whitespace().map(str::to_string).collect();
            if argv.is_empty() {
                return Err(super::CliError::new("--credential-helper is empty").usage());
            }
            return Ok(Some(Credential::Helper(argv)));
        }
        Ok(None)
    }
}

/// Run `bat remote`.
pub fn run(args: RemoteArgs, g: &Session) -> CliResult {
    let mut l = open(g)?;
    match args.action {
        RemoteAction::Add { name, url, cred } => {
            let url = normalize_url(&url);
            let c = cred.credential()?;
            l.add_remote(&name, &url).map_err(lerr)?;
            let stored = c.as_ref().map(Credential::describe);
            if let Some(c) = c {
                set_credential(l.dir(), &name, Some(c))?;
            }
            if g.json {
                print_json(&serde_json::json!({"added": name, "url": url, "credential": stored}))?;
            } else {
                let with = stored.map_or(String::new(), |k| format!(" (credential: {k} stored)"));
                outln!("Added remote {name} -> {url}{with}");
            }
        }
        RemoteAction::Credential { name, cred, clear } => {
            if l.remote_config(&name).map_err(lerr)?.is_none() {
                return Err(super::CliError::new(format!("no remote named {name:?}"))
                    .with_hint("list remotes with `bat remote list`")
                    .usage());
            }
            let c = cred.credential()?;
            if c.is_none() && !clear {
                return Err(super::CliError::new(
                    "give --token-file FILE, --credential-helper COMMAND or --clear",
                )
                .usage());
            }
            let stored = c.as_ref().map(Credential::describe);
            set_credential(l.dir(), &name, c)?;
            if g.json {
                print_json(&serde_json::json!({"remote": name, "credential": stored}))?;
            } else {
                match stored {
                    Some(k) => outln!("Stored a {k} for remote {name}"),
                    None => outln!("Forgot the credential of remote {name}"),
                }
            }
        }
        RemoteAction::Remove { name } => {
            l.remove_remote(&name).map_err(lerr)?;
            set_credential(l.dir(), &name, None)?;
            if g.json {
                print_json(&serde_json::json!({"removed": name}))?;
            } else {
                outln!("Removed remote {name}");
            }
        }
        RemoteAction::List => {
            let rs = l.remotes().map_err(lerr)?;
            let mut kinds = Vec::with_capacity(rs.len());
            for r in &rs {
                kinds.push(
                    bat::remote::credentials::credential(l.dir(), &r.name)?.map(|c| c.describe()),
                );
            }
            if g.json {
                let rows: Vec<serde_json::Value> = rs
                    .iter()
                    .zip(&kinds)
                    .map(|(r, k)| {
                        let mut v = serde_json::to_value(r).expect("a remote's settings serialize");
                        v["credential"] = serde_json::json!(k);
                        v
                    })
                    .collect();
                print_json(&rows)?;
            } else {
                for (r, k) in rs.iter().zip(&kinds) {
                    let partial = match (&r.promisor, &r.filter) {
                        (true, Some(f)) => format!(" (partial clone, filter {f})"),
                        _ => String::new(),
                    };
                    let cred = k.map_or(String::new(), |k| format!(" (credential: {k})"));
                    outln!("{}\t{}{partial}{cred}", r.name, r.url);
                }
            }
        }
    }
    ok()
}
