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
//!
//! The module is laid out along its jobs: `header` (the payload header and
//! its flags), `encode` and `decode` (the two directions), `planes` (the
//! byte-plane transposition both use), `frame` (zstd frames), `pool`
//! (reused piece-sized buffers), `stats` (the change statistics stored
//! with a delta for diffs), [`joint`] (the joint code of sparse 16-bit
//! deltas) and [`safetensors`] (cutting a file into pieces). Everything
//! public is re-exported here.

mod decode;
mod encode;
mod frame;
mod header;
pub mod joint;
mod planes;
mod pool;
pub mod safetensors;
mod stats;

pub use self::decode::{decode_planes, decode_planes_owned};
pub use self::encode::{
    encode_planes, encode_planes_with, high_exceptions, sparse_planes, PlanesOptions, Sparse,
    JOINT_MIN_CHANGES,
};
pub use self::frame::{inflate_frame, inflate_into, planes_compressor};
pub use self::header::{
    PlanesHeader, FLAG_BASE, FLAG_GAPS, FLAG_GOLOMB_ESCAPES, FLAG_HIGH_EXCEPTIONS, FLAG_JOINT,
    FLAG_SPARSE, FLAG_STATS, PLANES_VERSION,
};
pub use self::planes::{join_planes, split_planes};
pub use self::pool::{recycle, take_buffer};
pub use self::safetensors::{parse_layout, pieces, Layout, Piece, PieceKey, TensorInfo};
pub use self::stats::{
    bf16_to_f64, f16_to_f64, piece_stats, stats_len, DeltaStats, FloatKind, FloatStats,
    RecordStats, StatsReading,
};

/// Largest piece (chunk) a safetensors file is cut into.
pub const MAX_PIECE: u64 = 4 << 20;
