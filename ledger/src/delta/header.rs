//! The header of a planes payload: version, element width, flags, base id,
//! changed-element count and the table of frame lengths (FORMAT.md §12.3),
//! and the format constants the encoder and decoder share.

use super::joint;
use super::stats::{stats_len, DeltaStats, StatsReading};
use crate::id::ObjectId;

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

/// Flag bit (only with [`FLAG_BASE`]): a statistics section
/// ([`DeltaStats`]) follows the base id and changed-element count: the
/// changes summarised for a diff that reads no planes (FORMAT.md §12.3.3).
/// Written with every delta since 2026-12-05. Byte 3 of the header, zero
/// without this flag, then says which readings the section holds
/// ([`StatsReading::code`]; since 2026-12-05 too, zero before it).
pub const FLAG_STATS: u8 = 64;

/// Gap byte that skips [`GAP_SKIP`] unchanged elements without a change.
pub(super) const GAP_SKIP: u8 = 255;

/// A decoded planes payload header.
#[derive(Debug, Clone, PartialEq)]
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
    /// The delta's change statistics ([`FLAG_STATS`]).
    pub stats: Option<DeltaStats>,
}

impl PlanesHeader {
    /// Length of the encoded header.
    pub fn encoded_len(&self) -> usize {
        4 + if self.base.is_some() { 32 } else { 0 }
            + if self.sparse_count.is_some() { 4 } else { 0 }
            + self
                .stats
                .as_ref()
                .map_or(0, |s| stats_len(self.width, s.reading))
            + 4 * self.plane_lens.len()
    }

    /// Parse the header at the start of `payload`.
    pub fn decode(payload: &[u8]) -> std::result::Result<PlanesHeader, String> {
        let (mut h, mut at) = PlanesHeader::decode_prefix(payload)?;
        let frames = if h.joint {
            1
        } else {
            usize::from(h.width) + usize::from(h.sparse_count.is_some())
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
        h.plane_lens = plane_lens;
        Ok(h)
    }

    /// Parse the fixed part of the header at the start of `payload` (which
    /// may be only a prefix of the payload): everything up to the plane
    /// table, which is left empty; with where the table starts.
    pub fn decode_prefix(payload: &[u8]) -> std::result::Result<(PlanesHeader, usize), String> {
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
            | FLAG_GOLOMB_ESCAPES
            | FLAG_STATS;
        if flags & !known != 0
            || (golomb && !joint)
            || (high_exceptions && (flags & FLAG_GAPS == 0 || joint || width != 2))
            || (flags & FLAG_SPARSE != 0 && flags & FLAG_BASE == 0)
            || (flags & FLAG_STATS != 0 && flags & FLAG_BASE == 0)
            || (flags & FLAG_GAPS != 0 && flags & FLAG_SPARSE == 0)
            || (joint && (flags & FLAG_GAPS == 0 || width != 2))
            || (flags & FLAG_STATS == 0 && payload[3] != 0)
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
        let stats = if flags & FLAG_STATS != 0 {
            let reading = StatsReading::from_code(payload[3], width)?;
            let s = DeltaStats::decode(payload.get(at..).unwrap_or(&[]), width, reading)?;
            if sparse_count.is_some_and(|c| u64::from(c) != s.changed) {
                return Err(
                    "planes payload statistics disagree with its changed-element count".into(),
                );
            }
            at += stats_len(width, reading);
            Some(s)
        } else {
            None
        };
        let h = PlanesHeader {
            width,
            base,
            sparse_count,
            plane_lens: Vec::new(),
            joint,
            escapes: if golomb {
                joint::Escapes::Golomb
            } else {
                joint::Escapes::Raw16
            },
            high_exceptions,
            stats,
        };
        Ok((h, at))
    }
}
