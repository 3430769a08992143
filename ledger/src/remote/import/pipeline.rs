//! Importing a stream of received batches with two in hand: while one
//! batch is being stored (its segment written and fsynced, then
//! catalogued), the next one's pieces are decoded and hashed
//! ([`Ledger::precheck`]). Storing a batch is mostly waiting for the disk,
//! during which the verifying threads would otherwise sit idle. Each
//! batch is still its own import: verified completely before any of it is
//! stored, and a refused batch stores nothing.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;

use super::{symlink_targets, ImportStats};
use crate::error::{Error, Result};
use crate::object::Kind;
use crate::remote::digest::FileDigests;
use crate::remote::WireObject;
use crate::store::Ledger;

/// Imports the batches of one upload in order, each batch verified while
/// the one before it is stored. It holds at most two batches: the one
/// being stored and the one being verified.
pub struct ImportPipeline {
    dir: PathBuf,
    /// Trees of the chunked files the upload brings: written when a chunk
    /// list arrives (after the batch in flight is stored), read by the
    /// verifying and storing threads.
    digests: Arc<RwLock<FileDigests>>,
    /// The batch being stored, on its own thread.
    storing: Option<JoinHandle<Result<ImportStats>>>,
    totals: ImportStats,
}

impl ImportPipeline {
    /// Import into the ledger at `dir`; each step opens its own handle on
    /// it, so the ledger is open only while a batch is checked or stored.
    pub fn new(dir: &Path) -> ImportPipeline {
        ImportPipeline {
            dir: dir.to_path_buf(),
            digests: Arc::new(RwLock::new(FileDigests::new())),
            storing: None,
            totals: ImportStats::default(),
        }
    }

    /// Note an object as it arrives, before its batch is imported: a chunk
    /// list starts its file's tree (see [`FileDigests::add_received`]),
    /// once the batch being stored is done with the trees.
    pub fn note(&mut self, o: &WireObject) -> Result<()> {
        if o.kind != Kind::ChunkList {
            return Ok(());
        }
        self.wait()?;
        self.digests
            .write()
            .expect("no thread panics holding the file trees")
            .add_received(o);
        Ok(())
    }

    /// Verify `batch`'s pieces here (while the batch before is stored),
    /// then, once that one is stored, start storing this one. An error
    /// of either batch (the one before first) is returned after the batch
    /// before has finished, so nothing is left running.
    pub fn import(&mut self, batch: Vec<WireObject>) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        // A batch naming symlink targets keeps their bytes for the
        // policy's checks, which only the one-thread import does.
        let checked = symlink_targets(&batch).is_empty().then(|| {
            let l = Ledger::open(&self.dir)?;
            let digests = self
                .digests
                .read()
                .expect("no thread panics holding the file trees");
            l.precheck(&batch, Some(&digests))
        });
        // The batch before failing is the first failure of the stream.
        self.wait()?;
        let pre = checked.transpose()?;
        let (dir, digests) = (self.dir.clone(), self.digests.clone());
        self.storing = Some(std::thread::spawn(move || {
            let mut l = Ledger::open(&dir)?;
            let digests = digests
                .read()
                .expect("no thread panics holding the file trees");
            l.import_staged(batch, Some(&digests), pre.as_ref())
        }));
        Ok(())
    }

    /// Wait for the last batch to be stored; what all the batches did.
    pub fn finish(mut self) -> Result<ImportStats> {
        self.wait()?;
        Ok(std::mem::take(&mut self.totals))
    }

    /// Wait for the batch being stored, if any, and count it.
    fn wait(&mut self) -> Result<()> {
        let Some(h) = self.storing.take() else {
            return Ok(());
        };
        let s = h.join().unwrap_or_else(|_| {
            Err(Error::InvalidInput {
                message: "the thread storing a received batch panicked".into(),
            })
        })?;
        let t = &mut self.totals;
        t.received += s.received;
        t.stored += s.stored;
        t.skipped += s.skipped;
        t.payload_bytes += s.payload_bytes;
        t.absent += s.absent;
        Ok(())
    }
}

impl Drop for ImportPipeline {
    /// A pipeline dropped on an error elsewhere still lets the batch in
    /// flight finish (it is a complete, verified import either way).
    fn drop(&mut self) {
        if let Some(h) = self.storing.take() {
            let _ = h.join();
        }
    }
}
