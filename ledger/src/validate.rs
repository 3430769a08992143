//! The structural rules every stored tree and commit obeys, in one place:
//! import (clone, fetch, bundles, a server's `/v1/put`), a server's ref
//! update and fsck all ask these functions, so nothing can enter a ledger
//! that fsck would then call damaged.

use crate::id::ObjectId;
use crate::object::{Commit, Kind, Mode, TreeEntry};

/// What the store (or the batch being imported) knows about an object:
/// its kind and raw length, or nothing.
pub type Found = Option<(Kind, u64)>;

/// Why an entry or reference breaks the rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// The referenced object is not stored.
    Missing {
        /// What refers to it ("subtree \"x\"", "tree of the commit", ...).
        what: String,
        /// The missing id.
        id: ObjectId,
    },
    /// The referenced object exists but is the wrong kind or size.
    Mismatch {
        /// What refers to it.
        what: String,
        /// The referenced id.
        id: ObjectId,
        /// Details.
        reason: String,
    },
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Violation::Missing { what, id } => write!(f, "{what} {id} is not stored"),
            Violation::Mismatch { what, id, reason } => write!(f, "{what} {id}: {reason}"),
        }
    }
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Bytes => "a bytes object",
        Kind::Tree => "a tree",
        Kind::Commit => "a commit",
        Kind::ChunkList => "a chunk list",
    }
}

/// Check one tree entry against what its id names: a subtree entry names
/// a tree; a file or symlink entry names a bytes object of exactly the
/// entry's size. `missing_file_ok`: a partial clone may lack file bytes
/// (its promisor keeps them); subtrees are never optional.
pub fn check_entry(e: &TreeEntry, found: Found, missing_file_ok: bool) -> Result<(), Violation> {
    let what = match e.mode {
        Mode::Tree => format!("subtree {:?}", e.name),
        Mode::Symlink => format!("symlink {:?}", e.name),
        Mode::File | Mode::Executable => format!("file {:?}", e.name),
    };
    let Some((kind, len)) = found else {
        if e.mode != Mode::Tree && missing_file_ok {
            return Ok(());
        }
        return Err(Violation::Missing { what, id: e.id });
    };
    let want = if e.mode == Mode::Tree {
        Kind::Tree
    } else {
        Kind::Bytes
    };
    if kind != want {
        return Err(Violation::Mismatch {
            what,
            id: e.id,
            reason: format!("names {} instead of {}", kind_name(kind), kind_name(want)),
        });
    }
    if want == Kind::Bytes && len != e.size {
        return Err(Violation::Mismatch {
            what,
            id: e.id,
            reason: format!("the tree says {} bytes, the object has {len}", e.size),
        });
    }
    Ok(())
}

/// Check a commit's references: its tree is a stored tree, each parent a
/// stored commit. `lookup` answers for any id.
pub fn check_commit(
    c: &Commit,
    lookup: &mut dyn FnMut(&ObjectId) -> crate::Result<Found>,
) -> crate::Result<Result<(), Violation>> {
    let refs = std::iter::once((c.tree.0, Kind::Tree, "tree of the commit".to_string())).chain(
        c.parents
            .iter()
            .enumerate()
            .map(|(i, p)| (p.0, Kind::Commit, format!("parent {i} of the commit"))),
    );
    for (id, want, what) in refs {
        match lookup(&id)? {
            None => return Ok(Err(Violation::Missing { what, id })),
            Some((k, _)) if k != want => {
                return Ok(Err(Violation::Mismatch {
                    what,
                    id,
                    reason: format!("names {} instead of {}", kind_name(k), kind_name(want)),
                }))
            }
            Some(_) => {}
        }
    }
    Ok(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(mode: Mode, size: u64) -> TreeEntry {
        TreeEntry {
            name: "x".into(),
            mode,
            id: ObjectId([7; 32]),
            size,
        }
    }

    #[test]
    fn entries_must_name_the_right_kind_and_size() {
        let f = entry(Mode::File, 5);
        assert!(check_entry(&f, Some((Kind::Bytes, 5)), false).is_ok());
        assert!(check_entry(&f, Some((Kind::Bytes, 6)), false).is_err());
        assert!(check_entry(&f, Some((Kind::Tree, 0)), false).is_err());
        assert!(check_entry(&f, None, false).is_err());
        assert!(check_entry(&f, None, true).is_ok());
        let t = entry(Mode::Tree, 0);
        assert!(check_entry(&t, Some((Kind::Tree, 40)), false).is_ok());
        assert!(check_entry(&t, Some((Kind::Bytes, 0)), false).is_err());
        assert!(check_entry(&t, None, true).is_err());
        let s = entry(Mode::Symlink, 3);
        assert!(check_entry(&s, Some((Kind::ChunkList, 3)), false).is_err());
    }
}
