//! TEMPORARY stand-in for `bat_ledger::remote` until the transfer core is
//! merged (the interface the lead fixed). Removed at that merge.
#![allow(missing_docs)]

use bat_ledger::{CommitId, Kind, ObjectId};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireObject {
    pub id: ObjectId,
    pub kind: Kind,
    pub raw_len: u64,
    pub body: WireBody,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireBody {
    Record {
        compression: u8,
        payload: Vec<u8>,
    },
    Delta {
        base: ObjectId,
        compression: u8,
        payload: Vec<u8>,
    },
    Chunked {
        list: ObjectId,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("{name}: not a fast-forward (use --force to overwrite)")]
    NonFastForward { name: String },
    #[error("{name} moved on the remote: pull first")]
    RefMoved { name: String },
    #[error("unauthorized: {reason}")]
    Unauthorized { reason: String },
    #[error("not found: {what}")]
    NotFound { what: String },
    #[error("object {id} is corrupt: {reason}")]
    Corrupt { id: ObjectId, reason: String },
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    #[error("protocol error: {reason}")]
    Protocol { reason: String },
    #[error("limit exceeded: {what}")]
    LimitExceeded { what: String },
}

pub trait Remote: Send {
    fn url(&self) -> String;
    fn list_refs(&mut self) -> Result<Vec<(String, CommitId)>, RemoteError>;
    fn has(&mut self, ids: &[ObjectId]) -> Result<Vec<bool>, RemoteError>;
    fn get(
        &mut self,
        ids: &[ObjectId],
        sink: &mut dyn FnMut(WireObject) -> Result<(), RemoteError>,
    ) -> Result<(), RemoteError>;
    fn put(
        &mut self,
        objects: &mut dyn Iterator<Item = Result<WireObject, RemoteError>>,
    ) -> Result<(), RemoteError>;
    fn update_ref(
        &mut self,
        name: &str,
        expected: Option<CommitId>,
        new: CommitId,
        force: bool,
    ) -> Result<(), RemoteError>;
}
