//! Re-rooting delta trees in gc.
//!
//! A writer stores each version of a tensor piece as a delta against the
//! version before it, so the records of one piece form a tree: a keyframe
//! at the root, each later version one link further down. Reading the
//! newest version of a chain of ten applies nine links. gc moves each
//! tree's keyframe to its centre (the version whose farthest version is
//! nearest), which halves the deepest read, and costs no space: an XOR
//! link says the same thing in both directions, so the links between the
//! old root and the centre are stored reversed (the same changes, the
//! other version as base), the centre becomes the keyframe and the old
//! keyframe a delta. New commits then keep extending the newest version,
//! now about half as deep, and the next gc centres the tree again.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicBool;

use crate::catalog::{self, Location, ObjectRow};
use crate::commit::{choose_planes, link_cost};
use crate::delta;
use crate::error::{io_err, Error, Result};
use crate::id::ObjectId;
use crate::object::Kind;
use crate::pack::{self, PackWriter, RecordHeader};
use crate::progress::{check_cancel, Progress};
use crate::store::{Ledger, RecordRef};

/// A tree is re-rooted only when that makes its deepest version at least
/// this many cost units shallower: each re-root re-encodes the records on
/// the way from the old root to the new one, which is not worth one unit.
const MIN_GAIN: u64 = 2;

/// One re-rooted record: its new place and base.
#[derive(Debug, Clone)]
pub(super) struct Rerooted {
    pub id: ObjectId,
    /// Index of its segment among the ledger's new packs of this gc.
    pub pack: usize,
    pub offset: u64,
    pub stored_len: u64,
    /// The new delta base; `None` for the tree's new keyframe.
    pub base: Option<ObjectId>,
}

/// The delta trees of the live records, as child lists and parent links,
/// each edge weighted by the link's decode cost.
struct Forest {
    parent: HashMap<ObjectId, ObjectId>,
    adj: HashMap<ObjectId, Vec<(ObjectId, u64)>>,
}

impl Forest {
    fn of(rows: &[ObjectRow], live: &HashSet<ObjectId>) -> Forest {
        let mut f = Forest {
            parent: HashMap::new(),
            adj: HashMap::new(),
        };
        for r in rows {
            let Location::Delta {
                base, stored_len, ..
            } = r.location
            else {
                continue;
            };
            if !live.contains(&r.id) || !live.contains(&base) {
                continue;
            }
            let cost = u64::from(link_cost(stored_len, r.raw_len));
            f.parent.insert(r.id, base);
            f.adj.entry(base).or_default().push((r.id, cost));
            f.adj.entry(r.id).or_default().push((base, cost));
        }
        f
    }

    /// Distance (in cost units) from `start` to every node of its tree, and
    /// each node's predecessor on the way.
    fn distances(&self, start: ObjectId) -> HashMap<ObjectId, (u64, Option<ObjectId>)> {
        let mut out = HashMap::new();
        out.insert(start, (0, None));
        let mut stack = vec![start];
        while let Some(x) = stack.pop() {
            let d = out[&x].0;
            for &(y, c) in self.adj.get(&x).map(Vec::as_slice).unwrap_or(&[]) {
                if let std::collections::hash_map::Entry::Vacant(e) = out.entry(y) {
                    e.insert((d + c, Some(x)));
                    stack.push(y);
                }
            }
        }
        out
    }
}

/// The farthest node in `dist` (ties: the smallest id, so plans are
/// deterministic).
fn farthest(dist: &HashMap<ObjectId, (u64, Option<ObjectId>)>) -> (ObjectId, u64) {
    dist.iter()
        .map(|(id, (d, _))| (*id, *d))
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        .expect("a tree has its root")
}

