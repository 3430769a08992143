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
//! every element together), each plane one zstd frame. See FORMAT.md §12.

pub mod safetensors;

use crate::id::ObjectId;

pub use self::safetensors::{parse_layout, pieces, Layout, Piece, PieceKey, TensorInfo};

/// Largest piece (chunk) a safetensors file is cut into.
pub const MAX_PIECE: u64 = 4 << 20;

/// Version byte of a planes payload.
pub const PLANES_VERSION: u8 = 1;
/// Flag bit: the payload is a delta against a base object.
pub const FLAG_BASE: u8 = 1;

/// A decoded planes payload header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanesHeader {
    /// Element width in bytes (1, 2, 4 or 8).
    pub width: u8,
    /// Base object, when the payload is a delta.
    pub base: Option<ObjectId>,
    /// Stored length of each plane's zstd frame.
    pub plane_lens: Vec<u32>,
}

impl PlanesHeader {
    /// Length of the encoded header.
    pub fn encoded_len(&self) -> usize {
        4 + if self.base.is_some() { 32 } else { 0 } + 4 * self.plane_lens.len()
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
        if flags & !FLAG_BASE != 0 || payload[3] != 0 {
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
        let mut plane_lens = Vec::with_capacity(width as usize);
        for _ in 0..width {
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
    let planes = split_planes(raw, base.map(|b| b.1), width);
    let mut out = vec![PLANES_VERSION, width as u8, u8::from(base.is_some()), 0];
    if let Some((id, _)) = base {
        out.extend_from_slice(id.as_bytes());
    }
    let table_at = out.len();
    out.resize(table_at + 4 * width, 0);
    for (k, p) in planes.iter().enumerate() {
        let before = out.len();
        let frame = comp.compress(p).map_err(|e| format!("zstd: {e}"))?;
        out.extend_from_slice(&frame);
        let n = u32::try_from(out.len() - before).map_err(|_| "plane too large".to_string())?;
        out[table_at + 4 * k..table_at + 4 * k + 4].copy_from_slice(&n.to_le_bytes());
    }
    Ok(out)
}

/// Decode a planes payload to `raw_len` bytes; `base` must be given (the
/// verified bytes of the header's base object) exactly when the payload is a
/// delta.
pub fn decode_planes(
    payload: &[u8],
    raw_len: u64,
    base: Option<&[u8]>,
) -> std::result::Result<Vec<u8>, String> {
    let h = PlanesHeader::decode(payload)?;
    let w = h.width as usize;
    if !raw_len.is_multiple_of(w as u64) {
        return Err(format!(
            "raw length {raw_len} is not a multiple of the element width {w}"
        ));
    }
    let plane_len = (raw_len / w as u64) as usize;
    match (&h.base, base) {
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
    let mut planes = Vec::with_capacity(w);
    for &l in &h.plane_lens {
        let frame = &payload[at..at + l as usize];
        at += l as usize;
        let p = zstd::bulk::decompress(frame, plane_len)
            .map_err(|e| format!("zstd decompression of a plane failed: {e}"))?;
        if p.len() != plane_len {
            return Err(format!(
                "plane decompressed to {} bytes, expected {plane_len}",
                p.len()
            ));
        }
        planes.push(p);
    }
    Ok(join_planes(&planes, base, w))
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
