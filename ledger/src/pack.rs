//! Append-only pack segments. Each writing process creates its own segment
//! file, appends self-describing records, and fsyncs it before the catalog
//! references any of them. Layout in FORMAT.md.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{io_err, Error, Result};
use crate::id::ObjectId;
use crate::object::Kind;

/// First 8 bytes of every pack file.
pub const PACK_MAGIC: &[u8; 8] = b"BATPACK\0";
/// Pack file format version (bytes 8..12 of the pack header).
pub const PACK_VERSION: u32 = 1;
/// Length of the pack file header.
pub const PACK_HEADER_LEN: u64 = 16;
/// First 4 bytes of every record.
pub const RECORD_MAGIC: &[u8; 4] = b"BATR";
/// Length of a record header.
pub const RECORD_HEADER_LEN: usize = 80;
/// Record payload is stored uncompressed.
pub const COMPRESSION_NONE: u8 = 0;
/// Record payload is one zstd frame.
pub const COMPRESSION_ZSTD: u8 = 1;
/// Record payload is a planes payload (byte planes, each one zstd frame,
/// optionally a delta against a base object); see FORMAT.md §12.
pub const COMPRESSION_PLANES: u8 = 2;
/// Largest raw size a single record may declare; larger data is always
/// chunked, so anything above this in a header is corruption, and the bound
/// keeps a damaged header from making us allocate gigabytes.
pub const MAX_RECORD_RAW: u64 = 256 << 20;

/// A decoded record header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    /// Object kind.
    pub kind: Kind,
    /// Payload compression.
    pub compression: u8,
    /// Object id.
    pub id: ObjectId,
    /// Uncompressed length.
    pub raw_len: u64,
    /// Payload length on disk.
    pub stored_len: u64,
    /// First 16 bytes of BLAKE3(payload).
    pub payload_sum: [u8; 16],
}

impl RecordHeader {
    /// Build a header for `payload`, computing its checksum.
    pub fn for_payload(
        kind: Kind,
        compression: u8,
        id: ObjectId,
        raw_len: u64,
        payload: &[u8],
    ) -> Self {
        RecordHeader {
            kind,
            compression,
            id,
            raw_len,
            stored_len: payload.len() as u64,
            payload_sum: payload_checksum(payload),
        }
    }

    /// The 80 header bytes.
    pub fn encode(&self) -> [u8; RECORD_HEADER_LEN] {
        let mut h = [0u8; RECORD_HEADER_LEN];
        h[0..4].copy_from_slice(RECORD_MAGIC);
        h[4] = 1; // record layout version
        h[5] = self.kind.code();
        h[6] = self.compression;
        h[7] = 0;
        h[8..40].copy_from_slice(self.id.as_bytes());
        h[40..48].copy_from_slice(&self.raw_len.to_le_bytes());
        h[48..56].copy_from_slice(&self.stored_len.to_le_bytes());
        h[56..72].copy_from_slice(&self.payload_sum);
        let sum = blake3::hash(&h[0..72]);
        h[72..80].copy_from_slice(&sum.as_bytes()[0..8]);
        h
    }

    /// Parse and check the 80 header bytes.
    pub fn decode(h: &[u8; RECORD_HEADER_LEN]) -> std::result::Result<RecordHeader, String> {
        if &h[0..4] != RECORD_MAGIC {
            return Err("bad record magic".into());
        }
        let sum = blake3::hash(&h[0..72]);
        if h[72..80] != sum.as_bytes()[0..8] {
            return Err("record header checksum mismatch".into());
        }
        if h[4] != 1 || h[7] != 0 {
            return Err(format!("unknown record layout version {}", h[4]));
        }
        let kind = Kind::from_code(h[5]).ok_or_else(|| format!("unknown kind code {}", h[5]))?;
        let compression = h[6];
        if !matches!(
            compression,
            COMPRESSION_NONE | COMPRESSION_ZSTD | COMPRESSION_PLANES
        ) {
            return Err(format!("unknown compression code {compression}"));
        }
        let id = ObjectId::from_slice(&h[8..40]).expect("32 bytes");
        let raw_len = u64::from_le_bytes(h[40..48].try_into().expect("8 bytes"));
        let stored_len = u64::from_le_bytes(h[48..56].try_into().expect("8 bytes"));
        let payload_sum: [u8; 16] = h[56..72].try_into().expect("16 bytes");
        if raw_len > MAX_RECORD_RAW || stored_len > MAX_RECORD_RAW + (1 << 20) {
            return Err("record length out of range".into());
        }
        Ok(RecordHeader {
            kind,
            compression,
            id,
            raw_len,
            stored_len,
            payload_sum,
        })
    }
}

/// First 16 bytes of BLAKE3 of a payload.
pub fn payload_checksum(payload: &[u8]) -> [u8; 16] {
    blake3::hash(payload).as_bytes()[0..16]
        .try_into()
        .expect("16 bytes")
}

