//! Exporting stored objects in wire form and importing received ones:
//! verify everything, then store it the way a commit does (new segment,
//! fsync, one catalog transaction).

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::sync::Arc;

use serde::Serialize;

use super::digest::{FileDigests, FileTree};
use super::{WireBody, WireObject};
use crate::catalog::ImmediateTx;
use crate::catalog::{self, Location, ObjectRow};
use crate::commit::{chain_cost, index_commit, link_cost};
use crate::error::{io_err, Error, Result};
use crate::id::{CommitId, ObjectId, TreeId};
use crate::object::{ChunkList, Commit, Kind, Mode, Tree};
use crate::pack::{self, Expect, RecordHeader, MAX_RECORD_RAW};
use crate::store::{
    decode_chain, decode_chain_unverified, decode_in_order, name_damage, resolve_chain, Ledger,
    PackSource, Staging, MAX_DELTA_DEPTH,
};
use crate::validate;

mod parallel;
mod pipeline;

use parallel::Prechecked;
pub use pipeline::ImportPipeline;

/// What [`Ledger::import_wire`] did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ImportStats {
    /// Objects in the batch.
    pub received: u64,
    /// Objects newly stored.
    pub stored: u64,
    /// Objects skipped because they were already stored (or repeated).
    pub skipped: u64,
    /// Payload bytes of the newly stored records.
    pub payload_bytes: u64,
    /// Absent entries newly recorded as pruned (files the sender's
    /// retention gc dropped; see [`crate::remote::WireBody::Absent`]).
    pub absent: u64,
}

/// What a received absent mark's policy is recorded as: the sender's text
/// and where it came from, so a read of the file and `fsck` say that the
/// bytes were dropped by a peer, not here.
pub fn received_policy(policy: &str) -> String {
    if policy.ends_with(RECEIVED_NOTE) {
        return policy.to_string();
    }
    format!("{policy}{RECEIVED_NOTE}")
}

/// What [`received_policy`] appends.
pub(crate) const RECEIVED_NOTE: &str = " (pruned on a peer; received marked absent)";

fn bad(id: ObjectId, reason: impl Into<String>) -> Error {
    Error::Received {
        id,
        reason: reason.into(),
    }
}

/// Bytes one import may decode and hash to verify chunked files: a floor,
/// plus [`VERIFY_FACTOR`] times the stored size of the distinct chunks and
/// the chunk-list entries it verifies (each chunk credited once per
/// import). Chunks repeat legitimately (a run of zeros is one small record
/// listed many times, 2 MiB per 36-byte entry), so the factor is generous;
/// what it stops is a few kilobytes naming one highly compressible 256 MiB
/// chunk thousands of times (hours of decoding and hashing for nothing).
pub const VERIFY_FLOOR: u64 = 1 << 30;
/// See [`VERIFY_FLOOR`].
pub const VERIFY_FACTOR: u64 = 65_536;

/// A violation as an import explains it (the batch counts as stored).
fn in_stream(v: validate::Violation) -> String {
    match v {
        validate::Violation::Missing { what, id } => {
            format!("{what} {id} is neither stored nor earlier in the stream")
        }
        m => m.to_string(),
    }
}

/// Decode a self-contained record payload to exactly `raw_len` bytes
/// (bounded: never more than `raw_len` is allocated or produced).
fn decode_record(o: &WireObject, compression: u8, payload: &[u8]) -> Result<Vec<u8>> {
    let raw_len = o.raw_len;
    let raw = match compression {
        pack::COMPRESSION_NONE => {
            if payload.len() as u64 != raw_len {
                return Err(bad(
                    o.id,
                    format!(
                        "stored payload has {} bytes, declared length is {raw_len}",
                        payload.len()
                    ),
                ));
            }
            payload.to_vec()
        }
        pack::COMPRESSION_ZSTD => {
            let raw = zstd::bulk::decompress(payload, raw_len as usize).map_err(|e| {
                bad(
                    o.id,
                    format!(
                        "zstd payload does not decompress within its declared {raw_len} bytes: {e}"
                    ),
                )
            })?;
            if raw.len() as u64 != raw_len {
                return Err(bad(
                    o.id,
                    format!("decompressed to {} bytes, declared {raw_len}", raw.len()),
                ));
            }
            raw
        }
        pack::COMPRESSION_PLANES => {
            let h = crate::delta::PlanesHeader::decode(payload).map_err(|r| bad(o.id, r))?;
            if h.base.is_some() {
                return Err(bad(o.id, "a plain record carries a delta payload"));
            }
            crate::delta::decode_planes(payload, raw_len, None).map_err(|r| bad(o.id, r))?
        }
        c => return Err(bad(o.id, format!("unknown compression code {c}"))),
    };
    Ok(raw)
}

