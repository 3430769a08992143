//! The `Ledger` handle: opening, locking, reading verified objects, and
//! staging new objects into a pack segment.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use rusqlite::Connection;

use crate::catalog::{self, Location, ObjectRow, FORMAT_VERSION};
use crate::error::{db_err, io_err, Error, Result};
use crate::id::{CommitId, ObjectId, TreeId};
use crate::object::{ChunkList, Commit, Kind, Tree};
use crate::pack::{self};
use crate::source::ObjectSource;

mod chain;
mod packcache;
mod settings;
mod staging;

pub use chain::MAX_CHAIN;
pub(crate) use chain::{
    decode_chain, decode_chain_unverified, decode_in_order, name_damage, resolve_chain, RecordRef,
};
pub use packcache::MAX_OPEN_PACKS;
pub(crate) use packcache::{open_pack_with, PackSource, SharedPackCache};
pub use settings::Setting;
pub use staging::Staging;

/// Name of the ledger directory inside a work directory.
pub const LEDGER_DIR: &str = ".bat";
/// Name of the version file inside `.bat`.
pub const VERSION_FILE: &str = "VERSION";
/// Name of the lock file inside `.bat`.
pub const LOCK_FILE: &str = "lock";
/// Name of the catalog inside `.bat`.
pub const CATALOG_FILE: &str = "catalog.sqlite";
/// Name of the pack directory inside `.bat`.
pub const PACKS_DIR: &str = "packs";

/// Tunables of the write path.
#[derive(Debug, Clone, Copy)]
pub struct WriteConfig {
    /// Files larger than this are chunked.
    pub chunk_threshold: u64,
    /// Content-defined chunking minimum chunk size.
    pub chunk_min: u32,
    /// Average chunk size.
    pub chunk_avg: u32,
    /// Maximum chunk size.
    pub chunk_max: u32,
    /// zstd level.
    pub zstd_level: i32,
    /// Worker threads for hashing + compression (0 = cores + 1).
    pub threads: usize,
    /// Store large safetensors files tensor-aware: cut along tensors, byte
    /// planes, and element-wise XOR deltas against the same path in the
    /// parent commit (FORMAT.md §12).
    pub delta: bool,
    /// Longest delta chain, in decode-cost units: a sparse delta (the usual
    /// fine-tuning round) counts 1, a denser one 1 per tenth of its raw size
    /// it stores. A piece whose delta would take its chain past this is
    /// stored as a keyframe instead (bounds restore cost; FORMAT.md §12.2).
    /// Values above [`MAX_DELTA_DEPTH`] count as that
    /// ([`WriteConfig::depth_limit`]).
    pub delta_max_depth: u32,
    /// Code sparse 16-bit deltas jointly (FORMAT.md §12.3.1) instead of as
    /// zstd frames. On by default: on the main series a link is 0.055 ×
    /// raw instead of 0.064 (the ledger 0.116 × raw instead of 0.124), for
    /// about the same CPU time to write and to read (docs/benchmarks.md).
    /// `false` writes the zstd form, which every reader decodes.
    pub joint_coding: bool,
    /// Store the high byte plane of a sparse 16-bit delta as its
    /// exceptions (the changes whose high XOR byte is not zero) when that
    /// is smaller (FORMAT.md §12.3.2). Off by default: on the main series
    /// it stores 0.4 % less, but its faster decoding of that plane did not
    /// show in restore CPU time (docs/benchmarks.md) and builds before it
    /// cannot read what it writes. `false` writes what they wrote.
    pub high_exceptions: bool,
    /// Read a delta base's pieces from the file an earlier commit recorded
    /// it from, when that file is still there with the same length,
    /// modification time and inode, instead of decoding them from their
    /// chains; each piece is used only if its BLAKE3 is its id. On by
    /// default: the previous round's checkpoint usually still sits in its
    /// folder, and decoding its chain was most of a commit's CPU time
    /// (FORMAT.md §12.2). `false` always decodes.
    pub reuse_base_files: bool,
    /// Automatic gc after `bat commit` and `bat run`: runs when more than
    /// this many packs are small enough for gc to merge
    /// ([`crate::maint::Ledger::gc_auto_due`]); 0 turns it off.
    pub gc_auto: u32,
}

