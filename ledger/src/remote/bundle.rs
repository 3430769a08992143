//! Bundles: one self-verifying file holding refs and every object they
//! reach (PROTOCOL.md §6), for attaching a campaign to a paper. A bundle
//! is also a read-only [`Remote`], so cloning or fetching from one uses the
//! same verified transfer path as any other remote.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use serde::Serialize;

use super::transfer::{fetch_objects, send_plan};
use super::wire::{self, WireReader, WireWriter, FRAME_HEADER_LEN};
use super::{check_wire_ref_name, Remote, RemoteError, WireObject};
use crate::id::{CommitId, ObjectId};
use crate::progress::{NoProgress, Progress};
use crate::store::Ledger;

/// First 8 bytes of a bundle.
pub const BUNDLE_MAGIC: &[u8; 8] = b"BATBNDL\0";
/// Bundle format version: 2 when the bundle carries absent entries (files
/// pruned where it was made, PROTOCOL.md §6), else 1, so a bundle without
/// them stays readable by readers that know only version 1.
pub const BUNDLE_VERSION: u32 = 2;
/// The version of a bundle without absent entries.
pub const BUNDLE_VERSION_PLAIN: u32 = 1;
/// Most refs a bundle may carry.
pub const MAX_BUNDLE_REFS: u32 = 100_000;
/// Longest ref name in a bundle.
pub const MAX_REF_NAME: u16 = 1024;

/// What a bundle holds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BundleSummary {
    /// Its refs (full names).
    pub refs: Vec<(String, CommitId)>,
    /// Objects in its stream.
    pub objects: u64,
    /// Sum of their payload bytes.
    pub payload_bytes: u64,
    /// Files it carries as absent (pruned where it was made): recorded as
    /// pruned by whoever clones it, restorable from a remote that has them.
    pub absent: u64,
    /// Size of the file.
    pub file_bytes: u64,
}