/// A received object's declared length is within the record limit.
pub(super) fn within_record_limit(o: &WireObject) -> Result<()> {
    if o.raw_len > MAX_RECORD_RAW {
        return Err(bad(
            o.id,
            format!("declared length {} is over the record limit", o.raw_len),
        ));
    }
    Ok(())
}

/// The checks of a received delta's frame and planes header (a bytes
/// object, planes-encoded, within the record limit, naming the frame's
/// base): its header, for the width.
fn delta_header(
    o: &WireObject,
    base: &ObjectId,
    compression: u8,
    payload: &[u8],
) -> Result<crate::delta::PlanesHeader> {
    if o.kind != Kind::Bytes || compression != pack::COMPRESSION_PLANES {
        return Err(bad(o.id, "only planes-encoded bytes objects can be deltas"));
    }
    within_record_limit(o)?;
    let h = crate::delta::PlanesHeader::decode(payload).map_err(|r| bad(o.id, r))?;
    if h.base != Some(*base) {
        return Err(bad(
            o.id,
            "the payload names another delta base than the frame",
        ));
    }
    Ok(h)
}

/// One use of delta base `base` done (`uses`: the deltas still to come
/// on each base): its cached bytes are dropped after the last, and the
/// bytes to apply the delta onto in place are handed back — at its last
/// use (a chain's links arrive one after the other, so usually) the
/// base's own bytes, not a copy; before it, a pooled copy.
pub(super) fn use_base(
    base: &ObjectId,
    bytes: Arc<Vec<u8>>,
    uses: &mut HashMap<ObjectId, usize>,
    cache: &mut HashMap<ObjectId, Arc<Vec<u8>>>,
) -> Vec<u8> {
    if let Some(n) = uses.get_mut(base) {
        *n -= 1;
        if *n == 0 {
            cache.remove(base);
        }
    }
    Arc::try_unwrap(bytes).unwrap_or_else(|shared| {
        let mut v = crate::delta::take_buffer(shared.len());
        v.copy_from_slice(&shared);
        v
    })
}

/// Decoded structured objects of the batch (for checks and the index).
#[derive(Default)]
struct Decoded {
    trees: HashMap<ObjectId, Tree>,
    commits: Vec<(CommitId, Commit)>,
    lists: HashMap<ObjectId, ChunkList>,
    /// Bytes objects some tree of the batch names as a symlink target.
    want_links: HashSet<ObjectId>,
    /// Their bytes, kept for the policy's symlink check.
    links: HashMap<ObjectId, Vec<u8>>,
}

/// Symlink targets named by the trees of `batch` (decoded once more here,
/// before the bytes they name go by): their bytes are kept for
/// [`crate::policy`]. Undecodable trees are left for the main pass to
/// refuse.
fn symlink_targets(batch: &[WireObject]) -> HashSet<ObjectId> {
    let limit = u64::from(crate::policy::Limits::default().max_path_bytes);
    let mut out = HashSet::new();
    for o in batch {
        let WireBody::Record {
            compression,
            payload,
        } = &o.body
        else {
            continue;
        };
        if o.kind != Kind::Tree || o.raw_len > MAX_RECORD_RAW {
            continue;
        }
        let Ok(raw) = decode_record(o, *compression, payload) else {
            continue;
        };
        let Ok(t) = Tree::decode(&raw) else {
            continue;
        };
        out.extend(
            t.entries
                .iter()
                .filter(|e| e.mode == Mode::Symlink && e.size <= limit)
                .map(|e| e.id),
        );
    }
    out
}

/// The batch on top of the store, as the policy walk reads it.
struct BatchSource<'a> {
    ledger: &'a Ledger,
    dec: &'a Decoded,
}

impl crate::policy::TreeSource for BatchSource<'_> {
    fn tree(&mut self, id: &ObjectId) -> Result<Tree> {
        match self.dec.trees.get(id) {
            Some(t) => Ok(t.clone()),
            None => self.ledger.read_tree(&TreeId(*id)),
        }
    }

    fn symlink_target(&mut self, id: &ObjectId) -> Result<Option<Vec<u8>>> {
        if let Some(b) = self.dec.links.get(id) {
            return Ok(Some(b.clone()));
        }
        crate::policy::StoreSource(self.ledger).symlink_target(id)
    }
}

