//! Refs (branches, tags, HEAD), the reflog, and revision parsing. All state
//! is in the catalog; every update is a compare-and-swap inside an IMMEDIATE
//! transaction, so concurrent writers can never silently overwrite each other.

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde::Serialize;

use crate::error::{db_err, Error, Result};
use crate::id::{hex_val, CommitId, ObjectId};
use crate::store::Ledger;

/// Prefix of branch refs.
pub const HEADS: &str = "refs/heads/";
/// Prefix of tag refs.
pub const TAGS: &str = "refs/tags/";
/// Prefix of remote-tracking refs (`refs/remotes/<remote>/<branch>`).
pub const REMOTES: &str = "refs/remotes/";

/// Where HEAD points.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Head {
    /// Attached to a branch (full ref name), which may not exist yet (unborn).
    Branch {
        /// Full ref name, e.g. `refs/heads/main`.
        name: String,
        /// Its commit, if the branch exists.
        commit: Option<CommitId>,
    },
    /// Detached at a commit.
    Detached {
        /// The commit.
        commit: CommitId,
    },
}

impl Head {
    /// The commit HEAD resolves to, if any.
    pub fn commit(&self) -> Option<CommitId> {
        match self {
            Head::Branch { commit, .. } => *commit,
            Head::Detached { commit } => Some(*commit),
        }
    }
}

/// One reflog entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReflogEntry {
    /// Sequence number (global, increasing).
    pub seq: i64,
    /// Full ref name.
    #[serde(rename = "ref")]
    pub refname: String,
    /// Old value (`None`: the ref did not exist).
    pub old: Option<CommitId>,
    /// New value (`None`: the ref was deleted).
    pub new: Option<CommitId>,
    /// Unix seconds.
    pub time: i64,
    /// What happened.
    pub message: String,
}

/// Check a short branch or tag name.
pub fn validate_ref_name(name: &str) -> Result<()> {
    let bad = |reason| {
        Err(Error::InvalidRefName {
            name: name.to_string(),
            reason,
        })
    };
    if name.is_empty() {
        return bad("empty");
    }
    if name == "HEAD" {
        return bad("HEAD is reserved");
    }
    if !name
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || b"._-/".contains(&c))
    {
        return bad("only ASCII letters, digits and . _ - / are allowed");
    }
    if name.starts_with(['-', '.', '/']) || name.ends_with(['/', '.']) {
        return bad("must not start with - . / or end with / .");
    }
    if name.contains("..") || name.contains("//") || name.contains("/.") || name.ends_with(".lock")
    {
        return bad("must not contain '..', '//', '/.' or end with .lock");
    }
    Ok(())
}

pub(crate) fn blob(id: &CommitId) -> Vec<u8> {
    id.0.as_bytes().to_vec()
}

fn commit_of(b: Option<Vec<u8>>) -> Option<CommitId> {
    b.and_then(|v| ObjectId::from_slice(&v)).map(CommitId)
}

/// Read a ref row: (target, symbolic).
pub(crate) fn get_ref(
    conn: &Connection,
    name: &str,
) -> Result<Option<(Option<CommitId>, Option<String>)>> {
    conn.query_row(
        "SELECT target, symbolic FROM refs WHERE name = ?1",
        [name],
        |r| {
            Ok((
                commit_of(r.get::<_, Option<Vec<u8>>>(0)?),
                r.get::<_, Option<String>>(1)?,
            ))
        },
    )
    .optional()
    .map_err(db_err(format!("reading ref {name}")))
}

/// Target of a (non-symbolic) ref.
pub(crate) fn ref_target(conn: &Connection, name: &str) -> Result<Option<CommitId>> {
    Ok(get_ref(conn, name)?.and_then(|(t, _)| t))
}

