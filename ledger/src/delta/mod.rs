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
//! at most half of the elements is stored *sparse*: a bit mask of the changed
//! elements plus the byte planes of the changed elements only, which is both
//! smaller (a fine-tuning step changes about one element in eight) and
//! cheaper to apply. See FORMAT.md §12.

pub mod safetensors;

use crate::id::ObjectId;

pub use self::safetensors::{parse_layout, pieces, Layout, Piece, PieceKey, TensorInfo};

/// Largest piece (chunk) a safetensors file is cut into.
pub const MAX_PIECE: u64 = 4 << 20;

/// Version byte of a planes payload.
pub const PLANES_VERSION: u8 = 1;
/// Flag bit: the payload is a delta against a base object.
pub const FLAG_BASE: u8 = 1;
/// Flag bit (only with [`FLAG_BASE`]): the delta is sparse (changed-element
/// mask plus the planes of the changed elements).
pub const FLAG_SPARSE: u8 = 2;

/// A decoded planes payload header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanesHeader {
    /// Element width in bytes (1, 2, 4 or 8).
    pub width: u8,
    /// Base object, when the payload is a delta.
    pub base: Option<ObjectId>,
    /// For a sparse delta, the number of changed elements.
    pub sparse_count: Option<u32>,
    /// Stored length of each zstd frame: the planes, preceded by the mask
    /// frame for a sparse delta.
    pub plane_lens: Vec<u32>,
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
        if flags & !(FLAG_BASE | FLAG_SPARSE) != 0
            || (flags & FLAG_SPARSE != 0 && flags & FLAG_BASE == 0)
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
        let frames = usize::from(width) + usize::from(sparse_count.is_some());
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
        })
    }
}

/// Encode `raw` (a whole number of `width`-byte elements) as a planes
/// payload, XOR-ed with `base` (same length) when given.
pub fn encode_planes(
    comp: &mut zstd::bulk::Compressor<'static>,
    raw: &[u8],
    width: usize,
    base: Option<(&ObjectId, &[u8])>,
) -> std::result::Result<Vec<u8>, String> {
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
    if let Some((id, b)) = base {
        let (mask, count, planes) = sparse_planes(raw, b, width);
        if count <= raw.len() / width / 2 {
            let mut out = vec![PLANES_VERSION, width as u8, FLAG_BASE | FLAG_SPARSE, 0];
            out.extend_from_slice(id.as_bytes());
            let count = u32::try_from(count).map_err(|_| "piece too large".to_string())?;
            out.extend_from_slice(&count.to_le_bytes());
            let frames: Vec<&[u8]> = std::iter::once(mask.as_slice())
                .chain(planes.iter().map(Vec::as_slice))
                .collect();
            append_frames(comp, &mut out, &frames)?;
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

/// The sparse form of `raw XOR base`: a bit mask of the elements that differ
/// (bit `i % 8` of byte `i / 8` for element `i`), their number, and the byte
/// planes of the XOR of those elements only, in element order.
pub fn sparse_planes(raw: &[u8], base: &[u8], width: usize) -> (Vec<u8>, usize, Vec<Vec<u8>>) {
    let n = raw.len() / width;
    let mut mask = vec![0u8; n.div_ceil(8)];
    let mut planes: Vec<Vec<u8>> = vec![Vec::with_capacity(n / 8 + 16); width];
    let mut count = 0usize;
    for (i, (e, b)) in raw
        .chunks_exact(width)
        .zip(base.chunks_exact(width))
        .enumerate()
    {
        if e != b {
            mask[i / 8] |= 1 << (i % 8);
            count += 1;
            for (k, plane) in planes.iter_mut().enumerate() {
                plane.push(e[k] ^ b[k]);
            }
        }
    }
    (mask, count, planes)
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
    let inflate = |frame: &[u8], buf: &mut Vec<u8>, len: usize, what: &str| {
        inflate_into(frame, buf, len)
            .map_err(|e| format!("zstd decompression of the {what} failed: {e}"))?;
        if buf.len() != len {
            return Err(format!(
                "{what} decompressed to {} bytes, expected {len}",
                buf.len()
            ));
        }
        Ok(())
    };
    if let Some(count) = h.sparse_count {
        let mut out = base.ok_or("delta payload decoded without its base")?;
        let count = count as usize;
        if count > n {
            return Err(format!("{count} changed elements in a piece of {n}"));
        }
        let (mask, planes) = bufs.split_first_mut().expect("sized to the frames");
        inflate(frames[0], mask, n.div_ceil(8), "mask")?;
        for (f, buf) in frames[1..].iter().zip(planes.iter_mut()) {
            inflate(f, buf, count, "plane")?;
        }
        let set: usize = mask.iter().map(|b| b.count_ones() as usize).sum();
        if set != count || (!n.is_multiple_of(8) && mask.last().is_some_and(|b| b >> (n % 8) != 0))
        {
            return Err("the changed-element mask does not match its count".into());
        }
        apply_sparse(&mut out, mask, &planes[..w], w);
        return Ok(out);
    }
    for (f, buf) in frames.iter().zip(bufs.iter_mut()) {
        inflate(f, buf, n, "plane")?;
    }
    let mut out = join_planes(&bufs[..w], None, w);
    if let Some(b) = base {
        for (o, x) in out.iter_mut().zip(&b) {
            *o ^= x;
        }
    }
    Ok(out)
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
    let mut out = Vec::new();
    inflate_into(frame, &mut out, capacity)?;
    Ok(out)
}

/// XOR the changed elements (mask bits, planes in element order) into `out`.
fn apply_sparse(out: &mut [u8], mask: &[u8], planes: &[Vec<u8>], w: usize) {
    match w {
        1 => apply_w::<1>(out, mask, planes),
        2 => apply_w::<2>(out, mask, planes),
        4 => apply_w::<4>(out, mask, planes),
        _ => apply_w::<8>(out, mask, planes),
    }
}

fn apply_w<const W: usize>(out: &mut [u8], mask: &[u8], planes: &[Vec<u8>]) {
    let planes: [&[u8]; W] = std::array::from_fn(|k| planes[k].as_slice());
    let mut j = 0usize;
    for (word_at, word) in mask.chunks(8).enumerate() {
        let mut le = [0u8; 8];
        le[..word.len()].copy_from_slice(word);
        let mut bits = u64::from_le_bytes(le);
        while bits != 0 {
            let i = word_at * 64 + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let e: &mut [u8; W] = (&mut out[i * W..i * W + W])
                .try_into()
                .expect("a whole element");
            for k in 0..W {
                e[k] ^= planes[k][j];
            }
            j += 1;
        }
    }
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
    let mut out = vec![0u8; n * width];
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
        for ((e, a), b) in out.chunks_exact_mut(2).zip(&planes[0]).zip(&planes[1]) {
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