/// A writer that hashes everything it passes on.
struct Hashing<W: Write> {
    inner: W,
    hasher: blake3::Hasher,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Write a bundle of `refs` (full names → commits) and everything they
/// reach to `path` (temporary file, fsync, rename). Only objects reachable
/// from the refs are written: nothing else of the ledger (and never its
/// private area) is read.
pub fn create_bundle(
    local: &Ledger,
    path: &Path,
    refs: &[(String, CommitId)],
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<BundleSummary, RemoteError> {
    if refs.is_empty() {
        return Err(RemoteError::Protocol {
            reason: "a bundle needs at least one ref".into(),
        });
    }
    for (n, _) in refs {
        check_wire_ref_name(n)?;
        if n.len() > usize::from(MAX_REF_NAME) {
            return Err(RemoteError::LimitExceeded {
                what: format!("ref name {n:?} is longer than {MAX_REF_NAME} bytes"),
            });
        }
    }
    let tips: Vec<CommitId> = refs.iter().map(|r| r.1).collect();
    let plan = send_plan(local, &tips, &mut |ids| Ok(vec![false; ids.len()]), cancel)?;
    // Files pruned here go in as absent entries (and make it a version 2
    // bundle).
    let mut absent = 0u64;
    for id in &plan {
        if !local.contains(id)? {
            absent += 1;
        }
    }
    let version = if absent > 0 {
        BUNDLE_VERSION
    } else {
        BUNDLE_VERSION_PLAIN
    };
    let abs = std::path::absolute(path).map_err(RemoteError::io("resolve", path))?;
    let parent = abs.parent().unwrap_or(Path::new("/")).to_path_buf();
    let tmp = tempfile::Builder::new()
        .prefix(".bat-bundle-")
        .tempfile_in(&parent)
        .map_err(RemoteError::io("create temporary file in", &parent))?;
    let werr = RemoteError::io("write", tmp.path());
    let mut out = Hashing {
        inner: BufWriter::with_capacity(4 << 20, tmp.as_file()),
        hasher: blake3::Hasher::new(),
    };
    let mut head = Vec::new();
    head.extend_from_slice(BUNDLE_MAGIC);
    head.extend_from_slice(&version.to_le_bytes());
    head.extend_from_slice(&(refs.len() as u32).to_le_bytes());
    for (n, c) in refs {
        head.extend_from_slice(&(n.len() as u16).to_le_bytes());
        head.extend_from_slice(n.as_bytes());
        head.extend_from_slice(c.0.as_bytes());
    }
    out.write_all(&head).map_err(werr)?;
    let mut w = WireWriter::new(out).map_err(RemoteError::io("write", tmp.path()))?;
    let mut payload = 0u64;
    progress.start("writing bundle", Some(plan.len() as u64));
    for id in &plan {
        super::transfer_cancelled(cancel)?;
        let o = local.export_wire_or_absent(id)?;
        payload += o.payload_len();
        w.write(&o).map_err(RemoteError::io("write", tmp.path()))?;
        progress.inc(1);
    }
    progress.finish();
    let objects = w.count();
    let mut out = w.finish().map_err(RemoteError::io("write", tmp.path()))?;
    let sum = *out.hasher.finalize().as_bytes();
    out.inner
        .write_all(&sum)
        .map_err(RemoteError::io("write", tmp.path()))?;
    out.inner
        .flush()
        .map_err(RemoteError::io("write", tmp.path()))?;
    drop(out);
    tmp.as_file()
        .sync_all()
        .map_err(RemoteError::io("fsync", tmp.path()))?;
    let file_bytes = tmp
        .as_file()
        .metadata()
        .map_err(RemoteError::io("stat", tmp.path()))?
        .len();
    tmp.persist(&abs).map_err(|e| RemoteError::Io {
        op: "rename into place",
        path: abs.clone(),
        source: e.error,
    })?;
    crate::pack::sync_dir(&parent)?;
    Ok(BundleSummary {
        refs: refs.to_vec(),
        objects,
        payload_bytes: payload,
        absent,
        file_bytes,
    })
}

/// An opened, checksum-verified bundle (a read-only remote).
#[derive(Debug)]
pub struct Bundle {
    path: PathBuf,
    file: File,
    refs: Vec<(String, CommitId)>,
    /// Objects with their bytes → frame offset.
    index: HashMap<ObjectId, u64>,
    /// Absent entries → frame offset (sent when asked for, never "had").
    absent: HashMap<ObjectId, u64>,
    summary: BundleSummary,
}

fn proto(reason: impl Into<String>) -> RemoteError {
    RemoteError::Protocol {
        reason: reason.into(),
    }
}

fn read_exact(r: &mut impl Read, buf: &mut [u8], what: &str) -> Result<(), RemoteError> {
    r.read_exact(buf)
        .map_err(|_| proto(format!("bundle truncated in {what}")))
}

impl Bundle {
    /// True when `path` starts with the bundle magic.
    pub fn sniff(path: &Path) -> bool {
        let mut m = [0u8; 8];
        File::open(path)
            .and_then(|mut f| f.read_exact(&mut m))
            .is_ok()
            && &m == BUNDLE_MAGIC
    }

    /// Open a bundle: the trailing BLAKE3 is checked over the whole file
    /// first (so any damaged or truncated byte is an error before anything
    /// is parsed), then the header, refs and every frame header are parsed
    /// with the wire limits and the objects indexed.
    pub fn open(path: &Path) -> Result<Bundle, RemoteError> {
        let file = File::open(path).map_err(RemoteError::io("open", path))?;
        let len = file
            .metadata()
            .map_err(RemoteError::io("stat", path))?
            .len();
        if len < 16 + 32 {
            return Err(proto("bundle truncated (shorter than its header)"));
        }
        let mut head = [0u8; 8];
        read_exact(&mut &file, &mut head, "its magic")?;
        if &head != BUNDLE_MAGIC {
            return Err(proto("not a bat bundle (bad magic)"));
        }
        (&file)
            .seek(SeekFrom::Start(0))
            .map_err(RemoteError::io("seek", path))?;
        let mut h = blake3::Hasher::new();
        let mut r = BufReader::with_capacity(4 << 20, (&file).take(len - 32));
        std::io::copy(&mut r, &mut h).map_err(RemoteError::io("read", path))?;
        let mut trailer = [0u8; 32];
        (&file)
            .read_exact(&mut trailer)
            .map_err(RemoteError::io("read", path))?;
        if *h.finalize().as_bytes() != trailer {
            return Err(proto(
                "bundle checksum mismatch (the file is damaged or truncated)",
            ));
        }
        (&file)
            .seek(SeekFrom::Start(0))
            .map_err(RemoteError::io("seek", path))?;
        let mut r = BufReader::with_capacity(1 << 20, (&file).take(len - 32));
        let mut fixed = [0u8; 16];
        read_exact(&mut r, &mut fixed, "its header")?;
        let v = u32::from_le_bytes(fixed[8..12].try_into().expect("4 bytes"));
        if v != BUNDLE_VERSION && v != BUNDLE_VERSION_PLAIN {
            return Err(proto(format!(
                "unsupported bundle version {v} (this bat reads versions {BUNDLE_VERSION_PLAIN} and {BUNDLE_VERSION}); upgrade bat"
            )));
        }
        let n = u32::from_le_bytes(fixed[12..16].try_into().expect("4 bytes"));
        if n == 0 || n > MAX_BUNDLE_REFS {
            return Err(RemoteError::LimitExceeded {
                what: format!("bundle declares {n} refs (1..={MAX_BUNDLE_REFS})"),
            });
        }
        let mut at = 16u64;
        let mut refs = Vec::new();
        for _ in 0..n {
            let mut l = [0u8; 2];
            read_exact(&mut r, &mut l, "a ref")?;
            let l = u16::from_le_bytes(l);
            if l == 0 || l > MAX_REF_NAME {
                return Err(RemoteError::LimitExceeded {
                    what: format!("ref name of {l} bytes (1..={MAX_REF_NAME})"),
                });
            }
            let mut name = vec![0u8; usize::from(l)];
            read_exact(&mut r, &mut name, "a ref name")?;
            let name = String::from_utf8(name).map_err(|_| proto("ref name is not UTF-8"))?;
            check_wire_ref_name(&name)?;
            // One value per name (HEAD included): two would make which one
            // a clone adopts depend on reading order.
            if refs.iter().any(|(n, _): &(String, CommitId)| *n == name) {
                return Err(proto(format!("ref {name} appears twice in the bundle")));
            }
            let mut id = [0u8; 32];
            read_exact(&mut r, &mut id, "a ref target")?;
            refs.push((name, CommitId(ObjectId(id))));
            at += 2 + u64::from(l) + 32;
        }
        let mut wr = WireReader::new(r)?;
        let mut index = HashMap::new();
        let mut absent = HashMap::new();
        let mut payload = 0u64;
        loop {
            let off = at + wr.bytes();
            match wr.next_object()? {
                Some(o) if o.is_absent() => {
                    if v == BUNDLE_VERSION_PLAIN {
                        return Err(proto(format!(
                            "object {}: a version {v} bundle cannot carry absent entries",
                            o.id
                        )));
                    }
                    absent.entry(o.id).or_insert(off);
                }
                Some(o) => {
                    payload += o.payload_len();
                    index.entry(o.id).or_insert(off);
                }
                None => break,
            }
        }
        absent.retain(|id, _| !index.contains_key(id));
        let objects = index.len() as u64;
        if at + wr.bytes() != len - 32 {
            return Err(proto("trailing bytes after the bundle's object stream"));
        }
        let summary = BundleSummary {
            refs: refs.clone(),
            objects,
            payload_bytes: payload,
            absent: absent.len() as u64,
            file_bytes: len,
        };
        Ok(Bundle {
            path: path.to_path_buf(),
            file,
            refs,
            index,
            absent,
            summary,
        })
    }

    /// What the bundle holds.
    pub fn summary(&self) -> &BundleSummary {
        &self.summary
    }

    fn read_at(&self, off: u64) -> Result<WireObject, RemoteError> {
        let mut f = &self.file;
        f.seek(SeekFrom::Start(off))
            .map_err(RemoteError::io("seek", &self.path))?;
        let mut h = [0u8; FRAME_HEADER_LEN];
        read_exact(&mut f, &mut h, "a frame header")?;
        let fh = wire::decode_frame_header(&h)?;
        let mut payload = vec![0u8; fh.payload_len as usize];
        read_exact(&mut f, &mut payload, "a payload")?;
        fh.into_object(payload)
    }
}

impl Remote for Bundle {
    fn url(&self) -> String {
        self.path.display().to_string()
    }

    fn list_refs(&mut self) -> Result<Vec<(String, CommitId)>, RemoteError> {
        Ok(self.refs.clone())
    }

    fn has(&mut self, ids: &[ObjectId]) -> Result<Vec<bool>, RemoteError> {
        Ok(ids.iter().map(|i| self.index.contains_key(i)).collect())
    }

    fn get(
        &mut self,
        ids: &[ObjectId],
        sink: &mut dyn FnMut(WireObject) -> Result<(), RemoteError>,
    ) -> Result<(), RemoteError> {
        // In stream order: the bundle was written bottom-up.
        let mut offs = Vec::with_capacity(ids.len());
        for id in ids {
            let off = self
                .index
                .get(id)
                .or_else(|| self.absent.get(id))
                .ok_or_else(|| RemoteError::MissingObject {
                    url: self.url(),
                    id: *id,
                })?;
            offs.push(*off);
        }
        offs.sort_unstable();
        offs.dedup();
        for off in offs {
            let o = self.read_at(off)?;
            sink(o)?;
        }
        Ok(())
    }

    fn put(
        &mut self,
        _objects: &mut dyn Iterator<Item = Result<WireObject, RemoteError>>,
    ) -> Result<(), RemoteError> {
        Err(RemoteError::Unsupported {
            url: self.url(),
            reason: "a bundle is read-only".into(),
        })
    }

    fn update_ref(
        &mut self,
        _name: &str,
        _expected: Option<CommitId>,
        _new: CommitId,
        _force: bool,
    ) -> Result<(), RemoteError> {
        Err(RemoteError::Unsupported {
            url: self.url(),
            reason: "a bundle is read-only".into(),
        })
    }
}

/// Verify a bundle completely: its checksums and framing, then every
/// object (imported into a scratch ledger created in `scratch`, an empty
/// or new directory), and that every ref's whole closure is inside; the
/// scratch ledger must then pass fsck.
pub fn verify_bundle(
    path: &Path,
    scratch: &Path,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<BundleSummary, RemoteError> {
    let mut b = Bundle::open(path)?;
    let mut l = Ledger::init(scratch)?;
    let tips: Vec<CommitId> = b.refs.iter().map(|r| r.1).collect();
    fetch_objects(&mut l, &mut b, &tips, None, progress, cancel)?;
    for (n, c) in &b.refs {
        if n == "HEAD" {
            continue;
        }
        l.update_ref(n, None, Some(*c), "bundle verify")?;
    }
    let rep = l.fsck(&NoProgress, cancel)?;
    if let Some(p) = rep.problems.first() {
        return Err(proto(format!("bundle content fails fsck: {p}")));
    }
    Ok(b.summary.clone())
}
