//! Cloning a ledger: a new ledger in a destination directory, filled from a
//! remote (directory, bundle, `bat serve`, S3) with `origin` configured,
//! local branches and tags mapped from the remote's refs, and HEAD on the
//! remote's default branch.
//!
//! A clone is resumable: the new ledger carries a marker
//! ([`INCOMPLETE`]) naming the URL until the clone finished, and a later
//! clone of the same URL into the same place continues it. The ledger is
//! created in a staging directory and renamed into place, so a clone killed
//! at any instant leaves either no ledger or one that resumes. A clone
//! stopped through the cancel flag removes what this run created.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use bat_ledger::refs::{HEADS, TAGS};
use bat_ledger::remote::{FetchOutcome, RemoteError};
use bat_ledger::{CommitId, Ledger, Progress};

use crate::remote::{dir_remote_ledger, filter_by_name, open_remote, RemoteOptions};

/// Config key of the resume marker: the URL being cloned.
pub const INCOMPLETE: &str = "clone.incomplete";

/// Prefix of the directory a clone configures its new ledger in.
const STAGING_PREFIX: &str = ".bat-clone-";

/// What to clone, and where.
#[derive(Debug, Clone)]
pub struct CloneRequest {
    /// The source, already normalized ([`crate::remote::normalize_url`]).
    pub url: String,
    /// The destination directory.
    pub dest: PathBuf,
    /// Partial clone filter name (`no-checkpoints`).
    pub filter: Option<String>,
    /// Credentials, endpoints, and whether private raw evaluations are
    /// copied from a directory source.
    pub remote: RemoteOptions,
}

/// What a clone did.
#[derive(Debug)]
pub struct CloneOutcome {
    /// The transfer's statistics and the refs it saw.
    pub fetch: FetchOutcome,
    /// The branch HEAD is on, and its commit (none for an empty source).
    pub branch: Option<(String, CommitId)>,
    /// Private raw-evaluation files copied (directory sources only).
    pub private_files: u64,
    /// True when an earlier interrupted clone was continued.
    pub resumed: bool,
}

