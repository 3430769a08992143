//! Object access as layers. Every read of a file's bytes goes through an
//! [`ObjectSource`]: the ledger's own packs ([`Packs`]) answer first; in a
//! partial clone a promisor layer ([`crate::remote::promisor`]) sits below
//! them and, on a miss, fetches the object from the promisor remote through
//! a caller-given [`crate::remote::promisor::RemoteOpener`], verifies and
//! stores it, then reads it back from the packs. [`Layers`] stacks the two;
//! [`Ledger::objects`] hands it out and the ledger's own readers
//! ([`Ledger::read_bytes_to`], [`Ledger::checkout`]) use it, so no caller
//! fetches promised files by hand.

use std::io::Write;
use std::sync::atomic::AtomicBool;

use crate::error::Result;
use crate::id::{ObjectId, TreeId};
use crate::progress::Progress;
use crate::remote::transfer::PathFilter;
use crate::source::ObjectSource;
use crate::store::Ledger;

/// The ledger's packs: objects stored locally, nothing else.
#[derive(Debug, Clone, Copy)]
pub struct Packs<'a> {
    ledger: &'a Ledger,
}

impl ObjectSource for Packs<'_> {
    fn has(&self, id: &ObjectId) -> Result<bool> {
        self.ledger.contains(id)
    }

    fn read_bytes_to(
        &self,
        id: &ObjectId,
        out: &mut dyn Write,
        cancel: &AtomicBool,
    ) -> Result<u64> {
        self.ledger.read_stored_bytes_to(id, out, cancel)
    }

    fn prefetch(
        &self,
        ids: &[ObjectId],
        _progress: &dyn Progress,
        _cancel: &AtomicBool,
    ) -> Result<u64> {
        // The packs cannot obtain anything: a missing id is an error.
        for id in ids {
            if !self.ledger.contains(id)? {
                return Err(self.ledger.missing(id));
            }
        }
        Ok(0)
    }
}

/// The packs, then (in a partial clone whose caller gave a remote opener)
/// the promisor remote.
pub struct Layers<'a> {
    packs: Packs<'a>,
    promisor: Option<&'a dyn ObjectSource>,
}

impl std::fmt::Debug for Layers<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Layers")
            .field("promisor", &self.promisor.is_some())
            .finish()
    }
}

impl Layers<'_> {
    /// The layer below the packs, if this ledger has one.
    fn lower(&self) -> Option<&dyn ObjectSource> {
        self.promisor
    }
}

impl ObjectSource for Layers<'_> {
    fn has(&self, id: &ObjectId) -> Result<bool> {
        if self.packs.has(id)? {
            return Ok(true);
        }
        match self.lower() {
            Some(l) => l.has(id),
            None => Ok(false),
        }
    }

    fn read_bytes_to(
        &self,
        id: &ObjectId,
        out: &mut dyn Write,
        cancel: &AtomicBool,
    ) -> Result<u64> {
        match self.lower() {
            Some(l) if !self.packs.has(id)? => l.read_bytes_to(id, out, cancel),
            _ => self.packs.read_bytes_to(id, out, cancel),
        }
    }

    fn prefetch(
        &self,
        ids: &[ObjectId],
        progress: &dyn Progress,
        cancel: &AtomicBool,
    ) -> Result<u64> {
        let mut missing = Vec::new();
        for id in ids {
            if !self.packs.has(id)? && !missing.contains(id) {
                missing.push(*id);
            }
        }
        match (missing.is_empty(), self.lower()) {
            (true, _) => Ok(0),
            (false, Some(l)) => l.prefetch(&missing, progress, cancel),
            (false, None) => Err(self.packs.ledger.missing(&missing[0])),
        }
    }
}

impl Ledger {
    /// Stream a bytes object (file contents) to `out`, verifying every chunk
    /// before it is written and the whole-file digest at the end. Reads
    /// through every layer ([`Ledger::objects`]): in a partial clone with a
    /// remote opener, a promised file is fetched first. Returns the byte
    /// count.
    pub fn read_bytes_to(
        &self,
        id: &ObjectId,
        out: &mut dyn Write,
        cancel: &AtomicBool,
    ) -> Result<u64> {
        self.objects().read_bytes_to(id, out, cancel)
    }

    /// The packs alone (no fetching): for maintenance, which must see
    /// exactly what is stored.
    pub fn packs(&self) -> Packs<'_> {
        Packs { ledger: self }
    }

    /// Every layer this handle reads through: the packs, then the promisor
    /// remote when this is a partial clone and a remote opener was given
    /// ([`Ledger::set_remote_opener`]).
    pub fn objects(&self) -> Layers<'_> {
        Layers {
            packs: self.packs(),
            promisor: self.promisor_layer(),
        }
    }

    /// Make the files below `tree` (those `select` accepts, by path)
    /// readable in one batch: in a partial clone with a promisor layer the
    /// missing ones are fetched in one transfer, verified on arrival.
    /// Returns how many were fetched; 0 (and no tree walk) without a
    /// promisor layer, where a missing file stays an error of the read.
    pub fn prefetch_tree(
        &self,
        tree: &TreeId,
        select: Option<&PathFilter>,
        progress: &dyn Progress,
        cancel: &AtomicBool,
    ) -> Result<u64> {
        if self.promisor_layer().is_none() {
            return Ok(0);
        }
        let mut ids = Vec::new();
        for f in self.walk_files(tree)? {
            if select.is_none_or(|s| s(&f.path, &f.tree_entry())) {
                ids.push(f.id);
            }
        }
        self.objects().prefetch(&ids, progress, cancel)
    }
}
