//! Recording a directory as a commit: scan and validate the directory,
//! stream every file through a bounded parallel pipeline (read + CDC +
//! whole-file hash on the calling thread; BLAKE3 + zstd on worker threads;
//! one pack writer thread), build trees, and commit in one transaction.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use serde::Serialize;

use crate::catalog;
use crate::delta::{self, PieceKey};
use crate::error::{io_err, Error, Result};
use crate::id::{CommitId, ObjectId, TreeId};
use crate::object::{ChunkList, ChunkRef, Commit, FieldValue, Kind, Mode, Tree, TreeEntry};
use crate::pack::RecordHeader;
use crate::progress::{check_cancel, Progress};
use crate::refs::{self, Head, HEADS};
use crate::store::{Ledger, Staging};

mod hints;
mod index;
mod pipeline;
mod scan;

pub(crate) use index::index_commit;
pub(crate) use pipeline::{chain_cost, choose_planes, link_cost};
use scan::{scan, Node, ScannedFile};

/// What to do when the target branch moved between the start of a commit
/// and its catalog transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnMoved {
    /// Re-parent onto the new tip (the tree does not depend on the parent).
    Reparent,
    /// Fail with a "branch moved" error.
    Fail,
}

/// Everything about a commit except its tree.
#[derive(Debug, Clone)]
pub struct CommitRequest {
    /// The message.
    pub message: String,
    /// Author (free text).
    pub author: String,
    /// Seconds since the epoch; `None` = now.
    pub time: Option<i64>,
    /// Opaque metadata.
    pub metadata: serde_json::Value,
    /// Indexed scalar fields.
    pub fields: BTreeMap<String, FieldValue>,
    /// Target branch short name; `None` = where HEAD points. A branch that
    /// does not exist is created, forking from HEAD's commit.
    pub branch: Option<String>,
    /// Concurrency policy.
    pub on_moved: OnMoved,
    /// Commit whose files are the delta bases of large safetensors files
    /// (same path); `None` = the branch tip the commit is parented on.
    pub delta_base: Option<CommitId>,
    /// When `branch` does not exist yet: start it with a root commit (no
    /// parent) instead of forking from HEAD's commit.
    pub orphan: bool,
    /// Further refs that move to the new commit in the same catalog
    /// transaction as the branch (a caller's pointer that follows it, such
    /// as a promotion ref): the commit and every move happen together or
    /// not at all.
    pub also_move: Vec<RefMove>,
}

/// A ref moved to the new commit together with its branch (see
/// [`CommitRequest::also_move`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefMove {
    /// The full ref name (`refs/<namespace>/<name>`).
    pub name: String,
    /// Where it must point now (`None`: it must not exist); otherwise the
    /// commit fails with [`Error::BranchMoved`] and nothing is recorded.
    pub expected: Option<CommitId>,
    /// The reflog message.
    pub message: String,
}

impl CommitRequest {
    /// A request with just a message (author "unknown", no metadata).
    pub fn new(message: impl Into<String>) -> Self {
        CommitRequest {
            message: message.into(),
            author: "unknown".into(),
            time: None,
            metadata: serde_json::Value::Null,
            fields: BTreeMap::new(),
            branch: None,
            on_moved: OnMoved::Reparent,
            delta_base: None,
            orphan: false,
            also_move: Vec::new(),
        }
    }
}

/// Result of a commit.
#[derive(Debug, Clone, Serialize)]
pub struct CommitOutcome {
    /// The new commit.
    pub commit: CommitId,
    /// Its tree.
    pub tree: TreeId,
    /// Its parents.
    pub parents: Vec<CommitId>,
    /// The ref that was moved (full name or `HEAD`).
    #[serde(rename = "ref")]
    pub refname: String,
    /// Regular files recorded.
    pub files: u64,
    /// Sum of their sizes.
    pub logical_bytes: u64,
    /// New objects added to the catalog by this commit.
    pub new_objects: u64,
    /// Bytes appended to the new pack segment.
    pub pack_bytes: u64,
    /// Delta base pieces read from the files an earlier commit recorded
    /// (still in place, each checked against its id) instead of decoded
    /// from their chains (`WriteConfig::reuse_base_files`).
    pub base_pieces_from_files: u64,
}

pub(super) struct FileTask {
    path: PathBuf,
    size: u64,
    /// Modification time seen by the scan: a file whose length or mtime
    /// differs after reading changed while being recorded.
    mtime: Option<std::time::SystemTime>,
    /// Pieces of the same path in the parent commit (for delta storage).
    base: Option<BaseMap>,
    /// Where that base file can still be read ([`hints`]).
    base_file: Option<std::sync::Arc<PathBuf>>,
}