impl Ledger {
    /// The stored form of one object, without decoding (cheap: raw record
    /// bytes, header and payload checksums checked).
    pub fn export_wire(&self, id: &ObjectId) -> Result<WireObject> {
        let row = self.locate(id)?.ok_or(Error::ObjectMissing { id: *id })?;
        let raw_record = |pack_id: i64, offset: u64, stored_len: u64| -> Result<(u8, Vec<u8>)> {
            let (name, source) = self.pack_file(pack_id, id)?;
            let (h, payload) = pack::read_raw_record(
                &*source.file(&name, id)?,
                &name,
                &Expect {
                    id: *id,
                    kind: row.kind,
                    offset,
                    raw_len: row.raw_len,
                    stored_len,
                },
            )?;
            Ok((h.compression, payload))
        };
        let body = match row.location {
            Location::Chunked { list } => WireBody::Chunked { list },
            Location::Packed {
                pack_id,
                offset,
                stored_len,
            } => {
                let (compression, payload) = raw_record(pack_id, offset, stored_len)?;
                WireBody::Record {
                    compression,
                    payload,
                }
            }
            Location::Delta {
                pack_id,
                offset,
                stored_len,
                base,
            } => {
                let (compression, payload) = raw_record(pack_id, offset, stored_len)?;
                WireBody::Delta {
                    base,
                    compression,
                    payload,
                }
            }
        };
        Ok(WireObject {
            id: *id,
            kind: row.kind,
            raw_len: row.raw_len,
            body,
        })
    }

    /// [`Ledger::export_wire`], or an absent entry
    /// ([`WireBody::Absent`]) for a file a retention gc pruned here.
    pub fn export_wire_or_absent(&self, id: &ObjectId) -> Result<WireObject> {
        match self.export_wire(id) {
            Err(Error::ObjectMissing { id }) => match self.pruned_file(&id)? {
                Some(p) => Ok(WireObject::absent(id, p.size, &p.policy)),
                None => Err(Error::ObjectMissing { id }),
            },
            r => r,
        }
    }

    /// The delta base of a stored record, if it is a delta (to send bases
    /// before deltas).
    pub fn delta_base(&self, id: &ObjectId) -> Result<Option<ObjectId>> {
        Ok(match self.locate(id)?.map(|r| r.location) {
            Some(Location::Delta { base, .. }) => Some(base),
            _ => None,
        })
    }

    /// Verify a batch of received objects and store it durably. Every object
    /// is checked before anything is stored: records are decoded with
    /// bounded decompression to exactly their declared length and hashed
    /// against their id (derive-key for structured kinds); trees, commits
    /// and chunk lists must decode strictly (so no tree entry name can be
    /// `..`, contain `/`, …); a delta's base must be stored or earlier in
    /// the batch; a tree's subtrees and a commit's tree must be stored or
    /// earlier in the batch; a chunked file's chunk list and every chunk
    /// must be present, and the chunks must hash to the file's id. Then the
    /// new records go to a new pack segment (fsynced) and are catalogued in
    /// one transaction. Objects already stored are skipped. If any object
    /// fails, nothing is stored (the segment is removed) and the ledger is
    /// exactly as before.
    pub fn import_wire(&mut self, batch: Vec<WireObject>) -> Result<ImportStats> {
        self.import_wire_with(batch, None)
    }

    /// [`Ledger::import_wire`], handing every piece of a chunked file it
    /// decodes to `digests` and taking the files' trees from it, so a
    /// chunked file of a transfer split over many batches is checked
    /// against its id without decoding its pieces again (see
    /// [`crate::remote::digest`]). The same checks hold.
    pub fn import_wire_with(
        &mut self,
        batch: Vec<WireObject>,
        digests: Option<&FileDigests>,
    ) -> Result<ImportStats> {
        self.import_staged(batch, digests, None)
    }

    /// [`Ledger::import_wire_with`], verifying the batch's pieces (bytes
    /// records and deltas, the decoding and hashing that is nearly all of
    /// an import's work) on two threads first, each a half of the batch's
    /// chains (a delta goes with its base), and only then storing the
    /// batch on this thread as one import: the same checks hold, and a
    /// refused batch still stores nothing (no segment, no catalog row).
    /// The second thread opens its own handle on the ledger to read delta
    /// bases stored before. A batch naming symlink targets is imported
    /// on one thread (their bytes are kept for the policy's checks).
    pub fn import_wire_parallel(
        &mut self,
        batch: Vec<WireObject>,
        digests: Option<&FileDigests>,
    ) -> Result<ImportStats> {
        let pre = if symlink_targets(&batch).is_empty() {
            Some(self.precheck(&batch, digests)?)
        } else {
            None
        };
        self.import_staged(batch, digests, pre.as_ref())
    }

