//! Encoding a piece as a planes payload: the choice among the dense,
//! sparse, high-exceptions and jointly coded forms, and the scans that find
//! the changed elements.

use super::frame::append_frames;
use super::header::{
    FLAG_BASE, FLAG_GAPS, FLAG_GOLOMB_ESCAPES, FLAG_HIGH_EXCEPTIONS, FLAG_JOINT, FLAG_SPARSE,
    FLAG_STATS, GAP_SKIP, PLANES_VERSION,
};
use super::joint;
use super::planes::split_planes;
use super::stats::{piece_stats, Gather, StatsReading};
use crate::id::ObjectId;

/// Fewest changes for which a sparse delta of 16-bit elements is written
/// jointly coded (its code-length table costs 545 bytes).
pub const JOINT_MIN_CHANGES: usize = 512;

/// Which optional payload forms an encoder may write (readers decode all of
/// them either way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanesOptions {
    /// Joint coding of sparse 16-bit deltas ([`FLAG_JOINT`]; the ledger's
    /// `WriteConfig::joint_coding`).
    pub joint: bool,
    /// The high plane of a sparse 16-bit delta as its exceptions when that
    /// is smaller ([`FLAG_HIGH_EXCEPTIONS`]; `WriteConfig::high_exceptions`).
    pub high_exceptions: bool,
    /// Which readings a delta's statistics section holds ([`FLAG_STATS`],
    /// header byte 3): the commit pipeline passes the piece dtype's one
    /// reading; [`StatsReading::All`] writes what builds before it wrote.
    pub stats: StatsReading,
}

/// Encode `raw` (a whole number of `width`-byte elements) as a planes
/// payload, XOR-ed with `base` (same length) when given. `joint` allows the
/// joint coding of sparse 16-bit deltas ([`FLAG_JOINT`]); `false` writes
/// what builds before it wrote. Readers decode every form either way. See
/// [`encode_planes_with`] for the other optional forms.
pub fn encode_planes(
    comp: &mut zstd::bulk::Compressor<'static>,
    raw: &[u8],
    width: usize,
    base: Option<(&ObjectId, &[u8])>,
    joint: bool,
) -> std::result::Result<Vec<u8>, String> {
    let opts = PlanesOptions {
        joint,
        high_exceptions: false,
        stats: StatsReading::All,
    };
    encode_planes_with(comp, raw, width, base, opts)
}

