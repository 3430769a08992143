//! Moving objects between ledgers: the [`Remote`] trait every backend
//! implements (a directory ledger, a bundle file, and — in the bat crate —
//! HTTP and S3), the form an object takes on the wire ([`WireObject`]), the
//! framed byte stream ([`wire`]), and the transfer engine ([`transfer`]).
//!
//! The model (see `PROTOCOL.md`): objects cross in their *stored* form —
//! a pack record's compression code and payload, a delta record with the id
//! of its base, or a chunked file's chunk-list id — so nothing is
//! recompressed on either side. The receiver verifies every object (bounded
//! decompression to the declared length, the id's BLAKE3, delta bases and
//! chunk lists present, a chunked file's whole-file digest) before anything
//! references it ([`crate::Ledger::import_wire`]). Refs move last, by
//! compare-and-swap, and only once everything they reach is stored.

use std::path::PathBuf;

use crate::id::{CommitId, ObjectId};
use crate::object::Kind;

pub mod bundle;
pub mod digest;
pub mod dir;
mod import;
pub mod promisor;
pub mod registry;
pub mod transfer;
pub mod wire;

pub use bundle::{Bundle, BundleSummary};
pub use dir::DirRemote;
pub(crate) use import::RECEIVED_NOTE;
pub use import::{ImportPipeline, ImportStats};
pub use registry::RemoteConfig;
pub use transfer::{FetchOutcome, FetchStats, PathFilter, PushOutcome, RefUpdate};

/// One stored object as it crosses the wire: enough to store it as-is and to
/// verify it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireObject {
    /// The object's id (what the receiver verifies).
    pub id: ObjectId,
    /// Its kind.
    pub kind: Kind,
    /// Its raw (uncompressed) length in bytes.
    pub raw_len: u64,
    /// How it is stored.
    pub body: WireBody,
}

/// The stored form of a [`WireObject`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireBody {
    /// A pack record's payload exactly as stored (its compression code and
    /// bytes).
    Record {
        /// Record compression code (FORMAT.md §5): 0 none, 1 zstd, 2 planes.
        compression: u8,
        /// The stored payload.
        payload: Vec<u8>,
    },
    /// A pack record that is a delta against `base` (which must be present,
    /// or sent earlier in the same stream).
    Delta {
        /// The delta's base object.
        base: ObjectId,
        /// Record compression code (always 2, planes, today).
        compression: u8,
        /// The stored payload.
        payload: Vec<u8>,
    },
    /// A large file whose bytes are the chunks of chunk-list object `list`
    /// (sent earlier / present).
    Chunked {
        /// The chunk-list object.
        list: ObjectId,
    },
    /// A file object the sender does not store because a retention gc
    /// pruned it there: no bytes travel, and the receiver records the file
    /// as pruned (never over a copy it stores). `raw_len` is the file's
    /// size.
    Absent {
        /// The policy the sender's gc recorded.
        policy: String,
    },
}

impl WireBody {
    /// The bytes that follow the frame header (a record's or delta's
    /// payload, an absent entry's policy text; none for a chunked alias).
    pub fn payload(&self) -> &[u8] {
        match self {
            WireBody::Record { payload, .. } | WireBody::Delta { payload, .. } => payload,
            WireBody::Absent { policy } => policy.as_bytes(),
            WireBody::Chunked { .. } => &[],
        }
    }
}

impl WireObject {
    /// Bytes of payload this object carries (0 for a chunked alias and an
    /// absent entry).
    pub fn payload_len(&self) -> u64 {
        match &self.body {
            WireBody::Record { payload, .. } | WireBody::Delta { payload, .. } => {
                payload.len() as u64
            }
            WireBody::Chunked { .. } | WireBody::Absent { .. } => 0,
        }
    }

    /// An absent entry for file `id` of `size` bytes pruned by `policy`
    /// (cut to [`wire::MAX_ABSENT_POLICY`] bytes at a character boundary).
    pub fn absent(id: ObjectId, size: u64, policy: &str) -> WireObject {
        let mut end = policy.len().min(wire::MAX_ABSENT_POLICY as usize);
        while !policy.is_char_boundary(end) {
            end -= 1;
        }
        WireObject {
            id,
            kind: Kind::Bytes,
            raw_len: size,
            body: WireBody::Absent {
                policy: policy[..end].to_string(),
            },
        }
    }

    /// True for an absent entry.
    pub fn is_absent(&self) -> bool {
        matches!(self.body, WireBody::Absent { .. })
    }
}

