//! Record chains: a delta record, its base, ... down to a self-contained
//! record; decoding them verified, in order, on worker threads.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;

use crate::catalog::{Location, ObjectRow};
use crate::error::{Error, Result};
use crate::id::ObjectId;
use crate::object::Kind;
use crate::pack::{self, Expect};
use crate::progress::check_cancel;

use super::PackSource;

/// One record to read: pack name, where to read the pack, what the catalog
/// expects, and the delta base the catalog names (if a delta).
pub(crate) type RecordRef = (String, PackSource, Expect, Option<ObjectId>);

/// Decode `chains` (the pieces of one file) on worker threads, one per core,
/// and hand each result to `each` on the calling thread in piece order.
/// Workers take the next piece as soon as they are free (no batches that
/// wait for their slowest piece) but stay at most a few pieces ahead of
/// `each`, which bounds memory. Stops at the first error, from a worker or
/// from `each`, or on cancellation.
pub(crate) fn decode_in_order(
    chains: &[Vec<RecordRef>],
    cancel: &AtomicBool,
    mut each: impl FnMut(Vec<u8>) -> Result<()>,
) -> Result<()> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Condvar, Mutex};
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .min(chains.len().max(1));
    let ahead = workers * 4;
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    // Pieces handed to `each` so far, and a wake-up for workers that are
    // `ahead` pieces in front of it.
    let done = (Mutex::new(0usize), Condvar::new());
    let (tx, rx) = std::sync::mpsc::sync_channel::<(usize, Result<Vec<u8>>)>(ahead);
    // The records of the next `ahead` pieces are always being read in (the
    // worker that takes piece i hints piece i + ahead), so on a cold cache
    // the disk works while both cores decode.
    for chain in chains.iter().take(ahead) {
        prefetch_chain(chain);
    }
    std::thread::scope(|s| {
        for _ in 0..workers {
            let tx = tx.clone();
            let (next, stop, done) = (&next, &stop, &done);
            s.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= chains.len() {
                    return;
                }
                if let Some(later) = chains.get(i + ahead) {
                    prefetch_chain(later);
                }
                {
                    let mut n = done.0.lock().expect("no thread panics holding it");
                    while i >= *n + ahead && !stop.load(Ordering::Relaxed) {
                        n = done.1.wait(n).expect("no thread panics holding it");
                    }
                }
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let d = decode_chain_unverified(&chains[i]);
                if tx.send((i, d)).is_err() {
                    return;
                }
            });
        }
        drop(tx);
        let mut result = Ok(());
        let mut waiting: HashMap<usize, Vec<u8>> = HashMap::new();
        let mut want = 0usize;
        for (i, d) in rx.iter() {
            let step = check_cancel(cancel).and(d).and_then(|d| {
                waiting.insert(i, d);
                while let Some(d) = waiting.remove(&want) {
                    each(d)?;
                    want += 1;
                }
                Ok(())
            });
            if let Err(e) = step {
                result = Err(e);
                break;
            }
            *done.0.lock().expect("no thread panics holding it") = want;
            done.1.notify_all();
        }
        {
            // Under the lock, so a worker between its check and its wait
            // cannot miss the wake-up.
            let _held = done.0.lock().expect("no thread panics holding it");
            stop.store(true, Ordering::Relaxed);
        }
        done.1.notify_all();
        drop(rx);
        result
    })
}

/// Hint the kernel to read every record of `chain` (see
/// [`pack::prefetch_record`]); a pack that cannot be opened is left to the
/// read that follows to report.
fn prefetch_chain(chain: &[RecordRef]) {
    for (name, source, e, _) in chain {
        if let Ok(file) = source.file(name, &e.id) {
            pack::prefetch_record(&file, e);
        }
    }
}

/// After a fast read of `chains` failed (no payload checksums, no per-piece
/// digests): decode each with every check, so the error names the damaged
/// record. `Ok` if none fails.
pub(crate) fn name_damage(chains: &[Vec<RecordRef>], cancel: &AtomicBool) -> Result<()> {
    for chain in chains {
        check_cancel(cancel)?;
        decode_chain(chain)?;
    }
    Ok(())
}

/// Longest delta chain a reader follows (a guard against a damaged catalog
/// forming a cycle; writers stay far below it).
pub const MAX_CHAIN: usize = 64;