/// Highest effective `delta_max_depth`, and the bound on chains that
/// fetches, clones and bundle imports store (a received delta that would
/// take this ledger's chain past it is stored whole). Every link costs at
/// least one unit, so chains stay within 33 records, well inside the 64 a
/// reader follows ([`MAX_CHAIN`]): a larger setting would let a writer
/// build chains that no reader accepts.
pub const MAX_DELTA_DEPTH: u32 = 32;

impl WriteConfig {
    /// The chain cost writers keep to: `delta_max_depth`, at most
    /// [`MAX_DELTA_DEPTH`].
    pub fn depth_limit(&self) -> u32 {
        self.delta_max_depth.min(MAX_DELTA_DEPTH)
    }

    /// The optional planes payload forms this configuration writes.
    pub fn planes_options(&self) -> crate::delta::PlanesOptions {
        crate::delta::PlanesOptions {
            joint: self.joint_coding,
            high_exceptions: self.high_exceptions,
            stats: crate::delta::StatsReading::All,
        }
    }
}

impl Default for WriteConfig {
    fn default() -> Self {
        WriteConfig {
            chunk_threshold: 4 << 20,
            chunk_min: 256 << 10,
            chunk_avg: 512 << 10,
            chunk_max: 2 << 20,
            zstd_level: 1,
            threads: 0,
            delta: true,
            delta_max_depth: 9,
            joint_coding: true,
            high_exceptions: false,
            reuse_base_files: true,
            gc_auto: 50,
        }
    }
}

/// How a ledger handle holds the ledger lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    /// Readers and writers: many at once, excluded only by gc.
    Shared,
    /// gc: nobody else may use the ledger.
    Exclusive,
}

/// An open ledger.
pub struct Ledger {
    pub(crate) dir: PathBuf,
    pub(crate) db: Connection,
    pub(crate) lock_mode: LockMode,
    _lock: File,
    pack_files: SharedPackCache,
    /// The layer below the packs in a partial clone: the promisor remote
    /// (see [`crate::layers`]).
    pub(crate) promisor: Option<Box<dyn ObjectSource + Send>>,
    /// Write-path tunables.
    pub config: WriteConfig,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger").field("dir", &self.dir).finish()
    }
}

fn version_text() -> String {
    format!("bat-ledger format {FORMAT_VERSION}\n")
}

impl Ledger {
    /// Create a new ledger in `path/.bat` (creating `path` if needed).
    pub fn init(path: &Path) -> Result<Ledger> {
        std::fs::create_dir_all(path).map_err(io_err("create directory", path))?;
        let dir = path.join(LEDGER_DIR);
        if dir.exists() {
            return Err(Error::AlreadyInitialized { path: dir });
        }
        // Build in a temporary sibling and rename, so a crashed init never
        // leaves a half-made `.bat` that looks like a ledger.
        let tmp = tempfile::Builder::new()
            .prefix(".bat-init-")
            .tempdir_in(path)
            .map_err(io_err("create temporary directory in", path))?;
        let t = tmp.path();
        std::fs::create_dir(t.join(PACKS_DIR))
            .map_err(io_err("create directory", t.join(PACKS_DIR)))?;
        {
            let mut conn =
                Connection::open(t.join(CATALOG_FILE)).map_err(db_err("creating the catalog"))?;
            conn.pragma_update(None, "journal_mode", "WAL")
                .map_err(db_err("enabling WAL"))?;
            let tx = conn.transaction().map_err(db_err("creating the schema"))?;
            tx.execute_batch(catalog::SCHEMA)
                .map_err(db_err("creating the schema"))?;
            tx.execute(
                "INSERT INTO meta(key, value) VALUES ('format_version', ?1)",
                [FORMAT_VERSION.to_string()],
            )
            .map_err(db_err("writing the format version"))?;
            tx.execute(
                "INSERT INTO meta(key, value) VALUES ('catalog_schema', ?1)",
                [catalog::CATALOG_SCHEMA.to_string()],
            )
            .map_err(db_err("writing the catalog schema version"))?;
            tx.execute(
                "INSERT INTO refs(name, target, symbolic) VALUES ('HEAD', NULL, 'refs/heads/main')",
                [],
            )
            .map_err(db_err("creating HEAD"))?;
            tx.commit().map_err(db_err("creating the schema"))?;
        }
        let vpath = t.join(VERSION_FILE);
        let mut vf = File::create(&vpath).map_err(io_err("create", &vpath))?;
        vf.write_all(version_text().as_bytes())
            .map_err(io_err("write", &vpath))?;
        vf.sync_all().map_err(io_err("fsync", &vpath))?;
        File::create(t.join(LOCK_FILE)).map_err(io_err("create", t.join(LOCK_FILE)))?;
        pack::sync_dir(t)?;
        let tmp_path = tmp.keep();
        std::fs::rename(&tmp_path, &dir).map_err(io_err("rename into place", &dir))?;
        pack::sync_dir(path)?;
        Ledger::open(&dir)
    }

