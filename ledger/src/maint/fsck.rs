//! fsck: verify every reachable object and every pack record.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use rayon::prelude::*;

use crate::catalog::{self, Location, ObjectRow};
use crate::error::{db_err, io_err, Result};
use crate::id::ObjectId;
use crate::object::Kind;
use crate::pack::{self, RecordHeader, PACK_HEADER_LEN, RECORD_HEADER_LEN};
use crate::progress::{check_cancel, Progress};
use crate::store::Ledger;

use super::*;

impl Ledger {
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

    pub(super) fn fsck_snapshot(
        &self,
        progress: &dyn Progress,
        cancel: &AtomicBool,
    ) -> Result<FsckReport> {
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
        let spec = super::reach::WalkSpec::everything(self)?;
        let walked = self.walk_with(&spec, true, &mut problems, progress, cancel)?;
        let (reach, ncommits) = (walked.seen, walked.commits);
        rep.problems.extend(problems);
        rep.promised_files = walked.promised;
        rep.pruned_files = walked.pruned.len() as u64;
        rep.promisor = self.promisor()?.map(|r| r.name);
        rep.commits_reachable = ncommits;
        rep.objects_verified = reach.len() as u64;

        // 3. Refs and the commit index.
        self.check_refs_and_index(&mut rep, &ids, &good, &reach)?;
        Ok(rep)
    }

    /// fsck step 3: every ref names a stored commit, the commit index names
    /// only stored commits, and every reachable commit is indexed.
    fn check_refs_and_index(
        &self,
        rep: &mut FsckReport,
        ids: &HashSet<ObjectId>,
        good: &[ObjectRow],
        reach: &HashSet<ObjectId>,
    ) -> Result<()> {
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
        Ok(())
    }
}

/// fsck of one pack: its header and every catalog row in it. `Err` only for
/// failures of the machine (I/O, descriptors), never for damage.
pub(super) fn check_pack(
    packs_dir: &Path,
    info: &PackInfo,
    rows: &[&ObjectRow],
) -> Result<Vec<Problem>> {
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
pub(super) fn check_record(
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
