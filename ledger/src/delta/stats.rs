//! Per-piece change statistics stored with a delta ([`FLAG_STATS`]): how
//! many elements changed and, for each floating-point reading of the
//! element width, the largest |new − old|, the sum of squared differences
//! and how many changed elements have a non-finite side (FORMAT.md
//! §12.3.3). The encoder has both versions in hand, so a diff between a
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
#[inline]
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

/// Which float readings a delta's statistics section holds (FORMAT.md
/// §12.3.3; the planes header's byte 3). The writer knows the piece's
/// safetensors dtype, so it computes the one reading a diff of that dtype
/// shows instead of every reading of the element width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatsReading {
    /// Every reading of the width ([`FloatKind::for_width`]): what deltas
    /// written before the byte existed hold, and what a writer that does
    /// not know the dtype writes.
    All,
    /// That one reading only (its width is the element width).
    One(FloatKind),
    /// The changed-element count only (an integer or 8-bit dtype).
    Count,
}

impl StatsReading {
    /// The reading for a safetensors dtype name: its float reading, or the
    /// count only for any other dtype.
    pub fn of_dtype(dtype: &str) -> StatsReading {
        FloatKind::of_dtype(dtype).map_or(StatsReading::Count, StatsReading::One)
    }

    /// The code stored in the planes header's byte 3.
    pub fn code(self) -> u8 {
        match self {
            StatsReading::All => 0,
            StatsReading::One(FloatKind::Bf16) => 1,
            StatsReading::One(FloatKind::F16) => 2,
            StatsReading::One(FloatKind::F32) => 3,
            StatsReading::One(FloatKind::F64) => 4,
            StatsReading::Count => 5,
        }
    }

    /// The reading of code `code` for `width`-byte elements; refused: an
    /// unknown code, or one reading of another width.
    pub fn from_code(code: u8, width: u8) -> std::result::Result<StatsReading, String> {
        let r = match code {
            0 => StatsReading::All,
            1 => StatsReading::One(FloatKind::Bf16),
            2 => StatsReading::One(FloatKind::F16),
            3 => StatsReading::One(FloatKind::F32),
            4 => StatsReading::One(FloatKind::F64),
            5 => StatsReading::Count,
            _ => {
                return Err(format!(
                    "unknown statistics reading {code} in a planes payload"
                ))
            }
        };
        if let StatsReading::One(k) = r {
            if k.width() != width {
                return Err(format!(
                    "statistics reading {code} does not fit {width}-byte elements"
                ));
            }
        }
        Ok(r)
    }

    /// This reading as an encoder writes it for `width`-byte elements: a
    /// single reading of another width holds nothing, so it is the count.
    pub fn for_width(self, width: u8) -> StatsReading {
        match self {
            StatsReading::One(k) if k.width() != width => StatsReading::Count,
            r => r,
        }
    }

    /// The readings of the section, in its order, for `width`-byte
    /// elements.
    pub fn kinds(self, width: u8) -> &'static [FloatKind] {
        match self.for_width(width) {
            StatsReading::All => FloatKind::for_width(width),
            StatsReading::One(FloatKind::Bf16) => &[FloatKind::Bf16],
            StatsReading::One(FloatKind::F16) => &[FloatKind::F16],
            StatsReading::One(FloatKind::F32) => &[FloatKind::F32],
            StatsReading::One(FloatKind::F64) => &[FloatKind::F64],
            StatsReading::Count => &[],
        }
    }
}

/// The statistics of one delta: changed elements and one [`FloatStats`]
/// per reading the section holds.
#[derive(Debug, Clone, PartialEq)]
pub struct DeltaStats {
    /// Elements whose bit pattern differs.
    pub changed: u64,
    /// The readings held (header byte 3).
    pub reading: StatsReading,
    /// Per float reading, in [`StatsReading::kinds`] order.
    pub floats: Vec<(FloatKind, FloatStats)>,
}

/// Bytes of the stats section for elements of `width` bytes holding
/// `reading`.
pub fn stats_len(width: u8, reading: StatsReading) -> usize {
    4 + 20 * reading.kinds(width).len()
}