impl From<ScannedFile> for FileTask {
    fn from(f: ScannedFile) -> FileTask {
        FileTask {
            path: f.path,
            size: f.size,
            mtime: f.mtime,
            base: None,
            base_file: None,
        }
    }
}

/// A tensor piece of a base file.
#[derive(Clone, Copy)]
pub(super) struct BasePiece {
    /// Its chunk id.
    id: ObjectId,
    /// Its length.
    len: u64,
    /// Its offset in the file.
    start: u64,
}

/// Tensor piece -> its piece in the base file.
pub(super) type BaseMap = std::collections::HashMap<PieceKey, BasePiece>;

impl Ledger {
    /// Record directory `dir` as a new commit. Nothing is referenced by the
    /// catalog until all data is durable; a failure or kill at any point
    /// leaves the ledger as it was (plus unreferenced garbage for gc).
    pub fn commit_dir(
        &mut self,
        dir: &Path,
        req: &CommitRequest,
        progress: &dyn Progress,
        cancel: &AtomicBool,
    ) -> Result<CommitOutcome> {
        let md = std::fs::metadata(dir).map_err(io_err("stat", dir))?;
        if !md.is_dir() {
            return Err(Error::WrongKind {
                path: dir.display().to_string(),
                what: "not a directory",
            });
        }
        if let Some(b) = &req.branch {
            refs::validate_ref_name(b)?;
        }
        for m in &req.also_move {
            refs::validate_full_ref_name(&m.name)?;
        }
        // Fail on bad metadata before reading gigabytes.
        let probe = Commit {
            tree: TreeId(ObjectId([0; 32])),
            parents: vec![],
            author: req.author.clone(),
            time: 0,
            message: req.message.clone(),
            metadata: req.metadata.clone(),
            fields: req.fields.clone(),
        };
        probe
            .encode()
            .map_err(|message| Error::InvalidInput { message })?;
        let expected_tip = self.branch_tip_for(req)?;

        let mut scanned = Vec::new();
        let root = scan(dir, dir, &mut scanned)?;
        let mut files: Vec<FileTask> = scanned.into_iter().map(FileTask::from).collect();
        if self.config.delta {
            if let Some(base) = req.delta_base.or(expected_tip) {
                self.attach_bases(base, dir, &mut files)?;
            }
        }
        let total: u64 = files.iter().map(|f| f.size).sum();
        let mut staging = Staging::new(self);
        progress.start("recording", Some(total));
        let out = self.record_files(
            root,
            &files,
            req,
            expected_tip,
            &mut staging,
            progress,
            cancel,
        );
        if out.is_err() {
            // Remove the unreferenced segment now: after a full disk, the
            // space it holds is what the next attempt needs.
            // Unless the catalog registered it after all (a failure
            // reported after the transaction committed).
            if let Some(p) = staging.pack.take() {
                let registered = catalog::packs(&self.db)
                    .map(|ps| ps.iter().any(|(_, n)| n == p.name()))
                    .unwrap_or(true);
                if !registered {
                    let _ = p.discard();
                }
            }
        }
        let mut out = out?;
        out.files = files.len() as u64;
        Ok(out)
    }

    /// The pipeline, trees and the catalog transaction of
    /// [`Ledger::commit_dir`], writing into `staging`.
    #[allow(clippy::too_many_arguments)]
    fn record_files(
        &mut self,
        root: Node,
        files: &[FileTask],
        req: &CommitRequest,
        expected_tip: Option<CommitId>,
        staging: &mut Staging,
        progress: &dyn Progress,
        cancel: &AtomicBool,
    ) -> Result<CommitOutcome> {
        let results = {
            let mut sink = |h: &RecordHeader, payload: &[u8], base: Option<ObjectId>| {
                staging.append_record_with_base(h, payload, base)
            };
            self.run_pipeline(files, &mut sink, progress, cancel)?
        };
        progress.finish();
        check_cancel(cancel)?;

        // Chunk lists for large files, then trees bottom-up.
        let mut ids = Vec::with_capacity(files.len());
        let from_files = results.iter().map(|r| r.bases_from_file).sum();
        for r in results.into_iter() {
            match r.whole {
                None => {
                    let (_, id, _) = r
                        .chunks
                        .first()
                        .copied()
                        .expect("a small file has exactly one piece");
                    ids.push((id, r.size));
                }
                Some(whole) => {
                    let mut chunks = r.chunks;
                    chunks.sort_by_key(|c| c.0);
                    if !(staging.seen.contains(&whole) || self.contains(&whole)?) {
                        let list = ChunkList {
                            file: whole,
                            total: r.size,
                            chunks: chunks
                                .iter()
                                .map(|&(_, id, len)| ChunkRef {
                                    id,
                                    len: len as u32,
                                })
                                .collect(),
                        };
                        let lid = staging.put(self, Kind::ChunkList, &list.encode())?;
                        staging.put_chunked(whole, r.size, lid);
                    }
                    ids.push((whole, r.size));
                }
            }
        }
        let (tree, _) = self.build_tree(root, &ids, staging)?;
        let tree = TreeId(tree);
        let logical: u64 = ids.iter().map(|x| x.1).sum();
        let mut out = self.finish_commit(staging, tree, logical, req, expected_tip)?;
        out.base_pieces_from_files = from_files;
        self.remember_sources(files, &ids);
        Ok(out)
    }