/// [`encode_planes`] with every optional form chosen by `opts`; with both
/// forms off and every statistics reading it writes what builds before
/// them wrote.
pub fn encode_planes_with(
    comp: &mut zstd::bulk::Compressor<'static>,
    raw: &[u8],
    width: usize,
    base: Option<(&ObjectId, &[u8])>,
    opts: PlanesOptions,
) -> std::result::Result<Vec<u8>, String> {
    let joint = opts.joint;
    if !matches!(width, 1 | 2 | 4 | 8) || !raw.len().is_multiple_of(width) {
        return Err(format!(
            "cannot split {} bytes into {width}-byte elements",
            raw.len()
        ));
    }
    if let Some((_, b)) = base {
        if b.len() != raw.len() {
            return Err("base has a different length".into());
        }
    }
    // Whether the delta is taken as dense, skipping the sparse forms:
    // from a sample, or because the joint scan gave up (more than a
    // quarter of the elements changed).
    let w8 = width as u8;
    let reading = opts.stats.for_width(w8);
    let mut dense = base.is_some_and(|(_, b)| mostly_changed(raw, b, width));
    if let (Some((id, b)), 2, true, false) = (base, width, joint, dense) {
        // The statistics are gathered in the same scan as the changes.
        let mut gather = Gather::new(w8, reading);
        let coded = joint_w2(raw, b, raw.len() / 4, &mut gather);
        dense = coded.is_none();
        if let Some((body, count)) = coded {
            if count >= JOINT_MIN_CHANGES {
                let mut out = vec![
                    PLANES_VERSION,
                    2,
                    FLAG_BASE
                        | FLAG_SPARSE
                        | FLAG_GAPS
                        | FLAG_JOINT
                        | FLAG_GOLOMB_ESCAPES
                        | FLAG_STATS,
                    reading.code(),
                ];
                out.extend_from_slice(id.as_bytes());
                let count = u32::try_from(count).map_err(|_| "piece too large")?;
                out.extend_from_slice(&count.to_le_bytes());
                gather.finish().encode_into(&mut out)?;
                let len = u32::try_from(body.len()).map_err(|_| "piece too large")?;
                out.extend_from_slice(&len.to_le_bytes());
                out.extend_from_slice(&body);
                return Ok(out);
            }
        }
    }
    if let (Some((id, b)), false) = (base, dense) {
        let mut gather = Gather::new(w8, reading);
        if let Some((gaps, count, planes)) =
            sparse_planes_upto(raw, b, width, raw.len() / width / 2, &mut gather)
        {
            let mut out = vec![
                PLANES_VERSION,
                w8,
                FLAG_BASE | FLAG_SPARSE | FLAG_GAPS | FLAG_STATS,
                reading.code(),
            ];
            out.extend_from_slice(id.as_bytes());
            let count = u32::try_from(count).map_err(|_| "piece too large".to_string())?;
            out.extend_from_slice(&count.to_le_bytes());
            gather.finish().encode_into(&mut out)?;
            let zstd = |comp: &mut zstd::bulk::Compressor<'static>, p: &[u8]| {
                comp.compress(p).map_err(|e| format!("zstd: {e}"))
            };
            let mut frames = Vec::with_capacity(width + 1);
            frames.push(zstd(comp, &gaps)?);
            for p in &planes {
                frames.push(zstd(comp, p)?);
            }
            if width == 2 && opts.high_exceptions {
                let exceptions = zstd(comp, &high_exceptions(&planes[1]))?;
                if exceptions.len() < frames[2].len() {
                    frames[2] = exceptions;
                    out[2] |= FLAG_HIGH_EXCEPTIONS;
                }
            }
            for f in &frames {
                let n = u32::try_from(f.len()).map_err(|_| "plane too large".to_string())?;
                out.extend_from_slice(&n.to_le_bytes());
            }
            for f in &frames {
                out.extend_from_slice(f);
            }
            return Ok(out);
        }
    }
    let planes = split_planes(raw, base.map(|b| b.1), width);
    let (flags, code) = if base.is_some() {
        (FLAG_BASE | FLAG_STATS, reading.code())
    } else {
        (0, 0)
    };
    let mut out = vec![PLANES_VERSION, w8, flags, code];
    if let Some((id, b)) = base {
        out.extend_from_slice(id.as_bytes());
        // Dense: the planes visit every element, so the statistics take a
        // scan of their own over the changed ones.
        piece_stats(raw, b, w8, reading).encode_into(&mut out)?;
    }
    let frames: Vec<&[u8]> = planes.iter().map(Vec::as_slice).collect();
    append_frames(comp, &mut out, &frames)?;
    Ok(out)
}

/// The sparse form of `raw XOR base`: the positions of the elements that
/// differ as *gap bytes*, their number, and the byte planes of the XOR of
/// those elements only, in element order. Before each changed element one
/// byte `g < 255` says how many unchanged elements precede it (since the
/// previous change, or the start); a byte 255 skips 255 unchanged elements
/// and names no change. Gaps cost about what a bit mask of the elements
/// would after compression and are cheaper to apply: one step per change,
/// not a scan of the mask's words.
pub fn sparse_planes(raw: &[u8], base: &[u8], width: usize) -> Sparse {
    let mut none = Gather::new(1, StatsReading::Count);
    sparse_planes_upto(raw, base, width, usize::MAX, &mut none).expect("no limit")
}

