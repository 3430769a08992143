//! The import policy: what a tree may hold, in one place. Recording a
//! directory, every import (bundle, clone and fetch from any remote, a
//! server's `/v1/put` and ref update) and checkout all ask [`TreeCheck`],
//! so nothing enters a ledger that checkout would then refuse to write.
//!
//! Two kinds of rule:
//! - rules of one tree object, wherever it sits ([`check_local`]): entries
//!   per tree, name length, no `.bat` entry, no two names that fold to the
//!   same name on a case-insensitive file system, symlink targets no
//!   longer than a path;
//! - rules of a position ([`TreeCheck::check_root`]): path depth, path
//!   length, and symlinks that are absolute or climb out of the tree.
//!
//! Trees are content-addressed, so one subtree can sit at many positions
//! (a hostile tree names the same child twice at every level: 2^64 paths
//! in 64 small objects). The walk therefore keeps a position-independent
//! summary of every subtree it finished (how deep and how long its paths
//! are, how far its symlinks climb) and checks a repeated subtree against
//! its summary: each tree object is read once per walk. The walk keeps its
//! own stack (no recursion), and refuses a path the moment it passes a
//! limit, so a tree 20,000 levels deep costs at most `max_depth` reads.

use std::collections::HashMap;
use std::path::{Component, Path};

use crate::error::{Error, Result};
use crate::id::{ObjectId, TreeId};
use crate::object::{Mode, Tree};
use crate::store::LEDGER_DIR;

/// The size limits on trees, with defaults chosen so that any tree within
/// them can be checked out on Linux, macOS and Windows file systems.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most components in one path (a file directly in the root has 1).
    pub max_depth: u32,
    /// Most bytes in one path relative to the tree root (`/`-separated).
    pub max_path_bytes: u32,
    /// Most bytes in one entry name.
    pub max_name_bytes: u32,
    /// Most entries in one tree object.
    pub max_entries: u32,
}

/// Default [`Limits::max_depth`]: 256 levels. Real checkpoints and data
/// sets nest a few levels; a 1-byte-per-level path of 256 levels still
/// fits in [`DEFAULT_MAX_PATH`].
pub const DEFAULT_MAX_DEPTH: u32 = 256;
/// Default [`Limits::max_path_bytes`]: 4096, Linux's `PATH_MAX` (a longer
/// relative path cannot be opened in one call once checked out).
pub const DEFAULT_MAX_PATH: u32 = 4096;
/// Default [`Limits::max_name_bytes`]: 255, `NAME_MAX` on Linux and the
/// longest name ext4, XFS, btrfs and APFS accept.
pub const DEFAULT_MAX_NAME: u32 = 255;
/// Default [`Limits::max_entries`]: 1,000,000 entries in one directory
/// (a tree object of about 60 MB); far beyond any real directory, and it
/// bounds the memory one decoded tree takes.
pub const DEFAULT_MAX_ENTRIES: u32 = 1_000_000;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: DEFAULT_MAX_DEPTH,
            max_path_bytes: DEFAULT_MAX_PATH,
            max_name_bytes: DEFAULT_MAX_NAME,
            max_entries: DEFAULT_MAX_ENTRIES,
        }
    }
}

/// Which rule a tree breaks, with the figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    /// A path has more components than the limit.
    TooDeep {
        /// Components of the path (or at least this many).
        depth: u64,
        /// The limit.
        limit: u32,
    },
    /// A path is longer than the limit.
    PathTooLong {
        /// Bytes of the path (or at least this many).
        bytes: u64,
        /// The limit.
        limit: u32,
    },
    /// An entry name is longer than the limit.
    NameTooLong {
        /// Bytes of the name.
        bytes: u64,
        /// The limit.
        limit: u32,
    },
    /// A tree has more entries than the limit.
    TooManyEntries {
        /// Entries of the tree.
        entries: u64,
        /// The limit.
        limit: u32,
    },
    /// An entry is named `.bat` (a planted ledger).
    LedgerDir,
    /// Two names of one tree are the same on a case-insensitive file
    /// system.
    CaseCollision {
        /// The other name.
        other: String,
    },
    /// A symlink is absolute or climbs out of the tree.
    SymlinkEscapes {
        /// Its target.
        target: String,
    },
    /// An entry name that is empty, `.`, `..`, or holds `/` or NUL.
    BadName {
        /// What is wrong.
        reason: String,
    },
    /// A symlink target is longer than a path may be, or is not stored
    /// whole.
    BadSymlinkTarget {
        /// What is wrong.
        reason: String,
    },
}

