//! Recording a directory as a commit: scan and validate the directory,
//! stream every file through a bounded parallel pipeline (read + CDC +
//! whole-file hash on the calling thread; BLAKE3 + zstd on worker threads;
//! one pack writer thread), build trees, and commit in one transaction.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};

use rusqlite::{params, Connection};
use serde::Serialize;

use crate::catalog;
use crate::delta::{self, PieceKey};
use crate::error::{db_err, io_err, Error, Result};
use crate::id::{CommitId, ObjectId, TreeId};
use crate::object::{ChunkList, ChunkRef, Commit, FieldValue, Kind, Mode, Tree, TreeEntry};
use crate::pack::{self, RecordHeader};
use crate::progress::{check_cancel, Progress};
use crate::refs::{self, Head, HEADS};
use crate::store::{Ledger, Staging, LEDGER_DIR};

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
}

/// The scanned directory: a tree of nodes whose files get ids later.
enum Node {
    File { slot: usize, exec: bool },
    Symlink { target: Vec<u8> },
    Dir(Vec<(String, Node)>),
}

struct FileTask {
    path: PathBuf,
    size: u64,
    /// Modification time seen by the scan: a file whose length or mtime
    /// differs after reading changed while being recorded.
    mtime: Option<std::time::SystemTime>,
    /// Pieces of the same path in the parent commit (for delta storage).
    base: Option<BaseMap>,
}

/// Tensor piece -> (chunk id, length) of the base file.
type BaseMap = std::collections::HashMap<PieceKey, (ObjectId, u64)>;

fn scan(root: &Path, dir: &Path, files: &mut Vec<FileTask>) -> Result<Node> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let rd = std::fs::read_dir(dir).map_err(io_err("read directory", dir))?;
    let mut names = Vec::new();
    for e in rd {
        let e = e.map_err(io_err("read directory", dir))?;
        names.push(e.file_name());
    }
    names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    let mut out = Vec::with_capacity(names.len());
    for os in names {
        let path = dir.join(&os);
        let name = os.to_str().ok_or_else(|| Error::InvalidName {
            path: path.clone(),
            reason: "file name is not valid UTF-8".into(),
        })?;
        if name == LEDGER_DIR {
            continue; // a ledger inside the committed directory is never recorded
        }
        crate::object::validate_name(name).map_err(|reason| Error::InvalidName {
            path: path.clone(),
            reason,
        })?;
        let md = std::fs::symlink_metadata(&path).map_err(io_err("stat", &path))?;
        let ft = md.file_type();
        let node = if ft.is_symlink() {
            let target = std::fs::read_link(&path).map_err(io_err("read symlink", &path))?;
            check_symlink(root, &path, &target)?;
            Node::Symlink {
                target: target.as_os_str().as_bytes().to_vec(),
            }
        } else if ft.is_dir() {
            scan(root, &path, files)?
        } else if ft.is_file() {
            // Open now so unreadable files fail before anything is written.
            File::open(&path).map_err(io_err("open", &path))?;
            files.push(FileTask {
                path: path.clone(),
                size: md.len(),
                mtime: md.modified().ok(),
                base: None,
            });
            Node::File {
                slot: files.len() - 1,
                exec: md.permissions().mode() & 0o111 != 0,
            }
        } else {
            let kind = if ft.is_fifo() {
                "a FIFO"
            } else if ft.is_socket() {
                "a socket"
            } else if ft.is_block_device() || ft.is_char_device() {
                "a device"
            } else {
                "an unknown file type"
            };
            return Err(Error::UnsupportedFileType { path, kind });
        };
        out.push((name.to_string(), node));
    }
    Ok(Node::Dir(out))
}

/// Refuse absolute symlinks and relative ones that climb above `root`.
pub(crate) fn check_symlink(root: &Path, link: &Path, target: &Path) -> Result<()> {
    let escapes = || Error::SymlinkEscapes {
        path: link.to_path_buf(),
        target: target.display().to_string(),
    };
    if target.is_absolute() {
        return Err(escapes());
    }
    let rel_parent = link
        .parent()
        .and_then(|p| p.strip_prefix(root).ok())
        .ok_or_else(escapes)?;
    let mut depth: i64 = rel_parent
        .components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .count() as i64;
    for c in target.components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::ParentDir => {
                depth -= 1;
                if depth < 0 {
                    return Err(escapes());
                }
            }
            Component::CurDir => {}
            _ => return Err(escapes()),
        }
    }
    Ok(())
}