    /// Commit an already-stored tree (for callers that build trees
    /// themselves). `logical_bytes` is computed by walking it. Like git's
    /// `commit-tree`, this records the tree as built: the import policy
    /// ([`crate::policy`]) is not asked here; checkout, push and every
    /// import still refuse a tree that breaks it.
    pub fn commit_tree(&mut self, tree: TreeId, req: &CommitRequest) -> Result<CommitOutcome> {
        for m in &req.also_move {
            refs::validate_full_ref_name(&m.name)?;
        }
        let expected = self.branch_tip_for(req)?;
        let (files, logical) = self.tree_totals(&tree)?;
        let mut staging = Staging::new(self);
        let mut out = self.finish_commit(&mut staging, tree, logical, req, expected)?;
        out.files = files;
        Ok(out)
    }

    /// Store caller-built objects in one go: `blobs` as bytes objects (each
    /// one record, so keep them small; use `commit_dir` for large files),
    /// then `trees` in order (entries may reference the blobs or earlier
    /// trees). Returns the ids of all blobs, then of all trees. Durable and
    /// catalogued on return, but unreachable (and collectable by gc) until a
    /// commit made with [`Ledger::commit_tree`] references them.
    pub fn write_objects(&mut self, blobs: &[&[u8]], trees: &[Tree]) -> Result<Vec<ObjectId>> {
        let mut st = Staging::new(self);
        let mut ids = Vec::new();
        for b in blobs {
            ids.push(st.put(self, Kind::Bytes, b)?);
        }
        for t in trees {
            ids.push(st.put(self, Kind::Tree, &t.encode())?);
        }
        st.sync()?;
        let name = st.pack.as_ref().map(|p| p.name().to_string());
        let rows = std::mem::take(&mut st.rows);
        self.write_tx(|c| catalog::insert_staged(c, name.as_deref(), &rows))?;
        Ok(ids)
    }

    /// For every large file whose path exists in commit `tip` as a
    /// tensor-cut safetensors file, map its base pieces. Anything unusable
    /// (other storage, unreadable, different cut) just means "no base".
    pub(super) fn attach_bases(
        &self,
        tip: CommitId,
        dir: &Path,
        files: &mut [FileTask],
    ) -> Result<()> {
        let commit = self.read_commit(&tip)?;
        let sources = if self.config.reuse_base_files {
            hints::Sources::load(&self.dir)
        } else {
            hints::Sources::default()
        };
        let entries: std::collections::HashMap<String, crate::read::FileEntry> = self
            .walk_files(&commit.tree)?
            .into_iter()
            .map(|e| (e.path.clone(), e))
            .collect();
        for f in files.iter_mut() {
            if f.size <= self.config.chunk_threshold {
                continue;
            }
            let Some(rel) = f
                .path
                .strip_prefix(dir)
                .ok()
                .and_then(|p| p.to_str())
                .map(|p| p.replace(std::path::MAIN_SEPARATOR, "/"))
            else {
                continue;
            };
            let Some(e) = entries.get(&rel) else {
                continue;
            };
            f.base = self.base_map(&e.id).ok().flatten();
            if f.base.is_some() {
                f.base_file = sources.locate(&e.id).map(std::sync::Arc::new);
            }
        }
        Ok(())
    }

    /// Tell later commits where recorded files can be read: `(id, path)`
    /// pairs, e.g. the originals of files committed through a folder of
    /// hard links that is gone afterwards. Only large files are kept, and
    /// only as hints (each path's stat now; each piece's BLAKE3 when a
    /// commit uses it, `WriteConfig::reuse_base_files`). Best effort: a
    /// failure loses the hints, nothing else.
    pub fn remember_file_sources(&self, files: &[(ObjectId, PathBuf)]) {
        self.remember(files.iter().filter_map(|(id, path)| {
            let md = std::fs::metadata(path).ok()?;
            Some((*id, path.as_path(), md.len(), md.modified().ok()))
        }));
    }