/// Plan gc's re-roots: for every delta tree of live records whose centre
/// is at least [`MIN_GAIN`] shallower at its deepest than its root (or,
/// when the deepest version is at the writers' limit `max_depth`, so that
/// a commit below it would start a new keyframe, whose centre brings that
/// version up), the path from the root to the centre (old root first).
/// Trees holding a record of `skip` (re-based by a retention gc) are left
/// alone.
pub(super) fn plan(
    rows: &[ObjectRow],
    live: &HashSet<ObjectId>,
    skip: &HashSet<ObjectId>,
    max_depth: u32,
) -> Vec<Vec<ObjectId>> {
    let forest = Forest::of(rows, live);
    let mut roots: Vec<ObjectId> = forest
        .adj
        .keys()
        .filter(|id| !forest.parent.contains_key(id))
        .copied()
        .collect();
    roots.sort();
    let mut out = Vec::new();
    for root in roots {
        let from_root = forest.distances(root);
        if from_root.len() < 3 || from_root.keys().any(|id| skip.contains(id)) {
            continue;
        }
        let (u, depth) = farthest(&from_root);
        // The path between `u` (farthest from the root) and the node
        // farthest from `u` is a longest path of the tree; its middle is
        // the centre. Of two middles, the one nearer `u` is taken: `u` is
        // at the end of the deepest chain, usually the newest version.
        let from_u = forest.distances(u);
        let (v, diameter) = farthest(&from_u);
        let mut centre = (v, diameter);
        let mut at = Some(v);
        while let Some(x) = at {
            let (d, prev) = from_u[&x];
            let ecc = d.max(diameter - d);
            if ecc < centre.1 || (ecc == centre.1 && d < from_u[&centre.0].0) {
                centre = (x, ecc);
            }
            at = prev;
        }
        // At the limit, a centre that brings the deepest version `u` up
        // lets the next commit below it stay a delta.
        let at_limit = depth >= u64::from(max_depth) && from_u[&centre.0].0 < depth;
        if centre.1 + MIN_GAIN > depth && !at_limit {
            continue;
        }
        let mut path = vec![centre.0];
        while let Some(p) = forest.parent.get(path.last().expect("not empty")) {
            path.push(*p);
        }
        path.reverse();
        out.push(path);
    }
    // In the order the old keyframes were written (a file's pieces in file
    // order), so the new keyframes are written in that order too and a
    // cold read of their version streams through them.
    if !out.is_empty() {
        let at: HashMap<ObjectId, (i64, u64)> = rows
            .iter()
            .filter_map(|r| r.location.record().map(|(p, o, _)| (r.id, (p, o))))
            .collect();
        out.sort_by_key(|p| at.get(&p[0]).copied());
    }
    out
}

/// The new records of one re-rooted tree: (id, header, payload, base).
type NewRecords = Vec<(ObjectId, RecordHeader, Vec<u8>, Option<ObjectId>)>;

impl Ledger {
    /// Re-encode the records of each path of `paths` (old root first, new
    /// root last): every version but the last as a delta against the next
    /// one, the last as a keyframe. Each version is decoded verified (its
    /// digest) and each new payload is decoded again and compared with the
    /// version's bytes before it is written; the new records go into two
    /// new packs, read back checked (header, payload checksum) and fsynced
    /// before this returns, with their names: gc numbers them from
    /// `first_pack` on, and [`Rerooted::pack`] counts in that numbering.
    /// Trees are encoded on scoped threads, one tree per core at a time.
    pub(super) fn write_rerooted(
        &self,
        paths: &[Vec<ObjectId>],
        first_pack: usize,
        progress: &dyn Progress,
        cancel: &AtomicBool,
    ) -> Result<(Vec<Rerooted>, Vec<String>)> {
        if paths.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let opts = self.config.planes_options();
        let workers = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2);
        let mut comps = (0..workers)
            .map(|_| delta::planes_compressor(self.config.zstd_level))
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(io_err("create zstd compressor", "(memory)"))?;
        progress.start("re-rooting delta chains", Some(paths.len() as u64));
        // New keyframes in one segment, deltas in another: a version read
        // from disk then finds its keyframe pieces next to each other.
        let mut segs = [
            Segment::create(&self.packs_dir(), first_pack)?,
            Segment::create(&self.packs_dir(), first_pack + 1)?,
        ];
        let mut out = Vec::new();
        // One tree per core at a time: a resolved chain holds its packs
        // open, so only a few chains are held at once (gc runs under small
        // descriptor limits), and results are written in plan order.
        for batch in paths.chunks(workers) {
            check_cancel(cancel)?;
            let chains = batch
                .iter()
                .map(|p| self.path_chain(p))
                .collect::<Result<Vec<_>>>()?;
            let results: Vec<Result<NewRecords>> = std::thread::scope(|s| {
                let handles: Vec<_> = chains
                    .iter()
                    .zip(comps.iter_mut())
                    .map(|(chain, comp)| s.spawn(move || reencode(chain, comp, opts)))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("re-encoding does not panic"))
                    .collect()
            });
            for recs in results {
                for (id, h, payload, base) in recs? {
                    let seg = &mut segs[usize::from(base.is_some())];
                    let offset = seg.writer.append(&h, &payload)?;
                    seg.expects.push(pack::Expect {
                        id,
                        kind: Kind::Bytes,
                        offset,
                        raw_len: h.raw_len,
                        stored_len: payload.len() as u64,
                    });
                    out.push(Rerooted {
                        id,
                        pack: seg.index,
                        offset,
                        stored_len: payload.len() as u64,
                        base,
                    });
                    delta::recycle(payload);
                }
                progress.inc(1);
            }
        }
        progress.finish();
        let names = segs
            .into_iter()
            .map(|seg| seg.finish(&self.packs_dir()))
            .collect::<Result<Vec<_>>>()?;
        Ok((out, names))
    }

    /// The record chain of a planned path's new root, checked to be the
    /// path (new root first, old root last).
    fn path_chain(&self, path: &[ObjectId]) -> Result<Vec<RecordRef>> {
        let last = path.last().expect("a path has its new root");
        let row = self
            .locate(last)?
            .ok_or(Error::ObjectMissing { id: *last })?;
        let chain = self.record_chain(row)?;
        if chain.len() != path.len() || chain.iter().rev().map(|r| r.2.id).ne(path.iter().copied())
        {
            return Err(Error::Corrupt {
                id: *last,
                pack: chain[0].0.clone(),
                offset: chain[0].2.offset,
                reason: "its delta chain changed while gc planned it".into(),
            });
        }
        Ok(chain)
    }
}

