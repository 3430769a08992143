//! Maintenance: fsck (verify everything), gc (drop unreachable objects and
//! rewrite packs crash-safely), stats, and rebuilding the derived parts of
//! the catalog from the packs.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use rayon::prelude::*;
use rusqlite::params;
use serde::Serialize;

use crate::catalog::{self, Location, ObjectRow};
use crate::commit::{index_commit, ImmediateTx};
use crate::error::{db_err, io_err, Error, Result};
use crate::id::{CommitId, ObjectId, TreeId};
use crate::object::{Kind, Mode};
use crate::pack::{self, PackWriter, RecordHeader, PACK_HEADER_LEN, RECORD_HEADER_LEN};
use crate::progress::{check_cancel, Progress};
use crate::store::{Ledger, LockMode};

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

fn problem_of(e: &Error, what: &str) -> Problem {
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
struct PackInfo {
    name: String,
    /// `None`: the file is not there.
    size: Option<u64>,
}

/// Packs smaller than this are consolidated by gc (with their neighbours)
/// into packs of up to [`GC_PACK_TARGET`] bytes.
pub const GC_SMALL_PACK: u64 = 64 << 20;
/// Size at which gc rolls over to a new consolidated pack.
pub const GC_PACK_TARGET: u64 = 256 << 20;

/// Open a registered pack for a one-off pass (fsck, gc), not cached.
fn open_pack_once(packs_dir: &Path, info: &PackInfo) -> Result<File> {
    let path = packs_dir.join(&info.name);
    File::open(&path).map_err(io_err("open pack file", &path))
}

impl Ledger {
    /// Every registered pack with its size on disk. A pack that is not there
    /// has no size; any other failure to stat it is an I/O error.
    fn stat_packs(&self) -> Result<HashMap<i64, PackInfo>> {
        let mut out = HashMap::new();
        for (pid, name) in catalog::packs(&self.db)? {
            let path = self.packs_dir().join(&name);
            let size = match std::fs::metadata(&path) {
                Ok(m) => Some(m.len()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(io_err("stat", &path)(e)),
            };
            out.insert(pid, PackInfo { name, size });
        }
        Ok(out)
    }

    /// Walk everything reachable from refs and reflog. With `verify`, every
    /// object is decompressed and its digest checked; problems are collected
    /// instead of aborting. Returns the reachable set and reachable commits.
    fn walk_reachable(
        &self,
        verify: bool,
        problems: &mut Vec<Problem>,
        progress: &dyn Progress,
        cancel: &AtomicBool,
    ) -> Result<(HashSet<ObjectId>, u64)> {
        let mut promised = 0;
        self.walk_reachable_promised(verify, problems, &mut promised, progress, cancel)
    }

    /// [`Ledger::walk_reachable`], counting files a partial clone's
    /// promisor keeps (missing files are then not problems).
    fn walk_reachable_promised(
        &self,
        verify: bool,
        problems: &mut Vec<Problem>,
        promised: &mut u64,
        progress: &dyn Progress,
        cancel: &AtomicBool,
    ) -> Result<(HashSet<ObjectId>, u64)> {
        let partial = self.promisor()?.is_some();
        let mut seen: HashSet<ObjectId> = HashSet::new();
        let mut commits: Vec<(String, CommitId)> = self.root_commits()?;
        let mut ncommits = 0u64;
        let mut trees: Vec<(String, TreeId)> = Vec::new();
        progress.start("verifying reachable objects", None);
        while let Some((from, c)) = commits.pop() {
            check_cancel(cancel)?;
            if !seen.insert(c.0) {
                continue;
            }
            match self.read_commit(&c) {
                Ok(commit) => {
                    ncommits += 1;
                    trees.push((format!("tree of commit {c}"), commit.tree));
                    for p in commit.parents {
                        commits.push((format!("parent of {c}"), p));
                    }
                }
                Err(e) if e.is_environmental() => return Err(e),
                Err(e) => problems.push(problem_of(&e, &format!("commit reachable from {from}"))),
            }
            while let Some((what, t)) = trees.pop() {
                if !seen.insert(t.0) {
                    continue;
                }
                let tree = match self.read_tree(&t) {
                    Ok(tree) => tree,
                    Err(e) if e.is_environmental() => return Err(e),
                    Err(e) => {
                        problems.push(problem_of(&e, &what));
                        continue;
                    }
                };
                for e in tree.entries {
                    // The same rules import applies (crate::validate).
                    let found = self.locate(&e.id)?.map(|r| (r.kind, r.raw_len));
                    if let Err(v) = crate::validate::check_entry(&e, found, partial) {
                        // A missing object is reported below, as before.
                        if found.is_some() {
                            problems.push(Problem {
                                object: Some(t.0),
                                pack: None,
                                offset: None,
                                message: format!("tree entry breaks the rules: {v}"),
                            });
                            continue;
                        }
                    }
                    if e.mode == Mode::Tree {
                        trees.push((format!("subtree {:?} of tree {t}", e.name), TreeId(e.id)));
                        continue;
                    }
                    if !seen.insert(e.id) {
                        continue;
                    }
                    if let Err(err) =
                        self.check_bytes(&e.id, e.size, verify, &mut seen, progress, cancel)
                    {
                        if err.is_environmental() {
                            return Err(err);
                        }
                        if partial && matches!(err, Error::ObjectMissing { id } if id == e.id) {
                            *promised += 1;
                            continue;
                        }
                        problems.push(problem_of(&err, &format!("file {:?} in tree {t}", e.name)));
                    }
                }
            }
        }
        progress.finish();
        Ok((seen, ncommits))
    }

    /// Mark a bytes object's storage reachable; with `verify`, read it all.
    fn check_bytes(
        &self,
        id: &ObjectId,
        size: u64,
        verify: bool,
        seen: &mut HashSet<ObjectId>,
        progress: &dyn Progress,
        cancel: &AtomicBool,
    ) -> Result<()> {
        let row = self.locate(id)?.ok_or(Error::ObjectMissing { id: *id })?;
        if row.raw_len != size {
            return Err(Error::BadObject {
                id: *id,
                kind: "bytes",
                reason: format!("catalog says {} bytes, tree says {size}", row.raw_len),
            });
        }
        if let Location::Chunked { list } = row.location {
            seen.insert(list);
            let cl = self.read_chunk_list(&list)?;
            for c in &cl.chunks {
                seen.insert(c.id);
                self.mark_bases(&c.id, seen)?;
            }
        }
        if verify {
            let n = self.read_bytes_to(id, &mut std::io::sink(), cancel)?;
            progress.inc(n);
        }
        Ok(())
    }

    /// Mark the delta bases of `id` (transitively) reachable.
    fn mark_bases(&self, id: &ObjectId, seen: &mut HashSet<ObjectId>) -> Result<()> {
        let mut cur = *id;
        for _ in 0..crate::store::MAX_CHAIN {
            let Some(row) = self.locate(&cur)? else {
                return Ok(());
            };
            let Location::Delta { base, .. } = row.location else {
                return Ok(());
            };
            if !seen.insert(base) {
                return Ok(());
            }
            cur = base;
        }
        Ok(())
    }

    /// Delete every file in the packs directory the catalog does not
    /// register. Only under the exclusive lock (gc).
    fn remove_orphan_packs(&self) -> Result<u64> {
        let registered: HashSet<String> = catalog::packs(&self.db)?
            .into_iter()
            .map(|(_, n)| n)
            .collect();
        let dir = self.packs_dir();
        let mut n = 0;
        for e in std::fs::read_dir(&dir)
            .map_err(io_err("read directory", &dir))?
            .flatten()
        {
            let name = e.file_name().to_string_lossy().to_string();
            if !registered.contains(&name) {
                std::fs::remove_file(e.path()).map_err(io_err("remove", e.path()))?;
                n += 1;
            }
        }
        pack::sync_dir(&dir)?;
        Ok(n)
    }

    /// Verify the whole ledger: every catalog row against its pack (header,
    /// payload checksum), every object reachable from refs and the reflog
    /// (decompress + digest, chunk lists, whole-file digests), refs and the
    /// commit index. Never modifies anything.
    pub fn fsck(&self, progress: &dyn Progress, cancel: &AtomicBool) -> Result<FsckReport> {
        // One read transaction: every catalog read below sees the same
        // snapshot, so a commit landing meanwhile (its reflog entry read,
        // its object row not) is not reported as damage.
        self.db
            .execute_batch("BEGIN DEFERRED")
            .map_err(db_err("starting a read transaction"))?;
        let rep = self.fsck_snapshot(progress, cancel);
        // A read transaction has nothing to keep; ending it cannot lose data.
        let _ = self.db.execute_batch("ROLLBACK");
        rep
    }

    fn fsck_snapshot(&self, progress: &dyn Progress, cancel: &AtomicBool) -> Result<FsckReport> {
        let mut rep = FsckReport::default();
        let packs = self.stat_packs()?;
        let on_disk: Vec<String> = std::fs::read_dir(self.packs_dir())
            .map_err(io_err("read directory", self.packs_dir()))?
            .flatten()
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .filter(|n| n.ends_with(".pack"))
            .collect();
        let known: HashSet<&str> = packs.values().map(|p| p.name.as_str()).collect();
        rep.unreferenced_packs = on_disk
            .into_iter()
            .filter(|n| !known.contains(n.as_str()))
            .collect();
        rep.unreferenced_packs.sort();

        // 1. Catalog rows vs packs (cheap: header + payload checksum). One
        // pack open at a time per worker, whatever the number of packs.
        let rows = catalog::all_objects(&self.db)?;
        rep.objects_checked = rows.len() as u64;
        let mut good: Vec<ObjectRow> = Vec::with_capacity(rows.len());
        for r in rows {
            match r {
                Ok(r) => good.push(r),
                Err(idb) => rep.problems.push(Problem {
                    object: ObjectId::from_slice(&idb),
                    pack: None,
                    offset: None,
                    message: "malformed catalog row".into(),
                }),
            }
        }
        let ids: HashSet<ObjectId> = good.iter().map(|r| r.id).collect();
        let mut by_pack: HashMap<i64, Vec<&ObjectRow>> = HashMap::new();
        for r in &good {
            match &r.location {
                Location::Packed { pack_id, .. } => by_pack.entry(*pack_id).or_default().push(r),
                Location::Delta {
                    pack_id,
                    offset,
                    base,
                    ..
                } => {
                    if ids.contains(base) {
                        by_pack.entry(*pack_id).or_default().push(r);
                    } else {
                        rep.problems.push(Problem {
                            object: Some(r.id),
                            pack: packs.get(pack_id).map(|p| p.name.clone()),
                            offset: Some(*offset),
                            message: format!("delta base {base} is not in the catalog"),
                        });
                    }
                }
                Location::Chunked { list } => {
                    if !ids.contains(list) {
                        rep.problems.push(Problem {
                            object: Some(r.id),
                            pack: None,
                            offset: None,
                            message: format!(
                                "chunked file's chunk list {list} is not in the catalog"
                            ),
                        });
                    }
                }
            }
        }
        for (pid, rows) in &by_pack {
            if !packs.contains_key(pid) {
                rep.problems.extend(rows.iter().map(|r| Problem {
                    object: Some(r.id),
                    pack: None,
                    offset: r.location.record().map(|x| x.1),
                    message: "catalog row names an unregistered pack".into(),
                }));
            }
        }
        let mut pids: Vec<i64> = packs.keys().copied().collect();
        pids.sort();
        let packs_dir = self.packs_dir();
        let checked: Vec<Result<Vec<Problem>>> = pids
            .par_iter()
            .map(|pid| {
                check_cancel(cancel)?;
                let rows = by_pack.get(pid).map(Vec::as_slice).unwrap_or(&[]);
                check_pack(&packs_dir, &packs[pid], rows)
            })
            .collect();
        for c in checked {
            rep.problems.extend(c?);
        }

        // 2. Reachable objects, fully verified.
        let mut problems = Vec::new();
        let mut promised = 0;
        let (reach, ncommits) =
            self.walk_reachable_promised(true, &mut problems, &mut promised, progress, cancel)?;
        rep.problems.extend(problems);
        rep.promised_files = promised;
        rep.promisor = self.promisor()?.map(|r| r.name);
        rep.commits_reachable = ncommits;
        rep.objects_verified = reach.len() as u64;

        // 3. Refs and the commit index.
        for (name, c) in self.root_commits()? {
            if !ids.contains(&c.0) {
                rep.problems.push(Problem {
                    object: Some(c.0),
                    pack: None,
                    offset: None,
                    message: format!("{name} points to a missing commit"),
                });
            }
        }
        let mut st = self
            .db
            .prepare("SELECT id FROM commits")
            .map_err(db_err("reading the commit index"))?;
        let idx = st
            .query_map([], |r| r.get::<_, Vec<u8>>(0))
            .map_err(db_err("reading the commit index"))?;
        let mut indexed: HashSet<ObjectId> = HashSet::new();
        for r in idx {
            let b = r.map_err(db_err("reading the commit index"))?;
            match ObjectId::from_slice(&b) {
                Some(id) if ids.contains(&id) => {
                    indexed.insert(id);
                }
                other => rep.problems.push(Problem {
                    object: other,
                    pack: None,
                    offset: None,
                    message: "commit index names a commit that is not stored".into(),
                }),
            }
        }
        // Every reachable commit must be indexed (log, show and field
        // queries read the index).
        let mut unindexed: Vec<ObjectId> = good
            .iter()
            .filter(|r| r.kind == Kind::Commit && reach.contains(&r.id) && !indexed.contains(&r.id))
            .map(|r| r.id)
            .collect();
        unindexed.sort();
        for id in unindexed {
            rep.problems.push(Problem {
                object: Some(id),
                pack: None,
                offset: None,
                message: "reachable commit is missing from the commit index".into(),
            });
        }
        Ok(rep)
    }

    /// Remove objects unreachable from refs and the reflog and rewrite packs
    /// that contain dead records. Needs a ledger opened with
    /// [`LockMode::Exclusive`]. Crash-safe: new packs are fsynced before the
    /// catalog switches to them in one transaction; old packs are deleted
    /// only after that.
    pub fn gc(&mut self, progress: &dyn Progress, cancel: &AtomicBool) -> Result<GcReport> {
        if self.lock_mode != LockMode::Exclusive {
            return Err(Error::Busy {
                reason: "gc needs the ledger opened with an exclusive lock".into(),
            });
        }
        let mut rep = GcReport {
            bytes_before: crate::maint::dir_size(&self.packs_dir()),
            ..Default::default()
        };
        // First free what nothing references (segments of failed or killed
        // commits; the exclusive lock means no writer is staging one now):
        // on a full disk this is what makes room for the rest.
        rep.deleted_packs += self.remove_orphan_packs()?;
        let mut problems = Vec::new();
        let (reach, _) = self.walk_reachable(false, &mut problems, progress, cancel)?;
        if let Some(p) = problems.first() {
            return Err(Error::InvalidInput {
                message: format!("refusing to gc a damaged ledger ({p}); run bat fsck"),
            });
        }
        let rows: Vec<ObjectRow> = catalog::all_objects(&self.db)?
            .into_iter()
            .filter_map(|r| r.ok())
            .collect();
        let packs = self.stat_packs()?;
        // Per pack: live records and whether anything dead is in it.
        let mut live_by_pack: HashMap<i64, Vec<&ObjectRow>> = HashMap::new();
        let mut dead: Vec<ObjectId> = Vec::new();
        for r in &rows {
            let live = reach.contains(&r.id);
            if !live {
                dead.push(r.id);
            }
            if let Some((pack_id, _, _)) = r.location.record() {
                let v = live_by_pack.entry(pack_id).or_default();
                if live {
                    v.push(r);
                }
            }
        }
        let to_rewrite = packs_to_rewrite(&packs, &live_by_pack);
        let written =
            self.copy_live_records(&to_rewrite, &packs, &live_by_pack, progress, cancel)?;
        let dead_set: HashSet<ObjectId> = dead.iter().copied().collect();
        // Nothing to change: no transaction (on a full disk, or with a
        // read-only catalog, there could be none).
        if !(dead.is_empty() && to_rewrite.is_empty() && written.packs.is_empty()) {
            let tx = ImmediateTx::begin(&self.db)?;
            let mut new_pids = Vec::with_capacity(written.packs.len());
            for n in &written.packs {
                tx.execute("INSERT INTO packs(name) VALUES (?1)", [n])
                    .map_err(db_err("registering a pack"))?;
                new_pids.push(tx.last_insert_rowid());
            }
            for id in &dead {
                let b = id.as_bytes().as_slice();
                for sql in [
                    "DELETE FROM objects WHERE id = ?1",
                    "DELETE FROM commits WHERE id = ?1",
                    "DELETE FROM commit_parents WHERE commit_id = ?1",
                    "DELETE FROM commit_fields WHERE commit_id = ?1",
                ] {
                    tx.prepare_cached(sql)
                        .and_then(|mut st| st.execute([b]))
                        .map_err(db_err("deleting objects"))?;
                }
            }
            let mut mv = tx
                .prepare_cached("UPDATE objects SET pack_id = ?1, offset = ?2 WHERE id = ?3")
                .map_err(db_err("moving objects"))?;
            for (id, pack, at) in &written.moved {
                mv.execute(params![
                    new_pids[*pack],
                    *at as i64,
                    id.as_bytes().as_slice()
                ])
                .map_err(db_err("moving objects"))?;
            }
            drop(mv);
            for pid in &to_rewrite {
                tx.execute("DELETE FROM packs WHERE pack_id = ?1", [pid])
                    .map_err(db_err("dropping packs"))?;
            }
            tx.commit()?;
        }
        self.clear_pack_cache();
        rep.removed_objects = dead_set.len() as u64;
        rep.kept_objects = (rows.len() - dead_set.len()) as u64;
        rep.rewritten_packs = to_rewrite.len() as u64;
        // Now nothing references the old packs: delete them and any orphans.
        rep.deleted_packs += self.remove_orphan_packs()?;
        let dir = self.packs_dir();
        let _ = self.db.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)");
        rep.bytes_after = dir_size(&dir);
        Ok(rep)
    }

    /// Counts and sizes.
    pub fn stats(&self) -> Result<Stats> {
        let q = |sql: &str| -> Result<u64> {
            self.db
                .query_row(sql, [], |r| r.get::<_, Option<i64>>(0))
                .map(|v| v.unwrap_or(0) as u64)
                .map_err(db_err("computing stats"))
        };
        Ok(Stats {
            objects: q("SELECT COUNT(*) FROM objects")?,
            commits: q("SELECT COUNT(*) FROM commits")?,
            packs: q("SELECT COUNT(*) FROM packs")?,
            logical_bytes: q("SELECT SUM(logical_bytes) FROM commits")?,
            stored_bytes: dir_size(&self.dir),
            pack_bytes: dir_size(&self.packs_dir()),
            unique_bytes: q(
                "SELECT SUM(raw_len) FROM objects WHERE encoding IN (1, 3) AND kind = 1",
            )?,
            delta_objects: q("SELECT COUNT(*) FROM objects WHERE encoding = 3")?,
            delta_logical_bytes: q("SELECT SUM(raw_len) FROM objects WHERE encoding = 3")?,
            delta_stored_bytes: q("SELECT SUM(stored_len) FROM objects WHERE encoding = 3")?,
            record_stored_bytes: q("SELECT SUM(stored_len) FROM objects WHERE encoding IN (1, 3)")?,
        })
    }

    /// Commits whose indexed field `key` equals `value`, newest first.
    pub fn commits_with_field(
        &self,
        key: &str,
        value: &crate::object::FieldValue,
    ) -> Result<Vec<CommitId>> {
        let v = field_sql(value);
        let mut st = self
            .db
            .prepare("SELECT f.commit_id FROM commit_fields f JOIN commits c ON c.id = f.commit_id WHERE f.key = ?1 AND f.value = ?2 ORDER BY c.time DESC, c.id")
            .map_err(db_err("querying fields"))?;
        let rows = st
            .query_map(params![key, v], |r| r.get::<_, Vec<u8>>(0))
            .map_err(db_err("querying fields"))?;
        let mut out = Vec::new();
        for r in rows {
            if let Some(id) = ObjectId::from_slice(&r.map_err(db_err("querying fields"))?) {
                out.push(CommitId(id));
            }
        }
        Ok(out)
    }

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
        tx.execute_batch("DELETE FROM objects; DELETE FROM packs; DELETE FROM commits; DELETE FROM commit_parents; DELETE FROM commit_fields;")
            .map_err(db_err("clearing derived tables"))?;
        let mut n = 0u64;
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
                let enc = if base.is_some() {
                    catalog::ENC_DELTA
                } else {
                    catalog::ENC_PACKED
                };
                n += tx
                    .execute(
                        "INSERT OR IGNORE INTO objects(id, kind, raw_len, encoding, pack_id, offset, stored_len, base) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                        params![h.id.as_bytes().as_slice(), i64::from(h.kind.code()), h.raw_len as i64, enc, pid, off as i64, h.stored_len as i64, base.map(|b| b.as_bytes().to_vec())],
                    )
                    .map_err(db_err("inserting objects"))? as u64;
            }
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

/// fsck of one pack: its header and every catalog row in it. `Err` only for
/// failures of the machine (I/O, descriptors), never for damage.
fn check_pack(packs_dir: &Path, info: &PackInfo, rows: &[&ObjectRow]) -> Result<Vec<Problem>> {
    let problem = |object: Option<ObjectId>, offset: Option<u64>, message: String| Problem {
        object,
        pack: Some(info.name.clone()),
        offset,
        message,
    };
    let Some(size) = info.size else {
        let mut out = vec![problem(None, None, "pack file is missing".into())];
        out.extend(rows.iter().map(|r| {
            problem(
                Some(r.id),
                r.location.record().map(|x| x.1),
                "pack file is missing".into(),
            )
        }));
        return Ok(out);
    };
    let file = open_pack_once(packs_dir, info)?;
    let mut out = Vec::new();
    if let Err(m) = pack::check_pack_header(&file) {
        out.push(problem(None, Some(0), m));
    }
    for r in rows {
        let Some((_, offset, stored_len)) = r.location.record() else {
            continue;
        };
        if let Err(m) = check_record(&file, size, r, offset, stored_len)
            .map_err(|e| io_err("read pack file", packs_dir.join(&info.name))(e))?
        {
            out.push(problem(Some(r.id), Some(offset), m));
        }
    }
    Ok(out)
}

/// Check one record against its catalog row: `Ok(Err(message))` is damage,
/// `Err` an I/O error (a short read is damage: the pack is truncated).
fn check_record(
    file: &File,
    size: u64,
    r: &ObjectRow,
    offset: u64,
    stored_len: u64,
) -> std::io::Result<std::result::Result<(), String>> {
    let end = offset + RECORD_HEADER_LEN as u64 + stored_len;
    if offset < PACK_HEADER_LEN || end > size {
        return Ok(Err(format!(
            "record extends to byte {end} beyond the pack's {size} bytes (truncated?)"
        )));
    }
    let read = |buf: &mut [u8], at: u64, what: &str| match file.read_exact_at(buf, at) {
        Ok(()) => Ok(Ok(())),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            Ok(Err(format!("cannot read {what}: {e}")))
        }
        Err(e) => Err(e),
    };
    let mut hb = [0u8; RECORD_HEADER_LEN];
    if let Err(m) = read(&mut hb, offset, "header")? {
        return Ok(Err(m));
    }
    let h = match RecordHeader::decode(&hb) {
        Ok(h) => h,
        Err(m) => return Ok(Err(m)),
    };
    if h.id != r.id || h.kind != r.kind || h.raw_len != r.raw_len || h.stored_len != stored_len {
        return Ok(Err("record header does not match the catalog row".into()));
    }
    let mut payload = vec![0u8; stored_len as usize];
    if let Err(m) = read(&mut payload, offset + RECORD_HEADER_LEN as u64, "payload")? {
        return Ok(Err(m));
    }
    if pack::payload_checksum(&payload) != h.payload_sum {
        return Ok(Err("payload checksum mismatch".into()));
    }
    Ok(Ok(()))
}

