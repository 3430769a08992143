//! The SQLite catalog: schema, format version, and row helpers. It locates
//! objects in packs, holds refs/HEAD/reflog, and indexes commits. Everything
//! but refs and the reflog can be re-derived from the packs.

use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension};

use crate::error::{db_err, Result};
use crate::id::ObjectId;
use crate::object::Kind;

/// The on-disk format version this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;

/// Encoding code: the object is one record in a pack.
pub const ENC_PACKED: i64 = 1;
/// Encoding code: the object is a large file described by a chunk list.
pub const ENC_CHUNKED: i64 = 2;
/// Encoding code: one record in a pack whose payload is a delta against the
/// object in the `base` column (FORMAT.md §12).
pub const ENC_DELTA: i64 = 3;

/// Schema, created by `init` in one transaction.
pub const SCHEMA: &str = r#"
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE packs(pack_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE objects(
    id BLOB PRIMARY KEY,
    kind INTEGER NOT NULL,
    raw_len INTEGER NOT NULL,
    encoding INTEGER NOT NULL,
    pack_id INTEGER REFERENCES packs(pack_id),
    offset INTEGER,
    stored_len INTEGER,
    base BLOB
) WITHOUT ROWID;
CREATE INDEX objects_pack ON objects(pack_id);
CREATE TABLE refs(name TEXT PRIMARY KEY, target BLOB, symbolic TEXT);
CREATE TABLE reflog(
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    ref TEXT NOT NULL,
    old BLOB,
    new BLOB,
    time INTEGER NOT NULL,
    message TEXT NOT NULL
);
CREATE INDEX reflog_ref ON reflog(ref, seq);
CREATE TABLE commits(
    id BLOB PRIMARY KEY,
    tree BLOB NOT NULL,
    time INTEGER NOT NULL,
    author TEXT NOT NULL,
    message TEXT NOT NULL,
    logical_bytes INTEGER NOT NULL,
    body BLOB
) WITHOUT ROWID;
CREATE TABLE commit_bodies(id BLOB PRIMARY KEY, body BLOB NOT NULL);
CREATE TABLE commit_parents(
    commit_id BLOB NOT NULL, idx INTEGER NOT NULL, parent BLOB NOT NULL,
    PRIMARY KEY(commit_id, idx)
) WITHOUT ROWID;
CREATE TABLE commit_fields(
    commit_id BLOB NOT NULL, key TEXT NOT NULL, type TEXT NOT NULL, value,
    PRIMARY KEY(commit_id, key)
) WITHOUT ROWID;
CREATE INDEX commit_fields_kv ON commit_fields(key, value);
"#;

/// Version of the catalog's table layout (meta key `catalog_schema`; a
/// catalog without the key is version 1). Unlike [`FORMAT_VERSION`] this
/// changes only derived tables, so an older catalog is upgraded in place
/// when it is opened (see [`upgrade`]).
pub const CATALOG_SCHEMA: u32 = 3;

/// Commits whose canonical encoding is at most this long keep a copy of it
/// in `commit_bodies` (schema 3; `commits.body` in schema 2), so history
/// listings read the catalog instead of one pack record per commit. Larger commits (`body` NULL) are read from their
/// pack; the bound keeps the catalog small whatever callers put in metadata.
pub const MAX_INDEXED_BODY: usize = 32 << 10;

/// Where and how an object is stored. New storage encodings (e.g. a delta
/// against a base object) become new variants; ids never change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// One record in a pack segment.
    Packed {
        /// Catalog pack id.
        pack_id: i64,
        /// Record offset in the pack file.
        offset: u64,
        /// Stored payload length.
        stored_len: u64,
    },
    /// A large file: its bytes are the chunks of the chunk-list object `list`.
    Chunked {
        /// Id of the chunk-list object.
        list: ObjectId,
    },
    /// One record in a pack whose payload is a delta against `base` (which
    /// must be read, verified, first).
    Delta {
        /// Catalog pack id.
        pack_id: i64,
        /// Record offset in the pack file.
        offset: u64,
        /// Stored payload length.
        stored_len: u64,
        /// The base object.
        base: ObjectId,
    },
}

impl Location {
    /// `(pack_id, offset, stored_len)` of the record, for record-stored
    /// objects (packed or delta).
    pub fn record(&self) -> Option<(i64, u64, u64)> {
        match *self {
            Location::Packed {
                pack_id,
                offset,
                stored_len,
            }
            | Location::Delta {
                pack_id,
                offset,
                stored_len,
                ..
            } => Some((pack_id, offset, stored_len)),
            Location::Chunked { .. } => None,
        }
    }
}

/// One catalog row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRow {
    /// Object id.
    pub id: ObjectId,
    /// Kind.
    pub kind: Kind,
    /// Uncompressed length.
    pub raw_len: u64,
    /// Location.
    pub location: Location,
}

