//! Where the large files of recent commits were read from (`.bat/sources`).
//!
//! Why: a commit stores a checkpoint as deltas against the previous
//! version's pieces, and decoding those pieces from their chains was most
//! of a commit's CPU time (a base nine links deep decodes ten records per
//! piece). The previous version usually still sits where it was committed
//! from (the last round's folder, a trainer's `checkpoint-N`), so the next
//! commit reads its pieces from there instead.
//!
//! The file is a hint, never trusted: a base piece read through it is used
//! only if its BLAKE3 is the piece's id, so a file that changed, vanished or
//! was replaced only costs the decode that would have happened anyway. It is
//! replaced atomically after each commit that records large files; losing
//! or damaging it loses nothing (FORMAT.md §12.2).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::id::ObjectId;

/// The hint file, beside the catalog.
pub(super) const SOURCES_FILE: &str = "sources";

/// Most files remembered: a few commits' worth of sharded checkpoints.
const MAX_SOURCES: usize = 1024;

/// The largest hint file read (a full one is about 200 KiB).
const MAX_SOURCES_BYTES: u64 = 4 << 20;

/// One file as a commit read it.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
struct Source {
    /// The file's id (BLAKE3 of its bytes), hex.
    id: String,
    /// Absolute path it was read from.
    path: PathBuf,
    /// Its length, modification time (ns since the epoch), inode and
    /// device when it was read: a file whose stat differs is not looked at.
    len: u64,
    mtime_ns: i128,
    ino: u64,
    dev: u64,
}

#[derive(Serialize, Deserialize, Default)]
struct SourcesFile {
    version: u32,
    /// Most recent first.
    files: Vec<Source>,
}

/// Stat fields compared before a remembered file is read.
fn stat_of(md: &std::fs::Metadata) -> (u64, i128, u64, u64) {
    let mtime_ns = i128::from(md.mtime()) * 1_000_000_000 + i128::from(md.mtime_nsec());
    (md.len(), mtime_ns, md.ino(), md.dev())
}

/// The remembered sources of a ledger, most recent first.
#[derive(Default)]
pub(super) struct Sources {
    order: Vec<(ObjectId, Source)>,
}

impl Sources {
    /// Read the hint file of the ledger at `dir`; missing, unreadable or
    /// malformed means no hints.
    pub(super) fn load(dir: &Path) -> Sources {
        let path = dir.join(SOURCES_FILE);
        let parsed = std::fs::metadata(&path)
            .ok()
            .filter(|m| m.len() <= MAX_SOURCES_BYTES)
            .and_then(|_| std::fs::read(&path).ok())
            .and_then(|b| serde_json::from_slice::<SourcesFile>(&b).ok())
            .filter(|f| f.version == 1);
        let order = parsed
            .map(|f| f.files)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|src| Some((ObjectId::from_hex(&src.id)?, src)))
            .collect();
        Sources { order }
    }

    /// Where file `id` can still be read, if a commit read it from a path
    /// whose length, modification time, inode and device are unchanged.
    pub(super) fn locate(&self, id: &ObjectId) -> Option<PathBuf> {
        let (_, src) = self.order.iter().find(|(i, _)| i == id)?;
        let md = std::fs::metadata(&src.path).ok()?;
        (stat_of(&md) == (src.len, src.mtime_ns, src.ino, src.dev)).then(|| src.path.clone())
    }

    /// Remember that file `id` was read from `path` (absolute), if it still
    /// has the length and modification time the commit saw.
    pub(super) fn remember(
        &mut self,
        id: &ObjectId,
        path: &Path,
        len: u64,
        mtime: Option<std::time::SystemTime>,
    ) {
        let Ok(md) = std::fs::metadata(path) else {
            return;
        };
        if md.len() != len || md.modified().ok() != mtime || mtime.is_none() {
            return;
        }
        let (len, mtime_ns, ino, dev) = stat_of(&md);
        let src = Source {
            id: id.to_string(),
            path: path.to_path_buf(),
            len,
            mtime_ns,
            ino,
            dev,
        };
        self.order.retain(|(i, s)| s.path != src.path && i != id);
        self.order.insert(0, (*id, src));
        self.order.truncate(MAX_SOURCES);
    }

    /// Replace the hint file of the ledger at `dir` (temporary file, fsync,
    /// rename). Best effort: a failure (a full disk) only loses hints.
    pub(super) fn save(&self, dir: &Path) {
        let file = SourcesFile {
            version: 1,
            files: self.order.iter().map(|(_, s)| s.clone()).collect(),
        };
        let Ok(bytes) = serde_json::to_vec(&file) else {
            return;
        };
        let _ = write_replacing(dir, &bytes);
    }
}

/// Prefix of the hint file's temporary siblings.
const TEMP_PREFIX: &str = ".sources-";

/// Delete temporary hint files a killed commit left in `dir`; how many.
/// Only where no commit can be writing one (gc, under the exclusive lock).
pub(super) fn remove_temps(dir: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(TEMP_PREFIX))
        .filter(|e| std::fs::remove_file(e.path()).is_ok())
        .count() as u64
}

fn write_replacing(dir: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut tmp = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(dir.join(SOURCES_FILE)).map_err(|e| e.error)?;
    Ok(())
}
