//! The walk over everything reachable from refs and the reflog, shared by
//! fsck (which verifies as it walks) and gc (which keeps what it reaches).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicBool;

use crate::catalog::{self, Location};
use crate::error::{io_err, Error, Result};
use crate::id::{CommitId, ObjectId, TreeId};
use crate::object::Mode;
use crate::progress::{check_cancel, Progress};
use crate::store::Ledger;

use super::*;

impl Ledger {
    /// Every registered pack with its size on disk. A pack that is not there
    /// has no size; any other failure to stat it is an I/O error.
    pub(super) fn stat_packs(&self) -> Result<HashMap<i64, PackInfo>> {
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
    pub(super) fn walk_reachable(
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
    pub(super) fn walk_reachable_promised(
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
    pub(super) fn check_bytes(
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
            let n = self.read_stored_bytes_to(id, &mut std::io::sink(), cancel)?;
            progress.inc(n);
        }
        Ok(())
    }

    /// Mark the delta bases of `id` (transitively) reachable.
    pub(super) fn mark_bases(&self, id: &ObjectId, seen: &mut HashSet<ObjectId>) -> Result<()> {
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
}
