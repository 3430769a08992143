//! Tensor-aware delta storage for safetensors files (a file format, not a
//! domain concept).
//!
//! A safetensors file is cut into *pieces* along its own structure: the
//! header, then every tensor in pieces of at most [`MAX_PIECE`] bytes (whole
//! elements), plus any gap bytes. Each piece is an ordinary chunk (a bytes
//! object whose id is the plain BLAKE3 of its bytes). A piece of a
//! multi-byte dtype is stored with the *planes* record encoding: optionally
//! XOR-ed element-wise with the same piece of the same-named tensor of a base
//! file (same dtype and shape), then split into byte planes (byte `k` of
//! every element together), each plane one zstd frame. A delta that changes
//! at most half of the elements is stored *sparse*: the positions of the
//! changed elements (gap bytes) plus the byte planes of those elements only,
//! which is both smaller (a fine-tuning step changes about one element in
//! eight) and cheaper to apply. See FORMAT.md §12.

pub mod joint;
pub mod safetensors;

use crate::id::ObjectId;

pub use self::safetensors::{parse_layout, pieces, Layout, Piece, PieceKey, TensorInfo};

/// Largest piece (chunk) a safetensors file is cut into.
pub const MAX_PIECE: u64 = 4 << 20;

/// Version byte of a planes payload.
pub const PLANES_VERSION: u8 = 1;
/// Flag bit: the payload is a delta against a base object.
pub const FLAG_BASE: u8 = 1;
/// Flag bit (only with [`FLAG_BASE`]): the delta is sparse (gap bytes giving
/// the changed elements' positions, plus the planes of those elements).
pub const FLAG_SPARSE: u8 = 2;
/// Flag bit, always set with [`FLAG_SPARSE`]: the positions are gap bytes.
/// (Development builds before it wrote a bit mask there; such payloads are
/// refused by name rather than misread.)
pub const FLAG_GAPS: u8 = 4;
/// Flag bit (only with [`FLAG_GAPS`] and 16-bit elements): the changes are
/// jointly coded ([`joint`]): one body instead of zstd frames.
pub const FLAG_JOINT: u8 = 8;
/// Flag bit (only with [`FLAG_GAPS`], without [`FLAG_JOINT`], and 16-bit
/// elements): the high byte plane of the changes is stored as its
/// exceptions, the few changes whose high XOR byte is not zero, instead of
/// one byte per change (FORMAT.md §12.3.2).
pub const FLAG_HIGH_EXCEPTIONS: u8 = 16;
/// Flag bit (only with [`FLAG_JOINT`]): the differences of escaped changes
/// follow their symbols as exponential-Golomb codes
/// ([`joint::Escapes::Golomb`]) instead of 16 raw bits. Written with every
/// jointly coded delta since 2026-12-02.
pub const FLAG_GOLOMB_ESCAPES: u8 = 32;
/// Fewest changes for which a sparse delta of 16-bit elements is written
/// jointly coded (its code-length table costs 545 bytes).
pub const JOINT_MIN_CHANGES: usize = 512;

/// A decoded planes payload header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanesHeader {
    /// Element width in bytes (1, 2, 4 or 8).
    pub width: u8,
    /// Base object, when the payload is a delta.
    pub base: Option<ObjectId>,
    /// For a sparse delta, the number of changed elements.
    pub sparse_count: Option<u32>,
    /// Stored length of each zstd frame: the planes, preceded by the gaps
    /// frame for a sparse delta; for a jointly coded delta, the one length
    /// of its body.
    pub plane_lens: Vec<u32>,
    /// The sparse delta is jointly coded ([`FLAG_JOINT`]).
    pub joint: bool,
    /// How a jointly coded delta's escaped differences are written
    /// ([`FLAG_GOLOMB_ESCAPES`]); `Raw16` for other payloads.
    pub escapes: joint::Escapes,
    /// The sparse delta's high plane is stored as its exceptions
    /// ([`FLAG_HIGH_EXCEPTIONS`]).
    pub high_exceptions: bool,
}

impl PlanesHeader {
    /// Length of the encoded header.
    pub fn encoded_len(&self) -> usize {
        4 + if self.base.is_some() { 32 } else { 0 }
            + if self.sparse_count.is_some() { 4 } else { 0 }
            + 4 * self.plane_lens.len()
    }

