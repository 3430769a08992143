//! Staging new objects into a pack segment before a commit registers them.

use std::collections::HashSet;
use std::path::PathBuf;

use crate::catalog::StagedRow;
use crate::error::{Error, Result};
use crate::id::ObjectId;
use crate::object::Kind;
use crate::pack::{self, PackWriter, RecordHeader};

use super::*;

/// New objects being written by one process before they are committed to
/// the catalog: a pack segment plus the rows that will reference it.
pub struct Staging {
    pub(crate) pack: Option<PackWriter>,
    pub(crate) rows: Vec<StagedRow>,
    pub(crate) seen: HashSet<ObjectId>,
    compressor: Option<zstd::bulk::Compressor<'static>>,
    level: i32,
    packs_dir: PathBuf,
}

impl Staging {
    pub(crate) fn new(ledger: &Ledger) -> Staging {
        Staging {
            pack: None,
            rows: Vec::new(),
            seen: HashSet::new(),
            compressor: None,
            level: ledger.config.zstd_level,
            packs_dir: ledger.packs_dir(),
        }
    }

    pub(crate) fn pack(&mut self) -> Result<&mut PackWriter> {
        if self.pack.is_none() {
            self.pack = Some(PackWriter::create(&self.packs_dir)?);
        }
        Ok(self.pack.as_mut().expect("just created"))
    }

    /// Append an already-compressed record unless the object is known.
    pub(crate) fn append_record(&mut self, header: &RecordHeader, payload: &[u8]) -> Result<()> {
        self.append_record_with_base(header, payload, None)
    }

    /// Append a record that may be a delta against `base`.
    pub(crate) fn append_record_with_base(
        &mut self,
        header: &RecordHeader,
        payload: &[u8],
        base: Option<ObjectId>,
    ) -> Result<()> {
        if !self.seen.insert(header.id) {
            return Ok(());
        }
        let off = self.pack()?.append(header, payload)?;
        self.rows.push(StagedRow {
            id: header.id,
            kind: header.kind,
            raw_len: header.raw_len,
            packed: Some((off, header.stored_len)),
            chunk_list: None,
            delta_base: base,
        });
        Ok(())
    }

    /// Stage one object from raw bytes (compressing here), deduplicated
    /// against this session and the catalog.
    pub(crate) fn put(&mut self, ledger: &Ledger, kind: Kind, raw: &[u8]) -> Result<ObjectId> {
        let id = kind.id_of(raw);
        if self.seen.contains(&id) || ledger.contains(&id)? {
            return Ok(id);
        }
        if self.compressor.is_none() {
            self.compressor =
                Some(
                    zstd::bulk::Compressor::new(self.level).map_err(|e| Error::InvalidInput {
                        message: format!("zstd level {}: {e}", self.level),
                    })?,
                );
        }
        let (comp, payload) = pack::compress(self.compressor.as_mut().expect("set above"), raw);
        let header = RecordHeader::for_payload(kind, comp, id, raw.len() as u64, &payload);
        self.append_record(&header, &payload)?;
        Ok(id)
    }

    /// Record that file `id` is stored as the chunks of `list`.
    pub(crate) fn put_chunked(&mut self, id: ObjectId, raw_len: u64, list: ObjectId) {
        if self.seen.insert(id) {
            self.rows.push(StagedRow {
                id,
                kind: Kind::Bytes,
                raw_len,
                packed: None,
                chunk_list: Some(list),
                delta_base: None,
            });
        }
    }

    /// fsync the segment (data durable before any catalog reference).
    pub(crate) fn sync(&mut self) -> Result<()> {
        if let Some(p) = self.pack.as_mut() {
            p.sync()?;
        }
        Ok(())
    }

    /// Bytes appended to the pack.
    pub fn pack_len(&self) -> u64 {
        self.pack.as_ref().map(|p| p.len()).unwrap_or(0)
    }
}
