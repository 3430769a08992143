//! Per-piece change statistics stored with a delta ([`FLAG_STATS`]): how
//! many elements changed and, for each floating-point reading of the
//! element width, the largest |new − old|, the sum of squared differences
//! and how many changed elements have a non-finite side (FORMAT.md
//! §12.3.4). The encoder has both versions in hand, so a diff between a
//! piece and its base reads these numbers instead of decoding either side.
//!
//! The definitions here are the single source of truth: a full-decode diff
//! uses the same [`FloatKind::decode`] and [`FloatStats::add`] in the same
//! order (element order inside a piece, pieces in file order), so both give
//! bit-identical results.
//!
//! [`FLAG_STATS`]: super::FLAG_STATS

use super::encode::block_mask;

/// A floating-point reading of an element width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloatKind {
    /// bfloat16 (2 bytes).
    Bf16,
    /// IEEE 754 half precision (2 bytes).
    F16,
    /// IEEE 754 single precision (4 bytes).
    F32,
    /// IEEE 754 double precision (8 bytes).
    F64,
}

impl FloatKind {
    /// The readings stored for elements of `width` bytes, in the order of
    /// the stats section.
    pub fn for_width(width: u8) -> &'static [FloatKind] {
        match width {
            2 => &[FloatKind::Bf16, FloatKind::F16],
            4 => &[FloatKind::F32],
            8 => &[FloatKind::F64],
            _ => &[],
        }
    }

    /// The reading of a safetensors dtype name, if it is a float one.
    pub fn of_dtype(dtype: &str) -> Option<FloatKind> {
        match dtype {
            "BF16" => Some(FloatKind::Bf16),
            "F16" => Some(FloatKind::F16),
            "F32" => Some(FloatKind::F32),
            "F64" => Some(FloatKind::F64),
            _ => None,
        }
    }

    /// Element width in bytes.
    pub fn width(self) -> u8 {
        match self {
            FloatKind::Bf16 | FloatKind::F16 => 2,
            FloatKind::F32 => 4,
            FloatKind::F64 => 8,
        }
    }

    /// Position of this reading among [`FloatKind::for_width`] of its width.
    pub fn slot(self) -> usize {
        usize::from(self == FloatKind::F16)
    }

    /// The value of one little-endian element (`e` holds exactly
    /// [`FloatKind::width`] bytes).
    #[inline]
    pub fn decode(self, e: &[u8]) -> f64 {
        match self {
            FloatKind::Bf16 => bf16_to_f64(u16::from_le_bytes([e[0], e[1]])),
            FloatKind::F16 => f16_to_f64(u16::from_le_bytes([e[0], e[1]])),
            FloatKind::F32 => f64::from(f32::from_le_bytes([e[0], e[1], e[2], e[3]])),
            FloatKind::F64 => f64::from_le_bytes([e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]]),
        }
    }
}

/// Decode an IEEE 754 half-precision value (exactly: every half is an
/// f64; NaN payloads are not kept).
#[inline]
pub fn f16_to_f64(bits: u16) -> f64 {
    let sign = u64::from(bits >> 15) << 63;
    let exp = u64::from((bits >> 10) & 0x1f);
    let mant = u64::from(bits & 0x3ff);
    match exp {
        // Subnormal (or zero): mant × 2^-24, a product by a power of two.
        0 => {
            let v = mant as f64 * f64::from_bits((1023 - 24) << 52);
            f64::from_bits(v.to_bits() | sign)
        }
        0x1f if mant == 0 => f64::from_bits(sign | f64::INFINITY.to_bits()),
        0x1f => f64::NAN,
        // Normal: rebias the exponent, widen the mantissa.
        e => f64::from_bits(sign | ((e + 1023 - 15) << 52) | (mant << 42)),
    }
}

/// Decode a bfloat16 value.
pub fn bf16_to_f64(bits: u16) -> f64 {
    f64::from(f32::from_bits(u32::from(bits) << 16))
}

/// Statistics of the changed elements of a piece under one float reading.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FloatStats {
    /// Changed elements with a NaN or infinite side.
    pub nonfinite: u64,
    /// Largest |new − old| over changed elements with both sides finite
    /// (0 when there is none).
    pub max_abs: f64,
    /// Σ (new − old)² over the same elements, summed in element order.
    pub sumsq: f64,
}

impl FloatStats {
    /// Account one changed element (bit patterns differ).
    #[inline]
    pub fn add(&mut self, old: f64, new: f64) {
        if old.is_finite() && new.is_finite() {
            let delta = (new - old).abs();
            if delta > self.max_abs {
                self.max_abs = delta;
            }
            self.sumsq += delta * delta;
        } else {
            self.nonfinite += 1;
        }
    }

