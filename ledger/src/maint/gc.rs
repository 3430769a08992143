//! gc: drop unreachable objects and rewrite packs crash-safely.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicBool;

use rusqlite::params;

use super::prune::GcOptions;
use crate::catalog::ImmediateTx;
use crate::catalog::{self, ObjectRow};
use crate::error::{db_err, io_err, Error, Result};
use crate::id::ObjectId;
use crate::pack::{self, PackWriter, PACK_HEADER_LEN, RECORD_HEADER_LEN};
use crate::progress::{check_cancel, Progress};
use crate::store::{Ledger, LockMode};

use super::*;

/// Why an automatic gc is due ([`Ledger::gc_auto_due`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct GcAutoDue {
    /// Registered packs smaller than [`GC_SMALL_PACK`]: the ones gc merges.
    pub small_packs: u64,
    /// The `gc.auto` threshold they passed.
    pub limit: u32,
}

impl Ledger {
    /// Registered packs smaller than [`GC_SMALL_PACK`] (gc merges them into
    /// packs of up to [`GC_PACK_TARGET`]; a missing file counts as small).
    /// One `stat` per pack, no pack is opened.
    pub fn small_packs(&self) -> Result<u64> {
        Ok(self
            .stat_packs()?
            .values()
            .filter(|p| p.size.unwrap_or(0) < GC_SMALL_PACK)
            .count() as u64)
    }

    /// Whether `bat commit` and `bat run` should gc now: more small packs
    /// than [`crate::WriteConfig::gc_auto`] (0: never). Every commit adds
    /// one pack and a reader opens each pack it needs, so past the
    /// threshold merging them pays; checkpoint packs above
    /// [`GC_SMALL_PACK`] are left alone, so a gc brings the count back
    /// under the threshold and the next commits do not trigger another.
    pub fn gc_auto_due(&self) -> Result<Option<GcAutoDue>> {
        let limit = self.config.gc_auto;
        if limit == 0 {
            return Ok(None);
        }
        let small_packs = self.small_packs()?;
        Ok((small_packs > u64::from(limit)).then_some(GcAutoDue { small_packs, limit }))
    }