impl DeltaStats {
    /// The statistics under reading `kind`, when the section holds it.
    pub fn float(&self, kind: FloatKind) -> Option<&FloatStats> {
        self.floats.iter().find(|(k, _)| *k == kind).map(|(_, f)| f)
    }

    /// Append the stats section (FORMAT.md §12.3.3).
    pub(super) fn encode_into(&self, out: &mut Vec<u8>) -> std::result::Result<(), String> {
        let changed = u32::try_from(self.changed).map_err(|_| "piece too large")?;
        out.extend_from_slice(&changed.to_le_bytes());
        for (_, f) in &self.floats {
            let n = u32::try_from(f.nonfinite).map_err(|_| "piece too large")?;
            out.extend_from_slice(&n.to_le_bytes());
            out.extend_from_slice(&f.max_abs.to_le_bytes());
            out.extend_from_slice(&f.sumsq.to_le_bytes());
        }
        Ok(())
    }

    /// Parse a stats section holding `reading` for `width`-byte elements
    /// at the start of `b`. Refused: a non-finite count above the changed
    /// count, a NaN or negative maximum or sum (infinity is possible: two
    /// finite f64 values can differ by more than the largest f64).
    pub(super) fn decode(
        b: &[u8],
        width: u8,
        reading: StatsReading,
    ) -> std::result::Result<DeltaStats, String> {
        let b = b
            .get(..stats_len(width, reading))
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
        for (k, &kind) in reading.kinds(width).iter().enumerate() {
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
            floats.push((kind, f));
        }
        Ok(DeltaStats {
            changed,
            reading,
            floats,
        })
    }
}

/// What [`Gather`] computes per change.
#[derive(Debug, Clone, Copy)]
enum Mode {
    /// The count only.
    Count,
    /// One reading.
    One(FloatKind),
    /// 16-bit elements, both readings (bf16, then half).
    Bf16AndHalf,
}

/// The statistics of a delta gathered change by change, in element order,
/// by whichever scan visits the changed elements (the encoder's own, so
/// the section costs no second pass over the piece and its base).
#[derive(Debug, Clone)]
pub(super) struct Gather {
    reading: StatsReading,
    width: u8,
    mode: Mode,
    changed: u64,
    first: FloatStats,
    second: FloatStats,
}

impl Gather {
    /// An empty gathering of `reading` for `width`-byte elements.
    pub(super) fn new(width: u8, reading: StatsReading) -> Gather {
        let reading = reading.for_width(width);
        let mode = match reading.kinds(width) {
            [] => Mode::Count,
            [k] => Mode::One(*k),
            _ => Mode::Bf16AndHalf,
        };
        Gather {
            reading,
            width,
            mode,
            changed: 0,
            first: FloatStats::default(),
            second: FloatStats::default(),
        }
    }

    /// Account one changed 16-bit element (bit patterns differ).
    #[inline(always)]
    pub(super) fn add2(&mut self, old: u16, new: u16) {
        self.changed += 1;
        match self.mode {
            Mode::Count => {}
            // The common case: a shift and a widening per side.
            Mode::One(FloatKind::Bf16) => self.first.add(bf16_to_f64(old), bf16_to_f64(new)),
            Mode::One(_) => self.first.add(f16_to_f64(old), f16_to_f64(new)),
            Mode::Bf16AndHalf => {
                self.first.add(bf16_to_f64(old), bf16_to_f64(new));
                self.second.add(f16_to_f64(old), f16_to_f64(new));
            }
        }
    }

