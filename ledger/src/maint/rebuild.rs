//! Rebuilding the derived parts of the catalog from the packs.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;

use rusqlite::params;

use crate::catalog::ImmediateTx;
use crate::catalog::{self, ObjectRow};
use crate::commit::index_commit;
use crate::error::{db_err, io_err, Error, Result};
use crate::id::{CommitId, ObjectId};
use crate::object::{Kind, Mode};
use crate::pack::{self, RECORD_HEADER_LEN};
use crate::store::{Ledger, LockMode};

impl Ledger {
    /// Rebuild the derived catalog tables (object locations, chunked-file
    /// mappings, the commit index) from the pack segments alone. Refs and the
    /// reflog are kept. Needs an exclusive lock.
    pub fn rebuild_catalog(&mut self) -> Result<u64> {
        if self.lock_mode != LockMode::Exclusive {
            return Err(Error::Busy {
                reason: "rebuilding the catalog needs an exclusive lock".into(),
            });
        }
        let dir = self.packs_dir();
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .map_err(io_err("read directory", &dir))?
            .flatten()
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .filter(|n| n.ends_with(".pack"))
            .collect();
        names.sort();
        let tx = ImmediateTx::begin(&self.db)?;
        tx.execute_batch("DELETE FROM objects; DELETE FROM packs; DELETE FROM commits; DELETE FROM commit_bodies; DELETE FROM commit_parents; DELETE FROM commit_fields;")
            .map_err(db_err("clearing derived tables"))?;
        // Every record of every pack, by id: a crash in gc can leave an
        // object in two packs, the old record and the one gc re-encoded.
        let mut found: HashMap<ObjectId, Vec<Found>> = HashMap::new();
        for name in &names {
            let recs = pack::scan_pack(&dir.join(name))?;
            tx.execute("INSERT INTO packs(name) VALUES (?1)", [name])
                .map_err(db_err("registering a pack"))?;
            let pid = tx.last_insert_rowid();
            let pfile = File::open(dir.join(name)).map_err(io_err("open", dir.join(name)))?;
            for (off, h) in recs {
                // A delta record names its base in its payload header.
                let mut base: Option<ObjectId> = None;
                if h.compression == pack::COMPRESSION_PLANES {
                    let mut ph = vec![0u8; (4 + 32usize).min(h.stored_len as usize)];
                    if pfile
                        .read_exact_at(&mut ph, off + RECORD_HEADER_LEN as u64)
                        .is_err()
                    {
                        continue;
                    }
                    if ph.len() == 36 && ph[2] & crate::delta::FLAG_BASE != 0 {
                        base = ObjectId::from_slice(&ph[4..36]);
                    }
                }
                found
                    .entry(h.id)
                    .or_default()
                    .push(Found { pid, off, h, base });
            }
        }
        let mut n = 0u64;
        for f in choose_records(&found) {
            let enc = if f.base.is_some() {
                catalog::ENC_DELTA
            } else {
                catalog::ENC_PACKED
            };
            let h = &f.h;
            n += tx
                .execute(
                    "INSERT OR IGNORE INTO objects(id, kind, raw_len, encoding, pack_id, offset, stored_len, base) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                    params![h.id.as_bytes().as_slice(), i64::from(h.kind.code()), h.raw_len as i64, enc, f.pid, f.off as i64, h.stored_len as i64, f.base.map(|b| b.as_bytes().to_vec())],
                )
                .map_err(db_err("inserting objects"))? as u64;
        }
        tx.commit()?;
        self.clear_pack_cache();
        // Second pass: chunk lists give chunked files, commits give the index.
        let rows: Vec<ObjectRow> = catalog::all_objects(&self.db)?
            .into_iter()
            .filter_map(|r| r.ok())
            .collect();
        let tx = ImmediateTx::begin(&self.db)?;
        for r in &rows {
            match r.kind {
                Kind::ChunkList => {
                    let Ok(cl) = self.read_chunk_list(&r.id) else {
                        continue;
                    };
                    tx.execute(
                        "INSERT OR IGNORE INTO objects(id, kind, raw_len, encoding, base) VALUES (?1, 1, ?2, 2, ?3)",
                        params![cl.file.as_bytes().as_slice(), cl.total as i64, r.id.as_bytes().as_slice()],
                    )
                    .map_err(db_err("inserting chunked files"))?;
                }
                Kind::Commit => {
                    let id = CommitId(r.id);
                    let Ok(c) = self.read_commit(&id) else {
                        continue;
                    };
                    let logical = self
                        .walk_files(&c.tree)
                        .map(|f| {
                            f.iter()
                                .filter(|e| e.mode != Mode::Symlink)
                                .map(|e| e.size)
                                .sum()
                        })
                        .unwrap_or(0);
                    index_commit(&tx, &id, &c, logical)?;
                }
                _ => {}
            }
        }
        tx.commit()?;
        Ok(n)
    }
}

/// One record found in a pack.
struct Found {
    pid: i64,
    off: u64,
    h: pack::RecordHeader,
    base: Option<ObjectId>,
}

/// One record per object id, chosen so that no delta chain loops: an
/// object found both as a delta of B and (re-rooted by gc) as the base of
/// B's delta must not get both forms. Self-contained records first, then,
/// round by round, a delta whose base is already chosen; what is left
/// (bases found nowhere, or only in loops) takes its first record, and
/// reading it reports the damage. Without duplicates this is every record.
fn choose_records(found: &HashMap<ObjectId, Vec<Found>>) -> Vec<&Found> {
    let mut chosen: HashMap<ObjectId, &Found> = HashMap::new();
    for (id, v) in found {
        if let Some(f) = v.iter().find(|f| f.base.is_none()) {
            chosen.insert(*id, f);
        }
    }
    loop {
        let mut more = Vec::new();
        for (id, v) in found {
            if chosen.contains_key(id) {
                continue;
            }
            if let Some(f) = v
                .iter()
                .find(|f| f.base.is_some_and(|b| chosen.contains_key(&b)))
            {
                more.push((*id, f));
            }
        }
        if more.is_empty() {
            break;
        }
        chosen.extend(more);
    }
    for (id, v) in found {
        if let (false, Some(f)) = (chosen.contains_key(id), v.first()) {
            chosen.insert(*id, f);
        }
    }
    let mut out: Vec<&Found> = chosen.into_values().collect();
    out.sort_by_key(|f| (f.pid, f.off));
    out
}
