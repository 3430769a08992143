//! The receiving side of a fetch: decoding walked records, asking the
//! remote for ids in bounded requests, and importing leaf objects in
//! verified batches (fetching delta bases neither side has).

use std::collections::{HashMap, HashSet};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use super::{cancelled, FetchStats, BATCH_BYTES, BATCH_RAW_BYTES, REQUEST_IDS};
use crate::error::io_err;
use crate::id::ObjectId;
use crate::object::{ChunkList, Kind};
use crate::progress::Progress;
use crate::remote::digest::FileDigests;
use crate::remote::wire::{decode_frame_header, encode_frame_header, FRAME_HEADER_LEN};
use crate::remote::{Remote, RemoteError, WireBody, WireObject};
use crate::store::Ledger;

/// Decode a self-contained record received for walking (commits, trees and
/// chunk lists): bounded decompression and id check.
pub(super) fn decode_for_walk(o: &WireObject, want: Kind) -> Result<Vec<u8>, RemoteError> {
    let bad = |reason: String| RemoteError::Corrupt { id: o.id, reason };
    if o.kind != want {
        return Err(bad(format!(
            "expected a {}, got a {}",
            want.name(),
            o.kind.name()
        )));
    }
    let WireBody::Record {
        compression,
        payload,
    } = &o.body
    else {
        return Err(bad(format!(
            "a {} must be sent as a plain record",
            want.name()
        )));
    };
    if o.raw_len > crate::pack::MAX_RECORD_RAW {
        return Err(RemoteError::LimitExceeded {
            what: format!("object {} declares {} bytes", o.id, o.raw_len),
        });
    }
    let raw = match *compression {
        crate::pack::COMPRESSION_NONE => payload.clone(),
        crate::pack::COMPRESSION_ZSTD => zstd::bulk::decompress(payload, o.raw_len as usize)
            .map_err(|e| {
                bad(format!(
                    "does not decompress within its declared length: {e}"
                ))
            })?,
        c => {
            return Err(bad(format!(
                "unexpected compression {c} for a {}",
                want.name()
            )))
        }
    };
    if raw.len() as u64 != o.raw_len || want.id_of(&raw) != o.id {
        return Err(bad("content digest does not match the object id".into()));
    }
    Ok(raw)
}

/// Refuse an absent entry where only bytes will do (a chunk, a chunk list,
/// a delta base, a tree, a commit): only a file a tree names may arrive
/// marked absent.
pub(super) fn not_absent(o: WireObject) -> Result<WireObject, RemoteError> {
    if o.is_absent() {
        return Err(RemoteError::Corrupt {
            id: o.id,
            reason: "arrived marked absent where its bytes are needed (only a file a tree names may be absent)".into(),
        });
    }
    Ok(o)
}

/// Bytes an object decodes to when imported (0 for a chunked alias, whose
/// chunks count on their own, and for an absent entry).
fn decoded_len(o: &WireObject) -> u64 {
    match o.body {
        WireBody::Chunked { .. } | WireBody::Absent { .. } => 0,
        _ => o.raw_len,
    }
}

/// Bytes of objects read ahead of the importer: the thread reading the
/// remote waits while this much payload is received but not yet handed on
/// (one object is always let through, whatever its size).
pub const READ_AHEAD_BYTES: u64 = 32 << 20;

/// The read-ahead budget shared by the reading thread and the importer.
struct ReadAhead {
    state: std::sync::Mutex<(u64, bool)>,
    freed: std::sync::Condvar,
}

impl ReadAhead {
    /// Wait until `n` more bytes fit; false once the importer has stopped.
    fn take(&self, n: u64) -> bool {
        let mut g = self
            .state
            .lock()
            .expect("the read-ahead lock is never poisoned");
        while !g.1 && g.0 > 0 && g.0 + n > READ_AHEAD_BYTES {
            g = self
                .freed
                .wait(g)
                .expect("the read-ahead lock is never poisoned");
        }
        g.0 += n;
        !g.1
    }

    fn give(&self, n: u64) {
        let mut g = self
            .state
            .lock()
            .expect("the read-ahead lock is never poisoned");
        g.0 = g.0.saturating_sub(n);
        self.freed.notify_all();
    }

    fn stop(&self) {
        let mut g = self
            .state
            .lock()
            .expect("the read-ahead lock is never poisoned");
        g.1 = true;
        self.freed.notify_all();
    }
}