    /// Delete every file in the packs directory the catalog does not
    /// register. Only under the exclusive lock (gc).
    pub(super) fn remove_orphan_packs(&self) -> Result<u64> {
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

    /// Remove objects unreachable from refs and the reflog and rewrite packs
    /// that contain dead records. Needs a ledger opened with
    /// [`LockMode::Exclusive`]. Crash-safe: new packs are fsynced before the
    /// catalog switches to them in one transaction; old packs are deleted
    /// only after that.
    pub fn gc(&mut self, progress: &dyn Progress, cancel: &AtomicBool) -> Result<GcReport> {
        self.gc_with(&GcOptions::default(), progress, cancel)
    }

    /// [`Ledger::gc`] with retention: expire old reflog entries, prune the
    /// file objects `opts.prune` (recorded as pruned, see
    /// [`crate::maint::PrunedFile`]), re-encoding as self-contained records
    /// the kept delta records whose base would go. With `opts.dry_run`
    /// nothing changes and the report says what a real run would drop.
    pub fn gc_with(
        &mut self,
        opts: &GcOptions,
        progress: &dyn Progress,
        cancel: &AtomicBool,
    ) -> Result<GcReport> {
        // A dry run changes nothing, so it may run beside readers.
        if self.lock_mode != LockMode::Exclusive && !opts.dry_run {
            return Err(Error::Busy {
                reason: "gc needs the ledger opened with an exclusive lock".into(),
            });
        }
        let mut rep = GcReport {
            dry_run: opts.dry_run,
            bytes_before: crate::maint::dir_size(&self.packs_dir()),
            ..Default::default()
        };
        // First free what nothing references (segments of failed or killed
        // commits; the exclusive lock means no writer is staging one now):
        // on a full disk this is what makes room for the rest.
        if !opts.dry_run {
            rep.deleted_packs += self.remove_orphan_packs()?;
            self.remove_stale_source_temps();
        }
        let (roots, expired) = self.gc_roots(opts.expire_reflog_before)?;
        let prune: HashSet<ObjectId> = opts.prune.iter().copied().collect();
        let spec = super::reach::WalkSpec {
            roots,
            prune: &prune,
            bases: prune.is_empty(),
        };
        let mut problems = Vec::new();
        let walked = self.walk_with(&spec, false, &mut problems, progress, cancel)?;
        if let Some(p) = problems.first() {
            return Err(Error::InvalidInput {
                message: format!("refusing to gc a damaged ledger ({p}); run bat fsck"),
            });
        }
        let mut reach = walked.seen;
        let rows: Vec<ObjectRow> = catalog::all_objects(&self.db)?
            .into_iter()
            .filter_map(|r| r.ok())
            .collect();
        let rebase: Vec<ObjectId> = if prune.is_empty() {
            Vec::new()
        } else {
            let by_id: HashMap<ObjectId, &ObjectRow> = rows.iter().map(|r| (r.id, r)).collect();
            let dropped = self.prune_closure(&walked.pruning, &by_id)?;
            super::prune::plan_bases(&mut reach, &dropped, &by_id)
        };
        let rebase_set: HashSet<ObjectId> = rebase.iter().copied().collect();
        let reroot = if opts.keep_chains {
            Vec::new()
        } else {
            super::reroot::plan(&rows, &reach, &rebase_set, self.config.delta_max_depth)
        };
        // Records re-based or re-rooted are not copied: their old packs
        // are rewritten without them and the new records go to new packs.
        let mut reencoded = rebase_set;
        reencoded.extend(reroot.iter().flatten().copied());
        let packs = self.stat_packs()?;
        // Per pack: live records and whether anything dead is in it. A
        // record to re-base is not copied (its pack is rewritten without
        // it; the re-encoded record goes to a new pack).
        let mut live_by_pack: HashMap<i64, Vec<&ObjectRow>> = HashMap::new();
        let mut dead: Vec<ObjectId> = Vec::new();
        for r in &rows {
            let live = reach.contains(&r.id);
            if !live {
                dead.push(r.id);
                if let Some((_, _, stored)) = r.location.record() {
                    rep.dropped_record_bytes += RECORD_HEADER_LEN as u64 + stored;
                }
            }
            if let Some((pack_id, _, _)) = r.location.record() {
                let v = live_by_pack.entry(pack_id).or_default();
                if live && !reencoded.contains(&r.id) {
                    v.push(r);
                }
            }
        }
        rep.expired_reflog_entries = expired.len() as u64;
        rep.pruned_files = walked.pruning.len() as u64;
        rep.pruned_file_bytes = walked.pruning.values().sum();
        rep.dropped_objects = dead.len() as u64;
        rep.rebased_records = rebase.len() as u64;
        rep.rerooted_trees = reroot.len() as u64;
        rep.rerooted_records = reroot.iter().map(|p| p.len() as u64).sum();
        rep.removed_objects = dead.len() as u64;
        rep.kept_objects = (rows.len() - dead.len()) as u64;
        if opts.dry_run {
            rep.bytes_after = rep.bytes_before;
            return Ok(rep);
        }
        let to_rewrite = packs_to_rewrite(&packs, &live_by_pack);
        let mut written =
            self.copy_live_records(&to_rewrite, &packs, &live_by_pack, progress, cancel)?;
        let rebased = self.write_rebased(&rows, &rebase, &mut written, cancel)?;
        let (rerooted, segments) =
            self.write_rerooted(&reroot, written.packs.len(), progress, cancel)?;
        written.packs.extend(segments);
        // Nothing to change: no transaction (on a full disk, or with a
        // read-only catalog, there could be none).
        let changes = !(dead.is_empty()
            && to_rewrite.is_empty()
            && written.packs.is_empty()
            && expired.is_empty()
            && walked.pruning.is_empty());
        if changes {
            self.record_gc(&GcChanges {
                written: &written,
                rebased: &rebased,
                rerooted: &rerooted,
                dead: &dead,
                expired: &expired,
                pruning: &walked.pruning,
                policy: &opts.policy,
                rewritten: &to_rewrite,
            })?;
        }
        self.clear_pack_cache();
        rep.rewritten_packs = to_rewrite.len() as u64;
        // Now nothing references the old packs: delete them and any orphans.
        rep.deleted_packs += self.remove_orphan_packs()?;
        let dir = self.packs_dir();
        let _ = self.db.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)");
        rep.bytes_after = dir_size(&dir);
        Ok(rep)
    }

