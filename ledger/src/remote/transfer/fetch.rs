//! Fetching: the objects reachable from the remote's tips (minus what a
//! filter leaves there), files on demand for a partial clone, and the ref
//! mapping of `bat fetch`.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicBool;

use super::receive::{decode_for_walk, get_all, receive_files};
use super::{cancelled, FetchOutcome, FetchStats, PathFilter, RefUpdate};
use crate::id::{CommitId, ObjectId, TreeId};
use crate::object::{Commit, Kind, Mode, Tree};
use crate::progress::Progress;
use crate::refs::{HEADS, TAGS};
use crate::remote::{Remote, RemoteError, WireObject};
use crate::store::Ledger;

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
    let max_depth = u64::from(crate::policy::Limits::default().max_depth);
    for (_, c) in commits.iter().rev() {
        // Levels are requested one round trip each: a tree nested past the
        // policy's depth is refused here, before thousands of requests
        // (import would refuse it anyway).
        let mut depth = 0u64;
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
            depth += 1;
            for o in got {
                let raw = decode_for_walk(&o, Kind::Tree)?;
                let t = Tree::decode(&raw).map_err(|r| RemoteError::Corrupt {
                    id: o.id,
                    reason: format!("not a valid tree: {r}"),
                })?;
                let prefix = paths.get(&o.id).cloned().unwrap_or_default();
                if depth > max_depth && !t.entries.is_empty() {
                    return Err(crate::error::Error::TreeRefused {
                        id: o.id,
                        place: format!("at {}", crate::policy::shown(&prefix)),
                        rule: crate::policy::Rule::TooDeep {
                            depth,
                            limit: max_depth as u32,
                        },
                    }
                    .into());
                }
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
        if select.is_some_and(|s| !s(&f.path, &f.tree_entry())) {
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
        crate::remote::check_wire_ref_name(n)?;
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
    let mut stats = fetch_objects(local, remote, &tips, filter, progress, cancel)?;
    // Files a retention gc pruned here: the commits naming them are
    // present, so the walk above does not ask for them; ask by id.
    let restored = restore_pruned(local, remote, progress, cancel)?;
    stats.objects_received += restored.objects_received;
    stats.payload_bytes += restored.payload_bytes;
    stats.objects_stored += restored.objects_stored;
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

/// Fetch back, verified, the pruned files `remote` has, and clear their
/// pruned marks. Returns what was received.
pub fn restore_pruned(
    local: &mut Ledger,
    remote: &mut dyn Remote,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<FetchStats, RemoteError> {
    let pruned: Vec<ObjectId> = local.pruned_files()?.into_iter().map(|p| p.id).collect();
    if pruned.is_empty() {
        return Ok(FetchStats::default());
    }
    let has = remote.has(&pruned)?;
    let want: Vec<ObjectId> = pruned
        .iter()
        .zip(has)
        .filter(|(_, h)| *h)
        .map(|(id, _)| *id)
        .collect();
    if want.is_empty() {
        return Ok(FetchStats::default());
    }
    let stats = fetch_files(local, remote, &want, progress, cancel)?;
    local.clear_restored_pruned()?;
    Ok(stats)
}