/// Packs gc rewrites: those holding dead records, and small ones (below
/// [`GC_SMALL_PACK`]) to be merged. A lone small pack with nothing dead in
/// it and nothing to merge with is left alone (rewriting it would change
/// nothing but its name).
fn packs_to_rewrite(
    packs: &HashMap<i64, PackInfo>,
    live_by_pack: &HashMap<i64, Vec<&ObjectRow>>,
) -> Vec<i64> {
    let mut out: Vec<i64> = Vec::new();
    let mut dirty = 0usize;
    for (pid, info) in packs {
        let live = live_by_pack.get(pid).map(|v| v.as_slice()).unwrap_or(&[]);
        let live_bytes: u64 = live
            .iter()
            .filter_map(|r| r.location.record())
            .map(|(_, _, stored_len)| RECORD_HEADER_LEN as u64 + stored_len)
            .sum();
        let size = info.size.unwrap_or(0);
        if PACK_HEADER_LEN + live_bytes != size {
            dirty += 1;
            out.push(*pid);
        } else if size < GC_SMALL_PACK {
            out.push(*pid);
        }
    }
    if out.len() == 1 && dirty == 0 {
        out.clear();
    }
    out.sort();
    out
}

/// What [`Ledger::copy_live_records`] wrote.
struct Written {
    /// New pack names, fsynced, in order.
    packs: Vec<String>,
    /// (object, index into `packs`, offset) of every record copied.
    moved: Vec<(ObjectId, usize, u64)>,
}

