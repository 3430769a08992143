//! Maintenance: fsck (verify everything), gc (drop unreachable objects and
//! rewrite packs crash-safely), stats, and rebuilding the derived parts of
//! the catalog from the packs.

use std::fs::File;
use std::path::Path;

use serde::Serialize;

use crate::error::{io_err, Error, Result};
use crate::id::ObjectId;

mod fsck;
mod gc;
mod prune;
mod reach;
mod rebuild;
mod reroot;
mod stats;

pub use gc::GcAutoDue;
pub(crate) use prune::record_received_absent;
pub use prune::{GcOptions, PrunedFile};

/// One problem found by fsck.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The object concerned, if any.
    pub object: Option<ObjectId>,
    /// The pack concerned, if any.
    pub pack: Option<String>,
    /// Record offset, if any.
    pub offset: Option<u64>,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(o) = &self.object {
            write!(f, "object {o}: ")?;
        }
        write!(f, "{}", self.message)?;
        if let Some(p) = &self.pack {
            write!(f, " (pack {p}")?;
            if let Some(off) = self.offset {
                write!(f, " offset {off}")?;
            }
            write!(f, ")")?;
        }
        Ok(())
    }
}

pub(super) fn problem_of(e: &Error, what: &str) -> Problem {
    match e {
        Error::Corrupt {
            id,
            pack,
            offset,
            reason,
        } => Problem {
            object: Some(*id),
            pack: Some(pack.clone()),
            offset: Some(*offset),
            message: format!("{what}: {reason}"),
        },
        Error::ObjectMissing { id } => Problem {
            object: Some(*id),
            pack: None,
            offset: None,
            message: format!("{what}: missing"),
        },
        Error::BadObject { id, .. } => Problem {
            object: Some(*id),
            pack: None,
            offset: None,
            message: format!("{what}: {e}"),
        },
        _ => Problem {
            object: None,
            pack: None,
            offset: None,
            message: format!("{what}: {e}"),
        },
    }
}

/// Result of fsck.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FsckReport {
    /// Catalog rows checked.
    pub objects_checked: u64,
    /// Reachable commits verified.
    pub commits_reachable: u64,
    /// Reachable objects fully verified (decompressed + digest).
    pub objects_verified: u64,
    /// Pack files on disk that the catalog does not reference (left by an
    /// interrupted writer or gc; harmless, removed by gc).
    pub unreferenced_packs: Vec<String>,
    /// Problems; empty means the ledger is sound.
    pub problems: Vec<Problem>,
    /// Files reachable but not stored because this is a partial clone:
    /// promised by the remote named in `promisor` (fetched on demand).
    pub promised_files: u64,
    /// The promisor remote of a partial clone.
    pub promisor: Option<String>,
    /// Files reachable but deliberately not stored: pruned by a retention
    /// gc (`gc` with a prune set) and recorded as such; not damage.
    pub pruned_files: u64,
}

impl FsckReport {
    /// True when nothing is wrong.
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Result of gc.
#[derive(Debug, Clone, Default, Serialize)]
pub struct GcReport {
    /// Nothing was changed: the figures say what a real run would do.
    pub dry_run: bool,
    /// Reflog entries expired (older than the given time).
    pub expired_reflog_entries: u64,
    /// File objects newly pruned (dropped though history reaches them).
    pub pruned_files: u64,
    /// Their total size (file bytes).
    pub pruned_file_bytes: u64,
    /// Catalog rows to drop (pruned files, their chunks and chunk lists,
    /// unreachable objects).
    pub dropped_objects: u64,
    /// Pack bytes those rows' records take (headers included): what the
    /// rewrite frees, before re-based records are added back.
    pub dropped_record_bytes: u64,
    /// Delta records re-encoded as self-contained records because their
    /// base was dropped.
    pub rebased_records: u64,
    /// Delta trees whose keyframe moved to their centre (see
    /// [`GcOptions::keep_chains`]).
    pub rerooted_trees: u64,
    /// Records re-encoded for it: the versions from each old keyframe to
    /// its new one.
    pub rerooted_records: u64,
    /// Objects kept.
    pub kept_objects: u64,
    /// Catalog rows removed.
    pub removed_objects: u64,
    /// Packs rewritten.
    pub rewritten_packs: u64,
    /// Pack files deleted.
    pub deleted_packs: u64,
    /// Bytes under `.bat/packs` before.
    pub bytes_before: u64,
    /// Bytes under `.bat/packs` after.
    pub bytes_after: u64,
}

/// Ledger statistics.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Stats {
    /// Catalog rows (distinct objects).
    pub objects: u64,
    /// Commits in the catalog.
    pub commits: u64,
    /// Registered packs.
    pub packs: u64,
    /// Sum over all commits of the sizes of all files in their trees.
    pub logical_bytes: u64,
    /// Bytes on disk under `.bat`.
    pub stored_bytes: u64,
    /// Bytes of pack files.
    pub pack_bytes: u64,
    /// Sum of distinct objects' raw lengths (chunked files counted once, via
    /// their chunks).
    pub unique_bytes: u64,
    /// Records stored as deltas against a base object.
    pub delta_objects: u64,
    /// Sum of the raw lengths of delta-stored records.
    pub delta_logical_bytes: u64,
    /// Sum of the stored payload lengths of delta-stored records.
    pub delta_stored_bytes: u64,
    /// Sum of the stored payload lengths of all records.
    pub record_stored_bytes: u64,
    /// Files whose bytes `gc --keep` dropped and no fetch has restored
    /// ([`Ledger::pruned_files`]).
    pub pruned_files: u64,
}

/// Sum of file sizes under a directory.
pub fn dir_size(p: &Path) -> u64 {
    let mut total = 0;
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            if let Ok(md) = e.metadata() {
                total += if md.is_dir() {
                    dir_size(&e.path())
                } else {
                    md.len()
                };
            }
        }
    }
    total
}

/// A registered pack as found on disk. No handle is kept: a ledger can have
/// thousands of packs, more than a process may hold open.
pub(super) struct PackInfo {
    pub(super) name: String,
    /// `None`: the file is not there.
    pub(super) size: Option<u64>,
}

/// Packs smaller than this are consolidated by gc (with their neighbours)
/// into packs of up to [`GC_PACK_TARGET`] bytes.
pub const GC_SMALL_PACK: u64 = 64 << 20;
/// Size at which gc rolls over to a new consolidated pack.
pub const GC_PACK_TARGET: u64 = 256 << 20;

/// Open a registered pack for a one-off pass (fsck, gc), not cached.
pub(super) fn open_pack_once(packs_dir: &Path, info: &PackInfo) -> Result<File> {
    let path = packs_dir.join(&info.name);
    File::open(&path).map_err(io_err("open pack file", &path))
}