/// Resolve the chain of records needed to decode `row`.
#[allow(clippy::type_complexity)]
pub(crate) fn resolve_chain(
    row: ObjectRow,
    locate: &mut dyn FnMut(&ObjectId) -> Result<Option<ObjectRow>>,
    open: &mut dyn FnMut(i64, &ObjectId) -> Result<(String, PackSource)>,
) -> Result<Vec<RecordRef>> {
    let mut chain: Vec<RecordRef> = Vec::new();
    let mut cur = row;
    loop {
        let (base, (pack_id, offset, stored_len)) = match &cur.location {
            Location::Packed {
                pack_id,
                offset,
                stored_len,
            } => (None, (*pack_id, *offset, *stored_len)),
            Location::Delta {
                pack_id,
                offset,
                stored_len,
                base,
            } => (Some(*base), (*pack_id, *offset, *stored_len)),
            Location::Chunked { .. } => {
                return Err(Error::BadObject {
                    id: cur.id,
                    kind: "delta base",
                    reason: "a delta base must be a single record, found a chunked file".into(),
                })
            }
        };
        let (name, file) = open(pack_id, &cur.id)?;
        chain.push((
            name.clone(),
            file,
            Expect {
                id: cur.id,
                kind: cur.kind,
                offset,
                raw_len: cur.raw_len,
                stored_len,
            },
            base,
        ));
        let Some(b) = base else {
            return Ok(chain);
        };
        if chain.len() > MAX_CHAIN {
            return Err(Error::Corrupt {
                id: cur.id,
                pack: name,
                offset,
                reason: format!("delta chain longer than {MAX_CHAIN} records (cycle?)"),
            });
        }
        cur = match locate(&b)? {
            Some(r) => r,
            None => {
                return Err(Error::Corrupt {
                    id: cur.id,
                    pack: name,
                    offset,
                    reason: format!("its delta base {b} is missing"),
                })
            }
        };
        if cur.raw_len != chain.last().map_or(0, |c| c.2.raw_len) || cur.kind != Kind::Bytes {
            return Err(Error::Corrupt {
                id: chain.last().map_or(cur.id, |c| c.2.id),
                pack: name,
                offset,
                reason: format!("its delta base {b} has another length or kind"),
            });
        }
    }
}

/// Decode a resolved chain bottom-up. Only the final record's payload
/// checksum and digest are computed on the fast path (every header is still
/// checked); if anything fails, the chain is decoded again verifying every
/// link, so the damage is reported at the record that has it.
pub(crate) fn decode_chain(chain: &[RecordRef]) -> Result<Vec<u8>> {
    match decode_chain_with(chain, false, true) {
        Err(Error::Corrupt { .. }) if chain.len() > 1 => decode_chain_with(chain, true, true),
        other => other,
    }
}

/// Decode a chain without computing any digest or payload checksum (headers
/// and lengths are still checked). Only where a digest covering the result
/// is verified afterwards, with [`decode_chain`] run on a mismatch to name
/// the damaged record; see [`Ledger::read_bytes_to`].
pub(crate) fn decode_chain_unverified(chain: &[RecordRef]) -> Result<Vec<u8>> {
    decode_chain_with(chain, false, false)
}

fn decode_chain_with(
    chain: &[RecordRef],
    verify_links: bool,
    verify_final: bool,
) -> Result<Vec<u8>> {
    let mut prev: Option<(ObjectId, Vec<u8>)> = None;
    let last = chain.len().saturating_sub(1);
    for (depth, (name, file, e, base)) in chain.iter().rev().enumerate() {
        let b = match (base, prev.take()) {
            (Some(bid), Some((pid, bytes))) if *bid == pid => Some((bid, bytes)),
            (None, _) => None,
            _ => {
                return Err(Error::Corrupt {
                    id: e.id,
                    pack: name.clone(),
                    offset: e.offset,
                    reason: "delta chain is inconsistent".into(),
                })
            }
        };
        let check = verify_links || (verify_final && depth == last);
        let raw = pack::read_record_chained(&*file.file(name, &e.id)?, name, e, b, check)?;
        prev = Some((e.id, raw));
    }
    prev.map(|p| p.1).ok_or(Error::InvalidInput {
        message: "empty record chain".into(),
    })
}
