//! Retention: file objects dropped on purpose. A retention gc is given a
//! set of file objects to prune (the caller decides which: the ledger
//! knows nothing of what the files mean). Their bytes go; their record
//! stays in history (commits and trees keep naming them by id and size),
//! and the catalog's `pruned` table remembers each one, so a read of it
//! fails as [`Error::Pruned`] (never as damage), fsck counts it, and a
//! fetch from a remote that still has it restores it.

use std::collections::{HashMap, HashSet};

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

use crate::catalog::{Location, ObjectRow};
use crate::error::{db_err, Error, Result};
use crate::id::{CommitId, ObjectId};
use crate::store::Ledger;

/// gc roots: (where found, commit).
type Roots = Vec<(String, CommitId)>;

/// The table of pruned file objects, created by the first retention gc.
pub(crate) const PRUNED_TABLE: &str = "CREATE TABLE IF NOT EXISTS pruned(
    id BLOB PRIMARY KEY,
    raw_len INTEGER NOT NULL,
    time INTEGER NOT NULL,
    policy TEXT NOT NULL
) WITHOUT ROWID";

/// One pruned file object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PrunedFile {
    /// The file object.
    pub id: ObjectId,
    /// Its size in bytes.
    pub size: u64,
    /// When it was pruned (seconds since the epoch).
    pub time: i64,
    /// The policy the caller recorded.
    pub policy: String,
}

/// What a gc does besides dropping unreachable objects.
#[derive(Debug, Clone, Default)]
pub struct GcOptions {
    /// File objects to prune although history reaches them. Pruning is by
    /// id: every tree entry naming one of them loses its bytes, so the
    /// caller passes only ids it wants gone wherever they appear.
    pub prune: Vec<ObjectId>,
    /// The policy recorded with each pruned object (shown when it is read).
    pub policy: String,
    /// Reflog entries older than this (seconds since the epoch) are
    /// deleted and no longer keep their commits.
    pub expire_reflog_before: Option<i64>,
    /// Compute and report only; change nothing.
    pub dry_run: bool,
    /// Leave delta trees as they are. By default gc moves the keyframe of
    /// each tree of delta records (a tensor piece's versions) to the
    /// tree's centre when that makes its deepest version at least two
    /// links shallower: the same space, about half the decoding for the
    /// deepest versions (FORMAT.md §9.2).
    pub keep_chains: bool,
}

fn has_table(conn: &Connection) -> Result<bool> {
    conn.prepare_cached("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'pruned'")
        .and_then(|mut st| st.exists([]))
        .map_err(db_err("looking up the pruned table"))
}

impl Ledger {
    /// The error for an object that is not stored: [`Error::Pruned`] when
    /// a retention gc dropped it, else [`Error::ObjectMissing`].
    pub(crate) fn missing(&self, id: &ObjectId) -> Error {
        match self.pruned_file(id) {
            Ok(Some(p)) => Error::Pruned {
                id: *id,
                policy: p.policy,
                time: p.time,
            },
            Ok(None) => Error::ObjectMissing { id: *id },
            Err(e) => e,
        }
    }

    /// The pruned record of `id`, if a retention gc dropped it.
    pub fn pruned_file(&self, id: &ObjectId) -> Result<Option<PrunedFile>> {
        if !has_table(&self.db)? {
            return Ok(None);
        }
        let mut st = self
            .db
            .prepare_cached("SELECT raw_len, time, policy FROM pruned WHERE id = ?1")
            .map_err(db_err("looking up a pruned object"))?;
        st.query_row([id.as_bytes().as_slice()], |r| {
            Ok(PrunedFile {
                id: *id,
                size: r.get::<_, i64>(0)? as u64,
                time: r.get(1)?,
                policy: r.get(2)?,
            })
        })
        .optional()
        .map_err(db_err("looking up a pruned object"))
    }

    /// Every pruned file object not stored again since.
    pub fn pruned_files(&self) -> Result<Vec<PrunedFile>> {
        if !has_table(&self.db)? {
            return Ok(Vec::new());
        }
        let mut st = self
            .db
            .prepare(
                "SELECT id, raw_len, time, policy FROM pruned
                 WHERE id NOT IN (SELECT id FROM objects) ORDER BY id",
            )
            .map_err(db_err("listing pruned objects"))?;
        let rows = st
            .query_map([], |r| {
                Ok((
                    r.get::<_, Vec<u8>>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, String>(3)?,
                ))
            })
            .map_err(db_err("listing pruned objects"))?;
        let mut out = Vec::new();
        for r in rows {
            let (idb, len, time, policy) = r.map_err(db_err("listing pruned objects"))?;
            if let Some(id) = ObjectId::from_slice(&idb) {
                out.push(PrunedFile {
                    id,
                    size: len as u64,
                    time,
                    policy,
                });
            }
        }
        Ok(out)
    }

