//! The crate's error type: one enum whose struct variants carry the path,
//! object id or ref that went wrong, so messages say what and where.

use std::io;
use std::path::PathBuf;

pub use bat_error::{reads_as_code, shows_a_code, Diagnostic, ErrorKind};

use crate::id::ObjectId;

/// Everything that can go wrong in bat-ledger.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file-system operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done ("read", "create", ...).
        op: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The process ran out of file descriptors (EMFILE/ENFILE). Nothing is
    /// damaged; the operation needs more open files than the limit allows.
    #[error("{op} {path}: {source} (raise the open-file limit: ulimit -n)")]
    TooManyOpenFiles {
        /// What was being done.
        op: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The SQLite catalog failed.
    #[error("catalog error while {context}: {source}")]
    Catalog {
        /// What was being done.
        context: String,
        /// The SQLite error.
        source: rusqlite::Error,
    },
    /// No `.bat` directory found walking up from `start`.
    #[error("not inside a bat ledger (no .bat directory found from {start} upwards)")]
    NotALedger {
        /// Where the search started.
        start: PathBuf,
    },
    /// `init` on a directory that already has a ledger.
    #[error("a ledger already exists at {path}")]
    AlreadyInitialized {
        /// The existing `.bat` directory.
        path: PathBuf,
    },
    /// The ledger was written by an unknown format version.
    #[error(
        "ledger at {path} has format version {found:?}, this build understands version {supported}"
    )]
    UnsupportedVersion {
        /// The `.bat` directory.
        path: PathBuf,
        /// What was found.
        found: String,
        /// What we support.
        supported: u32,
    },
    /// An object the catalog or a tree refers to is not stored.
    #[error("object {id} is missing from the ledger")]
    ObjectMissing {
        /// The missing object.
        id: ObjectId,
    },
    /// A file object was deliberately dropped by a retention gc: its record
    /// (id, size, tree entries) stays in history, its bytes do not.
    #[error("object {id} was pruned by `gc --keep {policy}` (its record stays in history); fetch it from a remote that has it")]
    Pruned {
        /// The pruned object.
        id: ObjectId,
        /// The policy that pruned it, as the caller recorded it.
        policy: String,
        /// When (seconds since the epoch).
        time: i64,
    },
    /// A partial clone could not fetch a file its promisor remote keeps.
    #[error(
        "object {id} is kept on the promisor remote {remote:?} and could not be fetched: {source}"
    )]
    PromisorFetch {
        /// The object that was needed.
        id: ObjectId,
        /// The promisor remote's name.
        remote: String,
        /// What the remote (or opening it) said: a
        /// [`crate::remote::RemoteError`], boxed as a plain error so this
        /// module, below the remote layer, does not name its type.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Stored bytes do not verify (digest, header, checksum, decompression).
    #[error("object {id} is corrupt in pack {pack} at offset {offset}: {reason}")]
    Corrupt {
        /// The damaged object.
        id: ObjectId,
        /// Pack file name.
        pack: String,
        /// Record offset in the pack.
        offset: u64,
        /// What did not verify.
        reason: String,
    },
    /// An object's bytes verify but do not decode as the expected kind.
    #[error("object {id} is not a valid {kind}: {reason}")]
    BadObject {
        /// The object.
        id: ObjectId,
        /// Expected kind.
        kind: &'static str,
        /// Decoder message.
        reason: String,
    },
    /// A file name cannot be recorded.
    #[error("cannot record {path}: {reason}")]
    InvalidName {
        /// The offending path.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A symlink points outside the committed directory.
    #[error("symlink {path} -> {target} points outside the committed directory")]
    SymlinkEscapes {
        /// The link.
        path: PathBuf,
        /// Its target.
        target: String,
    },
    /// A special file (FIFO, socket, device) cannot be recorded.
    #[error("cannot record {path}: {kind} is not a regular file, directory or symlink")]
    UnsupportedFileType {
        /// The path.
        path: PathBuf,
        /// What it is.
        kind: &'static str,
    },
    /// A revision does not name anything.
    #[error("unknown revision {rev:?}")]
    UnknownRevision {
        /// The revision text.
        rev: String,
    },
    /// A hex prefix matches several commits.
    #[error("ambiguous id prefix {prefix:?}; candidates: {}", candidates.join(", "))]
    AmbiguousPrefix {
        /// The prefix.
        prefix: String,
        /// Matching ids.
        candidates: Vec<String>,
    },
    /// A revision is syntactically wrong or walks past a root commit.
    #[error("bad revision {rev:?}: {reason}")]
    BadRevision {
        /// The revision text.
        rev: String,
        /// Why.
        reason: String,
    },
    /// A path does not exist in a commit's tree.
    #[error("path {path:?} not found in {rev}")]
    PathNotFound {
        /// The revision.
        rev: String,
        /// The path.
        path: String,
    },
    /// A path names a directory where a file was expected (or vice versa).
    #[error("{path:?} is {what}")]
    WrongKind {
        /// The path.
        path: String,
        /// Description, e.g. "a directory, not a file".
        what: &'static str,
    },
    /// A ref name is not acceptable.
    #[error("invalid ref name {name:?}: {reason}")]
    InvalidRefName {
        /// The name.
        name: String,
        /// Why.
        reason: &'static str,
    },
    /// Creating a ref that exists.
    #[error("{name} already exists")]
    RefExists {
        /// Full ref name.
        name: String,
    },
    /// A ref that does not exist.
    #[error("{name} does not exist")]
    RefNotFound {
        /// Full ref name.
        name: String,
    },
    /// Compare-and-swap on a ref failed: someone else moved it.
    #[error("branch moved: {name} was expected at {expected} but is at {found}")]
    BranchMoved {
        /// Full ref name.
        name: String,
        /// What we expected ("(none)" for unborn).
        expected: String,
        /// What it is now.
        found: String,
    },
    /// Checkout into a non-empty directory.
    #[error("destination {path} exists and is not an empty directory")]
    DestinationNotEmpty {
        /// The destination.
        path: PathBuf,
    },
    /// Another process holds the ledger lock.
    #[error("ledger is busy: {reason}")]
    Busy {
        /// Who holds it.
        reason: String,
    },
    /// The caller's cancellation flag was set.
    #[error("operation cancelled")]
    Cancelled,
    /// An object received from another ledger does not verify (wrong bytes,
    /// lying lengths, missing base or chunks, malformed structure).
    #[error("received object {id} does not verify: {reason}")]
    Received {
        /// The object.
        id: ObjectId,
        /// What did not verify.
        reason: String,
    },
    /// A tree breaks the import policy ([`crate::policy`]): it is refused
    /// on import, on record and on checkout alike.
    #[error("tree {id} is refused {place}: {rule}")]
    TreeRefused {
        /// The tree holding the offending entry.
        id: ObjectId,
        /// Where: the entry's path from the root walked (quoted, shortened).
        place: String,
        /// The rule broken, with its limit.
        rule: crate::policy::Rule,
    },
    /// Invalid caller input (metadata, fields, messages).
    #[error("invalid input: {message}")]
    InvalidInput {
        /// What is wrong.
        message: String,
    },
}

/// Result alias for the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Attach an operation and path to an io::Error.
pub(crate) fn io_err(
    op: &'static str,
    path: impl Into<PathBuf>,
) -> impl FnOnce(io::Error) -> Error {
    let path = path.into();
    move |source| {
        if is_out_of_descriptors(&source) {
            Error::TooManyOpenFiles { op, path, source }
        } else {
            Error::Io { op, path, source }
        }
    }
}

/// EMFILE (process limit) or ENFILE (system table full). Linux numbers: the
/// crate forbids unsafe code and takes no libc dependency for two constants.
pub(crate) fn is_out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(23) | Some(24))
}

