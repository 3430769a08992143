//! Per-tensor comparison of two safetensors files, streamed tensor by
//! tensor in bounded memory.
//!
//! The header of each file is parsed with the `safetensors` crate
//! ([`safetensors::tensor::Metadata`], which validates offsets and sizes);
//! tensor data is then read from the two sources a window of elements at a
//! time, so memory use is independent of the tensor and file sizes.
//!
//! Element semantics:
//! - an element is *changed* when its bit pattern differs (so `NaN → NaN`
//!   with the same payload is unchanged, and `+0.0 → -0.0` is changed with a
//!   delta of zero);
//! - F32, F64, F16 and BF16 are decoded; `max_abs_delta` and `l2_delta` are
//!   computed in f64 over the changed elements whose two values are both
//!   finite; changed elements with a non-finite side are counted in
//!   `nonfinite_changed` and left out of the two norms;
//! - every other dtype is compared by bytes only: the counts are filled in,
//!   the norms are `None` (sub-byte dtypes such as F4 count bytes, not
//!   elements).

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};

use bat_ledger::delta::{FloatKind, FloatStats, MAX_PIECE};
use safetensors::tensor::{Metadata, TensorInfo};
use safetensors::Dtype;
use serde::Serialize;

/// Largest header accepted (the safetensors crate's own limit).
pub(super) const MAX_HEADER: u64 = 100_000_000;

/// Elements compared per read.
const WINDOW_ELEMENTS: usize = 1 << 16;

/// Errors reading a safetensors file.
#[derive(Debug, thiserror::Error)]
pub enum TensorError {
    /// Reading the bytes failed.
    #[error("cannot read {side} safetensors file: {source}")]
    Io {
        /// `a` or `b`.
        side: &'static str,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not a valid safetensors file.
    #[error("{side} is not a valid safetensors file: {reason}")]
    Invalid {
        /// `a` or `b`.
        side: &'static str,
        /// What is wrong.
        reason: String,
    },
}

impl bat_ledger::Diagnostic for TensorError {
    fn kind(&self) -> bat_ledger::ErrorKind {
        bat_ledger::ErrorKind::User
    }
}

/// How one tensor differs between the two files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TensorStatus {
    /// Same dtype and shape, no element changed.
    Unchanged,
    /// Same dtype and shape, some elements changed.
    Changed,
    /// Only in the second file.
    Added,
    /// Only in the first file.
    Removed,
    /// Same dtype, different shape: not compared element-wise.
    ShapeChanged,
    /// Different dtype: not compared element-wise.
    DtypeChanged,
}

/// How the elements were compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Comparison {
    /// Decoded as floating point (F32, F64, F16, BF16).
    Numeric,
    /// Bit patterns only.
    Bytes,
    /// Not compared (added, removed, shape or dtype change).
    None,
}

/// The comparison of one tensor.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TensorDelta {
    /// Tensor name.
    pub name: String,
    /// Outcome.
    pub status: TensorStatus,
    /// Dtype in the first file.
    pub dtype_a: Option<String>,
    /// Dtype in the second file.
    pub dtype_b: Option<String>,
    /// Shape in the first file.
    pub shape_a: Option<Vec<usize>>,
    /// Shape in the second file.
    pub shape_b: Option<Vec<usize>>,
    /// How elements were compared.
    pub compared: Comparison,
    /// Elements compared (bytes for sub-byte dtypes).
    pub elements: u64,
    /// Elements whose bit pattern differs.
    pub changed_elements: u64,
    /// `changed_elements / elements` (`None` when nothing was compared;
    /// 0 for an empty tensor).
    pub changed_fraction: Option<f64>,
    /// Largest |b − a| over changed elements with both sides finite.
    pub max_abs_delta: Option<f64>,
    /// sqrt(Σ (b − a)²) over changed elements with both sides finite.
    pub l2_delta: Option<f64>,
    /// Changed elements where a side is NaN or infinite.
    pub nonfinite_changed: u64,
}

/// A parsed safetensors header: tensors by name and where data starts.
pub(super) struct Header {
    pub(super) tensors: BTreeMap<String, TensorInfo>,
    pub(super) data_start: u64,
}