/// Where HEAD points.
pub(crate) fn read_head(conn: &Connection) -> Result<Head> {
    match get_ref(conn, "HEAD")? {
        Some((_, Some(sym))) => {
            let commit = ref_target(conn, &sym)?;
            Ok(Head::Branch { name: sym, commit })
        }
        Some((Some(c), None)) => Ok(Head::Detached { commit: c }),
        _ => Ok(Head::Branch {
            name: format!("{HEADS}main"),
            commit: None,
        }),
    }
}

pub(crate) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn log(
    conn: &Connection,
    refname: &str,
    old: Option<CommitId>,
    new: Option<CommitId>,
    msg: &str,
) -> Result<()> {
    conn.execute(
        "INSERT INTO reflog(ref, old, new, time, message) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            refname,
            old.as_ref().map(blob),
            new.as_ref().map(blob),
            now(),
            msg
        ],
    )
    .map_err(db_err("appending to the reflog"))?;
    Ok(())
}

fn show(c: Option<CommitId>) -> String {
    c.map(|c| c.to_string()).unwrap_or_else(|| "(none)".into())
}

/// Check a full ref name: any namespace `refs/<ns>/<name>` (callers keep
/// their own refs, e.g. pointers that follow a branch, next to heads and
/// tags).
pub(crate) fn validate_full_ref_name(name: &str) -> Result<()> {
    let short = name
        .strip_prefix("refs/")
        .filter(|rest| {
            rest.split_once('/')
                .is_some_and(|(ns, n)| !ns.is_empty() && !n.is_empty())
        })
        .ok_or_else(|| Error::InvalidRefName {
            name: name.to_string(),
            reason: "must be refs/<namespace>/<name>",
        })?;
    validate_ref_name(short)
}

/// Compare-and-swap a ref (must run inside a write transaction). `expected`
/// `Some(x)` requires the current value to be `x` (`None` = absent);
/// `new = None` deletes. Logs to the ref's reflog, and to HEAD's when HEAD is
/// attached to it.
pub(crate) fn cas(
    conn: &Connection,
    name: &str,
    expected: Option<Option<CommitId>>,
    new: Option<CommitId>,
    msg: &str,
) -> Result<()> {
    let cur = if name == "HEAD" {
        match read_head(conn)? {
            Head::Detached { commit } => Some(commit),
            Head::Branch { .. } => None,
        }
    } else {
        ref_target(conn, name)?
    };
    if let Some(exp) = expected {
        if exp != cur {
            return Err(Error::BranchMoved {
                name: name.to_string(),
                expected: show(exp),
                found: show(cur),
            });
        }
    }
    match new {
        Some(n) => conn.execute(
            "INSERT INTO refs(name, target, symbolic) VALUES (?1, ?2, NULL)
             ON CONFLICT(name) DO UPDATE SET target = excluded.target, symbolic = NULL",
            params![name, blob(&n)],
        ),
        None => conn.execute("DELETE FROM refs WHERE name = ?1", [name]),
    }
    .map_err(db_err(format!("updating {name}")))?;
    log(conn, name, cur, new, msg)?;
    if name != "HEAD" {
        if let Head::Branch { name: h, .. } = read_head(conn)? {
            if h == name {
                log(conn, "HEAD", cur, new, msg)?;
            }
        }
    }
    Ok(())
}

impl Ledger {
    /// Where HEAD points.
    pub fn head(&self) -> Result<Head> {
        read_head(&self.db)
    }