/// A unit of work for the hashing/compression workers.
struct Job {
    slot: usize,
    index: u32,
    /// For a tensor piece: element width and the base piece, if any.
    plan: Option<(u8, Option<ObjectId>)>,
    /// Shared with the whole-file hasher thread for large files.
    data: Arc<Vec<u8>>,
}

/// A worker's answer: the chunk (or small file) id and, if the catalog does
/// not have it yet, the ready-to-append record.
struct Done {
    slot: usize,
    index: u32,
    id: ObjectId,
    len: u64,
    record: Option<(RecordHeader, Vec<u8>, Option<ObjectId>)>,
}

/// Per-file result of the pipeline.
#[derive(Default, Clone)]
struct FileResult {
    /// Whole-file id for chunked files (computed while reading).
    whole: Option<ObjectId>,
    size: u64,
    chunks: Vec<(u32, ObjectId, u64)>,
}

struct WorkerCtx {
    conn: Connection,
    packs_dir: PathBuf,
    level: i32,
    max_depth: u32,
    cache: crate::store::PackCache,
}

/// The workers' shared job queue. `None` once the pipeline has failed: the
/// receiver is dropped so a reader blocked on a full queue wakes with an
/// error instead of waiting forever (a full disk made `bat commit` hang
/// holding the ledger lock).
type JobQueue = Mutex<Option<Receiver<Job>>>;

/// Drop the job receiver: every later or blocked `send` fails.
fn close_jobs(jobs: &JobQueue) {
    // A poisoned lock means a worker panicked; the scope re-raises that.
    if let Ok(mut rx) = jobs.lock() {
        rx.take();
    }
}

fn worker(mut cx: WorkerCtx, jobs: &JobQueue, done: SyncSender<Result<Done>>) {
    // Whatever way this worker ends, a failure must not leave the reader
    // blocked on a queue nobody drains.
    struct CloseOnError<'a>(&'a JobQueue, bool);
    impl Drop for CloseOnError<'_> {
        fn drop(&mut self) {
            if self.1 {
                close_jobs(self.0);
            }
        }
    }
    let mut guard = CloseOnError(jobs, true);
    worker_loop(&mut cx, jobs, &done, &mut guard.1);
}

/// The worker's loop; clears `failed` when it ends because the queue ran
/// dry normally.
fn worker_loop(
    cx: &mut WorkerCtx,
    jobs: &JobQueue,
    done: &SyncSender<Result<Done>>,
    failed: &mut bool,
) {
    let level = cx.level;
    let comps = zstd::bulk::Compressor::new(level)
        .and_then(|plain| Ok((plain, delta::planes_compressor(level)?)));
    let (mut comp, mut planes_comp) = match comps {
        Ok(c) => c,
        Err(e) => {
            let _ = done.send(Err(Error::InvalidInput {
                message: format!("zstd level {level}: {e}"),
            }));
            return;
        }
    };
    loop {
        let job = {
            let rx = jobs
                .lock()
                .expect("job queue lock poisoned only if a worker panicked");
            match rx.as_ref() {
                Some(rx) => rx.recv(),
                // Closed after a failure elsewhere: stop.
                None => return,
            }
        };
        let Ok(job) = job else {
            // The reader finished (or failed and dropped its sender).
            *failed = false;
            return;
        };
        let id = ObjectId::of_bytes(&job.data);
        let known = match catalog::has_object(&cx.conn, &id) {
            Ok(k) => k,
            Err(e) => {
                let _ = done.send(Err(e));
                return;
            }
        };
        let record = if known {
            None
        } else {
            match encode_job(cx, &mut comp, &mut planes_comp, &job, id) {
                Ok(r) => Some(r),
                Err(e) => {
                    let _ = done.send(Err(e));
                    return;
                }
            }
        };
        let d = Done {
            slot: job.slot,
            index: job.index,
            id,
            len: job.data.len() as u64,
            record,
        };
        if done.send(Ok(d)).is_err() {
            return;
        }
    }
}

