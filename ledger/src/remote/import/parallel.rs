//! Verifying a received batch's pieces on two threads before the batch is
//! stored as one import ([`Ledger::import_wire_parallel`]): the decoding
//! and hashing of bytes records and deltas is nearly all of an import's
//! work, and chains are independent of each other, so each thread takes
//! half of them. Nothing is written here; the import that follows stores
//! what was checked, so a refused batch still stores nothing. A delta
//! whose base is neither checked here nor stored is left for the import,
//! which decodes it there (or refuses it).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::{bad, decode_record, delta_header, use_base, within_record_limit};
use crate::commit::link_cost;
use crate::error::Result;
use crate::id::ObjectId;
use crate::object::Kind;
use crate::remote::digest::FileDigests;
use crate::remote::{WireBody, WireObject};
use crate::store::{Ledger, MAX_DELTA_DEPTH};

/// What the precheck found for one piece.
pub(super) struct Checked {
    /// Its chain's cost in this ledger (`commit::chain_cost`).
    pub(super) cost: u32,
    /// A delta that would take its chain past [`MAX_DELTA_DEPTH`] here:
    /// the version's planes payload to store whole instead.
    pub(super) whole: Option<Vec<u8>>,
}

/// The pieces of a batch that the precheck decoded and hashed, by id.
pub(super) type Prechecked = HashMap<ObjectId, Checked>;

/// The pieces of `batch` an import would decode: bytes records and deltas,
/// first copies only, not stored yet, in batch order.
fn pieces<'a>(l: &Ledger, batch: &'a [WireObject]) -> Result<Vec<&'a WireObject>> {
    let mut seen: HashSet<ObjectId> = HashSet::new();
    let mut out = Vec::new();
    for o in batch {
        if o.is_absent() || !seen.insert(o.id) {
            continue;
        }
        let piece = matches!(o.body, WireBody::Record { .. } | WireBody::Delta { .. });
        if o.kind == Kind::Bytes && piece && !l.contains(&o.id)? {
            out.push(o);
        }
    }
    Ok(out)
}

/// Split pieces in two, each delta on the side of its base when the base
/// came before it, each new chain on the side with fewer bytes so far; the
/// order within a side is kept.
fn halves(pieces: Vec<&WireObject>) -> (Vec<&WireObject>, Vec<&WireObject>) {
    let mut side: HashMap<ObjectId, bool> = HashMap::new();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let (mut wa, mut wb) = (0u64, 0u64);
    for o in pieces {
        let with_base = match &o.body {
            WireBody::Delta { base, .. } => side.get(base).copied(),
            _ => None,
        };
        let to_b = with_base.unwrap_or(wb < wa);
        side.insert(o.id, to_b);
        if to_b {
            wb += o.raw_len;
            b.push(o);
        } else {
            wa += o.raw_len;
            a.push(o);
        }
    }
    (a, b)
}

impl Ledger {
    /// Decode and hash every piece of `batch` against its id, on this
    /// thread and one more, handing each to `digests`; the first failure
    /// refuses the batch (the error names the object, as an import does).
    pub(super) fn precheck(
        &self,
        batch: &[WireObject],
        digests: Option<&FileDigests>,
    ) -> Result<Prechecked> {
        let (mine, other) = halves(pieces(self, batch)?);
        if other.is_empty() {
            return self.check_pieces(&mine, digests);
        }
        let dir = self.dir().to_path_buf();
        let (here, there) = std::thread::scope(|s| {
            let there = s.spawn(move || -> Result<Prechecked> {
                Ledger::open(&dir)?.check_pieces(&other, digests)
            });
            let here = self.check_pieces(&mine, digests);
            (here, there.join())
        });
        let mut out = here?;
        let there = there.unwrap_or_else(|_| {
            Err(crate::error::Error::InvalidInput {
                message: "the thread verifying half of a received batch panicked".into(),
            })
        })?;
        out.extend(there);
        Ok(out)
    }

    /// Check `objs` in order (each delta against its base earlier among
    /// them or stored; the others are skipped), keeping each base's bytes
    /// until its last use.
    fn check_pieces(
        &self,
        objs: &[&WireObject],
        digests: Option<&FileDigests>,
    ) -> Result<Prechecked> {
        let mut uses: HashMap<ObjectId, usize> = HashMap::new();
        for o in objs {
            if let WireBody::Delta { base, .. } = &o.body {
                *uses.entry(*base).or_default() += 1;
            }
        }
        let mut cache: HashMap<ObjectId, Arc<Vec<u8>>> = HashMap::new();
        let mut out = Prechecked::new();
        let mut comp = None;
        for o in objs {
            // The base of a delta, when it was decoded from the packs.
            let mut stored_base = None;
            let (raw, checked) = match &o.body {
                WireBody::Record {
                    compression,
                    payload,
                } => {
                    within_record_limit(o)?;
                    let raw = decode_record(o, *compression, payload)?;
                    let c = Checked {
                        cost: 0,
                        whole: None,
                    };
                    (raw, c)
                }
                WireBody::Delta {
                    base,
                    compression,
                    payload,
                } => {
                    let h = delta_header(o, base, *compression, payload)?;
                    let (bytes, base_cost) = match (cache.get(base), out.get(base)) {
                        (Some(b), Some(c)) => (b.clone(), c.cost),
                        _ if self.contains(base)? => {
                            stored_base = Some(base);
                            self.stored_base(o, base)?
                        }
                        // Neither checked here nor stored yet (it may be in
                        // the batch being stored beside this check, or
                        // nowhere): the import decodes it, or refuses it.
                        _ => continue,
                    };
                    let bytes = use_base(base, bytes, &mut uses, &mut cache);
                    let raw = crate::delta::decode_planes_owned(payload, o.raw_len, Some(bytes))
                        .map_err(|r| bad(o.id, r));
                    let raw = self.or_damaged_base(raw, stored_base.is_some(), base)?;
                    let cost = base_cost.saturating_add(link_cost(payload.len() as u64, o.raw_len));
                    // Past the depth any writer makes (see `import_inner`):
                    // stored whole.
                    let c = if cost > MAX_DELTA_DEPTH {
                        Checked {
                            cost: 0,
                            whole: Some(self.encode_whole(o, &raw, h.width, &mut comp)?),
                        }
                    } else {
                        Checked { cost, whole: None }
                    };
                    (raw, c)
                }
                WireBody::Chunked { .. } | WireBody::Absent { .. } => continue,
            };
            if Kind::Bytes.id_of(&raw) != o.id {
                let e = bad(o.id, "content digest does not match the object id");
                return match stored_base {
                    Some(b) => self.or_damaged_base(Err(e), true, b),
                    None => Err(e),
                };
            }
            if let Some(d) = digests {
                d.offer(&o.id, &raw);
            }
            if uses.get(&o.id).is_some_and(|&n| n > 0) {
                cache.insert(o.id, Arc::new(raw));
            } else {
                crate::delta::recycle(raw);
            }
            out.insert(o.id, checked);
        }
        Ok(out)
    }
}