    /// Run `f` inside an IMMEDIATE transaction (takes the catalog write lock
    /// up front, so read-check-write sequences are atomic).
    pub(crate) fn write_tx<T>(&mut self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let tx = self
            .db
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db_err("starting a write transaction"))?;
        let v = f(&tx)?;
        tx.commit()
            .map_err(db_err("committing a write transaction"))?;
        Ok(v)
    }

    /// All refs under `prefix` as (short name, commit), sorted.
    pub fn list_refs(&self, prefix: &str) -> Result<Vec<(String, CommitId)>> {
        let mut st = self
            .db
            .prepare("SELECT name, target FROM refs WHERE name >= ?1 AND name < ?2 AND target IS NOT NULL ORDER BY name")
            .map_err(db_err("listing refs"))?;
        let hi = format!("{prefix}\u{10FFFF}");
        let rows = st
            .query_map(params![prefix, hi], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?))
            })
            .map_err(db_err("listing refs"))?;
        let mut out = Vec::new();
        for r in rows {
            let (n, t) = r.map_err(db_err("listing refs"))?;
            if let Some(id) = ObjectId::from_slice(&t) {
                out.push((n[prefix.len()..].to_string(), CommitId(id)));
            }
        }
        Ok(out)
    }

    /// Every ref target plus every commit in the reflog: the roots of
    /// reachability for fsck and gc.
    pub fn root_commits(&self) -> Result<Vec<(String, CommitId)>> {
        let mut out = Vec::new();
        let mut st = self
            .db
            .prepare("SELECT name, target FROM refs WHERE target IS NOT NULL")
            .map_err(db_err("listing refs"))?;
        let rows = st
            .query_map([], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?))
            })
            .map_err(db_err("listing refs"))?;
        for r in rows {
            let (n, t) = r.map_err(db_err("listing refs"))?;
            if let Some(id) = ObjectId::from_slice(&t) {
                out.push((n, CommitId(id)));
            }
        }
        for e in self.reflog_rows()? {
            out.extend(e.roots());
        }
        Ok(out)
    }

    /// Every reflog entry, in no particular order (the roots of
    /// reachability it adds, and what reflog expiry looks at).
    pub(crate) fn reflog_rows(&self) -> Result<Vec<ReflogRow>> {
        let mut st = self
            .db
            .prepare("SELECT ref, seq, old, new, time FROM reflog")
            .map_err(db_err("reading the reflog"))?;
        let rows = st
            .query_map([], |r| {
                Ok(ReflogRow {
                    name: r.get(0)?,
                    seq: r.get(1)?,
                    old: commit_of(r.get(2)?),
                    new: commit_of(r.get(3)?),
                    time: r.get(4)?,
                })
            })
            .map_err(db_err("reading the reflog"))?;
        rows.map(|r| r.map_err(db_err("reading the reflog")))
            .collect()
    }

    /// Create a branch at `at`; fails if it exists.
    pub fn create_branch(&mut self, name: &str, at: CommitId) -> Result<()> {
        self.create_ref(HEADS, "branch", name, at)
    }

    /// Create `prefix` + `name` at `at`, failing if it exists; `what` names
    /// the kind of ref in the reflog.
    fn create_ref(&mut self, prefix: &str, what: &str, name: &str, at: CommitId) -> Result<()> {
        validate_ref_name(name)?;
        let full = format!("{prefix}{name}");
        self.write_tx(|c| {
            if get_ref(c, &full)?.is_some() {
                return Err(Error::RefExists { name: full.clone() });
            }
            cas(
                c,
                &full,
                Some(None),
                Some(at),
                &format!("{what}: created at {at}"),
            )
        })
    }

    /// Delete a branch (not the one HEAD is attached to). Its own reflog is
    /// kept, so its commits stay reachable for gc until reflog expiry.
    pub fn delete_branch(&mut self, name: &str) -> Result<CommitId> {
        let full = format!("{HEADS}{name}");
        self.write_tx(|c| {
            let cur =
                ref_target(c, &full)?.ok_or_else(|| Error::RefNotFound { name: full.clone() })?;
            if let Head::Branch { name: h, .. } = read_head(c)? {
                if h == full {
                    return Err(Error::InvalidInput {
                        message: format!("cannot delete {name}: HEAD is on it (switch first)"),
                    });
                }
            }
            cas(c, &full, Some(Some(cur)), None, "branch: deleted")?;
            Ok(cur)
        })
    }

    /// Create a tag at `at`; tags move only by [`Ledger::move_tag`].
    pub fn create_tag(&mut self, name: &str, at: CommitId) -> Result<()> {
        self.create_ref(TAGS, "tag", name, at)
    }

    /// Point tag `name` at `at`, creating it if absent (`bat tag -f`).
    /// Returns where it pointed before. Logged in the tag's reflog, which
    /// keeps the old commit reachable until the reflog expires.
    pub fn move_tag(&mut self, name: &str, at: CommitId) -> Result<Option<CommitId>> {
        validate_ref_name(name)?;
        let full = format!("{TAGS}{name}");
        self.write_tx(|c| {
            let old = ref_target(c, &full)?;
            if old != Some(at) {
                cas(
                    c,
                    &full,
                    Some(old),
                    Some(at),
                    &format!("tag: moved to {at}"),
                )?;
            }
            Ok(old)
        })
    }

    /// Delete tag `name`; returns where it pointed. Its reflog is kept (so
    /// its commit stays reachable for gc until reflog expiry).
    pub fn delete_tag(&mut self, name: &str) -> Result<CommitId> {
        let full = format!("{TAGS}{name}");
        self.write_tx(|c| {
            let cur =
                ref_target(c, &full)?.ok_or_else(|| Error::RefNotFound { name: full.clone() })?;
            cas(c, &full, Some(Some(cur)), None, "tag: deleted")?;
            Ok(cur)
        })
    }

    /// Attach HEAD to an existing branch.
    pub fn switch(&mut self, branch: &str) -> Result<CommitId> {
        let full = format!("{HEADS}{branch}");
        self.write_tx(|c| {
            let target =
                ref_target(c, &full)?.ok_or_else(|| Error::RefNotFound { name: full.clone() })?;
            let old = read_head(c)?;
            c.execute(
                "INSERT INTO refs(name, target, symbolic) VALUES ('HEAD', NULL, ?1)
                 ON CONFLICT(name) DO UPDATE SET target = NULL, symbolic = excluded.symbolic",
                [&full],
            )
            .map_err(db_err("updating HEAD"))?;
            log(
                c,
                "HEAD",
                old.commit(),
                Some(target),
                &format!("switch: to {branch}"),
            )?;
            Ok(target)
        })
    }

    /// Move the current branch (or detached HEAD) to `to`. Returns
    /// (ref name, old value). Fails with "branch moved" if it changed since
    /// `expected` (when given).
    pub fn reset(
        &mut self,
        to: CommitId,
        expected: Option<Option<CommitId>>,
    ) -> Result<(String, Option<CommitId>)> {
        self.write_tx(|c| {
            let (name, old) = match read_head(c)? {
                Head::Branch { name, commit } => (name, commit),
                Head::Detached { commit } => ("HEAD".to_string(), Some(commit)),
            };
            cas(
                c,
                &name,
                Some(expected.unwrap_or(old)),
                Some(to),
                &format!("reset: moving to {to}"),
            )?;
            Ok((name, old))
        })
    }

    /// Generic compare-and-swap of a full ref name (`refs/...` or `HEAD`).
    pub fn update_ref(
        &mut self,
        name: &str,
        expected: Option<CommitId>,
        new: Option<CommitId>,
        message: &str,
    ) -> Result<()> {
        if name != "HEAD" {
            validate_full_ref_name(name)?;
        }
        self.write_tx(|c| cas(c, name, Some(expected), new, message))
    }

    /// Reflog entries of a ref (full name, or a branch/tag short name, or
    /// HEAD), newest first.
    pub fn reflog(&self, refname: &str) -> Result<Vec<ReflogEntry>> {
        let full = self.full_ref_name(refname)?;
        let mut st = self
            .db
            .prepare("SELECT seq, ref, old, new, time, message FROM reflog WHERE ref = ?1 ORDER BY seq DESC")
            .map_err(db_err("reading the reflog"))?;
        let rows = st
            .query_map([&full], |r| {
                Ok(ReflogEntry {
                    seq: r.get(0)?,
                    refname: r.get(1)?,
                    old: commit_of(r.get(2)?),
                    new: commit_of(r.get(3)?),
                    time: r.get(4)?,
                    message: r.get(5)?,
                })
            })
            .map_err(db_err("reading the reflog"))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(db_err("reading the reflog"))
    }

    /// Expand a short ref name to the full one used in the catalog.
    pub fn full_ref_name(&self, name: &str) -> Result<String> {
        if name == "HEAD" || name.starts_with("refs/") {
            return Ok(name.to_string());
        }
        for p in [HEADS, TAGS] {
            let full = format!("{p}{name}");
            let exists: bool = self
                .db
                .query_row("SELECT EXISTS(SELECT 1 FROM refs WHERE name = ?1 UNION SELECT 1 FROM reflog WHERE ref = ?1)", [&full], |r| r.get(0))
                .map_err(db_err("looking up a ref"))?;
            if exists {
                return Ok(full);
            }
        }
        Err(Error::RefNotFound {
            name: name.to_string(),
        })
    }

    /// Resolve a revision: full id, unique hex prefix (>= 4), branch, tag,
    /// HEAD, full ref name, each optionally followed by `~N`, `^` or `^N`.
    pub fn resolve(&self, rev: &str) -> Result<CommitId> {
        let split = rev.find(['~', '^']).unwrap_or(rev.len());
        let (base, mut ops) = rev.split_at(split);
        let mut cur = self.resolve_base(base, rev)?;
        while !ops.is_empty() {
            let op = ops.as_bytes()[0];
            let rest = &ops[1..];
            let ndigits = rest.bytes().take_while(u8::is_ascii_digit).count();
            let n: usize = if ndigits == 0 {
                1
            } else {
                rest[..ndigits].parse().map_err(|_| Error::BadRevision {
                    rev: rev.into(),
                    reason: "number too large".into(),
                })?
            };
            ops = &rest[ndigits..];
            if ops.starts_with(|c: char| c != '~' && c != '^') {
                return Err(Error::BadRevision {
                    rev: rev.into(),
                    reason: "expected ~N or ^N".into(),
                });
            }
            if op == b'~' {
                cur = self
                    .first_parents(cur, n as u64)?
                    .map_err(|root| Error::BadRevision {
                        rev: rev.into(),
                        reason: format!("{root} has no parent"),
                    })?;
            } else if n > 0 {
                cur = self
                    .parent_of(&cur, n - 1)?
                    .ok_or_else(|| Error::BadRevision {
                        rev: rev.into(),
                        reason: format!("{cur} has no parent number {n}"),
                    })?;
            }
        }
        Ok(cur)
    }

    fn resolve_base(&self, base: &str, rev: &str) -> Result<CommitId> {
        if base.is_empty() {
            return Err(Error::BadRevision {
                rev: rev.into(),
                reason: "empty revision".into(),
            });
        }
        if base == "HEAD" {
            return self.head()?.commit().ok_or_else(|| Error::BadRevision {
                rev: rev.into(),
                reason: "HEAD has no commits yet".into(),
            });
        }
        if base.starts_with("refs/") {
            if let Some(c) = ref_target(&self.db, base)? {
                return Ok(c);
            }
        }
        for p in [HEADS, TAGS] {
            if let Some(c) = ref_target(&self.db, &format!("{p}{base}"))? {
                return Ok(c);
            }
        }
        // `origin/main`: a remote-tracking branch, after local branches and
        // tags (as in git, a local name wins).
        if base.contains('/') {
            if let Some(c) = ref_target(&self.db, &format!("{REMOTES}{base}"))? {
                return Ok(c);
            }
        }
        if base.len() >= 4 && base.len() <= 64 && base.bytes().all(|c| hex_val(c).is_some()) {
            let lower = base.to_ascii_lowercase();
            let lo = ObjectId::from_hex(&format!("{lower:0<64}")).expect("valid hex");
            let hi = ObjectId::from_hex(&format!("{lower:f<64}")).expect("valid hex");
            let mut st = self
                .db
                .prepare_cached(
                    "SELECT id FROM commits WHERE id >= ?1 AND id <= ?2 ORDER BY id LIMIT 11",
                )
                .map_err(db_err("resolving a prefix"))?;
            let rows = st
                .query_map(
                    params![lo.as_bytes().as_slice(), hi.as_bytes().as_slice()],
                    |r| r.get::<_, Vec<u8>>(0),
                )
                .map_err(db_err("resolving a prefix"))?;
            let mut found = Vec::new();
            for r in rows {
                if let Some(id) = ObjectId::from_slice(&r.map_err(db_err("resolving a prefix"))?) {
                    found.push(CommitId(id));
                }
            }
            match found.len() {
                0 => {}
                1 => return Ok(found[0]),
                _ => {
                    return Err(Error::AmbiguousPrefix {
                        prefix: base.to_string(),
                        candidates: found.iter().map(|c| c.to_string()).collect(),
                    })
                }
            }
        }
        self.remote_only_name(base, rev)?;
        Err(Error::UnknownRevision {
            rev: rev.to_string(),
        })
    }

    /// A name that is no local branch or tag but a branch of one or more
    /// remotes (`main` with only `origin/main`): refused with the
    /// remote-tracking names to choose from, never guessed.
    fn remote_only_name(&self, base: &str, rev: &str) -> Result<()> {
        let mut st = self
            .db
            .prepare_cached("SELECT name FROM refs WHERE name LIKE ?1 ESCAPE '\\'")
            .map_err(db_err("looking up remote-tracking refs"))?;
        let escaped: String = base
            .chars()
            .flat_map(|c| match c {
                '%' | '_' | '\\' => vec!['\\', c],
                c => vec![c],
            })
            .collect();
        let rows = st
            .query_map([format!("{REMOTES}%/{escaped}")], |r| r.get::<_, String>(0))
            .map_err(db_err("looking up remote-tracking refs"))?;
        let mut names = Vec::new();
        for r in rows {
            let full = r.map_err(db_err("looking up remote-tracking refs"))?;
            let short = full.trim_start_matches(REMOTES);
            // Only `<remote>/<base>`, not `<remote>/x/<base>`.
            if short.split_once('/').map(|x| x.1) == Some(base) {
                names.push(short.to_string());
            }
        }
        if names.is_empty() {
            return Ok(());
        }
        let reason = if names.len() == 1 {
            format!(
                "no local branch or tag {base}; the remote-tracking branch is {}",
                names[0]
            )
        } else {
            format!(
                "ambiguous: no local branch or tag {base}, and several remotes have it ({}); name one",
                names.join(", ")
            )
        };
        Err(Error::BadRevision {
            rev: rev.into(),
            reason,
        })
    }
}

/// One reflog row as reachability and expiry read it.
pub(crate) struct ReflogRow {
    /// The ref it logs.
    pub(crate) name: String,
    /// Its sequence number.
    pub(crate) seq: i64,
    /// The commit before the move, if any.
    pub(crate) old: Option<CommitId>,
    /// The commit after the move, if any.
    pub(crate) new: Option<CommitId>,
    /// When, in Unix seconds.
    pub(crate) time: i64,
}

impl ReflogRow {
    /// The commits this entry holds, named `reflog REF@SEQ`.
    pub(crate) fn roots(&self) -> impl Iterator<Item = (String, CommitId)> + '_ {
        [self.old, self.new]
            .into_iter()
            .flatten()
            .map(|c| (format!("reflog {}@{}", self.name, self.seq), c))
    }
}