/// A row whose pack is not yet known (staged by a writer before its pack
/// segment is registered in the transaction).
#[derive(Debug, Clone)]
pub(crate) struct StagedRow {
    pub id: ObjectId,
    pub kind: Kind,
    pub raw_len: u64,
    /// `Some((offset, stored_len))` in this session's pack, or chunked.
    pub packed: Option<(u64, u64)>,
    pub chunk_list: Option<ObjectId>,
    /// Delta base of a packed row.
    pub delta_base: Option<ObjectId>,
}

/// Open the catalog for reading only, writing nothing at all (not even
/// the WAL index): the fallback when a normal open fails, as it does on a
/// 100% full disk. Only when no write-ahead log holds data (so the main
/// file alone is the whole catalog); otherwise the original error stands.
pub(crate) fn open_immutable(path: &Path) -> Option<Connection> {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    if std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0) {
        return None;
    }
    let uri = format!("file:{}?immutable=1", path.to_str()?);
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
        | rusqlite::OpenFlags::SQLITE_OPEN_URI
        | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    Connection::open_with_flags(uri, flags).ok()
}

/// How much of the catalog SQLite may map for reading. Mapped pages count
/// in a process's resident set, so the map is bounded: a long history's
/// catalog is larger, and the pages beyond it are read as before.
const MMAP_BYTES: i64 = 32 << 20;

/// Set the pragmas every connection uses.
pub(crate) fn configure(conn: &Connection) -> Result<()> {
    conn.busy_timeout(std::time::Duration::from_secs(120))
        .map_err(db_err("setting busy_timeout"))?;
    // FULL: a committed transaction survives power loss, which the ref
    // durability rule (refs only after data) relies on.
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(db_err("setting synchronous"))?;
    // Reads through a memory map: walking a long history touches most of
    // the commit index, and copying every page through read(2) was a sixth
    // of `bat log`'s time. SQLite writes through write(2) regardless.
    conn.pragma_update(None, "mmap_size", MMAP_BYTES)
        .map_err(db_err("setting mmap_size"))?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn row_to_object(
    id: ObjectId,
    kind: i64,
    raw_len: i64,
    enc: i64,
    pack_id: Option<i64>,
    offset: Option<i64>,
    stored: Option<i64>,
    base: Option<Vec<u8>>,
) -> Option<ObjectRow> {
    let kind = Kind::from_code(u8::try_from(kind).ok()?)?;
    let location = match enc {
        ENC_PACKED => Location::Packed {
            pack_id: pack_id?,
            offset: u64::try_from(offset?).ok()?,
            stored_len: u64::try_from(stored?).ok()?,
        },
        ENC_CHUNKED => Location::Chunked {
            list: ObjectId::from_slice(&base?)?,
        },
        ENC_DELTA => Location::Delta {
            pack_id: pack_id?,
            offset: u64::try_from(offset?).ok()?,
            stored_len: u64::try_from(stored?).ok()?,
            base: ObjectId::from_slice(&base?)?,
        },
        _ => return None,
    };
    Some(ObjectRow {
        id,
        kind,
        raw_len: u64::try_from(raw_len).ok()?,
        location,
    })
}

/// Raw columns of an objects row.
type RawRow = (
    Vec<u8>,
    i64,
    i64,
    i64,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<Vec<u8>>,
);

fn raw_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawRow> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
    ))
}

/// Decode raw columns; `Err(id bytes)` for a row that makes no sense.
pub(crate) fn decode_raw(r: RawRow) -> std::result::Result<ObjectRow, Vec<u8>> {
    let (idb, kind, raw_len, enc, pack_id, offset, stored, base) = r;
    let Some(id) = ObjectId::from_slice(&idb) else {
        return Err(idb);
    };
    row_to_object(id, kind, raw_len, enc, pack_id, offset, stored, base).ok_or(idb)
}

const OBJECT_COLS: &str = "id, kind, raw_len, encoding, pack_id, offset, stored_len, base";

/// Look up one object.
pub(crate) fn get_object(
    conn: &Connection,
    id: &ObjectId,
) -> Result<Option<std::result::Result<ObjectRow, Vec<u8>>>> {
    let mut st = conn
        .prepare_cached(&format!("SELECT {OBJECT_COLS} FROM objects WHERE id = ?1"))
        .map_err(db_err("preparing object lookup"))?;
    let r = st
        .query_row(params![id.as_bytes().as_slice()], raw_row)
        .optional()
        .map_err(db_err("looking up an object"))?;
    Ok(r.map(decode_raw))
}