/// Run `produce` on a second thread and hand every object it emits to
/// `consume` on this one, at most [`READ_AHEAD_BYTES`] of payload ahead:
/// reading (network, a sender, wire decoding) overlaps verifying and
/// storing. `produce`'s emit function returns false once `consume` has
/// stopped (failed); `produce` should then return. `consume`'s error wins
/// over `produce`'s (it explains the stop); `panicked` makes the error
/// for a reading thread that panicked.
pub fn read_ahead<E: Send>(
    produce: impl FnOnce(&mut dyn FnMut(WireObject) -> bool) -> Result<(), E> + Send,
    consume: &mut dyn FnMut(WireObject) -> Result<(), E>,
    panicked: impl FnOnce() -> E,
) -> Result<(), E> {
    let budget = ReadAhead {
        state: std::sync::Mutex::new((0, false)),
        freed: std::sync::Condvar::new(),
    };
    let (tx, rx) = std::sync::mpsc::channel::<WireObject>();
    let (read, used) = std::thread::scope(|s| {
        let budget = &budget;
        let reader = s.spawn(move || {
            produce(&mut |o: WireObject| budget.take(o.payload_len()) && tx.send(o).is_ok())
        });
        let mut used = Ok(());
        for o in rx.iter() {
            budget.give(o.payload_len());
            if let Err(e) = consume(o) {
                used = Err(e);
                break;
            }
        }
        // Unblock a reader waiting for room; dropping `rx` fails its sends.
        budget.stop();
        drop(rx);
        (reader.join(), used)
    });
    used?;
    read.unwrap_or_else(|_| Err(panicked()))
}

/// Ask `remote` for `ids` (chunked into requests) and hand every object to
/// `f`; every requested id must arrive. The remote is read on a second
/// thread ([`read_ahead`]), so the network, the sender and the wire
/// decoding overlap the verification and storing `f` does.
pub(super) fn get_all(
    remote: &mut dyn Remote,
    ids: &[ObjectId],
    f: &mut dyn FnMut(WireObject) -> Result<(), RemoteError>,
) -> Result<(), RemoteError> {
    if ids.is_empty() {
        return Ok(());
    }
    let url = remote.url();
    let mut want: HashSet<ObjectId> = ids.iter().copied().collect();
    read_ahead(
        move |emit| {
            for part in ids.chunks(REQUEST_IDS) {
                remote.get(part, &mut |o| {
                    if emit(o) {
                        Ok(())
                    } else {
                        Err(RemoteError::Cancelled)
                    }
                })?;
            }
            Ok(())
        },
        &mut |o| {
            want.remove(&o.id);
            f(o)
        },
        || RemoteError::Protocol {
            reason: "the thread reading the remote panicked".into(),
        },
    )?;
    if let Some(id) = want.into_iter().next() {
        return Err(RemoteError::MissingObject { url, id });
    }
    Ok(())
}

#[derive(Debug, Clone, Copy)]
struct Limits {
    bytes: u64,
    raw: u64,
}

impl Limits {
    const BATCH: Limits = Limits {
        bytes: BATCH_BYTES,
        raw: BATCH_RAW_BYTES,
    };

    /// While chains are resolved: their bases arrive and are imported, then
    /// their links, and the heap the allocator keeps from the bases'
    /// batches (freed, not returned to the system) adds to the links'. A
    /// quarter of a batch keeps a chain's fetch within what a fetch of
    /// versions stored whole needs: on a 192 MiB bf16 series a lazy
    /// checkout three links deep peaked at 125 MB with full batches and
    /// 72 MB with these, against 93 MB for the keyframe
    /// (tests/lazy_memory.rs, docs/benchmarks.md).
    const CHAIN: Limits = Limits {
        bytes: BATCH_BYTES / 4,
        raw: BATCH_RAW_BYTES / 4,
    };

    /// The smaller of both bounds.
    fn min(self, other: Limits) -> Limits {
        Limits {
            bytes: self.bytes.min(other.bytes),
            raw: self.raw.min(other.raw),
        }
    }

    fn reached(self, bytes: u64, raw: u64) -> bool {
        bytes >= self.bytes || raw >= self.raw
    }
}