impl Rule {
    /// A stable short name (for the error code).
    pub fn code(&self) -> &'static str {
        match self {
            Rule::TooDeep { .. } => "tree_too_deep",
            Rule::PathTooLong { .. } => "path_too_long",
            Rule::NameTooLong { .. } => "name_too_long",
            Rule::TooManyEntries { .. } => "too_many_entries",
            Rule::LedgerDir => "ledger_dir_entry",
            Rule::CaseCollision { .. } => "case_collision",
            Rule::SymlinkEscapes { .. } => "symlink_escapes",
            Rule::BadSymlinkTarget { .. } => "bad_symlink_target",
            Rule::BadName { .. } => "bad_name",
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rule::TooDeep { depth, limit } => write!(
                f,
                "the tree is nested {depth} or more levels deep, more than the limit of {limit}"
            ),
            Rule::PathTooLong { bytes, limit } => write!(
                f,
                "a path is {bytes} or more bytes long, more than the limit of {limit}"
            ),
            Rule::NameTooLong { bytes, limit } => write!(
                f,
                "a name is {bytes} bytes long, more than the limit of {limit}"
            ),
            Rule::TooManyEntries { entries, limit } => write!(
                f,
                "a directory holds {entries} entries, more than the limit of {limit}"
            ),
            Rule::LedgerDir => write!(
                f,
                "a recorded tree never holds a ledger directory ({LEDGER_DIR}, in any case)"
            ),
            Rule::CaseCollision { other } => write!(
                f,
                "the name is the same as {} on a case-insensitive file system",
                shown(other)
            ),
            Rule::SymlinkEscapes { target } => write!(
                f,
                "the symlink points to {}, outside the tree (absolute or climbing out with ..)",
                shown(target)
            ),
            Rule::BadSymlinkTarget { reason } => write!(f, "the symlink {reason}"),
            Rule::BadName { reason } => write!(f, "the entry name is invalid: {reason}"),
        }
    }
}

/// A name or path as an error shows it: quoted, control characters
/// escaped, and cut in the middle past 160 bytes.
pub fn shown(s: &str) -> String {
    const KEEP: usize = 80;
    if s.len() <= 2 * KEEP {
        return format!("{s:?}");
    }
    let mut head = KEEP;
    while !s.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = s.len() - KEEP;
    while !s.is_char_boundary(tail) {
        tail += 1;
    }
    format!(
        "{:?}…({} bytes)…{:?}",
        &s[..head],
        s.len() - head - (s.len() - tail),
        &s[tail..]
    )
}

fn refused(id: ObjectId, path: &str, rule: Rule) -> Error {
    Error::TreeRefused {
        id,
        place: if path.is_empty() {
            "at the root of the tree".to_string()
        } else {
            format!("at {}", shown(path))
        },
        rule,
    }
}