    /// The catalog side of a gc, in one transaction: register the new
    /// packs, forget dead objects and expired reflog entries, record pruned
    /// files, point moved and re-based records at their new place, and drop
    /// the rewritten packs (their files are deleted after this commits).
    fn record_gc(&self, c: &GcChanges<'_>) -> Result<()> {
        let tx = ImmediateTx::begin(&self.db)?;
        let mut new_pids = Vec::with_capacity(c.written.packs.len());
        for n in &c.written.packs {
            tx.execute("INSERT INTO packs(name) VALUES (?1)", [n])
                .map_err(db_err("registering a pack"))?;
            new_pids.push(tx.last_insert_rowid());
        }
        for id in c.dead {
            let b = id.as_bytes().as_slice();
            for sql in [
                "DELETE FROM objects WHERE id = ?1",
                "DELETE FROM commits WHERE id = ?1",
                "DELETE FROM commit_bodies WHERE id = ?1",
                "DELETE FROM commit_parents WHERE commit_id = ?1",
                "DELETE FROM commit_fields WHERE commit_id = ?1",
            ] {
                tx.prepare_cached(sql)
                    .and_then(|mut st| st.execute([b]))
                    .map_err(db_err("deleting objects"))?;
            }
        }
        for seq in c.expired {
            tx.execute("DELETE FROM reflog WHERE seq = ?1", [seq])
                .map_err(db_err("expiring the reflog"))?;
        }
        if !c.pruning.is_empty() {
            super::prune::record_pruned(&tx, c.pruning, c.policy, crate::refs::now())?;
        }
        let mut mv = tx
            .prepare_cached("UPDATE objects SET pack_id = ?1, offset = ?2 WHERE id = ?3")
            .map_err(db_err("moving objects"))?;
        for (id, pack, at) in &c.written.moved {
            mv.execute(params![
                new_pids[*pack],
                *at as i64,
                id.as_bytes().as_slice()
            ])
            .map_err(db_err("moving objects"))?;
        }
        drop(mv);
        let mut rb = tx
            .prepare_cached(
                "UPDATE objects SET encoding = ?1, pack_id = ?2, offset = ?3, stored_len = ?4, base = NULL WHERE id = ?5",
            )
            .map_err(db_err("re-basing objects"))?;
        for (id, pack, at, stored) in c.rebased {
            rb.execute(params![
                catalog::ENC_PACKED,
                new_pids[*pack],
                *at as i64,
                *stored as i64,
                id.as_bytes().as_slice()
            ])
            .map_err(db_err("re-basing objects"))?;
        }
        drop(rb);
        let mut rr = tx
            .prepare_cached(
                "UPDATE objects SET encoding = ?1, pack_id = ?2, offset = ?3, stored_len = ?4, base = ?5 WHERE id = ?6",
            )
            .map_err(db_err("re-rooting delta chains"))?;
        for r in c.rerooted {
            rr.execute(params![
                super::reroot::encoding(r),
                new_pids[r.pack],
                r.offset as i64,
                r.stored_len as i64,
                r.base.as_ref().map(|b| b.as_bytes().to_vec()),
                r.id.as_bytes().as_slice()
            ])
            .map_err(db_err("re-rooting delta chains"))?;
        }
        drop(rr);
        for pid in c.rewritten {
            tx.execute("DELETE FROM packs WHERE pack_id = ?1", [pid])
                .map_err(db_err("dropping packs"))?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Re-encode each record of `ids` (a delta whose base is being dropped)
    /// as a self-contained record with the same id and bytes, in one new
    /// pack appended to `written.packs`. Each is read verified (whole chain,
    /// digest) before and read back verified after it is written; the pack
    /// is fsynced before this returns. Returns (id, index into
    /// `written.packs`, offset, stored length).
    fn write_rebased(
        &self,
        rows: &[ObjectRow],
        ids: &[ObjectId],
        written: &mut Written,
        cancel: &AtomicBool,
    ) -> Result<Vec<(ObjectId, usize, u64, u64)>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let by_id: HashMap<ObjectId, &ObjectRow> = rows.iter().map(|r| (r.id, r)).collect();
        let mut compressor = zstd::bulk::Compressor::new(self.config.zstd_level)
            .map_err(io_err("create zstd compressor", "(memory)"))?;
        let mut w = PackWriter::create(&self.packs_dir())?;
        let mut out = Vec::with_capacity(ids.len());
        let mut expects = Vec::with_capacity(ids.len());
        for id in ids {
            check_cancel(cancel)?;
            let row = *by_id
                .get(id)
                .expect("re-based ids come from the catalog rows");
            let raw = self.read_packed(row)?;
            let (compression, payload) = pack::compress(&mut compressor, &raw);
            let h = pack::RecordHeader::for_payload(
                row.kind,
                compression,
                *id,
                raw.len() as u64,
                &payload,
            );
            let at = w.append(&h, &payload)?;
            out.push((*id, written.packs.len(), at, payload.len() as u64));
            expects.push(pack::Expect {
                id: *id,
                kind: row.kind,
                offset: at,
                raw_len: row.raw_len,
                stored_len: payload.len() as u64,
            });
        }
        w.sync()?;
        let name = w.name().to_string();
        let path = self.packs_dir().join(&name);
        let file = std::fs::File::open(&path).map_err(io_err("open pack file", &path))?;
        for e in &expects {
            pack::read_record(&file, &name, e)?;
        }
        written.packs.push(name);
        Ok(out)
    }
}

/// Packs gc rewrites: those holding dead records, and small ones (below
/// [`GC_SMALL_PACK`]) to be merged. A lone small pack with nothing dead in
/// it and nothing to merge with is left alone (rewriting it would change
/// nothing but its name).
pub(super) fn packs_to_rewrite(
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
/// What [`Ledger::record_gc`] writes to the catalog.
struct GcChanges<'a> {
    written: &'a Written,
    /// (object, index into `written.packs`, offset, stored length).
    rebased: &'a [(ObjectId, usize, u64, u64)],
    rerooted: &'a [super::reroot::Rerooted],
    dead: &'a [ObjectId],
    expired: &'a [i64],
    pruning: &'a HashMap<ObjectId, u64>,
    policy: &'a str,
    rewritten: &'a [i64],
}

pub(super) struct Written {
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
    pub(super) fn copy_live_records(
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