/// What one delta link adds to its chain's cost, which is bounded by
/// `delta_max_depth`: one unit per tenth of the raw length its payload
/// stores, at least one. Decoding cost follows the bytes to inflate, so a
/// sparse fine-tuning delta (about 0.065 × raw) counts 1 and the limit is a
/// plain depth for such chains, while a dense delta (every element changed,
/// about 0.35 × raw) counts 4: it inflates every plane, almost what a
/// keyframe costs, and nine of them would make a restore ten keyframes' work.
pub(crate) fn link_cost(stored_len: u64, raw_len: u64) -> u32 {
    let units = stored_len
        .saturating_mul(10)
        .div_ceil(raw_len.max(1))
        .max(1);
    u32::try_from(units).unwrap_or(u32::MAX)
}

/// Compress one piece: plain zstd, or byte planes (a delta against its base
/// piece when the chain stays within the depth limit and the delta is the
/// smaller encoding).
fn encode_job(
    cx: &mut WorkerCtx,
    comp: &mut zstd::bulk::Compressor<'static>,
    planes_comp: &mut zstd::bulk::Compressor<'static>,
    job: &Job,
    id: ObjectId,
) -> Result<(RecordHeader, Vec<u8>, Option<ObjectId>)> {
    let raw_len = job.data.len() as u64;
    let Some((width, base)) = job.plan else {
        let (c, payload) = pack::compress(comp, &job.data);
        return Ok((
            RecordHeader::for_payload(Kind::Bytes, c, id, raw_len, &payload),
            payload,
            None,
        ));
    };
    let bad = |reason: String| Error::BadObject {
        id,
        kind: "tensor piece",
        reason,
    };
    let mut delta: Option<(Vec<u8>, ObjectId)> = None;
    if let Some(b) = base {
        if let Some(row) = catalog::get_object(&cx.conn, &b)?.and_then(|r| r.ok()) {
            let (conn, dir, cache) = (&cx.conn, &cx.packs_dir, &mut cx.cache);
            let chain = crate::store::resolve_chain(
                row,
                &mut |x| Ok(catalog::get_object(conn, x)?.and_then(|r| r.ok())),
                &mut |pid, x| crate::store::open_pack_with(conn, dir, cache, pid, x),
            )?;
            let chain_cost: u32 = chain
                .iter()
                .filter(|r| r.3.is_some())
                .map(|r| link_cost(r.2.stored_len, r.2.raw_len))
                .sum();
            if chain_cost < cx.max_depth {
                // The base is checked against its digest, so a delta never
                // depends on damaged bytes; a base that does not verify
                // just means this piece is stored whole (fsck reports the
                // damage).
                if let Ok(bytes) = crate::store::decode_chain(&chain) {
                    if bytes.len() == job.data.len() {
                        let p = delta::encode_planes(
                            planes_comp,
                            &job.data,
                            width.into(),
                            Some((&b, &bytes)),
                        )
                        .map_err(bad)?;
                        if chain_cost + link_cost(p.len() as u64, raw_len) <= cx.max_depth {
                            delta = Some((p, b));
                        }
                    }
                }
            }
        }
    }
    let small_enough = delta
        .as_ref()
        .is_some_and(|(p, _)| (p.len() as u64) * 2 <= raw_len);
    let (payload, base) = if small_enough {
        let (p, b) = delta.take().expect("checked");
        (p, Some(b))
    } else {
        let key = delta::encode_planes(planes_comp, &job.data, width.into(), None).map_err(bad)?;
        match delta {
            Some((p, b)) if p.len() < key.len() => (p, Some(b)),
            _ => (key, None),
        }
    };
    Ok((
        RecordHeader::for_payload(Kind::Bytes, pack::COMPRESSION_PLANES, id, raw_len, &payload),
        payload,
        base,
    ))
}

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

        let mut files = Vec::new();
        let root = scan(dir, dir, &mut files)?;
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
        self.finish_commit(staging, tree, logical, req, expected_tip)
    }

    /// Commit an already-stored tree (for callers that build trees
    /// themselves). `logical_bytes` is computed by walking it.
    pub fn commit_tree(&mut self, tree: TreeId, req: &CommitRequest) -> Result<CommitOutcome> {
        let expected = self.branch_tip_for(req)?;
        let files = self.walk_files(&tree)?;
        let logical = files.iter().map(|f| f.size).sum();
        let mut staging = Staging::new(self);
        let mut out = self.finish_commit(&mut staging, tree, logical, req, expected)?;
        out.files = files.len() as u64;
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
    fn attach_bases(&self, tip: CommitId, dir: &Path, files: &mut [FileTask]) -> Result<()> {
        let commit = self.read_commit(&tip)?;
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
        }
        Ok(())
    }

    fn base_map(&self, id: &ObjectId) -> Result<Option<BaseMap>> {
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
        let head = self.read_bytes(&first.id)?;
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
                m.insert(k, (c.id, p.len));
            }
        }
        Ok(Some(m))
    }

    fn branch_ref_for(&self, req: &CommitRequest) -> Result<String> {
        Ok(match &req.branch {
            Some(b) => format!("{HEADS}{b}"),
            None => match self.head()? {
                Head::Branch { name, .. } => name,
                Head::Detached { .. } => "HEAD".into(),
            },
        })
    }

    fn branch_tip_for(&self, req: &CommitRequest) -> Result<Option<CommitId>> {
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
                Ok((st.put(self, Kind::Tree, &tree.encode())?, 0))
            }
        }
    }

    fn run_pipeline(
        &self,
        files: &[FileTask],
        sink: &mut RecordSink<'_>,
        progress: &dyn Progress,
        cancel: &AtomicBool,
    ) -> Result<Vec<FileResult>> {
        // One worker more than cores: the reader, hasher and writer threads
        // spend part of their time blocked in I/O, and the spare worker keeps
        // both cores busy meanwhile.
        let threads = if self.config.threads == 0 {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2)
                + 1
        } else {
            self.config.threads
        };
        let cfg = self.config;
        // Deep enough queues to ride out a stalled read or write (a few tens of
        // MiB at most: every job is at most one max-size chunk).
        let (job_tx, job_rx) = sync_channel::<Job>(threads * 8);
        let (done_tx, done_rx) = sync_channel::<Result<Done>>(threads * 8);
        let job_rx: JobQueue = Mutex::new(Some(job_rx));
        let mut conns = Vec::new();
        for _ in 0..threads {
            conns.push(self.extra_connection()?);
        }
        let mut results: Vec<FileResult> = vec![FileResult::default(); files.len()];
        let (read_res, write_res) = std::thread::scope(|s| {
            for conn in conns {
                let done = done_tx.clone();
                let jr = &job_rx;
                let cx = WorkerCtx {
                    conn,
                    packs_dir: self.packs_dir(),
                    level: cfg.zstd_level,
                    max_depth: cfg.delta_max_depth,
                    cache: Default::default(),
                };
                s.spawn(move || worker(cx, jr, done));
            }
            drop(done_tx);
            let jq = &job_rx;
            let writer = s.spawn(move || -> Result<Vec<Done>> {
                let r = write_records(done_rx, &mut *sink, progress);
                if r.is_err() {
                    // Wake a reader blocked on the full job queue; the
                    // workers then find the queue closed and stop.
                    close_jobs(jq);
                }
                r
            });
            let read_res = read_files(files, &cfg, &job_tx, &mut results, cancel);
            drop(job_tx);
            let write_res = writer.join().expect("writer thread does not panic");
            (read_res, write_res)
        });
        // A writer error explains a reader's "pipeline stopped"; report it first.
        let pieces = write_res?;
        read_res?;
        for d in pieces {
            let r = &mut results[d.slot];
            r.chunks.push((d.index, d.id, d.len));
            if r.whole.is_none() {
                r.size = d.len;
            }
        }
        Ok(results)
    }

    /// Sync data, then in one IMMEDIATE transaction: write the commit object
    /// (parented on the tip seen inside the transaction), register pack and
    /// rows, index the commit, move the ref.
    fn finish_commit(
        &mut self,
        staging: &mut Staging,
        tree: TreeId,
        logical: u64,
        req: &CommitRequest,
        expected_tip: Option<CommitId>,
    ) -> Result<CommitOutcome> {
        staging.sync()?;
        let refname = self.branch_ref_for(req)?;
        let time = req.time.unwrap_or_else(refs::now);
        let this = &*self;
        // IMMEDIATE: the catalog write lock is held from the tip read to the
        // ref update, which makes the compare-and-swap atomic.
        let tx = ImmediateTx::begin(&this.db)?;
        let cur = if refname == "HEAD" {
            refs::read_head(&tx)?.commit()
        } else {
            refs::ref_target(&tx, &refname)?
        };
        if cur != expected_tip && req.on_moved == OnMoved::Fail {
            return Err(Error::BranchMoved {
                name: refname,
                expected: expected_tip
                    .map(|c| c.to_string())
                    .unwrap_or("(none)".into()),
                found: cur.map(|c| c.to_string()).unwrap_or("(none)".into()),
            });
        }
        let parent = match cur {
            Some(c) => Some(c),
            // A new branch forks from HEAD's commit.
            None if req.branch.is_some() && !req.orphan => refs::read_head(&tx)?.commit(),
            None => None,
        };
        let commit = Commit {
            tree,
            parents: parent.into_iter().collect(),
            author: req.author.clone(),
            time,
            message: req.message.clone(),
            metadata: req.metadata.clone(),
            fields: req.fields.clone(),
        };
        let enc = commit
            .encode()
            .map_err(|message| Error::InvalidInput { message })?;
        let cid = CommitId(staging.put(this, Kind::Commit, &enc)?);
        staging.sync()?;
        let pack_name = staging.pack.as_ref().map(|p| p.name().to_string());
        catalog::insert_staged(&tx, pack_name.as_deref(), &staging.rows)?;
        index_commit(&tx, &cid, &commit, logical)?;
        let first_line = req.message.lines().next().unwrap_or("");
        refs::cas(
            &tx,
            &refname,
            Some(cur),
            Some(cid),
            &format!("commit: {first_line}"),
        )?;
        tx.commit()?;
        let new_objects = staging.rows.len() as u64;
        let pack_bytes = staging.pack_len();
        Ok(CommitOutcome {
            commit: cid,
            tree,
            parents: commit.parents,
            refname,
            files: 0,
            logical_bytes: logical,
            new_objects,
            pack_bytes,
        })
    }
}

