//! Decoding a planes payload back to the piece's bytes, checking every
//! length, count and position against the header before it is used.

use super::frame::{inflate_checked, inflate_into};
use super::header::{PlanesHeader, GAP_SKIP};
use super::joint;
use super::planes::join_planes;
use super::pool::recycle;

/// Decode a planes payload to `raw_len` bytes; `base` must be given (the
/// verified bytes of the header's base object) exactly when the payload is a
/// delta.
pub fn decode_planes(
    payload: &[u8],
    raw_len: u64,
    base: Option<&[u8]>,
) -> std::result::Result<Vec<u8>, String> {
    decode_planes_owned(payload, raw_len, base.map(<[u8]>::to_vec))
}

/// [`decode_planes`] taking the base bytes by value: a sparse delta is
/// applied to them in place.
pub fn decode_planes_owned(
    payload: &[u8],
    raw_len: u64,
    base: Option<Vec<u8>>,
) -> std::result::Result<Vec<u8>, String> {
    let h = PlanesHeader::decode(payload)?;
    let w = h.width as usize;
    if !raw_len.is_multiple_of(w as u64) {
        return Err(format!(
            "raw length {raw_len} is not a multiple of the element width {w}"
        ));
    }
    let n = usize::try_from(raw_len / w as u64).map_err(|_| "piece too large".to_string())?;
    match (&h.base, &base) {
        (Some(_), None) => return Err("delta payload decoded without its base".into()),
        (None, Some(_)) => return Err("plain planes payload given a base".into()),
        (Some(_), Some(b)) if b.len() as u64 != raw_len => {
            return Err(format!(
                "base has {} bytes, the delta describes {raw_len}",
                b.len()
            ))
        }
        _ => {}
    }
    let mut at = h.encoded_len();
    let frames = h.plane_lens.iter().map(|&l| {
        let frame = &payload[at..at + l as usize];
        at += l as usize;
        frame
    });
    let frames: Vec<&[u8]> = frames.collect();
    // Frames are inflated into per-thread scratch buffers (no allocation and
    // page faulting per piece); only the result is a new vector.
    SCRATCH.with(|cell| {
        let mut bufs = cell.take();
        bufs.resize_with(bufs.len().max(frames.len()), Vec::new);
        let out = decode_frames(&h, &frames, &mut bufs, n, w, base);
        cell.replace(bufs);
        out
    })
}

thread_local! {
    /// Scratch buffers for the frames of the piece being decoded.
    static SCRATCH: std::cell::Cell<Vec<Vec<u8>>> = const { std::cell::Cell::new(Vec::new()) };
}

fn decode_frames(
    h: &PlanesHeader,
    frames: &[&[u8]],
    bufs: &mut [Vec<u8>],
    n: usize,
    w: usize,
    base: Option<Vec<u8>>,
) -> std::result::Result<Vec<u8>, String> {
    if let Some(count) = h.sparse_count {
        let mut out = base.ok_or("delta payload decoded without its base")?;
        let count = count as usize;
        if count > n {
            return Err(format!("{count} changed elements in a piece of {n}"));
        }
        if h.joint {
            joint::apply(frames[0], &mut out, count, h.escapes)?;
            return Ok(out);
        }
        let (gaps, planes) = bufs.split_first_mut().expect("sized to the frames");
        // One byte per change plus one per 255 skipped elements.
        let most = count + n / usize::from(GAP_SKIP) + 1;
        inflate_into(frames[0], gaps, most)
            .map_err(|e| format!("zstd decompression of the gaps failed: {e}"))?;
        if gaps.len() > most {
            return Err(format!(
                "the gaps decompressed to {} bytes, at most {most} possible",
                gaps.len()
            ));
        }
        if h.high_exceptions {
            let (low, rest) = planes.split_first_mut().expect("sized to the frames");
            inflate_checked(frames[1], low, count, "plane")?;
            let exceptions = &mut rest[0];
            // The count, then at most a gap byte and a value per change
            // plus a gap byte per 255 changes skipped.
            let most = 4 + 2 * count + count / usize::from(GAP_SKIP) + 1;
            inflate_into(frames[2], exceptions, most).map_err(|e| {
                format!("zstd decompression of the high-plane exceptions failed: {e}")
            })?;
            let (exc_gaps, exc_values) = split_exceptions(exceptions, count)?;
            apply_w2_exceptions(&mut out, gaps, low, exc_gaps, exc_values)?;
            return Ok(out);
        }
        for (f, buf) in frames[1..].iter().zip(planes.iter_mut()) {
            inflate_checked(f, buf, count, "plane")?;
        }
        apply_gaps(&mut out, gaps, &planes[..w], w, count)?;
        return Ok(out);
    }
    for (f, buf) in frames.iter().zip(bufs.iter_mut()) {
        inflate_checked(f, buf, n, "plane")?;
    }
    let mut out = join_planes(&bufs[..w], None, w);
    if let Some(b) = base {
        for (o, x) in out.iter_mut().zip(&b) {
            *o ^= x;
        }
        recycle(b);
    }
    Ok(out)
}

/// XOR the changed elements (gap bytes, planes in element order) into `out`,
/// checking that the gaps name exactly `count` elements inside the piece.
fn apply_gaps(
    out: &mut [u8],
    gaps: &[u8],
    planes: &[Vec<u8>],
    w: usize,
    count: usize,
) -> std::result::Result<(), String> {
    match w {
        1 => apply_w::<1>(out, gaps, planes, count),
        2 => apply_w::<2>(out, gaps, planes, count),
        4 => apply_w::<4>(out, gaps, planes, count),
        _ => apply_w::<8>(out, gaps, planes, count),
    }
}

