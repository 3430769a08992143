//! The zstd frames of a planes payload: the compressor tuned for byte
//! planes, and per-thread decompression into reused buffers.

use super::pool::pooled;

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

/// Append a table of frame lengths, then each frame compressed.
pub(super) fn append_frames(
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

thread_local! {
    /// One decompression context per thread: creating one per frame shows
    /// in restore profiles (a piece has up to 9 frames per chain link).
    static DCTX: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
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

/// Inflate `frame` into `buf`, which must come out exactly `len` bytes.
pub(super) fn inflate_checked(
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