/// How far above the directory holding a symlink its target reaches:
/// `Some(0)` when it never leaves that directory, `Some(n)` when it climbs
/// `n` levels above it at its highest point, `None` when it is absolute
/// (or otherwise not relative). A link in a directory `d` levels below the
/// root escapes exactly when this is `None` or more than `d`.
pub fn symlink_climb(target: &Path) -> Option<u64> {
    let mut level: i64 = 0;
    let mut lowest: i64 = 0;
    for c in target.components() {
        match c {
            Component::Normal(_) => level += 1,
            Component::ParentDir => {
                level -= 1;
                lowest = lowest.min(level);
            }
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(lowest.unsigned_abs())
}

fn target_path(bytes: &[u8]) -> &Path {
    use std::os::unix::ffi::OsStrExt;
    Path::new(std::ffi::OsStr::from_bytes(bytes))
}

/// The rules of one tree object, wherever it sits: entry count, name
/// length, no `.bat` entry, no case-fold collision, symlink targets no
/// longer than a path. `path` only names the tree in the error.
pub fn check_local(id: ObjectId, tree: &Tree, path: &str, limits: &Limits) -> Result<()> {
    let join = |name: &str| join(path, name);
    if tree.entries.len() as u64 > u64::from(limits.max_entries) {
        return Err(refused(
            id,
            path,
            Rule::TooManyEntries {
                entries: tree.entries.len() as u64,
                limit: limits.max_entries,
            },
        ));
    }
    let mut folded: HashMap<String, &str> = HashMap::with_capacity(tree.entries.len());
    for e in &tree.entries {
        if e.name.len() as u64 > u64::from(limits.max_name_bytes) {
            return Err(refused(
                id,
                &join(&e.name),
                Rule::NameTooLong {
                    bytes: e.name.len() as u64,
                    limit: limits.max_name_bytes,
                },
            ));
        }
        // The decoder already refuses empty names, `.`, `..`, `/` and NUL;
        // ask again so a tree built in memory obeys the same rules.
        if let Err(reason) = crate::object::validate_name(&e.name) {
            return Err(refused(id, &join(&e.name), Rule::BadName { reason }));
        }
        if e.name.eq_ignore_ascii_case(LEDGER_DIR) {
            return Err(refused(id, &join(&e.name), Rule::LedgerDir));
        }
        if e.mode == Mode::Symlink && e.size > u64::from(limits.max_path_bytes) {
            return Err(refused(
                id,
                &join(&e.name),
                Rule::BadSymlinkTarget {
                    reason: format!(
                        "target is {} bytes, longer than the path limit of {}",
                        e.size, limits.max_path_bytes
                    ),
                },
            ));
        }
        if let Some(other) = folded.insert(e.name.to_lowercase(), &e.name) {
            return Err(refused(
                id,
                &join(&e.name),
                Rule::CaseCollision {
                    other: other.to_string(),
                },
            ));
        }
    }
    Ok(())
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}/{name}")
    }
}

/// Where [`TreeCheck`] reads trees and symlink targets: the store, or a
/// batch being imported on top of it.
pub trait TreeSource {
    /// The tree `id` (an error when it cannot be read).
    fn tree(&mut self, id: &ObjectId) -> Result<Tree>;
    /// The bytes of a symlink target, or `None` when they are not here (a
    /// partial clone's promised file, a pruned one): checkout checks the
    /// link again once it has the bytes.
    fn symlink_target(&mut self, id: &ObjectId) -> Result<Option<Vec<u8>>>;
}

/// A read-only ledger as a [`TreeSource`].
pub struct StoreSource<'a>(pub &'a crate::store::Ledger);

