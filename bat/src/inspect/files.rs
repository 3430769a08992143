//! The `files` section of `bat diff`: every file of the two commits' trees
//! compared by object id, whatever the commits are (rounds or plain
//! directories), with sizes, and a per-tensor summary for each changed
//! `*.safetensors` file anywhere in the tree.
//!
//! Unchanged files are counted, not listed: a round tree has thousands of
//! them. A safetensors file that cannot be compared (not well-formed, or
//! its bytes are not here) gets a `tensors_error` instead of failing the
//! whole diff, because in a plain tree the suffix alone promises nothing.

use std::collections::{BTreeMap, BTreeSet};

use bat_ledger::{Mode, ObjectId};
use serde_json::{json, Value};

use super::deltas::{diff_from_deltas, TensorsFrom};
use super::side::{materialise, SideOptions};
use super::tensors::diff_safetensors;
use super::{InspectError, RoundTree};

/// Per-tensor summaries already computed in this diff, by (a, b) object
/// ids, so the checkpoint and files sections compare a pair once.
#[derive(Default)]
pub(super) struct TensorMemo(BTreeMap<(ObjectId, ObjectId), (Value, TensorsFrom)>);

impl TensorMemo {
    /// The per-tensor summary of `path` between the two objects, and where
    /// its numbers came from: the pieces' delta statistics when the files
    /// are stored as such deltas of each other (unless `opts.decode`),
    /// else both files decoded.
    pub(super) fn get(
        &mut self,
        (a, b): (&RoundTree<'_>, &RoundTree<'_>),
        path: &str,
        x: (ObjectId, u64),
        y: (ObjectId, u64),
        opts: SideOptions<'_>,
    ) -> Result<(Value, TensorsFrom), InspectError> {
        if let Some(v) = self.0.get(&(x.0, y.0)) {
            return Ok(v.clone());
        }
        let from_deltas = if opts.decode {
            None
        } else {
            diff_from_deltas(
                (a.ledger(), &x.0, x.1),
                (b.ledger(), &y.0, y.1),
                opts.cancel,
            )?
        };
        let (t, from) = match from_deltas {
            Some(r) => r,
            None => {
                let mut sa = materialise(a.ledger(), &x.0, x.1, path, opts)?;
                let mut sb = materialise(b.ledger(), &y.0, y.1, path, opts)?;
                let t = diff_safetensors(&mut sa, x.1, &mut sb, y.1).map_err(|source| {
                    InspectError::Tensors {
                        path: path.to_string(),
                        source,
                    }
                })?;
                (t, TensorsFrom::Decode)
            }
        };
        let v = (json!(t), from);
        self.0.insert((x.0, y.0), v.clone());
        Ok(v)
    }
}

/// Regular files (no symlinks) of a commit by path: (object id, size).
fn tree_files(r: &RoundTree<'_>) -> Result<BTreeMap<String, (ObjectId, u64)>, InspectError> {
    Ok(r.ledger()
        .walk_files(&r.commit.tree)?
        .into_iter()
        .filter(|f| f.mode != Mode::Symlink)
        .map(|f| (f.path, (f.id, f.size)))
        .collect())
}

/// The `files` section: `file_counts` (added, removed, changed,
/// unchanged), `bytes` (total size of each side) and `files`, the entries
/// that differ, each with `path`, `status`, `a`/`b` (`{id, size}` or null),
/// `size_delta`, and for changed safetensors `tensors` with `tensors_from`
/// (`deltas`, `mixed` or `decode`), or `tensors_error`.
pub(super) fn files(
    a: &RoundTree<'_>,
    b: &RoundTree<'_>,
    opts: SideOptions<'_>,
    memo: &mut TensorMemo,
) -> Result<Value, InspectError> {
    let fa = tree_files(a)?;
    let fb = tree_files(b)?;
    let paths: BTreeSet<&String> = fa.keys().chain(fb.keys()).collect();
    let mut counts: BTreeMap<&str, u64> = ["added", "removed", "changed", "unchanged"]
        .into_iter()
        .map(|k| (k, 0))
        .collect();
    let mut out = Vec::new();
    for p in paths {
        let (x, y) = (fa.get(p).copied(), fb.get(p).copied());
        let status = match (x, y) {
            (Some(_), None) => "removed",
            (None, Some(_)) => "added",
            (Some(x), Some(y)) if x.0 == y.0 => "unchanged",
            _ => "changed",
        };
        *counts.entry(status).or_default() += 1;
        if status == "unchanged" {
            continue;
        }
        let size = |s: Option<(ObjectId, u64)>| s.map(|s| s.1).unwrap_or(0) as i64;
        let mut f = json!({
            "path": p,
            "status": status,
            "a": x.map(|x| json!({"id": x.0.to_hex(), "size": x.1})),
            "b": y.map(|y| json!({"id": y.0.to_hex(), "size": y.1})),
            "size_delta": size(y) - size(x),
        });
        if let (Some(x), Some(y), true) = (x, y, p.ends_with(".safetensors")) {
            match memo.get((a, b), p, x, y, opts) {
                Ok((t, from)) => {
                    f["tensors"] = t;
                    f["tensors_from"] = json!(from.name());
                }
                Err(InspectError::Scratch { path, source }) => {
                    return Err(InspectError::Scratch { path, source })
                }
                Err(e) => f["tensors_error"] = json!(e.to_string()),
            }
        }
        out.push(f);
    }
    let total = |m: &BTreeMap<String, (ObjectId, u64)>| m.values().map(|v| v.1).sum::<u64>();
    Ok(json!({
        "file_counts": counts,
        "bytes": {"a": total(&fa), "b": total(&fb)},
        "files": out,
    }))
}
