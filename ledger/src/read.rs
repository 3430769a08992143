//! Reading history back: walking trees, path lookup, log, checkout.

use std::collections::{BinaryHeap, HashMap, HashSet};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Component, Path};
use std::sync::atomic::AtomicBool;

use serde::Serialize;

use crate::error::{io_err, Error, Result};
use crate::id::{CommitId, ObjectId, TreeId};
use crate::object::{Commit, Mode, RawCommit, TreeEntry};
use crate::progress::{check_cancel, Progress};
use crate::store::Ledger;

/// A file (or symlink) found by walking a tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileEntry {
    /// Path relative to the tree root, `/`-separated.
    pub path: String,
    /// Mode (file, executable or symlink).
    pub mode: Mode,
    /// Bytes id (BLAKE3 of the file's bytes, or of the symlink target).
    pub id: ObjectId,
    /// Size in bytes.
    pub size: u64,
}

impl FileEntry {
    /// The tree entry this file stands for (its name is the last path
    /// component), as a path filter sees it.
    pub fn tree_entry(&self) -> TreeEntry {
        TreeEntry {
            name: self.path.rsplit('/').next().unwrap_or("").to_string(),
            mode: self.mode,
            id: self.id,
            size: self.size,
        }
    }
}

/// Result of a checkout.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CheckoutStats {
    /// Regular files written.
    pub files: u64,
    /// Symlinks created.
    pub symlinks: u64,
    /// Directories created.
    pub dirs: u64,
    /// Bytes written.
    pub bytes: u64,
}

impl Ledger {
    /// Every non-directory entry below `tree`, in path order. The walk
    /// keeps its own stack, so no stored tree can overflow the thread's;
    /// a tree nested deeper than [`crate::policy::Limits::max_depth`] is
    /// refused ([`Error::TreeRefused`]) rather than listed.
    pub fn walk_files(&self, tree: &TreeId) -> Result<Vec<FileEntry>> {
        let max_depth = u64::from(crate::policy::Limits::default().max_depth);
        let mut out = Vec::new();
        // (the entries of one directory still to visit, its path)
        let mut stack: Vec<(std::vec::IntoIter<TreeEntry>, String)> =
            vec![(self.read_tree(tree)?.entries.into_iter(), String::new())];
        while let Some((entries, prefix)) = stack.last_mut() {
            let Some(e) = entries.next() else {
                stack.pop();
                continue;
            };
            let path = if prefix.is_empty() {
                e.name.clone()
            } else {
                format!("{prefix}/{}", e.name)
            };
            if e.mode == Mode::Tree {
                let sub = self.read_tree(&TreeId(e.id))?.entries;
                if !sub.is_empty() && stack.len() as u64 >= max_depth {
                    return Err(Error::TreeRefused {
                        id: e.id,
                        place: format!("at {}", crate::policy::shown(&path)),
                        rule: crate::policy::Rule::TooDeep {
                            depth: stack.len() as u64 + 1,
                            limit: max_depth as u32,
                        },
                    });
                }
                stack.push((sub.into_iter(), path));
            } else {
                out.push(FileEntry {
                    path,
                    mode: e.mode,
                    id: e.id,
                    size: e.size,
                });
            }
        }
        Ok(out)
    }