/// A new pack segment of re-rooted records.
struct Segment {
    writer: PackWriter,
    /// Its number among gc's new packs.
    index: usize,
    expects: Vec<pack::Expect>,
}

impl Segment {
    fn create(dir: &std::path::Path, index: usize) -> Result<Segment> {
        Ok(Segment {
            writer: PackWriter::create(dir)?,
            index,
            expects: Vec::new(),
        })
    }

    /// fsync it and read every record back checked (header, payload
    /// checksum); its name.
    fn finish(mut self, dir: &std::path::Path) -> Result<String> {
        self.writer.sync()?;
        let name = self.writer.name().to_string();
        let path = dir.join(&name);
        let file = std::fs::File::open(&path).map_err(io_err("open pack file", &path))?;
        for e in &self.expects {
            pack::read_raw_record(&file, &name, e)?;
        }
        Ok(name)
    }
}

/// The new records of one tree path, given as its new root's chain (new
/// root first, old root last, as [`Ledger::record_chain`] returns it).
fn reencode(
    chain: &[RecordRef],
    comp: &mut zstd::bulk::Compressor<'static>,
    opts: delta::PlanesOptions,
) -> Result<NewRecords> {
    let mut out = Vec::with_capacity(chain.len());
    let mut prev: Option<(ObjectId, Vec<u8>)> = None;
    let mut width = None;
    // The statistics keep the readings the chain's deltas hold (their
    // dtype's, chosen when committed).
    let mut opts = opts;
    for (name, file, e, base) in chain.iter().rev() {
        let (h, payload) = pack::read_payload(&*file.file(name, &e.id)?, name, e, true)?;
        if h.compression == pack::COMPRESSION_PLANES {
            let ph =
                delta::PlanesHeader::decode(&payload).map_err(|r| pack::corrupt_at(name, e, r))?;
            width = Some(usize::from(ph.width));
            if let Some(s) = &ph.stats {
                opts.stats = s.reading;
            }
        }
        let b = match (base, &prev) {
            (Some(bid), Some((pid, bytes))) if bid == pid => Some((bid, bytes.clone())),
            (None, None) => None,
            _ => {
                return Err(pack::corrupt_at(
                    name,
                    e,
                    "delta chain is inconsistent".into(),
                ));
            }
        };
        let raw = pack::decode_payload(name, e, &h, payload, b, true)?;
        if let Some((pid, older)) = prev.take() {
            // The version before this one, as a delta against this one.
            let w =
                width.ok_or_else(|| pack::corrupt_at(name, e, "a delta without planes".into()))?;
            out.push(encode_verified(
                comp,
                pid,
                &older,
                Some((e.id, &raw)),
                w,
                opts,
            )?);
            delta::recycle(older);
        }
        prev = Some((e.id, raw));
    }
    let (id, bytes) = prev.expect("a chain has its new root");
    let (name, _, e, _) = &chain[0];
    let w = width.ok_or_else(|| pack::corrupt_at(name, e, "a delta without planes".into()))?;
    out.push(encode_verified(comp, id, &bytes, None, w, opts)?);
    delta::recycle(bytes);
    Ok(out)
}

/// Encode `raw` (the bytes of object `id`) as a planes record, a delta
/// against `base` when that pays (the writers' rule), and check that the
/// payload decodes back to `raw`.
fn encode_verified(
    comp: &mut zstd::bulk::Compressor<'static>,
    id: ObjectId,
    raw: &[u8],
    base: Option<(ObjectId, &[u8])>,
    width: usize,
    opts: delta::PlanesOptions,
) -> Result<(ObjectId, RecordHeader, Vec<u8>, Option<ObjectId>)> {
    let bad = |reason: String| Error::BadObject {
        id,
        kind: "tensor piece",
        reason,
    };
    let raw_len = raw.len() as u64;
    let d = match base {
        Some((bid, bytes)) => Some((
            delta::encode_planes_with(comp, raw, width, Some((&bid, bytes)), opts).map_err(bad)?,
            bid,
        )),
        None => None,
    };
    let (payload, new_base) = choose_planes(d, raw_len, || {
        delta::encode_planes_with(comp, raw, width, None, opts).map_err(bad)
    })?;
    let base_bytes = new_base.and(base).map(|b| b.1);
    let back = delta::decode_planes(&payload, raw_len, base_bytes).map_err(bad)?;
    if back != raw {
        return Err(bad(
            "a re-encoded record does not decode to its bytes".into()
        ));
    }
    delta::recycle(back);
    let h = RecordHeader::for_payload(Kind::Bytes, pack::COMPRESSION_PLANES, id, raw_len, &payload);
    Ok((id, h, payload, new_base))
}