/// [`sparse_planes`], or `None` as soon as more than `limit` elements
/// differ (a dense delta: the gathering would be wasted). Each change is
/// also given to `stats`, in element order.
fn sparse_planes_upto(
    raw: &[u8],
    base: &[u8],
    width: usize,
    limit: usize,
    stats: &mut Gather,
) -> Option<Sparse> {
    match width {
        1 => sparse_w::<1>(raw, base, limit, stats),
        2 => sparse_w::<2>(raw, base, limit, stats),
        4 => sparse_w::<4>(raw, base, limit, stats),
        _ => sparse_w::<8>(raw, base, limit, stats),
    }
}

/// Gap bytes, changed-element count and planes of a sparse delta.
pub type Sparse = (Vec<u8>, usize, Vec<Vec<u8>>);

/// Elements compared by [`mostly_changed`]: one run of this many in every
/// [`SAMPLE_STRIDE`].
const SAMPLE_RUN: usize = 64;
/// See [`SAMPLE_RUN`]: a sixteenth of the piece is compared.
const SAMPLE_STRIDE: usize = 1024;

/// Whether a sample of the piece (runs of [`SAMPLE_RUN`] elements, one per
/// [`SAMPLE_STRIDE`]) has more than 60 % of its elements changed, so the
/// delta is dense beyond doubt (the sparse forms give up at 25 % and
/// 50 %). Why: on a series where most weights change every round (lr
/// 1e-5, 86 %), the joint scan coded a quarter of each piece's changes
/// before giving up, 16 % more ingest CPU than the zstd form; the sample
/// costs a sixteenth of one comparison pass. A wrong guess only picks
/// another valid form.
fn mostly_changed(raw: &[u8], base: &[u8], width: usize) -> bool {
    match width {
        1 => mostly_changed_w::<1>(raw, base),
        2 => mostly_changed_w::<2>(raw, base),
        4 => mostly_changed_w::<4>(raw, base),
        _ => mostly_changed_w::<8>(raw, base),
    }
}

fn mostly_changed_w<const W: usize>(raw: &[u8], base: &[u8]) -> bool {
    let (mut seen, mut changed) = (0usize, 0u32);
    let run = SAMPLE_RUN * W;
    let mut at = 0;
    while at + run <= raw.len() {
        for k in (0..run).step_by(8 * W) {
            changed += block_mask::<W>(&raw[at + k..], &base[at + k..]).count_ones();
        }
        seen += SAMPLE_RUN;
        at += SAMPLE_STRIDE * W;
    }
    seen > 0 && changed as usize * 10 > seen * 6
}

/// The jointly coded body of the changes of `raw` against `base` (16-bit
/// elements) and their number, or `None` if more than `limit` elements
/// differ (a dense delta). Each change is also given to `stats`, in
/// element order (complete only when the body is returned).
fn joint_w2(raw: &[u8], base: &[u8], limit: usize, stats: &mut Gather) -> Option<(Vec<u8>, usize)> {
    /// Changes buffered for `stats` (a multiple of 64): the statistics run
    /// over them in a loop of their own, their sums kept in registers,
    /// rather than interleaved with the coder's calls.
    const PAIRS: usize = 512;
    let n = raw.len() / 2;
    let mut enc = joint::Encoder::new(n, (n / 6).min(limit + 1), joint::Escapes::Golomb);
    let at = |s: &[u8], e: usize| u16::from_le_bytes([s[2 * e], s[2 * e + 1]]);
    let mut pairs = [(0u16, 0u16); PAIRS];
    let mut held = 0usize;
    let (rb, bb) = (raw.chunks_exact(128), base.chunks_exact(128));
    let (r_tail, b_tail) = (rb.remainder(), bb.remainder());
    for (wi, (r, b)) in rb.zip(bb).enumerate() {
        // 64 elements: eight blocks of eight changed-element bits.
        let mut bits = 0u64;
        for k in 0..8 {
            let m = block_mask::<2>(&r[16 * k..16 * k + 16], &b[16 * k..16 * k + 16]);
            bits |= u64::from(m) << (8 * k);
        }
        if held + 64 > PAIRS {
            stats.add_pairs(&pairs[..held]);
            held = 0;
        }
        while bits != 0 {
            let e = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let (old, new) = (at(b, e), at(r, e));
            pairs[held] = (old, new);
            held += 1;
            enc.push(wi * 64 + e, new.wrapping_sub(old));
        }
        if enc.changes() > limit {
            return None;
        }
    }
    stats.add_pairs(&pairs[..held]);
    let first = raw.len() / 128 * 64;
    for e in 0..r_tail.len() / 2 {
        let (old, new) = (at(b_tail, e), at(r_tail, e));
        if old != new {
            stats.add2(old, new);
            enc.push(first + e, new.wrapping_sub(old));
        }
    }
    let count = enc.changes();
    (count <= limit).then(|| (enc.finish(), count))
}

