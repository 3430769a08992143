//! Scanning the directory to record: which files, in what order, and
//! which symlinks may be recorded.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::error::{io_err, Error, Result};
use crate::read::check_symlink;
use crate::store::LEDGER_DIR;

/// The scanned directory: a tree of nodes whose files get ids later.
pub(super) enum Node {
    File { slot: usize, exec: bool },
    Symlink { target: Vec<u8> },
    Dir(Vec<(String, Node)>),
}

/// A regular file found by the scan, as it was then.
pub(super) struct ScannedFile {
    pub(super) path: PathBuf,
    pub(super) size: u64,
    /// Modification time seen by the scan: a file whose length or mtime
    /// differs after reading changed while being recorded.
    pub(super) mtime: Option<std::time::SystemTime>,
}

/// Scan `dir` (inside `root`) into a tree of nodes, appending its regular
/// files to `files` (a node's slot is its index there).
pub(super) fn scan(root: &Path, dir: &Path, files: &mut Vec<ScannedFile>) -> Result<Node> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let rd = std::fs::read_dir(dir).map_err(io_err("read directory", dir))?;
    let mut names = Vec::new();
    for e in rd {
        let e = e.map_err(io_err("read directory", dir))?;
        names.push(e.file_name());
    }
    names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    let mut out = Vec::with_capacity(names.len());
    for os in names {
        let path = dir.join(&os);
        let name = os.to_str().ok_or_else(|| Error::InvalidName {
            path: path.clone(),
            reason: "file name is not valid UTF-8".into(),
        })?;
        if name == LEDGER_DIR {
            continue; // a ledger inside the committed directory is never recorded
        }
        crate::object::validate_name(name).map_err(|reason| Error::InvalidName {
            path: path.clone(),
            reason,
        })?;
        // The policy's position limits (crate::policy), so nothing is
        // recorded that checkout or an import would refuse.
        let limits = crate::policy::Limits::default();
        let rel = path.strip_prefix(root).unwrap_or(&path);
        if rel.components().count() as u64 > u64::from(limits.max_depth)
            || rel.as_os_str().len() as u64 > u64::from(limits.max_path_bytes)
        {
            return Err(Error::InvalidName {
                path: path.clone(),
                reason: format!(
                    "the path is deeper than {} levels or longer than {} bytes, bat's limits",
                    limits.max_depth, limits.max_path_bytes
                ),
            });
        }
        let md = std::fs::symlink_metadata(&path).map_err(io_err("stat", &path))?;
        let ft = md.file_type();
        let node = if ft.is_symlink() {
            let target = std::fs::read_link(&path).map_err(io_err("read symlink", &path))?;
            check_symlink(root, &path, &target)?;
            Node::Symlink {
                target: target.as_os_str().as_bytes().to_vec(),
            }
        } else if ft.is_dir() {
            scan(root, &path, files)?
        } else if ft.is_file() {
            // Open now so unreadable files fail before anything is written.
            File::open(&path).map_err(io_err("open", &path))?;
            files.push(ScannedFile {
                path: path.clone(),
                size: md.len(),
                mtime: md.modified().ok(),
            });
            Node::File {
                slot: files.len() - 1,
                exec: md.permissions().mode() & 0o111 != 0,
            }
        } else {
            let kind = if ft.is_fifo() {
                "a FIFO"
            } else if ft.is_socket() {
                "a socket"
            } else if ft.is_block_device() || ft.is_char_device() {
                "a device"
            } else {
                "an unknown file type"
            };
            return Err(Error::UnsupportedFileType { path, kind });
        };
        out.push((name.to_string(), node));
    }
    Ok(Node::Dir(out))
}