pub(super) fn read_header<R: Read + Seek>(
    r: &mut R,
    len: u64,
    side: &'static str,
) -> Result<Header, TensorError> {
    let io = |source| TensorError::Io { side, source };
    let bad = |reason: String| TensorError::Invalid { side, reason };
    if len < 8 {
        return Err(bad("shorter than the 8-byte header length".into()));
    }
    r.seek(SeekFrom::Start(0)).map_err(io)?;
    let mut n8 = [0u8; 8];
    r.read_exact(&mut n8).map_err(io)?;
    let n = u64::from_le_bytes(n8);
    if n > MAX_HEADER || n > len - 8 {
        return Err(bad(format!("header length {n} is out of range")));
    }
    let n_usize = usize::try_from(n).map_err(|_| bad("header too large".into()))?;
    let mut head = vec![0u8; n_usize];
    r.read_exact(&mut head).map_err(io)?;
    let meta: Metadata = serde_json::from_slice(&head).map_err(|e| bad(e.to_string()))?;
    let data_start = 8 + n;
    let data_len = meta.data_len() as u64;
    if data_start + data_len != len {
        return Err(bad(format!(
            "header describes {data_len} data bytes but the file has {}",
            len - data_start
        )));
    }
    let tensors = meta
        .tensors()
        .into_iter()
        .map(|(k, v)| (k, v.clone()))
        .collect();
    Ok(Header {
        tensors,
        data_start,
    })
}

pub(super) fn dtype_name(d: Dtype) -> String {
    format!("{d:?}")
}

pub use bat_ledger::delta::{bf16_to_f64, f16_to_f64};

/// The float reading of the numeric dtypes (F32, F64, F16, BF16).
pub(super) fn float_kind(d: Dtype) -> Option<FloatKind> {
    match d {
        Dtype::F32 => Some(FloatKind::F32),
        Dtype::F64 => Some(FloatKind::F64),
        Dtype::F16 => Some(FloatKind::F16),
        Dtype::BF16 => Some(FloatKind::Bf16),
        _ => None,
    }
}

/// Bytes per compared unit of a dtype (1 for sub-byte dtypes).
pub(super) fn unit_of(d: Dtype) -> usize {
    let bits = d.bitsize();
    if bits % 8 == 0 {
        bits / 8
    } else {
        1
    }
}

/// Running statistics of one tensor. The norms are summed per ledger piece
/// (runs of [`MAX_PIECE`] bytes from the tensor's start) and the pieces'
/// sums folded in order, exactly as the statistics stored with deltas are
/// ([`bat_ledger::delta::FloatStats`]), so a diff read from deltas equals
/// this one bit for bit.
pub(super) struct Acc {
    pub(super) elements: u64,
    pub(super) changed: u64,
    pub(super) total: FloatStats,
    piece: FloatStats,
    piece_left: u64,
    piece_elems: u64,
}

impl Acc {
    pub(super) fn new(unit: usize) -> Acc {
        let piece_elems = (MAX_PIECE / unit as u64).max(1);
        Acc {
            elements: 0,
            changed: 0,
            total: FloatStats::default(),
            piece: FloatStats::default(),
            piece_left: piece_elems,
            piece_elems,
        }
    }

    /// Compare a window of elements (starting at a unit boundary).
    pub(super) fn add_window(&mut self, a: &[u8], b: &[u8], unit: usize, k: Option<FloatKind>) {
        for (x, y) in a.chunks_exact(unit).zip(b.chunks_exact(unit)) {
            self.elements += 1;
            if x != y {
                self.changed += 1;
                if let Some(k) = k {
                    self.piece.add(k.decode(x), k.decode(y));
                }
            }
            self.piece_left -= 1;
            if self.piece_left == 0 {
                self.end_piece();
            }
        }
    }

    /// Account one whole piece from its stored statistics (at a piece
    /// boundary).
    pub(super) fn add_piece(&mut self, elements: u64, changed: u64, f: Option<&FloatStats>) {
        self.elements += elements;
        self.changed += changed;
        if let Some(f) = f {
            self.total.merge(f);
        }
    }

    fn end_piece(&mut self) {
        self.total.merge(&self.piece);
        self.piece = FloatStats::default();
        self.piece_left = self.piece_elems;
    }

    /// Fold the last (partial) piece.
    pub(super) fn finish(mut self) -> Acc {
        if self.piece_left != self.piece_elems {
            self.end_piece();
        }
        self
    }