/// Compress `raw` for storage: zstd at `level`, or stored as-is when zstd
/// does not shrink it (random data), which also makes reads cheaper.
pub fn compress(compressor: &mut zstd::bulk::Compressor<'static>, raw: &[u8]) -> (u8, Vec<u8>) {
    let bound = zstd::zstd_safe::compress_bound(raw.len());
    let mut out = Vec::with_capacity(bound);
    match compressor.compress_to_buffer(raw, &mut out) {
        Ok(n) if n < raw.len() => {
            out.truncate(n);
            (COMPRESSION_ZSTD, out)
        }
        _ => (COMPRESSION_NONE, raw.to_vec()),
    }
}

/// Flush written data to disk in the background every this many bytes, so
/// the final fsync of a large commit has little left to do.
const BACKGROUND_SYNC_EVERY: u64 = 64 << 20;

/// Payloads at least this large bypass the write buffer.
const DIRECT_WRITE_MIN: usize = 64 << 10;

/// A thread that fdatasyncs the segment while the writer keeps appending.
struct Syncer {
    kick: std::sync::mpsc::SyncSender<()>,
    thread: std::thread::JoinHandle<()>,
    /// First error seen by the background thread. The fd is shared (dup), so
    /// the kernel reports a writeback error only once; we must keep it.
    error: std::sync::Arc<std::sync::Mutex<Option<std::io::Error>>>,
}

/// Writes one new pack segment.
pub struct PackWriter {
    path: PathBuf,
    name: String,
    out: BufWriter<File>,
    offset: u64,
    records: u64,
    unsynced: u64,
    syncer: Option<Syncer>,
}

impl PackWriter {
    /// Create a new uniquely named segment in `dir` and write its header.
    /// The directory is fsynced so the new name survives a crash.
    pub fn create(dir: &Path) -> Result<PackWriter> {
        let tmp = tempfile::Builder::new()
            .prefix("seg-")
            .suffix(".pack")
            .rand_bytes(12)
            .tempfile_in(dir)
            .map_err(io_err("create pack segment in", dir))?;
        let (file, path) = tmp.keep().map_err(|e| Error::Io {
            op: "keep pack segment",
            path: dir.to_path_buf(),
            source: e.error,
        })?;
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .expect("pack names are ASCII by construction")
            .to_string();
        let mut out = BufWriter::with_capacity(4 << 20, file);
        let mut header = [0u8; PACK_HEADER_LEN as usize];
        header[0..8].copy_from_slice(PACK_MAGIC);
        header[8..12].copy_from_slice(&PACK_VERSION.to_le_bytes());
        out.write_all(&header).map_err(io_err("write", &path))?;
        sync_dir(dir)?;
        Ok(PackWriter {
            path,
            name,
            out,
            offset: PACK_HEADER_LEN,
            records: 0,
            unsynced: 0,
            syncer: None,
        })
    }

    /// The segment's file name (as stored in the catalog).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Number of records appended.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.offset
    }

    /// True when no record was appended.
    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// Append one record; returns its offset.
    pub fn append(&mut self, header: &RecordHeader, payload: &[u8]) -> Result<u64> {
        let at = self.offset;
        self.out
            .write_all(&header.encode())
            .map_err(io_err("write", &self.path))?;
        if payload.len() >= DIRECT_WRITE_MIN {
            // Large payloads go straight to the file: copying them through
            // the BufWriter first would cost an extra memcpy of every byte.
            self.out.flush().map_err(io_err("write", &self.path))?;
            self.out
                .get_mut()
                .write_all(payload)
                .map_err(io_err("write", &self.path))?;
        } else {
            self.out
                .write_all(payload)
                .map_err(io_err("write", &self.path))?;
        }
        self.offset += RECORD_HEADER_LEN as u64 + payload.len() as u64;
        self.records += 1;
        self.unsynced += RECORD_HEADER_LEN as u64 + payload.len() as u64;
        if self.unsynced >= BACKGROUND_SYNC_EVERY {
            self.unsynced = 0;
            self.out.flush().map_err(io_err("write", &self.path))?;
            self.kick_background_sync()?;
        }
        Ok(at)
    }

    fn kick_background_sync(&mut self) -> Result<()> {
        if self.syncer.is_none() {
            let file = self
                .out
                .get_ref()
                .try_clone()
                .map_err(io_err("dup", &self.path))?;
            let (kick, rx) = std::sync::mpsc::sync_channel::<()>(1);
            let error = std::sync::Arc::new(std::sync::Mutex::new(None));
            let err2 = error.clone();
            let thread = std::thread::spawn(move || {
                for () in rx {
                    if let Err(e) = file.sync_data() {
                        if let Ok(mut slot) = err2.lock() {
                            slot.get_or_insert(e);
                        }
                    }
                }
            });
            self.syncer = Some(Syncer {
                kick,
                thread,
                error,
            });
        }
        if let Some(s) = &self.syncer {
            // Full channel = a sync is already pending; it will cover this data.
            let _ = s.kick.try_send(());
        }
        Ok(())
    }

    /// Flush and fsync the segment: after this, every appended record is durable.
    pub fn sync(&mut self) -> Result<()> {
        self.out.flush().map_err(io_err("flush", &self.path))?;
        if let Some(s) = self.syncer.take() {
            drop(s.kick);
            let _ = s.thread.join();
            if let Some(e) = s.error.lock().ok().and_then(|mut g| g.take()) {
                return Err(io_err("fsync", &self.path)(e));
            }
        }
        self.out
            .get_ref()
            .sync_all()
            .map_err(io_err("fsync", &self.path))
    }

    /// Remove the segment (used when nothing was appended).
    pub fn discard(self) -> Result<()> {
        let path = self.path.clone();
        drop(self.out);
        std::fs::remove_file(&path).map_err(io_err("remove", &path))
    }
}