    /// Parse the header at the start of `payload`.
    pub fn decode(payload: &[u8]) -> std::result::Result<PlanesHeader, String> {
        if payload.len() < 4 {
            return Err("planes payload shorter than its header".into());
        }
        if payload[0] != PLANES_VERSION {
            return Err(format!("unknown planes payload version {}", payload[0]));
        }
        let width = payload[1];
        if !matches!(width, 1 | 2 | 4 | 8) {
            return Err(format!("invalid element width {width}"));
        }
        let flags = payload[2];
        if flags & FLAG_SPARSE != 0 && flags & FLAG_GAPS == 0 {
            return Err(
                "sparse delta with a bit mask (written by an earlier development \
                        build): no longer readable"
                    .into(),
            );
        }
        let joint = flags & FLAG_JOINT != 0;
        let high_exceptions = flags & FLAG_HIGH_EXCEPTIONS != 0;
        let golomb = flags & FLAG_GOLOMB_ESCAPES != 0;
        let known = FLAG_BASE
            | FLAG_SPARSE
            | FLAG_GAPS
            | FLAG_JOINT
            | FLAG_HIGH_EXCEPTIONS
            | FLAG_GOLOMB_ESCAPES;
        if flags & !known != 0
            || (golomb && !joint)
            || (high_exceptions && (flags & FLAG_GAPS == 0 || joint || width != 2))
            || (flags & FLAG_SPARSE != 0 && flags & FLAG_BASE == 0)
            || (flags & FLAG_GAPS != 0 && flags & FLAG_SPARSE == 0)
            || (joint && (flags & FLAG_GAPS == 0 || width != 2))
            || payload[3] != 0
        {
            return Err("unknown planes flags".into());
        }
        let mut at = 4;
        let base = if flags & FLAG_BASE != 0 {
            let b = payload
                .get(at..at + 32)
                .and_then(ObjectId::from_slice)
                .ok_or("planes payload truncated in its base id")?;
            at += 32;
            Some(b)
        } else {
            None
        };
        let sparse_count = if flags & FLAG_SPARSE != 0 {
            let b = payload
                .get(at..at + 4)
                .ok_or("planes payload truncated in its changed-element count")?;
            at += 4;
            Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        } else {
            None
        };
        let frames = if joint {
            1
        } else {
            usize::from(width) + usize::from(sparse_count.is_some())
        };
        let mut plane_lens = Vec::with_capacity(frames);
        for _ in 0..frames {
            let b = payload
                .get(at..at + 4)
                .ok_or("planes payload truncated in its plane table")?;
            plane_lens.push(u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
            at += 4;
        }
        let total: u64 = plane_lens.iter().map(|&l| u64::from(l)).sum();
        if at as u64 + total != payload.len() as u64 {
            return Err("planes payload length does not match its plane table".into());
        }
        Ok(PlanesHeader {
            width,
            base,
            sparse_count,
            plane_lens,
            joint,
            escapes: if golomb {
                joint::Escapes::Golomb
            } else {
                joint::Escapes::Raw16
            },
            high_exceptions,
        })
    }
}

/// The zstd compressor for planes frames: `level` with the smallest match
/// hash table (2^6 entries). Byte planes of trained weights are close to
/// noise, so nearly every LZ match zstd finds with a larger table is a short
/// chance match that costs more to code than the literals it replaces.
/// Measured on 32 MiB of a bf16 checkpoint at level 1: the exponent plane
/// 0.340 of raw instead of 0.369, the low XOR plane of a delta 0.410
/// instead of 0.430, with faster compression and about 1.5× faster
/// decompression. Decoders are unaffected (plain zstd frames).
pub fn planes_compressor(level: i32) -> std::io::Result<zstd::bulk::Compressor<'static>> {
    let mut c = zstd::bulk::Compressor::new(level)?;
    c.set_parameter(zstd::stream::raw::CParameter::HashLog(6))?;
    Ok(c)
}

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
    };
    encode_planes_with(comp, raw, width, base, opts)
}