/// Every object row (decoded or not).
pub(crate) fn all_objects(
    conn: &Connection,
) -> Result<Vec<std::result::Result<ObjectRow, Vec<u8>>>> {
    let mut st = conn
        .prepare(&format!("SELECT {OBJECT_COLS} FROM objects"))
        .map_err(db_err("listing objects"))?;
    let rows = st
        .query_map([], raw_row)
        .map_err(db_err("listing objects"))?;
    let mut out = Vec::new();
    for r in rows {
        out.push(decode_raw(r.map_err(db_err("listing objects"))?));
    }
    Ok(out)
}

/// Does the catalog know this object?
pub(crate) fn has_object(conn: &Connection, id: &ObjectId) -> Result<bool> {
    let mut st = conn
        .prepare_cached("SELECT 1 FROM objects WHERE id = ?1")
        .map_err(db_err("preparing object lookup"))?;
    st.exists(params![id.as_bytes().as_slice()])
        .map_err(db_err("looking up an object"))
}

/// All packs: (pack_id, name).
pub(crate) fn packs(conn: &Connection) -> Result<Vec<(i64, String)>> {
    let mut st = conn
        .prepare("SELECT pack_id, name FROM packs ORDER BY pack_id")
        .map_err(db_err("listing packs"))?;
    let rows = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(db_err("listing packs"))?;
    rows.collect::<rusqlite::Result<Vec<_>>>()
        .map_err(db_err("listing packs"))
}

/// Insert staged rows of a session whose pack segment is `pack_name`.
pub(crate) fn insert_staged(
    conn: &Connection,
    pack_name: Option<&str>,
    rows: &[StagedRow],
) -> Result<()> {
    let pack_id: Option<i64> = match pack_name {
        Some(name) => {
            conn.execute(
                "INSERT OR IGNORE INTO packs(name) VALUES (?1)",
                params![name],
            )
            .map_err(db_err("registering a pack"))?;
            Some(
                conn.query_row(
                    "SELECT pack_id FROM packs WHERE name = ?1",
                    params![name],
                    |r| r.get(0),
                )
                .map_err(db_err("registering a pack"))?,
            )
        }
        None => None,
    };
    let mut st = conn
        .prepare_cached(
            "INSERT OR IGNORE INTO objects(id, kind, raw_len, encoding, pack_id, offset, stored_len, base)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )
        .map_err(db_err("preparing object insert"))?;
    for r in rows {
        let (enc, pid, off, stored, base) = match (r.packed, r.chunk_list) {
            (Some((off, stored)), _) => (
                if r.delta_base.is_some() {
                    ENC_DELTA
                } else {
                    ENC_PACKED
                },
                pack_id,
                Some(off as i64),
                Some(stored as i64),
                r.delta_base.map(|b| b.as_bytes().to_vec()),
            ),
            (None, Some(list)) => (
                ENC_CHUNKED,
                None,
                None,
                None,
                Some(list.as_bytes().to_vec()),
            ),
            (None, None) => unreachable!("a staged row is either packed or chunked"),
        };
        st.execute(params![
            r.id.as_bytes().as_slice(),
            i64::from(r.kind.code()),
            r.raw_len as i64,
            enc,
            pid,
            off,
            stored,
            base
        ])
        .map_err(db_err("inserting objects"))?;
    }
    Ok(())
}

/// The catalog's layout version (1 when the `catalog_schema` key is absent).
pub(crate) fn schema_version(conn: &Connection) -> Result<u32> {
    let v: Option<String> = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'catalog_schema'",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(db_err("reading the catalog schema version"))?;
    Ok(v.and_then(|v| v.parse().ok()).unwrap_or(1))
}

/// Upgrade an older catalog in place to [`CATALOG_SCHEMA`] in one
/// IMMEDIATE transaction: a crash leaves the old layout, and a concurrent
/// opener waits, re-checks and finds nothing to do.
///
/// - schema 1 (no commit bodies): add the (unused since schema 3)
///   `commits.body` column that older builds write, create
///   `commit_bodies` and fill it from the commit objects (`read` returns a
///   commit's verified canonical bytes);
/// - schema 2 (bodies in `commits.body`): move them to `commit_bodies`.
///
/// Returns the number of commit bodies filled from objects.
pub(crate) fn upgrade(
    conn: &Connection,
    read: &mut dyn FnMut(&ObjectId) -> Result<Vec<u8>>,
) -> Result<u64> {
    let tx = ImmediateTx::begin(conn)?;
    let from = schema_version(&tx)?;
    if from >= CATALOG_SCHEMA {
        return Ok(0);
    }
    if from < 2 {
        tx.execute_batch("ALTER TABLE commits ADD COLUMN body BLOB")
            .map_err(db_err("adding commits.body"))?;
    }
    // Large rows in the id-keyed `commits` table made every lookup copy
    // whole bodies while comparing keys; a rowid table keyed through its
    // id index reads a body only when it is asked for.
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS commit_bodies(id BLOB PRIMARY KEY, body BLOB NOT NULL);
         INSERT OR IGNORE INTO commit_bodies(id, body)
             SELECT id, body FROM commits WHERE body IS NOT NULL;
         UPDATE commits SET body = NULL WHERE body IS NOT NULL;",
    )
    .map_err(db_err("moving commit bodies"))?;
    let mut n = 0;
    if from < 2 {
        n = fill_bodies(&tx, read)?;
    }
    tx.execute(
        "INSERT OR REPLACE INTO meta(key, value) VALUES ('catalog_schema', ?1)",
        [CATALOG_SCHEMA.to_string()],
    )
    .map_err(db_err("writing the catalog schema version"))?;
    tx.commit()?;
    Ok(n)
}

