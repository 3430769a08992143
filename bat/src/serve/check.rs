//! Server-side checks before a ref moves: the new commit and everything it
//! reaches are stored, and (unless forced) the move is a fast-forward.

use std::collections::HashSet;

use bat_ledger::{CommitId, Kind, Ledger, Mode, TreeId};

/// Why a ref update was refused.
#[derive(Debug, thiserror::Error)]
pub enum RefCheckError {
    /// The ledger could not be read.
    #[error(transparent)]
    Ledger(#[from] bat_ledger::Error),
    /// Something the new commit reaches is not stored.
    #[error("{what} {id} is not stored on the server (push its objects first)")]
    Missing {
        /// "commit", "tree" or "file".
        what: &'static str,
        /// Hex id.
        id: String,
    },
    /// Something the new commit reaches is stored but breaks the rules
    /// fsck applies (a ref naming a file, a tree entry of the wrong kind
    /// or size).
    #[error("{id}: {reason}")]
    Invalid {
        /// Hex id of the offending commit or tree.
        id: String,
        /// What is wrong.
        reason: String,
    },
}

impl bat_ledger::Diagnostic for RefCheckError {
    fn kind(&self) -> bat_ledger::ErrorKind {
        match self {
            RefCheckError::Ledger(e) => e.kind(),
            _ => bat_ledger::ErrorKind::User,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            RefCheckError::Ledger(e) => e.hint(),
            _ => None,
        }
    }

    fn code(&self) -> Option<String> {
        match self {
            RefCheckError::Ledger(e) => e.code(),
            _ => None,
        }
    }
}

/// Walk the history of `new` back to `stop` (exclusive; it is the ref's
/// current value, already complete on the server) and check that every
/// commit, tree and file reached is stored. Returns true when `stop` is an
/// ancestor of `new` (or `stop` is None): the update is a fast-forward.
pub fn check_update(
    l: &Ledger,
    new: CommitId,
    stop: Option<CommitId>,
) -> Result<bool, RefCheckError> {
    let mut seen_commits: HashSet<CommitId> = HashSet::new();
    let mut seen_trees: HashSet<TreeId> = HashSet::new();
    let mut found_stop = stop.is_none();
    // The import policy (bat_ledger::policy), on every commit the move
    // brings: the same rules its objects met on `/v1/put`, asked again of
    // the whole tree in place (objects put in several requests, or stored
    // before the rules existed).
    let mut policy = bat_ledger::TreeCheck::new(bat_ledger::Limits::default());
    let mut stack = vec![new];
    while let Some(c) = stack.pop() {
        if Some(c) == stop {
            found_stop = true;
            continue;
        }
        if !seen_commits.insert(c) {
            continue;
        }
        match l.locate(&c.0)? {
            None => {
                return Err(RefCheckError::Missing {
                    what: "commit",
                    id: c.to_string(),
                })
            }
            Some(row) if row.kind != Kind::Commit => {
                return Err(RefCheckError::Invalid {
                    id: c.to_string(),
                    reason: "is not a commit".into(),
                })
            }
            Some(_) => {}
        }
        let commit = l.read_commit(&c)?;
        check_tree(l, commit.tree, &mut seen_trees)?;
        policy.check_root(&commit.tree, &mut bat_ledger::policy::StoreSource(l))?;
        stack.extend(commit.parents.iter().copied());
    }
    Ok(found_stop)
}

fn check_tree(l: &Ledger, root: TreeId, seen: &mut HashSet<TreeId>) -> Result<(), RefCheckError> {
    let mut stack = vec![root];
    while let Some(t) = stack.pop() {
        if !seen.insert(t) {
            continue;
        }
        match l.locate(&t.0)? {
            None => {
                return Err(RefCheckError::Missing {
                    what: "tree",
                    id: t.to_string(),
                })
            }
            Some(row) if row.kind != Kind::Tree => {
                return Err(RefCheckError::Invalid {
                    id: t.to_string(),
                    reason: "is not a tree".into(),
                })
            }
            Some(_) => {}
        }
        let tree = l.read_tree(&t)?;
        for e in &tree.entries {
            // A file pruned here (or received marked absent) counts as
            // a file of its recorded size, as import and fsck count it.
            let found = match l.locate(&e.id)? {
                Some(r) => Some((r.kind, r.raw_len)),
                None if e.mode != Mode::Tree => {
                    l.pruned_file(&e.id)?.map(|p| (Kind::Bytes, p.size))
                }
                None => None,
            };
            if found.is_none() {
                return Err(RefCheckError::Missing {
                    what: if e.mode == Mode::Tree { "tree" } else { "file" },
                    id: e.id.to_hex(),
                });
            }
            // The same rules import and fsck apply.
            bat_ledger::validate::check_entry(e, found, false).map_err(|v| {
                RefCheckError::Invalid {
                    id: t.to_string(),
                    reason: v.to_string(),
                }
            })?;
            if e.mode == Mode::Tree {
                stack.push(TreeId(e.id));
            }
        }
    }
    Ok(())
}