    /// How many non-directory entries lie below `tree` and the sum of
    /// their sizes, counted per path as [`Ledger::walk_files`] would list
    /// them, but from a summary per tree object (each read once, with an
    /// explicit stack) and without the depth limit: for bookkeeping of
    /// trees whatever their shape (saturating at `u64::MAX`).
    pub fn tree_totals(&self, tree: &TreeId) -> Result<(u64, u64)> {
        let mut done: HashMap<ObjectId, (u64, u64)> = HashMap::new();
        let mut stack: Vec<(ObjectId, Option<Vec<TreeEntry>>)> = vec![(tree.0, None)];
        while let Some((id, entries)) = stack.pop() {
            if done.contains_key(&id) {
                continue;
            }
            match entries {
                None => {
                    let t = self.read_tree(&TreeId(id))?;
                    let subs: Vec<ObjectId> = t
                        .entries
                        .iter()
                        .filter(|e| e.mode == Mode::Tree && !done.contains_key(&e.id))
                        .map(|e| e.id)
                        .collect();
                    stack.push((id, Some(t.entries)));
                    stack.extend(subs.into_iter().map(|s| (s, None)));
                }
                Some(entries) => {
                    let (mut n, mut bytes) = (0u64, 0u64);
                    for e in &entries {
                        let (en, eb) = if e.mode == Mode::Tree {
                            done[&e.id]
                        } else {
                            (1, e.size)
                        };
                        n = n.saturating_add(en);
                        bytes = bytes.saturating_add(eb);
                    }
                    done.insert(id, (n, bytes));
                }
            }
        }
        Ok(done[&tree.0])
    }

    /// Look up a `/`-separated path in a tree. The empty path (or "/") is the
    /// root, returned as a synthetic tree entry.
    pub fn lookup_path(&self, tree: &TreeId, path: &str) -> Result<Option<TreeEntry>> {
        let mut cur = TreeEntry {
            name: String::new(),
            mode: Mode::Tree,
            id: tree.0,
            size: 0,
        };
        for comp in path.split('/').filter(|c| !c.is_empty() && *c != ".") {
            if cur.mode != Mode::Tree {
                return Ok(None);
            }
            let t = self.read_tree(&TreeId(cur.id))?;
            match t.entries.into_iter().find(|e| e.name == comp) {
                Some(e) => cur = e,
                None => return Ok(None),
            }
        }
        Ok(Some(cur))
    }

    /// History from `start`, newest first (by time, then id), at most
    /// `limit`, collected. Prefer [`Ledger::history`], which streams.
    pub fn log(&self, start: CommitId, limit: Option<usize>) -> Result<Vec<(CommitId, Commit)>> {
        self.history(start, limit)?.collect()
    }

