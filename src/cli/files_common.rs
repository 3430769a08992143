//! File helpers shared by the evaluation verbs (`eval`, `gate`, `bind`,
//! `firewall`): resolving an input that must exist, and writing an output
//! that may only be replaced by identical bytes.

use std::path::{Path, PathBuf};

use super::CliError;

/// Python `Path.resolve(strict=True)`: the file must exist.
pub fn resolve_existing(p: &Path) -> Result<PathBuf, CliError> {
    std::fs::canonicalize(p).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            CliError::new(format!(
                "FileNotFoundError: [Errno 2] No such file or directory: '{}'",
                p.display()
            ))
        } else {
            CliError::new(format!("cannot resolve {}: {e}", p.display()))
        }
    })
}

/// Write `bytes` to `path` unless it already holds exactly them; refuse to
/// replace different content (`refusing to overwrite: <path>`). The write
/// goes to a temporary file in the same folder, is synced, then renamed.
pub fn write_refusing_overwrite(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    write_checked(
        path,
        bytes,
        &format!("refusing to overwrite: {}", path.display()),
    )
}

/// [`write_refusing_overwrite`] with a custom refusal message.
pub fn write_checked(path: &Path, bytes: &[u8], refusal: &str) -> Result<(), CliError> {
    match std::fs::read(path) {
        Ok(existing) if existing == bytes => return Ok(()),
        Ok(_) => return Err(CliError::new(refusal.to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(CliError::new(format!(
                "cannot read {}: {e}",
                path.display()
            )))
        }
    }
    bat_contract::fsutil::write_atomic(path, bytes)
        .map_err(|e| CliError::new(format!("cannot write {}: {e}", path.display())))
}