    /// Find the ledger by walking up from `start` (a directory holding
    /// `.bat`, or a `.bat` directory itself).
    pub fn discover(start: &Path) -> Result<Ledger> {
        Ledger::discover_with(start, LockMode::Shared)
    }

    /// Like [`Ledger::discover`] with a chosen lock mode.
    pub fn discover_with(start: &Path, mode: LockMode) -> Result<Ledger> {
        let abs = std::path::absolute(start).map_err(io_err("resolve", start))?;
        let mut cur: Option<&Path> = Some(&abs);
        while let Some(d) = cur {
            if d.file_name().is_some_and(|n| n == LEDGER_DIR) && d.join(VERSION_FILE).exists() {
                return Ledger::open_with(d, mode);
            }
            let cand = d.join(LEDGER_DIR);
            if cand.join(VERSION_FILE).exists() {
                return Ledger::open_with(&cand, mode);
            }
            cur = d.parent();
        }
        Err(Error::NotALedger {
            start: start.to_path_buf(),
        })
    }

    /// Open the ledger whose `.bat` directory is `dir`, shared lock.
    pub fn open(dir: &Path) -> Result<Ledger> {
        Ledger::open_with(dir, LockMode::Shared)
    }

    /// Open with a chosen lock mode. An unknown format version is an error
    /// before anything is written (not even a lock or WAL file is touched
    /// beyond reading).
    pub fn open_with(dir: &Path, mode: LockMode) -> Result<Ledger> {
        let vpath = dir.join(VERSION_FILE);
        let text = std::fs::read_to_string(&vpath).map_err(io_err("read", &vpath))?;
        if text != version_text() {
            return Err(Error::UnsupportedVersion {
                path: dir.to_path_buf(),
                found: text.trim().to_string(),
                supported: FORMAT_VERSION,
            });
        }
        let lpath = dir.join(LOCK_FILE);
        let lock = File::options()
            .read(true)
            .write(true)
            .open(&lpath)
            .map_err(io_err("open", &lpath))?;
        match mode {
            LockMode::Shared => lock.lock_shared().map_err(io_err("lock", &lpath))?,
            LockMode::Exclusive => match lock.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(Error::Busy {
                        reason: "another bat process is using the ledger".into(),
                    })
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(io_err("lock", &lpath)(e)),
            },
        }
        let cpath = dir.join(CATALOG_FILE);
        let opened = Connection::open(&cpath)
            .map_err(db_err("opening the catalog"))
            .and_then(|db| catalog::configure(&db).map(|()| db));
        // On a full disk the normal open fails; readers (and gc's first
        // step, removing orphan packs) still work from a read-only view.
        let db = match opened {
            Ok(db) => db,
            Err(e) => catalog::open_immutable(&cpath).ok_or(e)?,
        };
        let v: String = db
            .query_row(
                "SELECT value FROM meta WHERE key = 'format_version'",
                [],
                |r| r.get(0),
            )
            .map_err(db_err("reading the format version"))?;
        if v != FORMAT_VERSION.to_string() {
            return Err(Error::UnsupportedVersion {
                path: dir.to_path_buf(),
                found: v,
                supported: FORMAT_VERSION,
            });
        }
        let mut ledger = Ledger {
            dir: dir.to_path_buf(),
            db,
            lock_mode: mode,
            _lock: lock,
            pack_files: SharedPackCache::default(),
            promisor: None,
            config: WriteConfig::default(),
        };
        if catalog::schema_version(&ledger.db)? < catalog::CATALOG_SCHEMA {
            catalog::upgrade(&ledger.db, &mut |id| ledger.read_object(id, Kind::Commit))?;
        }
        ledger.apply_settings()?;
        Ok(ledger)
    }

    /// The `.bat` directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn packs_dir(&self) -> PathBuf {
        self.dir.join(PACKS_DIR)
    }

    /// Open a fresh read-only-use connection (for worker threads).
    pub(crate) fn extra_connection(&self) -> Result<Connection> {
        let cpath = self.dir.join(CATALOG_FILE);
        let opened = Connection::open(&cpath)
            .map_err(db_err("opening the catalog"))
            .and_then(|c| catalog::configure(&c).map(|()| c));
        match opened {
            Ok(c) => Ok(c),
            Err(e) => catalog::open_immutable(&cpath).ok_or(e),
        }
    }

    /// Forget cached pack handles (after gc rewrote packs).
    pub(crate) fn clear_pack_cache(&self) {
        packcache::lock(&self.pack_files).clear();
    }

    /// Pack files this handle's cache holds open (at most [`MAX_OPEN_PACKS`]).
    pub fn open_pack_files(&self) -> usize {
        packcache::lock(&self.pack_files).len()
    }

    /// Open (cached) pack file by catalog id.
    pub(crate) fn pack_file(&self, pack_id: i64, id: &ObjectId) -> Result<(String, PackSource)> {
        open_pack_with(&self.db, &self.packs_dir(), &self.pack_files, pack_id, id)
    }

    /// The pack cache this handle's commit workers share.
    pub(crate) fn shared_pack_cache(&self) -> SharedPackCache {
        self.pack_files.clone()
    }

    /// The catalog row of an object, if stored.
    pub fn locate(&self, id: &ObjectId) -> Result<Option<ObjectRow>> {
        match catalog::get_object(&self.db, id)? {
            None => Ok(None),
            Some(Ok(r)) => Ok(Some(r)),
            Some(Err(_)) => Err(Error::Corrupt {
                id: *id,
                pack: "(catalog)".into(),
                offset: 0,
                reason: "catalog row is malformed".into(),
            }),
        }
    }

    /// True if the object is stored.
    pub fn contains(&self, id: &ObjectId) -> Result<bool> {
        catalog::has_object(&self.db, id)
    }

    /// Read a record-stored object of `kind`, verified (decoding its delta
    /// chain, if it is a delta).
    pub(crate) fn read_packed(&self, row: &ObjectRow) -> Result<Vec<u8>> {
        if let Location::Chunked { .. } = row.location {
            return Err(Error::BadObject {
                id: row.id,
                kind: row.kind.name(),
                reason: "expected a single record, found a chunked file".into(),
            });
        }
        let chain = self.record_chain(row.clone())?;
        decode_chain(&chain)
    }

    /// The records to read for `row`: the row itself, then its delta base,
    /// its base, ... down to a self-contained record.
    pub(crate) fn record_chain(&self, row: ObjectRow) -> Result<Vec<RecordRef>> {
        resolve_chain(row, &mut |id| self.locate(id), &mut |pid, id| {
            self.pack_file(pid, id)
        })
    }

    /// Read a structured object's verified bytes.
    pub fn read_object(&self, id: &ObjectId, kind: Kind) -> Result<Vec<u8>> {
        let row = self.locate(id)?.ok_or(Error::ObjectMissing { id: *id })?;
        if row.kind != kind {
            return Err(Error::BadObject {
                id: *id,
                kind: kind.name(),
                reason: format!("it is a {}", row.kind.name()),
            });
        }
        self.read_packed(&row)
    }

    /// Read and decode a tree.
    pub fn read_tree(&self, id: &TreeId) -> Result<Tree> {
        let raw = self.read_object(&id.0, Kind::Tree)?;
        Tree::decode(&raw).map_err(|reason| Error::BadObject {
            id: id.0,
            kind: "tree",
            reason,
        })
    }

    /// Read and decode a commit.
    pub fn read_commit(&self, id: &CommitId) -> Result<Commit> {
        let raw = self.read_object(&id.0, Kind::Commit)?;
        Commit::decode(&raw).map_err(|reason| Error::BadObject {
            id: id.0,
            kind: "commit",
            reason,
        })
    }

    /// Read and decode a chunk list.
    pub fn read_chunk_list(&self, id: &ObjectId) -> Result<ChunkList> {
        let raw = self.read_object(id, Kind::ChunkList)?;
        ChunkList::decode(&raw).map_err(|reason| Error::BadObject {
            id: *id,
            kind: "chunk list",
            reason,
        })
    }

    /// [`Ledger::read_bytes_to`] from the packs only. Chunks are decoded on
    /// one thread per core, in order and in bounded memory.
    pub(crate) fn read_stored_bytes_to(
        &self,
        id: &ObjectId,
        out: &mut dyn Write,
        cancel: &AtomicBool,
    ) -> Result<u64> {
        let Some(row) = self.locate(id)? else {
            return Err(self.missing(id));
        };
        if row.kind != Kind::Bytes {
            return Err(Error::BadObject {
                id: *id,
                kind: "bytes",
                reason: format!("it is a {}", row.kind.name()),
            });
        }
        match &row.location {
            Location::Packed { .. } | Location::Delta { .. } => {
                let raw = self.read_packed(&row)?;
                out.write_all(&raw).map_err(io_err("write", "output"))?;
                Ok(raw.len() as u64)
            }
            Location::Chunked { list } => {
                let cl = self.read_chunk_list(list)?;
                if cl.file != *id || cl.total != row.raw_len {
                    return Err(Error::BadObject {
                        id: *list,
                        kind: "chunk list",
                        reason: format!(
                            "describes {} ({} bytes), expected {id}",
                            cl.file, cl.total
                        ),
                    });
                }
                let mut jobs = Vec::with_capacity(cl.chunks.len());
                for c in &cl.chunks {
                    let crow = self
                        .locate(&c.id)?
                        .ok_or(Error::ObjectMissing { id: c.id })?;
                    if crow.location.record().is_none() {
                        return Err(Error::BadObject {
                            id: c.id,
                            kind: "chunk",
                            reason: "chunk is not a record".into(),
                        });
                    }
                    if crow.kind != Kind::Bytes || crow.raw_len != u64::from(c.len) {
                        return Err(Error::BadObject {
                            id: c.id,
                            kind: "chunk",
                            reason: "length or kind differs from the chunk list".into(),
                        });
                    }
                    jobs.push(self.record_chain(crow)?);
                }
                let mut whole = blake3::Hasher::new();
                let mut total = 0u64;
                // Pieces are decoded without their own digests: the whole-file
                // digest below verifies every byte once. On a mismatch the
                // pieces are decoded again with every digest, so the error
                // names the damaged record.
                let streamed = decode_in_order(&jobs, cancel, |d| {
                    total += d.len() as u64;
                    // Hash and write a block at a time, so the write copies
                    // bytes that are still in cache.
                    let w = d.chunks(1 << 20).try_for_each(|b| {
                        whole.update(b);
                        out.write_all(b)
                    });
                    crate::delta::recycle(d);
                    w.map_err(io_err("write", "output"))
                });
                if let Err(e) = streamed {
                    if let Error::Corrupt { .. } = e {
                        name_damage(&jobs, cancel)?;
                    }
                    return Err(e);
                }
                if ObjectId(*whole.finalize().as_bytes()) != *id {
                    name_damage(&jobs, cancel)?;
                    return Err(Error::Corrupt {
                        id: *id,
                        pack: "(chunked)".into(),
                        offset: 0,
                        reason: "whole-file digest mismatch after reassembly".into(),
                    });
                }
                Ok(total)
            }
        }
    }

    /// Read a bytes object fully into memory (for small objects such as
    /// symlink targets or JSON documents).
    pub fn read_bytes(&self, id: &ObjectId) -> Result<Vec<u8>> {
        let mut v = Vec::new();
        self.read_bytes_to(id, &mut v, &AtomicBool::new(false))?;
        Ok(v)
    }
}