/// Why a clone failed.
#[derive(Debug, thiserror::Error)]
pub enum CloneError {
    /// The filter name is not known.
    #[error("{message}")]
    UnknownFilter {
        /// Which filters exist.
        message: String,
    },
    /// `--include-private` with a source that is not a ledger directory.
    #[error("--include-private works only when cloning a ledger directory")]
    PrivateNeedsDirectory,
    /// The destination already holds a ledger that is not a resumable
    /// clone of the same URL.
    #[error("{} already holds a ledger", dest.display())]
    DestinationHasLedger {
        /// The destination.
        dest: PathBuf,
    },
    /// The destination exists and has files.
    #[error("{} exists and is not empty", dest.display())]
    DestinationNotEmpty {
        /// The destination.
        dest: PathBuf,
    },
    /// Creating the destination or its staging directory failed.
    #[error("cannot {op} {}: {source}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// Where.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Copying private raw evaluations failed.
    #[error("{message}")]
    Private {
        /// What went wrong.
        message: String,
    },
    /// The cancel flag was set; `removed` tells whether this run's
    /// destination was removed again (else an earlier partial clone stays,
    /// resumable).
    #[error(
        "clone of {url} stopped; {}",
        if *removed {
            format!("removed the unfinished clone {}", dest.display())
        } else {
            format!("{} keeps the objects fetched so far", dest.display())
        }
    )]
    Interrupted {
        /// The source.
        url: String,
        /// The destination.
        dest: PathBuf,
        /// This run created the destination and removed it again.
        removed: bool,
    },
    /// The transfer failed after the destination ledger existed; running
    /// the same clone again resumes it.
    #[error("{source}")]
    Transfer {
        /// The destination (resumable).
        dest: PathBuf,
        /// The cause.
        source: RemoteError,
    },
    /// The remote refused the credentials; `removed` tells whether the
    /// destination this run created was removed again (a resumed clone's
    /// ledger stays).
    #[error("{source}")]
    Refused {
        /// The destination.
        dest: PathBuf,
        /// This run created the destination and removed it again.
        removed: bool,
        /// The cause ([`RemoteError::Unauthorized`]).
        source: RemoteError,
    },
    /// The remote's history records a round id twice on one branch; the
    /// clone was refused and what this run created removed.
    #[error("{source}")]
    DuplicateRounds {
        /// The destination.
        dest: PathBuf,
        /// This run created the destination and removed it again.
        removed: bool,
        /// The cause ([`crate::round::RoundError::DuplicateRoundId`];
        /// boxed: large, rare).
        source: Box<crate::round::RoundError>,
    },
    /// Opening the remote failed before anything was created.
    #[error(transparent)]
    Remote(#[from] RemoteError),
    /// The local ledger failed.
    #[error(transparent)]
    Ledger(#[from] bat_ledger::Error),
}

impl bat_ledger::Diagnostic for CloneError {
    fn kind(&self) -> bat_ledger::ErrorKind {
        match self {
            CloneError::UnknownFilter { .. }
            | CloneError::PrivateNeedsDirectory
            | CloneError::DestinationHasLedger { .. }
            | CloneError::DestinationNotEmpty { .. } => bat_ledger::ErrorKind::Usage,
            CloneError::Interrupted { .. } => bat_ledger::ErrorKind::Interrupted,
            CloneError::Transfer { source, .. } | CloneError::Refused { source, .. } => {
                source.kind()
            }
            CloneError::Remote(e) => e.kind(),
            CloneError::Ledger(e) => e.kind(),
            CloneError::DuplicateRounds { .. } => bat_ledger::ErrorKind::User,
            CloneError::Io { .. } | CloneError::Private { .. } => bat_ledger::ErrorKind::User,
        }
    }

    /// Several hints are separate lines of one string.
    fn hint(&self) -> Option<String> {
        let lines = |first: Option<String>, then: String| match first {
            Some(h) => format!("{h}\n{then}"),
            None => then,
        };
        match self {
            CloneError::DestinationHasLedger { .. } | CloneError::DestinationNotEmpty { .. } => {
                Some("clone into a new or empty directory".to_string())
            }
            CloneError::Transfer { dest, source } => Some(lines(
                source.hint(),
                format!(
                    "run the same `bat clone` again to resume into {}",
                    dest.display()
                ),
            )),
            CloneError::Refused {
                dest,
                removed: true,
                source,
            } => Some(lines(
                source.hint(),
                format!(
                    "removed what the clone had made in {}; clone again with a token the server accepts (--token or $BAT_TOKEN)",
                    dest.display()
                ),
            )),
            CloneError::Refused { source, .. } => source.hint(),
            CloneError::DuplicateRounds { source, .. } => source.hint(),
            CloneError::Remote(e) => e.hint(),
            CloneError::Ledger(e) => e.hint(),
            _ => None,
        }
    }
}

/// The default destination for a URL: its last path segment without a
/// `.bundle` suffix (`ledger` if there is none).
pub fn default_dest(url: &str) -> PathBuf {
    let base = url
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or("ledger");
    let base = base.strip_suffix(".bundle").unwrap_or(base);
    PathBuf::from(if base.is_empty() { "ledger" } else { base })
}

/// Clone `req.url` into `req.dest` (or continue an interrupted clone of the
/// same URL there).
pub fn clone(
    req: &CloneRequest,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<CloneOutcome, CloneError> {
    let filter = match &req.filter {
        Some(f) => {
            Some(filter_by_name(f).map_err(|message| CloneError::UnknownFilter { message })?)
        }
        None => None,
    };
    let private_src = if req.remote.include_private {
        Some(dir_remote_ledger(&req.url).ok_or(CloneError::PrivateNeedsDirectory)?)
    } else {
        None
    };
    let mut remote = open_remote(&req.url, &req.remote)?;
    let dest_existed = req.dest.exists();
    let (mut l, created) = start(&req.dest, &req.url)?;
    let fetched = (|| -> Result<_, RemoteError> {
        if let Some(f) = &req.filter {
            l.set_promisor("origin", f)?;
        }
        let out = bat_ledger::remote::transfer::fetch(
            &mut l,
            remote.as_mut(),
            "origin",
            filter,
            progress,
            cancel,
        )?;
        // A history recording a round id twice is refused before any
        // local branch is made from it (the fetched refs are undone).
        if let Err(e) = crate::round::unique::refuse_duplicate_rounds(&mut l, &out.refs) {
            return Ok(Err(e));
        }
        let branch = map_refs(&mut l, &out.remote_refs, &req.url)?;
        Ok(Ok((out, branch)))
    })();
    let fetched = match fetched {
        Ok(Err(e)) => {
            drop(l);
            let removed = created && remove_new_clone(&req.dest, dest_existed);
            return Err(CloneError::DuplicateRounds {
                dest: req.dest.clone(),
                removed,
                source: Box::new(e),
            });
        }
        Ok(Ok(x)) => Ok(x),
        Err(e) => Err(e),
    };
    let (fetch, branch) = match fetched {
        Ok(x) => x,
        Err(e) => {
            drop(l);
            let cancelled = matches!(
                e,
                RemoteError::Cancelled | RemoteError::Ledger(bat_ledger::Error::Cancelled)
            );
            if let RemoteError::Unauthorized { .. } = e {
                // Nothing a rerun could resume: the remote refused before
                // anything arrived, so this run's half-made ledger goes.
                let removed = created && remove_new_clone(&req.dest, dest_existed);
                return Err(CloneError::Refused {
                    dest: req.dest.clone(),
                    removed,
                    source: e,
                });
            }
            if !cancelled {
                return Err(CloneError::Transfer {
                    dest: req.dest.clone(),
                    source: e,
                });
            }
            let removed = created && remove_new_clone(&req.dest, dest_existed);
            return Err(CloneError::Interrupted {
                url: req.url.clone(),
                dest: req.dest.clone(),
                removed,
            });
        }
    };
    let mut private_files = 0;
    if let Some(src) = private_src {
        private_files = crate::remote::private::copy_raw_evals(&src, l.dir())
            .map_err(|message| CloneError::Private { message })?;
    }
    l.config_set(INCOMPLETE, None)?;
    Ok(CloneOutcome {
        fetch,
        branch,
        private_files,
        resumed: !created,
    })
}

/// The remote's default branch: `main` if it has one, else the branch its
/// HEAD points at, else its first branch.
pub fn default_branch(remote_refs: &[(String, CommitId)]) -> Option<(String, CommitId)> {
    let heads: Vec<&(String, CommitId)> = remote_refs
        .iter()
        .filter(|(n, _)| n.starts_with(HEADS))
        .collect();
    let head_commit = remote_refs.iter().find(|(n, _)| n == "HEAD").map(|x| x.1);
    heads
        .iter()
        .find(|(n, _)| n == "refs/heads/main")
        .or_else(|| heads.iter().find(|(_, c)| Some(*c) == head_commit))
        .or(heads.first())
        .map(|(n, c)| (n.trim_start_matches(HEADS).to_string(), *c))
}

/// Local refs of a new clone: the default branch (HEAD attached to it) and
/// the remote's other namespaces (`refs/promoted/…`, …) as they are;
/// branches and tags are reached through `refs/remotes/origin/…`, which the
/// fetch wrote. Refs that already exist (a resumed clone) stay.
fn map_refs(
    l: &mut Ledger,
    remote_refs: &[(String, CommitId)],
    url: &str,
) -> Result<Option<(String, CommitId)>, bat_ledger::Error> {
    let default = default_branch(remote_refs);
    let existing: Vec<String> = l.all_refs()?.into_iter().map(|x| x.0).collect();
    for (n, c) in remote_refs {
        if n == "HEAD"
            || n.starts_with(HEADS)
            || n.starts_with(TAGS)
            || n.starts_with("refs/remotes/")
        {
            continue;
        }
        if !existing.contains(n) {
            l.update_ref(n, None, Some(*c), "clone")?;
        }
    }
    if let Some((b, c)) = &default {
        let full = format!("{HEADS}{b}");
        if !existing.contains(&full) {
            l.update_ref(&full, None, Some(*c), &format!("clone: from {url}"))?;
        }
        l.switch(b)?;
    }
    Ok(default)
}

/// Remove what this run created: the whole destination if it did not exist
/// before, else only its `.bat`. True when it is gone.
fn remove_new_clone(dest: &Path, dest_existed: bool) -> bool {
    let target = if dest_existed {
        dest.join(bat_ledger::store::LEDGER_DIR)
    } else {
        dest.to_path_buf()
    };
    std::fs::remove_dir_all(&target).is_ok()
}

/// A new ledger at `dest` with remote `origin`, or the ledger an
/// interrupted clone of the same URL left there (resumed; `false`).
fn start(dest: &Path, url: &str) -> Result<(Ledger, bool), CloneError> {
    let bat = dest.join(bat_ledger::store::LEDGER_DIR);
    if bat.exists() {
        let l = Ledger::open(&bat)?;
        if l.config_get(INCOMPLETE)?.as_deref() == Some(url) {
            return Ok((l, false));
        }
        return Err(CloneError::DestinationHasLedger {
            dest: dest.to_path_buf(),
        });
    }
    remove_stale_staging(dest);
    if dest.exists()
        && std::fs::read_dir(dest)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        return Err(CloneError::DestinationNotEmpty {
            dest: dest.to_path_buf(),
        });
    }
    // The ledger is made and configured (resume marker, `origin`) in a
    // staging directory and renamed into place in one step: a clone killed
    // at any instant leaves either no `.bat` (and only staging litter, which
    // the next run removes) or one that resumes with its origin.
    let io = |op: &'static str, p: &Path| {
        let path = p.to_path_buf();
        move |source| CloneError::Io { op, path, source }
    };
    std::fs::create_dir_all(dest).map_err(io("create", dest))?;
    let staging = tempfile::Builder::new()
        .prefix(STAGING_PREFIX)
        .tempdir_in(dest)
        .map_err(io("create a staging directory in", dest))?;
    {
        let mut l = Ledger::init(staging.path())?;
        l.config_set(INCOMPLETE, Some(url))?;
        l.add_remote("origin", url)?;
    }
    std::fs::rename(staging.path().join(bat_ledger::store::LEDGER_DIR), &bat)
        .map_err(io("move the new ledger into", dest))?;
    bat_ledger::pack::sync_dir(dest)?;
    drop(staging);
    let l = Ledger::open(&bat)?;
    Ok((l, true))
}

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