/// A delta waiting in the [`Spill`] for its base.
/// Split objects in two, each delta on the side of its base when the base
/// is among them, each new chain on the side with fewer bytes so far; the
/// order within a side is kept.
fn split_chains(objs: Vec<WireObject>) -> (Vec<WireObject>, Vec<WireObject>) {
    let mut side: HashMap<ObjectId, bool> = HashMap::new();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let (mut wa, mut wb) = (0u64, 0u64);
    for o in objs {
        let with_base = match &o.body {
            WireBody::Delta { base, .. } => side.get(base).copied(),
            _ => None,
        };
        let to_b = with_base.unwrap_or(wb < wa);
        side.insert(o.id, to_b);
        let w = decoded_len(&o).max(o.payload_len());
        if to_b {
            wb += w;
            b.push(o);
        } else {
            wa += w;
            a.push(o);
        }
    }
    (a, b)
}

/// Import `objs` in order, in parts within `limits`; (stored, absent).
fn import_in_parts(
    l: &mut Ledger,
    objs: Vec<WireObject>,
    limits: Limits,
    digests: &FileDigests,
) -> Result<(u64, u64), RemoteError> {
    let mut counts = (0u64, 0u64);
    let mut import = |part: Vec<WireObject>| -> Result<(), RemoteError> {
        if !part.is_empty() {
            let s = l.import_wire_with(part, Some(digests))?;
            counts.0 += s.stored;
            counts.1 += s.absent;
        }
        Ok(())
    };
    let (mut part, mut bytes, mut raw) = (Vec::new(), 0u64, 0u64);
    for o in objs {
        bytes += o.payload_len();
        raw += decoded_len(&o);
        part.push(o);
        if limits.reached(bytes, raw) {
            import(std::mem::take(&mut part))?;
            (bytes, raw) = (0, 0);
        }
    }
    import(part)?;
    Ok(counts)
}

#[derive(Debug, Clone, Copy)]
struct Spilled {
    id: ObjectId,
    base: ObjectId,
    /// Where its frame starts in the spill file.
    offset: u64,
}

/// Deltas that arrived before their base, kept on disk rather than in
/// memory, so that fetching a chain of any depth holds at most one batch:
/// a chunk of a checkpoint `n` links deep arrives first as its top link,
/// then the links below it one request at a time, and every link waits
/// here until the one below is stored. The file is an anonymous temporary
/// file in the packs folder (same disk as the packs; the system removes it
/// when the handle closes, also after a crash or `kill -9`).
struct Spill {
    dir: PathBuf,
    file: Option<std::fs::File>,
    end: u64,
    waiting: Vec<Spilled>,
}

impl Spill {
    fn new(dir: PathBuf) -> Spill {
        Spill {
            dir,
            file: None,
            end: 0,
            waiting: Vec::new(),
        }
    }

    fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Write the delta `o` (whose base is `base`) to the file.
    fn put(&mut self, o: &WireObject, base: ObjectId) -> Result<(), RemoteError> {
        if self.file.is_none() {
            self.file = Some(
                tempfile::tempfile_in(&self.dir)
                    .map_err(io_err("create a temporary file in", &self.dir))?,
            );
        }
        let file = self.file.as_mut().expect("the file was just created");
        let write = |f: &mut std::fs::File, at: u64| -> std::io::Result<()> {
            f.seek(SeekFrom::Start(at))?;
            f.write_all(&encode_frame_header(o))?;
            f.write_all(o.body.payload())
        };
        write(file, self.end).map_err(io_err("write a waiting delta to", &self.dir))?;
        self.waiting.push(Spilled {
            id: o.id,
            base,
            offset: self.end,
        });
        self.end += (FRAME_HEADER_LEN as u64) + o.payload_len();
        Ok(())
    }

    /// Read back the delta `s` (framed and checked as on the wire).
    fn get(&mut self, s: &Spilled) -> Result<WireObject, RemoteError> {
        let f = self
            .file
            .as_mut()
            .expect("a spilled delta was written to the file");
        let dir = &self.dir;
        let mut h = [0u8; FRAME_HEADER_LEN];
        f.seek(SeekFrom::Start(s.offset))
            .and_then(|_| f.read_exact(&mut h))
            .map_err(io_err("read a waiting delta from", dir))?;
        let fh = decode_frame_header(&h)?;
        let mut payload = vec![0u8; fh.payload_len as usize];
        f.read_exact(&mut payload)
            .map_err(io_err("read a waiting delta from", dir))?;
        let o = fh.into_object(payload)?;
        if o.id != s.id {
            return Err(RemoteError::Corrupt {
                id: s.id,
                reason: "the temporary copy of a waiting delta changed on disk".into(),
            });
        }
        Ok(o)
    }
}

