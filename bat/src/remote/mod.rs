//! bat's side of sharing: which backend a URL names, which files a
//! `--filter` leaves on the remote, the remote opener through which a
//! partial clone fetches promised files on demand ([`attach_promisor`]), and
//! the private area (`.bat/private/`), which no transfer touches unless
//! `--include-private` is given.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use bat_ledger::remote::transfer::PathFilter;
use bat_ledger::remote::{Bundle, DirRemote, Remote, RemoteError};
use bat_ledger::{CommitId, Ledger, Progress, RemoteOpener, TreeEntry};

pub mod credentials;
pub mod frame;
pub mod http;
pub mod private;
pub mod s3;

/// Options for opening a remote.
#[derive(Debug, Clone, Default)]
pub struct RemoteOptions {
    /// `--include-private` was given (backends that cannot hold private
    /// data refuse it).
    pub include_private: bool,
    /// Credentials and endpoints of network remotes.
    pub net: NetOptions,
}

/// Settings of the network remotes, filled by the CLI from its flags and
/// the environment (the library reads neither). Its `Debug` form never
/// shows the token.
#[derive(Clone, Default)]
pub struct NetOptions {
    /// Bearer token for `http(s)://` remotes (`--token`, else `BAT_TOKEN`).
    pub token: Option<String>,
    /// Connect timeout of `http(s)://` remotes (`BAT_HTTP_CONNECT_TIMEOUT`
    /// seconds); `None` = [`http::CONNECT_TIMEOUT`].
    pub http_connect_timeout: Option<std::time::Duration>,
    /// Longest silence while reading an answer (`BAT_HTTP_READ_TIMEOUT`
    /// seconds); `None` = [`http::READ_TIMEOUT`].
    pub http_read_timeout: Option<std::time::Duration>,
    /// S3 endpoint, region and credentials (`--endpoint`, `AWS_*`).
    pub s3: s3::S3Options,
}

impl std::fmt::Debug for NetOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetOptions")
            .field("token", &self.token.as_ref().map(|_| "(set)"))
            .field("http_connect_timeout", &self.http_connect_timeout)
            .field("http_read_timeout", &self.http_read_timeout)
            .field("s3", &self.s3)
            .finish()
    }
}

/// Open the remote a URL names: a `bat serve` endpoint (`http(s)://`), an
/// S3 bucket (`s3://bucket/prefix`), a bundle file, or a ledger directory.
pub fn open_remote(url: &str, opts: &RemoteOptions) -> Result<Box<dyn Remote>, RemoteError> {
    if url.starts_with("http://") || url.starts_with("https://") {
        let o = http::HttpOptions {
            token: opts.net.token.clone(),
            connect_timeout: opts.net.http_connect_timeout,
            read_timeout: opts.net.http_read_timeout,
        };
        return Ok(Box::new(http::HttpRemote::new(url, o)?));
    }
    if url.starts_with("s3://") {
        return Ok(Box::new(s3::S3Remote::new(url, opts.net.s3.clone())?));
    }
    let path = Path::new(url.strip_prefix("file://").unwrap_or(url));
    if path.is_file() {
        return Ok(Box::new(Bundle::open(path)?));
    }
    Ok(Box::new(DirRemote::open(path)?))
}

/// The `.bat` directory of a directory remote, if `url` names one.
pub fn dir_remote_ledger(url: &str) -> Option<PathBuf> {
    let p = Path::new(url.strip_prefix("file://").unwrap_or(url));
    let d = p.join(bat_ledger::store::LEDGER_DIR);
    d.join(bat_ledger::store::VERSION_FILE)
        .is_file()
        .then_some(d)
}

/// Store a directory URL as an absolute path, so the remote works from any
/// working directory; other URLs are kept as given.
pub fn normalize_url(url: &str) -> String {
    if url.contains("://") {
        return url.to_string();
    }
    std::path::absolute(url)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| url.to_string())
}

/// Name of the only filter: leave model checkpoints on the remote.
pub const NO_CHECKPOINTS: &str = "no-checkpoints";

/// File extensions of model weights.
const MODEL_EXTENSIONS: &[&str] = &[
    ".safetensors",
    ".bin",
    ".pt",
    ".pth",
    ".ckpt",
    ".gguf",
    ".onnx",
];

/// The `no-checkpoints` filter: files under a round's `candidate/` folder
/// (the trained model, FORMAT of bat's round tree) and model-weight files
/// anywhere. `true` = leave on the remote.
pub fn is_checkpoint(path: &str, _e: &TreeEntry) -> bool {
    path.starts_with("candidate/")
        || path.contains("/candidate/")
        || MODEL_EXTENSIONS.iter().any(|x| path.ends_with(x))
}

/// The path filter a `--filter` name stands for.
pub fn filter_by_name(name: &str) -> Result<&'static PathFilter, String> {
    match name {
        NO_CHECKPOINTS => Ok(&is_checkpoint),
        other => Err(format!(
            "unknown filter {other:?} (the only filter is {NO_CHECKPOINTS})"
        )),
    }
}

/// The remote opener a partial clone's promisor layer uses
/// ([`Ledger::set_remote_opener`]): it opens the promisor remote with the
/// caller's options (token, timeouts, S3 endpoint and credentials), so a
/// file fetched on demand is fetched as the caller would fetch it.
pub fn opener(options: RemoteOptions) -> impl RemoteOpener {
    move |url: &str| open_remote(url, &options)
}

/// In a partial clone, fetch the checkpoint files of `commit` (what
/// [`is_checkpoint`] matches) in one transfer through the ledger's promisor
/// layer, verified on arrival; for verbs that compare checkpoints (`diff`).
/// Returns how many files were fetched.
pub fn prefetch_checkpoints(
    ledger: &Ledger,
    commit: &CommitId,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> bat_ledger::Result<u64> {
    let tree = ledger.read_commit(commit)?.tree;
    ledger.prefetch_tree(&tree, Some(&is_checkpoint), progress, cancel)
}

/// Give `ledger` its object layers for this caller: in a partial clone,
/// promised files are then fetched on demand through [`opener`] with
/// `options` (nothing changes in a full clone). Returns whether the ledger
/// is a partial clone.
pub fn attach_promisor(ledger: &mut Ledger, options: RemoteOptions) -> bat_ledger::Result<bool> {
    let stored = match ledger.promisor()? {
        Some(cfg) if options.net.token.is_none() => Some((ledger.dir().to_path_buf(), cfg.name)),
        _ => None,
    };
    ledger.set_remote_opener(move |url: &str| {
        // The promisor remote's stored credential, looked up only when a
        // promised file is needed (a helper runs then, not at every open).
        let mut opts = options.clone();
        if let Some((dir, name)) = &stored {
            opts.net.token =
                credentials::stored_token(dir, name).map_err(|e| RemoteError::Unauthorized {
                    url: http::redact_url(url),
                    reason: e.to_string(),
                })?;
        }
        open_remote(url, &opts)
    })
}