/// Add a commit to the catalog's commit index (idempotent).
pub(crate) fn index_commit(
    conn: &Connection,
    id: &CommitId,
    c: &Commit,
    logical: u64,
) -> Result<()> {
    let idb = id.0.as_bytes().as_slice();
    // A copy of small commits' bytes lets history listings stay in the
    // catalog (readers verify it against the id; FORMAT.md "Commit index").
    let body = c
        .encode()
        .ok()
        .filter(|b| b.len() <= crate::catalog::MAX_INDEXED_BODY);
    conn.prepare_cached(
        "INSERT OR IGNORE INTO commits(id, tree, time, author, message, logical_bytes, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .and_then(|mut st| {
        st.execute(params![idb, c.tree.0.as_bytes().as_slice(), c.time, c.author, c.message, logical as i64, body])
    })
    .map_err(db_err("indexing a commit"))?;
    for (i, p) in c.parents.iter().enumerate() {
        conn.execute(
            "INSERT OR IGNORE INTO commit_parents(commit_id, idx, parent) VALUES (?1, ?2, ?3)",
            params![idb, i as i64, p.0.as_bytes().as_slice()],
        )
        .map_err(db_err("indexing a commit"))?;
    }
    for (k, v) in &c.fields {
        let (ty, val): (&str, rusqlite::types::Value) = match v {
            FieldValue::Str(s) => ("str", s.clone().into()),
            FieldValue::Int(i) => ("int", (*i).into()),
            FieldValue::Float(f) => ("float", (*f).into()),
            FieldValue::Bool(b) => ("bool", i64::from(*b).into()),
        };
        conn.execute(
            "INSERT OR IGNORE INTO commit_fields(commit_id, key, type, value) VALUES (?1, ?2, ?3, ?4)",
            params![idb, k, ty, val],
        )
        .map_err(db_err("indexing a commit"))?;
    }
    Ok(())
}