/// Index the body of every indexed commit from its object.
fn fill_bodies(
    conn: &Connection,
    read: &mut dyn FnMut(&ObjectId) -> Result<Vec<u8>>,
) -> Result<u64> {
    let ids: Vec<Vec<u8>> = {
        let mut st = conn
            .prepare("SELECT id FROM commits")
            .map_err(db_err("listing commits"))?;
        let rows = st
            .query_map([], |r| r.get(0))
            .map_err(db_err("listing commits"))?;
        rows.collect::<rusqlite::Result<_>>()
            .map_err(db_err("listing commits"))?
    };
    let mut n = 0;
    for idb in ids {
        let Some(id) = ObjectId::from_slice(&idb) else {
            continue;
        };
        // A commit that cannot be read gets no body: readers then go to
        // the object and report its damage where it is.
        let Ok(body) = read(&id) else {
            continue;
        };
        if body.len() <= MAX_INDEXED_BODY {
            conn.execute(
                "INSERT OR IGNORE INTO commit_bodies(id, body) VALUES (?1, ?2)",
                params![idb, body],
            )
            .map_err(db_err("indexing commit bodies"))?;
            n += 1;
        }
    }
    Ok(n)
}

/// The indexed copy of a commit's canonical bytes: `None` when the commit is
/// not indexed, `Some(None)` when it is but its body is not kept. A body
/// written by an older build into `commits.body` is found too.
pub(crate) fn commit_body(conn: &Connection, id: &ObjectId) -> Result<Option<Option<Vec<u8>>>> {
    let mut st = conn
        .prepare_cached(
            "SELECT coalesce((SELECT body FROM commit_bodies WHERE id = ?1), body)
             FROM commits WHERE id = ?1",
        )
        .map_err(db_err("preparing commit lookup"))?;
    st.query_row(params![id.as_bytes().as_slice()], |r| r.get(0))
        .optional()
        .map_err(db_err("looking up a commit"))
}

/// Parent number `idx` (0 = first) of an indexed commit: `None` when the
/// commit is not indexed, `Some(None)` when it has no such parent.
pub(crate) fn commit_parent(
    conn: &Connection,
    id: &ObjectId,
    idx: usize,
) -> Result<Option<Option<ObjectId>>> {
    let mut st = conn
        .prepare_cached(
            "SELECT (SELECT parent FROM commit_parents WHERE commit_id = ?1 AND idx = ?2)
             FROM commits WHERE id = ?1",
        )
        .map_err(db_err("preparing parent lookup"))?;
    let r: Option<Option<Vec<u8>>> = st
        .query_row(params![id.as_bytes().as_slice(), idx as i64], |r| r.get(0))
        .optional()
        .map_err(db_err("looking up a parent"))?;
    Ok(r.map(|p| p.and_then(|b| ObjectId::from_slice(&b))))
}

/// Follow first parents from `start` up to `n` steps through the index in
/// one statement. Returns the commit reached and the steps taken; fewer
/// than `n` steps means the chain ended there (a root, or a commit the index
/// does not know, which the caller checks).
pub(crate) fn first_parent_walk(
    conn: &Connection,
    start: &ObjectId,
    n: u64,
) -> Result<(ObjectId, u64)> {
    let mut st = conn
        .prepare_cached(
            "WITH RECURSIVE fp(id, n) AS (
                 SELECT ?1, 0
                 UNION ALL
                 SELECT p.parent, fp.n + 1 FROM fp
                 JOIN commit_parents p ON p.commit_id = fp.id AND p.idx = 0
                 WHERE fp.n < ?2
             )
             SELECT id, max(n) FROM fp",
        )
        .map_err(db_err("preparing a first-parent walk"))?;
    let (idb, steps): (Vec<u8>, i64) = st
        .query_row(params![start.as_bytes().as_slice(), n as i64], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .map_err(db_err("walking first parents"))?;
    let id = ObjectId::from_slice(&idb).ok_or_else(|| crate::error::Error::InvalidInput {
        message: "commit index holds a malformed parent id".into(),
    })?;
    Ok((id, steps as u64))
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
