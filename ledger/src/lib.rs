//! bat-ledger: a domain-free content-addressed store with git-like history.
//!
//! Files are identified by the plain BLAKE3 of their bytes; large files are
//! cut by content-defined chunking into chunk objects plus a chunk list.
//! Trees, commits and chunk lists have canonical binary encodings hashed in
//! BLAKE3 derive-key mode (domain separation). Objects live as zstd records
//! in append-only pack segments located through a SQLite catalog, which also
//! holds refs, HEAD, the reflog and an index of commits and their declared
//! fields. Large safetensors files are cut along their tensors and stored
//! as byte planes, each tensor piece optionally an element-wise XOR delta
//! against the same piece of the previous version ([`delta`]). See
//! `FORMAT.md` for the bytes.
//!
//! The crate does no terminal I/O and reads no environment; long operations
//! report through [`Progress`] and honour a cancellation flag.
//!
//! ```
//! use std::sync::atomic::AtomicBool;
//! use bat_ledger::{CommitRequest, FieldValue, Ledger, NoProgress};
//!
//! let work = tempfile::tempdir()?;
//! let data = work.path().join("data");
//! std::fs::create_dir(&data)?;
//! std::fs::write(data.join("weights.bin"), b"tensor bytes")?;
//!
//! let mut ledger = Ledger::init(work.path())?;
//! let mut req = CommitRequest::new("round 1");
//! req.metadata = serde_json::json!({"free": "form"});
//! req.fields.insert("round".into(), FieldValue::Int(1));
//! let out = ledger.commit_dir(&data, &req, &NoProgress, &AtomicBool::new(false))?;
//!
//! assert_eq!(ledger.resolve("HEAD")?, out.commit);
//! let files = ledger.walk_files(&out.tree)?;
//! assert_eq!(files[0].id.to_string(), blake3::hash(b"tensor bytes").to_hex().as_str());
//! assert_eq!(ledger.read_bytes(&files[0].id)?, b"tensor bytes");
//! assert_eq!(ledger.commits_with_field("round", &FieldValue::Int(1))?, vec![out.commit]);
//! assert!(ledger.fsck(&NoProgress, &AtomicBool::new(false))?.ok());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A [`Ledger`] handle is `Send` but not `Sync`: open one per thread (or
//! process); the catalog serializes writers.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod bulk;
pub mod catalog;
pub mod commit;
pub mod delta;
pub mod error;
pub mod id;
pub mod layers;
pub mod maint;
pub mod object;
pub mod pack;
pub mod policy;
pub mod progress;
pub mod read;
pub mod refs;
pub mod remote;
pub mod source;
pub mod store;
pub mod validate;

pub use catalog::{Location, ObjectRow, FORMAT_VERSION};
pub use commit::{CommitOutcome, CommitRequest, OnMoved, RefMove};
pub use error::{reads_as_code, shows_a_code, Diagnostic, Error, ErrorKind, Result};
pub use id::{CommitId, ObjectId, TreeId};
pub use maint::{FsckReport, GcAutoDue, GcOptions, GcReport, Problem, PrunedFile, Stats};
pub use object::{ChunkList, ChunkRef, Commit, FieldValue, Kind, Mode, RawCommit, Tree, TreeEntry};
pub use policy::{Limits, TreeCheck};
pub use progress::{NoProgress, Progress};
pub use read::{CheckoutStats, FileEntry, History, HistoryCommit};
pub use refs::{Head, ReflogEntry};
pub use remote::promisor::RemoteOpener;
pub use source::ObjectSource;
pub use store::{Ledger, LockMode, Setting, WriteConfig, MAX_DELTA_DEPTH};
