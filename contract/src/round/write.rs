//! The immutable write of §B and the task key of a built row.

use std::path::{Path, PathBuf};

use super::*;
use crate::json::Value;
use crate::task::{self, ContractPack, TaskKey};

/// A failed immutable write.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The target exists with other bytes.
    #[error("refusing to overwrite: {}", path.display())]
    Refusing {
        /// The target file.
        path: PathBuf,
    },
    /// Any I/O failure.
    #[error("cannot write {}: {source}", path.display())]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl bat_error::Diagnostic for WriteError {
    fn kind(&self) -> bat_error::ErrorKind {
        bat_error::ErrorKind::User
    }
}

/// The immutable write of §B: identical bytes are a no-op, different bytes
/// are refused, otherwise temp file + fsync + rename in the same folder.
pub fn write_immutable(path: &Path, content: &[u8]) -> Result<(), WriteError> {
    let io = |source| WriteError::Io {
        path: path.to_path_buf(),
        source,
    };
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io)?;
    match std::fs::read(path) {
        Ok(existing) if existing == content => return Ok(()),
        Ok(_) => {
            return Err(WriteError::Refusing {
                path: path.to_path_buf(),
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    crate::fsutil::write_atomic(path, content).map_err(io)
}

/// The validated identity of a row's extra_info, for callers that need the
/// task contract of a built row.
pub fn row_task_key(k: &ContractPack, row: &Value) -> Result<TaskKey, ViewError> {
    let extra = row
        .get("extra_info")
        .ok_or(ViewError::RowTaskContractInvalid)?;
    Ok(task::validate_extra(k, extra)?)
}
