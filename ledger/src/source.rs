//! Where file objects are read from: the [`ObjectSource`] trait that every
//! layer of object access implements (the ledger's packs, and in a partial
//! clone the promisor remote below them; [`crate::layers`] stacks them).
//! Kept apart from the layers so that the ledger handle can hold its lower
//! layer as a trait object without depending on the remote code.

use std::io::Write;
use std::sync::atomic::AtomicBool;

use crate::error::Result;
use crate::id::ObjectId;
use crate::progress::Progress;

/// Where file objects can be read from, by id. Small and object-safe, so
/// layers stack as trait objects.
pub trait ObjectSource {
    /// Whether `id` is readable from this source (for a remote layer: the
    /// remote holds it).
    fn has(&self, id: &ObjectId) -> Result<bool>;

    /// Stream the verified bytes of file object `id` to `out`; returns the
    /// byte count.
    fn read_bytes_to(&self, id: &ObjectId, out: &mut dyn Write, cancel: &AtomicBool)
        -> Result<u64>;

    /// Make the file objects `ids` readable in one batch (a remote layer
    /// fetches them in one transfer rather than one by one). Returns how
    /// many had to be obtained.
    fn prefetch(
        &self,
        ids: &[ObjectId],
        progress: &dyn Progress,
        cancel: &AtomicBool,
    ) -> Result<u64>;

    /// Objects this source has obtained from elsewhere so far (a remote
    /// layer's fetches; 0 for a source that only reads what is stored).
    fn fetched(&self) -> u64 {
        0
    }
}