/// The exceptions form of the high plane of a sparse 16-bit delta
/// ([`FLAG_HIGH_EXCEPTIONS`]): `u32` count `E` of its nonzero bytes, gap
/// bytes giving their change indices (coded as the element gaps are, over
/// changes instead of elements), then the `E` bytes. A fine-tuning step
/// moves most weights by a code point or two, so the high XOR byte is
/// zero for about 99 % of the changes (main series).
pub fn high_exceptions(plane: &[u8]) -> Vec<u8> {
    let e = plane.iter().filter(|&&b| b != 0).count();
    let mut out = Vec::with_capacity(4 + 2 * e + plane.len() / 255 + 1);
    // A plane has at most one byte per change, whose count is a u32.
    out.extend_from_slice(&(e as u32).to_le_bytes());
    let mut next = 0usize;
    for (j, _) in plane.iter().enumerate().filter(|(_, &b)| b != 0) {
        let mut gap = j - next;
        while gap >= usize::from(GAP_SKIP) {
            out.push(GAP_SKIP);
            gap -= usize::from(GAP_SKIP);
        }
        out.push(gap as u8);
        next = j + 1;
    }
    out.extend(plane.iter().filter(|&&b| b != 0));
    out
}

/// Fixed-width form of [`sparse_planes`], in windows small enough to stay
/// in cache: first the window's changed-element bits from integer compares
/// (no per-element branch: changes are scattered at random, so a branch
/// would mispredict about as often as it is taken), then its changed
/// elements gathered by walking the set bits.
fn sparse_w<const W: usize>(
    raw: &[u8],
    base: &[u8],
    limit: usize,
    stats: &mut Gather,
) -> Option<Sparse> {
    /// Elements per window (a multiple of 64, so windows start on whole words).
    const WINDOW: usize = 4096;
    let n = raw.len() / W;
    let mut gaps = Vec::with_capacity(n / 6 + 8);
    // Sized ahead of each window (a fine-tuning step changes about one
    // element in eight), so the gather loop only indexes.
    let mut planes: [Vec<u8>; W] = std::array::from_fn(|_| vec![0u8; (n / 6).min(n)]);
    let mut j = 0usize;
    // The element after the last change.
    let mut next = 0usize;
    let mut m = [0u8; WINDOW / 8];
    let windows = raw.chunks(WINDOW * W).zip(base.chunks(WINDOW * W));
    for (wi, (r, b)) in windows.enumerate() {
        let elems = r.len() / W;
        let m = &mut m[..elems.div_ceil(8)];
        let (rb, bb) = (r.chunks_exact(8 * W), b.chunks_exact(8 * W));
        let (r_tail, b_tail) = (rb.remainder(), bb.remainder());
        for (byte, (r8, b8)) in m.iter_mut().zip(rb.zip(bb)) {
            *byte = block_mask::<W>(r8, b8);
        }
        if !r_tail.is_empty() {
            let mut bits = 0u8;
            for e in 0..r_tail.len() / W {
                bits |= u8::from(load::<W>(r_tail, e) != load::<W>(b_tail, e)) << e;
            }
            *m.last_mut().expect("a partial block has a mask byte") = bits;
        }
        let need = j + elems;
        if planes[0].len() < need {
            let len = need.max(2 * planes[0].len()).min(n);
            for p in &mut planes {
                p.resize(len, 0);
            }
        }
        let mut out: [&mut [u8]; W] = planes.each_mut().map(|p| &mut p[j..need]);
        let mut at_out = 0usize;
        for word_at in 0..m.len().div_ceil(8) {
            let mut bits = mask_word(m, word_at);
            while bits != 0 {
                let e = word_at * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let idx = wi * WINDOW + e;
                let mut gap = idx - next;
                while gap >= usize::from(GAP_SKIP) {
                    gaps.push(GAP_SKIP);
                    gap -= usize::from(GAP_SKIP);
                }
                gaps.push(gap as u8);
                next = idx + 1;
                let at = e * W;
                if W == 2 {
                    stats.add2(
                        u16::from_le_bytes([b[at], b[at + 1]]),
                        u16::from_le_bytes([r[at], r[at + 1]]),
                    );
                } else {
                    stats.add(&b[at..at + W], &r[at..at + W]);
                }
                let x: [u8; W] = std::array::from_fn(|k| r[at + k] ^ b[at + k]);
                for (plane, v) in out.iter_mut().zip(x) {
                    plane[at_out] = v;
                }
                at_out += 1;
            }
        }
        j += at_out;
        if j > limit {
            return None;
        }
    }
    let planes = planes
        .into_iter()
        .map(|mut p| {
            p.truncate(j);
            p
        })
        .collect();
    Some((gaps, j, planes))
}