    /// History from `start`, newest first (by time, then id), at most
    /// `limit`, as an iterator that reads one commit at a time from the
    /// catalog's commit index (pack records only for commits too large to be
    /// indexed, or not indexed). It holds the commits queued to be shown
    /// (one on a linear history) and the ids already queued, never the
    /// commits already shown. The whole walk is one read transaction.
    pub fn history(&self, start: CommitId, limit: Option<usize>) -> Result<History<'_, Commit>> {
        History::new(self, &[start], limit)
    }

    /// [`Ledger::history`] with each commit's metadata left as its stored
    /// JSON text ([`RawCommit`]): for walks that print or filter the
    /// metadata of many commits.
    pub fn history_raw(
        &self,
        start: CommitId,
        limit: Option<usize>,
    ) -> Result<History<'_, RawCommit>> {
        History::new(self, &[start], limit)
    }

    /// [`Ledger::history_raw`] from several starts at once (`bat log --all`):
    /// one walk, newest first, each commit once however many starts reach it.
    pub fn history_raw_from(
        &self,
        starts: &[CommitId],
        limit: Option<usize>,
    ) -> Result<History<'_, RawCommit>> {
        History::new(self, starts, limit)
    }

    /// A commit, from the index copy of its bytes when there is one (checked
    /// against the id, so the index cannot make up history), else from its
    /// pack record.
    pub fn indexed_commit(&self, id: &CommitId) -> Result<Commit> {
        if let Some(Some(body)) = crate::catalog::commit_body(&self.db, &id.0)? {
            if crate::object::Kind::Commit.id_of(&body) == id.0 {
                if let Ok(c) = Commit::decode(&body) {
                    return Ok(c);
                }
            }
            // A body that does not verify: the object decides (and its
            // damage, if any, is reported where it is).
        }
        self.read_commit(id)
    }

    /// [`Ledger::indexed_commit`] keeping the metadata as stored. An
    /// indexed body passed the strict decoder when it was indexed; here it
    /// is checked against the id again, so the index cannot make up history.
    pub fn indexed_raw_commit(&self, id: &CommitId) -> Result<RawCommit> {
        if let Some(Some(body)) = crate::catalog::commit_body(&self.db, &id.0)? {
            if crate::object::Kind::Commit.id_of(&body) == id.0 {
                if let Ok(c) = RawCommit::decode(&body) {
                    return Ok(c);
                }
            }
        }
        self.read_commit(id).map(RawCommit::from_commit)
    }

    /// Parent number `idx` (0 = first) of `id`, from the commit index when
    /// it knows the commit.
    pub(crate) fn parent_of(&self, id: &CommitId, idx: usize) -> Result<Option<CommitId>> {
        match crate::catalog::commit_parent(&self.db, &id.0, idx)? {
            Some(p) => Ok(p.map(CommitId)),
            None => Ok(self.read_commit(id)?.parents.get(idx).copied()),
        }
    }

    /// Follow `n` first parents from `start`: through the index in one
    /// statement, falling back to commit objects where the index ends early
    /// on a commit it does not know. `Err(commit)` names the commit without a
    /// parent at which the walk stopped.
    pub(crate) fn first_parents(
        &self,
        start: CommitId,
        n: u64,
    ) -> Result<std::result::Result<CommitId, CommitId>> {
        let _tx = ReadTx::begin(&self.db)?;
        let (mut cur, mut left) = (start, n);
        while left > 0 {
            let (at, steps) = crate::catalog::first_parent_walk(&self.db, &cur.0, left)?;
            cur = CommitId(at);
            left -= steps;
            if left == 0 {
                break;
            }
            // The index has no first parent for `cur`: a root, or a commit
            // the index lacks (then its object says).
            match self.parent_of(&cur, 0)? {
                Some(p) => {
                    cur = p;
                    left -= 1;
                }
                None => return Ok(Err(cur)),
            }
        }
        Ok(Ok(cur))
    }

    /// Write `commit`'s tree into `to`, which must not exist or be an empty
    /// directory. Everything is written into a temporary sibling directory,
    /// every byte verified, and only then renamed into place: on any error
    /// `to` is left as it was.
    pub fn checkout(
        &self,
        commit: &CommitId,
        to: &Path,
        progress: &dyn Progress,
        cancel: &AtomicBool,
    ) -> Result<CheckoutStats> {
        let c = self.read_commit(commit)?;
        if to.exists() {
            let empty = std::fs::read_dir(to)
                .map(|mut d| d.next().is_none())
                .unwrap_or(false);
            if !to.is_dir() || !empty {
                return Err(Error::DestinationNotEmpty {
                    path: to.to_path_buf(),
                });
            }
        }
        let abs = std::path::absolute(to).map_err(io_err("resolve", to))?;
        let parent = abs.parent().ok_or_else(|| Error::DestinationNotEmpty {
            path: to.to_path_buf(),
        })?;
        let files = self.walk_files(&c.tree)?;
        // A partial clone fetches the promised files in one transfer before
        // anything is written (verified on arrival), not one by one.
        self.prefetch_tree(&c.tree, None, progress, cancel)?;
        // The rules every import applied (crate::policy), asked again
        // before anything is written: a ledger written before they existed,
        // or a partial clone whose symlink targets just arrived.
        crate::policy::TreeCheck::new(crate::policy::Limits::default())
            .check_root(&c.tree, &mut crate::policy::StoreSource(self))?;
        std::fs::create_dir_all(parent).map_err(io_err("create directory", parent))?;
        let tmp = tempfile::Builder::new()
            .prefix(".bat-checkout-")
            .tempdir_in(parent)
            .map_err(io_err("create temporary directory in", parent))?;
        let total: u64 = files
            .iter()
            .filter(|f| f.mode != Mode::Symlink)
            .map(|f| f.size)
            .sum();
        progress.start("checking out", Some(total));
        let mut stats = CheckoutStats::default();
        self.checkout_tree(&c.tree, tmp.path(), &mut stats, progress, cancel)?;
        progress.finish();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755))
            .map_err(io_err("chmod", tmp.path()))?;
        let tmp_path = tmp.keep();
        if let Err(e) = std::fs::rename(&tmp_path, &abs) {
            let _ = std::fs::remove_dir_all(&tmp_path);
            return Err(io_err("rename into place", &abs)(e));
        }
        Ok(stats)
    }

    /// Write the tree under `root` (a fresh directory), one directory at a
    /// time from an explicit stack, refusing again what the policy refuses
    /// at the point of writing: a `.bat` entry (a planted ledger) and
    /// symlinks that are absolute or climb out of `root`.
    fn checkout_tree(
        &self,
        tree: &TreeId,
        root: &Path,
        stats: &mut CheckoutStats,
        progress: &dyn Progress,
        cancel: &AtomicBool,
    ) -> Result<()> {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::fs::PermissionsExt;
        let mut stack: Vec<(std::vec::IntoIter<TreeEntry>, std::path::PathBuf)> = vec![(
            self.read_tree(tree)?.entries.into_iter(),
            root.to_path_buf(),
        )];
        while let Some((entries, dir)) = stack.last_mut() {
            let Some(e) = entries.next() else {
                stack.pop();
                continue;
            };
            check_cancel(cancel)?;
            let path = dir.join(&e.name);
            if e.name == crate::store::LEDGER_DIR {
                return Err(Error::InvalidName {
                    path,
                    reason: "a recorded tree never holds a ledger directory".into(),
                });
            }
            match e.mode {
                Mode::Tree => {
                    std::fs::create_dir(&path).map_err(io_err("create directory", &path))?;
                    stats.dirs += 1;
                    let sub = self.read_tree(&TreeId(e.id))?.entries.into_iter();
                    stack.push((sub, path));
                }
                Mode::Symlink => {
                    let target = self.read_bytes(&e.id)?;
                    check_symlink(root, &path, Path::new(std::ffi::OsStr::from_bytes(&target)))?;
                    std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(&target), &path)
                        .map_err(io_err("create symlink", &path))?;
                    stats.symlinks += 1;
                }
                Mode::File | Mode::Executable => {
                    let f = File::create(&path).map_err(io_err("create", &path))?;
                    let mut w = BufWriter::with_capacity(1 << 20, f);
                    let n = self.read_bytes_to(&e.id, &mut w, cancel)?;
                    let f = w
                        .into_inner()
                        .map_err(|e| io_err("write", &path)(e.into_error()))?;
                    let mode = if e.mode == Mode::Executable {
                        0o755
                    } else {
                        0o644
                    };
                    f.set_permissions(std::fs::Permissions::from_mode(mode))
                        .map_err(io_err("chmod", &path))?;
                    stats.files += 1;
                    stats.bytes += n;
                    progress.inc(n);
                }
            }
        }
        Ok(())
    }
}

