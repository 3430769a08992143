//! One side of a file comparison, materialised once: in memory when it is
//! small, otherwise streamed from the ledger into an unnamed scratch file,
//! so that no file is held in memory twice and large ones not at all.

use std::fs::File;
use std::io::{Cursor, Read, Seek};
use std::path::Path;
use std::sync::atomic::AtomicBool;

use bat_ledger::{Ledger, ObjectId};

use super::InspectError;

/// Where and how large sides are materialised ([`super::diff::DiffOptions`]
/// has the user's values).
#[derive(Debug, Clone, Copy)]
pub(super) struct SideOptions<'a> {
    /// Files up to this size are read into memory.
    pub(super) memory_limit: u64,
    /// The folder of scratch files (default: the ledger's own folder).
    pub(super) scratch_dir: Option<&'a Path>,
    /// Stops the read of a large side.
    pub(super) cancel: &'a AtomicBool,
    /// Decode both files even where delta statistics would do
    /// ([`super::diff::DiffOptions::decode`]).
    pub(super) decode: bool,
}

/// A materialised side of a safetensors comparison.
pub(super) enum Side {
    Mem(Cursor<Vec<u8>>),
    Disk(File),
}

impl Read for Side {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Side::Mem(c) => c.read(buf),
            Side::Disk(f) => f.read(buf),
        }
    }
}

impl Seek for Side {
    fn seek(&mut self, pos: std::io::SeekFrom) -> std::io::Result<u64> {
        match self {
            Side::Mem(c) => c.seek(pos),
            Side::Disk(f) => f.seek(pos),
        }
    }
}

/// Read object `id` (`size` bytes, at `path` in its tree, for messages)
/// as one side of a comparison.
pub(super) fn materialise(
    l: &Ledger,
    id: &ObjectId,
    size: u64,
    path: &str,
    opts: SideOptions<'_>,
) -> Result<Side, InspectError> {
    if size <= opts.memory_limit {
        return Ok(Side::Mem(Cursor::new(l.read_bytes(id)?)));
    }
    let dir = opts.scratch_dir.unwrap_or_else(|| l.dir());
    let scratch = |source| InspectError::Scratch {
        path: path.to_string(),
        source,
    };
    let mut f = tempfile::tempfile_in(dir).map_err(scratch)?;
    l.read_bytes_to(id, &mut f, opts.cancel)?;
    f.rewind().map_err(scratch)?;
    Ok(Side::Disk(f))
}