    /// Account changed 16-bit elements `(old, new)`, in order: [`Gather::add2`]
    /// for each, with the reading chosen once and the sums in locals.
    pub(super) fn add_pairs(&mut self, pairs: &[(u16, u16)]) {
        self.changed += pairs.len() as u64;
        let (mut a, mut b) = (self.first, self.second);
        match self.mode {
            Mode::Count => {}
            Mode::One(FloatKind::Bf16) => {
                for &(o, n) in pairs {
                    a.add(bf16_to_f64(o), bf16_to_f64(n));
                }
            }
            Mode::One(_) => {
                for &(o, n) in pairs {
                    a.add(f16_to_f64(o), f16_to_f64(n));
                }
            }
            Mode::Bf16AndHalf => {
                for &(o, n) in pairs {
                    a.add(bf16_to_f64(o), bf16_to_f64(n));
                    b.add(f16_to_f64(o), f16_to_f64(n));
                }
            }
        }
        (self.first, self.second) = (a, b);
    }

    /// Account one changed element of any width (`old` and `new` hold
    /// exactly the element width).
    #[inline(always)]
    pub(super) fn add(&mut self, old: &[u8], new: &[u8]) {
        match (self.mode, old, new) {
            (Mode::Count, _, _) => self.changed += 1,
            (Mode::One(k), _, _) if k.width() != 2 => {
                self.changed += 1;
                self.first.add(k.decode(old), k.decode(new));
            }
            (_, &[o0, o1], &[n0, n1]) => {
                self.add2(u16::from_le_bytes([o0, o1]), u16::from_le_bytes([n0, n1]));
            }
            // A 16-bit mode is only chosen for 16-bit elements.
            _ => self.changed += 1,
        }
    }

    /// The gathered statistics.
    pub(super) fn finish(self) -> DeltaStats {
        let floats = self
            .reading
            .kinds(self.width)
            .iter()
            .zip([self.first, self.second])
            .map(|(k, f)| (*k, f))
            .collect();
        DeltaStats {
            changed: self.changed,
            reading: self.reading,
            floats,
        }
    }
}

/// The statistics of `new` against `old` (same length, whole `width`-byte
/// elements; `width` 1, 2, 4 or 8) holding `reading`: a scan of its own,
/// for the forms whose encoding does not visit each change (dense).
pub fn piece_stats(new: &[u8], old: &[u8], width: u8, reading: StatsReading) -> DeltaStats {
    let mut g = Gather::new(width, reading);
    match width {
        1 => scan_w::<1>(new, old, &mut g),
        2 => scan_w::<2>(new, old, &mut g),
        4 => scan_w::<4>(new, old, &mut g),
        _ => scan_w::<8>(new, old, &mut g),
    }
    g.finish()
}

fn scan_w<const W: usize>(new: &[u8], old: &[u8], g: &mut Gather) {
    let (rb, bb) = (new.chunks_exact(8 * W), old.chunks_exact(8 * W));
    let (r_tail, b_tail) = (rb.remainder(), bb.remainder());
    for (r8, b8) in rb.zip(bb) {
        // Eight elements a step; most are unchanged.
        let mut bits = block_mask::<W>(r8, b8);
        while bits != 0 {
            let e = bits.trailing_zeros() as usize * W;
            bits &= bits - 1;
            g.add(&b8[e..e + W], &r8[e..e + W]);
        }
    }
    for (r, b) in r_tail.chunks_exact(W).zip(b_tail.chunks_exact(W)) {
        if r != b {
            g.add(b, r);
        }
    }
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
        let want = FloatStats {
            nonfinite: 1,
            max_abs: 2.0,
            sumsq: 4.25,
        };
        for reading in [StatsReading::All, StatsReading::One(FloatKind::F32)] {
            let s = piece_stats(&new, &old, 4, reading);
            assert_eq!(s.changed, 3);
            assert_eq!(s.floats, vec![(FloatKind::F32, want)]);
            let mut buf = Vec::new();
            s.encode_into(&mut buf).expect("encodes");
            assert_eq!(buf.len(), stats_len(4, reading));
            assert_eq!(DeltaStats::decode(&buf, 4, reading).expect("decodes"), s);
        }
        // The count only; a reading of another width is the count too.
        for reading in [StatsReading::Count, StatsReading::One(FloatKind::Bf16)] {
            let s = piece_stats(&new, &old, 4, reading);
            assert_eq!((s.changed, s.floats.len()), (3, 0));
            assert_eq!(s.reading, StatsReading::Count);
        }
    }
}