/// Errors of remotes and transfers.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// A push that would drop commits from the remote branch.
    #[error("{name} on the remote is not an ancestor of what you push (non-fast-forward); fetch/pull first, or push with --force")]
    NonFastForward {
        /// Full ref name on the remote.
        name: String,
    },
    /// The compare-and-swap of a remote ref lost: someone else moved it.
    #[error("{name} moved on the remote while this push ran; pull first, then push again")]
    RefMoved {
        /// Full ref name on the remote.
        name: String,
    },
    /// The remote refused our credentials.
    #[error("{url}: unauthorized: {reason}")]
    Unauthorized {
        /// The remote.
        url: String,
        /// What the remote said.
        reason: String,
    },
    /// The remote (or something on it) does not exist.
    #[error("{url}: not found: {what}")]
    NotFound {
        /// The remote.
        url: String,
        /// What is missing.
        what: String,
    },
    /// An object the remote was asked for, or that a ref or tree needs, is
    /// not there.
    #[error("object {id} is missing on {url}")]
    MissingObject {
        /// The remote (or "local").
        url: String,
        /// The object.
        id: ObjectId,
    },
    /// Received bytes that do not verify.
    #[error("received object {id} does not verify: {reason}")]
    Corrupt {
        /// The object.
        id: ObjectId,
        /// What did not verify.
        reason: String,
    },
    /// A file-system operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The peer broke the protocol (bad framing, truncation, bad refs).
    #[error("protocol error: {reason}")]
    Protocol {
        /// What was wrong.
        reason: String,
    },
    /// A size limit of the protocol was exceeded.
    #[error("limit exceeded: {what}")]
    LimitExceeded {
        /// Which limit, and the offending value.
        what: String,
    },
    /// The remote cannot do this (read-only bundle, backend not built in).
    #[error("{url}: {reason}")]
    Unsupported {
        /// The remote.
        url: String,
        /// Why.
        reason: String,
    },
    /// A ref name that is not acceptable on the wire.
    #[error("invalid ref name {name:?} from the peer: {reason}")]
    BadRefName {
        /// The name.
        name: String,
        /// Why.
        reason: String,
    },
    /// The caller's cancellation flag was set.
    #[error("transfer cancelled")]
    Cancelled,
    /// The local (or directory-remote) ledger failed.
    #[error(transparent)]
    Ledger(#[from] crate::Error),
}

impl RemoteError {
    /// Attach an operation and path to an io::Error.
    pub fn io(op: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| RemoteError::Io { op, path, source }
    }
}

impl crate::Diagnostic for RemoteError {
    fn kind(&self) -> crate::ErrorKind {
        match self {
            RemoteError::Ledger(e) => e.kind(),
            RemoteError::Cancelled => crate::ErrorKind::Interrupted,
            _ => crate::ErrorKind::User,
        }
    }

    fn hint(&self) -> Option<String> {
        let hint = match self {
            RemoteError::Ledger(e) => return e.hint(),
            RemoteError::NonFastForward { .. } => {
                "fetch or pull first; push --force overwrites the remote branch"
            }
            RemoteError::RefMoved { .. } => "someone pushed meanwhile: pull, then push again",
            RemoteError::Corrupt { .. }
            | RemoteError::Protocol { .. }
            | RemoteError::LimitExceeded { .. } => {
                "the peer sent data that does not verify; nothing was referenced locally"
            }
            RemoteError::MissingObject { .. } => {
                "the peer does not have everything its refs need; nothing was referenced locally"
            }
            RemoteError::Unsupported { .. } => "use a directory or bundle remote",
            _ => return None,
        };
        Some(hint.to_string())
    }
}

/// Where objects and refs can be fetched from and pushed to.
pub trait Remote: Send {
    /// The remote's address, for messages.
    fn url(&self) -> String;
    /// Every ref the remote has: full names ("refs/heads/main",
    /// "refs/tags/x", "refs/promoted/main", …) → commit.
    fn list_refs(&mut self) -> Result<Vec<(String, CommitId)>, RemoteError>;
    /// For each id, whether the remote stores it (after verification).
    fn has(&mut self, ids: &[ObjectId]) -> Result<Vec<bool>, RemoteError>;
    /// Send the requested objects to `sink`, bases before deltas,
    /// chunks/lists before Chunked aliases. Missing ids are an error.
    fn get(
        &mut self,
        ids: &[ObjectId],
        sink: &mut dyn FnMut(WireObject) -> Result<(), RemoteError>,
    ) -> Result<(), RemoteError>;
    /// Store objects (ordered as above); each verified; all durable when Ok
    /// returns. Partial progress may persist (resume).
    fn put(
        &mut self,
        objects: &mut dyn Iterator<Item = Result<WireObject, RemoteError>>,
    ) -> Result<(), RemoteError>;
    /// Compare-and-swap one ref: expected None = must not exist. Unless
    /// `force`, `new` must descend from the current value (the remote checks
    /// when it can). The commit `new` and everything it reaches must already
    /// be stored.
    fn update_ref(
        &mut self,
        name: &str,
        expected: Option<CommitId>,
        new: CommitId,
        force: bool,
    ) -> Result<(), RemoteError>;
}

pub(crate) fn transfer_cancelled(
    cancel: &std::sync::atomic::AtomicBool,
) -> Result<(), RemoteError> {
    crate::progress::check_cancel(cancel).map_err(|_| RemoteError::Cancelled)
}

/// Check a full ref name received from (or sent to) a peer: `HEAD` or
/// `refs/<namespace>/<name>` with a valid short name.
pub fn check_wire_ref_name(name: &str) -> Result<(), RemoteError> {
    let bad = |reason: String| RemoteError::BadRefName {
        name: name.to_string(),
        reason,
    };
    if name == "HEAD" {
        return Ok(());
    }
    let rest = name
        .strip_prefix("refs/")
        .ok_or_else(|| bad("must start with refs/".into()))?;
    match rest.split_once('/') {
        Some((ns, n)) if !ns.is_empty() && !n.is_empty() => {}
        _ => return Err(bad("must be refs/<namespace>/<name>".into())),
    }
    crate::refs::validate_ref_name(rest).map_err(|e| bad(e.to_string()))
}
