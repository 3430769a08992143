//! Durable file writes, shared by every module that writes results.

use std::io::Write;
use std::path::Path;

/// Write `bytes` to `path` so that a crash leaves either the old file or the
/// new one: a temporary sibling is written and fsynced, renamed over `path`,
/// and the directory is fsynced. Missing parent directories are created.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".bat-tmp-")
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    // Persisting the rename is best effort: not every platform lets a
    // directory be opened for syncing, and the data itself is already safe.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}