    fn import_staged(
        &mut self,
        batch: Vec<WireObject>,
        digests: Option<&FileDigests>,
        pre: Option<&Prechecked>,
    ) -> Result<ImportStats> {
        let mut staging = Staging::new(self);
        match self.import_inner(batch, &mut staging, digests, pre) {
            Ok(s) => Ok(s),
            Err(e) => {
                if let Some(p) = staging.pack.take() {
                    let _ = p.discard();
                }
                Err(e)
            }
        }
    }

    fn import_inner(
        &mut self,
        batch: Vec<WireObject>,
        st: &mut Staging,
        digests: Option<&FileDigests>,
        pre: Option<&Prechecked>,
    ) -> Result<ImportStats> {
        let mut stats = ImportStats {
            received: batch.len() as u64,
            ..Default::default()
        };
        // Which in-batch objects later objects use as delta bases, and by
        // how many: their decoded bytes are kept until their last use, so a
        // batch of many chains holds only the bases still to be used.
        let mut bases: HashMap<ObjectId, usize> = HashMap::new();
        for o in &batch {
            if let WireBody::Delta { base, .. } = &o.body {
                *bases.entry(*base).or_default() += 1;
            }
        }
        let mut cache: HashMap<ObjectId, Arc<Vec<u8>>> = HashMap::new();
        // Chain cost (`commit::chain_cost`) of every record stored so far
        // in this batch, and a compressor for versions stored whole.
        let mut costs: HashMap<ObjectId, u32> = HashMap::new();
        let mut whole_comp = None;
        let mut dec = Decoded {
            want_links: symlink_targets(&batch),
            ..Decoded::default()
        };
        let mut seen: HashSet<ObjectId> = HashSet::new();
        let mut aliases: Vec<(ObjectId, u64, ObjectId)> = Vec::new();
        let mut absent: HashMap<ObjectId, (u64, &str)> = HashMap::new();
        for o in &batch {
            // An absent entry never touches a stored copy, and a copy
            // later in the batch wins over it.
            if let WireBody::Absent { policy } = &o.body {
                if o.kind != Kind::Bytes {
                    return Err(bad(o.id, "only a file (bytes object) can be marked absent"));
                }
                if seen.contains(&o.id) || self.contains(&o.id)? {
                    stats.skipped += 1;
                } else {
                    absent.entry(o.id).or_insert((o.raw_len, policy.as_str()));
                }
                continue;
            }
            if !seen.insert(o.id) || self.contains(&o.id)? {
                stats.skipped += 1;
                continue;
            }
            match &o.body {
                WireBody::Absent { .. } => unreachable!("absent entries are handled above"),
                WireBody::Chunked { list } => {
                    if o.kind != Kind::Bytes {
                        return Err(bad(o.id, "a chunked object must be a bytes object"));
                    }
                    if dec.want_links.contains(&o.id) {
                        return Err(bad(o.id, "a symlink target must be stored whole"));
                    }
                    aliases.push((o.id, o.raw_len, *list));
                    continue;
                }
                WireBody::Record {
                    compression,
                    payload,
                } => {
                    within_record_limit(o)?;
                    // Checked already (decoded and hashed) when prechecked.
                    if !pre.is_some_and(|p| p.contains_key(&o.id)) {
                        let raw = decode_record(o, *compression, payload)?;
                        self.check_and_keep(o, raw, &bases, &mut cache, &mut dec, digests)?;
                    }
                    let h =
                        RecordHeader::for_payload(o.kind, *compression, o.id, o.raw_len, payload);
                    st.append_record_with_base(&h, payload, None)?;
                    stats.payload_bytes += payload.len() as u64;
                    costs.insert(o.id, 0);
                }
                WireBody::Delta {
                    base,
                    compression,
                    payload,
                } => {
                    let h = delta_header(o, base, *compression, payload)?;
                    if let Some(c) = pre.and_then(|p| p.get(&o.id)) {
                        // Decoded against its base and hashed by the
                        // precheck, which also chose how to store it.
                        let (stored, link_base) = match &c.whole {
                            Some(w) => (w.as_slice(), None),
                            None => (payload.as_slice(), Some(*base)),
                        };
                        let comp = if c.whole.is_some() {
                            pack::COMPRESSION_PLANES
                        } else {
                            *compression
                        };
                        let hd = RecordHeader::for_payload(o.kind, comp, o.id, o.raw_len, stored);
                        st.append_record_with_base(&hd, stored, link_base)?;
                        stats.payload_bytes += stored.len() as u64;
                        costs.insert(o.id, c.cost);
                        stats.stored += 1;
                        continue;
                    }
                    let from_store = !cache.contains_key(base);
                    let (base_bytes, base_cost) = self.base_bytes(o, base, &cache, &costs, st)?;
                    let base_bytes = use_base(base, base_bytes, &mut bases, &mut cache);
                    let raw =
                        crate::delta::decode_planes_owned(payload, o.raw_len, Some(base_bytes))
                            .map_err(|r| bad(o.id, r));
                    let raw = self.or_damaged_base(raw, from_store, base)?;
                    let cost = base_cost.saturating_add(link_cost(payload.len() as u64, o.raw_len));
                    if cost > MAX_DELTA_DEPTH {
                        // This ledger holds the base deeper in its chain
                        // than the sender does (the sender's gc re-rooted
                        // it since), so the delta would take the chain
                        // past what any writer makes; stored as received,
                        // such links can stack up fetch after fetch until
                        // readers refuse the chain. Store the version
                        // whole, as a commit at the limit would.
                        let whole = self.encode_whole(o, &raw, h.width, &mut whole_comp)?;
                        let kept =
                            self.check_and_keep(o, raw, &bases, &mut cache, &mut dec, digests);
                        self.or_damaged_base(kept, from_store, base)?;
                        let hw = RecordHeader::for_payload(
                            o.kind,
                            pack::COMPRESSION_PLANES,
                            o.id,
                            o.raw_len,
                            &whole,
                        );
                        st.append_record_with_base(&hw, &whole, None)?;
                        stats.payload_bytes += whole.len() as u64;
                        costs.insert(o.id, 0);
                    } else {
                        let kept =
                            self.check_and_keep(o, raw, &bases, &mut cache, &mut dec, digests);
                        self.or_damaged_base(kept, from_store, base)?;
                        let hd = RecordHeader::for_payload(
                            o.kind,
                            *compression,
                            o.id,
                            o.raw_len,
                            payload,
                        );
                        st.append_record_with_base(&hd, payload, Some(*base))?;
                        stats.payload_bytes += payload.len() as u64;
                        costs.insert(o.id, cost);
                    }
                }
            }
            stats.stored += 1;
        }
        drop(cache);
        // Chunked files: list and chunks present, whole-file digest.
        if !aliases.is_empty() {
            st.sync()?;
            self.verify_aliases(&aliases, &dec, st, digests)?;
            for (id, raw_len, list) in &aliases {
                st.put_chunked(*id, *raw_len, *list);
                stats.stored += 1;
            }
        }
        absent.retain(|id, _| !seen.contains(id));
        self.check_structure(&dec, st, &absent)?;
        self.check_policy(&dec)?;
        st.sync()?;
        let mut logical: Vec<(CommitId, &Commit, u64)> = Vec::new();
        for (cid, c) in &dec.commits {
            logical.push((*cid, c, self.logical_bytes(&c.tree, &dec)?));
        }
        let pack_name = st.pack.as_ref().map(|p| p.name().to_string());
        let tx = ImmediateTx::begin(&self.db)?;
        catalog::insert_staged(&tx, pack_name.as_deref(), &st.rows)?;
        for (cid, c, n) in logical {
            index_commit(&tx, &cid, c, n)?;
        }
        if !absent.is_empty() {
            let marks: Vec<(ObjectId, u64, String)> = absent
                .iter()
                .map(|(id, (len, p))| (*id, *len, received_policy(p)))
                .collect();
            stats.absent = crate::maint::record_received_absent(&tx, &marks, crate::refs::now())?;
        }
        tx.commit()?;
        Ok(stats)
    }