    /// Fold the statistics of the next piece into these (a tensor's are
    /// its pieces' folded in file order).
    pub fn merge(&mut self, next: &FloatStats) {
        self.nonfinite += next.nonfinite;
        if next.max_abs > self.max_abs {
            self.max_abs = next.max_abs;
        }
        self.sumsq += next.sumsq;
    }
}

/// The statistics of one delta: changed elements and one [`FloatStats`]
/// per reading of [`FloatKind::for_width`] of its width.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeltaStats {
    /// Elements whose bit pattern differs.
    pub changed: u64,
    /// Per float reading, in [`FloatKind::for_width`] order.
    pub floats: Vec<FloatStats>,
}

/// Bytes of the stats section for elements of `width` bytes.
pub fn stats_len(width: u8) -> usize {
    4 + 20 * FloatKind::for_width(width).len()
}

impl DeltaStats {
    /// Append the stats section (FORMAT.md §12.3.4).
    pub(super) fn encode_into(&self, out: &mut Vec<u8>) -> std::result::Result<(), String> {
        let changed = u32::try_from(self.changed).map_err(|_| "piece too large")?;
        out.extend_from_slice(&changed.to_le_bytes());
        for f in &self.floats {
            let n = u32::try_from(f.nonfinite).map_err(|_| "piece too large")?;
            out.extend_from_slice(&n.to_le_bytes());
            out.extend_from_slice(&f.max_abs.to_le_bytes());
            out.extend_from_slice(&f.sumsq.to_le_bytes());
        }
        Ok(())
    }

    /// Parse a stats section for `width`-byte elements at the start of
    /// `b`. Refused: a non-finite count above the changed count, a NaN or
    /// negative maximum or sum (infinity is possible: two finite f64 values
    /// can differ by more than the largest f64).
    pub(super) fn decode(b: &[u8], width: u8) -> std::result::Result<DeltaStats, String> {
        let b = b
            .get(..stats_len(width))
            .ok_or("planes payload truncated in its statistics")?;
        let u32_at =
            |at: usize| u64::from(u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]));
        let f64_at = |at: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[at..at + 8]);
            f64::from_le_bytes(x)
        };
        let changed = u32_at(0);
        let mut floats = Vec::new();
        for k in 0..FloatKind::for_width(width).len() {
            let at = 4 + 20 * k;
            let f = FloatStats {
                nonfinite: u32_at(at),
                max_abs: f64_at(at + 4),
                sumsq: f64_at(at + 12),
            };
            // NaN is neither negative nor non-negative: refused too.
            let in_range = |x: f64| x.is_sign_positive() && !x.is_nan();
            if f.nonfinite > changed || !in_range(f.max_abs) || !in_range(f.sumsq) {
                return Err("planes payload statistics out of range".into());
            }
            floats.push(f);
        }
        Ok(DeltaStats { changed, floats })
    }
}

/// The statistics of `new` against `old` (same length, whole `width`-byte
/// elements; `width` 1, 2, 4 or 8).
pub fn piece_stats(new: &[u8], old: &[u8], width: u8) -> DeltaStats {
    match width {
        1 => stats_w::<1>(new, old),
        2 => stats_w2(new, old),
        4 => stats_w::<4>(new, old),
        _ => stats_w::<8>(new, old),
    }
}

/// [`stats_w`] for 16-bit elements (bf16 and half readings), the common
/// case, with the readings unrolled: the generic loop cost about twice the
/// encoding of the delta itself.
fn stats_w2(new: &[u8], old: &[u8]) -> DeltaStats {
    let (mut bf, mut half) = (FloatStats::default(), FloatStats::default());
    let mut changed = 0u64;
    let mut one = |o: u16, n: u16| {
        changed += 1;
        bf.add(bf16_to_f64(o), bf16_to_f64(n));
        half.add(f16_to_f64(o), f16_to_f64(n));
    };
    let (rb, bb) = (new.chunks_exact(16), old.chunks_exact(16));
    let (r_tail, b_tail) = (rb.remainder(), bb.remainder());
    for (r8, b8) in rb.zip(bb) {
        let mut bits = block_mask::<2>(r8, b8);
        while bits != 0 {
            let e = 2 * bits.trailing_zeros() as usize;
            bits &= bits - 1;
            one(
                u16::from_le_bytes([b8[e], b8[e + 1]]),
                u16::from_le_bytes([r8[e], r8[e + 1]]),
            );
        }
    }
    for (r, b) in r_tail.chunks_exact(2).zip(b_tail.chunks_exact(2)) {
        if r != b {
            one(
                u16::from_le_bytes([b[0], b[1]]),
                u16::from_le_bytes([r[0], r[1]]),
            );
        }
    }
    DeltaStats {
        changed,
        floats: vec![bf, half],
    }
}