    /// Forget the pruned mark of objects that are stored again (fetched
    /// back, or committed anew). Returns how many marks were cleared.
    pub fn clear_restored_pruned(&mut self) -> Result<u64> {
        if !has_table(&self.db)? {
            return Ok(0);
        }
        self.db
            .execute(
                "DELETE FROM pruned WHERE id IN (SELECT id FROM objects)",
                [],
            )
            .map(|n| n as u64)
            .map_err(db_err("clearing pruned marks"))
    }

    /// gc roots: ref targets and reflog entries, leaving out entries older
    /// than `expire_before`. Returns the roots and the expired entries'
    /// sequence numbers.
    pub(super) fn gc_roots(&self, expire_before: Option<i64>) -> Result<(Roots, Vec<i64>)> {
        let mut roots: Vec<(String, CommitId)> = self
            .root_commits()?
            .into_iter()
            .filter(|(n, _)| !n.starts_with("reflog "))
            .collect();
        let mut expired = Vec::new();
        for e in self.reflog_rows()? {
            if expire_before.is_some_and(|b| e.time < b) {
                expired.push(e.seq);
                continue;
            }
            roots.extend(e.roots());
        }
        Ok((roots, expired))
    }

    /// Objects a pruned file's bytes live in: the file, its chunk list and
    /// chunks (as the catalog has them).
    pub(super) fn prune_closure(
        &self,
        files: &HashMap<ObjectId, u64>,
        rows: &HashMap<ObjectId, &ObjectRow>,
    ) -> Result<HashSet<ObjectId>> {
        let mut out = HashSet::new();
        for id in files.keys() {
            out.insert(*id);
            if let Some(Location::Chunked { list }) = rows.get(id).map(|r| &r.location) {
                out.insert(*list);
                for c in self.read_chunk_list(list)?.chunks {
                    out.insert(c.id);
                }
            }
        }
        Ok(out)
    }
}

/// Mark the delta bases of everything in `live` reachable, except bases in
/// `dropped` that nothing needs directly: the delta record above such a
/// base is returned, to be re-encoded self-contained (so dropping the base
/// loses nothing). Chains are followed once each.
pub(super) fn plan_bases(
    live: &mut HashSet<ObjectId>,
    dropped: &HashSet<ObjectId>,
    rows: &HashMap<ObjectId, &ObjectRow>,
) -> Vec<ObjectId> {
    let direct: Vec<ObjectId> = live.iter().copied().collect();
    let mut rebase = Vec::new();
    for x in direct {
        let mut cur = x;
        for _ in 0..crate::store::MAX_CHAIN {
            let Some(Location::Delta { base, .. }) = rows.get(&cur).map(|r| &r.location) else {
                break;
            };
            if dropped.contains(base) && !live.contains(base) {
                rebase.push(cur);
                break;
            }
            if !live.insert(*base) {
                break;
            }
            cur = *base;
        }
    }
    rebase.sort();
    rebase.dedup();
    rebase
}

/// Record absent marks received from a peer (inside an import's
/// transaction): `(file, size, policy)`. A mark already recorded here (by
/// this ledger's own gc or an earlier transfer) is kept as it is. Returns
/// how many marks were new.
pub(crate) fn record_received_absent(
    tx: &Connection,
    marks: &[(ObjectId, u64, String)],
    time: i64,
) -> Result<u64> {
    tx.execute_batch(PRUNED_TABLE)
        .map_err(db_err("creating the pruned table"))?;
    let mut st = tx
        .prepare_cached(
            "INSERT OR IGNORE INTO pruned(id, raw_len, time, policy) VALUES (?1, ?2, ?3, ?4)",
        )
        .map_err(db_err("recording received absent marks"))?;
    let mut n = 0u64;
    for (id, size, policy) in marks {
        n += st
            .execute(params![
                id.as_bytes().as_slice(),
                *size as i64,
                time,
                policy
            ])
            .map_err(db_err("recording received absent marks"))? as u64;
    }
    Ok(n)
}

/// Record `files` as pruned by `policy` (inside the gc transaction).
pub(super) fn record_pruned(
    tx: &Connection,
    files: &HashMap<ObjectId, u64>,
    policy: &str,
    time: i64,
) -> Result<()> {
    tx.execute_batch(PRUNED_TABLE)
        .map_err(db_err("creating the pruned table"))?;
    let mut st = tx
        .prepare_cached(
            "INSERT OR REPLACE INTO pruned(id, raw_len, time, policy) VALUES (?1, ?2, ?3, ?4)",
        )
        .map_err(db_err("recording pruned objects"))?;
    for (id, size) in files {
        st.execute(params![
            id.as_bytes().as_slice(),
            *size as i64,
            time,
            policy
        ])
        .map_err(db_err("recording pruned objects"))?;
    }
    Ok(())
}