    /// The rules fsck applies to trees and commits ([`crate::validate`]),
    /// against what is stored or staged in this batch: subtrees are trees,
    /// files are bytes of the entry's size (present unless this is a
    /// partial clone), a commit's tree is a tree and its parents commits.
    fn check_structure(
        &self,
        dec: &Decoded,
        st: &Staging,
        absent: &HashMap<ObjectId, (u64, &str)>,
    ) -> Result<()> {
        let staged: HashMap<ObjectId, (Kind, u64)> = st
            .rows
            .iter()
            .map(|r| (r.id, (r.kind, r.raw_len)))
            .collect();
        let partial = self.promisor()?.is_some();
        // A file marked absent (in this batch or pruned before) stands in
        // for the file: it must be a bytes object of the entry's size, so
        // it can never stand in for a subtree or a file of another size.
        let mut lookup = |id: &ObjectId| -> Result<validate::Found> {
            if let Some(f) = staged.get(id) {
                return Ok(Some(*f));
            }
            if let Some(r) = self.locate(id)? {
                return Ok(Some((r.kind, r.raw_len)));
            }
            if let Some((len, _)) = absent.get(id) {
                return Ok(Some((Kind::Bytes, *len)));
            }
            Ok(self.pruned_file(id)?.map(|p| (Kind::Bytes, p.size)))
        };
        for (tid, t) in &dec.trees {
            for e in &t.entries {
                validate::check_entry(e, lookup(&e.id)?, partial)
                    .map_err(|v| bad(*tid, in_stream(v)))?;
            }
        }
        for (cid, c) in &dec.commits {
            validate::check_commit(c, &mut lookup)?.map_err(|v| bad(cid.0, in_stream(v)))?;
        }
        Ok(())
    }