/// fsync a directory so renames/creations in it are durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("fsync directory", dir))
}

/// Where a record is expected, as the catalog says.
#[derive(Debug, Clone, Copy)]
pub struct Expect {
    /// Object id.
    pub id: ObjectId,
    /// Kind.
    pub kind: Kind,
    /// Record offset.
    pub offset: u64,
    /// Raw length.
    pub raw_len: u64,
    /// Stored payload length.
    pub stored_len: u64,
}

/// Read, check and decompress one record, verifying header, payload checksum
/// and the object digest. Returns the raw bytes; never unverified ones.
pub fn read_record(file: &File, pack: &str, e: &Expect) -> Result<Vec<u8>> {
    read_record_chained(file, pack, e, None, true)
}

/// Read, check and decode one record that may be a delta: `base` is the base
/// object's id (as the catalog says) and its bytes, taken by value (a sparse
/// delta is applied to them in place). A delta record read without its base,
/// or naming another base than the catalog, is reported as corrupt. With
/// `check_digest` false neither the payload checksum nor the result's BLAKE3
/// is computed: only for an inner link of a delta chain whose final result is
/// verified (a wrong inner result cannot produce the right final digest);
/// header and lengths are still checked.
pub fn read_record_chained(
    file: &File,
    pack: &str,
    e: &Expect,
    base: Option<(&ObjectId, Vec<u8>)>,
    check_digest: bool,
) -> Result<Vec<u8>> {
    let (h, payload) = read_payload(file, pack, e, check_digest)?;
    decode_payload(pack, e, &h, payload, base, check_digest)
}

/// Ask the kernel to start reading record `e` (header and payload) into the
/// page cache, without waiting. Decoding is CPU-bound and a pack on a cold
/// cache is read at disk speed: hinted a few pieces ahead, the reads of the
/// next records overlap the decoding of this one instead of stalling it.
/// Only a hint: an error (or another system) changes nothing but speed.
pub(crate) fn prefetch_record(file: &File, e: &Expect) {
    #[cfg(target_os = "linux")]
    {
        // The read checks the length against the record's header; a hint
        // runs before that, so it saturates rather than trust the sum.
        let len =
            std::num::NonZeroU64::new((RECORD_HEADER_LEN as u64).saturating_add(e.stored_len));
        let _ = rustix::fs::fadvise(file, e.offset, len, rustix::fs::Advice::WillNeed);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, e);
}

/// The corruption error for the record `e` of `pack`.
pub(crate) fn corrupt_at(pack: &str, e: &Expect, reason: String) -> Error {
    Error::Corrupt {
        id: e.id,
        pack: pack.to_string(),
        offset: e.offset,
        reason,
    }
}

/// Read one record's header and stored payload, checking the header checksum
/// and the header against the catalog, and the payload checksum when
/// `check_payload`. Skipping it is only for callers that verify a digest
/// covering what the payload decodes to (decoding a damaged payload is
/// safe: every length is bounded by the header).
pub(crate) fn read_payload(
    file: &File,
    pack: &str,
    e: &Expect,
    check_payload: bool,
) -> Result<(RecordHeader, Vec<u8>)> {
    let corrupt = |reason: String| corrupt_at(pack, e, reason);
    // A short read is a truncated pack (damage); any other read error is
    // the machine's (EIO, ...) and is reported as I/O, not as corruption.
    let read_err = |what: &str, err: std::io::Error| {
        if err.kind() == std::io::ErrorKind::UnexpectedEof {
            corrupt(format!("cannot read {what} (truncated pack?): {err}"))
        } else {
            io_err("read pack file", pack)(err)
        }
    };
    let mut hb = [0u8; RECORD_HEADER_LEN];
    file.read_exact_at(&mut hb, e.offset)
        .map_err(|err| read_err("record header", err))?;
    let h = RecordHeader::decode(&hb).map_err(corrupt)?;
    if h.id != e.id || h.kind != e.kind || h.raw_len != e.raw_len || h.stored_len != e.stored_len {
        return Err(corrupt("record header does not match the catalog".into()));
    }
    let mut payload = crate::delta::take_buffer(h.stored_len as usize);
    file.read_exact_at(&mut payload, e.offset + RECORD_HEADER_LEN as u64)
        .map_err(|err| read_err("payload", err))?;
    if check_payload && payload_checksum(&payload) != h.payload_sum {
        return Err(corrupt("payload checksum mismatch".into()));
    }
    Ok((h, payload))
}