/// Receives leaf objects, imports them in verified batches, and fetches
/// delta bases that neither side of the batch has.
struct Receiver<'a> {
    local: &'a mut Ledger,
    pending: Vec<WireObject>,
    pending_bytes: u64,
    /// Decoded size of the pending records and deltas.
    pending_raw: u64,
    limits: Limits,
    /// Trees of the chunked files being received, fed by every import.
    digests: std::sync::Arc<FileDigests>,
    /// Deltas whose base is not stored yet.
    deferred: Spill,
    stats: FetchStats,
    progress: &'a dyn Progress,
    cancel: &'a AtomicBool,
}

impl Receiver<'_> {
    fn accept(&mut self, o: WireObject) -> Result<(), RemoteError> {
        cancelled(self.cancel)?;
        self.stats.objects_received += 1;
        self.stats.payload_bytes += o.payload_len();
        self.progress.inc(o.payload_len());
        self.push(o)
    }

    /// Add `o` to the pending batch; import the batch when it is full.
    fn push(&mut self, o: WireObject) -> Result<(), RemoteError> {
        self.pending_bytes += o.payload_len();
        self.pending_raw += decoded_len(&o);
        self.pending.push(o);
        if self.limits.reached(self.pending_bytes, self.pending_raw) {
            self.flush()?;
        }
        Ok(())
    }

    /// Import what can be imported; deltas whose base is missing wait.
    fn flush(&mut self) -> Result<(), RemoteError> {
        let batch = std::mem::take(&mut self.pending);
        self.pending_bytes = 0;
        self.pending_raw = 0;
        let mut ready = Vec::with_capacity(batch.len());
        let mut in_batch: HashSet<ObjectId> = HashSet::new();
        let mut waiting: HashSet<ObjectId> = HashSet::new();
        for o in batch {
            let ok = match &o.body {
                WireBody::Delta { base, .. } => {
                    !waiting.contains(base)
                        && (in_batch.contains(base) || self.local.contains(base)?)
                }
                _ => true,
            };
            if ok {
                in_batch.insert(o.id);
                ready.push(o);
            } else if let WireBody::Delta { base, .. } = &o.body {
                waiting.insert(o.id);
                self.deferred.put(&o, *base)?;
            }
        }
        // Two halves of independent chains (a delta goes with its base),
        // each imported in order in parts of at most a batch's size (the
        // pending objects can be more: deferred deltas whose bases have
        // arrived; a later part finds its bases stored by an earlier).
        // The second half is verified and stored on another thread through
        // a second handle, so decoding uses two cores; together the halves
        // hold no more than the one batch they split.
        let (mine, other) = split_chains(ready);
        let limits = self.limits;
        let dir = self.local.dir().to_path_buf();
        let digests = &*self.digests;
        let (here, there) = std::thread::scope(|s| {
            let there = (!other.is_empty()).then(|| {
                s.spawn(move || -> Result<(u64, u64), RemoteError> {
                    let mut l = Ledger::open(&dir)?;
                    import_in_parts(&mut l, other, limits, digests)
                })
            });
            let here = import_in_parts(self.local, mine, limits, digests);
            let there = there.map(|t| {
                t.join().unwrap_or_else(|_| {
                    Err(RemoteError::Protocol {
                        reason: "the importing thread panicked".into(),
                    })
                })
            });
            (here, there.unwrap_or(Ok((0, 0))))
        });
        for (stored, absent) in [here?, there?] {
            self.stats.objects_stored += stored;
            self.stats.files_absent += absent;
        }
        Ok(())
    }

    /// Whether a pending delta's base is neither stored nor pending before
    /// it (so importing the pending objects as they are would fail).
    fn pending_waits(&self) -> Result<bool, RemoteError> {
        let mut earlier: HashSet<ObjectId> = HashSet::new();
        for o in &self.pending {
            if let WireBody::Delta { base, .. } = &o.body {
                if !earlier.contains(base) && !self.local.contains(base)? {
                    return Ok(true);
                }
            }
            earlier.insert(o.id);
        }
        Ok(false)
    }

    /// Fetch missing bases of deferred deltas until all are imported: per
    /// round, the bases no waiting delta provides are fetched (those that
    /// are deltas whose base is missing wait in turn), then the waiting
    /// deltas are imported in dependency order. A round reaches one link
    /// deeper, and memory holds one batch, whatever the depth.
    fn resolve_deferred(&mut self, remote: &mut dyn Remote) -> Result<(), RemoteError> {
        self.limits = self.limits.min(Limits::CHAIN);
        for _ in 0..crate::store::MAX_CHAIN + 1 {
            self.flush()?;
            if self.deferred.is_empty() {
                return Ok(());
            }
            let ids: HashSet<ObjectId> = self.deferred.waiting.iter().map(|s| s.id).collect();
            let mut asked: HashSet<ObjectId> = HashSet::new();
            let mut missing = Vec::new();
            for s in &self.deferred.waiting {
                if !ids.contains(&s.base)
                    && asked.insert(s.base)
                    && !self.local.contains(&s.base)?
                {
                    missing.push(s.base);
                }
            }
            get_all(remote, &missing, &mut |o| self.push(not_absent(o)?))?;
            self.flush()?;
            self.release_ready()?;
        }
        Err(RemoteError::Protocol {
            reason: "delta bases do not resolve (chain too long or cyclic)".into(),
        })
    }

    /// Import the waiting deltas whose base is stored, and the deltas
    /// waiting on those, chain by chain: each delta right after its base
    /// (depth first), so an import finds the base decoded in its batch
    /// rather than decoding the base's chain from the packs once per link.
    /// Deltas whose base is neither stored nor waiting stay waiting.
    fn release_ready(&mut self) -> Result<(), RemoteError> {
        let waiting = std::mem::take(&mut self.deferred.waiting);
        let mut bases: Vec<ObjectId> = Vec::new();
        let mut by_base: HashMap<ObjectId, Vec<Spilled>> = HashMap::new();
        for s in waiting {
            let children = by_base.entry(s.base).or_default();
            if children.is_empty() {
                bases.push(s.base);
            }
            children.push(s);
        }
        for base in bases {
            if !self.local.contains(&base)? {
                continue;
            }
            let mut stack: Vec<Spilled> = by_base.remove(&base).unwrap_or_default();
            stack.reverse();
            while let Some(s) = stack.pop() {
                let o = self.deferred.get(&s)?;
                self.push(o)?;
                if let Some(mut children) = by_base.remove(&s.id) {
                    children.reverse();
                    stack.extend(children);
                }
            }
        }
        self.flush()?;
        self.deferred
            .waiting
            .extend(by_base.into_values().flatten());
        Ok(())
    }
}

