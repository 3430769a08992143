//! The per-handle cache of open pack files, bounded so a ledger with
//! thousands of packs never exhausts file descriptors.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use rusqlite::Connection;

use crate::error::{db_err, io_err, Error, Result};
use crate::id::ObjectId;

/// Most pack files one cache keeps open. Reads need a handful at a time
/// (a delta chain, a file's chunks in flight); a ledger can hold thousands
/// of packs, and a process may have as few as 64 descriptors.
pub const MAX_OPEN_PACKS: usize = 32;

/// Open pack files by catalog id, least recently used evicted first. A
/// handle still used by a reader (an `Arc` clone) stays open until that
/// reader drops it.
#[derive(Default)]
pub(crate) struct PackCache {
    open: HashMap<i64, (String, Arc<File>, u64)>,
    tick: u64,
}

impl PackCache {
    fn get(&mut self, pack_id: i64) -> Option<(String, Arc<File>)> {
        self.tick += 1;
        let tick = self.tick;
        self.open.get_mut(&pack_id).map(|e| {
            e.2 = tick;
            (e.0.clone(), e.1.clone())
        })
    }

    fn insert(&mut self, pack_id: i64, name: String, file: Arc<File>) {
        if self.open.len() >= MAX_OPEN_PACKS {
            if let Some(oldest) = self.open.iter().min_by_key(|e| e.1 .2).map(|e| *e.0) {
                self.open.remove(&oldest);
            }
        }
        self.tick += 1;
        self.open.insert(pack_id, (name, file, self.tick));
    }

    /// Number of pack files the cache holds open.
    pub(crate) fn len(&self) -> usize {
        self.open.len()
    }

    pub(crate) fn clear(&mut self) {
        self.open.clear();
    }
}

/// Open a pack file by catalog id through connection `conn` (worker threads).
/// A pack the catalog names but the directory lacks is damage; any other
/// failure to open it (out of descriptors, permissions) is an I/O error.
pub(crate) fn open_pack_with(
    conn: &Connection,
    packs_dir: &Path,
    cache: &mut PackCache,
    pack_id: i64,
    id: &ObjectId,
) -> Result<(String, Arc<File>)> {
    if let Some(p) = cache.get(pack_id) {
        return Ok(p);
    }
    let name: String = conn
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
    let path = packs_dir.join(&name);
    let f = File::open(&path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Error::Corrupt {
                id: *id,
                pack: name.clone(),
                offset: 0,
                reason: format!("cannot open pack file: {e}"),
            }
        } else {
            io_err("open pack file", &path)(e)
        }
    })?;
    let f = Arc::new(f);
    cache.insert(pack_id, name.clone(), f.clone());
    Ok((name, f))
}
