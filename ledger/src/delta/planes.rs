//! Byte planes: a run of `width`-byte elements transposed so that byte `k`
//! of every element lies together, and back.

use super::pool::take_buffer;

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
