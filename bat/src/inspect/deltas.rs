//! Per-tensor comparison of two safetensors files read from the change
//! statistics stored with their delta records, without decoding either
//! file.
//!
//! The ledger cuts a safetensors file into pieces along its tensors and
//! stores a changed piece as a delta against the same piece of the file it
//! replaced, with the piece's change statistics
//! ([`bat_ledger::delta::DeltaStats`]). When every piece of a tensor is
//! either the same object on both sides or a delta of one side's piece
//! against the other's, the tensor's numbers are those statistics folded
//! in file order: bit for bit what [`super::tensors`] computes from the
//! decoded bytes. A piece without usable statistics (another base, a
//! ledger written before them, a record holding another dtype's reading,
//! a width-1 dtype) is decoded alone, two
//! pieces in memory at a time. A file whose chunks are not the ledger's
//! tensor pieces is not handled here: the caller decodes it whole.

use std::collections::BTreeMap;
use std::io::Cursor;
use std::sync::atomic::{AtomicBool, Ordering};

use bat_ledger::delta::{FloatKind, RecordStats, MAX_PIECE};
use bat_ledger::{ChunkRef, Ledger, Location, ObjectId};

use super::tensors::{
    dtype_name, float_kind, one_sided, read_header, unit_of, Acc, Header, TensorDelta, TensorStatus,
};
use super::InspectError;

/// Where a comparison's numbers came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorsFrom {
    /// Every changed piece's statistics were read from its delta record.
    Deltas,
    /// Some pieces from statistics, the others decoded piece by piece.
    Mixed,
    /// Both files decoded in full.
    Decode,
}

impl TensorsFrom {
    /// The name shown in `tensors_from`.
    pub fn name(self) -> &'static str {
        match self {
            TensorsFrom::Deltas => "deltas",
            TensorsFrom::Mixed => "mixed",
            TensorsFrom::Decode => "decode",
        }
    }
}

/// One side: its chunks by file offset and its parsed header.
struct Chunked {
    chunks: BTreeMap<u64, ChunkRef>,
    header: Header,
}

/// The chunks of file `id` (`size` bytes) and its safetensors header, or
/// `None` when the file is not stored chunked here or its header does not
/// parse (the full decode then reports why).
fn chunked(
    l: &Ledger,
    id: &ObjectId,
    size: u64,
    side: &'static str,
) -> Result<Option<Chunked>, InspectError> {
    let Some(row) = l.locate(id)? else {
        return Ok(None);
    };
    let Location::Chunked { list } = row.location else {
        return Ok(None);
    };
    let cl = l.read_chunk_list(&list)?;
    if cl.file != *id || cl.total != size {
        return Ok(None);
    }
    let mut chunks = BTreeMap::new();
    let mut at = 0u64;
    for c in cl.chunks {
        let len = u64::from(c.len);
        chunks.insert(at, c);
        at += len;
    }
    // The header: whole chunks from the start until its declared length.
    let mut head = Vec::new();
    let mut need = 8u64;
    for c in chunks.values() {
        if head.len() as u64 >= need {
            break;
        }
        head.extend_from_slice(&l.read_bytes(&c.id)?);
        if need == 8 && head.len() >= 8 {
            let n = u64::from_le_bytes(head[..8].try_into().expect("8 bytes"));
            if n > super::tensors::MAX_HEADER {
                return Ok(None);
            }
            need = 8 + n;
        }
    }
    match read_header(&mut Cursor::new(head), size, side) {
        Ok(header) => Ok(Some(Chunked { chunks, header })),
        Err(_) => Ok(None),
    }
}

/// The chunk of `side` covering exactly `start .. start + len`.
fn piece(side: &Chunked, start: u64, len: u64) -> Option<ObjectId> {
    side.chunks
        .get(&start)
        .filter(|c| u64::from(c.len) == len)
        .map(|c| c.id)
}