/// The calling thread's part of the pipeline: read every file, cut large
/// ones with FastCDC over a reusable buffer (one copy per chunk into the job),
/// hash whole large files as they stream by, feed the workers.
fn read_files(
    files: &[FileTask],
    cfg: &crate::store::WriteConfig,
    jobs: &SyncSender<Job>,
    results: &mut [FileResult],
    cancel: &AtomicBool,
) -> Result<()> {
    let stopped = || Error::InvalidInput {
        message: "ingest pipeline stopped".into(),
    };
    let (mask_s, mask_l) = fastcdc::v2020::select_masks(
        cfg.chunk_avg as usize,
        fastcdc::v2020::Normalization::Level1,
    );
    let max = cfg.chunk_max as usize;
    let bufsize = (16 << 20).max(4 * max);
    let mut buf: Vec<u8> = Vec::new();
    for (slot, f) in files.iter().enumerate() {
        check_cancel(cancel)?;
        let mut file = File::open(&f.path).map_err(io_err("open", &f.path))?;
        if f.size <= cfg.chunk_threshold {
            let mut data = Vec::with_capacity(f.size as usize);
            (&mut file)
                .take(cfg.chunk_threshold + 1)
                .read_to_end(&mut data)
                .map_err(io_err("read", &f.path))?;
            if data.len() as u64 > cfg.chunk_threshold {
                return Err(Error::InvalidInput {
                    message: format!("{} grew while being recorded", f.path.display()),
                });
            }
            check_unchanged(&file, f, data.len() as u64)?;
            jobs.send(Job {
                slot,
                index: 0,
                plan: None,
                data: Arc::new(data),
            })
            .map_err(|_| stopped())?;
            continue;
        }
        if cfg.delta {
            if let Some(pcs) = tensor_pieces(&mut file, f)? {
                let (whole, size) = send_pieces(&mut file, f, slot, &pcs, jobs, cancel)?;
                check_unchanged(&file, f, size)?;
                results[slot].whole = Some(whole);
                results[slot].size = size;
                continue;
            }
        }
        if buf.len() != bufsize {
            buf = vec![0u8; bufsize];
        }
        // The whole-file digest runs on its own thread over the same chunk
        // buffers, in order, so the reader only reads and cuts.
        let (htx, hrx) = sync_channel::<Arc<Vec<u8>>>(32);
        let (whole, size) = std::thread::scope(|s| -> Result<(ObjectId, u64)> {
            let hasher = s.spawn(move || {
                let mut h = blake3::Hasher::new();
                for block in hrx {
                    h.update(&block);
                }
                ObjectId(*h.finalize().as_bytes())
            });
            let mut cut_file = || -> Result<u64> {
                let (mut start, mut end, mut eof) = (0usize, 0usize, false);
                let mut index = 0u32;
                let mut size = 0u64;
                loop {
                    if !eof && end - start < max {
                        buf.copy_within(start..end, 0);
                        end -= start;
                        start = 0;
                        while end < buf.len() {
                            let n = file
                                .read(&mut buf[end..])
                                .map_err(io_err("read", &f.path))?;
                            if n == 0 {
                                eof = true;
                                break;
                            }
                            end += n;
                        }
                    }
                    if start == end {
                        break;
                    }
                    let (_, cut) = fastcdc::v2020::cut(
                        &buf[start..end],
                        cfg.chunk_min as usize,
                        cfg.chunk_avg as usize,
                        max,
                        mask_s,
                        mask_l,
                        mask_s << 1,
                        mask_l << 1,
                    );
                    let cut = cut.max(1).min(end - start);
                    check_cancel(cancel)?;
                    let data = Arc::new(buf[start..start + cut].to_vec());
                    htx.send(data.clone()).map_err(|_| stopped())?;
                    jobs.send(Job {
                        slot,
                        index,
                        plan: None,
                        data,
                    })
                    .map_err(|_| stopped())?;
                    index += 1;
                    size += cut as u64;
                    start += cut;
                }
                Ok(size)
            };
            let size = cut_file();
            drop(htx);
            let whole = hasher.join().expect("hasher thread does not panic");
            Ok((whole, size?))
        })?;
        check_unchanged(&file, f, size)?;
        results[slot].whole = Some(whole);
        results[slot].size = size;
    }
    Ok(())
}

