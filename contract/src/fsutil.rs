//! Durable file writes, shared by every module that writes results.

use std::io::Write;
use std::path::Path;

/// Write `bytes` to `path` so that a crash leaves either the old file or the
/// new one: a temporary sibling is written and fsynced, renamed over `path`,
/// and the directory is fsynced. Missing parent directories are created.
/// The file gets the mode any new file gets (0666 less the umask, as with
/// `std::fs::write`): reports, exports and checkpoints are for sharing.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic_mode(path, bytes, 0o666)
}

/// [`write_atomic`] for a file only its owner may read (mode 0600): private
/// raw evaluation rows.
pub fn write_atomic_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic_mode(path, bytes, 0o600)
}

fn write_atomic_mode(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    // The kernel applies the umask to the mode a file is created with.
    let mut tmp = tempfile::Builder::new()
        .prefix(".bat-tmp-")
        .permissions(std::fs::Permissions::from_mode(mode))
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

/// Largest JSON (or JSONL) input bat reads: contract files are kilobytes to
/// a few hundred megabytes of raw evaluation rows; anything larger is
/// refused before it is read, so `/dev/zero` or a runaway file cannot
/// exhaust memory.
pub const MAX_JSON_INPUT: u64 = 512 << 20;

/// Read a whole file of at most `max` bytes; a longer (or endless) input is
/// an `InvalidData` error after reading `max + 1` bytes at most.
pub fn read_capped(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let f = std::fs::File::open(path)?;
    let hint = f.metadata().map(|m| m.len()).unwrap_or(0).min(max);
    read_capped_from(f, max, hint)
}

/// [`read_capped`] for any stream (stdin, a pipe): at most `max` bytes,
/// `hint` of them reserved up front.
pub fn read_capped_from(r: impl std::io::Read, max: u64, hint: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut out = Vec::with_capacity(hint.min(max) as usize);
    r.take(max + 1).read_to_end(&mut out)?;
    if out.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {}, the limit for this input", human_size(max)),
        ));
    }
    Ok(out)
}

/// `512 MiB` (536870912 bytes): a limit as a person reads it, exact.
fn human_size(n: u64) -> String {
    for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if n >= 1 << shift && n % (1 << shift) == 0 {
            return format!("{} {unit} ({n} bytes)", n >> shift);
        }
    }
    format!("{n} bytes")
}

/// [`read_capped_from`] on stdin with the JSON limit.
pub fn read_json_stdin() -> std::io::Result<Vec<u8>> {
    read_capped_from(std::io::stdin().lock(), MAX_JSON_INPUT, 0)
}

/// [`read_capped`] with the JSON limit.
pub fn read_json_input(path: &Path) -> std::io::Result<Vec<u8>> {
    read_capped(path, MAX_JSON_INPUT)
}