/// Statistics of `(ca → cb)` usable for a piece of `len` bytes of
/// `unit`-byte elements read as `kind`: a delta of either against the
/// other whose section holds that reading (a record may hold another
/// dtype's reading when the same bytes were first stored as another
/// tensor, or only the count).
fn stored(
    (la, ca): (&Ledger, &ObjectId),
    (lb, cb): (&Ledger, &ObjectId),
    len: u64,
    unit: usize,
    kind: Option<FloatKind>,
) -> Result<Option<RecordStats>, InspectError> {
    let fits = |s: &RecordStats, base: &ObjectId| {
        s.base == *base
            && usize::from(s.width) == unit
            && s.raw_len == len
            && s.stats.changed <= len / unit as u64
            && kind.is_none_or(|k| s.stats.float(k).is_some())
    };
    if let Some(s) = lb.delta_record_stats(cb)?.filter(|s| fits(s, ca)) {
        return Ok(Some(s));
    }
    // |a − b| = |b − a| exactly in IEEE arithmetic: the reverse delta has
    // the same numbers.
    Ok(la.delta_record_stats(ca)?.filter(|s| fits(s, cb)))
}

/// Compare two safetensors files from their pieces' delta statistics;
/// `None` when their chunks are not the ledger's tensor pieces (then the
/// caller decodes both files).
pub(super) fn diff_from_deltas(
    (la, x, x_len): (&Ledger, &ObjectId, u64),
    (lb, y, y_len): (&Ledger, &ObjectId, u64),
    cancel: &AtomicBool,
) -> Result<Option<(Vec<TensorDelta>, TensorsFrom)>, InspectError> {
    let (Some(a), Some(b)) = (chunked(la, x, x_len, "a")?, chunked(lb, y, y_len, "b")?) else {
        return Ok(None);
    };
    let (ha, hb) = (&a.header, &b.header);
    let mut names: Vec<&String> = ha.tensors.keys().chain(hb.tensors.keys()).collect();
    names.sort();
    names.dedup();
    let (mut from_stats, mut decoded) = (0u64, 0u64);
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        if cancel.load(Ordering::Relaxed) {
            return Err(bat_ledger::Error::Cancelled.into());
        }
        let (ia, ib) = match (ha.tensors.get(name), hb.tensors.get(name)) {
            (Some(ia), None) => {
                out.push(one_sided(name, ia, TensorStatus::Removed));
                continue;
            }
            (None, Some(ib)) => {
                out.push(one_sided(name, ib, TensorStatus::Added));
                continue;
            }
            (None, None) => continue,
            (Some(ia), Some(ib)) => (ia, ib),
        };
        let mut d = one_sided(name, ia, TensorStatus::Removed);
        d.dtype_b = Some(dtype_name(ib.dtype));
        d.shape_b = Some(ib.shape.clone());
        if ia.dtype != ib.dtype {
            d.status = TensorStatus::DtypeChanged;
            out.push(d);
            continue;
        }
        if ia.shape != ib.shape {
            d.status = TensorStatus::ShapeChanged;
            out.push(d);
            continue;
        }
        let unit = unit_of(ia.dtype);
        let kind = float_kind(ia.dtype);
        let step = (MAX_PIECE / unit as u64).max(1) * unit as u64;
        let nbytes = (ia.data_offsets.1 - ia.data_offsets.0) as u64;
        let (a0, b0) = (
            ha.data_start + ia.data_offsets.0 as u64,
            hb.data_start + ib.data_offsets.0 as u64,
        );
        let mut acc = Acc::new(unit);
        let mut done = 0u64;
        while done < nbytes {
            let len = (nbytes - done).min(step);
            let (Some(ca), Some(cb)) = (piece(&a, a0 + done, len), piece(&b, b0 + done, len))
            else {
                return Ok(None);
            };
            let elements = len / unit as u64;
            if ca == cb {
                acc.add_piece(elements, 0, None);
            } else if let Some(s) = stored((la, &ca), (lb, &cb), len, unit, kind)? {
                let f = kind.and_then(|k| s.stats.float(k));
                acc.add_piece(elements, s.stats.changed, f);
                from_stats += 1;
            } else {
                let (pa, pb) = (la.read_bytes(&ca)?, lb.read_bytes(&cb)?);
                if pa.len() as u64 != len || pb.len() as u64 != len {
                    return Ok(None);
                }
                acc.add_window(&pa, &pb, unit, kind);
                decoded += 1;
            }
            done += len;
        }
        acc.finish().fill(&mut d, kind.is_some());
        out.push(d);
    }
    let from = match (from_stats, decoded) {
        (_, 0) => TensorsFrom::Deltas,
        (0, _) => TensorsFrom::Decode,
        _ => TensorsFrom::Mixed,
    };
    Ok(Some((out, from)))
}