/// Decode a payload read by [`read_payload`] (see [`read_record_chained`]).
pub(crate) fn decode_payload(
    pack: &str,
    e: &Expect,
    h: &RecordHeader,
    payload: Vec<u8>,
    base: Option<(&ObjectId, Vec<u8>)>,
    check_digest: bool,
) -> Result<Vec<u8>> {
    let corrupt = |reason: String| corrupt_at(pack, e, reason);
    let raw = match h.compression {
        COMPRESSION_NONE => payload,
        COMPRESSION_PLANES => {
            let ph = crate::delta::PlanesHeader::decode(&payload).map_err(corrupt)?;
            if ph.base.as_ref() != base.as_ref().map(|b| b.0) {
                return Err(corrupt(format!(
                    "delta base in the record ({}) differs from the catalog's ({})",
                    ph.base.map_or("none".into(), |b| b.to_string()),
                    base.as_ref().map_or("none".into(), |b| b.0.to_string())
                )));
            }
            let raw = crate::delta::decode_planes_owned(&payload, h.raw_len, base.map(|b| b.1))
                .map_err(|r| corrupt(format!("delta/planes decoding failed: {r}")))?;
            crate::delta::recycle(payload);
            raw
        }
        _ => {
            let raw = crate::delta::inflate_frame(&payload, h.raw_len as usize)
                .map_err(|err| corrupt(format!("zstd decompression failed: {err}")))?;
            crate::delta::recycle(payload);
            if raw.len() as u64 != h.raw_len {
                return Err(corrupt(format!(
                    "decompressed to {} bytes, expected {}",
                    raw.len(),
                    h.raw_len
                )));
            }
            raw
        }
    };
    if check_digest && e.kind.id_of(&raw) != e.id {
        return Err(corrupt(
            "content digest does not match the object id".into(),
        ));
    }
    Ok(raw)
}

/// Read one record's header and stored payload without decoding it,
/// checking the header checksum, the header against the catalog and the
/// payload checksum (for copying a record verbatim, e.g. onto the wire).
pub fn read_raw_record(file: &File, pack: &str, e: &Expect) -> Result<(RecordHeader, Vec<u8>)> {
    read_payload(file, pack, e, true)
}

/// Walk a pack's records from the start, returning (offset, header) for every
/// well-formed record; stops at the first damaged or truncated one (a crashed
/// writer's tail). Used to rebuild the catalog from packs.
pub fn scan_pack(path: &Path) -> Result<Vec<(u64, RecordHeader)>> {
    let file = File::open(path).map_err(io_err("open", path))?;
    let size = file.metadata().map_err(io_err("stat", path))?.len();
    let mut ph = [0u8; PACK_HEADER_LEN as usize];
    if file.read_exact_at(&mut ph, 0).is_err() || &ph[0..8] != PACK_MAGIC {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    let mut off = PACK_HEADER_LEN;
    while off + RECORD_HEADER_LEN as u64 <= size {
        let mut hb = [0u8; RECORD_HEADER_LEN];
        if file.read_exact_at(&mut hb, off).is_err() {
            break;
        }
        let Ok(h) = RecordHeader::decode(&hb) else {
            break;
        };
        let end = off + RECORD_HEADER_LEN as u64 + h.stored_len;
        if end > size {
            break;
        }
        out.push((off, h));
        off = end;
    }
    Ok(out)
}

/// Check a pack file's 16-byte header.
pub fn check_pack_header(file: &File) -> std::result::Result<(), String> {
    let mut ph = [0u8; PACK_HEADER_LEN as usize];
    file.read_exact_at(&mut ph, 0)
        .map_err(|e| format!("cannot read pack header: {e}"))?;
    if &ph[0..8] != PACK_MAGIC {
        return Err("bad pack magic".into());
    }
    let v = u32::from_le_bytes(ph[8..12].try_into().expect("4 bytes"));
    if v != PACK_VERSION || ph[12..16] != [0, 0, 0, 0] {
        return Err(format!("unknown pack version {v}"));
    }
    Ok(())
}
