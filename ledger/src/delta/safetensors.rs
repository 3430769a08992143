//! A strict safetensors header parser and the piece layout derived from it.
//! Any inconsistency makes [`parse_layout`] return `None`: the file is then
//! stored with ordinary chunking (never an error, never a panic).

use std::collections::BTreeMap;

/// Largest JSON header accepted (the safetensors crate uses 100 MB too).
pub const MAX_HEADER: u64 = 100 << 20;

/// One tensor of a safetensors file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// Tensor name.
    pub name: String,
    /// dtype string as in the header.
    pub dtype: String,
    /// Element width in bytes.
    pub width: u8,
    /// Shape.
    pub shape: Vec<u64>,
    /// Absolute byte range in the file.
    pub start: u64,
    /// End (exclusive).
    pub end: u64,
}

/// The parsed structure of a safetensors file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// 8 + JSON header length: where the data section starts.
    pub data_start: u64,
    /// Tensors sorted by start offset.
    pub tensors: Vec<TensorInfo>,
}

/// Element width of a safetensors dtype; `None` for unknown or sub-byte ones.
pub fn dtype_width(dtype: &str) -> Option<u8> {
    Some(match dtype {
        "BOOL" | "U8" | "I8" | "F8_E5M2" | "F8_E4M3" | "F8_E8M0" => 1,
        "I16" | "U16" | "F16" | "BF16" => 2,
        "I32" | "U32" | "F32" => 4,
        "I64" | "U64" | "F64" => 8,
        _ => return None,
    })
}

/// Read the 8-byte header length of a file whose first bytes are `prefix`;
/// returns the JSON length if plausible for a file of `file_len` bytes.
pub fn header_len(prefix: &[u8], file_len: u64) -> Option<u64> {
    let b: [u8; 8] = prefix.get(0..8)?.try_into().ok()?;
    let n = u64::from_le_bytes(b);
    ((2..=MAX_HEADER).contains(&n) && n.checked_add(8)? <= file_len).then_some(n)
}

/// Parse a safetensors file's layout from its first `8 + n` bytes
/// (`head`), for a file of `file_len` bytes. Strict: offsets must lie in the
/// data section, tensors must not overlap, every byte range must equal the
/// shape's element count times the dtype width.
pub fn parse_layout(head: &[u8], file_len: u64) -> Option<Layout> {
    let n = header_len(head, file_len)?;
    let json = head.get(8..usize::try_from(8 + n).ok()?)?;
    let v: BTreeMap<String, serde_json::Value> = serde_json::from_slice(json).ok()?;
    let data_start = 8 + n;
    let data_len = file_len - data_start;
    let mut tensors = Vec::new();
    for (name, t) in v {
        if name == "__metadata__" {
            continue;
        }
        let o = t.as_object()?;
        let dtype = o.get("dtype")?.as_str()?.to_string();
        let width = dtype_width(&dtype)?;
        let shape: Vec<u64> = o
            .get("shape")?
            .as_array()?
            .iter()
            .map(|d| d.as_u64())
            .collect::<Option<_>>()?;
        let offs = o.get("data_offsets")?.as_array()?;
        if offs.len() != 2 {
            return None;
        }
        let (a, b) = (offs[0].as_u64()?, offs[1].as_u64()?);
        if a > b || b > data_len {
            return None;
        }
        let count = shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d))?;
        if count.checked_mul(u64::from(width))? != b - a {
            return None;
        }
        tensors.push(TensorInfo {
            name,
            dtype,
            width,
            shape,
            start: data_start + a,
            end: data_start + b,
        });
    }
    tensors.sort_by_key(|t| (t.start, t.end));
    let mut prev_end = data_start;
    for t in &tensors {
        if t.start < prev_end && t.start != t.end {
            return None; // overlapping tensors
        }
        prev_end = prev_end.max(t.end);
    }
    Some(Layout {
        data_start,
        tensors,
    })
}

/// Identity of a tensor piece: matched against the base file's pieces.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PieceKey {
    /// Tensor name.
    pub name: String,
    /// dtype.
    pub dtype: String,
    /// Shape.
    pub shape: Vec<u64>,
    /// Index of the piece inside the tensor.
    pub index: u32,
}

/// One piece of a file: a contiguous byte range stored as one chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    /// Start offset in the file.
    pub start: u64,
    /// Length (> 0).
    pub len: u64,
    /// Element width (1 for the header and gaps).
    pub width: u8,
    /// Tensor identity; `None` for the header and gap bytes.
    pub key: Option<PieceKey>,
}

/// Cut a file of `file_len` bytes with layout `l` into pieces of at most
/// `max` bytes covering it exactly, in file order.
pub fn pieces(l: &Layout, file_len: u64, max: u64) -> Vec<Piece> {
    let mut out = Vec::new();
    let plain = |out: &mut Vec<Piece>, mut a: u64, b: u64| {
        while a < b {
            let len = (b - a).min(max);
            out.push(Piece {
                start: a,
                len,
                width: 1,
                key: None,
            });
            a += len;
        }
    };
    let mut at = 0u64;
    plain(&mut out, 0, l.data_start);
    at = at.max(l.data_start);
    for t in &l.tensors {
        if t.start == t.end {
            continue;
        }
        plain(&mut out, at, t.start);
        let w = u64::from(t.width);
        let step = (max / w).max(1) * w;
        let mut a = t.start;
        let mut index = 0u32;
        while a < t.end {
            let len = (t.end - a).min(step);
            out.push(Piece {
                start: a,
                len,
                width: t.width,
                key: Some(PieceKey {
                    name: t.name.clone(),
                    dtype: t.dtype.clone(),
                    shape: t.shape.clone(),
                    index,
                }),
            });
            a += len;
            index += 1;
        }
        at = t.end;
    }
    plain(&mut out, at, file_len);
    out
}