/// Refuse a file that changed while it was read: what was recorded would
/// be a state that never existed on disk. `read` is how many bytes the
/// pipeline took.
fn check_unchanged(file: &File, f: &FileTask, read: u64) -> Result<()> {
    let md = file.metadata().map_err(io_err("stat", &f.path))?;
    let same_time = f.mtime.is_none() || md.modified().ok() == f.mtime;
    if read != f.size || md.len() != f.size || !same_time {
        return Err(Error::InvalidInput {
            message: format!(
                "{} changed while being recorded (commit it again once it is stable)",
                f.path.display()
            ),
        });
    }
    Ok(())
}

/// If `file` is a well-formed safetensors file, its pieces; the file
/// position is back at 0 afterwards either way.
fn tensor_pieces(file: &mut File, f: &FileTask) -> Result<Option<Vec<delta::Piece>>> {
    use std::io::{Seek, SeekFrom};
    let mut prefix = [0u8; 8];
    let r = file.read_exact(&mut prefix);
    let mut out = None;
    if r.is_ok() {
        if let Some(n) = delta::safetensors::header_len(&prefix, f.size) {
            let mut head = vec![0u8; 8 + n as usize];
            head[..8].copy_from_slice(&prefix);
            if file.read_exact(&mut head[8..]).is_ok() {
                out = delta::parse_layout(&head, f.size)
                    .map(|l| delta::pieces(&l, f.size, delta::MAX_PIECE));
            }
        }
    }
    file.seek(SeekFrom::Start(0))
        .map_err(io_err("seek", &f.path))?;
    Ok(out)
}