    /// Fill `d`'s counts and norms (same dtype and shape on both sides).
    pub(super) fn fill(&self, d: &mut TensorDelta, numeric: bool) {
        d.compared = if numeric {
            Comparison::Numeric
        } else {
            Comparison::Bytes
        };
        d.status = if self.changed == 0 {
            TensorStatus::Unchanged
        } else {
            TensorStatus::Changed
        };
        d.elements = self.elements;
        d.changed_elements = self.changed;
        d.changed_fraction = Some(if self.elements == 0 {
            0.0
        } else {
            self.changed as f64 / self.elements as f64
        });
        if numeric {
            d.max_abs_delta = Some(self.total.max_abs);
            d.l2_delta = Some(self.total.sumsq.sqrt());
            d.nonfinite_changed = self.total.nonfinite;
        }
    }
}

/// Compare two tensors of the same dtype and shape, streaming.
#[allow(clippy::too_many_arguments)]
fn compare_data<A: Read + Seek, B: Read + Seek>(
    a: &mut A,
    a_off: u64,
    b: &mut B,
    b_off: u64,
    nbytes: u64,
    dtype: Dtype,
) -> Result<Acc, TensorError> {
    let unit = unit_of(dtype);
    let kind = float_kind(dtype);
    a.seek(SeekFrom::Start(a_off))
        .map_err(|source| TensorError::Io { side: "a", source })?;
    b.seek(SeekFrom::Start(b_off))
        .map_err(|source| TensorError::Io { side: "b", source })?;
    let window = (WINDOW_ELEMENTS * unit) as u64;
    let mut ba = Vec::new();
    let mut bb = Vec::new();
    let mut acc = Acc::new(unit);
    let mut left = nbytes;
    while left > 0 {
        let take = left.min(window) as usize;
        ba.resize(take, 0);
        bb.resize(take, 0);
        a.read_exact(&mut ba)
            .map_err(|source| TensorError::Io { side: "a", source })?;
        b.read_exact(&mut bb)
            .map_err(|source| TensorError::Io { side: "b", source })?;
        acc.add_window(&ba, &bb, unit, kind);
        left -= take as u64;
    }
    Ok(acc.finish())
}

pub(super) fn one_sided(name: &str, info: &TensorInfo, status: TensorStatus) -> TensorDelta {
    let (dtype_a, dtype_b, shape_a, shape_b) = if status == TensorStatus::Added {
        (
            None,
            Some(dtype_name(info.dtype)),
            None,
            Some(info.shape.clone()),
        )
    } else {
        (
            Some(dtype_name(info.dtype)),
            None,
            Some(info.shape.clone()),
            None,
        )
    };
    TensorDelta {
        name: name.to_string(),
        status,
        dtype_a,
        dtype_b,
        shape_a,
        shape_b,
        compared: Comparison::None,
        elements: 0,
        changed_elements: 0,
        changed_fraction: None,
        max_abs_delta: None,
        l2_delta: None,
        nonfinite_changed: 0,
    }
}