fn apply_w<const W: usize>(
    out: &mut [u8],
    gaps: &[u8],
    planes: &[Vec<u8>],
    count: usize,
) -> std::result::Result<(), String> {
    let planes: [&[u8]; W] = std::array::from_fn(|k| &planes[k][..count]);
    let mut at = 0usize;
    if W == 2 {
        // 16-bit elements (bf16, f16: the common case) as one load and store
        // each, with the planes walked by iterator: about 30 % faster.
        let mut values = planes[0].iter().zip(planes[1]);
        for &g in gaps {
            if g == GAP_SKIP {
                at += usize::from(GAP_SKIP);
                continue;
            }
            at += usize::from(g);
            let (Some(e), Some((lo, hi))) = (out.get_mut(at * 2..at * 2 + 2), values.next()) else {
                return Err("the gaps name elements past the piece or its count".into());
            };
            let e: &mut [u8; 2] = e.try_into().expect("two bytes");
            *e = (u16::from_le_bytes(*e) ^ u16::from_le_bytes([*lo, *hi])).to_le_bytes();
            at += 1;
        }
        if values.next().is_some() {
            return Err(format!(
                "the gaps name fewer changed elements than the header's {count}"
            ));
        }
        return Ok(());
    }
    let mut j = 0usize;
    for &g in gaps {
        if g == GAP_SKIP {
            at += usize::from(GAP_SKIP);
            continue;
        }
        at += usize::from(g);
        let (Some(e), true) = (out.get_mut(at * W..at * W + W), j < count) else {
            return Err("the gaps name elements past the piece or its count".into());
        };
        for (k, plane) in planes.iter().enumerate() {
            e[k] ^= plane[j];
        }
        j += 1;
        at += 1;
    }
    if j != count {
        return Err(format!(
            "the gaps name {j} changed elements, the header {count}"
        ));
    }
    Ok(())
}

/// The gap bytes and the values of a high-plane exceptions body
/// ([`high_exceptions`](super::high_exceptions)) of a delta with `count`
/// changes, checking its count, that the gap bytes end at the count-th
/// change they name, that exactly that many values follow and that none is
/// zero.
fn split_exceptions(body: &[u8], count: usize) -> std::result::Result<(&[u8], &[u8]), String> {
    let (e, rest) = body
        .split_first_chunk::<4>()
        .ok_or("high-plane exceptions shorter than their count")?;
    let e = u32::from_le_bytes(*e) as usize;
    if e > count {
        return Err(format!("{e} high-plane exceptions among {count} changes"));
    }
    let mut named = 0usize;
    let mut end = 0usize;
    for (i, &g) in rest.iter().enumerate() {
        if named == e {
            break;
        }
        if g != GAP_SKIP {
            named += 1;
        }
        end = i + 1;
    }
    if named != e {
        return Err("high-plane exceptions truncated in their gaps".into());
    }
    let (gaps, values) = rest.split_at(end);
    if values.len() != e {
        return Err(format!(
            "{} high-plane exception values, their count is {e}",
            values.len()
        ));
    }
    if values.contains(&0) {
        return Err("a high-plane exception of zero".into());
    }
    Ok((gaps, values))
}

/// [`apply_w`] for 16-bit elements whose high XOR bytes are given as
/// exceptions ([`split_exceptions`]): the high byte of change `j` is the
/// next exception value if `j` is the next exception's change index, else
/// zero. Checks what [`apply_w`] checks, and that every exception names a
/// change.
fn apply_w2_exceptions(
    out: &mut [u8],
    gaps: &[u8],
    low: &[u8],
    exc_gaps: &[u8],
    exc_values: &[u8],
) -> std::result::Result<(), String> {
    let mut values = low.iter();
    let mut eg = exc_gaps.iter();
    let mut ev = exc_values.iter();
    let mut next = next_exception(&mut eg, 0);
    let (mut at, mut j) = (0usize, 0usize);
    for &g in gaps {
        if g == GAP_SKIP {
            at += usize::from(GAP_SKIP);
            continue;
        }
        at += usize::from(g);
        let (Some(e), Some(&lo)) = (out.get_mut(at * 2..at * 2 + 2), values.next()) else {
            return Err("the gaps name elements past the piece or its count".into());
        };
        let e: &mut [u8; 2] = e.try_into().expect("two bytes");
        let mut x = u16::from(lo);
        // Rare (about one change in a hundred), so the branch predicts well.
        if j == next {
            let hi = ev
                .next()
                .ok_or("more high-plane exceptions named than given")?;
            x |= u16::from(*hi) << 8;
            next = next_exception(&mut eg, j + 1);
        }
        *e = (u16::from_le_bytes(*e) ^ x).to_le_bytes();
        j += 1;
        at += 1;
    }
    if values.next().is_some() {
        return Err(format!(
            "the gaps name {j} changed elements, fewer than the header's count"
        ));
    }
    if next != usize::MAX || ev.next().is_some() {
        return Err("a high-plane exception past the last change".into());
    }
    Ok(())
}

/// The change index of the next exception, its gap bytes read from `eg`
/// and counted from change `from`; `usize::MAX` when none is left.
fn next_exception(eg: &mut std::slice::Iter<'_, u8>, from: usize) -> usize {
    let mut j = from;
    for &g in eg.by_ref() {
        if g == GAP_SKIP {
            j += usize::from(GAP_SKIP);
        } else {
            return j + usize::from(g);
        }
    }
    usize::MAX
}