/// Stream a safetensors file piece by piece to the workers, hashing the
/// whole file on a helper thread. Returns (file id, size).
fn send_pieces(
    file: &mut File,
    f: &FileTask,
    slot: usize,
    pcs: &[delta::Piece],
    jobs: &SyncSender<Job>,
    cancel: &AtomicBool,
) -> Result<(ObjectId, u64)> {
    let stopped = || Error::InvalidInput {
        message: "ingest pipeline stopped".into(),
    };
    let (htx, hrx) = sync_channel::<Arc<Vec<u8>>>(32);
    std::thread::scope(|s| -> Result<(ObjectId, u64)> {
        let hasher = s.spawn(move || {
            let mut h = blake3::Hasher::new();
            for block in hrx {
                h.update(&block);
            }
            ObjectId(*h.finalize().as_bytes())
        });
        let mut send_all = || -> Result<u64> {
            let mut size = 0u64;
            for (index, p) in pcs.iter().enumerate() {
                check_cancel(cancel)?;
                let mut data = vec![0u8; p.len as usize];
                file.read_exact(&mut data)
                    .map_err(|e| Error::InvalidInput {
                        message: format!("{} changed while being recorded: {e}", f.path.display()),
                    })?;
                let data = Arc::new(data);
                htx.send(data.clone()).map_err(|_| stopped())?;
                let plan = p.key.as_ref().map(|k| {
                    let base = f
                        .base
                        .as_ref()
                        .and_then(|m| m.get(k))
                        .filter(|(_, len)| *len == p.len)
                        .map(|(id, _)| *id);
                    (p.width, base)
                });
                let index = u32::try_from(index).map_err(|_| Error::InvalidInput {
                    message: format!("{} has too many pieces", f.path.display()),
                })?;
                jobs.send(Job {
                    slot,
                    index,
                    plan,
                    data,
                })
                .map_err(|_| stopped())?;
                size += p.len;
            }
            Ok(size)
        };
        let size = send_all();
        drop(htx);
        let whole = hasher.join().expect("hasher thread does not panic");
        Ok((whole, size?))
    })
}