/// The catalog encoding of a re-rooted record.
pub(super) fn encoding(r: &Rerooted) -> i64 {
    if r.base.is_some() {
        catalog::ENC_DELTA
    } else {
        catalog::ENC_PACKED
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn id(i: usize) -> ObjectId {
        let mut b = [0u8; 32];
        b[..8].copy_from_slice(&(i as u64).to_le_bytes());
        ObjectId(b)
    }

    /// Rows of one tree: node 0 a keyframe, node i > 0 a delta against
    /// `parents[i - 1]` (< i) costing `costs[i - 1]` units.
    fn rows(parents: &[usize], costs: &[u64]) -> Vec<ObjectRow> {
        let mut out = vec![ObjectRow {
            id: id(0),
            kind: Kind::Bytes,
            raw_len: 100,
            location: Location::Packed {
                pack_id: 1,
                offset: 0,
                stored_len: 60,
            },
        }];
        for (i, (&p, &c)) in parents.iter().zip(costs).enumerate() {
            out.push(ObjectRow {
                id: id(i + 1),
                kind: Kind::Bytes,
                raw_len: 100,
                location: Location::Delta {
                    pack_id: 1,
                    offset: 0,
                    stored_len: 10 * c,
                    base: id(p),
                },
            });
        }
        out
    }

    /// Every node's eccentricity, by brute force.
    fn eccentricities(parents: &[usize], costs: &[u64]) -> Vec<u64> {
        let n = parents.len() + 1;
        let mut adj = vec![Vec::new(); n];
        for (i, (&p, &c)) in parents.iter().zip(costs).enumerate() {
            adj[i + 1].push((p, c));
            adj[p].push((i + 1, c));
        }
        (0..n)
            .map(|s| {
                let mut dist = vec![u64::MAX; n];
                dist[s] = 0;
                let mut stack = vec![s];
                while let Some(x) = stack.pop() {
                    for &(y, c) in &adj[x] {
                        if dist[y] == u64::MAX {
                            dist[y] = dist[x] + c;
                            stack.push(y);
                        }
                    }
                }
                dist.into_iter().max().unwrap_or(0)
            })
            .collect()
    }

    fn tree() -> impl Strategy<Value = (Vec<usize>, Vec<u64>)> {
        (1usize..40).prop_flat_map(|n| {
            (
                (0..n).map(|i| 0..=i).collect::<Vec<_>>(),
                proptest::collection::vec(1u64..5, n),
            )
        })
    }

    proptest! {
        #[test]
        fn plans_the_path_from_the_root_to_a_centre((parents, costs) in tree()) {
            let rows = rows(&parents, &costs);
            let live: HashSet<ObjectId> = rows.iter().map(|r| r.id).collect();
            let plans = plan(&rows, &live, &HashSet::new(), u32::MAX);
            let ecc = eccentricities(&parents, &costs);
            let best = *ecc.iter().min().unwrap_or(&0);
            let index = |x: &ObjectId| u64::from_le_bytes(x.0[..8].try_into().unwrap()) as usize;
            if ecc[0] >= best + MIN_GAIN && parents.len() >= 2 {
                prop_assert_eq!(plans.len(), 1);
                let path = &plans[0];
                prop_assert_eq!(path[0], id(0));
                let centre = index(path.last().unwrap());
                prop_assert_eq!(ecc[centre], best, "the new root is a centre");
                for w in path.windows(2) {
                    prop_assert_eq!(parents[index(&w[1]) - 1], index(&w[0]), "a path down the tree");
                }
            } else {
                prop_assert!(plans.is_empty(), "{:?}", plans);
            }
            // A tree holding a record another step re-encodes is left alone.
            prop_assert!(plan(&rows, &live, &live, u32::MAX).is_empty());
            // At the writers' limit any gain re-roots, and only to a centre.
            let at_limit = plan(&rows, &live, &HashSet::new(), 1);
            if ecc[0] > best && parents.len() >= 2 {
                prop_assert_eq!(at_limit.len(), 1);
            }
            for p in &at_limit {
                prop_assert_eq!(ecc[index(p.last().unwrap())], best);
            }
        }
    }
}