impl Error {
    /// True for failures of the machine rather than of the stored data (I/O
    /// errors, the catalog, descriptors, cancellation): fsck stops on these
    /// instead of reporting damage it did not find.
    pub fn is_environmental(&self) -> bool {
        matches!(
            self,
            Error::Io { .. }
                | Error::TooManyOpenFiles { .. }
                | Error::Catalog { .. }
                | Error::Cancelled
        )
    }

    /// True when a write failed because the file system is full.
    pub fn is_storage_full(&self) -> bool {
        matches!(self, Error::Io { source, .. } if source.kind() == io::ErrorKind::StorageFull)
    }
}

impl Diagnostic for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Error::Cancelled => ErrorKind::Interrupted,
            Error::Corrupt { .. }
            | Error::ObjectMissing { .. }
            | Error::Io { .. }
            | Error::TooManyOpenFiles { .. }
            | Error::PromisorFetch { .. }
            | Error::Pruned { .. }
            | Error::Catalog { .. } => ErrorKind::User,
            _ => ErrorKind::Usage,
        }
    }

    fn hint(&self) -> Option<String> {
        let hint = match self {
            Error::NotALedger { .. } => "run `bat init` first, or pass -C DIR / set BAT_DIR",
            Error::UnsupportedVersion { .. } => "use a bat build that supports this format version",
            Error::AmbiguousPrefix { .. } => "use more hex digits",
            Error::UnknownRevision { .. } => {
                "use a branch, tag, HEAD, a round id (r02), or a commit id prefix of at least 4 hex digits"
            }
            Error::Corrupt { .. } | Error::ObjectMissing { .. } => "run `bat fsck` to list all damage",
            Error::BranchMoved { .. } => "another process moved the branch; re-run the command",
            Error::SymlinkEscapes { .. } => {
                "only relative symlinks that stay inside the committed directory can be recorded"
            }
            Error::UnsupportedFileType { .. } => "remove or move special files out of the directory",
            Error::DestinationNotEmpty { .. } => "check out into a new or empty directory",
            Error::Busy { .. } => "wait for the other bat process to finish",
            Error::RefNotFound { .. } => "list branches with `bat branch`",
            Error::TooManyOpenFiles { .. } => "raise the open-file limit (`ulimit -n`)",
            Error::Io { .. } if self.is_storage_full() => {
                "the disk is full: free some space and run the command again (a write that fails leaves the ledger as it was)"
            }
            Error::Pruned { policy, .. } if policy.ends_with(crate::remote::RECEIVED_NOTE) => {
                "it arrived already pruned (the ledger it came from ran a retention gc), so fetching from that ledger again does not restore it; `bat fetch REMOTE` from a remote that never pruned it does"
            }
            Error::Pruned { .. } => {
                "a retention gc dropped its bytes on purpose; `bat fetch REMOTE` from a remote that still has it restores it"
            }
            Error::TreeRefused { .. } => {
                "bat refuses trees that could not be checked out safely (limits and rules: docs/SECURITY.md, \"Import policy and limits\"); nothing was stored or written"
            }
            Error::PromisorFetch { .. } => {
                "this partial clone needs its remote: pass --token / --endpoint (or BAT_TOKEN, AWS_*) as for `bat fetch`"
            }
            _ => return None,
        };
        Some(hint.to_string())
    }

    fn code(&self) -> Option<String> {
        match self {
            Error::TreeRefused { rule, .. } => Some(format!("tree_refused:{}", rule.code())),
            _ => None,
        }
    }
}

/// Attach context to a SQLite error.
pub(crate) fn db_err(context: impl Into<String>) -> impl FnOnce(rusqlite::Error) -> Error {
    let context = context.into();
    move |source| Error::Catalog { context, source }
}