/// Where the pipeline's writer puts each new record (the staging pack; a
/// failing stand-in in tests).
type RecordSink<'a> = dyn FnMut(&RecordHeader, &[u8], Option<ObjectId>) -> Result<()> + Send + 'a;

/// The writer thread's loop: append every new record in arrival order.
fn write_records(
    done: Receiver<Result<Done>>,
    sink: &mut RecordSink<'_>,
    progress: &dyn Progress,
) -> Result<Vec<Done>> {
    let mut pieces = Vec::new();
    for d in done {
        let mut d = d?;
        if let Some((h, payload, base)) = d.record.take() {
            sink(&h, &payload, base)?;
        }
        progress.inc(d.len);
        pieces.push(d);
    }
    Ok(pieces)
}

/// A `BEGIN IMMEDIATE` transaction on a shared connection reference, rolled
/// back on drop unless committed.
pub(crate) struct ImmediateTx<'a> {
    conn: &'a Connection,
    done: bool,
}

impl<'a> ImmediateTx<'a> {
    pub(crate) fn begin(conn: &'a Connection) -> Result<Self> {
        conn.execute_batch("BEGIN IMMEDIATE")
            .map_err(db_err("starting a write transaction"))?;
        Ok(ImmediateTx { conn, done: false })
    }
    pub(crate) fn commit(mut self) -> Result<()> {
        self.conn
            .execute_batch("COMMIT")
            .map_err(db_err("committing a write transaction"))?;
        self.done = true;
        Ok(())
    }
}

impl std::ops::Deref for ImmediateTx<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl Drop for ImmediateTx<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::NoProgress;
    use std::sync::mpsc::channel;
    use std::time::Duration;

    /// Many distinct small files: far more jobs than the bounded queues
    /// hold, so a reader that is not woken on failure blocks for good.
    fn many_files(dir: &Path, n: usize) -> Vec<FileTask> {
        (0..n)
            .map(|i| {
                let path = dir.join(format!("f{i}"));
                let data: Vec<u8> = (0..4096u32)
                    .flat_map(|j| (j ^ i as u32).wrapping_mul(2654435761).to_le_bytes())
                    .collect();
                std::fs::write(&path, &data).expect("write test file");
                FileTask {
                    path,
                    size: data.len() as u64,
                    mtime: None,
                    base: None,
                }
            })
            .collect()
    }

    /// Run the pipeline with a sink that fails (like a full disk) after
    /// `ok_records` records; the result must arrive within seconds.
    fn pipeline_with_failing_sink(threads: usize, ok_records: usize) -> Result<Vec<FileResult>> {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut ledger = Ledger::init(&tmp.path().join("l")).expect("init");
        ledger.config.threads = threads;
        let src = tmp.path().join("src");
        std::fs::create_dir(&src).expect("mkdir");
        let files = many_files(&src, 300);
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut n = 0usize;
            let mut sink = |_: &RecordHeader, _: &[u8], _: Option<ObjectId>| {
                n += 1;
                if n > ok_records {
                    return Err(Error::Io {
                        op: "write",
                        path: PathBuf::from("pack"),
                        source: std::io::Error::from_raw_os_error(28),
                    });
                }
                Ok(())
            };
            let r = ledger.run_pipeline(&files, &mut sink, &NoProgress, &AtomicBool::new(false));
            let _ = tx.send(r);
        });
        rx.recv_timeout(Duration::from_secs(60))
            .expect("the pipeline ended (no deadlock after a writer failure)")
    }

    #[test]
    fn writer_failure_at_first_record_ends_the_pipeline() {
        for threads in [1, 3] {
            let r = pipeline_with_failing_sink(threads, 0);
            let e = r.err().expect("a failing writer fails the pipeline");
            assert!(e.to_string().contains("No space left"), "{e}");
        }
    }

    #[test]
    fn writer_failure_mid_stream_ends_the_pipeline() {
        for at in [1, 7, 40, 200] {
            let r = pipeline_with_failing_sink(2, at);
            let e = r.err().expect("a failing writer fails the pipeline");
            assert!(e.to_string().contains("No space left"), "{e}");
        }
    }
}
