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

    /// Walk what `spec` says is reachable. Files a partial clone's promisor
    /// keeps and files a retention gc pruned are counted, not problems;
    /// files in `spec.prune` are counted and not entered.
    pub(super) fn walk_with(
        &self,
        spec: &WalkSpec<'_>,
        verify: bool,
        problems: &mut Vec<Problem>,
        progress: &dyn Progress,
        cancel: &AtomicBool,
    ) -> Result<WalkOut> {
        let partial = self.promisor()?.is_some();
        let mut out = WalkOut::default();
        let seen = &mut out.seen;
        let mut commits: Vec<(String, CommitId)> = spec.roots.clone();
        let mut trees: Vec<(String, TreeId)> = Vec::new();
        progress.start("verifying reachable objects", None);
        while let Some((from, c)) = commits.pop() {
            check_cancel(cancel)?;
            if !seen.insert(c.0) {
                continue;
            }
            match self.read_commit(&c) {
                Ok(commit) => {
                    out.commits += 1;
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
                    if spec.prune.contains(&e.id) {
                        out.pruning.insert(e.id, e.size);
                        continue;
                    }
                    if !seen.insert(e.id) {
                        continue;
                    }
                    if let Err(err) =
                        self.check_bytes(&e.id, e.size, verify, spec.bases, seen, progress, cancel)
                    {
                        if err.is_environmental() {
                            return Err(err);
                        }
                        if let Error::Pruned { id, .. } = err {
                            if id == e.id {
                                out.pruned.insert(e.id);
                                continue;
                            }
                        }
                        if partial && matches!(err, Error::ObjectMissing { id } if id == e.id) {
                            out.promised += 1;
                            continue;
                        }
                        problems.push(problem_of(&err, &format!("file {:?} in tree {t}", e.name)));
                    }
                }
            }
        }
        progress.finish();
        Ok(out)
    }

    /// Mark a bytes object's storage reachable; with `verify`, read it all.
    // One flag per caller need (verify, mark bases) beside the walk's
    // shared state; a struct for two booleans would hide nothing.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn check_bytes(
        &self,
        id: &ObjectId,
        size: u64,
        verify: bool,
        bases: bool,
        seen: &mut HashSet<ObjectId>,
        progress: &dyn Progress,
        cancel: &AtomicBool,
    ) -> Result<()> {
        let Some(row) = self.locate(id)? else {
            return Err(self.missing(id));
        };
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
                if bases {
                    self.mark_bases(&c.id, seen)?;
                }
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

/// What a reachability walk starts from and leaves out.
pub(super) struct WalkSpec<'a> {
    /// Root commits, with where each was found (for messages).
    pub(super) roots: Vec<(String, CommitId)>,
    /// File objects to leave out (a retention gc's prune set).
    pub(super) prune: &'a HashSet<ObjectId>,
    /// Mark delta bases reachable while walking (gc with a prune set marks
    /// them afterwards, deciding which chains to re-base).
    pub(super) bases: bool,
}

static NO_PRUNE: std::sync::LazyLock<HashSet<ObjectId>> = std::sync::LazyLock::new(HashSet::new);

impl WalkSpec<'static> {
    /// Every ref and reflog entry, nothing left out.
    pub(super) fn everything(l: &Ledger) -> Result<WalkSpec<'static>> {
        Ok(WalkSpec {
            roots: l.root_commits()?,
            prune: &NO_PRUNE,
            bases: true,
        })
    }
}

/// What a walk found.
#[derive(Default)]
pub(super) struct WalkOut {
    /// Reachable objects (stored or not).
    pub(super) seen: HashSet<ObjectId>,
    /// Reachable commits read.
    pub(super) commits: u64,
    /// Files a partial clone's promisor keeps.
    pub(super) promised: u64,
    /// Files pruned by an earlier retention gc.
    pub(super) pruned: HashSet<ObjectId>,
    /// Files of the spec's prune set met in trees, with their sizes.
    pub(super) pruning: HashMap<ObjectId, u64>,
}