impl Ledger {
    /// Copy the live records of `to_rewrite` (each verified: header, catalog
    /// row, payload checksum) into new packs rolled at [`GC_PACK_TARGET`],
    /// reading one old pack at a time. Every new pack is fsynced before this
    /// returns; nothing names them yet, so a crash here leaves only
    /// unreferenced files.
    fn copy_live_records(
        &self,
        to_rewrite: &[i64],
        packs: &HashMap<i64, PackInfo>,
        live_by_pack: &HashMap<i64, Vec<&ObjectRow>>,
        progress: &dyn Progress,
        cancel: &AtomicBool,
    ) -> Result<Written> {
        let mut out = Written {
            packs: Vec::new(),
            moved: Vec::new(),
        };
        let mut cur: Option<PackWriter> = None;
        progress.start("rewriting packs", Some(to_rewrite.len() as u64));
        for pid in to_rewrite {
            check_cancel(cancel)?;
            let info = &packs[pid];
            let mut live: Vec<&ObjectRow> = live_by_pack.get(pid).cloned().unwrap_or_default();
            if live.is_empty() {
                progress.inc(1);
                continue;
            }
            live.sort_by_key(|r| r.location.record().map_or(0, |x| x.1));
            if info.size.is_none() {
                return Err(Error::Corrupt {
                    id: live[0].id,
                    pack: info.name.clone(),
                    offset: 0,
                    reason: "pack file is missing".into(),
                });
            }
            let file = open_pack_once(&self.packs_dir(), info)?;
            for r in live {
                let Some((_, offset, stored_len)) = r.location.record() else {
                    continue;
                };
                let e = pack::Expect {
                    id: r.id,
                    kind: r.kind,
                    offset,
                    raw_len: r.raw_len,
                    stored_len,
                };
                let (h, payload) = pack::read_raw_record(&file, &info.name, &e)?;
                let len = RECORD_HEADER_LEN as u64 + stored_len;
                if cur
                    .as_ref()
                    .is_some_and(|w| !w.is_empty() && w.len() + len > GC_PACK_TARGET)
                {
                    let mut w = cur.take().expect("checked above");
                    w.sync()?;
                    out.packs.push(w.name().to_string());
                }
                if cur.is_none() {
                    cur = Some(PackWriter::create(&self.packs_dir())?);
                }
                let w = cur.as_mut().expect("just created");
                let at = w.append(&h, &payload)?;
                out.moved.push((r.id, out.packs.len(), at));
            }
            progress.inc(1);
        }
        progress.finish();
        if let Some(mut w) = cur {
            w.sync()?;
            out.packs.push(w.name().to_string());
        }
        Ok(out)
    }
}

/// A field value as the catalog stores it.
fn field_sql(value: &crate::object::FieldValue) -> rusqlite::types::Value {
    use crate::object::FieldValue as F;
    match value {
        F::Str(s) => s.clone().into(),
        F::Int(i) => (*i).into(),
        F::Float(f) => (*f).into(),
        F::Bool(b) => i64::from(*b).into(),
    }
}
