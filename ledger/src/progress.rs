//! Progress reporting and cancellation for long operations. The library never
//! draws anything itself; the caller renders.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Error, Result};

/// Receives progress of a long operation. Implementations must be cheap and
/// thread-safe: `inc` may be called from worker threads.
pub trait Progress: Sync {
    /// A phase starts; `total` is in the phase's unit (bytes or items) if known.
    fn start(&self, label: &str, total: Option<u64>);
    /// `n` more units are done.
    fn inc(&self, n: u64);
    /// The phase is over.
    fn finish(&self);
}

/// A `Progress` that ignores everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn start(&self, _label: &str, _total: Option<u64>) {}
    fn inc(&self, _n: u64) {}
    fn finish(&self) {}
}

/// Return `Error::Cancelled` when the flag is set. Checked between chunks so
/// cancellation is prompt but never leaves a half-written record referenced.
pub fn check_cancel(flag: &AtomicBool) -> Result<()> {
    if flag.load(Ordering::Relaxed) {
        Err(Error::Cancelled)
    } else {
        Ok(())
    }
}
