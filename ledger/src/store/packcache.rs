//! The per-ledger cache of open pack files, bounded so a ledger with
//! thousands of packs never exhausts file descriptors.
//!
//! A resolved record chain names its packs ([`PackSource`]) but holds no
//! descriptor: the file is taken from the cache only while one record is
//! read. So a file's hundreds of resolved chunk chains, or two ledgers in one
//! process (a fetch from a directory remote), stay within
//! [`MAX_OPEN_PACKS`] descriptors each, plus one per record being read.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::Connection;

use crate::error::{db_err, io_err, Error, Result};
use crate::id::ObjectId;

/// Most pack files one ledger handle keeps open. Reads need a handful at a
/// time (a delta chain, a file's pieces in flight); a ledger can hold
/// thousands of packs, and a process may have as few as 64 descriptors, of
/// which three ledgers (a partial clone reading a promised file: the
/// reading handle, the promisor's writing handle and a directory remote)
/// must leave room for their catalogs, locks, the staging pack, the file
/// being written and the standard streams. At 16 such a checkout ran out
/// at `ulimit -n 64`.
pub const MAX_OPEN_PACKS: usize = 8;

/// Open pack files by catalog id, least recently used evicted first, and
/// pack names by catalog id. A file still being read (an `Arc` clone) stays
/// open until that read ends.
#[derive(Default)]
pub(crate) struct PackCache {
    open: HashMap<i64, (Arc<File>, u64)>,
    names: HashMap<i64, String>,
    tick: u64,
}

/// A [`PackCache`] shared by a ledger handle, its commit workers and the
/// record chains it resolves.
pub(crate) type SharedPackCache = Arc<Mutex<PackCache>>;

impl PackCache {
    fn file(&mut self, pack_id: i64, path: &Path) -> std::io::Result<Arc<File>> {
        self.tick += 1;
        let tick = self.tick;
        if let Some(e) = self.open.get_mut(&pack_id) {
            e.1 = tick;
            return Ok(e.0.clone());
        }
        let f = Arc::new(File::open(path)?);
        if self.open.len() >= MAX_OPEN_PACKS {
            if let Some(oldest) = self.open.iter().min_by_key(|e| e.1 .1).map(|e| *e.0) {
                self.open.remove(&oldest);
            }
        }
        self.open.insert(pack_id, (f.clone(), tick));
        Ok(f)
    }

    /// Number of pack files the cache holds open.
    pub(crate) fn len(&self) -> usize {
        self.open.len()
    }

    /// Forget every open file and name (after gc rewrote packs, whose ids
    /// may then name other files).
    pub(crate) fn clear(&mut self) {
        self.open.clear();
        self.names.clear();
    }
}

/// Lock a shared cache. A poisoned lock only means a reader panicked while
/// the map was consistent (every mutation is a single insert or remove).
pub(crate) fn lock(cache: &SharedPackCache) -> std::sync::MutexGuard<'_, PackCache> {
    cache.lock().unwrap_or_else(|p| p.into_inner())
}

/// Where a record's pack file is read from.
#[derive(Clone)]
pub(crate) enum PackSource {
    /// A file the caller opened itself (a staging segment being verified).
    Open(Arc<File>),
    /// A catalogued pack, opened through its ledger's cache when read.
    Cached {
        /// The ledger's cache.
        cache: SharedPackCache,
        /// The pack's catalog id.
        pack_id: i64,
        /// The pack file's path.
        path: Arc<PathBuf>,
    },
}

impl PackSource {
    /// The open file, for reading record `id` of pack `name`. A pack the
    /// catalog names but the directory lacks is damage; any other failure to
    /// open it (out of descriptors, permissions) is an I/O error.
    pub(crate) fn file(&self, name: &str, id: &ObjectId) -> Result<Arc<File>> {
        match self {
            PackSource::Open(f) => Ok(f.clone()),
            PackSource::Cached {
                cache,
                pack_id,
                path,
            } => lock(cache).file(*pack_id, path).map_err(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    Error::Corrupt {
                        id: *id,
                        pack: name.to_string(),
                        offset: 0,
                        reason: format!("cannot open pack file: {e}"),
                    }
                } else {
                    io_err("open pack file", path.as_path())(e)
                }
            }),
        }
    }
}

/// Name a pack by catalog id through connection `conn` (worker threads have
/// their own), for reading record `id`: its name and where to read it.
pub(crate) fn open_pack_with(
    conn: &Connection,
    packs_dir: &Path,
    cache: &SharedPackCache,
    pack_id: i64,
    id: &ObjectId,
) -> Result<(String, PackSource)> {
    let known = lock(cache).names.get(&pack_id).cloned();
    let name = match known {
        Some(n) => n,
        None => {
            let n: String = conn
                .prepare_cached("SELECT name FROM packs WHERE pack_id = ?1")
                .and_then(|mut st| st.query_row([pack_id], |r| r.get(0)))
                .map_err(|e| match e {
                    rusqlite::Error::QueryReturnedNoRows => Error::Corrupt {
                        id: *id,
                        pack: format!("#{pack_id}"),
                        offset: 0,
                        reason: "catalog names a pack that is not registered".into(),
                    },
                    e => db_err("looking up a pack")(e),
                })?;
            lock(cache).names.insert(pack_id, n.clone());
            n
        }
    };
    let source = PackSource::Cached {
        cache: cache.clone(),
        pack_id,
        path: Arc::new(packs_dir.join(&name)),
    };
    Ok((name, source))
}