    /// The import policy ([`crate::policy`]) on everything the batch
    /// brings: every commit's whole tree (positions: depth, path length,
    /// escaping symlinks; stored subtrees included), then the rules of one
    /// tree on the batch's trees that no commit of it reaches.
    fn check_policy(&self, dec: &Decoded) -> Result<()> {
        let limits = crate::policy::Limits::default();
        let mut walk = crate::policy::TreeCheck::new(limits);
        let mut src = BatchSource { ledger: self, dec };
        for (_, c) in &dec.commits {
            walk.check_root(&c.tree, &mut src)?;
        }
        for (id, t) in &dec.trees {
            if !walk.checked(id) {
                crate::policy::check_local(*id, t, "", &limits)?;
            }
        }
        Ok(())
    }

    /// Check a decoded object's id, decode structured kinds, keep bytes
    /// that later objects of the batch use as delta bases.
    fn check_and_keep(
        &self,
        o: &WireObject,
        raw: Vec<u8>,
        bases: &HashMap<ObjectId, usize>,
        cache: &mut HashMap<ObjectId, Arc<Vec<u8>>>,
        dec: &mut Decoded,
        digests: Option<&FileDigests>,
    ) -> Result<()> {
        if o.kind.id_of(&raw) != o.id {
            return Err(bad(o.id, "content digest does not match the object id"));
        }
        match o.kind {
            Kind::Bytes => {
                if let Some(d) = digests {
                    d.offer(&o.id, &raw);
                }
                if dec.want_links.contains(&o.id) {
                    dec.links.insert(o.id, raw.clone());
                }
                if bases.get(&o.id).is_some_and(|&n| n > 0) {
                    cache.insert(o.id, Arc::new(raw));
                } else {
                    // For the next piece (no fresh pages to fault in).
                    crate::delta::recycle(raw);
                }
            }
            Kind::Tree => {
                let t =
                    Tree::decode(&raw).map_err(|r| bad(o.id, format!("not a valid tree: {r}")))?;
                dec.trees.insert(o.id, t);
            }
            Kind::Commit => {
                let c = Commit::decode(&raw)
                    .map_err(|r| bad(o.id, format!("not a valid commit: {r}")))?;
                dec.commits.push((CommitId(o.id), c));
            }
            Kind::ChunkList => {
                let l = ChunkList::decode(&raw)
                    .map_err(|r| bad(o.id, format!("not a valid chunk list: {r}")))?;
                dec.lists.insert(o.id, l);
            }
        }
        Ok(())
    }

    /// The planes payload of a received version stored whole (no base), in
    /// this ledger's forms; `comp` is created on first use.
    fn encode_whole(
        &self,
        o: &WireObject,
        raw: &[u8],
        width: u8,
        comp: &mut Option<zstd::bulk::Compressor<'static>>,
    ) -> Result<Vec<u8>> {
        let comp = match comp {
            Some(c) => c,
            None => comp.insert(
                crate::delta::planes_compressor(self.config.zstd_level)
                    .map_err(io_err("create zstd compressor", "(memory)"))?,
            ),
        };
        crate::delta::encode_planes_with(
            comp,
            raw,
            usize::from(width),
            None,
            self.config.planes_options(),
        )
        .map_err(|r| bad(o.id, r))
    }