fn stats_w<const W: usize>(new: &[u8], old: &[u8]) -> DeltaStats {
    let kinds = FloatKind::for_width(W as u8);
    let mut s = DeltaStats {
        changed: 0,
        floats: vec![FloatStats::default(); kinds.len()],
    };
    let mut one = |r: &[u8], b: &[u8]| {
        s.changed += 1;
        for (f, k) in s.floats.iter_mut().zip(kinds) {
            f.add(k.decode(b), k.decode(r));
        }
    };
    let (rb, bb) = (new.chunks_exact(8 * W), old.chunks_exact(8 * W));
    let (r_tail, b_tail) = (rb.remainder(), bb.remainder());
    for (r8, b8) in rb.zip(bb) {
        // Eight elements a step; most are unchanged.
        let mut bits = block_mask::<W>(r8, b8);
        while bits != 0 {
            let e = bits.trailing_zeros() as usize * W;
            bits &= bits - 1;
            one(&r8[e..e + W], &b8[e..e + W]);
        }
    }
    for (r, b) in r_tail.chunks_exact(W).zip(b_tail.chunks_exact(W)) {
        if r != b {
            one(r, b);
        }
    }
    s
}

/// The statistics a stored delta record carries, read by
/// [`Ledger::delta_record_stats`](crate::Ledger::delta_record_stats).
#[derive(Debug, Clone, PartialEq)]
pub struct RecordStats {
    /// The record's delta base.
    pub base: crate::ObjectId,
    /// Element width of the piece.
    pub width: u8,
    /// Its raw length.
    pub raw_len: u64,
    /// The stored statistics.
    pub stats: DeltaStats,
}

impl crate::Ledger {
    /// The change statistics stored with object `id`'s record, when it is
    /// a planes delta written with them ([`super::FLAG_STATS`]); `None` for
    /// any other object (plain record, chunked file, not stored here,
    /// delta without statistics). The record is read and its header and
    /// payload checksum verified (damage is an error, never numbers shown),
    /// but nothing is decompressed: a delta is about a twentieth of its
    /// piece. The numbers are for display, never used to decode.
    pub fn delta_record_stats(&self, id: &crate::ObjectId) -> crate::Result<Option<RecordStats>> {
        let Some(row) = self.locate(id)? else {
            return Ok(None);
        };
        let crate::Location::Delta {
            pack_id,
            offset,
            stored_len,
            base,
        } = row.location
        else {
            return Ok(None);
        };
        let (name, src) = self.pack_file(pack_id, id)?;
        let file = src.file(&name, id)?;
        let e = crate::pack::Expect {
            id: *id,
            kind: row.kind,
            offset,
            raw_len: row.raw_len,
            stored_len,
        };
        let (h, payload) = crate::pack::read_payload(&file, &name, &e, true)?;
        let corrupt = |reason: String| crate::pack::corrupt_at(&name, &e, reason);
        let out = if h.compression == crate::pack::COMPRESSION_PLANES {
            let (ph, _) = super::PlanesHeader::decode_prefix(&payload).map_err(corrupt)?;
            if ph.base != Some(base) {
                return Err(corrupt(
                    "delta base in the record differs from the catalog's".into(),
                ));
            }
            ph.stats.map(|stats| RecordStats {
                base,
                width: ph.width,
                raw_len: row.raw_len,
                stats,
            })
        } else {
            None
        };
        super::recycle(payload);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The half-precision definition, term by term.
    fn f16_reference(bits: u16) -> f64 {
        let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
        let exp = (bits >> 10) & 0x1f;
        let mant = f64::from(bits & 0x3ff);
        match exp {
            0 => sign * mant * 2f64.powi(-24),
            0x1f if mant == 0.0 => sign * f64::INFINITY,
            0x1f => f64::NAN,
            e => sign * (1.0 + mant / 1024.0) * 2f64.powi(i32::from(e) - 15),
        }
    }

    #[test]
    fn every_half_decodes_as_its_definition() {
        for bits in 0..=u16::MAX {
            let (got, want) = (f16_to_f64(bits), f16_reference(bits));
            if want.is_nan() {
                assert!(got.is_nan(), "{bits:#06x}");
            } else {
                assert_eq!(got.to_bits(), want.to_bits(), "{bits:#06x}");
            }
        }
    }

    #[test]
    fn stats_of_a_few_changes() {
        let old: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let mut new = old.clone();
        new[4..8].copy_from_slice(&2.5f32.to_le_bytes());
        new[32..36].copy_from_slice(&f32::INFINITY.to_le_bytes());
        new[0..4].copy_from_slice(&(-1.0f32).to_le_bytes());
        let s = piece_stats(&new, &old, 4);
        assert_eq!(s.changed, 3);
        assert_eq!(
            s.floats,
            vec![FloatStats {
                nonfinite: 1,
                max_abs: 2.0,
                sumsq: 4.25,
            }]
        );
        let mut buf = Vec::new();
        s.encode_into(&mut buf).expect("encodes");
        assert_eq!(buf.len(), stats_len(4));
        assert_eq!(DeltaStats::decode(&buf, 4).expect("decodes"), s);
    }
}
