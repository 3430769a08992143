//! Pushing: what the other side lacks, in an order it can import
//! ([`send_plan`]), and the fast-forward check and compare-and-swap of the
//! remote ref ([`push`]).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::AtomicBool;

use super::{cancelled, HasFn, PushOutcome, REQUEST_IDS};
use crate::catalog::Location;
use crate::id::{CommitId, ObjectId, TreeId};
use crate::object::{ChunkList, Commit, Mode};
use crate::progress::Progress;
use crate::remote::{Remote, RemoteError};
use crate::store::Ledger;

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
    let mut p = Planner {
        local,
        has,
        cancel,
        seen: HashSet::new(),
    };
    let (commit_order, missing_commits) = p.missing_commits(tips)?;
    let (tree_order, files) = p.trees_and_files(&commit_order, &missing_commits)?;
    let mut out = p.file_storage(&files)?;
    out.extend(tree_order);
    out.extend(commit_order);
    Ok(out)
}

/// The state of one [`send_plan`]: what was already considered, and the
/// other side's answers.
struct Planner<'a, 'h> {
    local: &'a Ledger,
    has: &'a mut HasFn<'h>,
    cancel: &'a AtomicBool,
    seen: HashSet<ObjectId>,
}

impl Planner<'_, '_> {
    /// Those of `ids` the other side lacks.
    fn ask(&mut self, ids: Vec<ObjectId>) -> Result<Vec<ObjectId>, RemoteError> {
        let mut out = Vec::new();
        for part in ids.chunks(REQUEST_IDS) {
            let h = (self.has)(part)?;
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
    }

    /// Commits the other side lacks, parents first.
    fn missing_commits(
        &mut self,
        tips: &[CommitId],
    ) -> Result<(Vec<ObjectId>, HashMap<ObjectId, Commit>), RemoteError> {
        let mut missing_commits: HashMap<ObjectId, Commit> = HashMap::new();
        let mut frontier: Vec<ObjectId> = tips
            .iter()
            .map(|c| c.0)
            .filter(|c| self.seen.insert(*c))
            .collect();
        while !frontier.is_empty() {
            cancelled(self.cancel)?;
            let miss = self.ask(std::mem::take(&mut frontier))?;
            for id in miss {
                let c = self.local.read_commit(&CommitId(id))?;
                for p in &c.parents {
                    if self.seen.insert(p.0) {
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
        Ok((commit_order, missing_commits))
    }

    /// Trees (bottom-up) and files the other side lacks, commit by commit.
    fn trees_and_files(
        &mut self,
        commit_order: &[ObjectId],
        missing_commits: &HashMap<ObjectId, Commit>,
    ) -> Result<(Vec<ObjectId>, Vec<ObjectId>), RemoteError> {
        let mut tree_order: Vec<ObjectId> = Vec::new();
        let mut files: Vec<ObjectId> = Vec::new();
        // What the other side would refuse (crate::policy) is refused
        // here, before a round trip per tree level.
        let mut policy = crate::policy::TreeCheck::new(crate::policy::Limits::default());
        for cid in commit_order {
            policy.check_root(
                &missing_commits[cid].tree,
                &mut crate::policy::StoreSource(self.local),
            )?;
        }
        for cid in commit_order {
            let root = missing_commits[cid].tree.0;
            if !self.seen.insert(root) {
                continue;
            }
            let mut level = vec![root];
            let mut this_commit: Vec<Vec<ObjectId>> = Vec::new();
            while !level.is_empty() {
                cancelled(self.cancel)?;
                let miss = self.ask(std::mem::take(&mut level))?;
                let mut cand_files = Vec::new();
                for t in &miss {
                    for e in self.local.read_tree(&TreeId(*t))?.entries {
                        if self.seen.insert(e.id) {
                            if e.mode == Mode::Tree {
                                level.push(e.id);
                            } else {
                                cand_files.push(e.id);
                            }
                        }
                    }
                }
                files.extend(self.ask(cand_files)?);
                this_commit.push(miss);
            }
            for lvl in this_commit.into_iter().rev() {
                tree_order.extend(lvl);
            }
        }
        Ok((tree_order, files))
    }

    /// The storage of `files`: chunk lists, chunks and delta bases the other
    /// side lacks, each before what needs it, then the files.
    fn file_storage(&mut self, files: &[ObjectId]) -> Result<Vec<ObjectId>, RemoteError> {
        let local = self.local;
        let mut out: Vec<ObjectId> = Vec::new();
        let mut emitted: HashSet<ObjectId> = HashSet::new();
        let mut parts: Vec<ObjectId> = Vec::new();
        let mut layout: Vec<(ObjectId, Option<ChunkList>)> = Vec::new();
        for f in files {
            let Some(row) = local.locate(f)? else {
                // Pruned on purpose here: it travels as an absent entry
                // (no bytes, no chunks, no delta bases).
                if local.pruned_file(f)?.is_some() {
                    layout.push((*f, None));
                    continue;
                }
                return Err(RemoteError::MissingObject {
                    url: "the local ledger (partial clone? fetch it first)".into(),
                    id: *f,
                });
            };
            match row.location {
                Location::Chunked { list } => {
                    let l = local.read_chunk_list(&list)?;
                    if self.seen.insert(list) {
                        parts.push(list);
                    }
                    for c in &l.chunks {
                        if self.seen.insert(c.id) {
                            parts.push(c.id);
                        }
                    }
                    layout.push((*f, Some(l)));
                }
                _ => layout.push((*f, None)),
            }
        }
        let missing_parts: HashSet<ObjectId> = self.ask(parts)?.into_iter().collect();
        // Delta bases the other side lacks, transitively.
        let mut base_of: HashMap<ObjectId, ObjectId> = HashMap::new();
        let mut probe: Vec<ObjectId> = files.iter().chain(missing_parts.iter()).copied().collect();
        let mut missing_bases: HashSet<ObjectId> = HashSet::new();
        while !probe.is_empty() {
            let mut bases = Vec::new();
            for id in &probe {
                if let Some(b) = local.delta_base(id)? {
                    base_of.insert(*id, b);
                    if self.seen.insert(b) {
                        bases.push(b);
                    }
                }
            }
            let miss = self.ask(bases)?;
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
        // Chunk lists, then chunks by their place in the file and files in
        // history order (the versions of one tensor piece side by side, so
        // the receiver decodes each delta against a base it just decoded,
        // not against a chain read back from its store), then the files.
        let lists = || layout.iter().filter_map(|(_, l)| l.as_ref());
        for l in lists() {
            let lid = l.id();
            if missing_parts.contains(&lid) {
                emit(lid, &mut out);
            }
        }
        let longest = lists().map(|l| l.chunks.len()).max().unwrap_or(0);
        for at in 0..longest {
            for l in lists() {
                if let Some(c) = l.chunks.get(at) {
                    if missing_parts.contains(&c.id) {
                        emit(c.id, &mut out);
                    }
                }
            }
        }
        for (f, _) in &layout {
            emit(*f, &mut out);
        }
        Ok(out)
    }
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
    crate::remote::check_wire_ref_name(remote_ref)?;
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
    // Progress counts payload bytes (so a progress line can show the rate).
    progress.start("sending objects", None);
    let mut sent = 0u64;
    let mut bytes = 0u64;
    {
        let mut it = plan.iter().map(|id| {
            cancelled(cancel)?;
            let o = local.export_wire_or_absent(id)?;
            sent += 1;
            bytes += o.payload_len();
            progress.inc(o.payload_len());
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
