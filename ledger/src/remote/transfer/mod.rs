//! The transfer engine: fetch (remote → local, [`fetch`]) and push (local →
//! remote, [`push`]) over any [`Remote`](crate::remote::Remote), moving only missing objects,
//! importing verified batches as they arrive (so an interrupted transfer
//! resumes without re-sending what arrived, see `receive`), and moving refs
//! last by compare-and-swap.

use std::sync::atomic::AtomicBool;

use serde::Serialize;

use super::RemoteError;
use crate::id::{CommitId, ObjectId};
use crate::object::TreeEntry;
use crate::progress::check_cancel;

mod fetch;
mod push;
mod receive;

pub use fetch::{fetch, fetch_files, fetch_objects, hydrate, missing_files};
pub use push::{is_ancestor, push, send_plan};
pub use receive::{read_ahead, READ_AHEAD_BYTES};

/// Decides which files a partial fetch leaves on the remote: called with a
/// file's path in its commit tree (`/`-separated) and its tree entry;
/// `true` = do not fetch it (the remote keeps it, as a promisor).
pub type PathFilter = dyn Fn(&str, &TreeEntry) -> bool + Sync;

/// Answers "which of these does the other side store?" (see
/// [`Remote::has`](crate::remote::Remote::has)).
pub type HasFn<'a> = dyn FnMut(&[ObjectId]) -> Result<Vec<bool>, RemoteError> + 'a;

/// Payload bytes per imported batch.
pub const BATCH_BYTES: u64 = 64 << 20;
/// Decoded bytes per imported batch: an import keeps the decoded bytes of
/// the batch's delta bases until their last use, and a batch of links
/// (a few percent of their versions' size each) can stand for gigabytes of
/// versions, so this bounds a fetch's memory where [`BATCH_BYTES`] alone
/// does not.
pub const BATCH_RAW_BYTES: u64 = 256 << 20;
/// Objects per `has`/`get` request.
pub const REQUEST_IDS: usize = 4096;

/// Counts of a fetch.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FetchStats {
    /// Objects received (including any the remote sent twice).
    pub objects_received: u64,
    /// Objects newly stored locally.
    pub objects_stored: u64,
    /// Payload bytes received.
    pub payload_bytes: u64,
    /// Files left on the remote by the filter.
    pub files_promised: u64,
    /// Files that arrived marked absent (pruned on the remote) and are now
    /// recorded as pruned here; `bat fetch` from a remote that has their
    /// bytes restores them.
    pub files_absent: u64,
}

/// One ref a fetch looked at.
#[derive(Debug, Clone, Serialize)]
pub struct RefUpdate {
    /// The ref's name on the remote.
    pub remote_ref: String,
    /// The local ref it maps to.
    pub local_ref: String,
    /// Previous local value.
    pub old: Option<CommitId>,
    /// New value.
    pub new: CommitId,
    /// "new", "updated", "up to date", or "kept (differs locally)" for tags.
    pub status: String,
}

/// Result of [`fetch`].
#[derive(Debug, Clone, Default, Serialize)]
pub struct FetchOutcome {
    /// Object counts.
    pub stats: FetchStats,
    /// Ref updates.
    pub refs: Vec<RefUpdate>,
    /// Every ref the remote advertised.
    pub remote_refs: Vec<(String, CommitId)>,
}

/// Result of [`push`].
#[derive(Debug, Clone, Default, Serialize)]
pub struct PushOutcome {
    /// The remote ref.
    pub remote_ref: String,
    /// Its value before.
    pub old: Option<CommitId>,
    /// Its value now.
    pub new: Option<CommitId>,
    /// Objects sent.
    pub objects_sent: u64,
    /// Payload bytes sent.
    pub payload_bytes: u64,
    /// True when the remote already had the commit at that ref.
    pub up_to_date: bool,
    /// True when the update was forced over a non-fast-forward.
    pub forced: bool,
}

pub(super) fn cancelled(cancel: &AtomicBool) -> Result<(), RemoteError> {
    check_cancel(cancel).map_err(|_| RemoteError::Cancelled)
}
