//! The transfer engine: fetch (remote → local) and push (local → remote)
//! over any [`Remote`], moving only missing objects, importing verified
//! batches as they arrive (so an interrupted transfer resumes without
//! re-sending what arrived), and moving refs last by compare-and-swap.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::AtomicBool;

use serde::Serialize;

use super::{Remote, RemoteError, WireBody, WireObject};
use crate::catalog::Location;
use crate::id::{CommitId, ObjectId, TreeId};
use crate::object::{ChunkList, Commit, Kind, Mode, Tree, TreeEntry};
use crate::progress::{check_cancel, Progress};
use crate::refs::{HEADS, TAGS};
use crate::store::Ledger;

/// Decides which files a partial fetch leaves on the remote: called with a
/// file's path in its commit tree (`/`-separated) and its tree entry;
/// `true` = do not fetch it (the remote keeps it, as a promisor).
pub type PathFilter = dyn Fn(&str, &TreeEntry) -> bool + Sync;

/// Answers "which of these does the other side store?" (see
/// [`Remote::has`]).
pub type HasFn<'a> = dyn FnMut(&[ObjectId]) -> Result<Vec<bool>, RemoteError> + 'a;

/// Payload bytes per imported batch.
pub const BATCH_BYTES: u64 = 64 << 20;
/// Objects per `has`/`get` request.
pub const REQUEST_IDS: usize = 4096;

/// Counts of a fetch.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FetchStats {
    /// Objects received (including any the remote sent twice).
    pub objects_received: u64,
    /// Objects newly stored locally.
    pub objects_stored: u64,
    /// Payload bytes received.
    pub payload_bytes: u64,
    /// Files left on the remote by the filter.
    pub files_promised: u64,
}

/// One ref a fetch looked at.
#[derive(Debug, Clone, Serialize)]
pub struct RefUpdate {
    /// The ref's name on the remote.
    pub remote_ref: String,
    /// The local ref it maps to.
    pub local_ref: String,
    /// Previous local value.
    pub old: Option<CommitId>,
    /// New value.
    pub new: CommitId,
    /// "new", "updated", "up to date", or "kept (differs locally)" for tags.
    pub status: String,
}

/// Result of [`fetch`].
#[derive(Debug, Clone, Default, Serialize)]
pub struct FetchOutcome {
    /// Object counts.
    pub stats: FetchStats,
    /// Ref updates.
    pub refs: Vec<RefUpdate>,
    /// Every ref the remote advertised.
    pub remote_refs: Vec<(String, CommitId)>,
}

/// Result of [`push`].
#[derive(Debug, Clone, Default, Serialize)]
pub struct PushOutcome {
    /// The remote ref.
    pub remote_ref: String,
    /// Its value before.
    pub old: Option<CommitId>,
    /// Its value now.
    pub new: Option<CommitId>,
    /// Objects sent.
    pub objects_sent: u64,
    /// Payload bytes sent.
    pub payload_bytes: u64,
    /// True when the remote already had the commit at that ref.
    pub up_to_date: bool,
    /// True when the update was forced over a non-fast-forward.
    pub forced: bool,
}

fn cancelled(cancel: &AtomicBool) -> Result<(), RemoteError> {
    check_cancel(cancel).map_err(|_| RemoteError::Cancelled)
}

/// Decode a self-contained record received for walking (commits, trees and
/// chunk lists): bounded decompression and id check.
fn decode_for_walk(o: &WireObject, want: Kind) -> Result<Vec<u8>, RemoteError> {
    let bad = |reason: String| RemoteError::Corrupt { id: o.id, reason };
    if o.kind != want {
        return Err(bad(format!(
            "expected a {}, got a {}",
            want.name(),
            o.kind.name()
        )));
    }
    let WireBody::Record {
        compression,
        payload,
    } = &o.body
    else {
        return Err(bad(format!(
            "a {} must be sent as a plain record",
            want.name()
        )));
    };
    if o.raw_len > crate::pack::MAX_RECORD_RAW {
        return Err(RemoteError::LimitExceeded {
            what: format!("object {} declares {} bytes", o.id, o.raw_len),
        });
    }
    let raw = match *compression {
        crate::pack::COMPRESSION_NONE => payload.clone(),
        crate::pack::COMPRESSION_ZSTD => zstd::bulk::decompress(payload, o.raw_len as usize)
            .map_err(|e| {
                bad(format!(
                    "does not decompress within its declared length: {e}"
                ))
            })?,
        c => {
            return Err(bad(format!(
                "unexpected compression {c} for a {}",
                want.name()
            )))
        }
    };
    if raw.len() as u64 != o.raw_len || want.id_of(&raw) != o.id {
        return Err(bad("content digest does not match the object id".into()));
    }
    Ok(raw)
}