/// [`encode_planes`] with every optional form chosen by `opts`; with both
/// off it writes what builds before them wrote.
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
    let mut dense = base.is_some_and(|(_, b)| mostly_changed(raw, b, width));
    if let (Some((id, b)), 2, true, false) = (base, width, joint, dense) {
        let coded = joint_w2(raw, b, raw.len() / 4);
        dense = coded.is_none();
        if let Some((body, count)) = coded {
            if count >= JOINT_MIN_CHANGES {
                let mut out = vec![
                    PLANES_VERSION,
                    2,
                    FLAG_BASE | FLAG_SPARSE | FLAG_GAPS | FLAG_JOINT | FLAG_GOLOMB_ESCAPES,
                    0,
                ];
                out.extend_from_slice(id.as_bytes());
                let count = u32::try_from(count).map_err(|_| "piece too large")?;
                out.extend_from_slice(&count.to_le_bytes());
                let len = u32::try_from(body.len()).map_err(|_| "piece too large")?;
                out.extend_from_slice(&len.to_le_bytes());
                out.extend_from_slice(&body);
                return Ok(out);
            }
        }
    }
    if let (Some((id, b)), false) = (base, dense) {
        if let Some((gaps, count, planes)) =
            sparse_planes_upto(raw, b, width, raw.len() / width / 2)
        {
            let mut out = vec![
                PLANES_VERSION,
                width as u8,
                FLAG_BASE | FLAG_SPARSE | FLAG_GAPS,
                0,
            ];
            out.extend_from_slice(id.as_bytes());
            let count = u32::try_from(count).map_err(|_| "piece too large".to_string())?;
            out.extend_from_slice(&count.to_le_bytes());
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
    let mut out = vec![PLANES_VERSION, width as u8, u8::from(base.is_some()), 0];
    if let Some((id, _)) = base {
        out.extend_from_slice(id.as_bytes());
    }
    let frames: Vec<&[u8]> = planes.iter().map(Vec::as_slice).collect();
    append_frames(comp, &mut out, &frames)?;
    Ok(out)
}

/// Append a table of frame lengths, then each frame compressed.
fn append_frames(
    comp: &mut zstd::bulk::Compressor<'static>,
    out: &mut Vec<u8>,
    frames: &[&[u8]],
) -> std::result::Result<(), String> {
    let table_at = out.len();
    out.resize(table_at + 4 * frames.len(), 0);
    for (k, p) in frames.iter().enumerate() {
        let before = out.len();
        let frame = comp.compress(p).map_err(|e| format!("zstd: {e}"))?;
        out.extend_from_slice(&frame);
        let n = u32::try_from(out.len() - before).map_err(|_| "plane too large".to_string())?;
        out[table_at + 4 * k..table_at + 4 * k + 4].copy_from_slice(&n.to_le_bytes());
    }
    Ok(())
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
    sparse_planes_upto(raw, base, width, usize::MAX).expect("no limit")
}

/// [`sparse_planes`], or `None` as soon as more than `limit` elements
/// differ (a dense delta: the gathering would be wasted).
fn sparse_planes_upto(raw: &[u8], base: &[u8], width: usize, limit: usize) -> Option<Sparse> {
    match width {
        1 => sparse_w::<1>(raw, base, limit),
        2 => sparse_w::<2>(raw, base, limit),
        4 => sparse_w::<4>(raw, base, limit),
        _ => sparse_w::<8>(raw, base, limit),
    }
}

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
/// differ (a dense delta).
fn joint_w2(raw: &[u8], base: &[u8], limit: usize) -> Option<(Vec<u8>, usize)> {
    let n = raw.len() / 2;
    let mut enc = joint::Encoder::new(n, (n / 6).min(limit + 1), joint::Escapes::Golomb);
    let diff = |r: &[u8], b: &[u8], e: usize| {
        let new = u16::from_le_bytes([r[2 * e], r[2 * e + 1]]);
        let old = u16::from_le_bytes([b[2 * e], b[2 * e + 1]]);
        new.wrapping_sub(old)
    };
    let (rb, bb) = (raw.chunks_exact(128), base.chunks_exact(128));
    let (r_tail, b_tail) = (rb.remainder(), bb.remainder());
    for (wi, (r, b)) in rb.zip(bb).enumerate() {
        // 64 elements: eight blocks of eight changed-element bits.
        let mut bits = 0u64;
        for k in 0..8 {
            let m = block_mask::<2>(&r[16 * k..16 * k + 16], &b[16 * k..16 * k + 16]);
            bits |= u64::from(m) << (8 * k);
        }
        while bits != 0 {
            let e = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            enc.push(wi * 64 + e, diff(r, b, e));
        }
        if enc.changes() > limit {
            return None;
        }
    }
    let first = raw.len() / 128 * 64;
    for e in 0..r_tail.len() / 2 {
        if r_tail[2 * e..2 * e + 2] != b_tail[2 * e..2 * e + 2] {
            enc.push(first + e, diff(r_tail, b_tail, e));
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

/// Gap bytes, changed-element count and planes of a sparse delta.
pub type Sparse = (Vec<u8>, usize, Vec<Vec<u8>>);

/// Gap byte that skips [`GAP_SKIP`] unchanged elements without a change.
const GAP_SKIP: u8 = 255;

/// Fixed-width form of [`sparse_planes`], in windows small enough to stay
/// in cache: first the window's changed-element bits from integer compares
/// (no per-element branch: changes are scattered at random, so a branch
/// would mispredict about as often as it is taken), then its changed
/// elements gathered by walking the set bits.
fn sparse_w<const W: usize>(raw: &[u8], base: &[u8], limit: usize) -> Option<Sparse> {
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
fn block_mask<const W: usize>(r: &[u8], b: &[u8]) -> u8 {
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

/// Inflate `frame` into `buf`, which must come out exactly `len` bytes.
fn inflate_checked(
    frame: &[u8],
    buf: &mut Vec<u8>,
    len: usize,
    what: &str,
) -> std::result::Result<(), String> {
    inflate_into(frame, buf, len)
        .map_err(|e| format!("zstd decompression of the {what} failed: {e}"))?;
    if buf.len() != len {
        return Err(format!(
            "{what} decompressed to {} bytes, expected {len}",
            buf.len()
        ));
    }
    Ok(())
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
/// ([`high_exceptions`]) of a delta with `count` changes, checking its
/// count, that the gap bytes end at the count-th change they name, that
/// exactly that many values follow and that none is zero.
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

/// Byte buffers handed back by readers ([`recycle`]) for the next pieces
/// and payloads. Allocating and freeing a few MiB per piece makes the
/// allocator return the pages to the kernel and fault them in (zeroed)
/// again on the next use, which showed as about a tenth of restore time.
/// Small buffers never come from here, so a small object never holds a
/// piece-sized allocation.
static POOL: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());
/// Most buffers kept in [`POOL`].
const POOL_BUFFERS: usize = 16;
/// Smallest request served from [`POOL`] and smallest buffer kept.
const POOL_MIN: usize = 256 << 10;
/// Largest buffer kept in [`POOL`] (so it holds at most 128 MiB).
const POOL_BUFFER_MAX: usize = 2 * MAX_PIECE as usize;

/// A buffer of `len` bytes for the caller to overwrite completely, reusing
/// a recycled one if `len` is piece-sized and one is free. A recycled
/// buffer keeps its old bytes up to `len` (only what it lacks is zeroed):
/// zero-filling every payload and piece only to overwrite it took 4 % of a
/// restore. Callers never return bytes they did not write.
pub fn take_buffer(len: usize) -> Vec<u8> {
    let mut buf = pooled(len);
    buf.truncate(len);
    buf.resize(len, 0);
    buf
}

/// A buffer for about `len` bytes, holding stale bytes: a recycled one if
/// `len` is piece-sized and one is free, else an empty one.
fn pooled(len: usize) -> Vec<u8> {
    if len < POOL_MIN {
        return Vec::new();
    }
    POOL.lock()
        .ok()
        .and_then(|mut p| p.pop())
        .unwrap_or_default()
}

/// Give a buffer that is no longer needed back for [`take_buffer`].
pub fn recycle(buf: Vec<u8>) {
    if buf.capacity() < POOL_MIN || buf.capacity() > POOL_BUFFER_MAX {
        return;
    }
    if let Ok(mut p) = POOL.lock() {
        if p.len() < POOL_BUFFERS {
            p.push(buf);
        }
    }
}

thread_local! {
    /// One decompression context per thread: creating one per frame shows
    /// in restore profiles (a piece has up to 9 frames per chain link).
    static DCTX: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

thread_local! {
    /// Scratch buffers for the frames of the piece being decoded.
    static SCRATCH: std::cell::Cell<Vec<Vec<u8>>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Decompress one zstd frame into `buf` (replacing its contents), writing at
/// most `capacity` bytes.
pub fn inflate_into(frame: &[u8], buf: &mut Vec<u8>, capacity: usize) -> std::io::Result<()> {
    buf.clear();
    buf.reserve(capacity);
    DCTX.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(zstd::bulk::Decompressor::new()?);
        }
        slot.as_mut()
            .expect("created above")
            .decompress_to_buffer(frame, buf)
            .map(|_| ())
    })
}

/// Decompress one zstd frame of at most `capacity` bytes.
pub fn inflate_frame(frame: &[u8], capacity: usize) -> std::io::Result<Vec<u8>> {
    let mut out = pooled(capacity);
    inflate_into(frame, &mut out, capacity)?;
    Ok(out)
}

/// Split `raw` (XOR `base`) into `width` byte planes.
pub fn split_planes(raw: &[u8], base: Option<&[u8]>, width: usize) -> Vec<Vec<u8>> {
    match width {
        1 => vec![match base {
            Some(b) => raw.iter().zip(b).map(|(x, y)| x ^ y).collect(),
            None => raw.to_vec(),
        }],
        2 => split_w::<2>(raw, base),
        4 => split_w::<4>(raw, base),
        _ => split_w::<8>(raw, base),
    }
}

fn split_w<const W: usize>(raw: &[u8], base: Option<&[u8]>) -> Vec<Vec<u8>> {
    let n = raw.len() / W;
    let mut planes = vec![vec![0u8; n]; W];
    for (k, plane) in planes.iter_mut().enumerate() {
        match base {
            Some(b) => {
                for ((o, e), be) in plane
                    .iter_mut()
                    .zip(raw.chunks_exact(W))
                    .zip(b.chunks_exact(W))
                {
                    *o = e[k] ^ be[k];
                }
            }
            None => {
                for (o, e) in plane.iter_mut().zip(raw.chunks_exact(W)) {
                    *o = e[k];
                }
            }
        }
    }
    planes
}

/// Inverse of [`split_planes`].
pub fn join_planes(planes: &[Vec<u8>], base: Option<&[u8]>, width: usize) -> Vec<u8> {
    let n = planes.first().map_or(0, Vec::len);
    let mut out = take_buffer(n * width);
    match width {
        1 => out.copy_from_slice(&planes[0]),
        2 => join_w::<2>(planes, &mut out),
        4 => join_w::<4>(planes, &mut out),
        _ => join_w::<8>(planes, &mut out),
    }
    if let Some(b) = base {
        for (o, x) in out.iter_mut().zip(b) {
            *o ^= x;
        }
    }
    out
}

fn join_w<const W: usize>(planes: &[Vec<u8>], out: &mut [u8]) {
    if W == 2 {
        // Sixteen elements a step, so the compiler interleaves with vector
        // instructions; the tail element by element.
        let (p0, p1) = (&planes[0], &planes[1]);
        let mut outs = out.chunks_exact_mut(32);
        let mut lows = p0.chunks_exact(16);
        let mut highs = p1.chunks_exact(16);
        for ((o, a), b) in (&mut outs).zip(&mut lows).zip(&mut highs) {
            for k in 0..16 {
                o[2 * k] = a[k];
                o[2 * k + 1] = b[k];
            }
        }
        let tail = outs.into_remainder();
        for ((e, a), b) in tail
            .chunks_exact_mut(2)
            .zip(lows.remainder())
            .zip(highs.remainder())
        {
            e[0] = *a;
            e[1] = *b;
        }
        return;
    }
    for (k, plane) in planes.iter().enumerate().take(W) {
        for (e, p) in out.chunks_exact_mut(W).zip(plane) {
            e[k] = *p;
        }
    }
}
