//! `bat clone URL [DEST] [--filter no-checkpoints]`

use std::path::{Path, PathBuf};

use bat_ledger::refs::{HEADS, TAGS};
use bat_ledger::Ledger;
use clap::Args;

use super::ledger_common::{display_path, lerr, NEVER_CANCEL};
use super::transfer_common::{ok, rerr, TransferProgress};
use super::{print_json, CliError, CliResult, Globals};
use crate::remote::{dir_remote_ledger, filter_by_name, normalize_url, open_remote, RemoteOptions};

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
}

const INCOMPLETE: &str = "clone.incomplete";

fn default_dest(url: &str) -> PathBuf {
    let base = url
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or("ledger");
    let base = base.strip_suffix(".bundle").unwrap_or(base);
    PathBuf::from(if base.is_empty() { "ledger" } else { base })
}

/// Run `bat clone`.
pub fn run(args: CloneArgs, g: &Globals) -> CliResult {
    let url = normalize_url(&args.url);
    let filter = match &args.filter {
        Some(f) => Some(filter_by_name(f).map_err(|m| CliError::new(m).with_code(2))?),
        None => None,
    };
    let dest = args.dest.clone().unwrap_or_else(|| default_dest(&url));
    let dest = match &g.dir {
        Some(d) if dest.is_relative() => d.join(dest),
        _ => dest,
    };
    let private_src = if args.include_private {
        Some(dir_remote_ledger(&url).ok_or_else(|| {
            CliError::new("--include-private works only when cloning a ledger directory")
                .with_code(2)
        })?)
    } else {
        None
    };
    let mut remote = open_remote(
        &url,
        &RemoteOptions {
            include_private: args.include_private,
            net: g.net.clone(),
        },
    )
    .map_err(rerr)?;
    let (mut l, created) = start(&dest, &url)?;
    let result = (|| -> Result<_, CliError> {
        if let Some(f) = &args.filter {
            l.set_promisor("origin", f).map_err(lerr)?;
        }
        let p = TransferProgress::new(g);
        let out = bat_ledger::remote::transfer::fetch(
            &mut l,
            remote.as_mut(),
            "origin",
            filter,
            &p,
            &NEVER_CANCEL,
        )
        .map_err(rerr)?;
        // Local refs: the default branch, tags, other namespaces.
        let heads: Vec<&(String, bat_ledger::CommitId)> = out
            .remote_refs
            .iter()
            .filter(|(n, _)| n.starts_with(HEADS))
            .collect();
        let head_commit = out
            .remote_refs
            .iter()
            .find(|(n, _)| n == "HEAD")
            .map(|x| x.1);
        let default = heads
            .iter()
            .find(|(n, _)| n == "refs/heads/main")
            .or_else(|| heads.iter().find(|(_, c)| Some(*c) == head_commit))
            .or(heads.first())
            .map(|(n, c)| (n.trim_start_matches(HEADS).to_string(), *c));
        let existing: Vec<String> = l
            .all_refs()
            .map_err(lerr)?
            .into_iter()
            .map(|x| x.0)
            .collect();
        for (n, c) in &out.remote_refs {
            if n == "HEAD"
                || n.starts_with(HEADS)
                || n.starts_with(TAGS)
                || n.starts_with("refs/remotes/")
            {
                continue;
            }
            if !existing.contains(n) {
                l.update_ref(n, None, Some(*c), "clone").map_err(lerr)?;
            }
        }
        if let Some((b, c)) = &default {
            let full = format!("{HEADS}{b}");
            if !existing.contains(&full) {
                l.update_ref(&full, None, Some(*c), &format!("clone: from {url}"))
                    .map_err(lerr)?;
            }
            l.switch(b).map_err(lerr)?;
        }
        Ok((out, default))
    })();
    let (out, default) = match result {
        Ok(x) => x,
        Err(e) => {
            drop(l);
            let _ = created;
            return Err(e.with_hint(format!(
                "run the same `bat clone` again to resume into {}",
                dest.display()
            )));
        }
    };
    let mut private = 0;
    if let Some(src) = private_src {
        private = crate::remote::private::copy_raw_evals(&src, l.dir()).map_err(CliError::new)?;
    }
    l.config_set(INCOMPLETE, None).map_err(lerr)?;
    if g.json {
        print_json(&serde_json::json!({
            "url": url, "dest": display_path(&dest), "fetch": out,
            "branch": default.as_ref().map(|d| d.0.clone()), "filter": args.filter, "private_files": private,
        }))?;
    } else {
        println!(
            "Cloned {url} into {} ({} objects, {} payload bytes{})",
            dest.display(),
            out.stats.objects_stored,
            out.stats.payload_bytes,
            if out.stats.files_promised > 0 {
                format!(
                    "; {} checkpoint files left on the remote",
                    out.stats.files_promised
                )
            } else {
                String::new()
            }
        );
        if let Some((b, c)) = default {
            println!("On branch {b} at {}", &c.to_string()[..12]);
        }
    }
    ok()
}

/// A new ledger at `dest` with remote `origin`, or the ledger an
/// interrupted clone of the same URL left there (resumed).
fn start(dest: &Path, url: &str) -> Result<(Ledger, bool), CliError> {
    let bat = dest.join(bat_ledger::store::LEDGER_DIR);
    if bat.exists() {
        let l = Ledger::open(&bat).map_err(lerr)?;
        if l.config_get(INCOMPLETE).map_err(lerr)?.as_deref() == Some(url) {
            return Ok((l, false));
        }
        return Err(
            CliError::new(format!("{} already holds a ledger", dest.display()))
                .with_hint("clone into a new or empty directory")
                .with_code(2),
        );
    }
    remove_stale_staging(dest);
    if dest.exists()
        && std::fs::read_dir(dest)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        return Err(
            CliError::new(format!("{} exists and is not empty", dest.display()))
                .with_hint("clone into a new or empty directory")
                .with_code(2),
        );
    }
    // The ledger is made and configured (resume marker, `origin`) in a
    // staging directory and renamed into place in one step: a clone killed
    // at any instant leaves either no `.bat` (and only staging litter, which
    // the next run removes) or one that resumes with its origin.
    let io = |what: &str, p: &Path| {
        let what = what.to_string();
        let p = p.display().to_string();
        move |e: std::io::Error| CliError::new(format!("cannot {what} {p}: {e}"))
    };
    std::fs::create_dir_all(dest).map_err(io("create", dest))?;
    let staging = tempfile::Builder::new()
        .prefix(STAGING_PREFIX)
        .tempdir_in(dest)
        .map_err(io("create a staging directory in", dest))?;
    {
        let mut l = Ledger::init(staging.path()).map_err(lerr)?;
        l.config_set(INCOMPLETE, Some(url)).map_err(lerr)?;
        l.add_remote("origin", url).map_err(lerr)?;
    }
    std::fs::rename(staging.path().join(bat_ledger::store::LEDGER_DIR), &bat)
        .map_err(io("move the new ledger into", dest))?;
    bat_ledger::pack::sync_dir(dest).map_err(lerr)?;
    drop(staging);
    let l = Ledger::open(&bat).map_err(lerr)?;
    Ok((l, true))
}

/// Prefix of the directory a clone configures its new ledger in.
const STAGING_PREFIX: &str = ".bat-clone-";

/// Remove what a clone killed before its ledger was in place left in
/// `dest`: staging directories and half-made `.bat` directories of
/// `Ledger::init` (nothing else ever has these names).
fn remove_stale_staging(dest: &Path) {
    let Ok(rd) = std::fs::read_dir(dest) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(STAGING_PREFIX) || name.starts_with(".bat-init-") {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}