/// Ask `remote` for `ids` (chunked into requests) and hand every object to
/// `f`; every requested id must arrive.
fn get_all(
    remote: &mut dyn Remote,
    ids: &[ObjectId],
    f: &mut dyn FnMut(WireObject) -> Result<(), RemoteError>,
) -> Result<(), RemoteError> {
    for part in ids.chunks(REQUEST_IDS) {
        let mut want: HashSet<ObjectId> = part.iter().copied().collect();
        remote.get(part, &mut |o| {
            want.remove(&o.id);
            f(o)
        })?;
        if let Some(id) = want.into_iter().next() {
            return Err(RemoteError::MissingObject {
                url: remote.url(),
                id,
            });
        }
    }
    Ok(())
}

/// Receives leaf objects, imports them in verified batches, and fetches
/// delta bases that neither side of the batch has.
struct Receiver<'a> {
    local: &'a mut Ledger,
    pending: Vec<WireObject>,
    pending_bytes: u64,
    deferred: Vec<WireObject>,
    stats: FetchStats,
    progress: &'a dyn Progress,
    cancel: &'a AtomicBool,
}

impl Receiver<'_> {
    fn accept(&mut self, o: WireObject) -> Result<(), RemoteError> {
        cancelled(self.cancel)?;
        self.stats.objects_received += 1;
        self.stats.payload_bytes += o.payload_len();
        self.progress.inc(o.payload_len());
        self.pending_bytes += o.payload_len();
        self.pending.push(o);
        if self.pending_bytes >= BATCH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    /// Import what can be imported; deltas whose base is missing wait.
    fn flush(&mut self) -> Result<(), RemoteError> {
        let batch = std::mem::take(&mut self.pending);
        self.pending_bytes = 0;
        let mut ready = Vec::with_capacity(batch.len());
        let mut in_batch: HashSet<ObjectId> = HashSet::new();
        let mut waiting: HashSet<ObjectId> = HashSet::new();
        for o in batch {
            let ok = match &o.body {
                WireBody::Delta { base, .. } => {
                    !waiting.contains(base)
                        && (in_batch.contains(base) || self.local.contains(base)?)
                }
                _ => true,
            };
            if ok {
                in_batch.insert(o.id);
                ready.push(o);
            } else {
                waiting.insert(o.id);
                self.deferred.push(o);
            }
        }
        if !ready.is_empty() {
            let s = self.local.import_wire(ready)?;
            self.stats.objects_stored += s.stored;
        }
        Ok(())
    }

    /// Fetch missing bases of deferred deltas until all are imported.
    fn resolve_deferred(&mut self, remote: &mut dyn Remote) -> Result<(), RemoteError> {
        for _ in 0..crate::store::MAX_CHAIN + 1 {
            self.flush()?;
            if self.deferred.is_empty() {
                return Ok(());
            }
            let waiting = std::mem::take(&mut self.deferred);
            let ids: HashSet<ObjectId> = waiting.iter().map(|o| o.id).collect();
            let mut missing = Vec::new();
            for o in &waiting {
                if let WireBody::Delta { base, .. } = &o.body {
                    if !ids.contains(base) && !self.local.contains(base)? && !missing.contains(base)
                    {
                        missing.push(*base);
                    }
                }
            }
            get_all(remote, &missing, &mut |o| {
                self.pending.push(o);
                Ok(())
            })?;
            self.flush()?;
            self.pending = waiting;
        }
        Err(RemoteError::Protocol {
            reason: "delta bases do not resolve (chain too long or cyclic)".into(),
        })
    }
}

