//! A process-wide pool of piece-sized byte buffers, shared by the encoder
//! and decoder.

use super::MAX_PIECE;

/// Byte buffers handed back by readers ([`recycle`]) for the next pieces
/// and payloads. Allocating and freeing a few MiB per piece makes the
/// allocator return the pages to the kernel and fault them in (zeroed)
/// again on the next use, which showed as about a tenth of restore time.
/// Small buffers never come from here, so a small object never holds a
/// piece-sized allocation.
static POOL: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());
/// Most buffers kept in [`POOL`].
const POOL_BUFFERS: usize = 16;
/// Smallest request served from [`POOL`] and smallest buffer kept.
const POOL_MIN: usize = 256 << 10;
/// Largest buffer kept in [`POOL`] (so it holds at most 128 MiB).
const POOL_BUFFER_MAX: usize = 2 * MAX_PIECE as usize;

/// A buffer of `len` bytes for the caller to overwrite completely, reusing
/// a recycled one if `len` is piece-sized and one is free. A recycled
/// buffer keeps its old bytes up to `len` (only what it lacks is zeroed):
/// zero-filling every payload and piece only to overwrite it took 4 % of a
/// restore. Callers never return bytes they did not write.
pub fn take_buffer(len: usize) -> Vec<u8> {
    let mut buf = pooled(len);
    buf.truncate(len);
    buf.resize(len, 0);
    buf
}

/// A buffer for about `len` bytes, holding stale bytes: a recycled one if
/// `len` is piece-sized and one is free, else an empty one.
pub(super) fn pooled(len: usize) -> Vec<u8> {
    if len < POOL_MIN {
        return Vec::new();
    }
    POOL.lock()
        .ok()
        .and_then(|mut p| p.pop())
        .unwrap_or_default()
}

/// Give a buffer that is no longer needed back for [`take_buffer`].
pub fn recycle(buf: Vec<u8>) {
    if buf.capacity() < POOL_MIN || buf.capacity() > POOL_BUFFER_MAX {
        return;
    }
    if let Ok(mut p) = POOL.lock() {
        if p.len() < POOL_BUFFERS {
            p.push(buf);
        }
    }
}