    /// Remember where this commit read its large files, for the next
    /// commit's delta bases ([`hints`]), if they still have the length and
    /// modification time the commit saw.
    fn remember_sources(&self, files: &[FileTask], ids: &[(ObjectId, u64)]) {
        self.remember(
            files
                .iter()
                .zip(ids)
                .map(|(f, (id, _))| (*id, f.path.as_path(), f.size, f.mtime)),
        );
    }

    /// Delete the temporary hint files a killed commit left behind. Only
    /// under the exclusive lock (gc), when no commit can be writing one.
    pub(crate) fn remove_stale_source_temps(&self) -> u64 {
        hints::remove_temps(&self.dir)
    }

    /// Add the large files of `(id, path, length, mtime)` to the hints.
    fn remember<'a>(
        &self,
        files: impl Iterator<Item = (ObjectId, &'a Path, u64, Option<std::time::SystemTime>)>,
    ) {
        if !self.config.reuse_base_files || !self.config.delta {
            return;
        }
        let mut large = files
            .filter(|(_, _, len, _)| *len > self.config.chunk_threshold)
            .peekable();
        if large.peek().is_none() {
            return;
        }
        let mut sources = hints::Sources::load(&self.dir);
        for (id, path, len, mtime) in large {
            if let Ok(abs) = std::path::absolute(path) {
                sources.remember(&id, &abs, len, mtime);
            }
        }
        sources.save(&self.dir);
    }

    pub(super) fn base_map(&self, id: &ObjectId) -> Result<Option<BaseMap>> {
        let Some(row) = self.locate(id)? else {
            return Ok(None);
        };
        let crate::catalog::Location::Chunked { list } = row.location else {
            return Ok(None);
        };
        let cl = self.read_chunk_list(&list)?;
        let Some(first) = cl.chunks.first() else {
            return Ok(None);
        };
        let mut head = Vec::new();
        self.read_stored_bytes_to(&first.id, &mut head, &AtomicBool::new(false))?;
        let Some(layout) = delta::parse_layout(&head, cl.total) else {
            return Ok(None);
        };
        let pcs = delta::pieces(&layout, cl.total, delta::MAX_PIECE);
        if pcs.len() != cl.chunks.len()
            || pcs
                .iter()
                .zip(&cl.chunks)
                .any(|(p, c)| p.len != u64::from(c.len))
        {
            return Ok(None);
        }
        let mut m = BaseMap::new();
        for (p, c) in pcs.into_iter().zip(&cl.chunks) {
            if let Some(k) = p.key {
                m.insert(
                    k,
                    BasePiece {
                        id: c.id,
                        len: p.len,
                        start: p.start,
                    },
                );
            }
        }
        Ok(Some(m))
    }

    pub(super) fn branch_ref_for(&self, req: &CommitRequest) -> Result<String> {
        Ok(match &req.branch {
            Some(b) => format!("{HEADS}{b}"),
            None => match self.head()? {
                Head::Branch { name, .. } => name,
                Head::Detached { .. } => "HEAD".into(),
            },
        })
    }

    pub(super) fn branch_tip_for(&self, req: &CommitRequest) -> Result<Option<CommitId>> {
        let name = self.branch_ref_for(req)?;
        if name == "HEAD" {
            Ok(self.head()?.commit())
        } else {
            refs::ref_target(&self.db, &name)
        }
    }

    fn build_tree(
        &self,
        node: Node,
        ids: &[(ObjectId, u64)],
        st: &mut Staging,
    ) -> Result<(ObjectId, u64)> {
        match node {
            Node::File { slot, .. } => Ok(ids[slot]),
            Node::Symlink { target } => {
                Ok((st.put(self, Kind::Bytes, &target)?, target.len() as u64))
            }
            Node::Dir(children) => {
                let mut entries = Vec::with_capacity(children.len());
                for (name, child) in children {
                    let mode = match &child {
                        Node::File { exec: true, .. } => Mode::Executable,
                        Node::File { .. } => Mode::File,
                        Node::Symlink { .. } => Mode::Symlink,
                        Node::Dir(_) => Mode::Tree,
                    };
                    let (id, size) = self.build_tree(child, ids, st)?;
                    let size = if mode == Mode::Tree { 0 } else { size };
                    entries.push(TreeEntry {
                        name,
                        mode,
                        id,
                        size,
                    });
                }
                let tree = Tree::new(entries).map_err(|message| Error::InvalidInput { message })?;
                // Nothing is recorded that checkout or an import would
                // refuse (crate::policy: names, entries, case collisions).
                let bytes = tree.encode();
                let id = Kind::Tree.id_of(&bytes);
                crate::policy::check_local(id, &tree, "", &crate::policy::Limits::default())?;
                Ok((st.put(self, Kind::Tree, &bytes)?, 0))
            }
        }
    }
}