impl TreeSource for StoreSource<'_> {
    fn tree(&mut self, id: &ObjectId) -> Result<Tree> {
        self.0.read_tree(&TreeId(*id))
    }

    fn symlink_target(&mut self, id: &ObjectId) -> Result<Option<Vec<u8>>> {
        // Only what is stored here: a partial clone's promised target is
        // not fetched in the middle of a check.
        if self.0.locate(id)?.is_none() {
            return Ok(None);
        }
        match self.0.read_bytes(id) {
            Ok(b) => Ok(Some(b)),
            Err(Error::ObjectMissing { .. } | Error::Pruned { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// What a finished subtree holds, relative to its own directory.
#[derive(Debug, Clone, Copy, Default)]
struct Summary {
    /// Most components of a path below it (0: empty).
    depth: u64,
    /// Most bytes of a path below it.
    longest: u64,
    /// How far above its directory its symlinks climb at most
    /// (`u64::MAX`: an absolute one).
    climb: u64,
}

impl Summary {
    /// Fold a child entry (name of `name_len` bytes; `below` its summary
    /// when it is a directory, `climb` for a symlink) into this one.
    fn fold(&mut self, name_len: u64, below: Option<&Summary>, climb: u64) {
        let (depth, longest, up) = match below {
            Some(s) if s.depth > 0 => (1 + s.depth, name_len + 1 + s.longest, s.climb),
            Some(s) => (1, name_len, s.climb),
            None => (1, name_len, climb.saturating_add(1)),
        };
        self.depth = self.depth.max(depth);
        self.longest = self.longest.max(longest);
        // A climb of n from a child directory is n-1 from here.
        self.climb = self.climb.max(up.saturating_sub(1));
    }
}

struct Frame {
    id: ObjectId,
    tree: Tree,
    next: usize,
    /// Length of the prefix before this directory's name was appended.
    parent_len: usize,
    /// Bytes of this directory's own name (0 for the root).
    name_len: u64,
    sum: Summary,
}

/// The position rules of [`crate::policy`], walked from a root tree with
/// an explicit stack; finished subtrees are remembered (see the module
/// documentation), also across the roots of one import.
pub struct TreeCheck {
    limits: Limits,
    done: HashMap<ObjectId, Summary>,
}

impl TreeCheck {
    /// A walk under `limits`.
    pub fn new(limits: Limits) -> TreeCheck {
        TreeCheck {
            limits,
            done: HashMap::new(),
        }
    }

    /// True when `id` was walked (as a root or below one).
    pub fn checked(&self, id: &ObjectId) -> bool {
        self.done.contains_key(id)
    }

    /// Check every tree below `root` (local rules included): depth, path
    /// length, symlinks that escape. The first violation is the error, an
    /// [`Error::TreeRefused`] naming the tree that holds the entry, its
    /// path and the rule.
    pub fn check_root(&mut self, root: &TreeId, src: &mut dyn TreeSource) -> Result<()> {
        if self.done.contains_key(&root.0) {
            // Checked as the root of an earlier commit of this walk, or
            // below one; a summary's climb is only a problem at a root.
            return self.check_summary(root.0, "", 0, 0, root.0);
        }
        let l = self.limits;
        let mut prefix = String::new();
        let tree = src.tree(&root.0)?;
        check_local(root.0, &tree, "", &l)?;
        let mut stack = vec![Frame {
            id: root.0,
            tree,
            next: 0,
            parent_len: 0,
            name_len: 0,
            sum: Summary::default(),
        }];
        loop {
            let depth = stack.len() as u64 - 1; // levels above the entries
            let top = stack.last_mut().expect("the root frame is popped last");
            let Some(e) = top.tree.entries.get(top.next).cloned() else {
                let f = stack.pop().expect("a frame is on the stack");
                self.done.insert(f.id, f.sum);
                prefix.truncate(f.parent_len);
                match stack.last_mut() {
                    Some(parent) => parent.sum.fold(f.name_len, Some(&f.sum), 0),
                    None => return Ok(()),
                }
                continue;
            };
            top.next += 1;
            let here = top.id;
            let path = join(&prefix, &e.name);
            if depth + 1 > u64::from(l.max_depth) {
                return Err(refused(
                    here,
                    &path,
                    Rule::TooDeep {
                        depth: depth + 1,
                        limit: l.max_depth,
                    },
                ));
            }
            if path.len() as u64 > u64::from(l.max_path_bytes) {
                return Err(refused(
                    here,
                    &path,
                    Rule::PathTooLong {
                        bytes: path.len() as u64,
                        limit: l.max_path_bytes,
                    },
                ));
            }
            let name_len = e.name.len() as u64;
            match e.mode {
                Mode::File | Mode::Executable => top.sum.fold(name_len, None, 0),
                Mode::Symlink => {
                    let climb = match src.symlink_target(&e.id)? {
                        Some(t) => {
                            let c = symlink_climb(target_path(&t)).unwrap_or(u64::MAX);
                            if c > depth {
                                return Err(refused(
                                    here,
                                    &path,
                                    Rule::SymlinkEscapes {
                                        target: String::from_utf8_lossy(&t).into_owned(),
                                    },
                                ));
                            }
                            c
                        }
                        None => 0,
                    };
                    let top = stack.last_mut().expect("the frame just read");
                    top.sum.fold(name_len, None, climb);
                }
                Mode::Tree => {
                    if self.done.contains_key(&e.id) {
                        self.check_summary(e.id, &path, depth + 1, path.len() as u64, here)?;
                        let s = self.done[&e.id];
                        let top = stack.last_mut().expect("the frame just read");
                        top.sum.fold(name_len, Some(&s), 0);
                        continue;
                    }
                    let tree = src.tree(&e.id)?;
                    check_local(e.id, &tree, &path, &l)?;
                    let parent_len = prefix.len();
                    prefix = path;
                    stack.push(Frame {
                        id: e.id,
                        tree,
                        next: 0,
                        parent_len,
                        name_len,
                        sum: Summary::default(),
                    });
                }
            }
        }
    }

    /// A remembered subtree `id` placed at `path` (`depth` components,
    /// `len` bytes): do its paths and symlinks still fit there?
    fn check_summary(
        &self,
        id: ObjectId,
        path: &str,
        depth: u64,
        len: u64,
        holder: ObjectId,
    ) -> Result<()> {
        let s = self.done[&id];
        let l = &self.limits;
        let sep = u64::from(len > 0);
        if s.depth > 0 && depth + s.depth > u64::from(l.max_depth) {
            return Err(refused(
                holder,
                path,
                Rule::TooDeep {
                    depth: depth + s.depth,
                    limit: l.max_depth,
                },
            ));
        }
        if s.depth > 0 && len + sep + s.longest > u64::from(l.max_path_bytes) {
            return Err(refused(
                holder,
                path,
                Rule::PathTooLong {
                    bytes: len + sep + s.longest,
                    limit: l.max_path_bytes,
                },
            ));
        }
        if s.climb > depth {
            return Err(refused(
                holder,
                path,
                Rule::SymlinkEscapes {
                    target: "(a symlink below it)".into(),
                },
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::{Kind, TreeEntry};

    /// Trees and symlink targets in memory.
    #[derive(Default)]
    struct Mem {
        trees: HashMap<ObjectId, Tree>,
        bytes: HashMap<ObjectId, Vec<u8>>,
        reads: u64,
    }

    impl Mem {
        fn tree(&mut self, entries: Vec<TreeEntry>) -> ObjectId {
            let t = Tree::new(entries).expect("valid tree");
            let id = t.id().0;
            self.trees.insert(id, t);
            id
        }
        fn link(&mut self, name: &str, target: &str) -> TreeEntry {
            let id = Kind::Bytes.id_of(target.as_bytes());
            self.bytes.insert(id, target.as_bytes().to_vec());
            TreeEntry {
                name: name.into(),
                mode: Mode::Symlink,
                id,
                size: target.len() as u64,
            }
        }
    }

    impl TreeSource for Mem {
        fn tree(&mut self, id: &ObjectId) -> Result<Tree> {
            self.reads += 1;
            self.trees
                .get(id)
                .cloned()
                .ok_or(Error::ObjectMissing { id: *id })
        }
        fn symlink_target(&mut self, id: &ObjectId) -> Result<Option<Vec<u8>>> {
            Ok(self.bytes.get(id).cloned())
        }
    }

    fn file(name: &str) -> TreeEntry {
        TreeEntry {
            name: name.into(),
            mode: Mode::File,
            id: ObjectId([1; 32]),
            size: 1,
        }
    }

    fn dir(name: &str, id: ObjectId) -> TreeEntry {
        TreeEntry {
            name: name.into(),
            mode: Mode::Tree,
            id,
            size: 0,
        }
    }

    fn rule_of(r: Result<()>) -> Rule {
        match r {
            Err(Error::TreeRefused { rule, .. }) => rule,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    fn check(m: &mut Mem, root: ObjectId, limits: Limits) -> Result<()> {
        TreeCheck::new(limits).check_root(&TreeId(root), m)
    }

    /// A chain of `n` directories named `d`, a file at the bottom.
    fn chain(m: &mut Mem, n: usize) -> ObjectId {
        let mut id = m.tree(vec![file("f")]);
        for _ in 0..n {
            id = m.tree(vec![dir("d", id)]);
        }
        id
    }

    #[test]
    fn depth_is_refused_past_the_limit_and_read_no_further() {
        let mut m = Mem::default();
        let limits = Limits::default();
        // 255 directories + the file: 256 components, the limit.
        let ok = chain(&mut m, 255);
        check(&mut m, ok, limits).expect("at the limit");
        let deep = chain(&mut m, 20_000);
        m.reads = 0;
        let r = check(&mut m, deep, limits);
        assert_eq!(
            rule_of(r),
            Rule::TooDeep {
                depth: 257,
                limit: 256
            }
        );
        assert!(m.reads <= 257, "read {} trees", m.reads);
    }

    #[test]
    fn a_shared_subtree_is_read_once_and_checked_at_every_place() {
        let mut m = Mem::default();
        // Each level names the level below twice: 2^60 paths, 61 trees.
        let mut id = m.tree(vec![file("f")]);
        for _ in 0..60 {
            id = m.tree(vec![dir("a", id), dir("b", id)]);
        }
        check(&mut m, id, Limits::default()).expect("fits");
        assert!(m.reads <= 61, "read {} trees", m.reads);
        // The same subtree placed deeper than it fits: refused by its
        // summary, without reading it again.
        let sub = id;
        let mut deep = sub;
        for _ in 0..200 {
            deep = m.tree(vec![dir("x", deep)]);
        }
        let both = m.tree(vec![dir("first", sub), dir("second", deep)]);
        let mut walk = TreeCheck::new(Limits::default());
        let r = walk.check_root(&TreeId(both), &mut m);
        assert!(matches!(rule_of(r), Rule::TooDeep { .. }));
    }

    #[test]
    fn path_and_name_lengths_have_limits() {
        let mut m = Mem::default();
        let long = "n".repeat(256);
        let t = m.tree(vec![file(&long)]);
        assert_eq!(
            rule_of(check(&mut m, t, Limits::default())),
            Rule::NameTooLong {
                bytes: 256,
                limit: 255
            }
        );
        let name = "n".repeat(200);
        let mut id = m.tree(vec![file(&name)]);
        for _ in 0..20 {
            id = m.tree(vec![dir(&name, id)]);
        }
        assert!(matches!(
            rule_of(check(&mut m, id, Limits::default())),
            Rule::PathTooLong { .. }
        ));
        let small = Limits {
            max_entries: 2,
            ..Limits::default()
        };
        let t = m.tree(vec![file("a"), file("b"), file("c")]);
        assert!(matches!(
            rule_of(check(&mut m, t, small)),
            Rule::TooManyEntries { entries: 3, .. }
        ));
    }

    #[test]
    fn ledger_dirs_and_case_collisions_are_refused_at_any_level() {
        let mut m = Mem::default();
        for name in [".bat", ".BAT", ".Bat"] {
            let inner = m.tree(vec![file(name)]);
            let root = m.tree(vec![dir("a", inner)]);
            assert_eq!(
                rule_of(check(&mut m, root, Limits::default())),
                Rule::LedgerDir
            );
        }
        let inner = m.tree(vec![file("Readme"), file("README")]);
        let root = m.tree(vec![dir("a", inner)]);
        assert!(matches!(
            rule_of(check(&mut m, root, Limits::default())),
            Rule::CaseCollision { .. }
        ));
        let fine = m.tree(vec![file("readme"), file("readme.md")]);
        check(&mut m, fine, Limits::default()).expect("distinct names");
    }

    #[test]
    fn symlinks_may_not_leave_the_tree_from_wherever_they_sit() {
        let mut m = Mem::default();
        let up = m.link("l", "../x");
        let inner = m.tree(vec![up.clone()]);
        // In a subdirectory, "../x" stays inside.
        let ok = m.tree(vec![dir("a", inner)]);
        check(&mut m, ok, Limits::default()).expect("stays inside");
        // At the root, it escapes.
        let bad = m.tree(vec![up]);
        assert!(matches!(
            rule_of(check(&mut m, bad, Limits::default())),
            Rule::SymlinkEscapes { .. }
        ));
        // The subtree that was fine at depth 1 escapes when shared at the
        // root of another commit of the same walk.
        let mut walk = TreeCheck::new(Limits::default());
        walk.check_root(&TreeId(ok), &mut m).expect("fine");
        let r = walk.check_root(&TreeId(inner), &mut m);
        assert!(matches!(rule_of(r), Rule::SymlinkEscapes { .. }));
        for target in ["/etc/passwd", "a/../../../x", "../../y"] {
            let l = m.link("l", target);
            let inner = m.tree(vec![l]);
            let root = m.tree(vec![dir("a", inner)]);
            assert!(
                matches!(
                    rule_of(check(&mut m, root, Limits::default())),
                    Rule::SymlinkEscapes { .. }
                ),
                "{target}"
            );
        }
        let l = m.link("l", "b/../c/./d");
        let root = m.tree(vec![l]);
        check(&mut m, root, Limits::default()).expect("stays inside");
    }

    #[test]
    fn climb_measures_the_highest_point() {
        assert_eq!(symlink_climb(Path::new("x")), Some(0));
        assert_eq!(symlink_climb(Path::new("../x")), Some(1));
        assert_eq!(symlink_climb(Path::new("a/../../b/../..")), Some(2));
        assert_eq!(symlink_climb(Path::new("/x")), None);
    }

    #[test]
    fn long_paths_are_shown_shortened_and_escaped() {
        let s = shown(&format!("{}\u{1b}[31m{}", "a".repeat(100), "b".repeat(100)));
        assert!(s.len() < 220, "{s}");
        assert!(!s.contains('\u{1b}'), "{s}");
    }
}