    /// Verified bytes of a delta's base, from this batch or stored, and the
    /// cost (`commit::chain_cost`) of its chain in this ledger.
    fn base_bytes(
        &self,
        o: &WireObject,
        base: &ObjectId,
        cache: &HashMap<ObjectId, Arc<Vec<u8>>>,
        costs: &HashMap<ObjectId, u32>,
        st: &Staging,
    ) -> Result<(Arc<Vec<u8>>, u32)> {
        if let (Some(b), Some(&cost)) = (cache.get(base), costs.get(base)) {
            return Ok((b.clone(), cost));
        }
        if st.seen.contains(base) {
            // Staged earlier in the batch but not cached: cannot happen (every
            // in-batch base is cached until its last use), but refuse rather
            // than trust.
            return Err(bad(
                o.id,
                format!("delta base {base} was staged but not kept"),
            ));
        }
        self.stored_base(o, base)
    }

    /// Verified bytes of a delta's base stored before this import, and the
    /// cost (`commit::chain_cost`) of its chain in this ledger.
    fn stored_base(&self, o: &WireObject, base: &ObjectId) -> Result<(Arc<Vec<u8>>, u32)> {
        let row = self.locate(base)?.ok_or_else(|| {
            bad(
                o.id,
                format!("delta base {base} is neither stored nor earlier in the stream"),
            )
        })?;
        if row.kind != Kind::Bytes
            || row.raw_len != o.raw_len
            || matches!(row.location, Location::Chunked { .. })
        {
            return Err(bad(
                o.id,
                format!("delta base {base} has another kind, length or storage"),
            ));
        }
        // One resolved chain gives both the bytes and the cost. The bytes
        // are not hashed against the base's id: they only feed the delta,
        // whose own id check covers every byte of them (a damaged base
        // fails it, and `or_damaged_base` then names the damage).
        let chain = self.record_chain(row)?;
        Ok((
            Arc::new(decode_chain_unverified(&chain)?),
            chain_cost(&chain),
        ))
    }

    /// `r`, or, when it failed for a delta whose base came from this
    /// ledger's packs (decoded unchecked by [`Ledger::stored_base`]), the
    /// damage a checked decode of the base's chain finds there: a damaged
    /// local copy is named as such, not blamed on what was received.
    fn or_damaged_base<T>(&self, r: Result<T>, from_store: bool, base: &ObjectId) -> Result<T> {
        match r {
            Err(e) if from_store => {
                let checked = self.locate(base).and_then(|row| {
                    let row = row.ok_or(Error::ObjectMissing { id: *base })?;
                    decode_chain(&self.record_chain(row)?)
                });
                Err(checked.err().unwrap_or(e))
            }
            r => r,
        }
    }

    /// Sum of file sizes below a tree (trees from the batch or stored).
    fn logical_bytes(&self, tree: &TreeId, dec: &Decoded) -> Result<u64> {
        let mut total = 0u64;
        let mut stack = vec![tree.0];
        while let Some(t) = stack.pop() {
            let tree = match dec.trees.get(&t) {
                Some(t) => t.clone(),
                None => self.read_tree(&TreeId(t))?,
            };
            for e in tree.entries {
                match e.mode {
                    Mode::Tree => stack.push(e.id),
                    Mode::Symlink => {}
                    _ => total = total.saturating_add(e.size),
                }
            }
        }
        Ok(total)
    }

