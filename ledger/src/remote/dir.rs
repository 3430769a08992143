//! A remote that is another ledger directory on a reachable file system,
//! opened with the ledger's own API: received objects go through an
//! [`ImportPipeline`], as `bat serve` imports them; ref updates through
//! the catalog's compare-and-swap.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::transfer::{is_ancestor, BATCH_BYTES};
use super::{check_wire_ref_name, ImportPipeline, Remote, RemoteError, WireBody, WireObject};
use crate::catalog::Location;
use crate::error::Error;
use crate::id::{CommitId, ObjectId, TreeId};
use crate::object::Mode;
use crate::store::{Ledger, LEDGER_DIR, VERSION_FILE};

/// Another ledger directory used as a remote.
pub struct DirRemote {
    path: PathBuf,
    ledger: Ledger,
}

impl std::fmt::Debug for DirRemote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirRemote")
            .field("path", &self.path)
            .finish()
    }
}

impl DirRemote {
    /// Open the ledger at `path` (a directory holding `.bat`, or a `.bat`
    /// directory itself). Unlike discovery, parents are not searched.
    pub fn open(path: &Path) -> Result<DirRemote, RemoteError> {
        let dir = if path.join(LEDGER_DIR).join(VERSION_FILE).is_file() {
            path.join(LEDGER_DIR)
        } else if path.join(VERSION_FILE).is_file() {
            path.to_path_buf()
        } else {
            return Err(RemoteError::NotFound {
                url: path.display().to_string(),
                what: "no bat ledger in this directory".into(),
            });
        };
        let ledger = Ledger::open(&dir)?;
        Ok(DirRemote {
            path: path.to_path_buf(),
            ledger,
        })
    }

    /// The remote's ledger (for tests and private-area copies).
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// Check that `new` and everything it reaches is stored, stopping at
    /// commits some ref already points at (their closure is complete).
    fn check_closure(&self, new: CommitId) -> Result<(), RemoteError> {
        let l = &self.ledger;
        let missing = |id: ObjectId| RemoteError::MissingObject {
            url: self.url(),
            id,
        };
        let complete: HashSet<CommitId> = l.all_refs()?.into_iter().map(|(_, c)| c).collect();
        let promisor = l.promisor()?.is_some();
        let mut seen: HashSet<ObjectId> = HashSet::new();
        let mut commits = vec![new];
        let mut trees: Vec<ObjectId> = Vec::new();
        while let Some(c) = commits.pop() {
            if !seen.insert(c.0) || complete.contains(&c) {
                continue;
            }
            if !l.contains(&c.0)? {
                return Err(missing(c.0));
            }
            let k = l.read_commit(&c)?;
            commits.extend(k.parents);
            trees.push(k.tree.0);
            while let Some(t) = trees.pop() {
                if !seen.insert(t) {
                    continue;
                }
                if !l.contains(&t)? {
                    return Err(missing(t));
                }
                for e in l.read_tree(&TreeId(t))?.entries {
                    if e.mode == Mode::Tree {
                        trees.push(e.id);
                        continue;
                    }
                    if !seen.insert(e.id) {
                        continue;
                    }
                    match l.locate(&e.id)? {
                        None if promisor => {}
                        // Pruned (here, or marked absent by the sender):
                        // recorded, so fsck and reads say so.
                        None if l.pruned_file(&e.id)?.is_some() => {}
                        None => return Err(missing(e.id)),
                        Some(r) => {
                            if let Location::Chunked { list } = r.location {
                                if !l.contains(&list)? {
                                    return Err(missing(list));
                                }
                                for ch in l.read_chunk_list(&list)?.chunks {
                                    if !l.contains(&ch.id)? {
                                        return Err(missing(ch.id));
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

impl Remote for DirRemote {
    fn url(&self) -> String {
        self.path.display().to_string()
    }

    fn list_refs(&mut self) -> Result<Vec<(String, CommitId)>, RemoteError> {
        Ok(self.ledger.all_refs()?)
    }

    fn has(&mut self, ids: &[ObjectId]) -> Result<Vec<bool>, RemoteError> {
        ids.iter()
            .map(|i| self.ledger.contains(i).map_err(RemoteError::from))
            .collect()
    }

    fn get(
        &mut self,
        ids: &[ObjectId],
        sink: &mut dyn FnMut(WireObject) -> Result<(), RemoteError>,
    ) -> Result<(), RemoteError> {
        // Requested bases before requested deltas.
        let wanted: HashSet<ObjectId> = ids.iter().copied().collect();
        let mut sent: HashSet<ObjectId> = HashSet::new();
        for id in ids {
            let mut chain = vec![*id];
            let mut cur = *id;
            while let Some(b) = self.ledger.delta_base(&cur)? {
                if !wanted.contains(&b) || sent.contains(&b) || chain.len() > 64 {
                    break;
                }
                chain.push(b);
                cur = b;
            }
            for x in chain.into_iter().rev() {
                if !sent.insert(x) {
                    continue;
                }
                let o = self.ledger.export_wire_or_absent(&x).map_err(|e| match e {
                    Error::ObjectMissing { id } => RemoteError::MissingObject {
                        url: self.url(),
                        id,
                    },
                    e => e.into(),
                })?;
                sink(o)?;
            }
        }
        Ok(())
    }

    fn put(
        &mut self,
        objects: &mut dyn Iterator<Item = Result<WireObject, RemoteError>>,
    ) -> Result<(), RemoteError> {
        // As `bat serve` imports a push: one import per batch (a refused
        // batch stores nothing), each batch's pieces verified while the
        // batch before is written and fsynced, and chunked files checked
        // from their pieces as they were imported.
        let mut pipeline = ImportPipeline::new(self.ledger.dir());
        let mut batch = Vec::new();
        let mut bytes = 0u64;
        for o in objects {
            let o = o?;
            pipeline.note(&o)?;
            bytes += match &o.body {
                WireBody::Chunked { .. } => 0,
                _ => o.payload_len(),
            };
            batch.push(o);
            if bytes >= BATCH_BYTES {
                pipeline.import(std::mem::take(&mut batch))?;
                bytes = 0;
            }
        }
        pipeline.import(batch)?;
        pipeline.finish()?;
        Ok(())
    }

    fn update_ref(
        &mut self,
        name: &str,
        expected: Option<CommitId>,
        new: CommitId,
        force: bool,
    ) -> Result<(), RemoteError> {
        check_wire_ref_name(name)?;
        if name == "HEAD" {
            return Err(RemoteError::BadRefName {
                name: name.into(),
                reason: "HEAD cannot be pushed".into(),
            });
        }
        self.check_closure(new)?;
        let cur = self
            .ledger
            .all_refs()?
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, c)| c);
        if cur != expected {
            return Err(RemoteError::RefMoved { name: name.into() });
        }
        if let Some(c) = cur {
            if !force && !is_ancestor(&self.ledger, c, new)? {
                return Err(RemoteError::NonFastForward { name: name.into() });
            }
        }
        match self
            .ledger
            .update_ref(name, expected, Some(new), &format!("push: {new}"))
        {
            Ok(()) => Ok(()),
            Err(Error::BranchMoved { .. }) => Err(RemoteError::RefMoved { name: name.into() }),
            Err(e) => Err(e.into()),
        }
    }
}