/// Fetch file objects (small files, chunked files with their lists and
/// chunks, delta bases as needed), then store `last` (trees and commits,
/// bottom-up) with the final batch.
pub(super) fn receive_files(
    local: &mut Ledger,
    remote: &mut dyn Remote,
    files: &[ObjectId],
    last_objs: Vec<WireObject>,
    seen: &mut HashSet<ObjectId>,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<FetchStats, RemoteError> {
    let spill = Spill::new(local.packs_dir());
    let rx = Receiver {
        local,
        pending: Vec::new(),
        pending_bytes: 0,
        pending_raw: 0,
        limits: Limits::BATCH,
        digests: Default::default(),
        deferred: spill,
        stats: FetchStats::default(),
        progress,
        cancel,
    };
    receive_with(rx, remote, files, last_objs, seen)
}

/// [`receive_files`] with the receiver (and so the batch limits) given.
fn receive_with(
    mut rx: Receiver<'_>,
    remote: &mut dyn Remote,
    files: &[ObjectId],
    last_objs: Vec<WireObject>,
    seen: &mut HashSet<ObjectId>,
) -> Result<FetchStats, RemoteError> {
    // Small files are records (imported in batches); large ones are
    // chunked aliases whose lists and chunks come next.
    let mut aliases: Vec<WireObject> = Vec::new();
    let mut lists: Vec<ObjectId> = Vec::new();
    get_all(remote, files, &mut |o| match &o.body {
        WireBody::Chunked { list } => {
            if seen.insert(*list) {
                lists.push(*list);
            }
            rx.stats.objects_received += 1;
            aliases.push(o);
            Ok(())
        }
        _ => rx.accept(o),
    })?;
    let mut want_lists = Vec::new();
    for l in lists {
        if !rx.local.contains(&l)? {
            want_lists.push(l);
        }
    }
    let mut list_objs = Vec::new();
    get_all(remote, &want_lists, &mut |o| {
        list_objs.push(not_absent(o)?);
        Ok(())
    })?;
    let mut list_of: HashMap<ObjectId, ChunkList> = HashMap::new();
    for o in list_objs {
        let raw = decode_for_walk(&o, Kind::ChunkList)?;
        let l = ChunkList::decode(&raw).map_err(|r| RemoteError::Corrupt {
            id: o.id,
            reason: format!("not a valid chunk list: {r}"),
        })?;
        list_of.insert(o.id, l);
        rx.accept(o)?;
    }
    // Chunks by their place in the file, then files in history order: the
    // versions of one tensor piece (a delta and its base) are then next to
    // each other, so a delta finds its base decoded in the same batch
    // instead of decoding the base's whole chain again from the store.
    let mut per_file: Vec<Vec<ObjectId>> = Vec::new();
    let mut digests = FileDigests::new();
    for a in &aliases {
        let WireBody::Chunked { list } = &a.body else {
            continue;
        };
        let l = match list_of.get(list) {
            Some(l) => l.clone(),
            None => rx.local.read_chunk_list(list)?,
        };
        per_file.push(l.chunks.iter().map(|c| c.id).collect());
        digests.add_list(*list, &l);
    }
    rx.digests = std::sync::Arc::new(digests);
    let mut chunks: Vec<ObjectId> = Vec::new();
    let longest = per_file.iter().map(Vec::len).max().unwrap_or(0);
    for at in 0..longest {
        for f in &per_file {
            if let Some(c) = f.get(at) {
                if !rx.local.contains(c)? && seen.insert(*c) {
                    chunks.push(*c);
                }
            }
        }
    }
    drop(per_file);
    get_all(remote, &chunks, &mut |o| rx.accept(not_absent(o)?))?;
    // A transfer smaller than one batch is all still pending, to be stored
    // with the aliases in one import. A delta among it whose base is
    // neither stored nor sent (a partial clone holds none of a promised
    // checkpoint's chain) must get its base first, as in a flushed batch.
    if rx.pending_waits()? {
        rx.flush()?;
    }
    if !rx.deferred.is_empty() {
        rx.resolve_deferred(remote)?;
    }
    // Bottom-up: what is still pending (all of a small transfer, so it is
    // stored atomically), chunked files, then `last_objs`.
    let mut last: Vec<WireObject> = std::mem::take(&mut rx.pending);
    last.extend(aliases);
    last.extend(last_objs);
    let s = rx.local.import_wire_with(last, Some(&rx.digests))?;
    let mut stats = rx.stats;
    stats.objects_stored += s.stored;
    stats.files_absent += s.absent;
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::dir::DirRemote;
    use crate::{CommitRequest, NoProgress};

    /// A bf16 safetensors file of one tensor of `n` elements, version
    /// `v`: each version moves about one element in eight by one code
    /// point from the one before.
    fn version(n: usize, v: u64) -> Vec<u8> {
        let header = format!(
            r#"{{"w":{{"dtype":"BF16","shape":[{n}],"data_offsets":[0,{}]}}}}"#,
            2 * n
        );
        let mut out = (header.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(header.as_bytes());
        for i in 0..n as u64 {
            let moved = (0..v).filter(|r| (i * 7 + r * 13) % 8 == 0).count() as u16;
            let base = (i.wrapping_mul(0x9e37_79b9) >> 7) as u16;
            out.extend_from_slice(&base.wrapping_add(moved).to_le_bytes());
        }
        out
    }

    /// A file whose pieces are links of chains none of which the receiver
    /// holds, received in import parts of one object each: every part
    /// finds its delta bases stored by an earlier part, and the file reads
    /// back whole. (With the real limits such parts happen past 64 MiB of
    /// payload or 256 MiB of versions.)
    fn blob(n: usize, tag: u8) -> WireObject {
        let payload = vec![tag; n];
        WireObject {
            id: ObjectId::of_bytes(&payload),
            kind: Kind::Bytes,
            raw_len: n as u64,
            body: WireBody::Record {
                compression: crate::pack::COMPRESSION_NONE,
                payload,
            },
        }
    }

    #[test]
    fn read_ahead_stays_within_its_budget_and_hands_on_everything_in_order() {
        use std::sync::atomic::{AtomicU64, Ordering};
        let produced = AtomicU64::new(0);
        let consumed = AtomicU64::new(0);
        let mut peak = 0u64;
        let mut seen = Vec::new();
        read_ahead(
            |emit| -> Result<(), RemoteError> {
                for i in 0..200u32 {
                    let o = blob(1 << 20, (i % 251) as u8);
                    produced.fetch_add(o.payload_len(), Ordering::SeqCst);
                    assert!(emit(o), "the consumer never stops here");
                }
                Ok(())
            },
            &mut |o| {
                // A slow importer: the reader must wait, not pile up.
                std::thread::sleep(std::time::Duration::from_millis(1));
                let ahead = produced.load(Ordering::SeqCst) - consumed.load(Ordering::SeqCst);
                peak = peak.max(ahead);
                consumed.fetch_add(o.payload_len(), Ordering::SeqCst);
                seen.push(o.body.payload()[0]);
                Ok(())
            },
            || RemoteError::Cancelled,
        )
        .expect("read ahead");
        assert_eq!(
            seen,
            (0..200u32).map(|i| (i % 251) as u8).collect::<Vec<_>>()
        );
        // At most the budget, plus the object being consumed (handed back
        // to the budget before the importer runs) and the one the reader
        // has counted but is still waiting to emit.
        assert!(peak <= READ_AHEAD_BYTES + (2 << 20), "peak {peak}");
        assert!(peak >= 4 << 20, "the reader did read ahead (peak {peak})");
    }

    #[test]
    fn read_ahead_stops_the_reader_when_the_importer_fails() {
        let mut emitted_after_stop = 0;
        let err = read_ahead(
            |emit| -> Result<(), RemoteError> {
                for _ in 0..10_000 {
                    if !emit(blob(64 << 10, 1)) {
                        emitted_after_stop += 1;
                        return Err(RemoteError::Cancelled);
                    }
                }
                Ok(())
            },
            &mut |o| {
                Err(RemoteError::Corrupt {
                    id: o.id,
                    reason: "refused by the test".into(),
                })
            },
            || RemoteError::Cancelled,
        )
        .expect_err("the importer's error");
        assert!(err.to_string().contains("refused by the test"), "{err}");
        assert_eq!(emitted_after_stop, 1, "the reader learnt of the stop");
    }

    #[test]
    fn deferred_chains_import_in_parts_of_one_object() {
        let t = tempfile::tempdir().expect("tempdir");
        let (src, dst) = (t.path().join("src"), t.path().join("dst"));
        let mut origin = Ledger::init(&src).expect("init origin");
        origin.config.chunk_threshold = 1024;
        let work = t.path().join("work");
        std::fs::create_dir(&work).expect("mkdir");
        let mut last = Vec::new();
        for v in 0..5 {
            last = version(40_000, v);
            std::fs::write(work.join("model.safetensors"), &last).expect("write");
            origin
                .commit_dir(
                    &work,
                    &CommitRequest::new("v"),
                    &NoProgress,
                    &AtomicBool::new(false),
                )
                .expect("commit");
        }
        let tree = origin
            .read_commit(&origin.resolve("HEAD").expect("HEAD"))
            .expect("commit")
            .tree;
        let file = origin.walk_files(&tree).expect("walk")[0].id;
        drop(origin);
        let mut local = Ledger::init(&dst).expect("init receiver");
        let mut remote = DirRemote::open(&src).expect("open remote");
        let cancel = AtomicBool::new(false);
        let spill = Spill::new(local.packs_dir());
        let rx = Receiver {
            local: &mut local,
            pending: Vec::new(),
            pending_bytes: 0,
            pending_raw: 0,
            limits: Limits { bytes: 1, raw: 1 },
            digests: Default::default(),
            deferred: spill,
            stats: FetchStats::default(),
            progress: &NoProgress,
            cancel: &cancel,
        };
        let stats = receive_with(rx, &mut remote, &[file], Vec::new(), &mut HashSet::new())
            .expect("receive");
        assert!(stats.objects_stored > 5, "{stats:?}");
        let st = local.stats().expect("stats");
        assert!(st.delta_objects > 0, "the chains arrived as deltas");
        assert!(local.read_bytes(&file).expect("read") == last);
        // The deltas that waited for their bases left no file behind: the
        // packs folder holds the registered packs only.
        let files = std::fs::read_dir(local.packs_dir())
            .expect("read the packs folder")
            .count() as u64;
        assert_eq!(files, st.packs, "only registered packs remain");
    }
}