/// Make everything reachable from `tips` present locally, except files the
/// filter leaves on the remote. Big data is imported in verified batches as
/// it arrives; chunked files, trees and commits are stored last (bottom-up),
/// so a present tree or commit always has its closure (minus filtered
/// files) and an interrupted fetch resumes where it stopped.
pub fn fetch_objects(
    local: &mut Ledger,
    remote: &mut dyn Remote,
    tips: &[CommitId],
    filter: Option<&PathFilter>,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<FetchStats, RemoteError> {
    progress.start("receiving objects", None);
    // 1. Commits, newest first, level by level.
    let mut seen: HashSet<ObjectId> = HashSet::new();
    let mut commits: Vec<(WireObject, Commit)> = Vec::new();
    let mut frontier: Vec<ObjectId> = Vec::new();
    for t in tips {
        if !local.contains(&t.0)? && seen.insert(t.0) {
            frontier.push(t.0);
        }
    }
    let mut received = 0u64;
    let mut meta_bytes = 0u64;
    while !frontier.is_empty() {
        cancelled(cancel)?;
        let mut next = Vec::new();
        let mut got = Vec::new();
        get_all(remote, &frontier, &mut |o| {
            got.push(o);
            Ok(())
        })?;
        for o in got {
            let raw = decode_for_walk(&o, Kind::Commit)?;
            let c = Commit::decode(&raw).map_err(|r| RemoteError::Corrupt {
                id: o.id,
                reason: format!("not a valid commit: {r}"),
            })?;
            for p in &c.parents {
                if !local.contains(&p.0)? && seen.insert(p.0) {
                    next.push(p.0);
                }
            }
            received += 1;
            meta_bytes += o.payload_len();
            commits.push((o, c));
        }
        frontier = next;
    }
    // 2. Trees, commit by commit oldest first, so files (and the chunks
    //    they share with older versions) are requested in history order and
    //    delta bases arrive before their deltas.
    let mut trees: Vec<WireObject> = Vec::new();
    let mut files: Vec<ObjectId> = Vec::new();
    let mut promised = 0u64;
    let mut promised_set: HashSet<ObjectId> = HashSet::new();
    for (_, c) in commits.iter().rev() {
        let mut level: Vec<(ObjectId, String)> = Vec::new();
        if !local.contains(&c.tree.0)? && seen.insert(c.tree.0) {
            level.push((c.tree.0, String::new()));
        }
        while !level.is_empty() {
            cancelled(cancel)?;
            let paths: HashMap<ObjectId, String> = level.iter().cloned().collect();
            let ids: Vec<ObjectId> = level.iter().map(|x| x.0).collect();
            let mut got = Vec::new();
            get_all(remote, &ids, &mut |o| {
                got.push(o);
                Ok(())
            })?;
            let mut next = Vec::new();
            for o in got {
                let raw = decode_for_walk(&o, Kind::Tree)?;
                let t = Tree::decode(&raw).map_err(|r| RemoteError::Corrupt {
                    id: o.id,
                    reason: format!("not a valid tree: {r}"),
                })?;
                let prefix = paths.get(&o.id).cloned().unwrap_or_default();
                for e in &t.entries {
                    let path = if prefix.is_empty() {
                        e.name.clone()
                    } else {
                        format!("{prefix}/{}", e.name)
                    };
                    if e.mode == Mode::Tree {
                        if !local.contains(&e.id)? && seen.insert(e.id) {
                            next.push((e.id, path));
                        }
                    } else if filter.is_some_and(|f| f(&path, e)) {
                        if !local.contains(&e.id)? && promised_set.insert(e.id) {
                            promised += 1;
                        }
                    } else if !local.contains(&e.id)? && seen.insert(e.id) {
                        files.push(e.id);
                    }
                }
                received += 1;
                meta_bytes += o.payload_len();
                trees.push(o);
            }
            level = next;
        }
    }
    let mut last: Vec<WireObject> = trees.into_iter().rev().collect();
    last.extend(commits.into_iter().rev().map(|(o, _)| o));
    let mut stats = receive_files(local, remote, &files, last, &mut seen, progress, cancel)?;
    stats.objects_received += received;
    stats.payload_bytes += meta_bytes;
    stats.files_promised = promised;
    progress.finish();
    Ok(stats)
}

/// Fetch file objects (small files, chunked files with their lists and
/// chunks, delta bases as needed), then store `last` (trees and commits,
/// bottom-up) with the final batch.
fn receive_files(
    local: &mut Ledger,
    remote: &mut dyn Remote,
    files: &[ObjectId],
    last_objs: Vec<WireObject>,
    seen: &mut HashSet<ObjectId>,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<FetchStats, RemoteError> {
    let mut rx = Receiver {
        local,
        pending: Vec::new(),
        pending_bytes: 0,
        deferred: Vec::new(),
        stats: FetchStats::default(),
        progress,
        cancel,
    };
    // Small files are records (imported in batches); large ones are
    // chunked aliases whose lists and chunks come next.
    let mut aliases: Vec<WireObject> = Vec::new();
    let mut lists: Vec<ObjectId> = Vec::new();
    get_all(remote, files, &mut |o| match &o.body {
        WireBody::Chunked { list } => {
            if seen.insert(*list) {
                lists.push(*list);
            }
            rx.stats.objects_received += 1;
            aliases.push(o);
            Ok(())
        }
        _ => rx.accept(o),
    })?;
    let mut want_lists = Vec::new();
    for l in lists {
        if !rx.local.contains(&l)? {
            want_lists.push(l);
        }
    }
    let mut list_objs = Vec::new();
    get_all(remote, &want_lists, &mut |o| {
        list_objs.push(o);
        Ok(())
    })?;
    let mut list_of: HashMap<ObjectId, ChunkList> = HashMap::new();
    for o in list_objs {
        let raw = decode_for_walk(&o, Kind::ChunkList)?;
        let l = ChunkList::decode(&raw).map_err(|r| RemoteError::Corrupt {
            id: o.id,
            reason: format!("not a valid chunk list: {r}"),
        })?;
        list_of.insert(o.id, l);
        rx.accept(o)?;
    }
    // Chunks in file order, files in history order.
    let mut chunks: Vec<ObjectId> = Vec::new();
    for a in &aliases {
        let WireBody::Chunked { list } = &a.body else {
            continue;
        };
        let l = match list_of.get(list) {
            Some(l) => l.clone(),
            None => rx.local.read_chunk_list(list)?,
        };
        for c in l.chunks {
            if !rx.local.contains(&c.id)? && seen.insert(c.id) {
                chunks.push(c.id);
            }
        }
    }
    get_all(remote, &chunks, &mut |o| rx.accept(o))?;
    if !rx.deferred.is_empty() {
        rx.resolve_deferred(remote)?;
    }
    // Bottom-up: what is still pending (all of a small transfer, so it is
    // stored atomically), chunked files, then `last_objs`.
    let mut last: Vec<WireObject> = std::mem::take(&mut rx.pending);
    last.extend(aliases);
    last.extend(last_objs);
    let s = rx.local.import_wire(last)?;
    let mut stats = rx.stats;
    stats.objects_stored += s.stored;
    Ok(stats)
}

/// Fetch the given file objects (for a partial clone's on-demand reads):
/// each is verified on arrival like any fetched object.
pub fn fetch_files(
    local: &mut Ledger,
    remote: &mut dyn Remote,
    files: &[ObjectId],
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<FetchStats, RemoteError> {
    let mut want = Vec::new();
    let mut seen = HashSet::new();
    for f in files {
        if !local.contains(f)? && seen.insert(*f) {
            want.push(*f);
        }
    }
    if want.is_empty() {
        return Ok(FetchStats::default());
    }
    progress.start("fetching files on demand", None);
    let stats = receive_files(
        local,
        remote,
        &want,
        Vec::new(),
        &mut seen,
        progress,
        cancel,
    )?;
    progress.finish();
    Ok(stats)
}

/// Files below `tree` that are not stored locally (a partial clone's
/// promised files), optionally only those `select` accepts, by path.
pub fn missing_files(
    local: &Ledger,
    tree: &TreeId,
    select: Option<&PathFilter>,
) -> Result<Vec<ObjectId>, RemoteError> {
    let mut out = Vec::new();
    for f in local.walk_files(tree)? {
        let e = TreeEntry {
            name: f.path.rsplit('/').next().unwrap_or("").to_string(),
            mode: f.mode,
            id: f.id,
            size: f.size,
        };
        if select.is_some_and(|s| !s(&f.path, &e)) {
            continue;
        }
        if !local.contains(&f.id)? {
            out.push(f.id);
        }
    }
    Ok(out)
}

/// Make every file below `tree` (or those `select` accepts) present,
/// fetching missing ones from `remote` and verifying them on arrival.
/// Returns the number of files fetched.
pub fn hydrate(
    local: &mut Ledger,
    remote: &mut dyn Remote,
    tree: &TreeId,
    select: Option<&PathFilter>,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<u64, RemoteError> {
    let missing = missing_files(local, tree, select)?;
    let n = missing.len() as u64;
    fetch_files(local, remote, &missing, progress, cancel)?;
    Ok(n)
}

/// Fetch from `remote` (registered as `name`): every branch becomes
/// `refs/remotes/<name>/<branch>`, tags are created locally when absent
/// (a tag that differs locally is kept and reported). Objects are stored
/// before any ref moves; refs move by compare-and-swap.
pub fn fetch(
    local: &mut Ledger,
    remote: &mut dyn Remote,
    name: &str,
    filter: Option<&PathFilter>,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<FetchOutcome, RemoteError> {
    crate::refs::validate_ref_name(name).map_err(RemoteError::Ledger)?;
    let advertised = remote.list_refs()?;
    for (n, _) in &advertised {
        super::check_wire_ref_name(n)?;
    }
    let mut plan: Vec<(String, String, CommitId)> = Vec::new();
    for (n, c) in &advertised {
        if let Some(b) = n.strip_prefix(HEADS) {
            plan.push((n.clone(), format!("refs/remotes/{name}/{b}"), *c));
        } else if n.starts_with(TAGS) {
            plan.push((n.clone(), n.clone(), *c));
        } else if let Some(rest) = n.strip_prefix("refs/") {
            if !rest.starts_with("remotes/") {
                plan.push((n.clone(), format!("refs/remotes/{name}/{rest}"), *c));
            }
        }
    }
    let tips: Vec<CommitId> = plan.iter().map(|p| p.2).collect();
    let stats = fetch_objects(local, remote, &tips, filter, progress, cancel)?;
    let mut refs = Vec::new();
    for (rn, ln, new) in plan {
        if !local.contains(&new.0)? {
            return Err(RemoteError::MissingObject {
                url: remote.url(),
                id: new.0,
            });
        }
        let old = crate::refs::ref_target(&local.db, &ln)?;
        let status = if old == Some(new) {
            "up to date"
        } else if ln.starts_with(TAGS) && old.is_some() {
            "kept (differs locally)"
        } else {
            local.update_ref(
                &ln,
                old,
                Some(new),
                &format!("fetch: {rn} from {}", remote.url()),
            )?;
            if old.is_none() {
                "new"
            } else {
                "updated"
            }
        };
        refs.push(RefUpdate {
            remote_ref: rn,
            local_ref: ln,
            old,
            new,
            status: status.into(),
        });
    }
    Ok(FetchOutcome {
        stats,
        refs,
        remote_refs: advertised,
    })
}

/// True when `anc` is `desc` or one of its ancestors (local commits only).
pub fn is_ancestor(l: &Ledger, anc: CommitId, desc: CommitId) -> Result<bool, RemoteError> {
    let mut seen = HashSet::new();
    let mut q = VecDeque::from([desc]);
    while let Some(c) = q.pop_front() {
        if c == anc {
            return Ok(true);
        }
        if !seen.insert(c) || !l.contains(&c.0)? {
            continue;
        }
        q.extend(l.read_commit(&c)?.parents);
    }
    Ok(false)
}

/// The objects to send so that `tips` and everything they reach is on the
/// other side, bottom-up (delta bases before deltas, chunk lists and chunks
/// before chunked files, files and subtrees before trees, trees before
/// commits, parents before children). `has` says what the other side
/// already stores; a stored commit or tree prunes its closure there.
pub fn send_plan(
    local: &Ledger,
    tips: &[CommitId],
    has: &mut HasFn<'_>,
    cancel: &AtomicBool,
) -> Result<Vec<ObjectId>, RemoteError> {
    let mut seen: HashSet<ObjectId> = HashSet::new();
    let ask = |ids: Vec<ObjectId>, has: &mut HasFn<'_>| -> Result<Vec<ObjectId>, RemoteError> {
        let mut out = Vec::new();
        for part in ids.chunks(REQUEST_IDS) {
            let h = has(part)?;
            if h.len() != part.len() {
                return Err(RemoteError::Protocol {
                    reason: format!(
                        "asked about {} objects, got {} answers",
                        part.len(),
                        h.len()
                    ),
                });
            }
            out.extend(part.iter().zip(h).filter(|(_, h)| !h).map(|(i, _)| *i));
        }
        Ok(out)
    };
    // Commits missing on the other side.
    let mut missing_commits: HashMap<ObjectId, Commit> = HashMap::new();
    let mut frontier: Vec<ObjectId> = tips
        .iter()
        .map(|c| c.0)
        .filter(|c| seen.insert(*c))
        .collect();
    while !frontier.is_empty() {
        cancelled(cancel)?;
        let miss = ask(std::mem::take(&mut frontier), has)?;
        for id in miss {
            let c = local.read_commit(&CommitId(id))?;
            for p in &c.parents {
                if seen.insert(p.0) {
                    frontier.push(p.0);
                }
            }
            missing_commits.insert(id, c);
        }
    }
    // Parents first (iterative post-order).
    let mut commit_order: Vec<ObjectId> = Vec::new();
    let mut done: HashSet<ObjectId> = HashSet::new();
    for t in tips {
        let mut stack = vec![(t.0, false)];
        while let Some((id, expanded)) = stack.pop() {
            let Some(c) = missing_commits.get(&id) else {
                continue;
            };
            if expanded {
                if done.insert(id) {
                    commit_order.push(id);
                }
                continue;
            }
            if done.contains(&id) {
                continue;
            }
            stack.push((id, true));
            for p in &c.parents {
                stack.push((p.0, false));
            }
        }
    }
    // Trees and files, commit by commit.
    let mut tree_order: Vec<ObjectId> = Vec::new();
    let mut files: Vec<ObjectId> = Vec::new();
    for cid in &commit_order {
        let root = missing_commits[cid].tree.0;
        if !seen.insert(root) {
            continue;
        }
        let mut level = vec![root];
        let mut this_commit: Vec<Vec<ObjectId>> = Vec::new();
        while !level.is_empty() {
            cancelled(cancel)?;
            let miss = ask(std::mem::take(&mut level), has)?;
            let mut cand_files = Vec::new();
            for t in &miss {
                for e in local.read_tree(&TreeId(*t))?.entries {
                    if seen.insert(e.id) {
                        if e.mode == Mode::Tree {
                            level.push(e.id);
                        } else {
                            cand_files.push(e.id);
                        }
                    }
                }
            }
            files.extend(ask(cand_files, has)?);
            this_commit.push(miss);
        }
        for lvl in this_commit.into_iter().rev() {
            tree_order.extend(lvl);
        }
    }
    // File storage: lists, chunks, delta bases.
    let mut out: Vec<ObjectId> = Vec::new();
    let mut emitted: HashSet<ObjectId> = HashSet::new();
    let mut parts: Vec<ObjectId> = Vec::new();
    let mut layout: Vec<(ObjectId, Option<ChunkList>)> = Vec::new();
    for f in &files {
        let row = local.locate(f)?.ok_or_else(|| RemoteError::MissingObject {
            url: "the local ledger (partial clone? fetch it first)".into(),
            id: *f,
        })?;
        match row.location {
            Location::Chunked { list } => {
                let l = local.read_chunk_list(&list)?;
                if seen.insert(list) {
                    parts.push(list);
                }
                for c in &l.chunks {
                    if seen.insert(c.id) {
                        parts.push(c.id);
                    }
                }
                layout.push((*f, Some(l)));
            }
            _ => layout.push((*f, None)),
        }
    }
    let missing_parts: HashSet<ObjectId> = ask(parts, has)?.into_iter().collect();
    // Delta bases the other side lacks, transitively.
    let mut base_of: HashMap<ObjectId, ObjectId> = HashMap::new();
    let mut probe: Vec<ObjectId> = files.iter().chain(missing_parts.iter()).copied().collect();
    let mut missing_bases: HashSet<ObjectId> = HashSet::new();
    while !probe.is_empty() {
        let mut bases = Vec::new();
        for id in &probe {
            if let Some(b) = local.delta_base(id)? {
                base_of.insert(*id, b);
                if seen.insert(b) {
                    bases.push(b);
                }
            }
        }
        let miss = ask(bases, has)?;
        missing_bases.extend(miss.iter().copied());
        probe = miss;
    }
    let mut emit = |id: ObjectId, out: &mut Vec<ObjectId>| {
        let mut chain = vec![id];
        let mut cur = id;
        while let Some(b) = base_of.get(&cur) {
            if !missing_bases.contains(b) || emitted.contains(b) {
                break;
            }
            chain.push(*b);
            cur = *b;
        }
        for x in chain.into_iter().rev() {
            if emitted.insert(x) {
                out.push(x);
            }
        }
    };
    for (f, l) in layout {
        if let Some(l) = l {
            let lid = l.id();
            if missing_parts.contains(&lid) {
                emit(lid, &mut out);
            }
            for c in &l.chunks {
                if missing_parts.contains(&c.id) {
                    emit(c.id, &mut out);
                }
            }
        }
        emit(f, &mut out);
    }
    out.extend(tree_order);
    out.extend(commit_order);
    Ok(out)
}

/// Push local ref `local_ref` to `remote_ref` on `remote`: refuse a
/// non-fast-forward unless `force`, send what the remote lacks (verified
/// and durable there before anything else), then compare-and-swap the
/// remote ref against the value seen at the start.
pub fn push(
    local: &Ledger,
    remote: &mut dyn Remote,
    local_ref: &str,
    remote_ref: &str,
    force: bool,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<PushOutcome, RemoteError> {
    super::check_wire_ref_name(remote_ref)?;
    let new = local.resolve(local_ref)?;
    let cur = remote
        .list_refs()?
        .into_iter()
        .find(|(n, _)| n == remote_ref)
        .map(|(_, c)| c);
    let mut out = PushOutcome {
        remote_ref: remote_ref.to_string(),
        old: cur,
        new: Some(new),
        ..Default::default()
    };
    if cur == Some(new) {
        out.up_to_date = true;
        return Ok(out);
    }
    if let Some(c) = cur {
        let ff = local.contains(&c.0)? && is_ancestor(local, c, new)?;
        if !ff {
            if !force {
                return Err(RemoteError::NonFastForward {
                    name: remote_ref.to_string(),
                });
            }
            out.forced = true;
        }
    }
    let plan = send_plan(local, &[new], &mut |ids| remote.has(ids), cancel)?;
    progress.start("sending objects", Some(plan.len() as u64));
    let mut sent = 0u64;
    let mut bytes = 0u64;
    {
        let mut it = plan.iter().map(|id| {
            cancelled(cancel)?;
            let o = local.export_wire(id)?;
            sent += 1;
            bytes += o.payload_len();
            progress.inc(1);
            Ok(o)
        });
        remote.put(&mut it)?;
    }
    progress.finish();
    out.objects_sent = sent;
    out.payload_bytes = bytes;
    remote.update_ref(remote_ref, cur, new, force)?;
    Ok(out)
}