/// The changed-element bits of one block of eight elements.
#[inline(always)]
pub(super) fn block_mask<const W: usize>(r: &[u8], b: &[u8]) -> u8 {
    let (r, b) = (&r[..8 * W], &b[..8 * W]);
    if W == 2 {
        // Two words of four 16-bit lanes each: OR each lane's high byte into
        // its low byte; a lane is nonzero iff adding 0xFF to that byte
        // carries into bit 8; a multiply gathers the four carry bits.
        let lanes = |at: usize| {
            let x = u64::from_le_bytes(r[at..at + 8].try_into().expect("8 bytes"))
                ^ u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
            let y = (x | (x >> 8)) & 0x00FF_00FF_00FF_00FF;
            let z = ((y + 0x00FF_00FF_00FF_00FF) >> 8) & 0x0001_0001_0001_0001;
            (z.wrapping_mul((1 << 45) | (1 << 30) | (1 << 15) | 1) >> 45) as u8 & 0xF
        };
        return lanes(0) | (lanes(8) << 4);
    }
    let mut bits = 0u8;
    for e in 0..8 {
        bits |= u8::from(load::<W>(r, e) != load::<W>(b, e)) << e;
    }
    bits
}

/// Element `e` of `s` as an integer (`W` is 1, 2, 4 or 8).
#[inline(always)]
fn load<const W: usize>(s: &[u8], e: usize) -> u64 {
    let b = &s[e * W..e * W + W];
    match W {
        1 => u64::from(b[0]),
        2 => u64::from(u16::from_ne_bytes([b[0], b[1]])),
        4 => u64::from(u32::from_ne_bytes([b[0], b[1], b[2], b[3]])),
        _ => u64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
    }
}

/// Mask word `i` (elements `64 i ..`), zero-padded past the end.
#[inline(always)]
fn mask_word(mask: &[u8], i: usize) -> u64 {
    match mask.get(i * 8..i * 8 + 8) {
        Some(b) => u64::from_le_bytes(b.try_into().expect("8 bytes")),
        None => {
            let mut le = [0u8; 8];
            let tail = mask.get(i * 8..).unwrap_or(&[]);
            le[..tail.len()].copy_from_slice(tail);
            u64::from_le_bytes(le)
        }
    }
}