    /// Check every chunked alias: its chunk list names it and its length,
    /// every chunk is a stored (or staged) bytes record of the listed
    /// length, and the chunks hash to the file id. The file's hash is
    /// assembled from the tree `digests` holds for it (pieces verified and
    /// hashed as this transfer imported them); pieces it has not seen are
    /// read back from the packs (staged ones from this batch's segment) and
    /// decoded.
    fn verify_aliases(
        &self,
        aliases: &[(ObjectId, u64, ObjectId)],
        dec: &Decoded,
        st: &Staging,
        digests: Option<&FileDigests>,
    ) -> Result<()> {
        const STAGED: i64 = -1;
        let staged_rows: HashMap<ObjectId, ObjectRow> = st
            .rows
            .iter()
            .filter_map(|r| {
                let (offset, stored_len) = r.packed?;
                let location = match r.delta_base {
                    Some(base) => Location::Delta {
                        pack_id: STAGED,
                        offset,
                        stored_len,
                        base,
                    },
                    None => Location::Packed {
                        pack_id: STAGED,
                        offset,
                        stored_len,
                    },
                };
                Some((
                    r.id,
                    ObjectRow {
                        id: r.id,
                        kind: r.kind,
                        raw_len: r.raw_len,
                        location,
                    },
                ))
            })
            .collect();
        let staged_file: Option<(String, PackSource)> = match st.pack.as_ref() {
            Some(p) => {
                let path = self.packs_dir().join(p.name());
                let f = File::open(&path).map_err(io_err("open", &path))?;
                Some((p.name().to_string(), PackSource::Open(Arc::new(f))))
            }
            None => None,
        };
        // Work done and work allowed (see VERIFY_FLOOR).
        let mut work = 0u64;
        let mut credit = VERIFY_FLOOR;
        let mut credited: HashSet<ObjectId> = HashSet::new();
        for (id, raw_len, list_id) in aliases {
            let list = match dec.lists.get(list_id) {
                Some(l) => l.clone(),
                None => {
                    let row = self.locate(list_id)?.ok_or_else(|| {
                        bad(*id, format!("its chunk list {list_id} is neither stored nor earlier in the stream"))
                    })?;
                    if row.kind != Kind::ChunkList {
                        return Err(bad(*id, format!("{list_id} is not a chunk list")));
                    }
                    self.read_chunk_list(list_id)?
                }
            };
            if list.file != *id || list.total != *raw_len {
                return Err(bad(
                    *id,
                    format!("chunk list {list_id} describes another file or length"),
                ));
            }
            let mut tree = digests
                .and_then(|d| d.take(list_id, &list))
                .unwrap_or_else(|| FileTree::new(&list));
            let mut unseen = vec![false; list.chunks.len()];
            for i in tree.missing() {
                unseen[i] = true;
            }
            let mut chains = Vec::new();
            let mut places = Vec::new();
            for (i, c) in list.chunks.iter().enumerate() {
                let row = match staged_rows.get(&c.id) {
                    Some(r) => r.clone(),
                    None => self.locate(&c.id)?.ok_or_else(|| {
                        bad(
                            *id,
                            format!("chunk {} is neither stored nor earlier in the stream", c.id),
                        )
                    })?,
                };
                if row.kind != Kind::Bytes
                    || row.raw_len != u64::from(c.len)
                    || matches!(row.location, Location::Chunked { .. })
                {
                    return Err(bad(
                        *id,
                        format!("chunk {} has another kind, length or storage", c.id),
                    ));
                }
                if credited.insert(c.id) {
                    let stored = match row.location {
                        Location::Packed { stored_len, .. }
                        | Location::Delta { stored_len, .. } => stored_len,
                        Location::Chunked { .. } => 0,
                    };
                    credit = credit.saturating_add(stored.saturating_mul(VERIFY_FACTOR));
                }
                let chain = resolve_chain(
                    row,
                    &mut |x| match staged_rows.get(x) {
                        Some(r) => Ok(Some(r.clone())),
                        None => self.locate(x),
                    },
                    &mut |pid, x| {
                        if pid == STAGED {
                            staged_file
                                .clone()
                                .ok_or_else(|| bad(*x, "no staged segment"))
                        } else {
                            self.pack_file(pid, x)
                        }
                    },
                )
                .map_err(|e| bad(*id, format!("chunk {}: {e}", c.id)))?;
                if unseen[i] {
                    chains.push(chain);
                    places.push(i);
                }
            }
            let entries = (list.chunks.len() as u64)
                .saturating_mul(36)
                .saturating_add(48);
            credit = credit.saturating_add(entries.saturating_mul(VERIFY_FACTOR));
            work = work.saturating_add(list.total);
            if work > credit {
                return Err(bad(
                    *id,
                    format!(
                        "verifying the chunked files of this transfer would decode {work}+ bytes, \
                         more than {VERIFY_FACTOR} times what they store (plus {VERIFY_FLOOR}): \
                         refusing the amplification"
                    ),
                ));
            }
            // Every chunk's own id was checked when it was received (this
            // batch) or stored (earlier); the whole-file digest below covers
            // every byte, so the pieces are not hashed again on their own.
            let never = std::sync::atomic::AtomicBool::new(false);
            let mut next = places.iter();
            let streamed = decode_in_order(&chains, &never, |d| {
                let i = *next.next().expect("one place per decoded chain");
                tree.add(i, &d);
                crate::delta::recycle(d);
                Ok(())
            });
            if let Err(e) = streamed {
                let named = name_damage(&chains, &never).err().unwrap_or(e);
                return Err(bad(*id, format!("a chunk does not verify: {named}")));
            }
            match tree.root() {
                Ok(root) if root == *id => {}
                Ok(_) => return Err(bad(*id, "its chunks do not hash to the file id")),
                Err(why) => {
                    return Err(bad(*id, format!("its chunks do not join up: {why}")));
                }
            }
        }
        Ok(())
    }
}