/// Streaming history; see [`Ledger::history`].
pub struct History<'a, C: HistoryCommit = Commit> {
    ledger: &'a Ledger,
    heap: BinaryHeap<(i64, CommitId)>,
    queued: HashMap<CommitId, C>,
    seen: HashSet<CommitId>,
    left: usize,
    failed: bool,
    _tx: ReadTx<'a>,
}

/// A form in which [`History`] yields commits: [`Commit`] (metadata
/// decoded) or [`RawCommit`] (metadata as stored).
pub trait HistoryCommit: Sized {
    /// Read one commit, preferring the commit index.
    fn load(ledger: &Ledger, id: &CommitId) -> Result<Self>;
    /// Its time (the walk's order).
    fn time(&self) -> i64;
    /// Its parents.
    fn parents(&self) -> &[CommitId];
}

impl HistoryCommit for Commit {
    fn load(ledger: &Ledger, id: &CommitId) -> Result<Self> {
        ledger.indexed_commit(id)
    }
    fn time(&self) -> i64 {
        self.time
    }
    fn parents(&self) -> &[CommitId] {
        &self.parents
    }
}

impl HistoryCommit for RawCommit {
    fn load(ledger: &Ledger, id: &CommitId) -> Result<Self> {
        ledger.indexed_raw_commit(id)
    }
    fn time(&self) -> i64 {
        self.time
    }
    fn parents(&self) -> &[CommitId] {
        &self.parents
    }
}