/// Compare every tensor of two safetensors files given as seekable readers
/// with their lengths. Tensors are returned in name order; each tensor's
/// data is streamed, so only two windows of bytes are in memory at once.
pub fn diff_safetensors<A: Read + Seek, B: Read + Seek>(
    a: &mut A,
    a_len: u64,
    b: &mut B,
    b_len: u64,
) -> Result<Vec<TensorDelta>, TensorError> {
    let ha = read_header(a, a_len, "a")?;
    let hb = read_header(b, b_len, "b")?;
    let mut names: Vec<&String> = ha.tensors.keys().chain(hb.tensors.keys()).collect();
    names.sort();
    names.dedup();
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let d = match (ha.tensors.get(name), hb.tensors.get(name)) {
            (Some(ia), None) => one_sided(name, ia, TensorStatus::Removed),
            (None, Some(ib)) => one_sided(name, ib, TensorStatus::Added),
            (None, None) => continue,
            (Some(ia), Some(ib)) => {
                let mut d = one_sided(name, ia, TensorStatus::Removed);
                d.dtype_b = Some(dtype_name(ib.dtype));
                d.shape_b = Some(ib.shape.clone());
                if ia.dtype != ib.dtype {
                    d.status = TensorStatus::DtypeChanged;
                } else if ia.shape != ib.shape {
                    d.status = TensorStatus::ShapeChanged;
                } else {
                    let nbytes = (ia.data_offsets.1 - ia.data_offsets.0) as u64;
                    let acc = compare_data(
                        a,
                        ha.data_start + ia.data_offsets.0 as u64,
                        b,
                        hb.data_start + ib.data_offsets.0 as u64,
                        nbytes,
                        ia.dtype,
                    )?;
                    acc.fill(&mut d, float_kind(ia.dtype).is_some());
                }
                d
            }
        };
        out.push(d);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use safetensors::tensor::TensorView;
    use std::io::Cursor;

    fn file(tensors: &[(&str, Dtype, Vec<usize>, Vec<u8>)]) -> Vec<u8> {
        let views: Vec<(String, TensorView<'_>)> = tensors
            .iter()
            .map(|(n, d, s, b)| {
                (
                    n.to_string(),
                    TensorView::new(*d, s.clone(), b).expect("valid view"),
                )
            })
            .collect();
        safetensors::serialize(views, None).expect("serialize")
    }

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn run(a: &[u8], b: &[u8]) -> Vec<TensorDelta> {
        diff_safetensors(
            &mut Cursor::new(a),
            a.len() as u64,
            &mut Cursor::new(b),
            b.len() as u64,
        )
        .expect("diff")
    }

    #[test]
    fn f32_three_of_twelve() {
        let base: Vec<f32> = (0..12).map(|i| i as f32).collect();
        let mut new = base.clone();
        new[1] += 1.0;
        new[5] -= 2.0;
        new[11] += 0.5;
        let a = file(&[("w", Dtype::F32, vec![3, 4], f32s(&base))]);
        let b = file(&[("w", Dtype::F32, vec![3, 4], f32s(&new))]);
        let d = run(&a, &b);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].status, TensorStatus::Changed);
        assert_eq!(d[0].elements, 12);
        assert_eq!(d[0].changed_elements, 3);
        assert_eq!(d[0].changed_fraction, Some(0.25));
        assert_eq!(d[0].max_abs_delta, Some(2.0));
        assert_eq!(d[0].l2_delta, Some(5.25f64.sqrt()));
        assert_eq!(d[0].compared, Comparison::Numeric);
    }

    #[test]
    fn half_decoding() {
        assert_eq!(f16_to_f64(0x3c00), 1.0);
        assert_eq!(f16_to_f64(0xc000), -2.0);
        assert_eq!(f16_to_f64(0x3555), 0.333251953125);
        assert_eq!(f16_to_f64(0x0001), 2f64.powi(-24));
        assert_eq!(f16_to_f64(0x7bff), 65504.0);
        assert_eq!(f16_to_f64(0x7c00), f64::INFINITY);
        assert!(f16_to_f64(0x7e00).is_nan());
        assert_eq!(bf16_to_f64(0x3f80), 1.0);
        assert_eq!(bf16_to_f64(0xc040), -3.0);
        assert_eq!(bf16_to_f64(0x3fc0), 1.5);
        assert_eq!(bf16_to_f64(0x7f80), f64::INFINITY);
        assert!(bf16_to_f64(0x7fc0).is_nan());
    }

    fn u16s(v: &[u16]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn bf16_and_f16_deltas() {
        // bf16: 1.0 -> 1.5 (Δ 0.5), -3.0 -> 1.0 (Δ 4), 2.0 unchanged.
        let a = file(&[
            ("b", Dtype::BF16, vec![3], u16s(&[0x3f80, 0xc040, 0x4000])),
            ("h", Dtype::F16, vec![2], u16s(&[0x3c00, 0x0001])),
        ]);
        let b = file(&[
            ("b", Dtype::BF16, vec![3], u16s(&[0x3fc0, 0x3f80, 0x4000])),
            // f16: 1.0 -> -2.0 (Δ 3), smallest subnormal unchanged.
            ("h", Dtype::F16, vec![2], u16s(&[0xc000, 0x0001])),
        ]);
        let d = run(&a, &b);
        assert_eq!(d[0].name, "b");
        assert_eq!(d[0].changed_elements, 2);
        assert_eq!(d[0].changed_fraction, Some(2.0 / 3.0));
        assert_eq!(d[0].max_abs_delta, Some(4.0));
        assert_eq!(d[0].l2_delta, Some(16.25f64.sqrt()));
        assert_eq!(d[1].name, "h");
        assert_eq!(d[1].changed_fraction, Some(0.5));
        assert_eq!(d[1].max_abs_delta, Some(3.0));
        assert_eq!(d[1].l2_delta, Some(3.0));
    }

    #[test]
    fn nan_handling() {
        let a = file(&[(
            "w",
            Dtype::F32,
            vec![4],
            f32s(&[f32::NAN, 1.0, 2.0, f32::INFINITY]),
        )]);
        let b = file(&[(
            "w",
            Dtype::F32,
            vec![4],
            f32s(&[f32::NAN, f32::NAN, 5.0, f32::INFINITY]),
        )]);
        let d = run(&a, &b);
        // NaN→NaN (same bits) and inf→inf are unchanged; 1→NaN is a
        // non-finite change outside the norms; 2→5 gives Δ 3.
        assert_eq!(d[0].changed_elements, 2);
        assert_eq!(d[0].nonfinite_changed, 1);
        assert_eq!(d[0].max_abs_delta, Some(3.0));
        assert_eq!(d[0].l2_delta, Some(3.0));
        assert_eq!(d[0].changed_fraction, Some(0.5));
    }

    #[test]
    fn f64_and_signed_zero() {
        let v = |x: &[f64]| x.iter().flat_map(|y| y.to_le_bytes()).collect::<Vec<u8>>();
        let a = file(&[("d", Dtype::F64, vec![2], v(&[0.0, 1.0]))]);
        let b = file(&[("d", Dtype::F64, vec![2], v(&[-0.0, 1.0]))]);
        let d = run(&a, &b);
        assert_eq!(d[0].status, TensorStatus::Changed);
        assert_eq!(d[0].changed_elements, 1);
        assert_eq!(d[0].max_abs_delta, Some(0.0));
    }

    #[test]
    fn shape_dtype_added_removed_and_bytes() {
        let a = file(&[
            ("gone", Dtype::F32, vec![1], f32s(&[1.0])),
            ("ints", Dtype::I32, vec![4], f32s(&[1.0, 2.0, 3.0, 4.0])),
            ("reshaped", Dtype::F32, vec![2, 2], f32s(&[1.0; 4])),
            ("retyped", Dtype::F32, vec![2], f32s(&[1.0; 2])),
            ("same", Dtype::F32, vec![2], f32s(&[7.0, 8.0])),
        ]);
        let b = file(&[
            ("ints", Dtype::I32, vec![4], f32s(&[1.0, 2.0, 3.0, 9.0])),
            ("new", Dtype::F16, vec![1], u16s(&[0x3c00])),
            ("reshaped", Dtype::F32, vec![4], f32s(&[1.0; 4])),
            ("retyped", Dtype::F64, vec![1], f32s(&[1.0; 2])),
            ("same", Dtype::F32, vec![2], f32s(&[7.0, 8.0])),
        ]);
        let d = run(&a, &b);
        let by: BTreeMap<&str, &TensorDelta> = d.iter().map(|x| (x.name.as_str(), x)).collect();
        assert_eq!(by["gone"].status, TensorStatus::Removed);
        assert_eq!(by["gone"].shape_a, Some(vec![1]));
        assert_eq!(by["new"].status, TensorStatus::Added);
        assert_eq!(by["new"].dtype_b.as_deref(), Some("F16"));
        assert_eq!(by["reshaped"].status, TensorStatus::ShapeChanged);
        assert_eq!(by["reshaped"].changed_fraction, None);
        assert_eq!(by["retyped"].status, TensorStatus::DtypeChanged);
        assert_eq!(by["same"].status, TensorStatus::Unchanged);
        assert_eq!(by["same"].changed_fraction, Some(0.0));
        assert_eq!(by["ints"].compared, Comparison::Bytes);
        assert_eq!(by["ints"].changed_fraction, Some(0.25));
        assert_eq!(by["ints"].max_abs_delta, None);
    }

    #[test]
    fn streams_across_windows() {
        let n = WINDOW_ELEMENTS * 2 + 3;
        let base = vec![0f32; n];
        let mut new = base.clone();
        new[0] = 1.0;
        new[WINDOW_ELEMENTS] = -1.0;
        new[n - 1] = 2.0;
        let a = file(&[("big", Dtype::F32, vec![n], f32s(&base))]);
        let b = file(&[("big", Dtype::F32, vec![n], f32s(&new))]);
        let d = run(&a, &b);
        assert_eq!(d[0].elements, n as u64);
        assert_eq!(d[0].changed_elements, 3);
        assert_eq!(d[0].max_abs_delta, Some(2.0));
        assert_eq!(d[0].l2_delta, Some(6f64.sqrt()));
    }

    #[test]
    fn rejects_truncated() {
        let a = file(&[("w", Dtype::F32, vec![2], f32s(&[1.0, 2.0]))]);
        let b = &a[..a.len() - 1];
        let e = diff_safetensors(
            &mut Cursor::new(&a),
            a.len() as u64,
            &mut Cursor::new(b),
            b.len() as u64,
        );
        assert!(matches!(e, Err(TensorError::Invalid { side: "b", .. })));
    }
}
