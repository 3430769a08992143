//! `bat clone URL [DEST] [--filter no-checkpoints]`

use std::path::PathBuf;

use clap::Args;

use super::ledger_common::{display_path, short};
use super::transfer_common::{ok, TransferProgress};
use super::{print_json, CliResult, Session};
use bat::clone::{clone, default_dest, CloneRequest};
use bat::remote::{normalize_url, RemoteOptions};

/// Copy a ledger (a directory, a bundle file, or a `bat serve` / S3
/// endpoint) into a new directory; the source becomes remote `origin`.
/// Every object is verified before anything references it. An interrupted
/// clone is resumed by running the same command again.
#[derive(Debug, Args)]
pub struct CloneArgs {
    /// What to clone: a ledger directory, a bundle file, http(s)://… or s3://….
    pub url: String,
    /// Where (default: the source's name in the current directory).
    pub dest: Option<PathBuf>,
    /// Partial clone: `no-checkpoints` leaves model checkpoints (a round's
    /// candidate/ folder and weight files) on the remote; `checkout`,
    /// `diff` and replay fetch them on demand.
    #[arg(long, value_name = "FILTER")]
    pub filter: Option<String>,
    /// Also copy private raw evaluations from a directory source.
    #[arg(long)]
    pub include_private: bool,
    /// A credential to clone with and to store for `origin` (mode 0600,
    /// never in the objects): later fetch, pull, push and on-demand reads
    /// of a partial clone use it without --token.
    #[command(flatten)]
    pub cred: super::remote::CredentialArgs,
}

/// Run `bat clone`.
pub fn run(args: CloneArgs, g: &Session) -> CliResult {
    let url = normalize_url(&args.url);
    let dest = args.dest.clone().unwrap_or_else(|| default_dest(&url));
    let dest = match &g.dir {
        Some(d) if dest.is_relative() => d.join(dest),
        _ => dest,
    };
    super::output_path::refuse_inside_ledger(&dest, "the destination")?;
    let cred = args.cred.credential()?;
    let mut net = g.net.clone();
    if let (None, Some(c)) = (&net.token, &cred) {
        net.token = Some(c.token("origin")?);
    }
    let req = CloneRequest {
        url: url.clone(),
        dest: dest.clone(),
        filter: args.filter.clone(),
        remote: RemoteOptions {
            include_private: args.include_private,
            net,
        },
    };
    let out = clone(&req, &TransferProgress::new(g), g.cancel())?;
    if let Some(c) = cred {
        let dir = dest.join(bat_ledger::store::LEDGER_DIR);
        bat::remote::credentials::set_credential(&dir, "origin", Some(c))?;
    }
    if g.json {
        print_json(&serde_json::json!({
            "url": url, "dest": display_path(&dest), "fetch": out.fetch,
            "branch": out.branch.as_ref().map(|d| d.0.clone()), "filter": args.filter, "private_files": out.private_files,
        }))?;
    } else {
        let stats = &out.fetch.stats;
        outln!(
            "Cloned {url} into {} ({} objects, {} payload bytes{})",
            dest.display(),
            stats.objects_stored,
            stats.payload_bytes,
            if stats.files_promised > 0 {
                format!(
                    "; {} checkpoint files left on the remote",
                    stats.files_promised
                )
            } else {
                String::new()
            }
        );
        if stats.files_absent > 0 {
            outln!(
                "{} files were pruned at the source (recorded as pruned): the source has no bytes for them either, so only `bat fetch REMOTE` from a remote that never pruned them restores them",
                stats.files_absent
            );
        }
        if let Some((b, c)) = out.branch {
            outln!("On branch {b} at {}", short(&c));
        }
    }
    ok()
}