impl<'a, C: HistoryCommit> History<'a, C> {
    fn new(ledger: &'a Ledger, starts: &[CommitId], limit: Option<usize>) -> Result<Self> {
        let tx = ReadTx::begin(&ledger.db)?;
        let mut h = History {
            ledger,
            heap: BinaryHeap::new(),
            queued: HashMap::new(),
            seen: HashSet::new(),
            left: limit.unwrap_or(usize::MAX),
            failed: false,
            _tx: tx,
        };
        for &start in starts {
            if !h.seen.insert(start) {
                continue;
            }
            let c = C::load(ledger, &start)?;
            h.heap.push((c.time(), start));
            h.queued.insert(start, c);
        }
        Ok(h)
    }

    /// Commits held in memory right now (queued to be shown). One on a
    /// linear history, whatever its length; at most the number of branches
    /// being walked side by side otherwise.
    pub fn commits_held(&self) -> usize {
        self.queued.len()
    }
}

impl<C: HistoryCommit> Iterator for History<'_, C> {
    type Item = Result<(CommitId, C)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.left == 0 {
            return None;
        }
        let (_, id) = self.heap.pop()?;
        let c = self
            .queued
            .remove(&id)
            .expect("every queued commit was read");
        // Queue the parents only when there is something more to show:
        // `log -n 1` reads no parent.
        if self.left > 1 {
            for p in c.parents() {
                if self.seen.insert(*p) {
                    match C::load(self.ledger, p) {
                        Ok(pc) => {
                            self.heap.push((pc.time(), *p));
                            self.queued.insert(*p, pc);
                        }
                        Err(e) => {
                            self.failed = true;
                            return Some(Err(e));
                        }
                    }
                }
            }
        }
        self.left -= 1;
        Some(Ok((id, c)))
    }
}

/// A deferred read transaction on the ledger's connection, so a long read
/// sees one snapshot and SQLite takes its locks once instead of per
/// statement. Nested use (a transaction already open) is a no-op.
pub(crate) struct ReadTx<'a> {
    conn: Option<&'a rusqlite::Connection>,
}

impl<'a> ReadTx<'a> {
    pub(crate) fn begin(conn: &'a rusqlite::Connection) -> Result<Self> {
        if !conn.is_autocommit() {
            return Ok(ReadTx { conn: None });
        }
        conn.execute_batch("BEGIN")
            .map_err(crate::error::db_err("starting a read transaction"))?;
        Ok(ReadTx { conn: Some(conn) })
    }
}

impl Drop for ReadTx<'_> {
    fn drop(&mut self) {
        if let Some(c) = self.conn {
            // Nothing was written; ending it only releases the snapshot.
            let _ = c.execute_batch("COMMIT");
        }
    }
}

/// Refuse absolute symlinks and relative ones that climb above `root`:
/// the rule for recording a directory, for checking one out and (through
/// [`crate::policy::symlink_climb`], the same measure) for every import.
pub(crate) fn check_symlink(root: &Path, link: &Path, target: &Path) -> Result<()> {
    let escapes = || Error::SymlinkEscapes {
        path: link.to_path_buf(),
        target: target.display().to_string(),
    };
    let rel_parent = link
        .parent()
        .and_then(|p| p.strip_prefix(root).ok())
        .ok_or_else(escapes)?;
    let depth = rel_parent
        .components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .count() as u64;
    match crate::policy::symlink_climb(target) {
        Some(climb) if climb <= depth => Ok(()),
        _ => Err(escapes()),
    }
}
